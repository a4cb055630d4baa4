"""Data-set registry: shared UCI benchmark sets, scikit-learn's bundled sets, synthetic functions.

>>> from hdgp import data
>>> ds = data.load("diabetes", split=0)
>>> ds.X_train.shape[1]
10
"""

from __future__ import annotations

import difflib
import os

import numpy as np
from sklearn import datasets as sklearn_datasets
from sklearn.utils import Bunch

from ._paths import DATA_DIR_ENV, find_data_dir, why_data_dir_missing
from .synthetic import SYNTHETIC
from .uci import load_uci, uci_names

__all__ = ["DATA_DIR_ENV", "find_data_dir", "list_datasets", "load", "why_data_dir_missing"]

_SKLEARN = ("diabetes",)
_N_RANDOM_SPLITS = 10
_TEST_FRACTION = 0.1


def list_datasets(data_dir=None) -> dict[str, str]:
    """Map every available data-set name to its source ("uci", "sklearn" or "synthetic")."""
    out = {name: "sklearn" for name in _SKLEARN}
    out.update({name: "synthetic" for name in SYNTHETIC})
    out.update({name: "uci" for name in uci_names(data_dir)})
    return out


def _random_split(X, y, split: int):
    rng = np.random.default_rng(1000 + split)
    perm = rng.permutation(len(y))
    n_test = max(1, int(round(_TEST_FRACTION * len(y))))
    test, train = perm[:n_test], perm[n_test:]
    return X[train], y[train], X[test], y[test]


def _suggestion(name: str, names) -> str:
    """`` Did you mean 'x'?`` for names close to ``name`` (case-insensitive), else ``""``."""
    by_lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(by_lower[c]) for c in close)}?" if close else ""


def _check_uci_name(name: str, data_dir) -> None:
    """Raise a helpful error unless ``name`` is a UCI set at ``<data folder>/uci/<name>/data.csv.gz``.

    Raises
    ------
    FileNotFoundError
        The data folder (``data_dir`` or ``$HDGP_DATA_DIR``) is unset, missing or has no ``uci/``.
    ValueError
        The folder exists but holds no set called ``name`` (the message lists the valid names).
    """
    builtin = [*_SKLEARN, *SYNTHETIC]
    root = find_data_dir(data_dir)
    wanted = f"a UCI set at <data folder>/uci/{name}/data.csv.gz"
    if root is None or not (root / "uci").is_dir():
        given = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
        why = (f"{DATA_DIR_ENV} is not set" if not given else f"{str(given)!r} is not a folder" if root is None
               else f"{str(root)!r} has no 'uci/' folder")
        raise FileNotFoundError(
            f"Data set {name!r} is not built in (built-in: {', '.join(builtin)}), so it was looked for as {wanted}, "
            f"but {why}.{_suggestion(name, builtin)} Set the environment variable {DATA_DIR_ENV} (or pass "
            f"data_dir=) to the folder that contains 'uci/', e.g. `export {DATA_DIR_ENV}=/path/to/shared/data`."
        )
    available = uci_names(root)
    if name not in available:
        raise ValueError(
            f"Unknown data set {name!r}: not built in and no {str(root / 'uci' / name / 'data.csv.gz')!r}."
            f"{_suggestion(name, builtin + available)} Available: {', '.join(builtin + available)}."
        )


def load(name: str, split: int = 0, data_dir=None, standardize: bool = False, **generator_kwargs) -> Bunch:
    """Load a train/test split of a named data set.

    Parameters
    ----------
    name : str
        A UCI set in ``<HDGP_DATA_DIR>/uci`` (fixed splits from the ``test_mask``),
        ``"diabetes"`` (scikit-learn, 10 seeded 90/10 splits) or a synthetic
        function from :data:`hdgp.data.synthetic.SYNTHETIC` (seeded by ``split``;
        ``generator_kwargs`` such as ``n`` or ``d`` go to the generator).
    split : int, default=0
    data_dir : path, optional
        Folder containing ``uci/``; defaults to ``$HDGP_DATA_DIR``.
    standardize : bool, default=False
        Z-score X and y with training statistics (the papers' protocol); the
        Bunch then carries ``y_mean`` and ``y_scale``.

    Returns
    -------
    Bunch with ``X_train, y_train, X_test, y_test, feature_names, name, split, n_splits``.

    Raises
    ------
    FileNotFoundError
        ``name`` is not built in and the data folder is unset, missing or lacks ``uci/``.
    ValueError
        Unknown ``name`` (the message suggests close names and lists the valid ones) or
        ``split`` out of range.
    """
    if (name in SYNTHETIC or name in _SKLEARN) and not (0 <= split < _N_RANDOM_SPLITS):
        # checked before the split seeds the generator (a negative seed would fail inside NumPy)
        raise ValueError(f"split must be in [0, {_N_RANDOM_SPLITS - 1}] for {name!r}, got {split}.")
    if name in SYNTHETIC:
        X, y = SYNTHETIC[name](rng=split, **generator_kwargs)
        X_train, y_train, X_test, y_test = _random_split(X, y, split)
        n_splits, features = _N_RANDOM_SPLITS, [f"x{i}" for i in range(X.shape[1])]
    elif name in _SKLEARN:
        raw = getattr(sklearn_datasets, f"load_{name}")()
        X_train, y_train, X_test, y_test = _random_split(raw.data, raw.target.astype(float), split)
        n_splits, features = _N_RANDOM_SPLITS, list(raw.feature_names)
    else:
        _check_uci_name(name, data_dir)
        X_train, y_train, X_test, y_test, n_splits = load_uci(name, split, data_dir)
        features = [f"x{i}" for i in range(X_train.shape[1])]  # load_uci checked the split
    out = Bunch(X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test,
                feature_names=features, name=name, split=split, n_splits=n_splits)
    if standardize:
        x_mean, x_std = X_train.mean(0), X_train.std(0)
        x_std = np.where(x_std > 0, x_std, 1.0)
        y_mean, y_std = y_train.mean(), y_train.std()
        y_std = y_std if y_std > 0 else 1.0
        out.update(X_train=(X_train - x_mean) / x_std, X_test=(X_test - x_mean) / x_std,
                   y_train=(y_train - y_mean) / y_std, y_test=(y_test - y_mean) / y_std,
                   y_mean=y_mean, y_scale=y_std)
    return out
