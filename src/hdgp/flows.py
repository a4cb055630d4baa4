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

import math

import numba
import numpy as np
import scipy.stats

from ._scaling import column_scales, column_std, varies

__all__ = ["LOG_TRANSFORMS", "SinhArcsinhFlow", "light_tailed"]

#: Box for (a, log b, ε, log δ): keeps sinh from overflowing during the fit (|δ asinh u − ε| stays
#: below ~100 for standardised data) while covering any realistic skew and tail weight.
_BOUNDS = [(-10.0, 10.0), (-5.0, 5.0), (-10.0, 10.0), (-3.0, 3.0)]

#: Stopping rule of the flow's Newton fit: largest projected gradient entry (a log-warped feature
#: with a far outlier has a flat valley towards the bounds, where a loose rule stops short).
_NEWTON_GTOL = 1e-9
#: ... or half its Newton decrement (the objective's predicted decrease) below this, relative to the objective.
_NEWTON_FTOL = 1e-15
#: Newton iterations and step halvings per iteration, at most.
_NEWTON_MAX_ITER = 200
_NEWTON_BACKTRACKS = 40
#: Initial damping of the Newton steps (the objective's Hessian is O(1) near the identity start).
_NEWTON_MU0 = 1e-3
#: Rows × problems from which the flow's Newton terms run compiled: below, the first compiled call's
#: one-off setup in a process (Numba's, shared with the kernels' loops) can cost more than it saves.
_COMPILED_MIN_ENTRIES = 2**15
#: Factor by which the damping shrinks after an accepted step and grows after a rejected one.
_MU_DOWN, _MU_UP = 4.0, 4.0

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
#: local minima for heavy-tailed data. The starts of all features are fitted together (one batch of
#: Newton problems); timings: benchmarks/README.md, "Numbers behind choices in src/".
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
    skews = np.abs(scipy.stats.skew(np.log(d[:, None] + scale * _LOG_STARTS), axis=0))
    return float(scale * _LOG_STARTS[int(np.argmin(skews))])


def light_tailed(x: np.ndarray) -> bool:
    """Excess kurtosis below :data:`_LIGHT_TAIL_KURTOSIS` and skewness within ±:data:`_AUTO_LOG_SKEW`,
    computed on the standardised values (at 1e-200 units the raw moments underflow)."""
    x = _sample(x)
    std = column_std(x[:, None])[0]
    if not std > 0:
        return False
    z = (x - x.mean()) / std
    return bool(scipy.stats.kurtosis(z) < _LIGHT_TAIL_KURTOSIS and abs(scipy.stats.skew(z)) <= _AUTO_LOG_SKEW)


