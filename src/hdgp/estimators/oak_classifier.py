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

import copy

import numpy as np
import torch
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.utils.validation import check_is_fitted

from .. import explain
from ..plotting import plot_components
from .._threads import thread_budget
from ._base import _is_int
from ._params import resolve_max_order
from .._input_summary import summarize_inputs
from .classifier import GPClassifier
from .oak_encoder import OAKInputEncoder, check_oak_params, term_indices, terms_indices

__all__ = ["OAKClassifier"]

#: Default highest interaction order: the OAK paper's choice for its classification
#: experiments (Lu et al. 2022, Sec. 5.1: "for classification problems, we set D̃ = 4").
#: Every SVGP step evaluates the kernel, so its cost (O(D·R) elementwise passes) counts
#: once per step, not once per fit as in exact regression.
DEFAULT_MAX_ORDER = 4

#: ``optimizer="auto"`` takes full-batch L-BFGS up to this many rows here (GPClassifier: 10,000).
#: Each evaluation of the profiled bound touches every row with the OAK kernel's O(D·R) passes
#: and solves q(v) at O(n m^2) per step, while a minibatch step touches 1,024 rows; beyond a few
#: thousand rows the minibatch path is the cheaper one for this kernel (measurements:
#: benchmarks/results/classifier-defaults/README.md).
FULL_BATCH_MAX_ROWS = 2048


