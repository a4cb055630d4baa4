"""Input validation of the estimators that take numbers only (every one but OAK's).

scikit-learn's ``validate_data`` turns a DataFrame with a text, categorical or date column
into a float array and fails inside NumPy ("could not convert string to float: 'z'",
``DTypePromotionError``), naming neither the column nor what to do. Such columns are
refused here first, by name.
"""

from __future__ import annotations

import pandas as pd
from sklearn.utils.validation import validate_data

__all__ = ["validate_numeric"]

_SHOWN = 5


def validate_numeric(estimator, X, y="no_validation", **kwargs):
    """``sklearn.utils.validation.validate_data(estimator, X, y, **kwargs)`` after refusing the
    DataFrame columns of ``X`` that hold something other than numbers (or booleans)."""
    if isinstance(X, pd.DataFrame):
        bad = [f"{c!r} ({X[c].dtype})" for c in X.columns if not _numeric(X[c])]
        if bad:
            raise ValueError(
                f"{type(estimator).__name__} takes numeric inputs, but column(s) {', '.join(bad[:_SHOWN])}"
                f"{f' and {len(bad) - _SHOWN} more' if len(bad) > _SHOWN else ''} hold other values. "
                "OAKRegressor and OAKClassifier take categorical columns (pandas 'category' dtype); otherwise "
                "encode them first (e.g. scikit-learn's OneHotEncoder; dates as numbers), or fit the whole table "
                "with hdgp.workflow.fit_table (the `hdgp fit` command), which encodes categories and dates."
            )
    return validate_data(estimator, X, y, **kwargs)


def _numeric(column: pd.Series) -> bool:
    """Numbers or booleans, including an object column of numbers."""
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
        return True
    if column.dtype != object:
        return False
    values = column.dropna()
    return bool(pd.to_numeric(values, errors="coerce").notna().all())
