"""Read a user's table (CSV / Parquet) and turn it into model inputs with clear errors.

:func:`read_table` reads the file; :meth:`TableSchema.infer` decides which columns
are features, which are categorical and checks the target; :meth:`TableSchema.encode`
turns any later table with the same columns into the numeric matrix the estimator
saw during fit (categorical levels as integer codes, or one-hot columns).
"""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from pandas.tseries.api import guess_datetime_format

from ..exceptions import warn_caller

__all__ = ["TableError", "TableSchema", "read_table", "infer_task", "MAX_CATEGORICAL_LEVELS", "MAX_CLASSES",
           "TASKS"]

#: A text column with more distinct values than this is treated as an identifier, not a category.
MAX_CATEGORICAL_LEVELS = 50
#: Most classes a classification target may have.
MAX_CLASSES = 50
#: Values of the ``task`` argument.
TASKS = ("auto", "regression", "classification")
#: A text column whose non-empty cells parse as numbers at least this often is a numeric column with typos.
_NUMERIC_SHARE = 0.8
_SHOW = 5  # rows / values quoted in error messages

#: File suffix -> table format, for reading and writing.
TABLE_FORMATS = {".csv": "csv", ".txt": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
#: Compression suffixes pandas undoes when reading a CSV/TSV (``data.csv.gz``).
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")


def _table_kind(path: Path) -> str | None:
    """``"csv"``, ``"tsv"`` or ``"parquet"`` from the file name (``.csv.gz`` is a CSV), else None."""
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] in _COMPRESSED and TABLE_FORMATS.get(suffixes[-2]) in ("csv", "tsv"):
        return TABLE_FORMATS[suffixes[-2]]
    return TABLE_FORMATS.get(path.suffix.lower())


class TableError(ValueError):
    """The table cannot be used as given; the message names the column, rows and a fix."""


