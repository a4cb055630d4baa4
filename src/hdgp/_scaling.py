"""When a column (or the target) counts as constant, and the standardising scales that follow."""

from __future__ import annotations

import numpy as np

#: A standard deviation below this fraction of the centre's magnitude is rounding noise.
_RELATIVE_TOL = 1e-12


def varies(std, center):
    """Whether ``std`` is more than rounding noise around ``center`` (elementwise).

    Relative: data in tiny units (a column of size 1e-13) still vary, while a
    constant column's computed std is ~1e-16·|center| (exactly 0 when it is 0).
    """
    return np.asarray(std) > _RELATIVE_TOL * np.abs(center)


def column_scales(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations of ``X``; constant columns get scale 1."""
    mean, std = X.mean(axis=0), X.std(axis=0)
    return mean, np.where(varies(std, mean), std, 1.0)
