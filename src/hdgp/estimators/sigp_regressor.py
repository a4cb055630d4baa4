"""``SIGPRegressor``: subspace-induced GP regression (Tan & Mukherjee).

The model, its hyper-parameter grids and the shared cross-validated fit are in
:mod:`hdgp.estimators._sigp_base`.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.model_selection import KFold

from .._scaling import target_scale, varies
from .._threads import thread_budget
from ..sigp.subspace import kernel_response_features, slice_features
from ._cv_scoring import held_out_score
from ._base import _is_int, atomic_fit
from ._predictive import PredictiveDistribution
from ._numeric_input import validate_numeric
from ._variance_scale import VarianceScaling
from ._sigp_base import _RESPONSE_RIDGE, _SIGPBase, _Y_BANDWIDTH, _candidates, _given_folds

__all__ = ["SIGPRegressor"]

#: From this many training rows on, ``input_scaling="auto"`` also fits the ARD-weighted inputs and keeps the
#: better cross-validation score (a second fit; measurements: the ``input_scaling`` parameter).
COMPARE_MIN_ROWS = 2000


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
    max_kernel_rank : "auto", int or None, default=1000
        Cap on the rank of the kernel factor (memory :math:`O(n \cdot` cap)). ``"auto"``: the
        largest rank :math:`r \le 1000` with :math:`n r^2 \le 10^9` (see :class:`SIGPClassifier`).
    max_iter : int, default=2000
        EM iterations of the final fit (``mean="linear"``).
    cv_max_iter : int, default=100
        EM iterations of each cross-validation fit (``mean="linear"``; scoring only
        needs the predictions to settle, not the last digits of the likelihood).
    tol : float, default=1e-6
        EM stops when the penalised log-likelihood gains less than ``tol * n``.
    input_scaling : {"auto", "compare", "ard", None}, default="auto"
        ``"ard"``: weigh each standardised feature by :math:`1/\ell_d` from a quick RBF-ARD
        fit (at most 500 rows) before the isotropic SIGP kernel, so that features that do
        not affect the target do not swamp the distance; the weights are ``input_weights_``
        (see :meth:`~hdgp.estimators._sigp_base._SIGPBase._fit_input_weights`). ``None``:
        the paper's isotropic kernel on standardised inputs. ``"compare"``: both, the one with
        the better cross-validation score on the same folds is kept (``input_scaling_``;
        the isotropic kernel when every hyper-parameter is given). The ARD weights see every
        training row, the validation folds' too, which favours ``"ard"`` slightly. ``"auto"``:
        ``"compare"`` from :data:`COMPARE_MIN_ROWS` training rows on, the isotropic kernel below
        (it costs a second fit): on the generalisation protocol's small tables ``"compare"`` lost
        on average (``benchmarks/results/generalisation-new-defaults/``), while on pumadyn32nm
        (7,373 × 32, a few of many features matter) the isotropic kernel predicted the mean
        (test RMSE 1.00 against 0.22; ``benchmarks/README.md``, "Measurements behind defaults").
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
        input_scaling="auto",
        random_state=None,
        verbose=False,
    ):
        self._store_params(locals())

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
        if self.input_scaling not in ("auto", "compare", "ard", None):
            raise ValueError(f"input_scaling must be 'auto', 'compare', 'ard' or None; got {self.input_scaling!r}.")
        compare = self.input_scaling == "compare" or (self.input_scaling == "auto" and X.shape[0] >= COMPARE_MIN_ROWS)

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
            made = []

            def same_folds():  # both scalings on the same folds (a generator `cv` is read once)
                if not made:
                    made.append(make_folds())
                return made[0]

            choices = [None, "ard"] if compare else [None if self.input_scaling == "auto" else self.input_scaling]
            fitted = []
            for scaling in choices:
                self.input_scaling_ = scaling
                Xw = self._fit_input_weights(Xs, Y) if scaling == "ard" else Xs
                if scaling is None:
                    self.input_weights_ = None
                self._fit_sigp(Xw, Y, make_responses, score, same_folds, calibrate=self.calibrate_variance)
                fitted.append(dict(vars(self)))
                if len(self.cv_scores_) <= 1:  # every hyper-parameter given: nothing is chosen by CV
                    break
            # "compare": the better cross-validation score on the same folds (the isotropic kernel on ties
            # or when no hyper-parameter was cross-validated)
            best = max(range(len(fitted)), key=lambda i: (np.nan_to_num(fitted[i]["best_score_"], nan=-np.inf), -i))
            self.__dict__.update(fitted[best])
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
