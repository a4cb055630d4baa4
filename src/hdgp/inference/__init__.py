"""Inference engines, by name.

Each engine's model is a ``gpytorch.Module`` with the methods
``neg_log_marginal_likelihood(X, y)`` (or the engine's training objective, e.g. a
bound) and ``posterior(X, y)`` returning an object with ``predict(Xs, latent=...,
full_cov=...)``. Estimators pick one through their ``inference`` parameter; how it
is built and trained follows the abilities it declares in
:data:`~hdgp.inference.engines.ENGINE_REGISTRY`.
"""

from .exact import ExactGPModel, ExactPosterior
from .inducing import InducingPosterior
from .sparse import SGPRModel
from .variational import SVGPModel, fit_svgp
from .engines import ENGINE_REGISTRY, Engine

#: Engine name → model class (the models of :data:`ENGINE_REGISTRY`).
ENGINES = {name: engine.model for name, engine in ENGINE_REGISTRY.items()}

__all__ = ["ENGINES", "ENGINE_REGISTRY", "Engine", "ExactGPModel", "ExactPosterior", "InducingPosterior", "SGPRModel", "SVGPModel", "fit_svgp"]
