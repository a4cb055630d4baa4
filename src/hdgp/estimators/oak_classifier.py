r"""``OAKClassifier``: orthogonal additive GP classification (Bernoulli SVGP) with Sobol indices.

The latent function of :class:`~hdgp.estimators.classifier.GPClassifier` gets the
OAK kernel :math:`k = \sum_r \sigma_r^2 e_r(\tilde k_1, \dots, \tilde k_D)` with
the input handling of :class:`~hdgp.estimators.oak.OAKRegressor` (normalising
flow for continuous features, constrained binary/categorical kernels, Gamma prior
on the order variances, entering the ELBO as a MAP term). The OAK paper fits
its classification experiments the same way (Lu et al. 2022, appendix H step 2c:
variational inference with 200 inducing points).

The latent posterior mean is :math:`c + K_{*u}\alpha_u`, so the Sobol index of
term :math:`u` of the *latent* function is OAK eq. 14 with the inducing inputs
in place of the training inputs (the "similar formula for sparse GP"):

.. math:: R_u = \sigma_{|u|}^4\, \alpha_u^\top \Big(\odot_{i\in u} L_i(Z)\Big) \alpha_u.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from .. import explain
from ..presets import register_preset
from ._input_summary import summarize_inputs
from .classifier import GPClassifier
from .oak import OAKRegressor

__all__ = ["OAKClassifier"]

#: Default highest interaction order: the OAK paper's choice for its classification
#: experiments (Lu et al. 2022, Sec. 5.1: "for classification problems, we set D̃ = 4").
#: Every SVGP step evaluates the kernel, so its cost (O(D·R) elementwise passes) counts
#: once per step, not once per fit as in exact regression.
DEFAULT_MAX_ORDER = 4


class OAKClassifier(GPClassifier):
    r"""Orthogonal additive GP classifier (probit SVGP) with Sobol indices of the latent function.

    Parameters
    ----------
    max_order : int or None, default=None
        Highest interaction order; None means :math:`\min(D, 4)`, the paper's choice
        for classification (:data:`DEFAULT_MAX_ORDER`).
    measure, gmm_components, flow, log_transform, clip_inputs, categorical_features, binary_features, order_variance_prior, max_sobol_terms
        Input handling and kernel as in :class:`~hdgp.estimators.oak.OAKRegressor`.
    n_inducing : int, default=200
        Inducing points per binary problem (the paper's choice for N > 200).
    inference, batch_size, optimizer, max_iter, lr, ngd_lr, learn_inducing, class_weight, random_state, device, dtype, verbose
        See :class:`~hdgp.estimators.classifier.GPClassifier`.

    Attributes
    ----------
    sobol_ : list of hdgp.explain.SobolResult
        Per binary problem (one entry when binary; one per class one-vs-rest).
    sobol_indices_ : dict or list of dict
        ``{(feature name, ...): normalised Sobol index}`` of the latent function, sorted
        decreasingly; a list with one dict per class when there are more than two classes.
    sobol_order_ : ndarray of shape (R,) or (n_classes, R)
        Normalised Sobol mass of each interaction order 1..R.
    encoder_ : OAKRegressor
        Unfitted-model holder of the fitted input transformation (flow, levels, measures).
    input_summary_ : dict
        Range, typical value and histogram of every transformed input column, for
        :meth:`plot_components` (:func:`~hdgp.estimators._input_summary.summarize_inputs`;
        the training rows themselves are not kept).

    Examples
    --------
    >>> import numpy as np
    >>> from hdgp.estimators.oak_classifier import OAKClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((60, 2))
    >>> clf = OAKClassifier(n_inducing=10, max_iter=50, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    >>> next(iter(clf.sobol_indices_))  # the top-ranked term: the label depends on x0 only
    ('x0',)

    References
    ----------
    Lu, Boukouvalas & Hensman (2022), *Additive Gaussian Processes Revisited*, ICML,
    Sec. 4 (eqs. 13–14) and appendix H.
    """

    def __init__(self, max_order=None, *, measure="gaussian", gmm_components=3, flow=True, log_transform="auto",
                 clip_inputs=False, categorical_features=None, binary_features="auto", order_variance_prior=True,
                 max_sobol_terms=100_000, inference="variational", n_inducing=200, batch_size=None,
                 optimizer="auto", max_iter=None, lr=0.05, ngd_lr=0.1, learn_inducing=True, class_weight=None,
                 random_state=None, device=None, dtype="float64", verbose=False):
        self.max_order = max_order
        self.measure = measure
        self.gmm_components = gmm_components
        self.flow = flow
        self.log_transform = log_transform
        self.clip_inputs = clip_inputs
        self.categorical_features = categorical_features
        self.binary_features = binary_features
        self.order_variance_prior = order_variance_prior
        self.max_sobol_terms = max_sobol_terms
        self.inference = inference
        self.n_inducing = n_inducing
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.lr = lr
        self.ngd_lr = ngd_lr
        self.learn_inducing = learn_inducing
        self.class_weight = class_weight
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.verbose = verbose

    # ------------------------------------------------------------------ hooks
    def _encoder(self) -> OAKRegressor:
        return OAKRegressor(max_order=self.max_order, measure=self.measure, gmm_components=self.gmm_components,
                            flow=self.flow, log_transform=self.log_transform, clip_inputs=self.clip_inputs,
                            categorical_features=self.categorical_features, binary_features=self.binary_features,
                            order_variance_prior=self.order_variance_prior, max_sobol_terms=self.max_sobol_terms,
                            random_state=self.random_state)

    def _validate_kernel(self) -> None:
        self._encoder()._validate_params_extra()

    def _check_X(self, X, y=None, *, fit: bool = False):
        if not fit:
            return super()._check_X(self.encoder_._encode_frame(X, fit=False))
        self.encoder_ = self._encoder()
        X, y = super()._check_X(self.encoder_._encode_frame(X, fit=True), y, fit=True)
        if hasattr(self, "feature_names_in_"):
            self.encoder_.feature_names_in_ = self.feature_names_in_
        elif hasattr(self.encoder_, "feature_names_in_"):
            del self.encoder_.feature_names_in_
        return X, y

    def _transform_inputs(self, X: np.ndarray, fit: bool) -> np.ndarray:
        if fit:
            self.encoder_._fit_seed_ = self._fit_seed_
        return self.encoder_._transform_inputs(X, fit)

    def _make_kernel(self, X):
        if self.max_order is None:
            self.encoder_.max_order = min(X.shape[-1], DEFAULT_MAX_ORDER)
        return self.encoder_._make_kernel(X)

    def _discrete_columns(self) -> tuple:
        return self.encoder_._discrete_columns()

    def _feature_names(self) -> list[str]:
        return self.encoder_._feature_names(self.n_features_in_)

    def _after_fit(self, Xt: torch.Tensor) -> None:
        self.input_summary_ = summarize_inputs(Xt, self.encoder_.levels_)
        names = self._feature_names()
        self.sobol_, indices = [], []
        for model, post in zip(self.models_, self.posteriors_):
            result = explain.compute_sobol(model.kernel, post.X, post.alpha, self.max_sobol_terms)
            self.sobol_.append(result)
            indices.append({tuple(names[i] for i in u): float(v) for u, v in zip(result.terms, result.values)})
        orders = np.stack([r.by_order.cpu().numpy() for r in self.sobol_])
        self.sobol_indices_ = indices[0] if len(indices) == 1 else indices
        self.sobol_order_ = orders[0] if len(indices) == 1 else orders

    # -------------------------------------------------------- explanations
    def _problem(self, class_label) -> tuple[int, float]:
        r"""``(k, sign)``: the latent function :math:`\pm f_k` whose large values favour ``class_label``.

        Binary: one latent :math:`f` with :math:`P(\text{classes\_[1]}) = \Phi(f)`, so the
        first class takes :math:`-f` and ``None`` means the second. One-vs-rest: one
        :math:`f_k` per class, and ``class_label`` must be given.
        """
        check_is_fitted(self, "posteriors_")
        classes = list(self.classes_)
        if class_label is None:
            if len(classes) > 2:
                raise ValueError(f"There is one latent function per class ({len(classes)} classes, one-vs-rest); "
                                 f"pass class_label, one of {classes}.")
            return 0, 1.0
        matches = [k for k, c in enumerate(classes) if c == class_label]
        if not matches:
            raise ValueError(f"class_label {class_label!r} is not one of the classes {classes}.")
        if len(classes) == 2:
            return 0, 1.0 if matches[0] == 1 else -1.0
        return matches[0], 1.0

    # a term's feature indices from names or indices, as the regressor reads them
    _term = OAKRegressor._term
    _column_index = OAKRegressor._column_index

    def predict_component(self, X, term, *, class_label=None, return_std: bool = False):
        """Posterior mean (and std) of the latent component :math:`f_u` at ``X`` (probit scale).

        The latent function is a sum of components (OAK eq. 13, with the SVGP posterior
        :math:`q(f(Z)) = N(m, S)`: :func:`hdgp.explain.component_posterior`); positive values
        push towards ``class_label``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            All columns, checked as by ``predict`` (number, names, known levels); only the
            values of the columns in ``term`` change the result, so the others can hold any
            valid value (e.g. one training row repeated along a grid).
        term : int, str or tuple of them
            Feature indices or names :math:`u`; ``()`` is the order-0 constant component.
        class_label : optional
            The class whose latent function to explain: default the second of two classes
            (the first gets the negated components); required with more than two classes.
        return_std : bool, default=False
        """
        k, sign = self._problem(class_label)
        u = self._term(term)
        Xt = self._standardise(self._check_X(X), fit=False)
        mean, var = explain.component_posterior(self.posteriors_[k], u, Xt)
        mean = sign * mean.cpu().numpy()
        return (mean, np.sqrt(var.cpu().numpy())) if return_std else mean

    def plot_components(self, terms=None, *, class_label=None, **kwargs):
        """Plot latent components (default: the top first- and second-order terms by Sobol index).

        See :func:`hdgp.plotting.plot_components`; ``class_label`` as in :meth:`predict_component`.
        """
        from ..plotting import plot_components

        return plot_components(self, terms, class_label=class_label, **kwargs)


register_preset("OAK-classifier", lambda **kw: OAKClassifier(**kw),
                "Orthogonal additive GP classifier (Bernoulli SVGP, 200 inducing points) with latent Sobol indices.")
