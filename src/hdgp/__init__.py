"""hdgp: structured Gaussian processes for high-dimensional tabular data.

The public names load on first use (PEP 562 module ``__getattr__``): ``import hdgp`` stays
light, so ``hdgp --help`` starts without torch, gpytorch or scikit-learn.
"""

from __future__ import annotations

import importlib
import sys
import types

from ._version import __version__

#: Public name → the module that defines it (imported on first access: these modules load torch,
#: gpytorch or scikit-learn, which take seconds to import).
_LAZY = {
    "AdditiveGPRegressor": "hdgp.estimators",
    "BaseGPRegressor": "hdgp.estimators",
    "GPClassifier": "hdgp.estimators",
    "GPRegressor": "hdgp.estimators",
    "OAKClassifier": "hdgp.estimators",
    "OAKRegressor": "hdgp.estimators",
    "ProjectedAdditiveGPRegressor": "hdgp.estimators",
    "SIGPClassifier": "hdgp.estimators",
    "SIGPRegressor": "hdgp.estimators",
    "preset": "hdgp.presets",
    "presets": "hdgp.presets",
    "register_preset": "hdgp.presets",
    "load": "hdgp.io",
    "save": "hdgp.io",
}
#: ``hdgp.summary`` is :func:`hdgp.workflow.summarize`.
_RENAMED = {"summary": ("hdgp.workflow", "summarize")}
_SUBMODULES = ("data", "exceptions", "io", "kernels", "metrics", "workflow")

__all__ = sorted([*_LAZY, *_RENAMED, *_SUBMODULES, "__version__"])


def __getattr__(name: str):
    if name in _LAZY or name in _RENAMED:
        module, attribute = _RENAMED.get(name, (_LAZY.get(name), name))
        value = getattr(importlib.import_module(module), attribute)
    else:
        try:  # any submodule, e.g. hdgp.workflow or hdgp._threads, as after `import hdgp.<name>`
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """``hdgp.presets`` is the function :func:`hdgp.presets.presets`, though a submodule has that name:
    importing the submodule binds it on the package (after ``hdgp.preset`` loads it), which would hide
    the function; the property keeps the function the public name."""

    @property
    def presets(self):
        return importlib.import_module(f"{__name__}.presets").presets

    @presets.setter
    def presets(self, value):  # the import system binding the submodule: the function stays the name
        pass


sys.modules[__name__].__class__ = _Package
