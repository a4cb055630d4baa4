"""The inference engines and what each can do: the one place an estimator learns it.

An estimator's ``inference`` parameter names an :class:`Engine`. Instead of probing
model objects (``hasattr(model, "fit_model")``), the estimators read the engine's
declared abilities: whether it needs inducing inputs, trains itself (its own
minibatch loop) or is trained by :func:`hdgp.training.fit_hyperparameters`,
whether the OAK Sobol indices can be read from its posterior, whether it has a
classification likelihood, and whether it needs a projected-additive kernel.
:func:`check_inference` validates the parameter and :func:`resolve_inference`
turns ``"auto"`` into an engine name; every estimator uses both.
"""

from __future__ import annotations

from dataclasses import dataclass

from .exact import ExactGPModel
from .ski import SKIProjectedGPModel
from .sparse import SGPRModel
from .variational import SVGPModel

__all__ = ["ENGINE_REGISTRY", "Engine", "allowed_inference", "check_inference", "engine_of", "resolve_inference"]


@dataclass(frozen=True)
class Engine:
    """One inference engine.

    Attributes
    ----------
    name : str
        The value of the estimators' ``inference`` parameter.
    model : type
        Its ``gpytorch.Module``, built as ``model(kernel, noise_lower_bound=..., noise_prior=...)``
        (plus ``inducing_points=Z`` when :attr:`inducing_points`).
    inducing_points : bool
        Needs inducing inputs (k-means centres of the training inputs).
    trains_itself : bool
        Has ``fit_model(X, y, *, max_iter, random_state, verbose, batch_size)`` (minibatch
        training); otherwise the estimator trains it with ``fit_hyperparameters``.
    sobol : bool
        Its posterior gives the OAK component posteriors and Sobol indices.
    classification : bool
        Has a classification (Bernoulli) likelihood.
    needs_projections : bool
        Works only with a projected-additive kernel of 1-D projections (SKI's grids).
    """

    name: str
    model: type
    inducing_points: bool = False
    trains_itself: bool = False
    sobol: bool = True
    classification: bool = False
    needs_projections: bool = False


#: Engine name → :class:`Engine`, in the order error messages list them.
ENGINE_REGISTRY: dict[str, Engine] = {e.name: e for e in (
    Engine("exact", ExactGPModel),
    Engine("sparse", SGPRModel, inducing_points=True),
    Engine("variational", SVGPModel, inducing_points=True, trains_itself=True, classification=True),
    Engine("ski", SKIProjectedGPModel, sobol=False, needs_projections=True),
)}

_SKI_NOTE = ("SKI exists only for projected models (ProjectedAdditiveGPRegressor, e.g. "
             "hdgp.preset('DPA-GP-ARD-SKI')).")


def allowed_inference(*, classification: bool = False, projections: bool = False, sobol: bool = False) -> tuple:
    """The ``inference`` values of an estimator: ``"auto"`` (regressors) and the engines it can use.

    ``classification``: the estimator needs a classification likelihood (no ``"auto"``);
    ``projections``: it has a projected-additive kernel; ``sobol``: it reads Sobol indices
    from the posterior.
    """
    names = tuple(e.name for e in ENGINE_REGISTRY.values()
                  if (e.classification or not classification) and (projections or not e.needs_projections)
                  and (e.sobol or not sobol))
    return names if classification else ("auto", *names)


def check_inference(inference, owner: str, **needs) -> None:
    """Raise a ValueError naming the allowed values when ``inference`` is not one of
    :func:`allowed_inference` ``(**needs)`` for the estimator class called ``owner``."""
    allowed = allowed_inference(**needs)
    if isinstance(inference, str) and inference in allowed:
        return
    if inference == "ski":
        note = f": {owner} does not support inference='ski': {_SKI_NOTE}"
    elif needs.get("classification"):
        note = " (a Bernoulli SVGP)."
    else:
        note = "."
    raise ValueError(f"{owner} supports inference in {allowed}, got {inference!r}; inference must be one of these{note}")


def resolve_inference(inference: str, n: int, *, exact_max_n: int, ski_possible: bool = False) -> str:
    """The engine name for ``n`` training rows: ``inference`` itself, or for ``"auto"`` exact
    inference up to ``exact_max_n`` rows and beyond it SKI where ``ski_possible`` (1-D
    projections), else the sparse (SGPR) engine."""
    if inference != "auto":
        return inference
    if n <= exact_max_n:
        return "exact"
    return "ski" if ski_possible else "sparse"


def engine_of(model) -> Engine:
    """The :class:`Engine` whose model class ``model`` is an instance of."""
    for engine in ENGINE_REGISTRY.values():
        if type(model) is engine.model:
            return engine
    for engine in ENGINE_REGISTRY.values():  # a subclass of an engine's model
        if isinstance(model, engine.model):
            return engine
    raise TypeError(f"{type(model).__name__} is not the model of a registered inference engine.")
