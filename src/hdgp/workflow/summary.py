"""Readable summaries of fitted estimators (:mod:`hdgp._summary`, which sits below the estimators)."""

from .._summary import FLAT_VARIATION, feature_names, format_lengthscale, learned_quantities, summarize

__all__ = ["FLAT_VARIATION", "feature_names", "format_lengthscale", "learned_quantities", "summarize"]
