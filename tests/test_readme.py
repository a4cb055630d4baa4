"""The README's examples run: every ```python block executes, every `hdgp` command line parses.

Python blocks run one by one, each in a fresh namespace inside a temporary working
directory, with matplotlib's Agg backend. A traceback points at README.md's own line
numbers (the block is compiled with its offset in the file). Blocks that load a UCI
set (anything but the built-in and synthetic sets) or mention ``HDGP_DATA_DIR`` need
the shared benchmark data and skip without it.

Bash blocks are not executed (they install packages or run long jobs). Each
``hdgp ...`` command in them is parsed by the real click command without invoking
it, so an unknown subcommand or option, a missing required option or a value of the
wrong type fails here; ``hdgp <subcommand> --help`` must succeed and list every
option the README uses; and the names the commands refer to (presets, data sets,
benchmark protocols and their data sets and models) must exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

_FENCE = re.compile(r"^```(\w*)\s*$")
_LOAD_CALL = re.compile(r"""\bload\(\s*["']([^"']+)["']""")


def _blocks(language: str) -> list[tuple[int, str]]:
    """``(first line number, source)`` of every fenced block in README.md tagged ``language``."""
    blocks, current, start = [], None, 0
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), start=1):
        fence = _FENCE.match(line)
        if current is None:
            if fence and fence.group(1) == language:
                current, start = [], number + 1
        elif fence and not fence.group(1):
            blocks.append((start, "\n".join(current) + "\n"))
            current = None
        else:
            current.append(line)
    assert current is None, f"README.md: the ```{language} block starting at line {start} is never closed"
    return blocks


def _needs_data(source: str) -> bool:
    """Whether a block reads the shared benchmark data (a UCI set, or ``$HDGP_DATA_DIR``)."""
    from hdgp.data import list_datasets

    builtin = {name for name, origin in list_datasets().items() if origin != "uci"}
    return "HDGP_DATA_DIR" in source or any(name not in builtin for name in _LOAD_CALL.findall(source))


def _python_params():
    params = []
    for line, source in _blocks("python"):
        marks = [pytest.mark.data] if _needs_data(source) else []
        params.append(pytest.param(line, source, marks=marks, id=f"line{line}"))
    return params


def test_readme_has_examples():
    assert _blocks("python"), "README.md has no ```python blocks"
    assert _blocks("bash"), "README.md has no ```bash blocks"


@pytest.mark.parametrize(("line", "source"), _python_params())
def test_python_block_runs(line, source, request, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if _needs_data(source):
        request.getfixturevalue("data_dir")  # skips, with the reason, when the data folder is absent
    monkeypatch.chdir(tmp_path)
    code = compile("\n" * (line - 1) + source, str(README), "exec")
    try:
        exec(code, {"__name__": "__readme__"})
    except Exception as exc:
        pytest.fail(f"README.md: the ```python block starting at line {line} raised "
                    f"{type(exc).__name__}: {exc}", pytrace=True)
    finally:
        plt.close("all")


# --- bash blocks: `hdgp ...` command lines -------------------------------------------------------


def _hdgp_commands() -> list[tuple[int, list[str]]]:
    """``(README line, argv after "hdgp")`` for every ``hdgp`` command in the bash blocks.

    Comments are dropped, commands chained with ``&&``/``;``/``|`` are split, and the
    synopsis brackets of optional parts (``[--json]``) are removed.
    """
    commands = []
    for start, source in _blocks("bash"):
        for offset, text in enumerate(source.splitlines()):
            tokens = shlex.split(text, comments=True)
            segment: list[str] = []
            for token in [*tokens, "&&"]:
                if token in ("&&", ";", "|", "||"):
                    if segment and segment[0] == "hdgp":
                        args = [t.strip("[]") for t in segment[1:]]
                        commands.append((start + offset, [a for a in args if a]))
                    segment = []
                else:
                    segment.append(token)
    return commands


def _resolve(args: list[str]):
    """The click command an argv names, its subcommand path and its remaining arguments."""
    import click

    from hdgp.cli import main

    command, path, rest = main, [], list(args)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        assert name in command.commands, f"`hdgp {' '.join(path)}` has no subcommand {name!r}"
        command, path = command.commands[name], [*path, name]
    return command, path, rest


def _option_words(rest: list[str]) -> list[str]:
    return [word.split("=", 1)[0] for word in rest if word.startswith("-") and word != "-"]


_COMMANDS = _hdgp_commands()


def test_readme_shows_hdgp_commands():
    assert len(_COMMANDS) >= 10, _COMMANDS


@pytest.mark.parametrize(("line", "args"), [pytest.param(n, a, id=f"line{n}") for n, a in _COMMANDS])
def test_hdgp_command_parses(line, args):
    """The command line is accepted by click's parser (options, arity, types); nothing runs."""
    import click

    where = f"README.md line {line}: `hdgp {' '.join(args)}`"
    try:
        command, path, rest = _resolve(args)
    except AssertionError as exc:
        pytest.fail(f"{where}: {exc}")
    if "--help" in rest or "-h" in rest or isinstance(command, click.Group):
        from click.testing import CliRunner

        from hdgp.cli import main

        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0, f"{where}: {result.output}"
        return
    try:
        command.make_context(" ".join(["hdgp", *path]), list(rest))
    except click.ClickException as exc:
        pytest.fail(f"{where}: {exc.format_message()}")


def _subcommands() -> dict[tuple[str, ...], set[str]]:
    """Every subcommand path used in the README, with the options used on it."""
    used: dict[tuple[str, ...], set[str]] = {}
    for _, args in _COMMANDS:
        _, path, rest = _resolve(args)
        used.setdefault(tuple(path), set()).update(_option_words(rest))
    return used


@pytest.mark.parametrize("path", sorted(_subcommands()), ids=lambda p: " ".join(p) or "hdgp")
def test_subcommand_help_lists_the_options_used(path):
    from click.testing import CliRunner

    from hdgp.cli import main

    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    missing = [opt for opt in sorted(_subcommands()[path]) if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])",
                                                                           result.output)]
    assert not missing, f"`hdgp {' '.join(path)} --help` does not list {missing}, which README.md uses"


