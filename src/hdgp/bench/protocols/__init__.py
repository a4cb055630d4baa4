"""Benchmark protocols as data: which data sets, splits, models, metrics and seeds.

A :class:`Protocol` is a frozen description of one paper's experiment (or of a
survey across model families). It holds no code paths of its own: the runner
expands it into one task per (data set, model, split, seed) and the report
compares the stored results with the paper's numbers named by its
:class:`ReferenceSpec` entries. Built-in protocols live in :data:`PROTOCOLS`
(defined per paper in this package's modules); :func:`get_protocol` also reads a
protocol from a JSON file (same fields), which is how tests and users define small
custom benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import generalisation, oak, rpa_gp, sigp, survey
from ._specs import MODEL_SOURCES, NORMALISATIONS, SOURCES, DatasetSpec, ModelSpec, Protocol, ReferenceSpec

__all__ = [
    "DatasetSpec",
    "ModelSpec",
    "ReferenceSpec",
    "Protocol",
    "PROTOCOLS",
    "NORMALISATIONS",
    "SOURCES",
    "MODEL_SOURCES",
    "get_protocol",
    "protocol_names",
]

#: Built-in protocols by name.
PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    rpa_gp.TABLE1, survey.DUVENAUD, oak.TABLE5, oak.TABLE5_PAPER_SPLITS, sigp.TABLE2, survey.ALL_FAMILIES,
    rpa_gp.FIG3, rpa_gp.FIG5, rpa_gp.FIG6, oak.FIG3, generalisation.GENERALISATION)}


def protocol_names() -> list[str]:
    """Names of the built-in protocols."""
    return list(PROTOCOLS)


def get_protocol(name_or_path) -> Protocol:
    """A built-in protocol by name, or one read from a JSON file path.

    Raises
    ------
    ValueError
        If ``name_or_path`` is neither a built-in name nor an existing ``.json`` file.
    """
    if isinstance(name_or_path, Protocol):
        return name_or_path
    key = str(name_or_path)
    if key in PROTOCOLS:
        return PROTOCOLS[key]
    path = Path(key)
    if path.suffix == ".json" and path.is_file():
        try:
            return Protocol.from_dict(json.loads(path.read_text()))
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"Protocol file {key!r} is not a valid protocol: {exc}") from exc
    raise ValueError(
        f"Unknown protocol {key!r}. Valid protocols: {', '.join(PROTOCOLS)} (or a path to a protocol .json file)."
    )
