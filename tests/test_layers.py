"""The package's layers only point down (the contracts in pyproject.toml, ARCHITECTURE.md),
no module imports itself back through others (no import cycle, at any depth), imports inside
functions say why they wait, and no module outgrows one job (600 lines)."""

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")
pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def test_import_linter_contracts_are_kept():
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop(); on_stack.discard(member); component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycle_between_any_modules():
    # imports inside functions count too: a cycle dodged by a late import is still a cycle
    sys.path.insert(0, str(ROOT / "src"))
    try:
        graph = grimp.build_graph("hdgp", include_external_packages=False, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT / "src"))
    assert _cycles(graph) == []


# ------------------------------------------------------------------ imports inside functions, module size

SRC = ROOT / "src" / "hdgp"
#: Longest a module of src/hdgp may grow (issue #42: a file past ~600 lines holds more than one job).
MAX_MODULE_LINES = 600
_DIRECTIVE = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[\w-]+\])?|pragma:\s*no\s*cover",
                        re.IGNORECASE)


def _comments(source: str) -> dict[int, str]:
    """Line number → the text of the comment on that line (tokenized: a '#' inside a string is no comment)."""
    return {tok.start[0]: tok.string.lstrip("#").strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}


def _is_reason(comment: str | None) -> bool:
    """A comment that says something ("deferred: torch"): two words or more once lint directives (noqa,
    type: ignore) are removed."""
    return comment is not None and len(_DIRECTIVE.sub(" ", comment).split()) >= 2


def unexplained_imports(source: str) -> list[int]:
    """Lines of the imports inside a function (at any depth) with no reason in a comment on one of their lines
    or on the line above."""
    comments = _comments(source)
    out = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not any(
                    _is_reason(comments.get(line)) for line in range(node.lineno - 1, node.end_lineno + 1)):
                out.add(node.lineno)
    return sorted(out)


def test_the_import_check_tells_a_reason_from_none():
    planted = ("import os\n\n"
               "def f():\n    import json\n    return json\n\n"                                  # no comment: flagged
               "def g():\n    import torch  # deferred: torch takes seconds to import\n\n"          # reason on the line
               "def h():\n    # deferred: matplotlib loads only when a figure is drawn\n    import matplotlib\n\n"
               "def k():\n    import scipy  # noqa: F401\n\n"                                     # a directive is no reason
               "class C:\n    def m(self):\n        def inner():\n            from x import y\n"  # nested: flagged
               "        s = '# not a comment'\n        import re\n")                               # '#' in a string: flagged
    assert unexplained_imports(planted) == [4, 15, 20, 22]


def test_imports_inside_functions_say_why():
    # issue #42: an import waits inside a function only to defer a heavy dependency, and says so on its line
    # (or the line above); every other import sits at the top of its module
    found = [f"{path.relative_to(ROOT)}:{line}"
             for path in sorted(SRC.rglob("*.py")) for line in unexplained_imports(path.read_text(encoding="utf-8"))]
    assert found == [], "imports inside functions without a reason comment:\n" + "\n".join(found)


def test_no_source_module_is_longer_than_600_lines():
    long = {str(path.relative_to(ROOT)): n for path in sorted(SRC.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines (split them by job): {long}"
