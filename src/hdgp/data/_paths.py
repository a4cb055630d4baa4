"""Where the shared benchmark data live (``HDGP_DATA_DIR``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_DIR_ENV", "data_dir", "find_data_dir", "why_data_dir_missing"]

#: Environment variable naming the folder that holds ``uci/`` and ``sigp/``.
DATA_DIR_ENV = "HDGP_DATA_DIR"


def find_data_dir(data_dir=None) -> Path | None:
    """The benchmark data folder from the argument or ``HDGP_DATA_DIR``; None if unset/missing."""
    candidate = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    if not candidate:
        return None
    path = Path(candidate).expanduser()
    return path if path.is_dir() else None


def why_data_dir_missing(data_dir=None) -> str:
    """Why :func:`find_data_dir` found no folder: the given path is not one, or nothing was given."""
    given = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    return f"{given!r} is not a folder" if given else f"{DATA_DIR_ENV} is not set"


def data_dir(data_dir=None) -> Path:
    """Like :func:`find_data_dir` but raise a helpful error when the folder is not found."""
    path = find_data_dir(data_dir)
    if path is None:
        raise FileNotFoundError(
            f"Benchmark data folder not found: {why_data_dir_missing(data_dir)}. Set the environment variable "
            f"{DATA_DIR_ENV} (or pass data_dir=) to the folder that contains 'uci/' and 'sigp/', "
            f"e.g. `export {DATA_DIR_ENV}=../shared/data`."
        )
    return path
