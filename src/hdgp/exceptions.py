"""Warnings and errors raised by hdgp.

All hdgp warnings derive from :class:`HDGPWarning` so users can filter them in
one line (``warnings.simplefilter("ignore", hdgp.exceptions.HDGPWarning)``).
"""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning

__all__ = [
    "HDGPWarning",
    "NumericalWarning",
    "ConvergenceWarning",
    "CostWarning",
    "NotPositiveDefiniteError",
]


class HDGPWarning(UserWarning):
    """Base class of every warning emitted by hdgp."""


class NumericalWarning(HDGPWarning):
    """Numerical trouble that was handled, e.g. jitter added to a kernel matrix."""


class ConvergenceWarning(HDGPWarning, _SklearnConvergenceWarning):
    """An optimiser or iterative solver stopped before meeting its tolerance.

    Also a :class:`sklearn.exceptions.ConvergenceWarning`, so scikit-learn's usual filter
    (``warnings.simplefilter("ignore", ConvergenceWarning)``) silences hdgp's too.
    """


class CostWarning(HDGPWarning):
    """The requested computation will be slow or memory-hungry."""


class NotPositiveDefiniteError(ValueError):
    """A kernel matrix stayed non positive-definite after maximal jitter."""
