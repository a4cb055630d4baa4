"""The hdgp version in an estimator's pickle, checked when it is unpickled."""

from __future__ import annotations

import warnings

from .. import _version
from ..exceptions import HDGPWarning

__all__ = ["VersionedPickle"]


class VersionedPickle:
    """Mixin: pickles record the hdgp version that wrote them, and unpickling under another
    version warns, as scikit-learn does for its own version (``InconsistentVersionWarning``).

    Pickles hold the library's internal objects, which may change between versions; model
    files (:func:`hdgp.save`) are the versioned format meant to outlive them.
    """

    def __getstate__(self):
        state = super().__getstate__()
        return {**state, "_hdgp_version": _version.__version__}

    def __setstate__(self, state):
        state = dict(state)
        written = state.pop("_hdgp_version", None)
        if written is not None and written != _version.__version__:
            warnings.warn(
                f"This {type(self).__name__} was pickled by hdgp {written} and is unpickled by hdgp {_version.__version__}; "
                "it may not work as before. Refit it, or store models with hdgp.save, whose files are read "
                "across versions.", HDGPWarning, stacklevel=2,
            )
        super().__setstate__(state)
