"""Regression metrics used in the papers (on whatever scale the caller passes)."""

from __future__ import annotations

import numpy as np

__all__ = ["rmse", "mse", "nlpd", "interval_coverage"]


def rmse(y_true, y_pred) -> float:
    """Root mean squared error."""
    return float(np.sqrt(mse(y_true, y_pred)))


def mse(y_true, y_pred) -> float:
    """Mean squared error."""
    y_true, y_pred = np.asarray(y_true, float).ravel(), np.asarray(y_pred, float).ravel()
    return float(np.mean((y_true - y_pred) ** 2))


def nlpd(y_true, mean, std) -> float:
    r"""Mean negative log predictive density under Gaussian predictions.

    .. math:: -\frac1n\sum_i \log N(y_i \mid \mu_i, s_i^2)
    """
    y_true, mean, std = (np.asarray(a, float).ravel() for a in (y_true, mean, std))
    if np.any(std <= 0):
        raise ValueError("Predictive standard deviations must be positive to compute NLPD.")
    return float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * ((y_true - mean) / std) ** 2))


def interval_coverage(y_true, mean, std, level: float = 0.95) -> float:
    """Fraction of targets inside the central ``level`` Gaussian predictive interval."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    y_true, mean, std = (np.asarray(a, float).ravel() for a in (y_true, mean, std))
    return float(np.mean(np.abs(y_true - mean) <= z * std))
