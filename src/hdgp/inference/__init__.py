"""Inference engines, by name.

Each engine is a ``gpytorch.Module`` built as ``Engine(kernel, noise_lower_bound=...,
noise_prior=...)`` (plus ``n_inducing``, ``random_state`` and ``X`` when its class
attribute ``uses_inducing_points`` is true) with the methods
``neg_log_marginal_likelihood(X, y)`` (or the engine's training objective, e.g. a
bound) and ``posterior(X, y)`` returning an object with ``predict(Xs, latent=...,
full_cov=...)``. Estimators pick one through their ``inference`` parameter.
A model with a ``fit_model(X, y, *, max_iter, random_state, verbose)`` method trains
itself (e.g. minibatch SVGP) and estimators call it instead of
:func:`hdgp.training.fit_hyperparameters`.
"""

from .exact import ExactGPModel, ExactPosterior
from .inducing import InducingPosterior
from .sparse import SGPRModel
from .variational import SVGPModel, fit_svgp

#: Engine name → model class. Sparse/variational engines register here too.
ENGINES = {"exact": ExactGPModel, "sparse": SGPRModel, "variational": SVGPModel}

__all__ = ["ENGINES", "ExactGPModel", "ExactPosterior", "InducingPosterior", "SGPRModel", "SVGPModel", "fit_svgp"]
