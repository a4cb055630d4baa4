"""Property tests of the command line on hostile tables (issue 9, part 1).

``hdgp fit`` / ``hdgp predict`` on random small tables (odd column names, huge
and tiny scales, constant and text columns, missing cells) must either succeed
— a model file and a predictions table with finite numbers — or stop with exit
status 1 and an ``Error:`` message; never a Python traceback.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from _reliability_helpers import RELIABILITY
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hdgp.cli import main

NAMES = ["x", "a b", "ü€", "1", "x,y", 'q"uote', "tab\tname", "#", "x.1", "y2", "long" * 40]


@st.composite
def tables(draw):
    n = draw(st.integers(2, 12))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    frame = pd.DataFrame({c: rng.normal(size=n) * 10.0 ** draw(st.sampled_from([-8, 0, 8])) for c in names})
    pathology = draw(st.sampled_from(["none", "constant", "text", "missing", "int", "constant-target"]))
    col = names[0]
    if pathology == "constant":
        frame[col] = 4.0
    elif pathology == "text":
        frame[col] = np.where(np.arange(n) % 2 == 0, "red", "blue")
    elif pathology == "missing" and n > 2:
        frame.loc[1, col] = np.nan
    elif pathology == "int":
        frame[col] = np.arange(n)
    target = rng.normal(size=n) * 10.0 ** draw(st.sampled_from([-8, 0, 8]))
    frame["target"] = 1.0 if pathology == "constant-target" else target
    model = draw(st.sampled_from(["RBF-ARD", "GAM", "OAK", "SIGP"]))
    return frame, model


def _no_traceback(result):
    if result.exit_code == 0:
        return True
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), f"uncaught {type(result.exception).__name__}: {result.exception}"
    assert "Error:" in result.output and "Traceback" not in result.output, result.output
    return False


@settings(RELIABILITY, max_examples=8)
@given(case=tables())
def test_cli_fit_predict_never_crashes(tmp_path_factory, case):
    frame, model = case
    tmp = tmp_path_factory.mktemp("cli")
    frame.to_csv(tmp / "train.csv", index=False)
    params = ["-p", "max_iter=3"] if model != "SIGP" else ["-p", "rank=1", "-p", "lengthscale=1.0", "-p", "eta=0.001",
                                                           "-p", "mean_penalty=1.0", "-p", "y_bandwidth=1.0"]
    runner = CliRunner()
    fitted = runner.invoke(main, ["fit", str(tmp / "train.csv"), "-t", "target", "-m", model, "--test-size", "0",
                                  "--quiet", "-o", str(tmp / "m.hdgp"), *params])
    if not _no_traceback(fitted):
        assert not (tmp / "m.hdgp").exists(), "a failed fit must not leave a model file"
        return
    out = tmp / "pred.csv"
    predicted = runner.invoke(main, ["predict", str(tmp / "m.hdgp"), str(tmp / "train.csv"), "-o", str(out),
                                     "--quiet"])
    if _no_traceback(predicted):
        table = pd.read_csv(out)
        assert len(table) == len(frame)
        assert np.all(np.isfinite(table[["mean", "std"]].to_numpy(dtype=float)))
        assert (table["std"] >= 0).all()
