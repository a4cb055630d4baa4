"""scikit-learn estimators (their named presets live in :mod:`hdgp.presets`, above them)."""

from ._base import BaseGPRegressor
from .additive import AdditiveGPRegressor
from .classifier import GPClassifier
from .gp import GPRegressor
from .oak import OAKRegressor
from .oak_classifier import OAKClassifier
from .projected import ProjectedAdditiveGPRegressor
from .sigp import SIGPClassifier, SIGPRegressor


__all__ = ["AdditiveGPRegressor", "BaseGPRegressor", "GPClassifier", "OAKClassifier", "OAKRegressor", "GPRegressor", "ProjectedAdditiveGPRegressor", "SIGPClassifier", "SIGPRegressor"]
