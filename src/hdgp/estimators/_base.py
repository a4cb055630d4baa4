"""Shared scikit-learn machinery for hdgp's exact-GP regressors.

A family subclasses :class:`BaseGPRegressor`, lists its own parameters plus the
common ones in an explicit ``__init__`` (scikit-learn reads the signature) and
implements :meth:`BaseGPRegressor._make_kernel`. Everything else — validation,
standardisation, training, prediction in original units — lives here once.
"""

from __future__ import annotations

import copy
import functools
import numbers
import os
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Real

import numpy as np
import torch
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._arrays import as_float64
from .._cost import cost_warning, estimate_fit
from .._scaling import StandardizedInputs, target_scale, varies
from .._threads import thread_budget
from ..exceptions import CostWarning, NumericalWarning, warn_caller
from ..inference import ExactGPModel
from ..inference.engines import ENGINE_REGISTRY, check_inference, engine_of, resolve_inference
from ..inference.inducing import kmeans_inducing_points
from ..priors import smoothed_box_noise_prior
from ..training import FitResult, fit_hyperparameters
from ._constraints import COUNT, POSITIVE_COUNT, Interval, StrOptions, validate_constraints
from ._numeric_input import fill_missing, validate_numeric
from ._pickle_version import VersionedPickle
from ._predictive import PredictiveDistribution
from ._repr import LearnedRepr
from ._variance_scale import VarianceScaling

__all__ = ["AUTO_EXACT_MAX_N", "BaseGPRegressor", "COMMON_PARAMS", "atomic_fit", "resolve_dtype", "resolve_device"]

#: ``inference="auto"`` uses exact inference up to this many training rows.
AUTO_EXACT_MAX_N = 5000
#: Fits on fewer rows skip the up-front cost estimate (:meth:`BaseGPRegressor._warn_if_costly`): they are quick.
_COST_CHECK_MIN_ROWS = 300

#: Sparse and variational fits also start from the hyperparameters of an exact fit on this
#: many random training rows. From the generic initialisation the collapsed bound's trace
#: penalty tr(K_ff - Q_ff)/sigma^2 can be lowered fastest by shrinking the signal variance,
#: and the fit can end at the noise-only model. The subset start can fail the other way: on
#: noisy data a few hundred rows switch relevant features off (length-scales where the
#: full-data gradient vanishes). Measurements: benchmarks/README.md, "Measurements behind
#: defaults". SGPR's bound is deterministic, so it is optimised from both starts and
#: the better optimum is kept; SVGP (a stochastic objective, and the largest data) uses
#: the subset start only.
SUBSET_INIT_ROWS = 500

#: Constructor parameters shared by every :class:`BaseGPRegressor` subclass and their defaults.
COMMON_PARAMS = dict(
    inference="auto",
    n_inducing=512,
    batch_size=None,
    noise_lower_bound=1e-4,
    noise_prior=None,
    optimizer="lbfgs",
    max_iter=None,
    n_restarts=0,
    warm_start=False,
    random_state=None,
    device=None,
    dtype="float64",
    verbose=False,
)

