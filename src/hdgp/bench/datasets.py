"""Load one (data set, split) of a protocol with the protocol's normalisation."""

from __future__ import annotations

import numpy as np
from sklearn import datasets as sklearn_datasets
from sklearn.utils import Bunch

from ..data import load
from ..data.bayesian_benchmarks import N_SPLITS, load_bb_split
from ..data.sigp import load_sigp, load_sigp_split
from .protocols import DatasetSpec

__all__ = ["SKLEARN_TABLES", "load_split", "n_splits"]

_SIGP_FIXED = ("housing", "arcene")
_SIGP_RANDOM_SPLITS = 10
#: Tables bundled with scikit-learn (``source="sklearn"``): name -> ``sklearn.datasets`` loader.
SKLEARN_TABLES = {"breast_cancer": "load_breast_cancer", "wine": "load_wine", "iris": "load_iris",
                  "digits": "load_digits", "diabetes": "load_diabetes"}
_SKLEARN_SPLITS = 10
_SKLEARN_TEST_FRACTION = 0.1


def _sklearn_split(name: str, split: int):
    """Split ``split`` of a bundled scikit-learn table: a permutation seeded by ``1000 + split``, its
    first 10 % (at least one row) held out, as :func:`hdgp.data.load` splits its bundled table."""
    if name not in SKLEARN_TABLES:
        raise ValueError(f"Unknown scikit-learn table {name!r}; valid: {', '.join(SKLEARN_TABLES)}.")
    if not (0 <= split < _SKLEARN_SPLITS):
        raise ValueError(f"split must be in [0, {_SKLEARN_SPLITS - 1}] for {name!r}, got {split}.")
    X, y = getattr(sklearn_datasets, SKLEARN_TABLES[name])(return_X_y=True)
    perm = np.random.default_rng(1000 + split).permutation(len(y))
    n_test = max(1, int(round(_SKLEARN_TEST_FRACTION * len(y))))
    test, train = perm[:n_test], perm[n_test:]
    return X[train], y[train], X[test], y[test], _SKLEARN_SPLITS


def _raw_split(spec: DatasetSpec, split: int, data_dir):
    X_train, y_train, X_test, y_test, n = _stored_split(spec, split, data_dir)
    if spec.target_transform == "exp":
        y_train, y_test = np.exp(y_train), np.exp(y_test)
    return X_train, y_train, X_test, y_test, n


def _stored_split(spec: DatasetSpec, split: int, data_dir):
    name = spec.loader_name or spec.name
    if spec.source == "registry":
        b = load(name, split=split, data_dir=data_dir, standardize=False, **spec.kwargs)
        return b.X_train, b.y_train, b.X_test, b.y_test, b.n_splits
    if spec.source == "sklearn":
        return _sklearn_split(name, split)
    if spec.source == "bayesian-benchmarks":
        return (*load_bb_split(name, split, data_dir), N_SPLITS)
    if spec.source == "sigp-fixed":
        if split != 0:
            raise ValueError(f"{spec.name!r} has a single fixed split (0), got split {split}.")
        return (*load_sigp_split(name, data_dir), 1)
    X, y = load_sigp(name, data_dir)
    if not (0 <= split < _SIGP_RANDOM_SPLITS):
        raise ValueError(f"split must be in [0, {_SIGP_RANDOM_SPLITS - 1}] for {spec.name!r}, got {split}.")
    perm = np.random.default_rng(1000 + split).permutation(len(y))
    test, train = perm[: spec.n_test], perm[spec.n_test:]
    return X[train], y[train], X[test], y[test], _SIGP_RANDOM_SPLITS


def n_splits(spec: DatasetSpec, data_dir=None) -> int:
    """Number of splits the data set offers (loads split 0)."""
    if spec.source == "sigp-fixed":
        return 1
    if spec.source == "sigp-random":
        return _SIGP_RANDOM_SPLITS
    if spec.source == "sklearn":
        return _SKLEARN_SPLITS
    return _raw_split(spec, 0, data_dir)[4]


def load_split(spec: DatasetSpec, split: int, normalisation: str, data_dir=None) -> Bunch:
    """Train/test arrays of one split, scaled with training statistics.

    Parameters
    ----------
    spec : DatasetSpec
    split : int
    normalisation : {"zscore", "x-only", "y-only", "none"}
        ``"zscore"`` scales inputs and (for regression) the target; ``"x-only"``
        scales inputs only; ``"y-only"`` the (regression) target only; ``"none"``
        returns raw data.
    data_dir : path, optional
        Folder with ``uci/`` and ``sigp/`` (default ``$HDGP_DATA_DIR``).

    Returns
    -------
    Bunch with ``X_train, y_train, X_test, y_test, n_splits``.
    """
    X_train, y_train, X_test, y_test, n = _raw_split(spec, split, data_dir)
    X_train, X_test = np.asarray(X_train, float), np.asarray(X_test, float)
    y_train, y_test = np.asarray(y_train).ravel(), np.asarray(y_test).ravel()
    if normalisation in ("zscore", "x-only"):
        mean, std = X_train.mean(0), X_train.std(0)
        std = np.where(std > 0, std, 1.0)
        X_train, X_test = (X_train - mean) / std, (X_test - mean) / std
    if normalisation in ("zscore", "y-only") and spec.task == "regression":
        mean, std = y_train.mean(), y_train.std()
        std = std if std > 0 else 1.0
        y_train, y_test = (y_train - mean) / std, (y_test - mean) / std
    return Bunch(X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test, n_splits=n)
