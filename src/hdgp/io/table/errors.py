"""The error of unusable tables and the pieces of its messages (row labels, spelling suggestions)."""

from __future__ import annotations

import difflib

import numpy as np


_SHOW = 5  # rows / values quoted in error messages


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
