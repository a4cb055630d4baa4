r"""scikit-learn estimators for subspace-induced GPs (Tan & Mukherjee).

:class:`SIGPRegressor` and :class:`SIGPClassifier` fit the model

.. math:: y = c + Z\alpha + H K W \bar\beta + \gamma, \quad
          \bar\beta \sim N(0, \Sigma_\beta), \quad \gamma \sim N(0, \sigma^2 I),

with :math:`W` the rank-:math:`m` SDR subspace of the RBF RKHS (eqs. 6–7, with
the ridge on the conditional covariance operator, see :mod:`hdgp.sigp.subspace`),
:math:`\Sigma_\beta, \sigma^2` by maximum marginal likelihood (Algorithm 1,
eqs. 9–14; in closed form for the default constant mean,
:func:`hdgp.sigp.em.fit_constant_mean`) and predictions from Sec. 5.
Hyper-parameters given as ``"auto"`` or as a list are chosen by K-fold
cross-validation on the training data (Sec. 6: "parameters ... obtained by
cross-validation on the training data"; :mod:`hdgp.sigp.cv`); a single value
fixes them.

Recipe (defaults). The mean is the intercept only: all the signal is then
carried by the random part :math:`HKW\bar\beta`, whose posterior mean is the
least-squares fit on the :math:`m` SDR projections shrunk by
:math:`1 - \hat\sigma^2/\lVert z\rVert^2`. (The authors' code uses
:math:`\mu = c + HKW\alpha` with :math:`\lambda = 0`, whose predictions are the
unshrunk least-squares fit (they differ from ours by that factor: 6e-4 at noise 0.1,
4e-2 at noise 1 on a standardised target) and which sends :math:`\hat\beta` to 0; a linear mean in :math:`x`,
``mean="linear"``, absorbs what a nearly linear kernel would explain and also
starves :math:`\hat\beta`.) The response kernel of the kernel SDR estimate has
the authors' defaults: bandwidth :math:`\mathrm{sd}(y)` in
:math:`\exp(-(y - y')^2/b^2)` (``y_bandwidth = 1/\sqrt 2`` in our
:math:`\exp(-(y-y')^2/(2\ell_y^2))` convention) and smoother ridge
:math:`\varepsilon = 10^{-4}`. Cross-validation covers the RBF length-scale,
:math:`\eta` and, with ``rank="auto"``, :math:`m`; an integer ``cv`` means
scikit-learn's ``KFold`` / ``StratifiedKFold`` without shuffling (as in
``GridSearchCV``; ``random_state`` shuffles), so ordered data are validated on
contiguous blocks.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from collections.abc import Iterable

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.model_selection import check_cv
from sklearn.utils.validation import check_is_fitted
from gpytorch.kernels import ScaleKernel
from tqdm.auto import tqdm

from .._scaling import column_scales, column_std, varies
from .._threads import thread_budget

from ..exceptions import ConvergenceWarning, NotPositiveDefiniteError, NumericalWarning
from ..inference.exact import ExactGPModel
from ..kernels import RBFARDKernel, log_positive
from ..training import fit_hyperparameters
from ..sigp.cv import cross_validate, out_of_fold_means
from ..sigp.model import fit_one
from ._base import _is_int
from ._pickle_version import VersionedPickle
from ._numeric_input import validate_numeric
from ._repr import LearnedRepr


#: Ridge epsilon of the kernel estimate of E var(phi(x) | y) (hdgp.sigp.subspace); the
#: authors' default eta1 = 1e-4.
_RESPONSE_RIDGE = 1e-4
#: Response-kernel bandwidth in sd(y): the authors' exp(-(y - y')^2 / sd(y)^2).
_Y_BANDWIDTH = 1.0 / math.sqrt(2.0)
#: Residual degrees of freedom d every CV training fold must keep beyond the intercept and
#: the rank for the variance calibration. The calibration averages (y - mu)^2 / v, and v is
#: dominated by the fold's noise estimate sigma^2 chi^2_d / (n - 1): E[1/chi^2_d] is finite
#: only for d > 2 and its variance only for d > 4 (at d = 0, the fit interpolates and v hits
#: the noise floor, giving ratios of 1e10 and more).
_CALIBRATION_DOF = 5
#: Fewest rows a CV training fold may have: one row has no spread in x or y, so neither
#: the subspace (eq. 7) nor the covariance parameters can be estimated from it.
_MIN_TRAIN_ROWS = 2
#: Cross-validation screens the grid when it has more (length-scale, response, eta) settings than
#: this: all of them on the first 2 folds, these best on the rest (:func:`hdgp.sigp.cv.cross_validate`).
_CV_SCREEN = 10
#: Rows of the quick RBF-ARD fit that sets the input weights of ``input_scaling="ard"``: on 500 of
#: pumadyn32nm's rows (split 1, 32 features) it found no relevant feature and SIGP predicted the mean, on
#: 1,000 it found the four (test RMSE 0.989 -> 0.208; benchmarks/README.md, "Measurements behind defaults").
_ARD_ROWS = 1000
#: ``max_kernel_rank="auto"``: the largest rank r <= ``_KERNEL_RANK_CAP`` with n r^2 <= this budget
#: (multiply-adds of one pivoted Cholesky and of one reduced pencil Phi^T H Phi, eq. 7), so
#: the cap stays 1000 up to n = 1000 rows and falls as 1/sqrt(n) beyond (408 at n = 6000).
_KERNEL_RANK_BUDGET = 1e9
_KERNEL_RANK_CAP = 1000
_AUTO_GRIDS = {
    "rank": (1, 2, 3, 5, 10),
    # times sqrt(number of features): from very local (k ~ e^-4 between typical points)
    # to nearly polynomial (the authors' housing demo uses ~100 sqrt(p))
    "lengthscale": (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0),
    # ridge of the covariance operator, in units of the kernel variance (tr var(phi) <= 1)
    "eta": (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
    "mean_penalty": (0.1, 1.0, 10.0),
    "y_bandwidth": (0.25, 0.5, 1.0),
}


def _candidates(name: str, value, scale: float = 1.0) -> list:
    """``"auto"`` -> the default grid; a scalar -> [scalar]; a list -> itself (validated > 0)."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{name} must be 'auto', a positive number or a list of them; got {value!r}.")
        values = [v * scale for v in _AUTO_GRIDS[name]]
    elif isinstance(value, (numbers.Number, np.number)):
        values = [value]
    else:
        values = list(value)
    zero_allowed = name == "mean_penalty"
    if not values or any(not isinstance(v, (numbers.Number, np.number)) or isinstance(v, bool) or not np.isfinite(v)
                         or v < 0 or (v == 0 and not zero_allowed) for v in values):
        kind = "non-negative" if zero_allowed else "positive"
        raise ValueError(f"{name} must be 'auto', a {kind} number or a list of them; got {value!r}.")
    if name == "rank":
        if any(int(v) != v for v in values):
            raise ValueError(f"rank must be a positive integer (or 'auto' or a list); got {value!r}.")
        values = [int(v) for v in values]
    return values


