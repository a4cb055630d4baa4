"""Registry of named model presets (the model names used in the papers' tables).

The registry sits above the estimators: it imports the estimator classes and
lists the built-in presets in :data:`_BUILTIN` (estimator modules know nothing
of it). :func:`register_preset` adds a user's own; :func:`preset` builds a
fresh, unfitted estimator from a name. The benchmark harness and the CLI build
models only through this registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .estimators import (AdditiveGPRegressor, GPClassifier, GPRegressor, OAKClassifier, OAKRegressor,
                         ProjectedAdditiveGPRegressor, SIGPClassifier, SIGPRegressor)

__all__ = ["register_preset", "preset", "presets"]


@dataclass(frozen=True)
class _Preset:
    name: str
    factory: Callable
    description: str


_REGISTRY: dict[str, _Preset] = {}


def register_preset(name: str, factory: Callable, description: str) -> None:
    """Register ``factory(**overrides) -> estimator`` under ``name``.

    Raises
    ------
    ValueError
        If another preset with the same name (case-insensitive) exists.
    """
    key = name.lower()
    previous = _REGISTRY.get(key)
    # Re-importing the registering module (e.g. doctest collection) re-registers its presets.
    if previous is not None and previous.factory.__module__ != factory.__module__:
        raise ValueError(f"A preset named {name!r} is already registered by {previous.factory.__module__}.")
    _REGISTRY[key] = _Preset(name, factory, description)


def preset(name: str, **overrides):
    """Return a new unfitted estimator for the model called ``name``.

    Parameters
    ----------
    name : str
        A model name from :func:`presets` (case-insensitive), e.g. ``"RBF-ARD"``.
    **overrides
        Estimator parameters to change (e.g. ``random_state=0``). A preset only sets
        defaults, so an override also replaces a parameter the preset fixes itself
        (``preset("RBF-ARD", kernel="imq-ard")`` is a GP with the IMQ kernel).

    Raises
    ------
    TypeError
        ``name`` is not a string, or an override is not a parameter of the estimator
        (the message lists the valid parameters).
    ValueError
        Unknown preset name (the message lists the registered ones).

    Examples
    --------
    >>> import hdgp
    >>> hdgp.preset("RBF-ARD", random_state=0)
    GPRegressor(random_state=0)
    """
    if not isinstance(name, str):
        raise TypeError(f"A preset name is a string such as 'RBF-ARD', got {name!r}; see hdgp.presets().")
    try:
        entry = _REGISTRY[name.lower()]
    except KeyError:
        raise ValueError(
            f"Unknown preset {name!r}. Available presets: {', '.join(sorted(p.name for p in _REGISTRY.values()))}."
        ) from None
    return _build(entry, overrides)


def _build(entry: _Preset, overrides: dict):
    """The preset's estimator rebuilt with ``overrides`` replacing its parameters.

    The factory runs without arguments, so a keyword it passes itself (e.g.
    ``kernel=``) cannot clash with the user's; the estimator's class is then called
    with the preset's parameters updated by ``overrides`` (scikit-learn constructors
    only store their arguments, so this is the factory's estimator with those changes).
    """
    estimator = entry.factory()
    params = estimator.get_params(deep=False)
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise TypeError(
            f"Preset {entry.name!r} builds a {type(estimator).__name__}, which has no parameter(s) "
            f"{', '.join(map(repr, unknown))}. Valid parameters: {', '.join(sorted(params))}."
        )
    return type(estimator)(**{**params, **overrides})


def presets() -> dict[str, str]:
    """Map every registered preset name to its one-line description."""
    return {p.name: p.description for p in sorted(_REGISTRY.values(), key=lambda p: p.name.lower())}


def _factory(cls, **params) -> Callable:
    """``factory(**overrides)`` building ``cls`` with ``params`` updated by the overrides."""

    def factory(**overrides):
        return cls(**{**params, **overrides})

    return factory


_EXACT_THEN_SPARSE = "GP (exact up to 5000 rows, SGPR beyond)"
_RPA3 = [(3, 1), (3, 2), (3, 3), (2, 4), (2, 5), (1, 6)]

#: The built-in presets: name → (estimator class, its parameters, one-line description).
_BUILTIN = {
    "RBF-ARD": (GPRegressor, dict(kernel="rbf-ard"),
                "GP (exact inference up to 5000 rows, sparse SGPR beyond), squared-exponential kernel with one "
                "length-scale per feature."),
    "IMQ-ARD": (GPRegressor, dict(kernel="imq-ard"),
                f"{_EXACT_THEN_SPARSE}, inverse multiquadric (RQ with alpha=1/2) kernel with ARD length-scales."),
    "GAM": (GPRegressor, dict(kernel="gam"),
            f"{_EXACT_THEN_SPARSE}, first-order additive RBF kernel (one length-scale per feature)."),
    "Linear": (GPRegressor, dict(kernel="linear"),
               "Bayesian linear regression as a GP with a linear kernel and constant mean."),
    "SGPR-RBF-ARD": (GPRegressor, dict(kernel="rbf-ard", inference="sparse"),
                     "Sparse GP (Titsias collapsed bound, k-means inducing points), RBF-ARD kernel."),
    "SVGP": (GPRegressor, dict(kernel="rbf-ard", inference="variational"),
             "Stochastic variational GP (minibatches, natural gradients + Adam), RBF-ARD kernel."),
    "Additive": (AdditiveGPRegressor, {},
                 f"{_EXACT_THEN_SPARSE}, additive SE kernel with all interaction orders up to min(D, 10) "
                 "(Duvenaud et al.)."),
    "OAK": (OAKRegressor, {},
            "Orthogonal additive GP (Lu et al. 2022): flow, constrained kernels, Gamma prior, Sobol ranking."),
    "GP-classifier": (GPClassifier, dict(kernel="rbf-ard"),
                      "Variational GP classifier (Bernoulli SVGP, probit link, 200 k-means inducing points), "
                      "RBF-ARD kernel."),
    "Additive-classifier": (GPClassifier, dict(kernel="additive"),
                            "Variational GP classifier (as GP-classifier) with the additive SE kernel of all "
                            "orders up to min(D, 10) (Duvenaud et al., Tables 1.4-1.5)."),
    "OAK-classifier": (OAKClassifier, {},
                       "Orthogonal additive GP classifier (Bernoulli SVGP, 200 inducing points) with latent "
                       "Sobol indices."),
    "SIGP": (SIGPRegressor, {},
             "Subspace-induced GP (Tan & Mukherjee): rank-m kernel-SDR subspace of the RBF RKHS, "
             "EM for the covariance, hyper-parameters by 5-fold CV."),
    "SIGP-classifier": (SIGPClassifier, {},
                        "Subspace-induced GP classifier: ±1 (one-vs-rest) SIGP regression on a class-sliced "
                        "subspace, temperature-calibrated softmax probabilities."),
    "Single-RP": (ProjectedAdditiveGPRegressor, dict(n_projections=1, directions="random", ard=False),
                  "One 1-D Gaussian random projection with an RBF sub-kernel (Delbridge et al. 2020)."),
    "RPA-GP-1": (ProjectedAdditiveGPRegressor, dict(n_projections=20, directions="random", ard=False),
                 "20 1-D Gaussian random projections, per-projection length-scales and weights."),
    "RPA-GP-2": (ProjectedAdditiveGPRegressor,
                 dict(n_projections=None, degree=[(4, 1), (4, 2), (4, 3)], directions="random", ard=False),
                 "Gaussian random projections of degrees 4x1, 4x2, 4x3 (RBF sub-kernels)."),
    "RPA-GP-3": (ProjectedAdditiveGPRegressor, dict(n_projections=None, degree=_RPA3, directions="random", ard=False),
                 "Gaussian random projections of degrees 3x1, 3x2, 3x3, 2x4, 2x5, 1x6 (degrees above d warn)."),
    "RPA-GP-SKI": (ProjectedAdditiveGPRegressor,
                   dict(n_projections=20, directions="random", ard=False, inference="ski"),
                   "RPA-GP-1 with additive SKI inference (512-point grid per projection)."),
    "DPA-GP": (ProjectedAdditiveGPRegressor, dict(n_projections=20, directions="diverse", ard=False),
               "20 1-D diverse directions (eq. 7), per-projection length-scales and weights."),
    "RPA-GP-ARD": (ProjectedAdditiveGPRegressor, dict(n_projections=20, directions="random", ard=True),
                   "20 1-D Gaussian random projections after learned ARD input scaling, weights 1/J."),
    "DPA-GP-ARD": (ProjectedAdditiveGPRegressor, dict(n_projections=None, directions="diverse", ard=True),
                   "1-D diverse directions after learned ARD input scaling, weights 1/J: 50 for 250-1,000 "
                   "training rows, the paper's 20 otherwise."),
    "DPA-GP-ARD-SKI": (ProjectedAdditiveGPRegressor,
                       dict(n_projections=20, directions="diverse", ard=True, inference="ski"),
                       "DPA-GP-ARD with additive SKI inference (512-point grid per projection)."),
}
for _name, (_cls, _params, _description) in _BUILTIN.items():
    register_preset(_name, _factory(_cls, **_params), _description)
