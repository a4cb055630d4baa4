r"""``GPClassifier``: variational GP classification (Bernoulli SVGP), binary or one-vs-rest.

For labels :math:`y_i \in \{0, 1\}` the model is

.. math::

    p(y_i = 1 \mid f) = \Phi(f(x_i)),\qquad f \sim GP(c, k),

fitted by maximising the SVGP evidence lower bound with inducing points
(:mod:`hdgp.inference.variational`; Hensman, Matthews & Ghahramani 2015). With
the Gaussian approximate posterior :math:`q(f_*) = N(\mu_*, s_*^2)` the predictive
class probability is closed-form (Rasmussen & Williams 2006, eq. 3.82):

.. math::

    p(y_* = 1 \mid x_*, D) \approx \int \Phi(f)\,N(f \mid \mu_*, s_*^2)\,df
        = \Phi\!\Big(\frac{\mu_*}{\sqrt{1 + s_*^2}}\Big).

More than two classes are handled one-vs-rest: one binary model per class, and
the per-class probabilities are normalised to sum to one.
"""

from __future__ import annotations

import copy
import math
import numbers
from numbers import Real

import numpy as np
import torch
from gpytorch.kernels import Kernel
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._scaling import StandardizedInputs
from .._threads import thread_budget
from ..inference.engines import check_inference
from ..inference.variational import SVGPModel, fit_svgp
from ._base import _default_dtype, atomic_fit, resolve_device, resolve_dtype
from ._constraints import POSITIVE_COUNT, Interval, StrOptions, validate_constraints
from ._class_weight import class_weights, fitted_class_weights, reweight_proba
from ._numeric_input import check_class_labels, fill_missing, validate_numeric
from ._pickle_version import VersionedPickle
from ._repr import LearnedRepr
from .gp import KERNELS

__all__ = ["FULL_BATCH_MAX_ROWS", "GPClassifier", "probit_predictive"]

#: ``optimizer="auto"`` maximises the full-data ELBO with L-BFGS up to this many training rows
#: (then minibatch natural-gradient + Adam). Minibatch training stops once its noisy ELBO levels
#: off, short of the optimum, while one full-batch evaluation costs O(n m^2) with q(v) solved
#: inside it (:func:`~hdgp.inference.variational.fit_svgp`; measurements:
#: benchmarks/results/classifier-defaults/README.md).
FULL_BATCH_MAX_ROWS = 10_000


