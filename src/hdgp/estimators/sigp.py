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
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.model_selection import KFold, StratifiedKFold, check_cv
from sklearn.utils.validation import check_is_fitted
from tqdm.auto import tqdm

from .._scaling import column_scales, column_std, target_scale, varies
from .._threads import thread_budget
from ..exceptions import ConvergenceWarning, NumericalWarning
from ..sigp.cv import cross_validate, out_of_fold_means
from ..sigp.model import fit_one
from ..sigp.subspace import class_features, kernel_response_features, slice_features
from ._cv_scoring import held_out_score
from ._base import _is_int, atomic_fit
from ._pickle_version import VersionedPickle
from ._predictive import PredictiveDistribution
from ._class_weight import class_weights, fitted_class_weights, reweight_proba
from ._numeric_input import check_class_labels, validate_numeric
from ._repr import LearnedRepr
from ._variance_scale import VarianceScaling

__all__ = ["SIGPRegressor", "SIGPClassifier"]

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
        if not (cap is None or (_is_int(cap) and cap >= 1)):
            raise ValueError(f"max_kernel_rank must be None or a positive integer; got {cap!r}.")
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
        return torch.as_tensor(Xs, dtype=torch.float64)

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
                max_kernel_rank=self.max_kernel_rank,
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
            if factor.residual > 1e-3:
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