def _kernel_rank_cap(value, n: int) -> int | None:
    """``max_kernel_rank`` resolved for ``n`` training rows (``"auto"``: see ``_KERNEL_RANK_BUDGET``)."""
    if isinstance(value, str):
        return min(_KERNEL_RANK_CAP, max(1, int(math.sqrt(_KERNEL_RANK_BUDGET / max(n, 1)))))
    return value


def _calibration_obstacle(folds, rank: int, ratio: float = 1.0, mean_features: int = 0) -> str | None:
    r"""Why the CV folds cannot calibrate the variance of a rank-``rank`` fit (None if they can).

    A training fold of :math:`n_f` rows leaves :math:`d = n_f - 1 - q - m` residual degrees
    of freedom to its noise estimate (intercept, ``mean_features`` :math:`= q` columns of a
    linear mean, counted unpenalised, and :math:`m` projections); the calibration needs
    :math:`d \ge` ``_CALIBRATION_DOF`` in every fold, and a finite positive ``ratio``. (A
    linear mean with :math:`q \ge n_f - 1` interpolates the fold, and its noise estimate collapses.)
    """
    if not folds:
        return "the cross-validation splitter gave no folds"
    smallest = min(len(train) for train, _ in folds)
    needed = rank + 1 + mean_features + _CALIBRATION_DOF
    if smallest < needed:
        linear = f"with a linear mean on {mean_features} features " if mean_features else ""
        terms = f"rank + {mean_features} + {1 + _CALIBRATION_DOF}" if mean_features else f"rank + {1 + _CALIBRATION_DOF}"
        return (f"the smallest cross-validation training fold has {smallest} rows, and calibrating a "
                f"rank-{rank} fit {linear}needs at least {terms} = {needed} (lower rank or cv"
                f"{', or use mean=' + repr('constant') if mean_features else ''})")
    if not (math.isfinite(ratio) and ratio > 0):
        return f"the cross-validated variance ratio is {ratio!r}"
    return None


