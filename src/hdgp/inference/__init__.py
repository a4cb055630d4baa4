"""Inference engines: exact Cholesky (more arrive with SKI, SGPR and SVGP)."""

from .exact import ExactGPModel, ExactPosterior

__all__ = ["ExactGPModel", "ExactPosterior"]
