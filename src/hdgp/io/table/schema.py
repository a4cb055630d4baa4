"""The columns of a training table and how they become model inputs (:class:`TableSchema`), and
the checks on whole columns: ones that cannot inform a model, far values, missing cells."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from ...exceptions import warn_caller
from .errors import _SHOW, TableError, _rows, _suggest
from .sniffing import (
    _NUMERIC_SHARE,
    _as_dates,
    _date_format,
    _days,
    _is_boolean,
    _is_text,
    _numeric_or_error,
    _refuse_mixed_dates,
    _refuse_separated_numbers,
)
from .task import TASKS, _level_key, _level_label, _parsed_label, _target


#: A text column with more distinct values than this is treated as an identifier, not a category.
MAX_CATEGORICAL_LEVELS = 50


def _columns_left_out(written: pd.DataFrame, features: pd.DataFrame, categorical) -> tuple[list, list]:
    """Feature columns that cannot inform a model, with a note on each: ``(notes, columns)``.

    - an index that ``DataFrame.to_csv`` wrote without a header (pandas reads it back as
      ``'Unnamed: 0'``): a different integer in every row of the table as ``written`` (before rows
      with missing values are dropped), in order or not (a shuffled, sorted or filtered frame keeps
      its labels) — a model would learn the row labels, which may follow the target;
    - a column holding one value in every row (e.g. a text column with one level): it has no
      effect on the fit, and its length-scale would stay at its start and read as relevant.

    A column named like an identifier (``id``, ``index``, ``row``, ``..._id``) with a different
    integer in every row stays a feature, with a note: it may be a measurement, but if it only
    labels the rows the model would learn from the labels.
    """
    notes, columns = [], []
    n_written, n = len(written), len(features)
    for c in features.columns:
        s, w = features[c], written[c]
        if (re.fullmatch(r"Unnamed: \d+", str(c)) and c not in categorical and pd.api.types.is_numeric_dtype(w)
                and n_written > 1 and w.notna().all() and w.is_unique and (w == np.round(w)).all()):
            notes.append(f"Column {c!r} has no name and a different integer in every row: an index written by "
                         "DataFrame.to_csv, which would let a model learn the row labels; it is left out (give it "
                         "a name in the header row to use it as a feature).")
            columns.append(c)
        elif n > 1 and s.nunique() <= 1:  # one value, in every row or with missing cells
            notes.append(f"Column {c!r} holds the same value in every row; it cannot inform the model and is "
                         "left out.")
            columns.append(c)
        elif (_IDENTIFIER_NAME.fullmatch(str(c)) and c not in categorical and pd.api.types.is_integer_dtype(s)
              and n > 2 and s.is_unique):
            notes.append(f"Column {c!r} holds a different integer in every row and is named like an identifier; "
                         f"it is used as a feature. If it only labels the rows, leave it out with --drop {c}.")
    return notes, columns


def _far_value_note(values: pd.Series, name: str) -> str | None:
    """A note on a numeric column whose farthest value lies more than :data:`_FAR` interquartile
    ranges from its median (a typo or a sentinel such as 1e12), else None: models that standardise
    their inputs would squeeze the column's other values together."""
    low, median, high = values.quantile([0.25, 0.5, 0.75])
    distance = (values - median).abs()
    if not high > low or not distance.max() > _FAR * (high - low):
        return None
    row = distance.idxmax()
    return (f"Column {name!r} has a value far from all others (row {_rows([row])}: {values[row]:.6g}, while the "
            f"middle half of its values lies in [{low:.6g}, {high:.6g}]). Models that standardise their inputs (all "
            "but OAK, whose flow warps each feature) would squeeze its other values together; check that value.")


#: A value farther than this many interquartile ranges from the median gets a note.
_FAR = 1e6


#: Column names that usually label rows rather than measure something.
_IDENTIFIER_NAME = re.compile(r"(?i)(id|index|idx|row|rowid|row_?num(ber)?|.*[_ ]id)")


#: What pandas reads as a missing value, for messages (its default ``na_values``, abridged).
_READ_AS_MISSING = "empty cells and the texts NA, N/A, NaN, None, null"