def probit_predictive(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    r""":math:`\Phi(\mu / \sqrt{1 + s^2})`, the probit likelihood averaged over :math:`N(\mu, s^2)` (R&W eq. 3.82).

    As :math:`\tfrac12\operatorname{erfc}(-z/\sqrt2)`, accurate in the lower tail, where
    ``torch.special.ndtr`` loses digits and returns 0 from :math:`z \approx -8.3` on (SciPy's
    ``ndtr`` gives 1.8e-33 at :math:`z = -12`).
    """
    return 0.5 * torch.special.erfc(-mean / torch.sqrt(2.0 * (1.0 + var)))


class GPClassifier(LearnedRepr, ClassifierMixin, StandardizedInputs, VersionedPickle, BaseEstimator):
    r"""Gaussian-process classifier with a probit likelihood and sparse variational inference.

    Parameters
    ----------
    kernel : str or gpytorch.kernels.Kernel, default="rbf-ard"
        ``"rbf-ard"``, ``"imq-ard"``, ``"gam"``, ``"linear"``, ``"additive"`` (see
        :class:`~hdgp.estimators.gp.GPRegressor`) or any GPyTorch kernel on the
        standardised inputs (copied per binary problem, never modified).
    inference : {"variational"}, default="variational"
        Bernoulli SVGP (:class:`~hdgp.inference.variational.SVGPModel`).
    n_inducing : int, default=200
        Inducing points per binary problem, initialised by k-means on the
        training inputs (discrete columns kept on observed values). At most the
        number of training rows is used; the number used is ``n_inducing_``.
    batch_size : int or None, default=None
        Minibatch size of the Adam path (None: ``min(1024, n)``).
    optimizer : {"auto", "lbfgs", "adam"}, default="auto"
        ``"lbfgs"``: L-BFGS on the full-data ELBO with :math:`q(v)` at its optimum for
        each setting of the kernel hyperparameters, constant mean and inducing inputs
        (deterministic; typically a few dozen evaluations). ``"adam"``: minibatch
        natural-gradient steps on :math:`q(v)` and Adam on the rest. ``"auto"``
        takes L-BFGS up to :data:`FULL_BATCH_MAX_ROWS` (10,000) training rows, or when
        a given ``batch_size`` holds them all, and minibatches beyond. The choice made
        is ``optimizer_``.
    max_iter : int or None, default=None
        Maximum optimisation steps per binary problem (None: L-BFGS 1000 iterations;
        Adam at least 1000 steps and 20 epochs).
    lr : float, default=0.05
        Adam learning rate (kernel hyperparameters, inducing inputs, constant mean).
    ngd_lr : float, default=0.1
        Natural-gradient learning rate of the variational distribution (Adam path), in (0, 1].
    learn_inducing : bool, default=True
        Optimise the inducing inputs.
    class_weight : None, "balanced" or dict, default=None
        Weights :math:`w_k` applied to the fitted class probabilities,
        :math:`p_w(k \mid x) \propto w_k\, p(k \mid x)` (``predict`` and
        ``predict_proba``; see :mod:`hdgp.estimators._class_weight`). ``"balanced"``
        (:math:`w_k = n / (K n_k)`) predicts as if the classes were equally frequent.
        The fit itself is unweighted.
    random_state : int, RandomState or None
        Seed of k-means and of the minibatch order.
    device : None or str
        Torch device, e.g. ``"cuda"``; None uses the CPU.
    dtype : {"float64", "float32"}, default="float64"
        Floating type of the computation (the NumPy or torch dtype of that name works too).
    verbose : bool, default=False
        Show a progress bar with the ELBO.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    models_ : list of SVGPModel
        One model (binary) or one per class (one-vs-rest).
    posteriors_ : list of InducingPosterior
        Latent posteriors; ``posteriors_[k].alpha`` and ``.X`` (inducing inputs) give the
        latent mean :math:`c + K_{*u}\alpha_u` of class ``k`` (of class ``classes_[1]`` when binary).
    fit_results_ : list of hdgp.training.FitResult
    n_inducing_ : int
    optimizer_ : str
        ``"lbfgs"`` or ``"adam"``, the optimiser used.
    n_iter_ : int
        Optimisation steps summed over the binary problems.
    x_mean_, x_scale_ : ndarray of shape (n_features,)
    n_features_in_ : int
    class_weight_ : ndarray of shape (n_classes,) or None
        The weights :math:`w_k` in the order of ``classes_``.

    Examples
    --------
    >>> import numpy as np
    >>> from hdgp.estimators.classifier import GPClassifier
    >>> X = np.linspace(-2, 2, 40)[:, None]
    >>> clf = GPClassifier(n_inducing=10, max_iter=100, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)

    References
    ----------
    Hensman, Matthews & Ghahramani (2015), *Scalable variational Gaussian process
    classification*, AISTATS. Rasmussen & Williams (2006), sec. 3.9, eq. 3.82.
    """

    #: Rows up to which ``optimizer="auto"`` takes full-batch L-BFGS (:data:`FULL_BATCH_MAX_ROWS`).
    _full_batch_max_rows = FULL_BATCH_MAX_ROWS

    #: scikit-learn's declaration of the constructor rules (checked in ``fit``); ``kernel``,
    #: ``inference`` and ``lr`` have their own checks. A natural-gradient step of 1 is the exact
    #: variational update of a conjugate model; beyond it the step overshoots, and with a Bernoulli
    #: likelihood the ELBO turns non-finite within a few steps.
    _parameter_constraints: dict = {
        "n_inducing": [POSITIVE_COUNT],
        "batch_size": [POSITIVE_COUNT, None],
        "optimizer": [StrOptions({"auto", "lbfgs", "adam"})],
        "max_iter": [POSITIVE_COUNT, None],
        "ngd_lr": [Interval(Real, 0, 1, closed="right")],
        "learn_inducing": ["boolean"],
    }

    def __init__(self, kernel="rbf-ard", *, inference="variational", n_inducing=200, batch_size=None,
                 optimizer="auto", max_iter=None, lr=0.05, ngd_lr=0.1, learn_inducing=True, class_weight=None,
                 random_state=None, device=None, dtype="float64", verbose=False):
        self.kernel = kernel
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

    # ------------------------------------------------------------- validation
    def _validate_kernel(self) -> None:
        if isinstance(self.kernel, str):
            if self.kernel.lower() not in KERNELS:
                raise ValueError(f"kernel must be one of {sorted(KERNELS)} or a gpytorch Kernel, got {self.kernel!r}.")
        elif not isinstance(self.kernel, Kernel):
            raise ValueError(f"kernel must be a string or a gpytorch.kernels.Kernel, got {type(self.kernel).__name__}.")

    def _check_params(self) -> None:
        validate_constraints(self)
        self._validate_kernel()
        check_inference(self.inference, type(self).__name__, classification=True)
        # an Interval without an upper end admits inf, which would turn the first step's loss NaN
        if not isinstance(self.lr, numbers.Real) or not 0 < self.lr < math.inf:
            raise ValueError(f"lr must be a positive float, got {self.lr!r}.")
        resolve_dtype(self.dtype)
        resolve_device(self.device)

    @property
    def _torch_kwargs(self) -> dict:
        return {"dtype": resolve_dtype(self.dtype), "device": resolve_device(self.device)}

    # ------------------------------------------------------------------ hooks
    def _check_X(self, X, y=None, *, fit: bool = False):
        """Validate (and for subclasses, encode) inputs; with ``fit`` also ``y`` and return both."""
        if not fit:
            return validate_numeric(self, X, reset=False, dtype=np.float64, order="C")
        return validate_numeric(self, X, y, ensure_min_samples=2, dtype=np.float64, order="C")

    def _standardise(self, X: np.ndarray, fit: bool) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(self._transform_inputs(X, fit)), **self._torch_kwargs)

    def _after_fit(self, Xt: torch.Tensor) -> None:
        """Subclasses add derived attributes (e.g. Sobol indices) here; ``Xt`` are the transformed training inputs."""

    def _make_kernel(self, X: torch.Tensor) -> Kernel:
        if isinstance(self.kernel, str):
            return KERNELS[self.kernel.lower()](X)
        return copy.deepcopy(self.kernel)

    def _discrete_columns(self) -> tuple:
        """Columns whose inducing inputs must stay on observed values (k-means modes, not centroids)."""
        return ()

    def _resolve_optimizer(self, n: int, batch_size: int | None) -> str:
        """``optimizer``, with ``"auto"`` → L-BFGS up to ``_full_batch_max_rows`` rows (no
        ``batch_size``) or when ``batch_size`` holds all ``n`` rows.

        (L-BFGS with a batch smaller than ``n`` is refused by :func:`fit_svgp`.)
        """
        if self.optimizer != "auto":
            return self.optimizer
        return "lbfgs" if (n <= self._full_batch_max_rows if batch_size is None else batch_size >= n) else "adam"

    # -------------------------------------------------------------------- fit
    @atomic_fit
    def fit(self, X, y):
        """Fit one Bernoulli SVGP (binary) or one per class (one-vs-rest).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels (any hashable values; two or more classes).

        Returns
        -------
        self
        """
        X, y = self._check_X(X, y, fit=True)
        check_class_labels(y)
        self._check_params()
        self.classes_, codes = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; the data contain only class "
                f"{self.classes_[:1].tolist()[0]!r}."
            )
        self.class_weight_ = class_weights(self.class_weight, self.classes_, y)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        self._fit_seed_ = seed
        with thread_budget(X.shape[0]):
            Xt = self._standardise(X, fit=True)
            n = Xt.shape[0]
            self.n_inducing_ = min(int(self.n_inducing), n)
            batch_size = None if self.batch_size is None else min(self.batch_size, n)
            self.optimizer_ = self._resolve_optimizer(n, batch_size)
            if self.optimizer_ == "lbfgs" and batch_size is None:
                batch_size = n  # the full-data ELBO
            targets = [codes == 1] if len(self.classes_) == 2 else [codes == k for k in range(len(self.classes_))]
            self.models_, self.posteriors_, self.fit_results_ = [], [], []
            for k, target in enumerate(targets):
                with _default_dtype(self._torch_kwargs["dtype"]):  # initial values not rounded to the caller's default
                    model = SVGPModel(self._make_kernel(Xt), X=fill_missing(Xt, seed), n_inducing=self.n_inducing_,
                                      random_state=seed + k, discrete=self._discrete_columns(),
                                      likelihood="bernoulli", learn_inducing=self.learn_inducing,
                                      natural_gradient=self.optimizer_ == "adam").to(**self._torch_kwargs)
                result = fit_svgp(model, Xt, torch.as_tensor(target.astype(np.float64), **self._torch_kwargs),
                                  batch_size=batch_size, max_iter=self.max_iter, lr=self.lr, ngd_lr=self.ngd_lr,
                                  random_state=seed + k, verbose=self.verbose, optimizer=self.optimizer_)
                for p in model.parameters():
                    p.requires_grad_(False)
                self.models_.append(model)
                self.posteriors_.append(model.posterior())
                self.fit_results_.append(result)
        self.n_iter_ = int(sum(r.n_evaluations for r in self.fit_results_))
        self._after_fit(Xt)
        return self

    # ---------------------------------------------------------------- predict
    def _latent(self, X):
        check_is_fitted(self, "posteriors_")
        Xt = self._standardise(self._check_X(X), fit=False)
        with thread_budget(Xt.shape[0]):
            return [post.predict(Xt, latent=True) for post in self.posteriors_]

    def predict_latent(self, X, return_std: bool = False):
        """Posterior mean (and std) of the latent function(s) :math:`f` at ``X``.

        Returns
        -------
        mean : ndarray of shape (n_queries,) for binary problems, else (n_queries, n_classes)
        std : ndarray of the same shape, optional
        """
        out = self._latent(X)
        mean = np.column_stack([m.cpu().numpy() for m, _ in out])
        std = np.column_stack([v.sqrt().cpu().numpy() for _, v in out])
        if mean.shape[1] == 1:
            mean, std = mean[:, 0], std[:, 0]
        return (mean, std) if return_std else mean

    def predict_proba(self, X) -> np.ndarray:
        r"""Class probabilities :math:`\Phi(\mu_*/\sqrt{1+s_*^2})` (one-vs-rest: normalised over classes).

        Reweighted by ``class_weight_`` when ``class_weight`` is set.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_classes)
        """
        return self._proba(self._latent(X))

    def _proba(self, latent) -> np.ndarray:
        """Class probabilities from the (mean, variance) of each binary problem's latent function."""
        if len(latent) == 1:  # binary: Phi(-z) for the first class, not 1 - Phi(z), which is 0 from z = 8.3 on
            (m, v), = latent
            probs = np.column_stack([probit_predictive(-m, v).cpu().numpy(), probit_predictive(m, v).cpu().numpy()])
        else:
            probs = np.column_stack([probit_predictive(m, v).cpu().numpy() for m, v in latent])
        weights = fitted_class_weights(self)
        return reweight_proba(probs, np.ones(probs.shape[1]) if weights is None else weights)  # rows sum to 1

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        return np.log(np.clip(self.predict_proba(X), np.finfo(float).tiny, None))

    def predict(self, X) -> np.ndarray:
        """Most probable class."""
        check_is_fitted(self, "posteriors_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
