"""Published numbers for a protocol, read from the shared reference CSV files.

The reference folder is found, in order, from

1. the ``reference_dir`` argument (``--reference-dir`` on the command line),
2. the environment variable ``HDGP_REFERENCE_DIR``,
3. the folder ``reference/`` beside the benchmark data folder
   (``$HDGP_DATA_DIR/../reference``), which is how the shared folders are laid out.

Numbers are returned in one long table with our data-set, model and metric
names (see :class:`~hdgp.bench.protocols.ReferenceSpec`), the spread as one
standard deviation, and the number of repetitions behind it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import find_data_dir
from .protocols import Protocol, get_protocol

__all__ = ["REFERENCE_DIR_ENV", "empty_reference", "find_reference_dir", "load_reference"]

#: Environment variable naming the folder with the papers' reference CSV files.
REFERENCE_DIR_ENV = "HDGP_REFERENCE_DIR"
_COLUMNS = ["dataset", "model", "metric", "paper_mean", "paper_std", "paper_n", "source"]


def _our_names(aliases: dict, paper_name: str) -> list[str]:
    """Our labels (models or data sets) that a paper row compares with: an alias may name one or several."""
    ours = aliases.get(paper_name, paper_name)
    return [ours] if isinstance(ours, str) else list(ours)


def empty_reference() -> pd.DataFrame:
    """A reference table with no rows (the shape :func:`load_reference` returns)."""
    return pd.DataFrame(columns=_COLUMNS)


def find_reference_dir(reference_dir=None, data_dir=None) -> Path | None:
    """The reference folder (see the module docstring), or None when none exists."""
    if reference_dir is not None:
        path = Path(reference_dir).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"Reference folder {str(path)!r} does not exist.")
        return path
    env = os.environ.get(REFERENCE_DIR_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"{REFERENCE_DIR_ENV}={env!r} is not a folder.")
        return path
    root = find_data_dir(data_dir)
    if root is not None and (root.parent / "reference").is_dir():
        return root.parent / "reference"
    return None


def load_reference(protocol, reference_dir=None, data_dir=None) -> pd.DataFrame:
    """The paper numbers of ``protocol`` as a long DataFrame.

    Returns
    -------
    DataFrame with columns ``dataset, model, metric, paper_mean, paper_std,
    paper_n, source``; empty when the protocol has no references or the folder
    is not found.
    """
    proto: Protocol = get_protocol(protocol)
    folder = find_reference_dir(reference_dir, data_dir) if proto.references else None
    if folder is None:
        return empty_reference()
    frames = []
    for ref in proto.references:
        path = folder / ref.file
        if not path.is_file():
            raise FileNotFoundError(f"Reference file {ref.file!r} of protocol {proto.name!r} not in {str(folder)!r}.")
        raw = pd.read_csv(path, dtype=str)
        for col, value in ref.filters.items():
            if col not in raw.columns:
                raise ValueError(f"{ref.file}: no column {col!r} to filter on; columns: {list(raw.columns)}.")
            raw = raw[raw[col] == str(value)]
        mean = ref.sign * raw[ref.value_column].astype(float)
        if ref.spread_column is not None:
            std = raw[ref.spread_column].astype(float) / (2.0 if ref.spread == "2std" else 1.0)
        else:
            std = pd.Series(np.nan, index=raw.index)
        frames.append(pd.DataFrame({
            "dataset": raw["dataset"].map(lambda d: _our_names(ref.dataset_aliases, d)),
            "model": raw["model"].map(lambda m: _our_names(ref.model_aliases, m)),
            "metric": ref.metric,
            "paper_mean": mean.to_numpy(),
            "paper_std": std.to_numpy(),
            "paper_n": ref.n_repeats if ref.n_repeats is not None else np.nan,
            "source": ref.file,
        }).explode("dataset").explode("model"))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_COLUMNS)
    return out.drop_duplicates(["dataset", "model", "metric"], keep="first").reset_index(drop=True)