def _check_missing(frame: pd.DataFrame, training: bool) -> None:
    """Raise a TableError naming the cells of ``frame`` that are missing (``training``: the
    table given to fit, whose incomplete rows can be dropped; else a table to predict)."""
    missing = frame.isna()
    if missing.to_numpy().any():
        parts = [f"{c!r} (rows {_rows(frame.index[missing[c].to_numpy()])})" for c in frame.columns if missing[c].any()]
        remedy = ("fill or remove these cells, drop the columns (--drop), remove incomplete rows "
                  "(--drop-missing on the command line, TableSchema.infer(..., drop_missing=True) in Python), "
                  "or fit an OAK model (--model oak), which takes missing cells"
                  if training else "fill these cells, remove those rows (hdgp predict --drop-missing), or use an "
                  "OAK model, which takes missing cells")
        raise TableError(
            f"The table has missing values in column(s) {'; '.join(parts)}; {_READ_AS_MISSING} count as "
            f"missing. This model needs complete rows: {remedy}."
        )


def missing_note(frame: pd.DataFrame) -> str | None:
    """How many rows of ``frame`` have missing cells, and in which columns (None when none has)."""
    missing = frame.isna()
    rows = int(missing.any(axis=1).sum())
    if not rows:
        return None
    counts = ", ".join(f"{c!r} ({int(k)})" for c, k in missing.sum().items() if k)
    return f"{rows} of {len(frame)} rows have missing feature cells (per column: {counts})"


def _one_error(errors: list) -> TableError:
    """One TableError holding the messages of every column's bad cells."""
    return TableError(errors[0] if len(errors) == 1 else f"{len(errors)} columns have bad cells: " + " ".join(errors))


