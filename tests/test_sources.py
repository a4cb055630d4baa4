"""Every Python file of the project compiles without warnings (an invalid escape such as ``"\\s"``
in a docstring warns at import today and is a syntax error in a future Python)."""

import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_sources_compile_without_warnings():
    sources = sorted(p for folder in ("src", "tests", "benchmarks") for p in (ROOT / folder).rglob("*.py"))
    assert len(sources) > 100
    failures = []
    for path in sources:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(path.read_text(encoding="utf-8"), str(path), "exec")
            except (SyntaxError, SyntaxWarning, DeprecationWarning) as exc:
                failures.append(f"{path.relative_to(ROOT)}: {exc}")
    assert not failures, "\n".join(failures)
