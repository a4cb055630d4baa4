"""The ``Examples`` sections of hdgp's docstrings run and print what they show.

One test per module of the installed ``hdgp`` package whose source contains ``>>>``.
The module's doctests (module, class, function and method docstrings, found with
:class:`doctest.DocTestFinder`) run with ``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``, in
a copy of the module's globals as ``python -m doctest`` does. A module that cannot
be imported because an optional third-party package is missing is skipped with the
package's name; any other import error fails.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import io
from pathlib import Path

import pytest

FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def _package_dir() -> Path:
    spec = importlib.util.find_spec("hdgp")
    assert spec is not None and spec.submodule_search_locations, "hdgp is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def _modules_with_examples() -> list[str]:
    """Dotted names of the hdgp modules whose source has a ``>>>`` prompt (read, not imported)."""
    root = _package_dir()
    names = []
    for path in sorted(root.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_some_modules_have_examples():
    assert len(MODULES) >= 10, MODULES


def _import(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing.split(".")[0] in ("hdgp", ""):
            raise
        pytest.skip(f"{name} needs the optional package {missing!r}, which is not installed")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = _import(name)
    tests = [t for t in doctest.DocTestFinder(exclude_empty=True).find(module, name) if t.examples]
    assert tests, (f"{name} has '>>>' in its source but doctest finds no examples in it "
                   f"(a docstring the finder cannot reach, e.g. of an object defined in another module)")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = io.StringIO()
    for test in sorted(tests, key=lambda t: t.lineno or 0):
        runner.run(test, out=report.write)
    result = runner.summarize(verbose=False)
    if result.failed:
        pytest.fail(f"{result.failed} of {result.attempted} docstring examples in {name} failed:\n"
                    f"{report.getvalue()}", pytrace=False)