def _warn_uncalibrated(reason: str) -> None:
    """Warn (at the caller of ``fit``) that ``variance_scale_`` stays 1."""
    warnings.warn(
        f"The predictive variance is not calibrated (variance_scale_ = 1): {reason}.",
        NumericalWarning,
        stacklevel=5,
    )


def _is_splitter_or_splits(cv) -> bool:
    """A splitter (an object with ``split``) or an iterable of (train, test) pairs, as scikit-learn's
    ``check_cv`` accepts; not a string (which has a ``split`` method) nor a bool."""
    return not isinstance(cv, (str, bytes, bool)) and (hasattr(cv, "split") or isinstance(cv, Iterable))


def _given_folds(cv, X, y) -> list:
    """The folds of a non-integer ``cv``: a splitter's ``split(X, y)``, or the given (train, test) pairs
    (scikit-learn's ``check_cv``)."""
    return list(check_cv(cv).split(X, y))


def _is_real(value) -> bool:
    """A finite real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)


class _SIGPBase(LearnedRepr, VersionedPickle, BaseEstimator):
    """Shared fitting machinery of the SIGP estimators (not public)."""

    def _store_params(self, arguments: dict) -> None:
        """Store every constructor argument unchanged under its own name (scikit-learn's contract:
        ``get_params`` and ``clone`` read them back by the names of the ``__init__`` signature)."""
        for name in self._get_param_names():
            setattr(self, name, arguments[name])

    def _check_common(self, n: int) -> None:
        if n < 3:
            raise ValueError(f"SIGP needs at least 3 samples to fit; got n_samples = {n}.")
        if self.mean not in ("linear", "constant"):
            raise ValueError(f"mean must be 'linear' or 'constant'; got {self.mean!r}.")
        integer = isinstance(self.cv, numbers.Integral) and not isinstance(self.cv, bool)
        if not ((integer and self.cv >= 2) or (not integer and _is_splitter_or_splits(self.cv))):
            raise ValueError(
                "cv must be an integer >= 2, a scikit-learn cross-validation splitter or an iterable of "
                f"(train, test) index arrays; got {self.cv!r}."
            )
        for name in ("max_iter", "cv_max_iter"):
            value = getattr(self, name)
            if not (_is_int(value) and value >= 1):
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        cap = self.max_kernel_rank
        if not (cap is None or cap == "auto" or (_is_int(cap) and cap >= 1)):
            raise ValueError(f"max_kernel_rank must be None or a positive integer (or 'auto'); got {cap!r}.")
        cap = _kernel_rank_cap(cap, n)
        if not (_is_real(self.kernel_tol) and 0 <= self.kernel_tol < 1):
            raise ValueError(f"kernel_tol must be a float in [0, 1) (a share of the kernel's trace); "
                             f"got {self.kernel_tol!r}.")
        if not (_is_real(self.tol) and self.tol >= 0):
            raise ValueError(f"tol must be a non-negative float; got {self.tol!r}.")
        calibrate = getattr(self, "calibrate_variance", False)
        if not isinstance(calibrate, (bool, np.bool_)):
            raise ValueError(f"calibrate_variance must be True or False; got {calibrate!r}.")
        ranks = _candidates("rank", self.rank)
        if not isinstance(self.rank, str) and max(ranks) >= n:
            raise ValueError(
                f"rank={self.rank!r} must be at least 1 and smaller than the number of "
                f"training samples ({n})."
            )
        if not isinstance(self.rank, str) and cap is not None and max(ranks) > cap:
            raise ValueError(
                f"rank={self.rank!r} exceeds max_kernel_rank={cap}: the subspace lies in the span of the "
                "kernel factor, whose rank is capped there. Lower rank or raise max_kernel_rank."
            )

    def _check_training_folds(self, folds, n: int) -> None:
        """Every CV training fold has at least ``_MIN_TRAIN_ROWS`` rows (else ValueError)."""
        if not folds:
            raise ValueError(f"cv={self.cv!r} gave no cross-validation folds.")
        smallest = min(len(train) for train, _ in folds)
        if smallest < _MIN_TRAIN_ROWS:
            raise ValueError(
                f"SIGP's cross-validation with cv={self.cv!r} on n_samples = {n} trains on a fold of "
                f"{smallest} row(s); every training fold needs at least {_MIN_TRAIN_ROWS}. Lower cv, add "
                "samples, or give every hyper-parameter a single value (then nothing is cross-validated)."
            )

    def _standardise(self, X: np.ndarray, fit: bool) -> torch.Tensor:
        """Columns to zero mean / unit variance with training statistics; constant columns dropped."""
        if fit:
            self.x_mean_, self.x_scale_ = column_scales(X, getattr(self, "feature_names_in_", None))
            self.feature_mask_ = varies(column_std(X), self.x_mean_)
            if not self.feature_mask_.any():
                raise ValueError("All features are constant; SIGP needs at least one varying feature.")
        Xs = ((X - self.x_mean_) / self.x_scale_)[:, self.feature_mask_]
        weights = getattr(self, "input_weights_", None)  # absent in models saved before input_scaling
        if weights is not None and not fit:
            Xs = Xs * weights
        return torch.as_tensor(Xs, dtype=torch.float64)

    def _fit_input_weights(self, Xs: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        r"""Apply ``input_scaling`` to the standardised training inputs; sets ``input_weights_``.

        The RBF kernel of SIGP is isotropic, :math:`k(x, x') = \exp(-\lVert x - x'\rVert^2/(2\ell^2))`:
        on standardised inputs every feature weighs the same in the distance, so features that do
        not affect :math:`y` swamp those that do, and no single :math:`\ell` resolves the function
        (the subspace of eq. 7 lies in the span of that kernel's features). With
        ``input_scaling="ard"`` feature :math:`d` is multiplied by :math:`w_d \propto 1/\ell_d`, the
        length-scales of an RBF-ARD GP fitted by marginal likelihood to at most ``_ARD_ROWS``
        rows of the (first) standardised target, normalised to :math:`\sum_d w_d^2 = p` so that the
        :math:`\sqrt p`-scaled length-scale grid keeps its meaning. ``None``: :math:`w = 1`.
        """
        self.input_weights_ = None
        if getattr(self, "input_scaling", None) is None or Xs.shape[1] < 2:
            return Xs
        n, p = Xs.shape
        rng = np.random.default_rng(0 if self.random_state is None else self.random_state)
        rows = torch.as_tensor(np.sort(rng.choice(n, size=min(n, _ARD_ROWS), replace=False)))
        kernel = ScaleKernel(RBFARDKernel(ard_num_dims=p, lengthscale_constraint=log_positive()))
        kernel.base_kernel.lengthscale = math.sqrt(p)
        gp = ExactGPModel(kernel).double()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit_hyperparameters(gp, Xs[rows], Y[rows, 0])
        except (NotPositiveDefiniteError, ValueError):
            return Xs
        ell = kernel.base_kernel.lengthscale.detach().reshape(-1).double().cpu().numpy()
        w = 1.0 / ell
        if not (np.all(np.isfinite(w)) and w.sum() > 0):
            return Xs
        w = w * math.sqrt(p / float(w @ w))
        self.input_weights_ = w
        return Xs * torch.as_tensor(w, dtype=Xs.dtype)

    def _fit_sigp(self, X: torch.Tensor, Y: torch.Tensor, make_responses, score, make_folds,
                  calibrate: bool = False, out_of_fold: bool = False) -> torch.Tensor | None:
        """Choose hyper-parameters by CV when any is not fixed, then fit on all data.

        With ``out_of_fold``, returns the chosen hyper-parameters' out-of-fold means on the
        CV folds (:func:`~hdgp.sigp.cv.out_of_fold_means`), or None where no usable folds
        exist (a class with one row, a fold too small, a rank too large for a fold).

        ``make_folds()`` returns the CV folds; it is called only when there is something
        to choose or to calibrate, so fixed hyper-parameters need no CV-sized data.

        With ``calibrate``, ``variance_scale_`` is the cross-validated variance ratio of
        the chosen hyper-parameters (:func:`~hdgp.sigp.cv.cross_validate`; the folds are
        fitted for it even when every hyper-parameter is fixed), otherwise 1. It also
        stays 1, with a warning, when a training fold is too small for the chosen rank
        (:func:`_calibration_obstacle`).
        """
        # verbose: one step per cross-validation fit and one for the fit on all rows
        with tqdm(desc="SIGP", disable=not self.verbose, leave=False) as bar:
            n, p = X.shape
            grid = dict(
                lengthscales=_candidates("lengthscale", self.lengthscale, math.sqrt(p)),
                etas=_candidates("eta", self.eta),
                ranks=[m for m in _candidates("rank", self.rank) if m < n],
                # the penalty of eq. (14) only exists for the linear mean
                mean_penalties=_candidates("mean_penalty", self.mean_penalty) if self.mean == "linear" else [None],
            )
            options = dict(
                mean=self.mean,
                kernel_tol=self.kernel_tol,
                max_kernel_rank=_kernel_rank_cap(self.max_kernel_rank, n),
                max_iter=self.max_iter,
                tol=self.tol,
            )
            mean_features = p if self.mean == "linear" else 0
            if mean_features >= n - 1:
                warnings.warn(
                    f"mean='linear' on {p} features and {n} rows: the linear mean alone can fit the target "
                    "exactly, so the penalised likelihood (eq. 14) has no maximum (it grows without bound "
                    "as the noise variance goes to 0) and EM stops at a local optimum. mean='constant' "
                    "is well posed here.",
                    NumericalWarning,
                    stacklevel=4,
                )
            responses = make_responses(Y)
            fixed = all(len(v) == 1 for v in grid.values()) and len(responses) == 1
            self.variance_scale_, self.cv_scores_, self.best_score_ = 1.0, {}, float("nan")
            folds = []
            if not fixed:
                folds = make_folds()
            elif calibrate:  # fixed hyper-parameters fit on data too small for cv: only the calibration is lost
                try:
                    folds = make_folds()
                except ValueError as exc:
                    _warn_uncalibrated(f"no cross-validation folds ({exc})")
                    calibrate = False
            bar.total = len(folds) + 1 + (len(folds) if out_of_fold else 0)
            if fixed:
                self.best_params_ = dict(
                    lengthscale=grid["lengthscales"][0], response=responses[0][0], eta=grid["etas"][0],
                    rank=grid["ranks"][0],
                )
                if self.mean == "linear":
                    self.best_params_["mean_penalty"] = grid["mean_penalties"][0]
                if calibrate and (obstacle := _calibration_obstacle(folds, self.best_params_["rank"],
                                                                   mean_features=mean_features)):
                    _warn_uncalibrated(obstacle)
                    calibrate = False
            if not fixed:
                self._check_training_folds(folds, n)
            if not fixed or calibrate:
                cv_options = dict(options, max_iter=min(self.cv_max_iter, self.max_iter))
                if not fixed:
                    cv_options["screen"] = _CV_SCREEN
                bar.set_description(f"SIGP {len(folds)}-fold cross-validation")
                try:
                    best, self.cv_scores_, variance_ratio = cross_validate(
                        X, Y, folds, make_responses, score, on_fold=bar.update, **grid, **cv_options
                    )
                except ValueError:
                    if not fixed:
                        raise
                    warnings.warn(
                        f"rank={self.best_params_['rank']} cannot be fitted on the cross-validation folds, "
                        "so the predictive variance is not calibrated (variance_scale_ = 1).",
                        NumericalWarning,
                        stacklevel=4,
                    )
                else:
                    self.best_score_ = max(self.cv_scores_.values())  # best's (the first maximum on ties)
                    if not fixed:  # (fixed: the one candidate, already in best_params_ in parameter order)
                        self.best_params_ = best
                    if calibrate and (obstacle := _calibration_obstacle(folds, best["rank"], variance_ratio,
                                                                        mean_features)):
                        _warn_uncalibrated(obstacle)
                    elif calibrate:
                        self.variance_scale_ = variance_ratio
            best = self.best_params_
            bar.set_description("SIGP fit on all rows")
            self.model_ = fit_one(X, Y, responses, best, **options)
            bar.update()
            if self.model_ is None:
                raise ValueError(
                    f"rank={best['rank']} exceeds the numerical rank of the kernel matrix; "
                    "lower `rank` or the length-scale."
                )
            # prediction reads the pivot rows only: without the (n, r) training features (158 MB at
            # n = 20,000) the model and its file grow with the kernel rank, not with n
            factor = self.model_.factor = dataclasses.replace(self.model_.factor, features=None)
            self.kernel_rank_, self.kernel_residual_ = factor.rank, factor.residual
            self.subspace_solver_ = (
                f"pivoted Cholesky of K, rank {factor.rank} (relative trace error "
                f"{factor.residual:.1e}), then a dense {factor.rank}x{factor.rank} symmetric "
                "generalised eigenproblem"
            )
            if factor.residual > 1e-3 and not isinstance(self.max_kernel_rank, str):
                warnings.warn(
                    f"The kernel factor stopped at max_kernel_rank={self.max_kernel_rank} with "
                    f"relative trace error {factor.residual:.2g}; increase max_kernel_rank.",
                    NumericalWarning,
                    stacklevel=4,
                )
            if not all(f.converged for f in self.model_.fits):
                warnings.warn(
                    f"SIGP EM did not converge in max_iter={self.max_iter} iterations; "
                    "increase max_iter or tol.",
                    ConvergenceWarning,
                    stacklevel=4,
                )
            self.n_iter_ = max(f.n_iter for f in self.model_.fits)
            self.log_likelihood_ = sum(f.objective[-1] for f in self.model_.fits)
            if not out_of_fold:
                return None
            if not folds:
                try:
                    folds = make_folds()
                except ValueError:  # e.g. a class with one row: no stratified folds
                    return None
                bar.total += len(folds)
            if min(len(train) for train, _ in folds) < max(_MIN_TRAIN_ROWS, best["rank"] + 1):
                return None
            bar.set_description("SIGP out-of-fold means")
            return out_of_fold_means(X, Y, folds, make_responses, best, on_fold=bar.update, **options)

    def _latent(self, X, **options) -> tuple[torch.Tensor, torch.Tensor]:
        check_is_fitted(self, "model_")
        X = validate_numeric(self, X, reset=False, dtype=np.float64, order="C")
        with thread_budget(X.shape[0]):
            return self.model_.predict(self._standardise(X, fit=False), **options)
