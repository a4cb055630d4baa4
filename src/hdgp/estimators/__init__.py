"""scikit-learn estimators. Importing this package registers every family's presets."""

from ._base import BaseGPRegressor
from .additive import AdditiveGPRegressor
from .classifier import GPClassifier
from .gp import GPRegressor
from .oak import OAKRegressor
from .oak_classifier import OAKClassifier
from .projected import ProjectedAdditiveGPRegressor
from .sigp import SIGPClassifier, SIGPRegressor
from . import scale  # noqa: F401  (registers the SGPR/SVGP presets)

__all__ = ["AdditiveGPRegressor", "BaseGPRegressor", "GPClassifier", "OAKClassifier", "OAKRegressor", "GPRegressor", "ProjectedAdditiveGPRegressor", "SIGPClassifier", "SIGPRegressor"]
