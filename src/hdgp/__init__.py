"""hdgp: structured Gaussian processes for high-dimensional tabular data."""

from . import data, exceptions, kernels, metrics
from .estimators import BaseGPRegressor, GPRegressor
from .presets import preset, presets, register_preset

__version__ = "0.1.0"

__all__ = [
    "BaseGPRegressor",
    "GPRegressor",
    "data",
    "exceptions",
    "kernels",
    "metrics",
    "preset",
    "presets",
    "register_preset",
]
