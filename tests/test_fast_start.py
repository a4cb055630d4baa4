"""``hdgp --help`` and a subcommand's ``--help`` start without the heavy libraries (issue #43, fast start)."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "gpytorch", "sklearn", "matplotlib", "scipy", "pandas")

_PROBE = """
import sys
from hdgp.cli import main
try:
    main({args!r}, prog_name="hdgp")
except SystemExit:
    pass
print("LOADED", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("args", [["--help"], ["predict", "--help"], ["fit", "--help"], ["explain", "--help"]])
def test_help_does_not_import_torch_or_sklearn(args):
    out = subprocess.run([sys.executable, "-c", _PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                         text=True, check=True).stdout
    assert "Usage: hdgp" in out
    assert out.strip().splitlines()[-1] == "LOADED"


def test_the_heavy_names_still_load_on_use():
    code = ("import sys, hdgp; assert 'torch' not in sys.modules; "
            "print(hdgp.OAKRegressor.__name__, hdgp.summary.__name__, hdgp.load.__module__, "
            "hdgp.workflow.fit_table.__name__, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["OAKRegressor", "summarize", "hdgp.io.modelfile", "fit_table", "True"]


def test_every_command_is_listed_with_its_own_short_help():
    from click.testing import CliRunner

    from hdgp.cli import main

    listed = CliRunner().invoke(main, ["--help"]).output
    for name in ("bench", "fit", "predict", "explain", "demo", "presets", "datasets"):
        command = main.get_command(None, name)
        assert command is not None and f"  {name} " in listed
        first = command.get_short_help_str(200).rstrip(".")
        assert first[:40] in " ".join(listed.split()), name  # the static line matches the command's own


def test_a_first_oak_fit_does_not_import_sympy():
    """torch.broadcast_shapes imports SymPy on its first call (about a second of every process's first
    fit): the kernels broadcast batch shapes with NumPy's rule instead."""
    code = ("import sys, warnings, numpy as np, hdgp; warnings.simplefilter('ignore'); "
            "X = np.random.default_rng(0).normal(size=(40, 3)); "
            "hdgp.OAKRegressor(max_iter=2).fit(X, X[:, 0]).predict(X); print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]
