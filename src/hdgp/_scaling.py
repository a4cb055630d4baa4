"""When a column (or the target) counts as constant, and the standardising scales that follow."""

from __future__ import annotations

import numpy as np

from .exceptions import NumericalWarning, warn_caller

#: A standard deviation below this fraction of the centre's magnitude is rounding noise. A constant
#: column's computed std is the rounding error of its mean, at most about log2(n) units in the last
#: place (pairwise summation): below 1e-14 relative for n < 2^40. (It was 1e-12, which also took a
#: column 1e6 + 1e-7 z, spread over ~900 distinct values, for constant.)
_RELATIVE_TOL = 1e-14


def varies(std, center):
    """Whether ``std`` is more than rounding noise around ``center`` (elementwise).

    Relative: data in tiny units (a column of size 1e-13) still vary, while a
    constant column's computed std is ~1e-16·|center| (exactly 0 when it is 0).
    """
    return np.asarray(std) > _RELATIVE_TOL * np.abs(center)


def column_scales(X: np.ndarray, names=None) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations of ``X``; constant columns get scale 1 (with a
    ``NumericalWarning`` for columns whose values differ at rounding level only).

    ``names`` (one per column, e.g. an estimator's ``feature_names_in_``) name the columns in
    the error; otherwise they are numbered.

    Raises
    ------
    ValueError
        If a column's values are too large for its variance (their squares overflow).
    """
    mean, std = X.mean(axis=0), column_std(X, names)
    varying = varies(std, mean)
    differ = ~varying & (X.max(axis=0) > X.min(axis=0))
    if differ.any():
        labels = [repr(str(names[j])) if names is not None else str(j) for j in np.flatnonzero(differ)[:5]]
        warn_caller(
            f"Feature column(s) {', '.join(labels)} vary only at rounding level (standard deviation below "
            f"{_RELATIVE_TOL:g} of their mean) and are treated as constant; subtract their offset (or "
            "rescale them) to use them.",
            NumericalWarning,
        )
    return mean, np.where(varying, std, 1.0)


class StandardizedInputs:
    """Estimator mixin: inputs standardised column-wise with the training statistics.

    ``_transform_inputs(X, fit=True)`` stores ``x_mean_`` and ``x_scale_``
    (:func:`column_scales`, named by ``feature_names_in_`` when the estimator has them);
    every call returns :math:`(X - \\bar x) / s`. Subclasses with other input handling
    (OAK's flow and levels) override it.
    """

    def _transform_inputs(self, X: np.ndarray, fit: bool) -> np.ndarray:
        if fit:
            self.x_mean_, self.x_scale_ = column_scales(X, getattr(self, "feature_names_in_", None))
        return (X - self.x_mean_) / self.x_scale_


def column_std(X: np.ndarray, names=None) -> np.ndarray:
    """Column standard deviations of ``X``, exact for tiny values too (see :func:`_finite_std`).

    Raises
    ------
    ValueError
        If a column's values are too large for its variance (their squares overflow).
    """
    return _finite_std(X, "Feature column(s) {} have", names)


def target_scale(y: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of a regression target (same overflow check as :func:`column_scales`).

    Raises
    ------
    ValueError
        If ``y`` holds text (scikit-learn's ``y_numeric`` converts only object arrays),
        or values whose squares overflow.
    """
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        raise ValueError(f"A regression target must be numeric; got values such as {str(y.flat[0])!r} ({y.dtype}). "
                         "For class labels use a classifier (GPClassifier, OAKClassifier, SIGPClassifier).")
    return float(np.mean(y)), float(_finite_std(y.astype(np.float64)[:, None], "The target has")[0])


def _finite_std(X: np.ndarray, what: str, names=None) -> np.ndarray:
    r"""Column standard deviations computed as :math:`2^k\,\mathrm{sd}(x / 2^k)`.

    :math:`2^k \le \max|x| < 2^{k+1}` for each column, so the rescaling is exact and
    the squares stay in the float64 range: computed directly, the squares of values
    below about 1e-162 underflow, and a column ``y * 1e-200`` got std 0 (then counted
    as constant). Values whose squares overflow are refused rather than rescaled
    (``what`` names the columns).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        direct = X.std(axis=0)
    bad = np.flatnonzero(~np.isfinite(direct))
    if bad.size:
        example = X[np.argmax(np.abs(X[:, bad[0]])), bad[0]]
        labels = [repr(str(names[j])) for j in bad[:5]] if names is not None else list(map(str, bad[:5]))
        raise ValueError(
            f"{what.format(', '.join(labels))} values too large to standardise (e.g. {example:.3g}: "
            "their squares overflow float64). Rescale them, or check for a data-entry error."
        )
    peak = np.abs(X).max(axis=0)
    unit = np.where(peak > 0, np.ldexp(1.0, np.frexp(peak)[1] - 1), 1.0)
    return unit * (X / unit).std(axis=0)
