"""Input validation: the inputs of the estimators that take numbers only (every one but OAK's),
DataFrame column names and class labels.

scikit-learn's ``validate_data`` turns a DataFrame with a text, categorical or date column
into a float array and fails inside NumPy ("could not convert string to float: 'z'",
``DTypePromotionError``), naming neither the column nor what to do. Such columns are
refused here first, by name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

__all__ = ["check_class_labels", "check_unique_columns", "missing_cells_text", "validate_numeric"]

_SHOWN = 5


def validate_numeric(estimator, X, y="no_validation", **kwargs):
    """``sklearn.utils.validation.validate_data(estimator, X, y, **kwargs)`` after refusing the
    DataFrame columns of ``X`` that hold something other than numbers (or booleans)."""
    if isinstance(X, pd.DataFrame):
        check_unique_columns(X)
        bad = [f"{c!r} ({X[c].dtype})" for c in X.columns if not _numeric(X[c])]
        if bad:
            raise ValueError(
                f"{type(estimator).__name__} takes numeric inputs, but column(s) {', '.join(bad[:_SHOWN])}"
                f"{f' and {len(bad) - _SHOWN} more' if len(bad) > _SHOWN else ''} hold other values. "
                "OAKRegressor and OAKClassifier take categorical columns (pandas 'category' dtype); otherwise "
                "encode them first (e.g. scikit-learn's OneHotEncoder; dates as numbers), or fit the whole table "
                "with hdgp.workflow.fit_table (the `hdgp fit` command), which encodes categories and dates."
            )
    takes_missing = getattr(estimator, "_takes_missing", False)
    kwargs.setdefault("ensure_all_finite", "allow-nan")  # NaN: reported below, every column at once
    out = validate_data(estimator, X, y, **kwargs)
    arr = out[0] if isinstance(out, tuple) else out
    if not takes_missing and isinstance(arr, np.ndarray) and arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{type(estimator).__name__} does not take missing values (NaN): "
                         f"{missing_cells_text(arr, getattr(estimator, 'feature_names_in_', None))}. "
                         "OAKRegressor and OAKClassifier take them (the orthogonal kernel marginalises a missing "
                         "feature exactly under its input measure); otherwise fill those cells or drop those rows.")
    return out


def missing_cells_text(X: np.ndarray, names=None) -> str:
    """Every column of ``X`` with missing cells, with its count and first rows, in one line."""
    missing = np.isnan(X)
    parts = []
    for j in np.flatnonzero(missing.any(0)):
        rows = np.flatnonzero(missing[:, j])
        label = repr(str(names[j])) if names is not None else f"column {j}"
        shown = ", ".join(map(str, rows[:_SHOWN])) + (" and more" if len(rows) > _SHOWN else "")
        parts.append(f"{label}: {len(rows)} cell(s), rows {shown}")
    return "missing cells in " + "; ".join(parts)


def check_unique_columns(frame: pd.DataFrame) -> None:
    """Refuse a DataFrame whose column names repeat (``frame[name]`` would be a table, not a column).

    Raises
    ------
    ValueError
        Naming the repeated columns.
    """
    repeated = frame.columns[frame.columns.duplicated()].unique()
    if len(repeated):
        raise ValueError(f"Column names must be unique; {', '.join(map(repr, repeated))} "
                         f"appear{'s' if len(repeated) == 1 else ''} more than once.")


def check_class_labels(y: np.ndarray) -> None:
    """scikit-learn's ``check_classification_targets`` after refusing missing labels (None, NaN),
    which would fail inside ``np.unique`` ("'<' not supported between 'NoneType' and 'str'").

    Raises
    ------
    ValueError
        If a label is missing or the labels are not classes (e.g. continuous values).
    """
    missing = pd.isna(np.asarray(y, dtype=object))
    if missing.any():
        raise ValueError(f"y has {int(missing.sum())} missing class label(s) (None or NaN), e.g. at row "
                         f"{int(np.flatnonzero(missing)[0])}; drop those rows or give them a label.")
    check_classification_targets(y)


def _numeric(column: pd.Series) -> bool:
    """Numbers or booleans, including an object column of numbers."""
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
        return True
    if column.dtype != object:
        return False
    values = column.dropna()
    return bool(pd.to_numeric(values, errors="coerce").notna().all())


def fill_missing(X, seed: int):
    """``X`` (a tensor or array) with each missing cell replaced by an observed value of its column
    drawn at random (seeded): a sample from the column's empirical measure, for placing inducing
    inputs, which have no missing cells. ``X`` itself when nothing is missing."""
    values = X.detach().cpu().numpy() if hasattr(X, "detach") else np.asarray(X, dtype=float)
    missing = np.isnan(values)
    if not missing.any():
        return X
    values = values.astype(float)  # a copy
    rng = np.random.default_rng(seed)
    for j in np.flatnonzero(missing.any(0)):
        rows = np.flatnonzero(missing[:, j])
        values[rows, j] = rng.choice(values[~missing[:, j], j], size=len(rows))
    return X.new_tensor(values) if hasattr(X, "new_tensor") else values
