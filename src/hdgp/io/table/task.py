"""Task inference and target encoding: regression or classification from a target column, the
reason for the choice, and class labels and codes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import _SHOW, TableError
from .sniffing import _NUMERIC_SHARE, _is_text, _numeric_or_error, _refuse_separated_numbers


#: Most classes a classification target may have.
MAX_CLASSES = 50
#: Values of the ``task`` argument.
TASKS = ("auto", "regression", "classification")


#: Integer targets with at most this many distinct values get a hint that they may be class codes.
_FEW_CODES = 10


def infer_task(series: pd.Series, name: str = "target") -> tuple[str, str]:
    """Decide whether a target column is classification or regression, and say why.

    Text, boolean and pandas-categorical columns are classification targets, as
    are numeric columns with exactly two distinct values (e.g. 0/1); other numeric
    columns are regression targets. A text column whose cells are mostly numbers
    is a numeric column with typos (regression, whose check then names the bad cells).

    Parameters
    ----------
    series : Series
        The target column (missing cells are ignored).
    name : str
        Column name used in the reason.

    Returns
    -------
    task : {"classification", "regression"}
    reason : str
        One sentence, e.g. ``"target 'y' is numeric with exactly two distinct values (0, 1)"``.

    Examples
    --------
    >>> import pandas as pd
    >>> infer_task(pd.Series(["a", "b", "a"]), "y")[0]
    'classification'
    >>> infer_task(pd.Series([0.5, 1.5, 2.5]), "y")
    ('regression', "target 'y' is numeric with 3 distinct values")
    >>> infer_task(pd.Series([0, 1, 2, 1]), "y")[1]
    "target 'y' is numeric with 3 distinct values (if these integers are class codes, use --task classification)"
    """
    values = series.dropna()
    if pd.api.types.is_bool_dtype(values):
        return "classification", f"target {name!r} holds true/false values"
    if isinstance(values.dtype, pd.CategoricalDtype):
        return "classification", f"target {name!r} is a categorical column"
    if _is_text(values):
        numbers = pd.to_numeric(values, errors="coerce")
        if len(values) == 0 or numbers.notna().mean() < _NUMERIC_SHARE:
            _refuse_separated_numbers(values, name)
            return "classification", f"target {name!r} holds text"
        values = numbers.dropna()
        if values.nunique() != 2:  # mostly numbers: regression, whose check names the cells that are not
            return "regression", f"target {name!r} holds numbers (stored as text)"
    distinct = np.unique(values.to_numpy(dtype=np.float64))
    if distinct.size == 2:
        shown = ", ".join(_level_label(v) for v in distinct)
        return "classification", f"target {name!r} is numeric with exactly two distinct values ({shown})"
    reason = f"target {name!r} is numeric with {distinct.size} distinct value{'s' * (distinct.size != 1)}"
    if 2 < distinct.size <= _FEW_CODES and np.all(distinct == np.round(distinct)):
        reason += " (if these integers are class codes, use --task classification)"
    return "regression", reason


def _target(series: pd.Series, name: str, task: str) -> tuple[str, str, list, np.ndarray]:
    """``(task, reason, classes, y)`` of the target column (checked after the feature columns)."""
    reason = f"chosen with task={task!r}"
    if task == "auto":
        task, reason = infer_task(series, name)
    if task == "classification":
        hint = (f" (The task was chosen automatically: the {reason}; use --task regression to fit it as numbers.)"
                if reason.startswith("target") and pd.api.types.is_numeric_dtype(series) else "")
        return task, reason, *_class_codes(series, name, hint)
    y = _numeric_or_error(series, name, " (the target must be numeric for regression; for class labels use "
                          "--task classification, task='classification' in Python)")
    if y.nunique() < 2:
        raise TableError(
            f"The target column {name!r} has {y.nunique()} distinct value(s) ({y.iloc[0]:g}); a model "
            "needs a target that varies. Check that you chose the right --target column."
        )
    return task, reason, [], y.to_numpy()


def _class_values(series: pd.Series) -> pd.Series:
    """Class labels as the table holds them: bools, integers (``1.0`` → ``1``), floats, or text."""
    if pd.api.types.is_bool_dtype(series):
        return series.astype(bool)
    if pd.api.types.is_numeric_dtype(series):
        values = series.astype(np.float64)
        return values.astype(np.int64) if np.all(values == np.round(values)) and values.abs().max() < 2**53 else values
    return series.astype(object).map(_level_label)


def _class_codes(series: pd.Series, name: str, hint: str = "") -> tuple[list, np.ndarray]:
    """``(classes, codes)`` of a classification target, checking class count and sizes."""
    values = _class_values(series)
    if pd.api.types.is_float_dtype(values) and not np.all(np.isfinite(values.to_numpy())):
        raise TableError(f"The target column {name!r} holds infinite values, which cannot be class labels.")
    counts = {(v.item() if isinstance(v, np.generic) else v): int(k) for v, k in values.value_counts().items()}
    classes = sorted(counts, key=_level_key)
    sizes = ", ".join(f"{c!r}: {counts[c]} row{'s' * (counts[c] != 1)}" for c in classes[:_SHOW * 4])
    sizes += " …" if len(classes) > _SHOW * 4 else ""
    if len(classes) < 2:
        raise TableError(
            f"The target column {name!r} has a single class ({sizes}); classification needs at least two "
            f"classes. Check that you chose the right --target column.{hint}"
        )
    if len(classes) > MAX_CLASSES:
        raise TableError(
            f"The target column {name!r} has {len(classes)} classes (at most {MAX_CLASSES} are supported): "
            f"{sizes}. If it holds numbers to predict, use --task regression."
        )
    small = [c for c in classes if counts[c] < 2]
    if small:
        raise TableError(
            f"The target column {name!r} has class(es) {', '.join(map(repr, small[:_SHOW]))} with fewer than 2 "
            f"rows; classification needs at least 2 rows per class to train and hold out rows. Classes: {sizes}. "
            f"Add rows, merge or remove the rare classes.{hint}"
        )
    index = {c: i for i, c in enumerate(classes)}
    return classes, values.map(index).to_numpy(dtype=np.int64)


def _level_label(value) -> str:
    """Canonical string of a categorical cell: ``3.0`` and ``3`` both read as ``"3"``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


#: Cells pandas reads as booleans (its ``read_csv`` defaults), by the label of the bool.
_BOOLEAN_CELLS = {"True": "True", "TRUE": "True", "true": "True", "False": "False", "FALSE": "False",
                  "false": "False"}


def _parsed_label(text: str) -> str:
    """:func:`_level_label` of the value pandas reads from the cell ``text``: a number (``"007"`` -> ``"7"``)
    or a boolean (``"TRUE"`` -> ``"True"``); else ``text``."""
    if text in _BOOLEAN_CELLS:
        return _BOOLEAN_CELLS[text]
    try:
        return _level_label(float(text))
    except ValueError:
        return text


def _level_key(value):
    """Sort numbers numerically before text."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))