def _njit(function):
    """``numba.njit`` with an on-disk cache where Numba finds a writable place for it."""
    options = dict(error_model="numpy", nogil=True)
    try:
        return numba.njit(cache=True, **options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(**options)(function)


@_njit
def _compiled_terms(ST, h_mean, cols, P, hessian, f, grad, hess):
    r""":meth:`SinhArcsinhFlow._newton_terms` of problems ``P`` (B, 4) on the columns ``ST[cols[b]]``
    (rows of :math:`\operatorname{asinh} u`, ``(D, n)``; ``h_mean`` the column means of
    :math:`\tfrac12\log(1+u^2)`) in one pass over each column, into ``f`` (B,), ``grad`` (B, 4) and
    ``hess`` (B, 4, 4) (the last two only with ``hessian``)."""
    n = ST.shape[1]
    log2 = math.log(2.0)
    for k in range(P.shape[0]):
        row = ST[cols[k]]
        a, log_b, eps, log_d = P[k, 0], P[k, 1], P[k, 2], P[k, 3]
        b, delta = math.exp(log_b), math.exp(log_d)
        zz = lc = 0.0
        sz = ssig = sg = sgt = ssg = sc = sct = sss = sq = sqt = sgp = sgpt = sgptt = 0.0
        for i in range(n):
            t = delta * row[i]
            inner = t - eps
            ai = abs(inner)
            if ai < 700.0:  # sinh and cosh from one exponential (expm1 near 0: no cancellation)
                if ai < 1.0:
                    em = math.expm1(inner)
                    ex = em + 1.0
                    sh = 0.5 * em * (em + 2.0) / ex
                else:
                    ex = math.exp(inner)
                    sh = 0.5 * (ex - 1.0 / ex)
                ch = 0.5 * (ex + 1.0 / ex)
                lc += math.log(ch)
            else:  # beyond float range: the limits, and log cosh without overflow
                sh, ch = math.sinh(inner), math.cosh(inner)
                lc += ai - log2
            z = a + b * sh
            zz += z * z
            if hessian:
                sig, c = b * sh, b * ch
                g = z * c - sh / ch
                gp = c * c + z * sig - 1.0 / (ch * ch)
                q = c * sig + z * c
                sz += z
                ssig += z * sig
                sg += g
                sgt += g * t
                ssg += sig
                sc += c
                sct += c * t
                sss += z * sig + sig * sig
                sq += q
                sqt += q * t
                sgp += gp
                sgpt += gp * t
                sgptt += gp * t * t + g * t
        f[k] = 0.5 * zz / n - log_b - log_d - lc / n + h_mean[cols[k]]
        if hessian:
            grad[k, 0] = sz / n
            grad[k, 1] = ssig / n - 1.0
            grad[k, 2] = -sg / n
            grad[k, 3] = sgt / n - 1.0
            entries = ((0, 0, 1.0), (0, 1, ssg / n), (0, 2, -sc / n), (0, 3, sct / n), (1, 1, sss / n),
                       (1, 2, -sq / n), (1, 3, sqt / n), (2, 2, sgp / n), (2, 3, -sgpt / n), (3, 3, sgptt / n))
            for i, j, value in entries:
                hess[k, i, j] = value
                hess[k, j, i] = value


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

    @staticmethod
    def _newton_terms(S, H, P, hessian=True):
        r"""Objective, gradient and Hessian of :meth:`_objective` for a batch of problems: column ``b`` of
        ``S`` = :math:`\operatorname{asinh} u` and ``H`` = :math:`\tfrac12\log(1+u^2)` (n, B) with
        parameters ``P[b]`` (B, 4). With the notation of :meth:`_objective`, :math:`c = b\cosh\iota`,
        :math:`\sigma = b\sinh\iota`, :math:`t = \delta s` and
        :math:`g' = \partial_\iota g = c^2 + z\sigma - \operatorname{sech}^2\iota`, the Hessian's
        entries are the row means of

        .. math::

            \begin{array}{llll}
            1 & \sigma & -c & c t \\
              & z\sigma + \sigma^2 & -q & q t \\
              & & g' & -g' t \\
              & & & g' t^2 + g t
            \end{array}
            \qquad (q = c\sigma + z c)

        in the order :math:`(a, \log b, \epsilon, \log\delta)`. Without ``hessian``: the objective only."""
        a, log_b, eps, log_d = (P[:, k] for k in range(4))
        b, delta = np.exp(log_b), np.exp(log_d)
        t = delta * S
        inner = t - eps
        with np.errstate(over="ignore", invalid="ignore"):
            sinh = np.sinh(inner)
            z = a + b * sinh
            log_cosh = np.logaddexp(inner, -inner) - np.log(2.0)
            f = 0.5 * (z * z).mean(0) - log_b - log_d - log_cosh.mean(0) + H.mean(0)
            if not hessian:
                return f
            cosh = np.cosh(inner)
            sig, c = b * sinh, b * cosh
            g = z * c - sinh / cosh
            gp = c * c + z * sig - 1.0 / (cosh * cosh)
            q = c * sig + z * c
            grad = np.stack([z.mean(0), (z * sig).mean(0) - 1.0, -g.mean(0), (g * t).mean(0) - 1.0], axis=1)
            hess = np.empty((P.shape[0], 4, 4))
            entries = {(0, 0): np.ones(P.shape[0]), (0, 1): sig.mean(0), (0, 2): -c.mean(0), (0, 3): (c * t).mean(0),
                       (1, 1): (z * sig + sig * sig).mean(0), (1, 2): -q.mean(0), (1, 3): (q * t).mean(0),
                       (2, 2): gp.mean(0), (2, 3): -(gp * t).mean(0), (3, 3): (gp * t * t + g * t).mean(0)}
            for (i, j), value in entries.items():
                hess[:, i, j] = hess[:, j, i] = value
        return f, grad, hess

    @classmethod
    def _terms_function(cls, S, H, n_problems=None):
        """``terms(cols, P, hessian)``: :meth:`_newton_terms` of problems ``P`` on the columns ``cols`` of
        ``S``, ``H`` (n, D); compiled (:func:`_compiled_terms`, one pass per problem and no (n, B)
        temporaries) from :data:`_COMPILED_MIN_ENTRIES` rows × problems on, unless Numba's JIT is
        disabled."""
        n_problems = S.shape[1] if n_problems is None else n_problems
        if numba.config.DISABLE_JIT or S.shape[0] * n_problems < _COMPILED_MIN_ENTRIES:
            return lambda cols, P, hessian: cls._newton_terms(S[:, cols], H[:, cols], P, hessian)
        ST, h_mean = np.ascontiguousarray(S.T), H.mean(0)

        def terms(cols, P, hessian):
            f = np.empty(P.shape[0])
            grad, hess = (np.empty((P.shape[0], 4)), np.empty((P.shape[0], 4, 4))) if hessian else \
                (np.empty((0, 4)), np.empty((0, 4, 4)))
            _compiled_terms(ST, h_mean, cols, np.ascontiguousarray(P), hessian, f, grad, hess)
            return (f, grad, hess) if hessian else f
        return terms

    @classmethod
    def _newton(cls, S, H, P, cols=None):
        r"""Minimise the KL objective of every column of ``S``, ``H`` (:meth:`_newton_terms`) from ``P``
        (B, 4) within :data:`_BOUNDS`, all columns at once, by damped (Levenberg–Marquardt) Newton
        steps :math:`-(|\nabla^2 f| + \mu I)^{-1}\nabla f`: the Hessian's eigenvalues in absolute value
        (so a step descends where the objective is not convex), variables at a bound the gradient
        pushes against held there, the step projected onto the box and accepted when it lowers the
        objective by an Armijo fraction of its first-order prediction; otherwise :math:`\mu` grows
        (the step turns towards the gradient and shortens), and shrinks after each success. A problem
        stops when its projected gradient is below :data:`_NEWTON_GTOL`, half its Newton decrement
        (the predicted decrease) below :data:`_NEWTON_FTOL` relative to the objective, or no step
        lowers its objective any more. Problem ``b`` is column ``cols[b]`` (default ``b``) of ``S`` and
        ``H`` (n, D). Returns ``(P, f)``."""
        lo, hi = (np.array(v, dtype=float) for v in zip(*_BOUNDS))
        P = np.clip(np.array(P, dtype=float), lo, hi)
        cols = np.arange(P.shape[0]) if cols is None else np.asarray(cols, dtype=np.int64)
        terms = cls._terms_function(S, H, len(cols))
        f = terms(cols, P, False)
        mu = np.full(P.shape[0], _NEWTON_MU0)
        active = np.isfinite(f)
        for _ in range(_NEWTON_MAX_ITER):
            idx = np.flatnonzero(active)
            if idx.size == 0:
                break
            ci, Pi = cols[idx], P[idx]
            fi, grad, hess = terms(ci, Pi, True)
            held = ((Pi <= lo) & (grad > 0)) | ((Pi >= hi) & (grad < 0))
            projected = np.where(held, 0.0, grad)
            ok = np.isfinite(fi) & np.isfinite(grad).all(1) & np.isfinite(hess).all((1, 2))
            free = ~held
            hess = np.where(free[:, :, None] & free[:, None, :], np.nan_to_num(hess), 0.0)
            hess[:, np.arange(4), np.arange(4)] += held  # identity on the held variables
            lam, vec = np.linalg.eigh(hess)
            lam = np.abs(lam)
            g_eig = np.einsum("bji,bj->bi", vec, np.nan_to_num(projected))  # the gradient in the eigenbasis
            newton = 0.5 * (g_eig**2 / np.maximum(lam, 1e-300)).sum(1)
            done = ~ok | (np.abs(projected).max(1) < _NEWTON_GTOL) | (newton < _NEWTON_FTOL * np.maximum(np.abs(fi), 1.0))
            mu_i = mu[idx]
            accepted = done.copy()
            new_P, new_f = Pi.copy(), fi.copy()
            for _ in range(_NEWTON_BACKTRACKS):
                trying = np.flatnonzero(~accepted)
                if trying.size == 0:
                    break
                step = -np.einsum("bij,bj->bi", vec[trying], g_eig[trying] / (lam[trying] + mu_i[trying, None]))
                trial = np.clip(Pi[trying] + np.where(held[trying], 0.0, step), lo, hi)
                ft = terms(ci[trying], trial, False)
                decrease = ((trial - Pi[trying]) * grad[trying]).sum(1)
                good = np.isfinite(ft) & (ft <= fi[trying] + 1e-4 * decrease) & (ft < fi[trying])
                new_P[trying[good]], new_f[trying[good]] = trial[good], ft[good]
                accepted[trying[good]] = True
                mu_i[trying[~good]] = np.maximum(mu_i[trying[~good]] * _MU_UP, 1e-3)
            mu[idx] = np.where(accepted & ~done, mu_i / _MU_DOWN, mu_i)
            stalled = ~accepted  # no step lowers the objective any more: converged to rounding
            P[idx], f[idx] = new_P, new_f
            active[idx[done | stalled]] = False
        return P, f

    def _fit_columns(self, U):
        """Minimise the KL objective of every column of ``U`` from every start of :data:`_FLOW_STARTS`
        (on a sample of large columns), keep the identity start's optimum unless another ends lower,
        then polish the best on the whole columns. Returns (D, 4) parameters."""
        n_cols, n_starts = U.shape[1], len(_FLOW_STARTS)
        sample = U if U.shape[0] <= _START_SAMPLE else np.sort(U, axis=0)[:: U.shape[0] // _START_SAMPLE]
        S, H = self._column_terms(sample)
        cols = np.repeat(np.arange(n_cols), n_starts)
        P, f = self._newton(S, H, np.tile(_FLOW_STARTS, (n_cols, 1)), cols)
        P, f = P.reshape(n_cols, n_starts, 4), f.reshape(n_cols, n_starts)
        best = np.zeros(n_cols, dtype=int)
        for k in range(1, n_starts):  # the identity's optimum unless another start is really lower
            lower = f[np.arange(n_cols), k] < f[np.arange(n_cols), best] - 1e-9
            best[lower] = k
        P = P[np.arange(n_cols), best]
        if sample is not U:
            S, H = self._column_terms(U)
            P = self._newton(S, H, P)[0]
        return P

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
            self.warped_ &= ~np.array([light_tailed(X[:, j]) for j in range(n_feat)], dtype=bool)
        U = (T - self.center_) / self.scale_
        warped = np.flatnonzero(self.warped_)
        if warped.size:
            self.params_[warped] = self._fit_columns(U[:, warped])
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
