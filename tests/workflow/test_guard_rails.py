"""Guard rails in ``hdgp fit`` (issue #43, item 4): leaking targets, baselines beside the metrics."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from hdgp.cli import main
from hdgp.exceptions import HDGPWarning
from hdgp.workflow import fit_table

RNG = np.random.default_rng(0)
N = 80
BASE = pd.DataFrame({"a": RNG.normal(size=N), "b": RNG.normal(size=N)})
Y = np.sin(BASE["a"]) + 0.5 * BASE["b"] + 0.3 * RNG.normal(size=N)


def test_a_column_built_from_the_target_is_named_at_the_users_line():
    frame = BASE.assign(y=Y, total=3 * Y + 1, ranked=np.exp(Y))  # affine, and a monotone function of y
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tm = fit_table(frame, "y", model="Linear")
    leaks = [w for w in caught if issubclass(w.category, HDGPWarning)]
    text = " ".join(str(w.message) for w in leaks)
    assert "Column 'total' nearly equals the target 'y' (correlation 1.0000)" in text
    assert "Column 'ranked'" in text and "rank correlation 1.0000" in text
    assert "'a'" not in text.split("Columns most correlated")[0]  # an honest feature is not named
    assert re.search(r"held-out R² is 1\.0000", text)  # a linear model on 3y + 1 predicts y exactly
    assert all(w.filename == __file__ for w in leaks)  # pointing at the user's line
    assert any("nearly equals" in w for w in tm.metadata["warnings"])


def test_no_leak_warning_on_an_honest_table():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tm = fit_table(BASE.assign(y=Y), "y", model="Linear")
    assert not [w for w in caught if issubclass(w.category, HDGPWarning) and "target" in str(w.message)]
    assert tm.metadata["metrics"]["r2"] < 0.999


def test_cli_shows_the_leak_and_the_baselines(tmp_path):
    frame = BASE.assign(y=Y, total=3 * Y + 1)
    frame.to_csv(tmp_path / "t.csv", index=False)
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-m", "linear",
                                       "-o", str(tmp_path / "m.hdgp")])
    assert result.exit_code == 0, result.output
    assert "Column 'total' nearly equals the target 'y'" in result.output
    assert "R² 1.000," in result.stdout  # three decimals, not "1"
    holdout = fit_table(frame, "y", model="Linear").metadata["holdout"]
    y_train_mean = (Y.sum() - holdout["y"].sum()) / (N - len(holdout["y"]))
    baseline = np.sqrt(np.mean((holdout["y"] - y_train_mean) ** 2))
    assert f"(predicting the training mean: {baseline:.4g})" in result.stdout
    assert "Traceback" not in result.output and "warnings.warn" not in result.output


def test_cli_shows_the_majority_class_rate_beside_accuracy(tmp_path):
    frame = BASE.assign(y=np.where(Y > np.quantile(Y, 0.7), "yes", "no"))
    frame.to_csv(tmp_path / "c.csv", index=False)
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "c.csv"), "-t", "y", "-m", "gp-classifier",
                                       "-p", "max_iter=20", "-p", "n_inducing=10", "-o", str(tmp_path / "m.hdgp")])
    assert result.exit_code == 0, result.output
    rate = re.search(r"accuracy \d\.\d{3} \(majority-class rate (\d\.\d{3})\)", result.stdout)
    assert rate is not None, result.stdout
    tm = fit_table(frame, "y", model="gp-classifier", params={"max_iter": 20, "n_inducing": 10})
    held = tm.metadata["holdout"]["y"]
    assert float(rate.group(1)) == pytest.approx(np.mean(held == 0), abs=1e-3)  # "no" is the commoner class