def _rows(labels, limit: int = _SHOW) -> str:
    """Row labels for messages: integer labels count data rows from 1 (the header is not a row)."""
    labels = list(labels)
    shown = [str(int(i) + 1) if isinstance(i, (int, np.integer)) else repr(i) for i in labels[:limit]]
    more = len(labels) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _suggest(name: str, choices) -> str:
    """' Did you mean ...?' for names equal up to case/spaces or close in spelling."""
    choices = [str(c) for c in choices]
    key = str(name).strip().lower()
    close = [c for c in choices if c.strip().lower() == key]
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[c] for c in difflib.get_close_matches(key, list(lowered), n=3)]
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def read_table(path, text_columns=(), *, sep=None, na_values=()) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.txt``), TSV (``.tsv``) or Parquet (``.parquet``, ``.pq``) file;
    CSV and TSV files may be compressed (``.csv.gz``, ``.tsv.bz2``, ...).

    ``text_columns`` (e.g. a model's categorical columns) are read from CSV/TSV as text, as
    written: a code ``007`` stays ``"007"`` even when no cell of this file has a letter.
    ``sep`` replaces the separator of a CSV/TSV file (default ``,`` and tab); the cells in
    ``na_values`` (e.g. ``"?"``) are missing values, besides pandas' own (empty, ``NA``, ...).

    Raises
    ------
    TableError
        The file is missing, empty, of an unknown type or cannot be parsed.
    """
    path = Path(path)
    kind = _table_kind(path)
    if kind is None:
        raise TableError(f"Cannot read {path}: use a .csv, .tsv or .parquet file, CSV/TSV possibly compressed "
                         f"(.csv.gz), got {path.suffix or 'no extension'!r}.")
    if not path.is_file():
        raise TableError(f"Data file {path} does not exist.")
    if path.stat().st_size == 0:
        raise TableError(f"Data file {path} is empty.")
    delimiter = sep or ("," if kind == "csv" else "\t")
    try:
        if kind == "parquet":
            frame = pd.read_parquet(path)
            text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
            if na_values and text:
                frame[text] = frame[text].mask(frame[text].isin(list(na_values)))
            numbers = pd.to_numeric(pd.Series(list(na_values), dtype=object), errors="coerce").dropna().tolist()
            typed = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
                     and not pd.api.types.is_bool_dtype(frame[c])]
            if numbers and typed:  # a marker such as -999 in a typed number column, as read_csv treats it
                frame[typed] = frame[typed].mask(frame[typed].isin(numbers))
        else:
            frame = pd.read_csv(path, sep=delimiter, skipinitialspace=True,
                                dtype=dict.fromkeys(text_columns, str) or None, na_values=list(na_values) or None)
    except pd.errors.EmptyDataError:
        raise TableError(f"Data file {path} is empty.") from None
    except ImportError as exc:  # pandas needs pyarrow (or fastparquet) for Parquet
        raise TableError(f"Reading {path} needs a Parquet engine: pip install pyarrow ({exc}).") from exc
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as exc:
        hint = " Save it with UTF-8 text encoding." if isinstance(exc, UnicodeDecodeError) else ""
        if sep is None and kind == "csv" and _semicolon_separated(_first_line(path)):  # e.g. decimal commas
            hint = " Its header looks separated by semicolons: give --sep ';'."
        raise TableError(f"Cannot parse {path}: {str(exc).rstrip().rstrip('.')}. Check that it is a valid "
                         f"{kind.upper()} file with one header row.{hint}") from exc
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise TableError(f"Data file {path} has no data rows (only a header, or nothing).")
    if frame.shape[1] == 1 and sep and kind != "parquet":
        raise TableError(f"Data file {path} read with the separator {sep!r} has one column, named "
                         f"{frame.columns[0]!r}: check --sep.")
    if frame.shape[1] > 1 and sep is None and kind == "csv" and _semicolon_separated(",".join(map(str, frame.columns))):
        raise TableError(f"Data file {path} has column names with semicolons, {list(frame.columns)}: it looks "
                         "separated by semicolons (with commas in its names or cells). Give --sep ';', or "
                         f"--sep {delimiter!r} if the semicolons belong to the names.")
    if frame.shape[1] == 1 and (";" in str(frame.columns[0]) or len(str(frame.columns[0]).split()) > 1):
        separator = "semicolons" if ";" in str(frame.columns[0]) else "spaces or tabs"
        raise TableError(f"Data file {path} has one column named {frame.columns[0]!r}: it looks separated by "
                         f"{separator}. Give the separator with --sep" + (" ';'" if separator == "semicolons" else "")
                         + ", or save it comma-separated (or tab-separated as .tsv).")
    # pandas renames a repeated CSV header ('a', 'a.1'); the header row itself tells
    names = _csv_header(path, delimiter) if kind != "parquet" else list(frame.columns)
    names = [str(c).strip() for c in names]
    dupes = sorted({c for c in names if names.count(c) > 1})
    if dupes:
        raise TableError(f"Data file {path} has duplicated column names {dupes}; rename them.")
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _semicolon_separated(header: str) -> bool:
    """Whether a CSV header line has more semicolons than commas: a ';'-separated file read with ','."""
    return header.count(";") > header.count(",")


def _first_line(path: Path) -> str:
    """The first line of a text table (compressed or not), as one string."""
    try:  # \x1f (unit separator) is in no header: the whole line comes back as one field
        row = pd.read_csv(path, sep="\x1f", header=None, nrows=1, dtype=str, engine="python")
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError):
        return ""
    return str(row.iloc[0, 0]) if row.shape[1] else ""


def _csv_header(path: Path, sep: str) -> list:
    """The header row as written (read as a data row, which pandas does not rename)."""
    row = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, skipinitialspace=True, keep_default_na=False)
    return row.iloc[0].tolist()


def _is_text(series: pd.Series) -> bool:
    return (series.dtype == object or pd.api.types.is_string_dtype(series)
            or isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(series))


def _is_boolean(series: pd.Series) -> bool:
    """A bool column, or an object column of bools (how pandas reads a true/false column with
    missing cells, even after those rows are dropped)."""
    if pd.api.types.is_bool_dtype(series):
        return True
    values = series.dropna()
    return series.dtype == object and len(values) > 0 and all(isinstance(v, (bool, np.bool_)) for v in values)


def _numeric_or_error(series: pd.Series, name: str, hint: str) -> pd.Series:
    """Convert to float64; cells that are not numbers raise a TableError naming them."""
    if pd.api.types.is_bool_dtype(series):
        return series.astype(np.float64)
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        _refuse_separated_numbers(series, name)
        examples = sorted({str(v) for v in series[bad].head(_SHOW)})
        markers = sorted({str(v).strip() for v in series[bad]})
        if all(_looks_missing(m) for m in markers):  # '?' in UCI files, '-' or 'n/a' in spreadsheets
            hint = (f", or read them as missing values with --na-values {','.join(markers)!r} (then --drop-missing "
                    "to leave those rows out)")
        raise TableError(
            f"Column {name!r} should hold numbers, but rows {_rows(series.index[bad.to_numpy()])} contain "
            f"{', '.join(repr(e) for e in examples)}. Fix those cells{hint}."
        )
    values = values.astype(np.float64)
    infinite = ~np.isfinite(values) & values.notna()
    if infinite.any():
        raise TableError(f"Column {name!r} holds infinite values in rows {_rows(series.index[infinite.to_numpy()])}. "
                         "Fix or remove those cells.")
    return values


#: Words that mark a missing cell in exported tables (pandas reads "NA", "NaN", "null", "" itself).
_MISSING_WORDS = {"na", "n/a", "n.a.", "none", "missing", "unknown", "nil"}


def _looks_missing(cell: str) -> bool:
    """A cell that marks a missing value: no letter or digit ('?', '-', '.'), or a word such as 'n/a'."""
    return not any(ch.isalnum() for ch in cell) or cell.lower() in _MISSING_WORDS


def _refuse_separated_numbers(series: pd.Series, name: str) -> None:
    """Raise a TableError if a text column holds numbers with commas ('1,257.3'): they are not categories.

    Only when the commas explain every cell that is not a number (otherwise the general
    message names the rows)."""
    text = series.astype(str)
    with_commas = text.str.contains(",", regex=False)
    numbers = pd.to_numeric(text.str.replace(",", "", regex=False), errors="coerce")
    if with_commas.any() and numbers.notna().all():
        raise TableError(
            f"Column {name!r} holds numbers written with separators (e.g. {series[with_commas & numbers.notna()].iloc[0]!r}). "
            "Remove the thousands separators (or write a decimal point for a decimal comma) and try again."
        )


def _as_dates(series: pd.Series, fmt: str | None = None):
    """The column as datetimes when every cell is one (a datetime dtype, or text with a year such
    as '2024-03-01', '05/01/2021' or '16/01/2021', in one format: ``fmt`` when given, else
    :func:`_date_format`'s), else None.

    The year is required: pandas also reads 'March', '1st', '10:30' and '1/2' as dates,
    and those are categories.
    """
    if pd.api.types.is_datetime64_any_dtype(series):
        return series
    if not _has_years(series):
        return None
    fmt = fmt or _date_format(series)
    with warnings.catch_warnings():  # pandas warns when it cannot infer one format
        warnings.simplefilter("ignore")
        dates = pd.to_datetime(series, format=fmt, errors="coerce")
    return dates if len(dates) and dates.notna().all() else None


def _has_years(series: pd.Series) -> bool:
    """Text (not categorical or boolean) whose every cell holds four digits in a row."""
    if not _is_text(series) or isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(series):
        return False
    return bool(series.astype(str).str.contains(r"\d{4}").all())


#: Distinct cells whose formats :func:`_date_format` tries.
_DATE_FORMAT_PROBES = 20


def _parsed_by_format(series: pd.Series):
    """Yield ``(format, datetimes with NaT where a cell is not a date in it)`` for the strftime formats
    pandas guesses for the first distinct cells, month first and then day first, in that order
    (lazily: each format parses the whole column)."""
    cells = pd.unique(series.astype(str))[:_DATE_FORMAT_PROBES]
    with warnings.catch_warnings():  # a month-first guess of '16/01/2021' warns that it read it day first
        warnings.simplefilter("ignore")
        formats = dict.fromkeys(fmt for dayfirst in (False, True) for cell in cells
                                if (fmt := guess_datetime_format(cell, dayfirst=dayfirst)) is not None)
    for fmt in formats:
        yield fmt, pd.to_datetime(series, format=fmt, errors="coerce")


def _date_format(series: pd.Series) -> str | None:
    """The first guessed format (:func:`_parsed_by_format`) in which every cell of a text column is
    a date, or None: '01/02/2021' reads as January 2 when both orders fit, as in pandas, and a
    column holding '16/01/2021' as day first."""
    if pd.api.types.is_datetime64_any_dtype(series):
        return None
    return next((fmt for fmt, dates in _parsed_by_format(series) if dates.notna().all()), None)


def _refuse_mixed_dates(series: pd.Series, name: str) -> None:
    """A TableError for a text column of dates that no single format reads (else nothing): it names
    the cells that are not dates in the format most cells share, or says the formats are mixed."""
    if not _has_years(series):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if pd.to_datetime(series, format="mixed", errors="coerce").notna().mean() < _NUMERIC_SHARE:
            return
    parsed = dict(_parsed_by_format(series))
    best = max(parsed, key=lambda f: parsed[f].notna().mean(), default=None)
    if best is not None and parsed[best].notna().mean() >= _NUMERIC_SHARE:
        bad = parsed[best].isna().to_numpy()
        raise TableError(
            f"Column {name!r} holds dates in the format {best!r}, but rows {_rows(series.index[bad])} contain "
            f"{', '.join(map(repr, series[bad].head(_SHOW).astype(str)))}, which are not dates in it. Fix those "
            f"cells, or drop the column with --drop {name}."
        )
    examples = pd.unique(series.astype(str))[:3]
    raise TableError(
        f"Column {name!r} looks like dates, but not in one format (e.g. {', '.join(map(repr, examples))}); "
        f"write every date the same way (e.g. 2021-01-16), or drop the column with --drop {name}."
    )


def _days(dates: pd.Series) -> pd.Series:
    """Days since 1970-01-01 (in UTC for time-zone-aware dates): the model input of a date column."""
    epoch = pd.Timestamp("1970-01-01", tz=dates.dt.tz)
    return ((dates - epoch) / pd.Timedelta(days=1)).astype(np.float64)


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
        elif n > 1 and s.nunique(dropna=False) == 1:
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
        remedy = ("fill or remove these cells, drop the columns (--drop), or remove incomplete rows "
                  "(--drop-missing on the command line, TableSchema.infer(..., drop_missing=True) in Python)"
                  if training else "fill these cells or remove those rows; a model predicts complete rows only")
        raise TableError(
            f"The table has missing values in column(s) {'; '.join(parts)}; {_READ_AS_MISSING} count as "
            f"missing. hdgp needs complete rows: {remedy}."
        )


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
              drop_missing: bool = False, max_levels: int = MAX_CATEGORICAL_LEVELS):
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
            Remove rows with a missing value instead of raising.
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
        if drop_missing:
            incomplete = used.isna()
            used = used.dropna()
            if used.empty:
                raise TableError("Every row has a missing value; nothing is left after --drop-missing.")
            if len(used) < len(frame):
                columns = [f"{c!r} ({int(k)})" for c, k in incomplete.sum().items() if k]
                dropped_rows = [f"Dropped {len(frame) - len(used)} of {len(frame)} rows with a missing value "
                                f"(missing cells per column: {', '.join(columns)}; {_READ_AS_MISSING} count as "
                                "missing)."]
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
        kinds, levels = {}, {}
        for c in features:
            s = used[c]
            if c in categorical or isinstance(s.dtype, pd.CategoricalDtype) or _is_boolean(s):
                kinds[c] = "categorical"
            elif pd.api.types.is_datetime64_any_dtype(s):
                kinds[c] = "datetime"
            elif _is_text(s):
                share = pd.to_numeric(s, errors="coerce").notna().mean()
                if share >= _NUMERIC_SHARE:  # numbers stored as text: numeric, unless some cells are not numbers
                    _numeric_or_error(s, c, f", or declare the column categorical with --categorical {c}")
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
                    else sorted(s.unique(), key=_level_key)
                levels[c] = list(dict.fromkeys(_level_label(v) for v in cats))
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

    def encode(self, frame: pd.DataFrame, unknown: str = "error") -> pd.DataFrame:
        """Numeric model inputs for ``frame`` (columns reordered by name; extra columns ignored).

        Parameters
        ----------
        frame : DataFrame
        unknown : {"error", "ignore"}, default="error"
            A categorical level not seen during fit: a :class:`TableError`, or (``"ignore"``)
            no known level: code ``-1`` (which OAK's ``handle_unknown="ignore"`` reads as the
            average effect) or all of the column's indicator columns 0, with an
            :class:`~hdgp.exceptions.HDGPWarning` that names the column, values and rows.

        Raises
        ------
        TableError
            Missing columns, missing values, text in a numeric column, or (``unknown="error"``)
            a categorical level that was not seen during fit.
        """
        if unknown not in ("error", "ignore"):
            raise ValueError(f"unknown must be 'error' or 'ignore', got {unknown!r}.")
        self.check_columns(frame)
        frame = frame[self.features]
        _check_missing(frame, training=False)
        out = {}
        for c in self.features:
            s = frame[c]
            if self.kinds[c] != "categorical":
                out[c] = self.column_values(s, c)
                continue
            labels = s.map(_level_label)
            known = {v: i for i, v in enumerate(self.levels[c])}
            unseen = ~labels.isin(list(known))
            if unseen.any():  # text "007" or "TRUE" of a level that training read as the number 7 or as True
                labels[unseen] = labels[unseen].map(_parsed_label)
                unseen = ~labels.isin(list(known))
            if unseen.any():
                values = sorted(set(labels[unseen]))[:_SHOW]
                where = (f"Column {c!r} has value(s) {', '.join(map(repr, values))} in rows "
                         f"{_rows(frame.index[unseen.to_numpy()])} that the model never saw during training")
                if unknown == "error":
                    raise TableError(f"{where} (known: {', '.join(map(repr, self.levels[c]))}). Map them to a "
                                     "known level, refit, or predict with unknown_levels='ignore' (CLI: "
                                     "--unknown-levels ignore).")
                meaning = ("the average effect of the column" if self.encoding == "codes"
                           else "no known level (all its indicator columns 0)")
                warn_caller(f"{where}: predicted with {meaning}.")
            codes = labels.map(known).fillna(-1).astype(np.float64)  # -1: a level not seen in training
            if self.encoding == "codes":
                out[c] = codes
            else:
                for i, v in enumerate(self.levels[c]):
                    out[f"{c}={v}"] = (codes == i).astype(np.float64)
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