class SIGPRegressor(RegressorMixin, VarianceScaling, PredictiveDistribution, _SIGPBase):
    r"""Subspace-induced Gaussian-process regression (Tan & Mukherjee).

    Parameters
    ----------
    rank : int, list of int or "auto", default="auto"
        Subspace rank :math:`m` (``"auto"``: CV over 1, 2, 3, 5, 10).
    subspace : {"kernel", "slicing"}, default="kernel"
        Estimate of :math:`E\,\mathrm{var}(\phi(x)\mid y)` in eq. (7): an RBF kernel on
        :math:`y` (conditional covariance operator, the authors' default) or
        ``n_slices`` slices of sorted y (SIR).
    mean : {"constant", "linear"}, default="constant"
        Mean :math:`\mu = c` (covariance parameters in closed form) or
        :math:`\mu = c + X\alpha` (ridge, eq. 14 with :math:`Z = X, H = pI`, by EM).
    lengthscale : float, list or "auto", default="auto"
        RBF length-scale :math:`\ell` of :math:`\exp(-\lVert x - x'\rVert^2/2\ell^2)` on
        standardised inputs (``"auto"``: CV over :math:`\sqrt p\times(0.5, 1, 2, 4, 8,
        16, 32)`).
    eta : float, list or "auto", default="auto"
        Ridge :math:`\eta` of the conditional covariance operator in eq. (6),
        :math:`\hat E\,\mathrm{var}(\phi\mid y) + \eta I` (``"auto"``: CV over
        :math:`10^{-7}, \dots, 10^{-1}`).
    mean_penalty : float, list or "auto", default="auto"
        :math:`\lambda` of eq. (14) with :math:`H = pI` on standardised inputs and
        target, so :math:`1/\lambda` is the prior variance of the linear mean at a
        point (``"auto"``: 0.1, 1, 10). Used only with ``mean="linear"``.
    y_bandwidth : float, list or "auto", default=1/sqrt(2)
        Length-scale :math:`\ell_y` of the response kernel in standard deviations of
        y (``subspace="kernel"``; the default is the authors' ``ykpar = std(y)``;
        ``"auto"``: CV over 0.25, 0.5, 1).
    n_slices : int, default=10
        Number of slices (``subspace="slicing"``); a cross-validation training fold with
        fewer distinct target values gets one slice per value.
    cv : int, cross-validation splitter or iterable of (train, test) index arrays, default=5
        An integer means ``KFold(cv)``: contiguous folds in the data order (as in
        scikit-learn's ``GridSearchCV``) unless ``random_state`` is given. Not used
        when every hyper-parameter has a single value and ``calibrate_variance=False``
        (with ``calibrate_variance=True`` and no usable folds, e.g. fewer rows than ``cv``,
        ``variance_scale_`` stays 1 with a ``NumericalWarning``).
    scoring : None, str or callable, default=None
        What cross-validation maximises: None is minus the mean squared error of the
        standardised target; otherwise anything scikit-learn's ``GridSearchCV`` takes (a
        scorer name such as ``"r2"`` or ``"neg_mean_absolute_error"``, or
        ``scorer(estimator, X, y)``), applied to each fold's held-out predictive means in
        the target's units. It chooses the hyper-parameters only; ``variance_scale_`` is
        always the variance ratio of the chosen ones.
    kernel_tol : float, default=1e-6
        Relative trace tolerance of the pivoted-Cholesky kernel factor (0: stop only at
        round-off). For :math:`\eta` below ``kernel_tol`` the subspace also depends on
        where the factor stops (by a few degrees of principal angle at the grid's
        :math:`\eta = 10^{-7}`): the truncation then acts as part of the regularisation.
    max_kernel_rank : int or None, default=1000
        Cap on the rank of the kernel factor (memory :math:`O(n \cdot` cap)).
    max_iter : int, default=2000
        EM iterations of the final fit (``mean="linear"``).
    cv_max_iter : int, default=100
        EM iterations of each cross-validation fit (``mean="linear"``; scoring only
        needs the predictions to settle, not the last digits of the likelihood).
    tol : float, default=1e-6
        EM stops when the penalised log-likelihood gains less than ``tol * n``.
    calibrate_variance : bool, default=True
        Multiply the predictive variance (posterior and noise alike, i.e. the overall
        scale of the GP, which leaves the mean unchanged) by ``variance_scale_``, the
        mean of :math:`(y - \mu)^2 / v` over the cross-validation folds of the chosen
        hyper-parameters (fitted for this even when all of them are given). The
        subspace is estimated from the same y as the covariance parameters, so the
        in-sample maximum-likelihood variance is optimistic: uncalibrated, test errors
        on the UCI sets ran up to several times the predicted standard deviation.
        The ratio needs every training fold to keep 5 residual degrees of freedom,
        i.e. at least ``rank + 6`` rows (intercept, ``rank`` projections and 5 for the
        noise estimate; with fewer, the folds nearly interpolate and the ratio ran to
        1e4-1e13); otherwise ``variance_scale_`` stays 1 with a ``NumericalWarning``.
    random_state : int or None, default=None
        Seed for shuffling the folds of an integer ``cv``; ``None`` keeps the data
        order (ignored when ``cv`` is a splitter).
    verbose : bool, default=False
        Show a progress bar with one step per cross-validation fold and one for the
        fit on all rows.

    Attributes
    ----------
    model_ : hdgp.sigp.model.SIGPModel
        Fitted subspace, kernel factor and covariance parameters (standardised units).
    best_params_ : dict
        Hyper-parameters used (chosen by CV when not fixed).
    cv_scores_ : dict
        Mean validation score of every candidate (with ``scoring=None``: minus the MSE in
        standardised units).
    best_score_ : float
        The chosen candidate's entry of ``cv_scores_`` (NaN when nothing was cross-validated).
    kernel_rank_, kernel_residual_ : int, float
        Rank and relative trace error of the kernel factor.
    subspace_solver_ : str
        How the subspace was solved (low-rank factor and reduced eigenproblem).
    n_iter_ : int
        EM iterations (1 for the constant mean: its maximiser is one closed-form step).
    log_likelihood_ : float
        Final penalised marginal log-likelihood of the standardised target.
    variance_scale_ : float
        Factor applied to the predictive variance (1 without ``calibrate_variance``).

    Notes
    -----
    The prior :math:`g_H(x) = \beta^\top W^\top k_c(x)` has rank ``rank``, so the predictive
    variance does not grow away from the data: far from every training row the centred
    features :math:`k_c(x)` tend to a constant vector, and the predictive variance with
    them. Intervals then stay as narrow beyond the training range as inside it (an example:
    benchmarks/README.md, "Measurements behind defaults"); use a full-rank model where
    extrapolation uncertainty matters.

    References
    ----------
    Z. Tan and S. Mukherjee, "Subspace-Induced Gaussian Processes",
    arXiv:1802.07528: eqs. (6)-(7) (subspace), Algorithm 1 and eqs. (9)-(14)
    (EM and mean), Sec. 5 (prediction), Sec. 6 (cross-validated RBF parameters).

    Examples
    --------
    >>> import numpy as np
    >>> from hdgp.estimators import SIGPRegressor
    >>> X = np.random.default_rng(0).normal(size=(60, 3))
    >>> y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    >>> model = SIGPRegressor(rank=2, lengthscale=1.0, eta=1e-3).fit(X, y)
    >>> mean, std = model.predict(X[:2], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((2,), True)
    """

    def __init__(
        self,
        rank="auto",
        *,
        subspace="kernel",
        mean="constant",
        lengthscale="auto",
        eta="auto",
        mean_penalty="auto",
        y_bandwidth=_Y_BANDWIDTH,
        n_slices=10,
        cv=5,
        scoring=None,
        kernel_tol=1e-6,
        max_kernel_rank=1000,
        max_iter=2000,
        cv_max_iter=100,
        tol=1e-6,
        calibrate_variance=True,
        random_state=None,
        verbose=False,
    ):
        self.rank = rank
        self.subspace = subspace
        self.mean = mean
        self.lengthscale = lengthscale
        self.eta = eta
        self.mean_penalty = mean_penalty
        self.y_bandwidth = y_bandwidth
        self.n_slices = n_slices
        self.cv = cv
        self.scoring = scoring
        self.kernel_tol = kernel_tol
        self.max_kernel_rank = max_kernel_rank
        self.max_iter = max_iter
        self.cv_max_iter = cv_max_iter
        self.tol = tol
        self.calibrate_variance = calibrate_variance
        self.random_state = random_state
        self.verbose = verbose

    @atomic_fit
    def fit(self, X, y):
        """Fit SIGP (subspace, then EM) to data, choosing hyper-parameters by CV if needed.

        Returns
        -------
        self
        """
        X, y = validate_numeric(self, X, y, y_numeric=True, dtype=np.float64, order="C")
        self._check_common(X.shape[0])
        if self.subspace not in ("kernel", "slicing"):
            raise ValueError(f"subspace must be 'kernel' or 'slicing'; got {self.subspace!r}.")
        self.y_mean_, self.y_scale_ = target_scale(y)
        if not varies(self.y_scale_, self.y_mean_):
            raise ValueError(f"The target is constant (or varies only at rounding level around {self.y_mean_:.6g}); "
                             "SIGP needs a varying target (subtract the offset if it varies).")
        if self.subspace == "slicing":
            if not (isinstance(self.n_slices, numbers.Integral) and self.n_slices >= 2):
                raise ValueError(f"n_slices must be an integer >= 2; got {self.n_slices!r}.")
            distinct = np.unique(y).size
            if distinct < self.n_slices:
                raise ValueError(
                    f"The target has {distinct} distinct values, fewer than n_slices="
                    f"{self.n_slices}; lower n_slices or use subspace='kernel'."
                )
            bandwidths = []
        else:
            bandwidths = _candidates("y_bandwidth", self.y_bandwidth)
        Xs = self._standardise(X, fit=True)
        Y = torch.as_tensor((y - self.y_mean_) / self.y_scale_, dtype=torch.float64)[:, None]

        def make_responses(Yf):
            if self.subspace == "slicing":
                # a CV training fold may hold fewer distinct values than the target (checked above): it
                # gets as many slices as it has values (ties merge slices anyway, see slice_features)
                slices = max(2, min(self.n_slices, int(torch.unique(Yf[:, 0]).numel())))
                return [("slices", slice_features(Yf[:, 0], slices), 0.0)]
            return [(bw, kernel_response_features(Yf[:, 0], bw), _RESPONSE_RIDGE) for bw in bandwidths]

        def make_folds():
            if not _is_int(self.cv):
                return _given_folds(self.cv, X, y)
            if self.cv > X.shape[0]:
                raise ValueError(f"SIGP's {self.cv}-fold cross-validation needs at least {self.cv} samples; "
                                 f"got n_samples = {X.shape[0]}. Lower cv.")
            shuffle = self.random_state is not None
            return list(KFold(self.cv, shuffle=shuffle, random_state=self.random_state).split(X, y))

        with thread_budget(X.shape[0]):
            score = held_out_score(self.scoring, self, y_mean=self.y_mean_, y_scale=self.y_scale_)
            self._fit_sigp(Xs, Y, make_responses, score, make_folds, calibrate=self.calibrate_variance)
        self.noise_ = self.model_.fits[0].noise * self.y_scale_**2
        return self

    def predict(self, X, return_std=False, return_cov=False, *, latent=False):
        """Predictive mean (and standard deviation or covariance, Sec. 5) in the target's units.

        Parameters
        ----------
        X : array-like of shape (t, p)
        return_std : bool, default=False
            Also return :math:`\\sqrt{\\operatorname{diag}\\operatorname{var}(y_t)}`
            (the paper's diagonal formula, noise included, times ``variance_scale_``).
        return_cov : bool, default=False
            Also return the predictive covariance (not with ``return_std``).
        latent : bool, default=False
            The uncertainty of the latent :math:`f` (without the noise variance) instead
            of a new observation's.

        Returns
        -------
        mean : ndarray of shape (t,)
        std : ndarray of shape (t,), only if ``return_std``
        cov : ndarray of shape (t, t), only if ``return_cov``
        """
        if return_std and return_cov:
            raise ValueError("At most one of return_std and return_cov can be requested.")
        mean, var = self._latent(X, latent=latent, full_cov=return_cov)
        mean = mean[:, 0].numpy() * self.y_scale_ + self.y_mean_
        if not (return_std or return_cov):
            return mean
        # models saved before the calibration have no variance_scale_: uncalibrated
        var = var[..., 0].numpy() * getattr(self, "variance_scale_", 1.0)
        if return_cov:
            return mean, var * self.y_scale_**2
        return mean, np.sqrt(var) * self.y_scale_  # the std's scale apart: y_scale_**2 may underflow