@dataclass
class TableSchema:
    """Columns of a training table and how they become model inputs.

    Attributes
    ----------
    target : str or None
        Target column.
    features : list of str
        Feature columns, in training order.
    kinds : dict
        ``column -> "numeric" | "categorical" | "datetime"``. Dates (a datetime
        dtype, or text that parses as dates) enter the model as days since 1970.
    dtypes : dict
        ``column -> pandas dtype name`` seen during fit.
    levels : dict
        ``categorical column -> list of level labels (str)`` in code order.
    encoding : {"codes", "onehot"}
        Categorical columns become one integer-code column (models with categorical
        kernels, e.g. OAK) or one 0/1 column per level (all other models).
    dropped : list of str
        Columns ignored on purpose (``--drop``).
    task : {"regression", "classification"}
        What the target is fitted as (set by :meth:`infer`).
    classes : list
        Classification: the class labels (str, int, float or bool, as in the
        table) in code order; the estimator sees the codes ``0..K-1``. Empty for
        regression.
    task_reason : str
        Why :meth:`infer` chose the task (shown in progress output and reports).
    date_formats : dict
        ``date column -> strftime format`` of text dates in the training table; new
        tables must use the same format ('04/03/2021' read month-first at fit is not
        re-read day-first at predict).

    Notes
    -----
    ``task``, ``classes``, ``task_reason`` and ``date_formats`` are class-level defaults overridden
    per instance rather than dataclass fields, so model files written before
    classification support (which lack them) still load, as regression.
    """

    target: str | None
    features: list
    kinds: dict
    dtypes: dict
    levels: dict = field(default_factory=dict)
    encoding: str = "codes"
    dropped: list = field(default_factory=list)
    task: ClassVar[str] = "regression"
    classes: ClassVar[tuple] = ()
    task_reason: ClassVar[str] = ""
    date_formats: ClassVar[dict] = {}
    #: What :meth:`infer` decided on its own (columns left out and why), for the user to read.
    notes: ClassVar[list] = []

    # ---------------------------------------------------------------- infer
    @classmethod
    def infer(cls, frame: pd.DataFrame, target: str, *, task: str = "regression", categorical=(), drop=(),
              drop_missing: bool = False, keep_missing: bool = False, max_levels: int = MAX_CATEGORICAL_LEVELS):
        """Choose features and their kinds, check the target, and return ``(schema, X, y)``.

        Text, boolean and pandas-categorical columns are categorical; numbers are
        numeric unless listed in ``categorical``. A text column that mostly holds
        numbers is reported as a numeric column with bad cells.

        Parameters
        ----------
        frame : DataFrame
        target : str
            Name of the column to predict. Regression: numeric with ≥ 2 distinct
            values. Classification: any labels, at least 2 classes with at least 2
            rows each, at most :data:`MAX_CLASSES` classes.
        task : {"regression", "classification", "auto"}, default="regression"
            ``"auto"`` decides with :func:`infer_task`; the choice is in ``schema.task``.
        categorical : sequence of str
            Columns to treat as categorical regardless of their type.
        drop : sequence of str
            Columns to ignore (identifiers, leakage, free text).
        drop_missing : bool, default=False
            Remove rows with a missing feature value instead of raising.
        keep_missing : bool, default=False
            Keep rows with missing feature values, with a note saying how many (for models that
            take them: OAK). Rows whose *target* is missing are always removed, with a note;
            a target value is never imputed.
        max_levels : int
            Text columns with more distinct values are rejected as identifiers.

        Returns
        -------
        schema : TableSchema
        X : DataFrame of the feature columns (original values)
        y : ndarray
            Regression: float target values. Classification: int64 class codes
            indexing ``schema.classes``.
        """
        if task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(map(repr, TASKS))}, got {task!r}.")
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"A table is a pandas DataFrame with named columns, got {type(frame).__name__}; "
                            "wrap arrays as pd.DataFrame(X, columns=[...]).")
        columns = list(frame.columns)
        named = [c for c in columns if not isinstance(c, str)]
        if named:
            raise TableError(f"Column names must be text; {', '.join(map(repr, named[:_SHOW]))} are not. Rename "
                             "them, e.g. frame.columns = frame.columns.astype(str).")
        duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        if duplicated:
            raise TableError(f"The table has several columns named {', '.join(map(repr, duplicated))}; "
                             "rename them so that every column name is unique.")
        for name, what in [(target, "target")] + [(c, "--categorical") for c in categorical] + [(c, "--drop") for c in drop]:
            if name not in columns:
                headless = len(columns) > 1 and pd.to_numeric(pd.Series(columns), errors="coerce").notna().all()
                hint = (" The first row holds only numbers: it looks like data, and the file needs a header "
                        "row naming the columns." if headless else "")
                raise TableError(f"The {what} column {name!r} is not in the table.{_suggest(name, columns)} "
                                 f"Columns are: {', '.join(map(repr, columns[:20]))}"
                                 f"{f' and {len(columns) - 20} more' if len(columns) > 20 else ''}.{hint}")
        if target in drop or target in categorical:
            raise TableError(f"The target column {target!r} cannot also be dropped or declared categorical.")
        features = [c for c in columns if c != target and c not in drop]
        empty = [c for c in features if frame[c].isna().all()]
        if len(empty) == len(features):
            empty = []  # nothing but empty columns: the check of missing values below names them
        features = [c for c in features if c not in empty]
        drop = list(drop) + empty
        if not features:
            raise TableError("No feature columns are left after removing the target and the dropped columns.")
        used = frame[features + [target]]
        dropped_rows = []
        no_target = used[target].isna()
        if no_target.any():
            if no_target.all():
                raise TableError(f"The target column {target!r} has no value in any row.")
            used = used[~no_target]
            dropped_rows.append(f"Dropped {int(no_target.sum())} of {len(frame)} rows whose target {target!r} is "
                                f"missing (rows {_rows(frame.index[no_target.to_numpy()])}); a target is never "
                                "imputed.")
        if drop_missing:
            incomplete = used.isna()
            n_before = len(used)
            used = used.dropna()
            if used.empty:
                raise TableError("Every row has a missing value; nothing is left after --drop-missing.")
            if len(used) < n_before:
                columns = [f"{c!r} ({int(k)})" for c, k in incomplete.sum().items() if k]
                dropped_rows.append(f"Dropped {n_before - len(used)} of {n_before} rows with a missing value "
                                    f"(missing cells per column: {', '.join(columns)}; {_READ_AS_MISSING} count as "
                                    "missing).")
        elif keep_missing:
            if (note := missing_note(used[features])) is not None:
                dropped_rows.append(f"{note}; they are kept: the model marginalises each missing feature over "
                                    "its input measure.")
        else:
            _check_missing(used, training=True)
        if len(used) < 2:
            raise TableError(f"The table has {len(used)} complete data row; a model needs several to learn from.")
        notes, left_out = _columns_left_out(frame[features], used[features], categorical)
        notes = [f"Column {c!r} is empty in every row (e.g. a separator at the end of each line); it is left out."
                 for c in empty] + dropped_rows + notes
        if left_out:
            if len(left_out) == len(features):
                _target(used[target], target, task)  # a bad target (e.g. constant too) is the first thing to fix
                raise TableError(" ".join(notes) + " No feature column is left to predict from.")
            features = [c for c in features if c not in left_out]
            drop = list(drop) + left_out
            used = used[features + [target]]
        kinds, levels, bad_cells = {}, {}, []
        for c in features:
            s = used[c]
            if c in categorical or isinstance(s.dtype, pd.CategoricalDtype) or _is_boolean(s):
                kinds[c] = "categorical"
            elif pd.api.types.is_datetime64_any_dtype(s):
                kinds[c] = "datetime"
            elif _is_text(s):
                share = pd.to_numeric(s.dropna(), errors="coerce").notna().mean() if s.notna().any() else 0.0
                if share >= _NUMERIC_SHARE:  # numbers stored as text: numeric, unless some cells are not numbers
                    try:  # every column's bad cells are reported together, after the loop
                        _numeric_or_error(s, c, f", or declare the column categorical with --categorical {c}")
                    except TableError as exc:
                        bad_cells.append(str(exc))
                    kinds[c] = "numeric"
                    continue
                if _as_dates(s) is not None:
                    kinds[c] = "datetime"
                    continue
                _refuse_mixed_dates(s, c)
                _refuse_separated_numbers(s, c)
                n_levels = s.nunique()
                if n_levels > max_levels or n_levels > len(s) // 2:
                    raise TableError(
                        f"Column {c!r} holds text with {n_levels} distinct values in {len(s)} rows; it looks "
                        f"like an identifier or free text, not a category (inferred categories have at most "
                        f"{max_levels} levels and at most one per two rows). Drop it with --drop {c}, or declare "
                        f"it categorical with --categorical {c} if it is one."
                    )
                kinds[c] = "categorical"
            else:
                kinds[c] = "numeric"
            if c in categorical and (n_levels := s.nunique()) > max(max_levels, len(s) // 2):
                fix = (f"Leave it numeric (remove --categorical {c})" if pd.api.types.is_numeric_dtype(s)
                       else f"Leave it out (remove --categorical {c}; --drop {c})")
                raise TableError(
                    f"Column {c!r} was declared categorical, but holds {n_levels} distinct values in {len(s)} "
                    "rows: most rows would be a category of their own, which no model can learn from (and a "
                    f"value not seen in fitting would be refused at prediction). {fix}, or group its values first."
                )
            if kinds[c] == "categorical":
                # a pandas categorical's unused categories are not levels: no training row holds them
                cats = [v for v in s.cat.categories if v in set(s)] if isinstance(s.dtype, pd.CategoricalDtype) \
                    else sorted(s.dropna().unique(), key=_level_key)
                levels[c] = list(dict.fromkeys(_level_label(v) for v in cats))
        if bad_cells:
            raise _one_error(bad_cells)
        schema = cls(target=target, features=features, kinds=kinds,
                     dtypes={c: str(used[c].dtype) for c in features}, levels=levels, dropped=list(drop))
        schema.notes = notes + [note for c in features if kinds[c] == "numeric"
                                if (note := _far_value_note(pd.to_numeric(used[c]), c)) is not None]
        schema.date_formats = {c: fmt for c in features if kinds[c] == "datetime"
                               if (fmt := _date_format(used[c])) is not None}
        schema.task, schema.task_reason, schema.classes, y = _target(used[target], target, task)
        return schema, used[features], y

    # --------------------------------------------------------------- encode
    @property
    def categorical(self) -> list:
        """Categorical feature columns."""
        return [c for c in self.features if self.kinds[c] == "categorical"]

    @property
    def encoded_names(self) -> list:
        """Column names of :meth:`encode`'s output."""
        if self.encoding == "codes":
            return list(self.features)
        out = []
        for c in self.features:
            out += [f"{c}={v}" for v in self.levels[c]] if self.kinds[c] == "categorical" else [c]
        return out

    def check_columns(self, frame: pd.DataFrame) -> None:
        """Raise a :class:`TableError` when feature columns are missing (extra columns are ignored)."""
        missing = [c for c in self.features if c not in frame.columns]
        if missing:
            spare = [c for c in frame.columns if c not in self.features]  # present but not used: maybe renamed
            hints = "".join(_suggest(c, spare) for c in missing[:3])
            raise TableError(
                f"The table is missing the column(s) {', '.join(map(repr, missing))} that the model was "
                f"trained on.{hints} Expected columns: {', '.join(map(repr, self.features))}."
            )

    def encode(self, frame: pd.DataFrame, unknown: str = "error", missing: str = "error") -> pd.DataFrame:
        """Numeric model inputs for ``frame`` (columns reordered by name; extra columns ignored).

        Parameters
        ----------
        frame : DataFrame
        unknown : {"error", "ignore"}, default="error"
            A categorical level not seen during fit: a :class:`TableError`, or (``"ignore"``)
            no known level: code ``-1`` (which OAK's ``handle_unknown="ignore"`` reads as the
            average effect) or all of the column's indicator columns 0, with an
            :class:`~hdgp.exceptions.HDGPWarning` that names the column, values and rows.
        missing : {"error", "keep"}, default="error"
            A missing cell: a :class:`TableError` naming every missing cell, or (``"keep"``, for
            models that marginalise them: OAK) NaN in the model's input.

        Raises
        ------
        TableError
            Missing columns, missing values, text in a numeric column, or (``unknown="error"``)
            a categorical level that was not seen during fit; the bad cells of every column in
            one message.
        """
        if unknown not in ("error", "ignore"):
            raise ValueError(f"unknown must be 'error' or 'ignore', got {unknown!r}.")
        if missing not in ("error", "keep"):
            raise ValueError(f"missing must be 'error' or 'keep', got {missing!r}.")
        self.check_columns(frame)
        frame = frame[self.features]
        if missing == "error":
            _check_missing(frame, training=False)
        out, bad_cells = {}, []  # every column's bad cells, reported together
        for c in self.features:
            s = frame[c]
            if self.kinds[c] != "categorical":
                try:
                    out[c] = self.column_values(s, c)
                except TableError as exc:
                    bad_cells.append(str(exc))
                continue
            absent = s.isna()
            labels = s.map(_level_label)
            known = {v: i for i, v in enumerate(self.levels[c])}
            unseen = ~labels.isin(list(known)) & ~absent
            if unseen.any():  # text "007" or "TRUE" of a level that training read as the number 7 or as True
                labels[unseen] = labels[unseen].map(_parsed_label)
                unseen = ~labels.isin(list(known)) & ~absent
            if unseen.any():
                values = sorted(set(labels[unseen]))[:_SHOW]
                where = (f"Column {c!r} has value(s) {', '.join(map(repr, values))} in rows "
                         f"{_rows(frame.index[unseen.to_numpy()])} that the model never saw during training")
                if unknown == "error":
                    bad_cells.append(f"{where} (known: {', '.join(map(repr, self.levels[c]))}). Map them to a "
                                     "known level, refit, or predict with unknown_levels='ignore' (CLI: "
                                     "--unknown-levels ignore).")
                    continue
                meaning = ("the average effect of the column" if self.encoding == "codes"
                           else "no known level (all its indicator columns 0)")
                warn_caller(f"{where}: predicted with {meaning}.")
            codes = labels.map(known).fillna(-1).astype(np.float64)  # -1: a level not seen in training
            codes[absent.to_numpy()] = np.nan  # a missing cell (missing="keep")
            if self.encoding == "codes":
                out[c] = codes
            else:
                for i, v in enumerate(self.levels[c]):
                    out[f"{c}={v}"] = (codes == i).astype(np.float64)
        if bad_cells:
            raise _one_error(bad_cells)
        return pd.DataFrame(out, index=frame.index)

    def column_values(self, series: pd.Series, name: str) -> pd.Series:
        """What the model sees of a numeric or date column: floats (dates as days since 1970)."""
        if self.kinds[name] == "datetime":
            return _days(self.dates(series, name))
        return _numeric_or_error(series, name, " (this column was numeric when the model was trained)")

    def dates(self, series: pd.Series, name: str) -> pd.Series:
        """A date column's cells as datetimes, in the training table's format; a TableError names
        the cells that are not dates in it."""
        fmt = self.date_formats.get(name)
        dates = _as_dates(series, fmt)
        if dates is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bad = pd.to_datetime(series, format=fmt, errors="coerce").isna().to_numpy()
            expected = f"dates in the training format {fmt!r}" if fmt else "dates in one format"
            raise TableError(f"Column {name!r} held dates when the model was trained, but rows "
                             f"{_rows(series.index[bad])} contain {', '.join(map(repr, series[bad].head(_SHOW).astype(str)))} "
                             f"(all cells of a date column must be {expected}).")
        return dates

    def level_labels(self, column: str, codes) -> list:
        """Level labels for integer ``codes`` of a categorical column."""
        return [self.levels[column][int(round(v))] for v in np.asarray(codes, float)]

    def class_labels(self, codes) -> np.ndarray:
        """Class labels (the table's values) for integer class ``codes`` of a classification target."""
        labels = np.asarray(self.classes) if self.classes else np.asarray([], dtype=object)
        return labels[np.asarray(codes, dtype=np.int64)]