class OAKClassifier(GPClassifier):
    r"""Orthogonal additive GP classifier (probit SVGP) with Sobol indices of the latent function.

    Parameters
    ----------
    max_order : int or None, default=None
        Highest interaction order; None means :math:`\min(D, 4)`, the paper's choice
        for classification (:data:`DEFAULT_MAX_ORDER`).
    measure, gmm_components, flow, log_transform, clip_inputs
        Input handling and kernel as in :class:`~hdgp.estimators.oak.OAKRegressor`.
    categorical_features, binary_features, handle_unknown, order_variance_prior, max_sobol_terms
        As in :class:`~hdgp.estimators.oak.OAKRegressor`.
    sobol_threshold : float, default=0.99
        Cumulative normalised Sobol mass of each latent function kept in ``components_``
        (as in :class:`~hdgp.estimators.oak.OAKRegressor`).
    n_inducing : int, default=200
        Inducing points per binary problem (the paper's choice for N > 200).
    inference, batch_size, optimizer, max_iter, lr, ngd_lr, learn_inducing, class_weight, random_state, device, dtype, verbose
        See :class:`~hdgp.estimators.classifier.GPClassifier`; ``optimizer="auto"`` takes full-batch
        L-BFGS up to :data:`FULL_BATCH_MAX_ROWS` (2048) training rows here.

    Attributes
    ----------
    sobol_ : list of hdgp.explain.SobolResult
        Per binary problem (one entry when binary; one per class one-vs-rest).
    sobol_indices_ : dict or list of dict
        ``{(feature name, ...): normalised Sobol index}`` of the latent function, sorted
        decreasingly; a list with one dict per class when there are more than two classes.
    sobol_order_ : ndarray of shape (R,) or (n_classes, R)
        Normalised Sobol mass of each interaction order 1..R.
    components_ : list of tuple of int, or list of such lists
        Highest-ranked terms (feature indices) of the latent function reaching
        ``sobol_threshold``; one list per class when there are more than two classes.
    encoder_ : OAKInputEncoder
        Unfitted-model holder of the fitted input transformation (flow, levels, measures).
    input_summary_ : dict
        Range, typical value and histogram of every transformed input column, for
        :meth:`plot_components` (:func:`~hdgp._input_summary.summarize_inputs`;
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

    _full_batch_max_rows = FULL_BATCH_MAX_ROWS

    def __init__(self, max_order=None, *, measure="gaussian", gmm_components=3, flow=True, log_transform="auto",
                 clip_inputs=False, categorical_features=None, binary_features="auto", handle_unknown="error",
                 order_variance_prior=True,
                 sobol_threshold=0.99, max_sobol_terms=100_000, inference="variational", n_inducing=200,
                 batch_size=None, optimizer="auto", max_iter=None, lr=0.05, ngd_lr=0.1, learn_inducing=True, class_weight=None,
                 random_state=None, device=None, dtype="float64", verbose=False):
        self.max_order = max_order
        self.measure = measure
        self.gmm_components = gmm_components
        self.flow = flow
        self.log_transform = log_transform
        self.clip_inputs = clip_inputs
        self.categorical_features = categorical_features
        self.binary_features = binary_features
        self.handle_unknown = handle_unknown
        self.order_variance_prior = order_variance_prior
        self.sobol_threshold = sobol_threshold
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
    def _encoder(self) -> OAKInputEncoder:
        return OAKInputEncoder(measure=self.measure, gmm_components=self.gmm_components, flow=self.flow,
                               log_transform=self.log_transform, clip_inputs=self.clip_inputs,
                               categorical_features=self.categorical_features, binary_features=self.binary_features,
                               handle_unknown=self.handle_unknown)

    def _validate_kernel(self) -> None:
        check_oak_params(self)

    def _predict_encoder(self) -> OAKInputEncoder:
        """``encoder_``, or a shallow copy of it with this classifier's current ``handle_unknown``
        (set after fit, or on a copy of this classifier: the fitted encoder is shared, not changed)."""
        policy = getattr(self, "handle_unknown", "error")
        if getattr(self.encoder_, "handle_unknown", "error") == policy:
            return self.encoder_
        encoder = copy.copy(self.encoder_)
        encoder.handle_unknown = policy
        return encoder

    _takes_missing = True  # missing cells (NaN) are marginalised by the kernel (hdgp.kernels.orthogonal_kernel)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _check_X(self, X, y=None, *, fit: bool = False):
        if not fit:
            return super()._check_X(self._predict_encoder().encode_frame(X, fit=False))
        self.encoder_ = self._encoder()
        X, y = super()._check_X(self.encoder_.encode_frame(X, fit=True), y, fit=True)
        if hasattr(self, "feature_names_in_"):
            self.encoder_.feature_names_in_ = self.feature_names_in_
        elif hasattr(self.encoder_, "feature_names_in_"):
            del self.encoder_.feature_names_in_
        return X, y

    def _transform_inputs(self, X: np.ndarray, fit: bool) -> np.ndarray:
        return (self.encoder_ if fit else self._predict_encoder()).transform_inputs(X, fit)

    def _make_kernel(self, X):
        return self.encoder_.make_kernel(X, max_order=resolve_max_order(self.max_order, X.shape[-1], cap=DEFAULT_MAX_ORDER),
                                         order_variance_prior=self.order_variance_prior, random_state=self._fit_seed_)

    def _discrete_columns(self) -> tuple:
        return self.encoder_.discrete_columns()

    def _feature_names(self) -> list[str]:
        return self.encoder_.feature_names(self.n_features_in_)

    def _after_fit(self, Xt: torch.Tensor) -> None:
        self.input_summary_ = summarize_inputs(Xt, self.encoder_.levels_)
        names = self._feature_names()
        self.sobol_, indices = [], []
        for model, post in zip(self.models_, self.posteriors_):
            result = explain.compute_sobol(model.kernel, post.X, post.alpha, self.max_sobol_terms)
            self.sobol_.append(result)
            indices.append({tuple(names[i] for i in u): float(v) for u, v in zip(result.terms, result.values)})
        orders = np.stack([r.by_order.cpu().numpy() for r in self.sobol_])
        components = self._selected_terms()
        self.sobol_indices_ = indices[0] if len(indices) == 1 else indices
        self.sobol_order_ = orders[0] if len(indices) == 1 else orders
        self.components_ = components[0] if len(indices) == 1 else components

    # -------------------------------------------------------- explanations
    def _problem(self, class_label) -> tuple[int, float]:
        r"""``(k, sign)``: the latent function :math:`\pm f_k` whose large values favour ``class_label``.

        Binary: one latent :math:`f` with :math:`P(\text{classes\_[1]}) = \Phi(f)`, so the
        first class takes :math:`-f` and ``None`` means the second. One-vs-rest: one
        :math:`f_k` per class, and ``class_label`` must be given.
        """
        check_is_fitted(self, "posteriors_")
        classes = self.classes_.tolist()  # plain values: messages list 'a', not np.str_('a')
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

    def _term(self, term) -> tuple[int, ...]:
        """A term's feature indices from names or indices, as the regressor reads them."""
        return term_indices(term, self._feature_names())

    def _terms(self, terms) -> list[tuple[int, ...]]:
        return terms_indices(terms, self._feature_names())

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
            Feature indices or names :math:`u`; ``()`` is the order-0 term of the kernel, without
            the fitted constant mean (see :meth:`OAKRegressor.predict_component`).
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

    def _terms_by_problem(self, terms) -> list:
        """The terms each binary problem keeps: ``components_`` (each its own), or the given ones for all."""
        check_is_fitted(self, "posteriors_")
        if terms is None:
            if not hasattr(self, "components_"):  # a model file written before components_ existed
                return self._selected_terms()
            return [self.components_] if len(self.posteriors_) == 1 else list(self.components_)
        return [self._terms(terms)] * len(self.posteriors_)

    def _selected_terms(self) -> list:
        """Per binary problem, the top-ranked terms reaching ``sobol_threshold``."""
        return [explain.select_terms(result, self.sobol_threshold) for result in self.sobol_]

    def predict_proba_truncated(self, X, terms=None) -> np.ndarray:
        r"""Class probabilities of the model truncated to ``terms`` (OAK appendix H step 5).

        Each latent mean keeps the constant and the given components only,
        :math:`m_T = c + m_\varnothing + \sum_{u \in T} m_u`; the probabilities are
        :math:`\Phi(m_T / \sqrt{1 + s^2})` with the full latent variance :math:`s^2`
        (the truncation drops components of the mean, and with every term this is
        :meth:`predict_proba`), normalised and reweighted as there.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        terms : list of terms, optional
            Feature indices or names, as in :meth:`predict_component`, kept in every
            latent function. Default: ``components_`` (each class its own with more than
            two classes).

        Returns
        -------
        proba : ndarray of shape (n_queries, n_classes)
        """
        by_problem = self._terms_by_problem(terms)
        Xt = self._standardise(self._check_X(X), fit=False)
        with thread_budget(Xt.shape[0]):
            latent = [(explain.truncated_mean(post, kept, Xt), post.predict(Xt, latent=True)[1])
                      for post, kept in zip(self.posteriors_, by_problem)]
        return self._proba(latent)

    def predict_truncated(self, X, terms=None) -> np.ndarray:
        """Most probable class of the truncated model (:meth:`predict_proba_truncated`)."""
        return self.classes_[np.argmax(self.predict_proba_truncated(X, terms), axis=1)]

    def truncation_curve(self, X, y, max_terms: int = 50) -> dict:
        """Test AUC, accuracy and log-loss as ranked terms are added (OAK Fig. 5 bottom row, Fig. 6).

        Step :math:`j` keeps the top :math:`j` terms of each latent function by its own
        Sobol ranking (:meth:`predict_proba_truncated`). With more than two classes the
        AUC is the macro one-vs-rest average.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        y : array-like of shape (n_queries,)
            True labels, all among ``classes_`` and at least two distinct ones (for the AUC).
        max_terms : int, default=50

        Returns
        -------
        dict with ``n_terms``, ``cumulative_sobol`` (averaged over the classes' latent
        functions when there are more than two), ``auc``, ``accuracy`` and ``log_loss``
        arrays (length ≤ ``max_terms``); with more than two classes also
        ``cumulative_sobol_by_class`` of shape (n_classes, n_steps).
        """
        check_is_fitted(self, "posteriors_")
        if not _is_int(max_terms) or max_terms < 1:
            raise ValueError(f"max_terms must be a positive integer, got {max_terms!r}.")
        y = np.asarray(y).reshape(-1)
        unknown = np.unique(y[~np.isin(y, self.classes_)])
        if len(unknown):
            raise ValueError(f"y holds labels that are not classes of the fitted model: {unknown[:5].tolist()}; "
                             f"the classes are {self.classes_.tolist()}.")
        if len(np.unique(y)) < 2:
            raise ValueError("truncation_curve needs labels of at least two classes in y (the AUC is undefined "
                             "with one).")
        Xt = self._standardise(self._check_X(X), fit=False)
        if len(y) != Xt.shape[0]:
            raise ValueError(f"X has {Xt.shape[0]} rows but y has {len(y)}.")
        n_steps = min(int(max_terms), max(len(r.terms) for r in self.sobol_))
        curve = {"auc": [], "accuracy": [], "log_loss": []}
        with thread_budget(Xt.shape[0]):
            # every step's component means at once, from one evaluation of the base kernels per problem
            means = [explain.component_means(post, [(), *result.terms[:n_steps]], Xt)
                     for post, result in zip(self.posteriors_, self.sobol_)]
            running = [post.constant + m[0] for post, m in zip(self.posteriors_, means)]
            variances = [post.predict(Xt, latent=True)[1] for post in self.posteriors_]
            for step in range(n_steps):
                for k, result in enumerate(self.sobol_):
                    if step < len(result.terms):
                        running[k] = running[k] + means[k][step + 1]
                proba = self._proba(list(zip(running, variances)))
                curve["auc"].append(roc_auc_score(y == self.classes_[1], proba[:, 1]) if proba.shape[1] == 2
                                    else roc_auc_score(y, proba, multi_class="ovr", labels=self.classes_))
                curve["accuracy"].append(float(np.mean(self.classes_[np.argmax(proba, axis=1)] == y)))
                curve["log_loss"].append(log_loss(y, proba, labels=self.classes_))
        sobol = np.stack([np.cumsum(_padded(r.values.cpu().numpy(), n_steps)) for r in self.sobol_])
        out = {"n_terms": np.arange(1, n_steps + 1), "cumulative_sobol": sobol.mean(axis=0),
               **{k: np.asarray(v, dtype=float) for k, v in curve.items()}}
        if len(self.sobol_) > 1:
            out["cumulative_sobol_by_class"] = sobol
        return out

    def plot_components(self, terms=None, *, class_label=None, **kwargs):
        """Plot latent components (default: the first- and second-order terms of ``components_``).

        See :func:`hdgp.plotting.plot_components`; ``class_label`` as in :meth:`predict_component`.
        """
        return plot_components(self, terms, class_label=class_label, **kwargs)


def _padded(values: np.ndarray, length: int) -> np.ndarray:
    """The first ``length`` values, padded with zeros (a latent function with fewer terms adds nothing)."""
    return np.concatenate([values[:length], np.zeros(max(0, length - len(values)))])
