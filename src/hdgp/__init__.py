"""hdgp: structured Gaussian processes for high-dimensional tabular data."""

from . import data, exceptions, kernels, metrics
from ._version import __version__
from .estimators import (AdditiveGPRegressor, BaseGPRegressor, GPClassifier, GPRegressor, OAKClassifier,
                         OAKRegressor, ProjectedAdditiveGPRegressor, SIGPClassifier, SIGPRegressor)
from .presets import preset, presets, register_preset
from . import io, workflow
from .io import load, save
from .workflow import summarize as summary

__all__ = [
    "AdditiveGPRegressor",
    "__version__",
    "BaseGPRegressor",
    "GPClassifier",
    "GPRegressor",
    "OAKClassifier",
    "OAKRegressor",
    "ProjectedAdditiveGPRegressor",
    "SIGPClassifier",
    "SIGPRegressor",
    "data",
    "exceptions",
    "io",
    "kernels",
    "load",
    "metrics",
    "preset",
    "presets",
    "register_preset",
    "save",
    "summary",
    "workflow",
]
