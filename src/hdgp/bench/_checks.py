"""Field checks for protocols read from user-written JSON files.

Each check takes ``owner`` (who holds the field, e.g. ``"ModelSpec 'GAM'"``) and
the field's name, so that a malformed file gets an error naming the protocol,
the entry and the field instead of a traceback from deep inside the runner.
"""

from __future__ import annotations

import numbers
from dataclasses import MISSING

__all__ = ["check_choice", "check_str", "check_name", "check_optional_str", "check_mapping", "check_int_sequence",
           "check_str_sequence", "as_sequence", "build_entry"]

#: Characters a name may not contain: names become parts of result paths.
_PATH_SEPARATORS = ("/", "\\")


def check_choice(owner: str, field: str, value, options: tuple) -> None:
    """``value`` is one of ``options``."""
    if value not in options:
        raise ValueError(f"{owner}: {field} must be one of {options}, got {value!r}.")


def check_str(owner: str, field: str, value) -> None:
    """``value`` is a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{owner}: {field} must be a non-empty string, got {value!r}.")


def check_name(owner: str, field: str, value) -> None:
    """``value`` is a non-empty string without path separators."""
    check_str(owner, field, value)
    bad = [c for c in _PATH_SEPARATORS if c in value]
    if bad:
        raise ValueError(f"{owner}: {field} {value!r} must not contain {' or '.join(map(repr, bad))} "
                         "(names are used in result file paths).")


def check_optional_str(owner: str, field: str, value) -> None:
    """``value`` is a string or None."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{owner}: {field} must be a string or null, got {value!r}.")


def check_mapping(owner: str, field: str, value) -> None:
    """``value`` is a dict (a JSON object)."""
    if not isinstance(value, dict):
        raise ValueError(f"{owner}: {field} must be a mapping (a JSON object such as {{\"n\": 200}}), "
                         f"got {type(value).__name__} {value!r}.")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int_sequence(owner: str, field: str, values, minimum: int | None = None) -> None:
    """Every item of ``values`` is an integer (``>= minimum`` if given)."""
    bad = [v for v in values if not _is_int(v) or (minimum is not None and v < minimum)]
    if bad:
        kind = "integers" if minimum is None else f"integers >= {minimum}"
        raise ValueError(f"{owner}: {field} must be a list of {kind}, got {list(values)!r}.")


def check_str_sequence(owner: str, field: str, values) -> None:
    """Every item of ``values`` is a string."""
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"{owner}: {field} must be a list of strings, got {list(values)!r}.")


def as_sequence(owner: str, field: str, value) -> tuple:
    """A JSON list (or tuple) as a tuple; anything else, a string included, is an error."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{owner}: {field} must be a JSON list, got {type(value).__name__} {value!r}.")
    return tuple(value)


def build_entry(cls, owner: str, field: str, index: int, raw):
    """``cls(**raw)`` for entry ``index`` of the list ``field``; errors name the entry and its fields."""
    if isinstance(raw, cls):
        return raw
    where = f"{owner}: {field}[{index}]"
    fields = list(cls.__dataclass_fields__)
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object with fields {fields}, got {raw!r}.")
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; valid fields: {fields}.")
    required = [name for name, f in cls.__dataclass_fields__.items() if f.default is f.default_factory is MISSING]
    missing = [name for name in required if name not in raw]
    if missing:
        raise ValueError(f"{where}: missing required field(s) {missing}.")
    try:
        return cls(**raw)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None

