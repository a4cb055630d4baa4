"""The subspace-induced GP estimators (Tan & Mukherjee), one per module: :class:`SIGPRegressor`
(:mod:`hdgp.estimators.sigp_regressor`) and :class:`SIGPClassifier` (:mod:`hdgp.estimators.sigp_classifier`),
on the shared model and cross-validation of :mod:`hdgp.estimators._sigp_base`."""

from ._sigp_base import _SIGPBase
from .sigp_classifier import SIGPClassifier
from .sigp_regressor import SIGPRegressor

__all__ = ["SIGPRegressor", "SIGPClassifier", "_SIGPBase"]
