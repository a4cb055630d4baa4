"""Data-set lists and helpers shared by the built-in protocols."""

from __future__ import annotations

from ._specs import ModelSpec

_UCI_SMALL_TO_GAS = ("challenger", "fertility", "concreteslump", "autos", "servo", "breastcancer", "machine",
                     "yacht", "autompg", "housing", "forest", "stock", "energy", "concrete", "airfoil", "gas")
_UCI_ALL = _UCI_SMALL_TO_GAS + ("pumadyn32nm", "elevators", "kin40k", "protein", "keggdirected")


def _models(*names: str) -> tuple:
    return tuple(ModelSpec(n, n) for n in names)
