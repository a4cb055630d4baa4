"""UCI regression sets in the ``uci_datasets`` layout with their 10 fixed splits.

Layout (see the shared data README): ``uci/NAME/data.csv.gz`` (no header, last
column is the target) and ``uci/NAME/test_mask.csv.gz`` (0/1, one column per split).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ._paths import data_dir as _data_dir
from ._paths import find_data_dir

__all__ = ["uci_names", "load_uci"]


def uci_names(data_dir=None) -> list[str]:
    """Names of the UCI sets present under ``<data_dir>/uci`` (empty if not found)."""
    root = find_data_dir(data_dir)
    if root is None or not (root / "uci").is_dir():
        return []
    return sorted(p.name for p in (root / "uci").iterdir() if (p / "data.csv.gz").is_file())


@lru_cache(maxsize=8)
def _read(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    data = np.loadtxt(folder / "data.csv.gz", delimiter=",", ndmin=2)
    mask = np.loadtxt(folder / "test_mask.csv.gz", delimiter=",", ndmin=2).astype(bool)
    if mask.shape[0] != data.shape[0]:
        raise ValueError(f"{folder}: test mask has {mask.shape[0]} rows but data has {data.shape[0]}.")
    return data, mask


def load_uci(name: str, split: int = 0, data_dir=None):
    """Train/test arrays of split ``split`` of UCI set ``name`` (raw units).

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
    n_splits : int
    """
    folder = _data_dir(data_dir) / "uci" / name
    if not (folder / "data.csv.gz").is_file():
        raise ValueError(f"Unknown UCI data set {name!r}; available: {', '.join(uci_names(data_dir))}.")
    data, mask = _read(folder)
    n_splits = mask.shape[1]
    if not (0 <= split < n_splits):
        raise ValueError(f"split must be in [0, {n_splits - 1}] for {name!r}, got {split}.")
    test = mask[:, split]
    X, y = data[:, :-1], data[:, -1]
    return X[~test], y[~test], X[test], y[test], n_splits