_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def atomic_fit(fit):
    """Decorate an estimator's ``fit`` so that a call that raises leaves the estimator as it was.

    A refit sets its fitted attributes one after another (``n_features_in_`` first, the
    posterior last); one that fails half-way, on a bad parameter or an interrupted training,
    would otherwise leave parts that disagree (a new feature count with the old posterior),
    so that ``predict`` fails with a broadcasting error. Every fit assigns new objects to its
    attributes rather than changing the old ones in place, so restoring the attribute
    dictionary restores the previous model.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        before = dict(self.__dict__)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:  # KeyboardInterrupt too: an interrupted refit keeps the last model
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    return wrapper


@contextmanager
def _default_dtype(dtype: torch.dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


#: n x n matrices an exact fit holds at once (kernel matrix, its factor, a gradient buffer).
_EXACT_BUFFERS = 3


def _exact_memory_message(X: torch.Tensor) -> str:
    n = X.shape[0]
    need = _EXACT_BUFFERS * n * n * X.element_size() / 2**30
    return (f"Exact inference on {n} rows needs about {need:.1f} GiB ({_EXACT_BUFFERS} n x n matrices), more than "
            "this machine can allocate. Use inference='sparse' (or 'ski' for a projected-additive model with "
            "1-D projections), or inference='auto', which switches to them above "
            f"{AUTO_EXACT_MAX_N} rows.")


def _check_exact_memory(X: torch.Tensor) -> None:
    """Refuse, before any work, an exact fit whose n x n matrices exceed the physical memory."""
    if X.device.type != "cpu":
        return
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: the allocator's error is translated instead
        return
    if _EXACT_BUFFERS * X.shape[0] ** 2 * X.element_size() > total:
        raise MemoryError(_exact_memory_message(X))


def resolve_dtype(dtype) -> torch.dtype:
    """Map ``"float64"``/``"float32"``, or the NumPy or torch dtype of that name, to a torch dtype."""
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return dtype
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, (str, torch.dtype)) and dtype is not None else dtype
    except TypeError:
        name = dtype
    if isinstance(name, str) and name in _DTYPES:
        return _DTYPES[name]
    raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}.")


def resolve_device(device) -> torch.device:
    """``None`` → CPU; otherwise anything ``torch.device`` accepts (e.g. ``"cuda"``)."""
    try:
        resolved = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be None, 'cpu', 'cuda' or 'cuda:N', got {device!r}.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}, but this PyTorch ({torch.__version__}) sees no CUDA GPU; "
                         "use device=None for the CPU.")
    return resolved


@dataclass(frozen=True)
class _Stage:
    """What one :meth:`BaseGPRegressor._fit` of a staged fit (OAK's) uses instead of constructor parameters, which a
    fit never changes (None: the parameter's): the ``inference`` engine, the transformed training ``inputs`` (instead
    of ``_transform_inputs(X, fit=True)``), ``warm_start``, ``max_iter`` and L-BFGS's relative tolerance ``ftol``."""
    inference: str | None = None
    inputs: np.ndarray | None = None
    warm: bool | None = None
    max_iter: int | None = None
    ftol: float | None = None


class BaseGPRegressor(LearnedRepr, RegressorMixin, StandardizedInputs, VarianceScaling, PredictiveDistribution,
                      VersionedPickle, BaseEstimator):
    r"""Exact GP regression :math:`y = c + f(x) + \varepsilon` with a family-specific kernel.

    Inputs are transformed by :meth:`_transform_inputs` (column standardisation
    with training statistics by default) and the target is standardised; all
    predictions are returned in the original units of ``y``.

    Common parameters
    -----------------
    inference : {"auto", "exact", ...}, default="auto"
        Inference engine from :data:`hdgp.inference.engines.ENGINE_REGISTRY`. ``"auto"`` picks exact
        inference up to :data:`AUTO_EXACT_MAX_N` training rows and the sparse (SGPR)
        engine beyond. The choice is stored in ``inference_``.
        Sparse fits are optimised from the generic start and from an exact fit on
        :data:`SUBSET_INIT_ROWS` random training rows (cheap, so run with the default
        iteration cap whatever ``max_iter`` is), keeping the better bound;
        variational fits start from the subset fit (``init_result_``, ``start_``).
        ``"variational"`` (minibatch SVGP) trains with its own loop (natural gradients +
        Adam); ``optimizer`` and ``n_restarts`` do not apply to it.
    n_inducing : int, default=512
        Number of inducing points for sparse/variational engines (at most the number
        of training rows is used, as in the classifiers).
    batch_size : int or None, default=None
        Minibatch size of the variational engine (None: ``min(1024, n)``; larger values
        are capped at ``n``); other engines use every row.
    noise_lower_bound : float, default=1e-4
        Lower bound on the noise variance of the *standardised* target.
    noise_prior : None, "smoothed-box" or gpytorch.priors.Prior
        Optional prior on the noise variance (MAP); ``"smoothed-box"`` is the
        projected-additive paper's choice (:func:`hdgp.priors.smoothed_box_noise_prior`).
    optimizer : {"lbfgs", "adam"}, default="lbfgs"
        L-BFGS on the exact marginal likelihood, or the paper protocol (Adam lr 0.1,
        ≤ 1000 steps, moving-average stopping) for faithful reproduction.
    max_iter : int or None
        Optimiser iteration cap (None: 500 for L-BFGS, 1000 for Adam); L-BFGS also stops
        after 2 * max_iter objective evaluations, line searches included.
    n_restarts : int, default=0
        Additional random restarts of the optimiser (seeded by ``random_state``).
    warm_start : bool, default=False
        Start the next ``fit`` from the hyper-parameters of the previous one (every
        parameter whose name and shape match; data-dependent buffers such as OAK's
        measures are recomputed) instead of the generic start(s), with the same
        candidate (direction set, OAK start) that won before; as scikit-learn's
        ``warm_start``. ``hdgp fit --model auto`` refits its winner both this way and
        from the generic start, and keeps the better training objective.
    random_state : int, RandomState or None
        Seed for every random choice of the fit (restarts, projections, ...).
    device : None or str
        Torch device, e.g. ``"cuda"``; None uses the CPU.
    dtype : {"float64", "float32"}, default="float64"
        Floating type of the computation (the NumPy or torch dtype of that name works too).
    verbose : bool, default=False
        Show a progress bar while training.

    Attributes
    ----------
    inference_ : str
        Inference engine that was used.
    model_ : hdgp.inference.ExactGPModel (or the engine's model class)
        Fitted model (kernel, constant mean, noise).
    kernel_ : gpytorch.kernels.Kernel
        Fitted kernel (``model_.kernel``).
    posterior_ : hdgp.inference.ExactPosterior
        Cholesky factor and weights :math:`\alpha` for prediction.
    X_train_ : torch.Tensor of shape (n_samples, n_features)
        Transformed training inputs. Model files of sparse and variational fits leave
        them out (:mod:`hdgp.io.compact`): a loaded one has ``input_summary_`` instead.
    y_mean_, y_scale_ : float
        Target standardisation.
    x_mean_, x_scale_ : ndarray of shape (n_features,)
        Input standardisation (scale 1 for constant columns).
    log_marginal_likelihood_value_ : float
        :math:`\log p(y \mid X, \hat\theta)` of the standardised target at the optimum.
    variance_scale_ : float
        Factor on every predictive variance (1 unless set by :meth:`scale_variance`).
    fit_result_ : hdgp.training.FitResult
        Optimiser diagnostics.
    init_result_ : hdgp.training.FitResult or None
        Diagnostics of the exact subset fit that initialised a sparse or variational
        fit (None when there was none).
    best_candidate_ : int
        Index of the kept candidate (direction set of a projected model, OAK's start);
        a warm start trains that one only.
    start_ : {"generic", "subset", "warm"}
        Starting point of the kept optimum (see ``inference`` and ``warm_start``).
    n_iter_ : int
        Objective evaluations used by the optimiser (all restarts).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` was a DataFrame with string column names.
    """

    #: scikit-learn's declaration of the shared constructor rules (checked by
    #: :func:`~hdgp.estimators._constraints.validate_constraints` in ``fit``); ``inference`` is
    #: the engine registry's, ``dtype``/``device`` torch's.
    _parameter_constraints: dict = {
        "noise_lower_bound": [Interval(Real, 0, 1, closed="neither")],
        "optimizer": [StrOptions({"lbfgs", "adam"})],
        "max_iter": [POSITIVE_COUNT, None],
        "warm_start": ["boolean"],
        "n_restarts": [COUNT],
        "noise_prior": [None, StrOptions({"smoothed-box"}), Prior],
        "n_inducing": [POSITIVE_COUNT],
        "batch_size": [POSITIVE_COUNT, None],
    }
    #: Whether the inputs may hold missing values (NaN); only OAK's kernel marginalises them.
    _takes_missing: bool = False
    #: What the estimator needs of its engine (keywords of :func:`~hdgp.inference.engines.allowed_inference`).
    _engine_needs: dict = {}
    #: The stage the hooks read (:class:`_Stage`): that of the running ``_fit``, else this class default.
    _stage: _Stage = _Stage()

    # ------------------------------------------------------------------ hooks
    def _make_kernel(self, X: torch.Tensor) -> Kernel:  # pragma: no cover - abstract
        """Return the (untrained) kernel for transformed training inputs ``X`` (n, d)."""
        raise NotImplementedError

    # ------------------------------------------------------------- validation
    def _validate_common_params(self) -> None:
        validate_constraints(self)
        check_inference(self.inference, type(self).__name__, **self._engine_needs)
        resolve_dtype(self.dtype)
        resolve_device(self.device)

    def _ski_possible(self) -> bool:
        """Whether ``inference="auto"`` may choose SKI (a projected model of 1-D projections)."""
        return False

    def _resolve_inference(self, n: int) -> str:
        """The engine name used for ``n`` training rows (see ``inference``)."""
        return resolve_inference(self.inference, n, exact_max_n=AUTO_EXACT_MAX_N, ski_possible=self._ski_possible())

    def _make_model(self, kernel: Kernel, X: torch.Tensor):
        """Build the inference model named by ``inference_`` around ``kernel``."""
        engine = ENGINE_REGISTRY[self.inference_]
        kwargs = dict(noise_lower_bound=self.noise_lower_bound, noise_prior=self._noise_prior())
        if engine.inducing_points:
            kwargs.update(inducing_points=self._kmeans_start(X))
        return engine.model(kernel, **kwargs)

    def _kmeans_start(self, X: torch.Tensor) -> torch.Tensor:
        """The engines' k-means inducing inputs (:func:`~hdgp.inference.inducing.kmeans_inducing_points`),
        computed once per fit: a sparse fit builds its model twice (subset and generic start) and OAK with
        a second candidate twice more, every time on the same rows with the same seed (k-means took
        0.45 s at n = 6,000, m = 512, D = 18). The engines copy the tensor."""
        m = min(self.n_inducing, X.shape[0])
        cache = getattr(self, "_kmeans_cache", None)  # a dict only inside _fit (model files rebuild without it)
        key = (X.data_ptr(), tuple(X.shape), X.dtype, m, self._fit_seed_, self._discrete_columns())
        if cache is not None and key in cache:
            return cache[key]
        # inducing inputs have no missing cells: k-means sees each missing cell as a random observed value
        Z = torch.as_tensor(kmeans_inducing_points(fill_missing(X, self._fit_seed_), m, self._fit_seed_,
                                                   discrete=self._discrete_columns()),
                            dtype=X.dtype, device=X.device)
        if cache is not None:
            cache[key] = Z
        return Z

    def _discrete_columns(self) -> tuple:
        """Columns whose inducing inputs must stay on observed values (k-means modes, not centroids)."""
        return ()

    def _validate_params_extra(self) -> None:
        """Subclasses check their own constructor arguments here (called in ``fit``)."""

    def _noise_prior(self):
        """The prior module for a new model: a copy of a user's Prior (the model's dtype and device
        conversions must not change the constructor parameter)."""
        if self.noise_prior == "smoothed-box":
            return smoothed_box_noise_prior(lower=self.noise_lower_bound)
        return copy.deepcopy(self.noise_prior)

    @property
    def _torch_kwargs(self) -> dict:
        return {"dtype": resolve_dtype(self.dtype), "device": resolve_device(self.device)}

    def _to_tensor(self, X: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(X), **self._torch_kwargs)

    # -------------------------------------------------------------------- fit
    @atomic_fit
    def fit(self, X, y):
        """Fit hyperparameters by maximising the marginal likelihood, then condition.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        return self._fit(X, y)

    def _fit(self, X, y, stage: _Stage | None = None):
        """:meth:`fit` without its rollback on failure; a staged fit passes its ``stage`` (:class:`_Stage`)."""
        X, y = validate_numeric(self, X, y, y_numeric=True, ensure_min_samples=2, dtype=np.float64, order="C")
        with thread_budget(X.shape[0]):
            return self._fit_arrays(X, y, self._stage if stage is None else stage)

    def _fit_arrays(self, X: np.ndarray, y: np.ndarray, stage: _Stage):
        self._validate_common_params()
        self._validate_params_extra()
        self.y_mean_, y_std = target_scale(y)
        self.y_scale_ = y_std if varies(y_std, self.y_mean_) else 1.0
        if self.y_scale_ != y_std:
            warn_caller(f"The target is constant ({self.y_mean_:.6g}): the model predicts that value, and its "
                        "predictive standard deviation (about the noise floor, sqrt(noise_lower_bound) in the "
                        "target's units) measures nothing observed.", NumericalWarning)
        Xt = self._to_tensor(self._transform_inputs(X, fit=True) if stage.inputs is None else stage.inputs)
        yt = self._to_tensor((y - self.y_mean_) / self.y_scale_)
        warm = self.warm_start if stage.warm is None else stage.warm
        previous = getattr(self, "model_", None) if warm else None
        previous_engine = getattr(self, "inference_", None)
        self.inference_ = self._resolve_inference(Xt.shape[0]) if stage.inference is None else stage.inference
        if previous_engine != self.inference_:
            previous = None  # another engine (e.g. n crossed the exact/sparse line): nothing to start from
        if previous is None or not hasattr(self, "_fit_seed_"):  # a warm start keeps it: the same projections
            rng = check_random_state(self.random_state)
            self._fit_seed_ = int(rng.randint(np.iinfo(np.int32).max))
        fits = []
        # a warm start repeats the candidate that won before (its direction set, its OAK start)
        candidates = list(range(self._n_candidates())) if previous is None else [getattr(self, "best_candidate_", 0)]
        self._stage, self._kmeans_cache = stage, {}  # both for the hooks, during this fit only
        try:
            if previous is None:
                self._warn_if_costly(Xt.shape[0], Xt.shape[1])
            if self.inference_ == "exact":
                _check_exact_memory(Xt)
            for candidate in candidates:
                self._candidate_ = candidate
                fits.append(self._fit_candidate(Xt, yt, previous))
        except RuntimeError as error:  # torch's allocator: "DefaultCPUAllocator: can't allocate memory"
            if self.inference_ == "exact" and "allocate" in str(error):
                raise MemoryError(_exact_memory_message(Xt)) from error
            raise
        finally:
            del self._stage, self._kmeans_cache
        best = min(range(len(fits)), key=lambda i: fits[i][1].loss)
        self.best_candidate_ = candidates[best]
        model, result, self.init_result_, self.start_ = fits[best]
        self.fit_result_ = _pooled(result, [fit[1] for fit in fits])
        self._record_candidates(model, {c: fit[1].loss for c, fit in zip(candidates, fits)})
        self.n_iter_ = self.fit_result_.n_evaluations
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        self.model_ = model
        self.kernel_ = model.kernel
        self.X_train_ = Xt
        self.posterior_ = model.posterior(Xt, yt)
        self.log_marginal_likelihood_value_ = -float(model.neg_log_marginal_likelihood(Xt, yt))
        self.variance_scale_ = 1.0
        return self

    def _warn_if_costly(self, n: int, d: int) -> None:
        """Warn up front (:class:`~hdgp.exceptions.CostWarning`, at the user's line) when the fit is
        estimated far beyond an RBF-ARD fit of the same table or beyond a few minutes
        (:func:`hdgp._cost.cost_warning`), naming the knobs that help."""
        if n < _COST_CHECK_MIN_ROWS:
            return
        family = "oak" if hasattr(self, "max_order") else "projected" if hasattr(self, "n_projections") else "rbf"
        order = getattr(self, "max_order", None)
        cost = estimate_fit(n, d, engine=self.inference_, family=family,
                            order=min(order, d) if isinstance(order, int) else None,
                            n_projections=getattr(self, "n_projections", 20) or 20, n_inducing=self.n_inducing,
                            starts=self._n_candidates() * (self.n_restarts + 1) * self._fits_per_start())
        message = cost_warning(cost, type(self).__name__)
        if message:
            warn_caller(message, CostWarning)

    def _fits_per_start(self) -> int:
        """Complete fits one ``fit`` call runs per start, for the cost estimate (hook; OAK's flow choice: 2)."""
        return 1

    def _apply_variance_scale(self) -> None:
        self.posterior_.variance_scale = self.variance_scale_

    def _n_candidates(self) -> int:
        """Candidate models one ``fit`` trains (e.g. direction sets); the lowest objective is kept."""
        return 1

    def _record_candidates(self, model, losses: dict) -> None:
        """Set fitted attributes that depend on which candidate ``model`` won (hook);
        ``losses`` maps each candidate trained in this fit to its final objective."""

    def _fit_candidate(self, Xt: torch.Tensor, yt: torch.Tensor, previous=None):
        """Build and train one candidate: ``(model, fit_result, init_result, start)``.

        Sparse fits are trained from the exact subset fit and from the generic start, keeping the better
        objective (see ``inference``); with a ``previous`` model (``warm_start``), from its parameters only.
        """
        model = self._build_model(Xt)
        if previous is not None:
            self._copy_warm(previous, model)
            return model, self._train(model, Xt, yt), None, "warm"
        init_result, start = None, "generic"
        engine = engine_of(model)
        if engine.inducing_points and Xt.shape[0] > SUBSET_INIT_ROWS:
            init_result, start = self._initialise_from_subset(model, Xt, yt), "subset"
        result = self._train(model, Xt, yt, desc="fit from the subset start" if init_result else None)
        if init_result is not None and not engine.trains_itself:
            generic = self._build_model(Xt)
            generic_result = self._train(generic, Xt, yt, desc="fit from the generic start")
            pooled = [result, generic_result]
            if generic_result.loss < result.loss:
                model, result, start = generic, generic_result, "generic"
            result = _pooled(result, pooled)
        return model, result, init_result, start

    def _copy_warm(self, previous, model) -> None:
        """Start ``model`` from ``previous`` (``warm_start``): every parameter whose name and shape match."""
        _copy_matching_parameters(previous, model)

    def _build_model(self, Xt: torch.Tensor):
        """Kernel and inference model at the generic initialisation."""
        with _default_dtype(resolve_dtype(self.dtype)):
            # Parameters are created and initialised in the fit's dtype, so results do not
            # depend on the caller's torch default dtype (initial values are not rounded).
            kernel = self._make_kernel(Xt)
            model = self._make_model(kernel, Xt).to(**self._torch_kwargs)
            model.likelihood.noise = max(0.1, 10 * self.noise_lower_bound)
        return model

    def _train(self, model, Xt: torch.Tensor, yt: torch.Tensor, desc: str | None = None) -> FitResult:
        """Train ``model`` (``max_iter`` and L-BFGS's relative tolerance: the stage's); ``desc`` labels the
        progress bar of one step of a fit."""
        max_iter = self.max_iter if self._stage.max_iter is None else self._stage.max_iter
        if engine_of(model).trains_itself:  # its own (minibatch) training loop
            batch_size = None if self.batch_size is None else min(self.batch_size, Xt.shape[0])
            return model.fit_model(Xt, yt, max_iter=max_iter, random_state=self._fit_seed_, verbose=self.verbose,
                                   batch_size=batch_size)
        return fit_hyperparameters(model, Xt, yt, optimizer=self.optimizer, max_iter=max_iter,
                                   n_restarts=self.n_restarts, random_state=self._fit_seed_, verbose=self.verbose,
                                   desc=desc or "fitting hyperparameters", ftol=self._stage.ftol)

    def _initialise_from_subset(self, model, X: torch.Tensor, y: torch.Tensor):
        """Fit an exact GP sharing ``model``'s kernel on :data:`SUBSET_INIT_ROWS` random rows.

        The kernel module is shared, so its fitted hyperparameters are the sparse
        model's starting point; noise and constant mean are copied over.
        """
        rows = np.sort(np.random.default_rng(self._fit_seed_).choice(X.shape[0], SUBSET_INIT_ROWS, replace=False))
        rows = torch.as_tensor(rows, device=X.device)
        exact = ExactGPModel(model.kernel, noise_lower_bound=self.noise_lower_bound,
                             noise_prior=self._noise_prior()).to(**self._torch_kwargs)
        exact.likelihood.noise = model.likelihood.noise.detach()
        result = fit_hyperparameters(exact, X[rows], y[rows], optimizer=self.optimizer,
                                     random_state=self._fit_seed_, verbose=self.verbose,
                                     desc=f"start: exact fit on {SUBSET_INIT_ROWS} rows")
        with torch.no_grad():
            # the exact fit can end with its noise on the (open) lower bound, which the sparse
            # model's noise constraint cannot invert: start just above it
            model.likelihood.noise = exact.likelihood.noise.clamp_min(self.noise_lower_bound * (1 + 1e-6))
            model.mean.constant.copy_(exact.mean.constant)
        return result

    # ---------------------------------------------------------------- predict
    def _prepare_predict_inputs(self, X) -> torch.Tensor:
        check_is_fitted(self, "posterior_")
        X = validate_numeric(self, X, reset=False, dtype=np.float64, order="C")
        return self._to_tensor(self._transform_inputs(X, fit=False))

    def predict(self, X, return_std: bool = False, return_cov: bool = False, *, latent: bool = False):
        """Posterior predictive mean (and std or covariance) in the units of ``y``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation.
        return_cov : bool, default=False
            Also return the predictive covariance (cannot be combined with ``return_std``).
        latent : bool, default=False
            If True, the uncertainty is that of the latent function f; otherwise of
            a new noisy observation y (f plus the Gaussian noise).

        Returns
        -------
        mean : ndarray of shape (n_queries,)
        std : ndarray of shape (n_queries,), optional
        cov : ndarray of shape (n_queries, n_queries), optional
        """
        if return_std and return_cov:
            raise ValueError("At most one of return_std and return_cov can be requested.")
        Xt = self._prepare_predict_inputs(X)
        # loaded inducing-point and SKI models have no X_train_ (hdgp.io.compact); they predict from
        # m inducing points, or from grids at a cost that grows with the test rows
        support = getattr(self, "X_train_", None)
        if support is None:
            support = getattr(self.posterior_, "inducing_points", Xt)
        with thread_budget(len(support)):
            mean, var = self.posterior_.predict(Xt, latent=latent, full_cov=return_cov)
        mean = as_float64(mean) * self.y_scale_ + self.y_mean_
        if return_cov:
            return mean, as_float64(var) * self.y_scale_**2
        if return_std:
            return mean, np.sqrt(as_float64(var)) * self.y_scale_
        return mean


def _is_int(value) -> bool:
    """An integer, not a bool (``True`` is an ``Integral`` to Python, never a count to a user)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@torch.no_grad()
def _copy_matching_parameters(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Copy into ``target`` every parameter of ``source`` with the same name and shape."""
    values = dict(source.named_parameters())
    for name, p in target.named_parameters():
        if name in values and values[name].shape == p.shape:
            p.copy_(values[name].to(p))


def _pooled(best: FitResult, results: list) -> FitResult:
    """``best`` with the evaluations and restart losses of all ``results`` (one fit's bookkeeping)."""
    if len(results) == 1:
        return best
    return FitResult(best.loss, sum(r.n_evaluations for r in results),
                     [loss for r in results for loss in r.restart_losses], best.converged)
