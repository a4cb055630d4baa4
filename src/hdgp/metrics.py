"""Regression metrics used in the papers (on whatever scale the caller passes).

Every metric takes 1-D arrays of the same length :math:`n \\ge 1` (other shapes
are flattened) and raises a ``ValueError`` naming the offending argument when
lengths differ, a value is not finite, or a predictive standard deviation is
out of range; nothing is broadcast.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.stats import norm

__all__ = ["rmse", "mse", "nlpd", "r2", "interval_coverage"]


def _checked(metric: str, **arrays) -> list[np.ndarray]:
    """``arrays`` as finite 1-D float arrays of one common, non-zero length."""
    out = {name: np.asarray(a, float).ravel() for name, a in arrays.items()}
    lengths = {name: a.size for name, a in out.items()}
    if len(set(lengths.values())) > 1:
        sizes = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise ValueError(f"{metric}: inputs must have the same length; {sizes} values.")
    if not next(iter(lengths.values())):
        raise ValueError(f"{metric}: inputs are empty; need at least one target.")
    for name, a in out.items():
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{metric}: {name} must be finite; it has {int(np.sum(~np.isfinite(a)))} "
                             "NaN or infinite value(s).")
    return list(out.values())


def _check_std(metric: str, std: np.ndarray, allow_zero: bool) -> None:
    bad = std < 0 if allow_zero else std <= 0
    if np.any(bad):
        need = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{metric}: predictive standard deviations must be {need}; "
                         f"{int(bad.sum())} are not (smallest {std.min():g}).")


def _unit(values: np.ndarray) -> float:
    """The power of two :math:`2^k \\le \\max|v| < 2^{k+1}` (1 for all zeros): dividing by it is exact
    and keeps the squares in range (squares of values below ~1e-162 underflow to 0, above ~1e154
    overflow)."""
    peak = float(np.max(np.abs(values)))
    return float(np.ldexp(1.0, np.frexp(peak)[1] - 1)) if peak > 0 else 1.0


def rmse(y_true, y_pred) -> float:
    r"""Root mean squared error, :math:`\sqrt{\frac1n\sum_i (y_i - \hat y_i)^2}` (exact for tiny errors too)."""
    y_true, y_pred = _checked("rmse", y_true=y_true, y_pred=y_pred)
    residual = y_true - y_pred
    unit = _unit(residual)
    return float(unit * np.sqrt(np.mean((residual / unit) ** 2)))


def mse(y_true, y_pred) -> float:
    r"""Mean squared error, :math:`\frac1n\sum_i (y_i - \hat y_i)^2`."""
    y_true, y_pred = _checked("mse", y_true=y_true, y_pred=y_pred)
    return float(np.mean((y_true - y_pred) ** 2))


def nlpd(y_true, mean, std) -> float:
    r"""Mean negative log predictive density under Gaussian predictions.

    .. math:: -\frac1n\sum_i \log N(y_i \mid \mu_i, s_i^2), \qquad s_i > 0
    """
    y_true, mean, std = _checked("nlpd", y_true=y_true, mean=mean, std=std)
    _check_std("nlpd", std, allow_zero=False)
    return float(np.mean(0.5 * np.log(2 * np.pi) + np.log(std) + 0.5 * ((y_true - mean) / std) ** 2))


def r2(y_true, y_pred) -> float:
    r"""Coefficient of determination :math:`1 - \sum_i (y_i - \hat y_i)^2 / \sum_i (y_i - \bar y)^2`.

    Both sums are taken in one exact power-of-two unit, so targets in tiny or huge units
    give the same value. Raises a ``ValueError`` for a constant ``y_true`` (R² undefined).
    """
    y_true, y_pred = _checked("r2", y_true=y_true, y_pred=y_pred)
    if np.ptp(y_true) == 0:
        raise ValueError("r2: y_true is constant; R² is undefined.")
    spread = y_true - y_true.mean()
    residual = y_true - y_pred
    unit = _unit(np.concatenate([spread, residual]))
    return float(1.0 - np.sum((residual / unit) ** 2) / np.sum((spread / unit) ** 2))


def interval_coverage(y_true, mean, std, level: float = 0.95) -> float:
    r"""Fraction of targets inside the central ``level`` Gaussian predictive interval.

    .. math:: \frac1n\sum_i \mathbf 1\big[|y_i - \mu_i| \le z\, s_i\big],
              \qquad z = \Phi^{-1}\big(\tfrac12 + \tfrac{\text{level}}2\big),\ 0 < \text{level} < 1,\ s_i \ge 0
    """
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"interval_coverage: level must be a number in (0, 1) such as 0.95, got {level!r}.")
    y_true, mean, std = _checked("interval_coverage", y_true=y_true, mean=mean, std=std)
    _check_std("interval_coverage", std, allow_zero=True)
    z = norm.ppf(0.5 + level / 2)
    return float(np.mean(np.abs(y_true - mean) <= z * std))
