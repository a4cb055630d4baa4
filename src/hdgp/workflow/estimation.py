"""Building, fitting and scoring one preset on a table: what both :func:`~hdgp.workflow.fitting.fit_table`
and the model selection (:mod:`hdgp.workflow.select`) use. It imports neither of them."""

from __future__ import annotations

import re
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.base import is_classifier

from .. import metrics as _metrics
from ..exceptions import CostWarning
from ..io.table import TableSchema
from ..presets import preset, presets
from .classification import classifier_for

__all__ = ["COVERAGE_LEVELS", "evaluate", "keep_levels_in_training", "make_estimator", "preset_name",
           "resolve_model", "timed_fit"]

#: Central-interval probabilities whose held-out coverage is reported.
COVERAGE_LEVELS = (0.5, 0.9, 0.95)
def preset_name(model: str) -> str:
    """The registered preset name for ``model`` (case-insensitive); ValueError names the others."""
    names = {n.lower(): n for n in presets()}
    key = model.lower()
    if key in names:
        return names[key]
    raise ValueError(f"Unknown model {model!r}. Use 'auto' or one of: {', '.join(sorted(names.values()))}.")


def resolve_model(model: str, schema: TableSchema) -> str:
    """The preset fitted for ``model`` on the schema's task (e.g. ``oak`` on a class target: OAK-classifier).

    Raises
    ------
    ValueError
        Unknown name, or a regression-only model on a classification target (or the reverse).
    """
    name = preset_name(model)
    classifier = is_classifier(preset(name))
    if schema.task == "classification":
        return classifier_for(name, is_classifier=classifier)
    if classifier:
        regression = sorted(n for n in presets() if not is_classifier(preset(n)))
        raise ValueError(f"Model {name} is a classifier, but the target {schema.target!r} is fitted as regression "
                         f"({schema.task_reason}). Use --task classification if its values are class labels, or a "
                         f"regression model: auto, {', '.join(n.lower() for n in regression)}.")
    return name


def make_estimator(model: str, schema: TableSchema, *, params: dict | None = None, random_state=0,
                   verbose: bool = False, strict: bool = True):
    """A new estimator for preset ``model``, set up for the table's categorical columns.

    Models with a ``categorical_features`` parameter (OAK) get integer-coded
    categorical columns and their names; every other model gets one-hot columns
    (``schema.encoding`` is set accordingly).

    Parameters
    ----------
    params : dict, optional
        Estimator parameters to override (e.g. ``{"max_iter": 50}``).
    strict : bool, default=True
        Raise on parameters the model does not have (otherwise skip them).
    """
    name = preset_name(model)
    est = preset(name)
    accepted = est.get_params(deep=False)
    chosen = {"random_state": random_state} if "random_state" in accepted else {}
    if verbose and "verbose" in accepted:
        chosen["verbose"] = True
    for key, value in (params or {}).items():
        if key in accepted:
            chosen[key] = value
        elif strict:
            raise ValueError(f"Model {name} has no parameter {key!r}. Its parameters: {', '.join(sorted(accepted))}.")
    if isinstance(chosen.get("class_weight"), dict):
        chosen["class_weight"] = _weights_by_code(chosen["class_weight"], schema.classes)
    if "categorical_features" in accepted:
        schema.encoding = "codes"
        if schema.categorical:
            chosen["categorical_features"] = list(schema.categorical)
    else:
        schema.encoding = "onehot"
    return est.set_params(**chosen)


def _weights_by_code(weights: dict, classes) -> dict:
    """A ``class_weight`` dict keyed by the table's class labels, re-keyed by the codes 0..K-1 the
    estimator is fitted to. A key matches a label equal to it or written the same (keys from
    ``-p class_weight={...}`` are JSON strings, so ``"1"`` matches the label 1)."""
    out = {}
    for key, weight in weights.items():
        code = next((i for i, c in enumerate(classes) if c == key or str(c) == str(key)), None)
        if code is None:
            raise ValueError(f"class_weight names class {key!r}, which is not a class of the target; "
                             f"its classes are {', '.join(map(repr, classes))}.")
        out[code] = weight
    return out


def evaluate(est, X, y) -> tuple[dict, np.ndarray, np.ndarray]:
    """Held-out metrics in target units: RMSE, MAE, R², NLPD and interval coverage.

    Returns
    -------
    metrics : dict
    mean, std : ndarray
    """
    mean, std = est.predict(X, return_std=True)
    y = np.asarray(y, float)
    out = {
        "rmse": _metrics.rmse(y, mean),
        "mae": float(np.mean(np.abs(y - mean))),
        "r2": _metrics.r2(y, mean) if np.ptp(y) > 0 else float("nan"),
        "nlpd": _metrics.nlpd(y, mean, std),
    }
    for level in COVERAGE_LEVELS:
        out[f"coverage_{round(100 * level)}"] = _metrics.interval_coverage(y, mean, std, level)
    return out, mean, std


def timed_fit(est, X, y, classes=(), progress=None):
    """Fit; returns the seconds and the warnings. ``classes``: the labels of the codes 0..K-1 in
    ``y``, which replace the codes in an estimator's "class <code>" error messages. ``progress``:
    called at once with a :class:`~hdgp.exceptions.CostWarning` (an estimate said before the fit
    runs), not only after the fit with the other warnings."""
    caught = []

    def show(message, category, filename, lineno, file=None, line=None):
        caught.append(f"{category.__name__}: {message}")
        if progress is not None and issubclass(category, CostWarning):
            progress(f"warning: {message}")

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        try:
            est.fit(X, y)
        except ValueError as exc:
            if not classes:
                raise
            named = re.sub(r"\bclass (\d+)\b", lambda m: f"class {classes[int(m.group(1))]!r}"
                           if int(m.group(1)) < len(classes) else m.group(0), str(exc))
            if named == str(exc):
                raise
            raise ValueError(named) from exc
    return time.perf_counter() - start, sorted(set(caught))


def keep_levels_in_training(schema: TableSchema, X_raw: pd.DataFrame, train_idx, test_idx):
    """Move held-out rows whose categorical value never occurs in the training rows to training.

    A rare level that the random split puts only in the held-out part could not be
    predicted (the model has no parameters for it). Returns the new index arrays and
    how many rows moved.
    """
    unseen = np.zeros(len(test_idx), dtype=bool)
    for c in schema.features:
        if schema.kinds[c] == "categorical":
            unseen |= ~X_raw[c].iloc[test_idx].isin(set(X_raw[c].iloc[train_idx])).to_numpy()
    if not unseen.any():
        return train_idx, test_idx, 0
    return np.concatenate([train_idx, test_idx[unseen]]), test_idx[~unseen], int(unseen.sum())
