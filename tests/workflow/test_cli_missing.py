"""The command line with missing cells: OAK fits and predicts rows with empty cells and says so;
--drop-missing on predict; a missing target is dropped with a note; other models stop, naming OAK."""

import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from hdgp.cli import main
from hdgp.io import load


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("missing")
    rng = np.random.default_rng(0)
    n = 70
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.choice(["x", "y", "z"], n)})
    frame["t"] = np.sin(frame["a"]) + frame["b"] * (frame["c"] == "x") + 0.05 * rng.normal(size=n)
    text = frame.astype(object)
    holes = rng.random((n, 3)) < 0.15
    for j, c in enumerate("abc"):
        text.loc[holes[:, j], c] = None
    text.loc[4, "t"] = None
    text.to_csv(folder / "train.csv", index=False)
    new = frame.drop(columns="t").head(5).astype(object)
    new.loc[0, ["a", "b", "c"]] = None  # a row missing every feature
    new.loc[1, "a"] = None
    new.loc[2, "c"] = None
    new.insert(0, "id", [f"r{i}" for i in range(5)])
    new.to_csv(folder / "new.csv", index=False)
    return folder, text, new


@pytest.fixture(scope="module")
def oak_model(tables):
    folder, _, _ = tables
    result = _run("fit", folder / "train.csv", "-t", "t", "--model", "oak", "-p", "max_iter=40", "-p", "max_order=2",
                  "-o", folder / "oak.hdgp")
    assert result.exit_code == 0, result.output
    return folder / "oak.hdgp", result.output


def test_oak_fit_keeps_rows_with_missing_cells_and_drops_a_missing_target(tables, oak_model):
    _, text, _ = tables
    _, output = oak_model
    assert "Dropped 1 of 70 rows whose target 't' is missing (rows 5); a target is never imputed." in output
    n_incomplete = int(text.drop(index=4)[["a", "b", "c"]].isna().any(axis=1).sum())
    assert f"{n_incomplete} of 69 rows have missing feature cells" in output
    assert "they are kept: the model marginalises each missing feature" in output


def test_oak_predict_keeps_rows_with_empty_cells_and_says_so(tables, oak_model):
    folder, _, new = tables
    model, _ = oak_model
    result = _run("predict", model, folder / "new.csv", "--id-column", "id", "-o", folder / "p.csv")
    assert result.exit_code == 0, result.output
    assert re.search(r"3 of 5 rows have missing feature cells \(per column: 'a' \(2\), 'b' \(1\), 'c' \(2\)\): "
                     "predicted with each missing feature marginalised", result.output), result.output
    pred = pd.read_csv(folder / "p.csv")
    assert list(pred["id"]) == list(new["id"]) and np.isfinite(pred[["mean", "std"]].to_numpy()).all()
    # the same numbers as the estimator on NaN inputs
    tm = load(model)
    expected = tm.estimator.predict(tm.transform(pd.read_csv(folder / "new.csv")), return_std=True)
    np.testing.assert_allclose(pred["mean"], expected[0], rtol=1e-9)
    # the row missing every feature is the least certain
    assert pred["std"].iloc[0] == pred["std"].max()
    # --drop-missing: only the complete rows, said so
    result = _run("predict", model, folder / "new.csv", "--id-column", "id", "--drop-missing", "-o", folder / "q.csv")
    assert result.exit_code == 0, result.output
    assert "left out (--drop-missing); predicting the other 2" in result.output
    assert list(pd.read_csv(folder / "q.csv")["id"]) == ["r3", "r4"]


def test_other_models_stop_on_missing_cells_naming_every_column_and_oak(tables):
    folder, _, _ = tables
    result = _run("fit", folder / "train.csv", "-t", "t", "--model", "linear", "-o", folder / "lin.hdgp")
    assert result.exit_code == 1
    assert re.search(r"'a' \(rows .*\); 'b' \(rows .*\); 'c' \(rows .*\).*--drop-missing.*--model oak", result.output)
    result = _run("fit", folder / "train.csv", "-t", "t", "--model", "linear", "--drop-missing", "-o",
                  folder / "lin.hdgp", "--quiet")
    assert result.exit_code == 0, result.output
    result = _run("predict", folder / "lin.hdgp", folder / "new.csv", "-o", folder / "l.csv")
    assert result.exit_code == 1 and "predict --drop-missing" in result.output and "OAK" in result.output
    assert not (folder / "l.csv").exists()
    result = _run("predict", folder / "lin.hdgp", folder / "new.csv", "--drop-missing", "-o", folder / "l.csv")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(folder / "l.csv")) == 2
