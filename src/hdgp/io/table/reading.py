"""Reading a table file (CSV / TSV, possibly compressed, or Parquet) into a DataFrame, with errors
that name the file and the fix (a wrong separator, duplicated column names, an empty file)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import TableError


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
