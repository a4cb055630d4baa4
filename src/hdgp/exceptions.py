"""Warnings and errors raised by hdgp.

All hdgp warnings derive from :class:`HDGPWarning` so users can filter them in
one line (``warnings.simplefilter("ignore", hdgp.exceptions.HDGPWarning)``).
"""

from __future__ import annotations

import os
import sys
import warnings

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning

__all__ = [
    "HDGPWarning",
    "NumericalWarning",
    "ConvergenceWarning",
    "CostWarning",
    "NotPositiveDefiniteError",
    "warn_caller",
]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: torch's ``no_grad`` decorator: a wrapper frame between hdgp functions and their caller
_TORCH_WRAPPER = os.path.join("torch", "utils", "_contextlib.py")


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


def warn_caller(message: str, category: type[Warning] = HDGPWarning) -> None:
    """Warn at the first frame outside hdgp (the user's line), whatever the depth of the call inside
    hdgp (and through torch's ``no_grad`` wrappers): a fixed ``stacklevel`` is right for one path
    only (``warnings.warn``'s ``skip_file_prefixes`` needs Python 3.12)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE_DIR)
                                 or frame.f_code.co_filename.endswith(_TORCH_WRAPPER)):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)
