"""Per-feature normalising flow (shift/scale + sinh-arcsinh) warping inputs to ~N(0, 1).

OAK (Lu et al., 2022, Section 3.3 and appendix F) fits, once and before the GP,
a bijection :math:`z = g(x)` per continuous feature by minimising the KL
divergence from the pushed-forward empirical distribution to :math:`\\mathcal N(0,1)`,

.. math::

    \\mathrm{KL} \\approx \\frac1N \\sum_{j} \\Big(\\tfrac12 z_j^2 - \\log g'(x_j)\\Big) + C

(eq. 37 with the Gaussian's :math:`\\tfrac12`). Here
:math:`g(x) = a + b \\sinh\\big(\\delta \\operatorname{asinh}(u) - \\epsilon\\big)`,
:math:`u = (t - m)/s`, and :math:`m, s` the mean and standard deviation of
:math:`t` on the training data. The pre-transform :math:`t` is the identity; or for skewed
features :math:`\\log x` when they are positive (and it removes the skew), otherwise a started log
:math:`\\log(x - x_{\\min} + c)` whose start :math:`c` makes it least skewed; or the
OAK authors' shifted log :math:`t = \\log(x - x_{\\min} + 1)` applied to every
feature (``x_min`` the training minimum). All are
:math:`t = \\log(x - x_{\\min} + c) + \\text{const}` (:math:`c = x_{\\min}` for the
plain log, :math:`c = 1` shifted), continued below
:math:`x_{\\min}` by the tangent line :math:`t(x_{\\min}) + (x - x_{\\min})/c`, so test
points under the training range (a zero in a feature that was positive in training)
stay finite and the map stays a C¹ bijection of the real line.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.stats

from ._scaling import column_scales, column_std, varies

__all__ = ["LOG_TRANSFORMS", "SinhArcsinhFlow"]

#: Box for (a, log b, ε, log δ): keeps sinh from overflowing during the fit (|δ asinh u − ε| stays
#: below ~100 for standardised data) while covering any realistic skew and tail weight.
_BOUNDS = [(-10.0, 10.0), (-5.0, 5.0), (-10.0, 10.0), (-3.0, 3.0)]

#: L-BFGS-B stopping rules of the flow fit, tighter than SciPy's defaults (ftol 2.2e-9, gtol 1e-5): with the
#: analytic gradient a step costs one evaluation, and a log-warped feature with a far outlier has a
#: flat valley towards the bounds where the default ftol stops short of the minimum.
_LBFGS_OPTIONS = {"ftol": 1e-13, "gtol": 1e-9, "maxiter": 2000}

#: Accepted values of ``log_transform``.
LOG_TRANSFORMS = ("auto", True, False, "shifted")

#: Skewness above which ``log_transform="auto"`` takes logs of a feature.
_AUTO_LOG_SKEW = 1.0
#: Starts c of a started log, in multiples of the median distance of a feature's values above its
#: minimum: 1e-3 (nearly log(x - x_min)) to 10 (nearly linear over the bulk of the data).
_LOG_STARTS = np.logspace(-3.0, 1.0, 41)


#: ``skip_light_tails``: a feature with excess kurtosis below this and skewness within
#: ±:data:`_AUTO_LOG_SKEW` (uniform-like, evenly spread grids) keeps the identity flow.
_LIGHT_TAIL_KURTOSIS = 0.0

#: Rows beyond which the start is chosen on evenly spaced order statistics (a quantile sample).
_START_SAMPLE = 20000


#: Starting points (a, log b, ε, log δ) of the flow's fit: the identity first (kept unless another
#: start ends lower), then skewed and heavier- or lighter-tailed ones, because the objective has
#: local minima for heavy-tailed data. Five starts cost five one-dimensional fits per feature, small
#: beside any GP fit of that size (timings: benchmarks/README.md, "Numbers behind choices in src/").
_FLOW_STARTS = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -2.0, -1.0], [0.0, 0.0, 2.0, -1.0],
                         [0.0, 0.0, -2.0, 0.5], [0.0, 0.0, 2.0, 0.5]])


def _sample(x: np.ndarray) -> np.ndarray:
    """``x`` itself, or :data:`_START_SAMPLE` evenly spaced order statistics of a larger column."""
    return x if x.size <= _START_SAMPLE else np.sort(x)[:: x.size // _START_SAMPLE]


def _least_skewed_start(x: np.ndarray) -> float:
    """Start :math:`c > 0` of :math:`\\log(x - x_{\\min} + c)` with the smallest absolute skewness
    over :data:`_LOG_STARTS` (a unit-free choice: the grid scales with the data). Large columns are
    judged on :data:`_START_SAMPLE` evenly spaced order statistics (41 skewness evaluations of
    10^6 rows per feature would dominate the flow's fit)."""
    x = _sample(x)
    d = x - x.min()
    scale = np.median(d[d > 0])
    skews = [abs(scipy.stats.skew(np.log(d + c))) for c in scale * _LOG_STARTS]
    return float(scale * _LOG_STARTS[int(np.argmin(skews))])


def _light_tailed(x: np.ndarray) -> bool:
    """Excess kurtosis below :data:`_LIGHT_TAIL_KURTOSIS` and skewness within ±:data:`_AUTO_LOG_SKEW`."""
    x = _sample(x)
    return bool(scipy.stats.kurtosis(x) < _LIGHT_TAIL_KURTOSIS and abs(scipy.stats.skew(x)) <= _AUTO_LOG_SKEW)


class SinhArcsinhFlow:
    r"""Independent sinh-arcsinh flows for the columns of a matrix.

    Parameters
    ----------
    log_transform : {"auto", True, False, "shifted"}, default="auto"
        Take :math:`\log x` first: always (every training value must be > 0),
        never, or (``"auto"``) for features with skewness > 1 and more than two
        values: :math:`\log x` if they are positive and their log is not skewed beyond 1
        either, else the started log :math:`\log(x - x_{\min} + c)` with the least skewed
        start :math:`c`, so zeros in counts or amounts, or data shifted below zero, do not
        keep a skewed feature linear. Left-skewed features get no log: the mirrored started log
        :math:`-\log(x_{\max} - x + c)` does not suit a point mass at the maximum (the
        comparisons are in ``benchmarks/results/oak/README.md``).
        ``"shifted"`` takes :math:`\log(x - x_{\min} + 1)` of every feature, as the
        OAK authors' code does on raw inputs; it depends on the feature's units
        (the ``+1``), compressing wide-ranged features most.
    skip_light_tails : bool, default=False
        Leave out the sinh-arcsinh step (identity after standardising) for features whose
        training values are light-tailed and roughly symmetric: excess kurtosis < 0 and
        skewness within ±1 (uniform-like features, evenly spread grids). Gaussianising such a
        feature stretches its edges, which steepens the warp there; on the OAK paper's eq. (5)
        example (uniform inputs) that halved OAK's accuracy (``benchmarks/results/oak/README.md``).

    Attributes
    ----------
    params_ : ndarray of shape (D, 4)
        :math:`(a, \log b, \epsilon, \log\delta)` per feature.
    warped_ : ndarray of bool, shape (D,)
        Features whose sinh-arcsinh step was fitted (not constant, not skipped as light-tailed).
    use_log_ : ndarray of bool, shape (D,)
    shift_ : ndarray of shape (D,) or None
        Training minima :math:`x_{\min}` (``log_transform="shifted"`` only).
    log_min_ : ndarray of shape (D,)
        Training minima, where the log of a ``use_log_`` feature turns into its tangent line.
    log_start_ : ndarray of shape (D,)
        The start :math:`c` of :math:`t = \log(x - x_{\min} + c)` for ``use_log_`` features
        (:math:`x_{\min}` for a plain log; NaN for the others).
    center_, scale_ : ndarray of shape (D,)
        Standardisation :math:`m, s` of :math:`t`; a constant feature keeps
        :math:`s = 1` and the identity flow, so nothing divides by zero.
    feature_names_ : list
        Column labels used in error messages (positions unless ``fit`` was given names).

    Examples
    --------
    >>> import numpy as np, scipy.stats
    >>> x = np.random.default_rng(0).lognormal(size=(500, 1))
    >>> z = SinhArcsinhFlow().fit(x).transform(x)
    >>> bool(abs(scipy.stats.skew(z[:, 0])) < 0.2)
    True
    """

    def __init__(self, log_transform="auto", skip_light_tails=False):
        if log_transform not in LOG_TRANSFORMS:
            raise ValueError(f"log_transform must be one of {LOG_TRANSFORMS}, got {log_transform!r}.")
        if not isinstance(skip_light_tails, (bool, np.bool_)):
            raise ValueError(f"skip_light_tails must be True or False, got {skip_light_tails!r}.")
        self.log_transform = log_transform
        self.skip_light_tails = bool(skip_light_tails)

    # ----------------------------------------------------------------- maths
    @staticmethod
    def _forward(u, p):
        return SinhArcsinhFlow._warp(*SinhArcsinhFlow._column_terms(u), p)[:2]

    @staticmethod
    def _column_terms(u):
        r"""The parts of :meth:`_forward` that depend on the data only, :math:`\operatorname{asinh} u` and
        :math:`\tfrac12\log(1 + u^2)`: computed once per column, not at every step of the fit."""
        with np.errstate(over="ignore"):  # u = 1e300: log(1 + u^2) is inf, as the flow's limit there
            return np.arcsinh(u), 0.5 * np.log1p(u**2)

    @staticmethod
    def _warp(s, half_log1p, p):
        """``(z, log dz/du, inner, sinh(inner))`` from :meth:`_column_terms` ``s, half_log1p``."""
        a, log_b, eps, log_d = p
        inner = np.exp(log_d) * s - eps
        # an input like 1e300 warps to ±inf, the limit beyond all data, where every constrained
        # kernel term is zero: not an error worth a RuntimeWarning
        with np.errstate(over="ignore"):
            sinh = np.sinh(inner)
            z = a + np.exp(log_b) * sinh
            # log dz/du = log b + log δ + log cosh(inner) − ½ log(1 + u²)
            log_jac = log_b + log_d + np.logaddexp(inner, -inner) - np.log(2.0) - half_log1p
        return z, log_jac, inner, sinh

    @staticmethod
    def _inverse(z, p):
        a, log_b, eps, log_d = p
        return np.sinh((np.arcsinh((z - a) / np.exp(log_b)) + eps) / np.exp(log_d))

    @classmethod
    def _objective(cls, u, p, terms=None):
        r"""The KL objective :math:`\tfrac12\overline{z^2} - \overline{\log z'}` and its gradient in
        :math:`p = (a, \log b, \epsilon, \log\delta)`.

        With :math:`s = \operatorname{asinh} u`, :math:`\iota = \delta s - \epsilon` and
        :math:`g = z\, b\cosh\iota - \tanh\iota` (the derivative of one row's term in
        :math:`\iota`): :math:`\partial_a = \bar z`,
        :math:`\partial_{\log b} = \overline{z\, b \sinh\iota} - 1`, :math:`\partial_\epsilon = -\bar g`,
        :math:`\partial_{\log\delta} = \overline{g\,\delta s} - 1`. Analytic, so L-BFGS-B needs one
        evaluation per step instead of five for forward differences. ``terms``: :meth:`_column_terms`
        of ``u``, when the caller keeps them (a fit evaluates this hundreds of times per column, and
        the terms do not depend on the parameters).
        """
        s, half_log1p = cls._column_terms(u) if terms is None else terms
        z, log_jac, inner, sinh = cls._warp(s, half_log1p, p)
        b, delta = np.exp(p[1]), np.exp(p[3])
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float range the loss is inf, as before
            g = z * b * np.cosh(inner) - np.tanh(inner)
            grad = np.array([z.mean(), (z * b * sinh).mean() - 1.0, -g.mean(), (g * delta * s).mean() - 1.0])
        return 0.5 * (z**2).mean() - log_jac.mean(), grad

    def _fit_column(self, u):
        """Minimise the KL objective from every start of :data:`_FLOW_STARTS` (on a sample of a large
        column), then polish the best on the whole column."""
        def fit(v, terms, start):
            return scipy.optimize.minimize(lambda p: self._objective(v, p, terms), start, jac=True,
                                           method="L-BFGS-B", bounds=_BOUNDS, options=_LBFGS_OPTIONS)

        sample = _sample(u)
        terms = self._column_terms(sample)  # shared by every start
        best = fit(sample, terms, _FLOW_STARTS[0])
        for start in _FLOW_STARTS[1:]:
            res = fit(sample, terms, start)
            if res.fun < best.fun - 1e-9:  # the identity's optimum unless another start is really lower
                best = res
        return best.x if sample is u else fit(u, self._column_terms(u), best.x).x

    # ------------------------------------------------------------------- API
    def _check(self, X):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D array (n_samples, n_features), got shape {X.shape}.")
        if not np.isfinite(X).all():
            raise ValueError("Input to the flow contains NaN or inf.")
        return X

    def fit(self, X, feature_names=None):
        """Fit one flow per column of ``X`` (n_samples, n_features); ``feature_names`` label the
        columns in error messages (default: their positions)."""
        X = self._check(X)
        n_feat = X.shape[1]
        self.feature_names_ = [str(c) for c in feature_names] if feature_names is not None else list(range(n_feat))
        self.use_log_ = np.zeros(n_feat, dtype=bool)
        self.shift_ = X.min(0) if self.log_transform == "shifted" else None
        self.log_min_ = X.min(0)
        self.log_start_ = np.full(n_feat, np.nan)
        for j in range(n_feat if self.shift_ is None else 0):
            positive = bool((X[:, j] > 0).all())
            if self.log_transform is True and not positive:
                raise ValueError(f"log_transform=True needs positive values, but feature "
                                 f"{self.feature_names_[j]!r} has values <= 0.")
            skewed = (self.log_transform == "auto" and np.unique(X[:, j]).size > 2
                      and scipy.stats.skew(X[:, j]) > _AUTO_LOG_SKEW)
            if self.log_transform is True or skewed:
                self.use_log_[j] = True
                plain = positive and (self.log_transform is True
                                      or abs(scipy.stats.skew(np.log(X[:, j]))) <= _AUTO_LOG_SKEW)
                self.log_start_[j] = self.log_min_[j] if plain else _least_skewed_start(X[:, j])
        T = self._pre(X)
        self.center_, self.scale_ = column_scales(T)
        self.params_ = np.zeros((n_feat, 4))
        self.warped_ = varies(column_std(T), self.center_)  # constant features keep the identity
        if getattr(self, "skip_light_tails", False):
            self.warped_ &= ~np.array([_light_tailed(X[:, j]) for j in range(n_feat)], dtype=bool)
        U = (T - self.center_) / self.scale_
        for j in np.flatnonzero(self.warped_):
            self.params_[j] = self._fit_column(U[:, j])
        return self

    def _log_columns(self):
        """Columns taking a log, their origin :math:`x_{\\min}` and the constant :math:`c` of
        :math:`t = \\log(x - x_{\\min} + c) + \\text{const}` (module docstring)."""
        if self.shift_ is not None:
            return slice(None), self.shift_, np.ones_like(self.shift_)
        if not hasattr(self, "log_min_"):  # model files of format 2.0-2.1 (io.modelfile still reads them)
            return self.use_log_, None, None
        origin = self.log_min_[self.use_log_]
        if not hasattr(self, "log_start_"):  # formats 2.2-2.3: log x only (no started logs)
            return self.use_log_, origin, origin
        return self.use_log_, origin, self.log_start_[self.use_log_]

    def _pre(self, X):
        cols, origin, c = self._log_columns()
        T = X.copy()
        if origin is None:
            if (X[:, cols] <= 0).any():
                bad = np.flatnonzero(cols)[np.flatnonzero((X[:, cols] <= 0).any(0))[0]]
                name = getattr(self, "feature_names_", range(X.shape[1]))[bad]
                raise ValueError(f"Feature {name!r} was log-transformed when the flow was fitted, but a value "
                                 "<= 0 was given; this model file predates the flow's continuation below "
                                 "the training minimum: refit it with this version of hdgp.")
            T[:, cols] = np.log(X[:, cols])
            return T
        d = X[:, cols] - origin
        offset = 0.0 if self.shift_ is not None else np.log(c)  # t = log x above the minimum
        T[:, cols] = offset + np.where(d >= 0, np.log1p(np.maximum(d, 0.0) / c), d / c)
        return T

    def transform(self, X):
        """Warp ``X`` column-wise: :math:`z = g(x)`."""
        X = self._check(X)
        if X.shape[1] != len(self.params_):
            raise ValueError(f"Flow was fitted on {len(self.params_)} features, got {X.shape[1]}.")
        U = (self._pre(X) - self.center_) / self.scale_
        return np.column_stack([self._forward(U[:, j], self.params_[j])[0] for j in range(U.shape[1])])

    def inverse_transform(self, Z):
        """Map warped values back to the original units: :math:`x = g^{-1}(z)`."""
        Z = self._check(Z)
        U = np.column_stack([self._inverse(Z[:, j], self.params_[j]) for j in range(Z.shape[1])])
        T = U * self.scale_ + self.center_
        cols, origin, c = self._log_columns()
        if origin is None:
            T[:, cols] = np.exp(T[:, cols])
            return T
        s = T[:, cols] - (0.0 if self.shift_ is not None else np.log(c))
        T[:, cols] = origin + c * np.where(s >= 0, np.expm1(np.maximum(s, 0.0)), s)
        return T

    def log_abs_det_jacobian(self, X):
        """:math:`\\log |g'(x)|` per entry, shape (n_samples, n_features)."""
        X = self._check(X)
        U = (self._pre(X) - self.center_) / self.scale_
        out = np.column_stack([self._forward(U[:, j], self.params_[j])[1] for j in range(U.shape[1])])
        out = out - np.log(self.scale_)
        cols, origin, c = self._log_columns()
        if origin is None:
            out[:, cols] -= np.log(X[:, cols])
        else:  # dt/dx = 1/(x - x_min + c) above the minimum, 1/c below
            out[:, cols] -= np.log(np.maximum(X[:, cols] - origin, 0.0) + c)
        return out
