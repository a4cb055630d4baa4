"""Registry of named model presets (the model names used in the papers' tables).

Each model family registers its presets when its estimator module is imported;
:func:`preset` builds a fresh, unfitted estimator from a name. The benchmark
harness and the CLI build models only through this registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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


def _ensure_loaded() -> None:
    from . import estimators  # noqa: F401  (importing registers every family's presets)


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
    _ensure_loaded()
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
    _ensure_loaded()
    return {p.name: p.description for p in sorted(_REGISTRY.values(), key=lambda p: p.name.lower())}
