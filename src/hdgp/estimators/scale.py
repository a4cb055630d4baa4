"""Presets of the scalable (inducing-point) regressors: SGPR and SVGP with an RBF-ARD kernel.

The estimators are the ordinary :class:`~hdgp.estimators.gp.GPRegressor` with
``inference="sparse"`` (Titsias' collapsed bound, :mod:`hdgp.inference.sparse`)
or ``inference="variational"`` (minibatch SVGP, :mod:`hdgp.inference.variational`).
"""

from __future__ import annotations

from ..presets import register_preset
from . import classifier, oak_classifier  # noqa: F401  (register the GP-/OAK-classifier presets)
from .gp import GPRegressor

__all__: list = []


def _sgpr_rbf_ard(**kw):
    return GPRegressor(kernel="rbf-ard", **{"inference": "sparse", **kw})


def _svgp_rbf_ard(**kw):
    return GPRegressor(kernel="rbf-ard", **{"inference": "variational", **kw})


register_preset("SGPR-RBF-ARD", _sgpr_rbf_ard,
                "Sparse GP (Titsias collapsed bound, k-means inducing points), RBF-ARD kernel.")
register_preset("SVGP", _svgp_rbf_ard,
                "Stochastic variational GP (minibatches, natural gradients + Adam), RBF-ARD kernel.")