class SIGPClassifier(ClassifierMixin, _SIGPBase):
    r"""SIGP classification by regressing ±1 codes (one-vs-rest for more than two classes).

    The subspace is sliced on the classes (eq. 7 with :math:`n_h` the class sizes;
    for two classes its leading direction is the regularised kernel Fisher
    discriminant) and shared by all classes; each class's ±1 code gets its own
    covariance fit, as the authors' code does for ±1 labels. The decision is the
    sign of the latent mean (binary) or its arg-max.
    ``predict_proba`` is a softmax of the latent means with one temperature
    fitted by maximum likelihood on out-of-fold latent means from the
    cross-validation folds (leave-one-out means when no fold is usable; see
    ``temperature_source_``): the calibrated link, whose arg-max equals ``predict``.

    Parameters
    ----------
    rank, mean, lengthscale, eta, mean_penalty, kernel_tol, max_kernel_rank, max_iter, cv_max_iter, tol
        As in :class:`SIGPRegressor`.
    cv : int, cross-validation splitter or iterable of (train, test) index arrays, default=5
        An integer means ``StratifiedKFold(cv)`` (fewer folds if a class is smaller
        than ``cv``), in the data order unless ``random_state`` is given. Used only
        when a hyper-parameter is chosen by CV: with single values of ``rank``,
        ``lengthscale``, ``eta`` (and ``mean_penalty`` for ``mean="linear"``) a class
        may have a single sample.
    scoring : None, str or callable, default=None
        What cross-validation maximises. None: minus the squared error of the ±1 codes of
        the held-out latent means, a smooth proxy of accuracy with few ties. Otherwise a
        scikit-learn scorer name or ``scorer(estimator, X, y)`` of decisions or latent
        scores (``"accuracy"``, ``"balanced_accuracy"``, ``"f1"`` (``pos_label=1``, as in
        scikit-learn; use ``make_scorer(f1_score, pos_label=...)`` for other labels),
        ``"roc_auc"`` for two classes, ...), with the held-out decision being the sign /
        arg-max of the latent means, without ``class_weight``. Scorers of probabilities
        (``"neg_log_loss"``) are refused: the probability link is fitted after the choice.
        On the SIGP paper's sets (10 random splits, ``benchmarks/results/sigp``), choosing by
        accuracy or F1 lowered the test F1 on heart (m = 1: 0.805 → 0.792 / 0.775) and cancer
        (0.945 → 0.943); on german (30 % positive) choosing by F1 raised it (0.518 → 0.560),
        though less than ``class_weight="balanced"`` does.
    class_weight : None, "balanced" or dict, default=None
        Weights :math:`w_k` applied to the calibrated probabilities,
        :math:`p_w(k \mid x) \propto w_k\, p(k \mid x)`, i.e. a shift
        :math:`\log w_k` of the softmax scores (``predict`` is their arg-max; see
        :mod:`hdgp.estimators._class_weight`). ``"balanced"`` predicts as if the
        classes were equally frequent; the fit itself is unweighted.
    random_state : int or None, default=None
        Seed for shuffling the folds of an integer ``cv``.
    verbose : bool, default=False
        As in :class:`SIGPRegressor` (the out-of-fold fits of the temperature add a step per fold).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_weight_ : ndarray of shape (n_classes,) or None
        The weights :math:`w_k` in the order of ``classes_``.
    model_ : hdgp.sigp.model.SIGPModel
    best_params_, cv_scores_, best_score_, kernel_rank_, kernel_residual_, subspace_solver_, n_iter_, log_likelihood_
        As in :class:`SIGPRegressor`.
    temperature_ : float
        Inverse temperature :math:`a` of the link :math:`p_k \propto \exp(a s_k)`, fitted by
        maximum likelihood to held-out scores :math:`s`.
    temperature_source_ : {"cross-validation", "leave-one-out"}
        Where those scores come from: out-of-fold means of the chosen hyper-parameters on
        the CV folds, or (no usable folds, e.g. a class with one row) leave-one-out means of
        the full fit, which still owe something to each row's label through the subspace
        and are over-confident on small data.
    """

    def __init__(
        self,
        rank="auto",
        *,
        mean="constant",
        lengthscale="auto",
        eta="auto",
        mean_penalty="auto",
        cv=5,
        scoring=None,
        kernel_tol=1e-6,
        max_kernel_rank=1000,
        max_iter=2000,
        cv_max_iter=100,
        tol=1e-6,
        class_weight=None,
        random_state=None,
        verbose=False,
    ):
        self.rank = rank
        self.mean = mean
        self.lengthscale = lengthscale
        self.eta = eta
        self.mean_penalty = mean_penalty
        self.cv = cv
        self.scoring = scoring
        self.kernel_tol = kernel_tol
        self.max_kernel_rank = max_kernel_rank
        self.max_iter = max_iter
        self.cv_max_iter = cv_max_iter
        self.tol = tol
        self.class_weight = class_weight
        self.random_state = random_state
        self.verbose = verbose

    @atomic_fit
    def fit(self, X, y):
        """Fit one SIGP per ±1 class code on a shared class-sliced subspace.

        Returns
        -------
        self
        """
        X, y = validate_numeric(self, X, y, dtype=np.float64, order="C")
        check_class_labels(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"SIGPClassifier needs at least 2 classes; got 1 class ({self.classes_[0]!r})."
            )
        self.class_weight_ = class_weights(self.class_weight, self.classes_, y)
        self._check_common(X.shape[0])
        Xs = self._standardise(X, fit=True)
        onehot = class_features(torch.as_tensor(codes))
        Y = 2.0 * onehot - 1.0
        if self.classes_.size == 2:
            Y = Y[:, 1:]

        def make_responses(Yf):
            labels = (Yf[:, 0] > 0).long() if Yf.shape[1] == 1 else Yf.argmax(1)
            return [("classes", class_features(labels), 0.0)]

        def make_folds():
            if not _is_int(self.cv):
                return _given_folds(self.cv, X, codes)
            counts = np.bincount(codes)
            if counts.min() < 2:
                raise ValueError(
                    f"Cross-validation needs at least 2 samples of every class; class "
                    f"{self.classes_.tolist()[counts.argmin()]!r} has 1. Give rank, lengthscale and eta (and "
                    "mean_penalty with mean='linear') single values, so that nothing is cross-validated."
                )
            n_splits = min(self.cv, int(counts.min()))
            shuffle = self.random_state is not None
            return list(StratifiedKFold(n_splits, shuffle=shuffle, random_state=self.random_state).split(X, codes))

        with thread_budget(X.shape[0]):
            score = held_out_score(self.scoring, self, classes=self.classes_)
            held_out = self._fit_sigp(Xs, Y, make_responses, score, make_folds, out_of_fold=True)
            if held_out is None or torch.isnan(held_out).any():
                held_out, self.temperature_source_ = self.model_.loo_mean(Xs, Y), "leave-one-out"
            else:
                self.temperature_source_ = "cross-validation"
            self.temperature_ = self._fit_temperature(self._scores_matrix(held_out), codes)
        return self

    @staticmethod
    def _scores_matrix(latent: torch.Tensor) -> np.ndarray:
        """Per-class scores (t, K): (-s, s) for the binary latent s."""
        s = latent.numpy()
        return np.hstack([-s, s]) if s.shape[1] == 1 else s

    @staticmethod
    def _log_softmax(scores: np.ndarray, a: float) -> np.ndarray:
        z = a * scores
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))

    @staticmethod
    def _fit_temperature(scores: np.ndarray, codes: np.ndarray) -> float:
        r"""Inverse temperature of the softmax fitted to held-out ``scores`` (out-of-fold or
        leave-one-out latent means, never in-sample ones) by cross-entropy with Platt's targets.

        A row of class :math:`k` (:math:`n_k` rows) has target :math:`(n_k + 1)/(n_k + 2)` on its
        class and :math:`1/((n_k + 2)(K - 1))` on each other (Platt 1999, the prior of
        Laplace's rule of succession; for two classes his targets exactly). With hard 0/1
        targets the maximum-likelihood temperature of held-out scores that separate the
        classes is infinite: on 40 separable rows it ran to the search bound, and test points
        on the wrong side of the true boundary got probability 1e-83.
        """
        n_classes = scores.shape[1]
        counts = np.bincount(codes, minlength=n_classes).astype(float)
        hit = (counts[codes] + 1.0) / (counts[codes] + 2.0)
        targets = np.repeat(((1.0 - hit) / (n_classes - 1))[:, None], n_classes, axis=1)
        targets[np.arange(codes.size), codes] = hit

        def nll(log_a):
            return -(targets * SIGPClassifier._log_softmax(scores, math.exp(log_a))).sum(1).mean()

        res = minimize_scalar(nll, bounds=(-6.0, 6.0), method="bounded")
        return float(math.exp(res.x))

    def decision_function(self, X):
        """Latent SIGP means: shape (t,) for two classes, (t, n_classes) otherwise.

        With ``class_weight`` they are shifted by the log weights in units of the inverse
        temperature :math:`a`, :math:`s_k + \\log(w_k)/a` (two classes: :math:`s + \\log(w_1/w_0)/(2a)`),
        so that, as in scikit-learn, ``predict`` is their arg-max (two classes: ``classes_[1]``
        where positive) and ``predict_proba`` the softmax of :math:`a` times them (two classes:
        of :math:`a(-s, s)`).
        """
        mean, _ = self._latent(X)
        out = mean.numpy()
        weights = fitted_class_weights(self)
        if weights is not None:
            shift = np.log(weights) / self.temperature_
            out = out + (0.5 * (shift[1] - shift[0]) if out.shape[1] == 1 else shift)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """Class with the largest latent mean (the sign of the ±1 regression for two classes).

        This is the arg-max of :meth:`predict_proba` (a monotone link of the means),
        reweighted when ``class_weight`` is set.
        """
        proba = self.predict_proba(X)  # checks that the model is fitted
        return self.classes_[proba.argmax(1)]

    def predict_proba(self, X):
        """Calibrated probabilities :math:`p_k \\propto w_k \\exp(a\\,s_k)`, shape (t, n_classes)."""
        scores = self._scores_matrix(self._latent(X)[0])
        return reweight_proba(np.exp(self._log_softmax(scores, self.temperature_)), fitted_class_weights(self))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (as the GP and OAK classifiers have)."""
        return np.log(np.clip(self.predict_proba(X), np.finfo(float).tiny, None))
