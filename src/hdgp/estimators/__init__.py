"""scikit-learn estimators. Importing this package registers every family's presets."""

from ._base import BaseGPRegressor
from .gp import GPRegressor
from .sigp import SIGPClassifier, SIGPRegressor

__all__ = ["BaseGPRegressor", "GPRegressor", "SIGPClassifier", "SIGPRegressor"]