def _names(values) -> list[str]:
    """Option values as the CLI reads them: repeated, space- or comma-separated (``--models A,B``)."""
    if values is None:
        return []
    values = [values] if isinstance(values, str) else list(values)
    return [part.strip() for value in values for part in str(value).split(",") if part.strip()]


@pytest.mark.parametrize(("line", "args"), [pytest.param(n, a, id=f"line{n}") for n, a in _COMMANDS])
def test_hdgp_command_names_exist(line, args):
    """Presets, data sets, protocols and estimator parameters named on the command line exist."""
    import hdgp
    from hdgp.bench import get_protocol
    from hdgp.data import list_datasets

    where = f"README.md line {line}: `hdgp {' '.join(args)}`"
    command, path, rest = _resolve(args)
    if "--help" in rest or "-h" in rest or not rest:
        return
    values = command.make_context(" ".join(["hdgp", *path]), list(rest)).params
    presets = {name.lower(): name for name in hdgp.presets()}
    if path == ["demo"]:
        for model in _names(values["models"]):
            assert model in hdgp.presets(), f"{where}: no preset {model!r}"
        assert values["dataset"] in list_datasets(), f"{where}: no built-in data set {values['dataset']!r}"
    elif path == ["fit"]:
        model = values["model"]
        assert model == "auto" or model.lower() in presets, f"{where}: no model {model!r}"
        if model != "auto":
            accepted = hdgp.preset(presets[model.lower()]).get_params(deep=False)
            for item in values["params"]:
                key = item.split("=", 1)[0]
                assert key in accepted, f"{where}: model {presets[model.lower()]} has no parameter {key!r}"
    elif path[:1] == ["bench"] and "protocol" in values:
        protocol = get_protocol(values["protocol"])
        if path == ["bench", "run"]:
            datasets = {d.name for d in protocol.datasets}
            labels = {m.label for m in protocol.models}
            for name in _names(values["datasets"]):
                assert name in datasets, f"{where}: protocol {protocol.name} has no data set {name!r}"
            for label in _names(values["models"]):
                assert label in labels, f"{where}: protocol {protocol.name} has no model {label!r}"
            for split in _names(values["splits"]):
                assert int(split) in protocol.splits, f"{where}: protocol {protocol.name} has no split {split}"


def test_bench_list_shows_the_protocols_the_readme_names():
    """The protocols the README's `hdgp bench list` comment names are built in."""
    from hdgp.bench.protocols import PROTOCOLS

    for line, args in _COMMANDS:
        if args[:2] == ["bench", "list"]:
            text = README.read_text(encoding="utf-8").splitlines()[line - 1]
            named = re.findall(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+", text.partition("#")[2])
            assert named, f"README.md line {line}: expected protocol names in the comment"
            unknown = [name for name in named if name not in PROTOCOLS]
            assert not unknown, f"README.md line {line}: no built-in protocols {unknown}"
