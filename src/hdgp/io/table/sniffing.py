"""What a column holds: text, booleans, numbers with typos or thousands separators, dates (and in
which format), or missing-value markers; each refusal names the column, rows and cells."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from pandas.tseries.api import guess_datetime_format

from .errors import _SHOW, TableError, _rows


#: A text column whose non-empty cells parse as numbers at least this often is a numeric column with typos.
_NUMERIC_SHARE = 0.8


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
