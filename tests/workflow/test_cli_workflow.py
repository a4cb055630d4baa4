"""`hdgp fit` → `hdgp predict` → `hdgp explain` end to end on small CSV files (click's CliRunner)."""

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.datasets import load_diabetes

import hdgp
from hdgp.cli import main
from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel
from hdgp.workflow import fit_table

FAST_GP = ["-p", "max_iter=15"]
FAST_OAK = ["-p", "max_iter=10", "-p", "max_order=2"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    diabetes = load_diabetes(as_frame=True).frame.head(150)
    diabetes.to_csv(folder / "diabetes.csv", index=False)
    rng = np.random.default_rng(1)
    cat = diabetes.head(100).copy()
    cat.insert(0, "patient", [f"p{i:03d}" for i in range(len(cat))])
    cat["region"] = rng.choice(["north", "south", "east"], len(cat))
    cat.loc[cat.region == "north", "target"] += 80
    cat.to_csv(folder / "regions.csv", index=False)
    return folder


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def diabetes_fit(files):
    model = files / "d.hdgp"
    result = _run("fit", files / "diabetes.csv", "--target", "target", "--model", "rbf-ard", *FAST_GP,
                  "-o", model, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    return model, json.loads(result.stdout)


@pytest.fixture(scope="module")
def regions_fit(files):
    model = files / "r.hdgp"
    result = _run("fit", files / "regions.csv", "-t", "target", "-m", "oak", "--drop", "patient", *FAST_OAK,
                  "-o", model)
    assert result.exit_code == 0, result.output
    return model, result.stdout


def test_help_documents_the_workflow():
    text = _run("--help").output
    assert all(cmd in text for cmd in ("fit", "predict", "explain"))
    fit_help = _run("fit", "--help").output
    assert "--model auto" in fit_help and "--categorical" in fit_help and "log predictive density" in fit_help


def test_text_mode_fit_shows_the_fits_warnings_on_stderr(files, tmp_path):
    result = _run("fit", files / "diabetes.csv", "-t", "target", "-m", "rbf-ard", "-p", "max_iter=2", "--quiet",
                  "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 0, result.output
    assert "Warnings while fitting the model" in result.stderr and "max_iter=2" in result.stderr
    assert "Warnings" not in result.stdout


def test_progress_lines_without_progress_bars_when_stderr_is_not_a_terminal(files, tmp_path):
    result = _run("fit", files / "diabetes.csv", "-t", "target", "-m", "rbf-ard", *FAST_GP, "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 0, result.output
    assert "fitting RBF-ARD on 120 rows" in result.stderr and "fitting hyperparameters" not in result.stderr


def test_diabetes_fit_predict_explain_json(files, diabetes_fit):
    model, out = diabetes_fit
    assert out["model"] == "RBF-ARD" and out["n_test"] == 30 and out["n_train"] == 120
    for key in ("rmse", "nlpd", "r2", "coverage_50", "coverage_90", "coverage_95"):
        assert np.isfinite(out["metrics"][key])
    # the held-out mean predictor gets R² ≤ 0 (RMSE ~ 71.5 here); the GP explains about half the variance
    assert out["metrics"]["r2"] > 0.3
    assert "noise_variance" in out["learned"] and "lengthscales" in out["learned"]

    result = _run("predict", model, files / "diabetes.csv", "-o", files / "p.csv", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_rows"] == 150
    pred = pd.read_csv(files / "p.csv")
    assert list(pred.columns) == ["mean", "std", "lower_95", "upper_95"]
    frame = pd.read_csv(files / "diabetes.csv")
    direct = hdgp.load(model).estimator.predict(frame.drop(columns="target"))
    np.testing.assert_allclose(pred["mean"], direct, rtol=1e-12)
    np.testing.assert_allclose(pred["upper_95"] - pred["mean"], 1.959963984540054 * pred["std"], rtol=1e-9)

    result = _run("explain", model, "-o", files / "report_d", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["metrics"]["coverage_95"] == out["metrics"]["coverage_95"]
    html = (files / "report_d" / "report.html").read_text()
    assert "not an orthogonal additive model" in html and "coverage of 95 % intervals" in html


def test_categorical_csv_with_oak(files, regions_fit, diabetes_fit):
    model, stdout = regions_fit
    assert "OAK predicting 'target'" in stdout and "(1 categorical)" in stdout
    assert "Held-out (20 rows)" in stdout
    tm = hdgp.load(model)
    assert tm.schema.kinds["region"] == "categorical" and tm.schema.levels["region"] == ["east", "north", "south"]
    assert "region" in {name for term in list(tm.estimator.sobol_indices_)[:3] for name in term}

    shuffled = pd.read_csv(files / "regions.csv").iloc[::-1]
    shuffled = shuffled[list(shuffled.columns[::-1])]  # other column order, target still present
    shuffled.to_csv(files / "shuffled.csv", index=False)
    result = _run("predict", model, files / "shuffled.csv", "-o", files / "pr.csv", "--id-column", "patient",
                  "--level", "0.9")
    assert result.exit_code == 0, result.output
    pred = pd.read_csv(files / "pr.csv")
    assert list(pred.columns) == ["patient", "mean", "std", "lower_90", "upper_90"]
    assert pred["patient"].iloc[0] == "p099"
    north = pred["mean"][shuffled["region"].to_numpy() == "north"].mean()
    assert north > pred["mean"][shuffled["region"].to_numpy() != "north"].mean() + 30

    result = _run("explain", model, "--top", "5", "-o", files / "report_r", "--quiet")
    assert result.exit_code == 0, result.output
    html = (files / "report_r" / "report.html").read_text()
    assert "class='sobol'" in html and "region" in html and html.count("class='component'") >= 3
    assert (files / "report_r" / "component_01.png").stat().st_size > 1000
    # an RBF-ARD report into the same folder removes the OAK figures it does not draw, nothing else
    (files / "report_r" / "notes.png").write_bytes(b"mine")
    result = _run("explain", diabetes_fit[0], "-o", files / "report_r", "--quiet")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (files / "report_r").iterdir()) == ["calibration.png", "notes.png", "report.html"]


@pytest.mark.parametrize("content, args, message", [
    ("a,b,y\n1,2,3\n4,5,6\n", ["-t", "target"], "target column 'target' is not in the table"),
    ("a,b,y\n1,2,3\n4,x,5\n" + "1,2,3\n" * 10, ["-t", "y"], "Column 'b' should hold numbers, but rows 2 contain 'x'"),
    ("a,b,y\n1,,3\n4,5,6\n" + "1,2,3\n" * 10, ["-t", "y"], r"missing values in column\(s\) 'b' \(rows 1\)"),
    ("", ["-t", "y"], "is empty"),
    ("a,b,y\n" + "1,2,3\n" * 10, ["-t", "y"], "has 1 distinct value"),
    ("a,b,y\n1,2,3\n", ["-t", "y"], "The table has 1 complete data row"),
    ("state,y\n" + "".join(f"s{i},{i}\n" for i in range(60)), ["-t", "y"],
     "Drop it with --drop state, or declare it categorical with --categorical state"),
    ("a,b,y\n1,2,3\n4,?,5\n" + "1,2,3\n" * 10, ["-t", "y"], r"read them as missing values with --na-values '\?'"),
    ("a;b;y\n1;2;3\n4;5;6\n", ["-t", "y"], "separated by semicolons. Give the separator with --sep ';'"),
    ("a,y\n" + "".join(f"{i * 0.37:.2f},{i % 7}\n" for i in range(60)), ["-t", "y", "--categorical", "a"],
     r"'a' was declared categorical, but holds 60 distinct values in 60 rows.*remove --categorical a"),
])
def test_bad_csv_gives_clear_message_and_no_file(tmp_path, content, args, message):
    (tmp_path / "bad.csv").write_text(content)
    result = _run("fit", tmp_path / "bad.csv", *args, "-m", "rbf-ard", "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 1
    assert re.search(message, result.output), result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_separator_and_missing_markers_are_read_as_given(tmp_path):
    """--sep ';' and --na-values '?' on fit and predict: a semicolon file with '?' for a missing cell
    fits (with --drop-missing), and predict reads another semicolon file row for row."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)})
    frame["y"] = frame["a"] - frame["b"]
    text = frame.astype(object)
    text.loc[3, "b"] = "?"
    text.to_csv(tmp_path / "semi.csv", sep=";", index=False)
    args = ("--sep", ";", "--na-values", "?")
    result = _run("fit", tmp_path / "semi.csv", "-t", "y", "-m", "rbf-ard", "--drop-missing", *args,
                  "-p", "max_iter=30", "-o", tmp_path / "m.hdgp", "--quiet")
    assert result.exit_code == 0, result.output
    frame.drop(columns="y").to_csv(tmp_path / "new.csv", sep=";", index=False)
    result = _run("predict", tmp_path / "m.hdgp", tmp_path / "new.csv", "--sep", ";", "-o", tmp_path / "p.csv")
    assert result.exit_code == 0, result.output
    pred = pd.read_csv(tmp_path / "p.csv")
    assert len(pred) == 40 and np.corrcoef(pred["mean"], frame["y"])[0, 1] > 0.95


def test_seed_out_of_range_is_a_usage_error_naming_the_option(tmp_path):
    (tmp_path / "t.csv").write_text("a,y\n1,2\n2,3\n3,4\n")
    result = _run("fit", tmp_path / "t.csv", "-t", "y", "--random-state", "-1", "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 2 and re.search(r"--random-state.*0<=x<=4294967295", result.output), result.output


@pytest.mark.parametrize("level, name", [(0.5, "50"), (0.975, "97_5"), (0.9999999999, "99_99999999")])
def test_interval_columns_name_the_level_exactly(level, name):
    from hdgp.workflow.tabular import predict_frame

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=30)})
    est = hdgp.preset("Linear").fit(X, 2 * X["a"] + rng.normal(size=30))
    frame = predict_frame(est, X.head(3), level=level)
    assert list(frame.columns) == ["mean", "std", f"lower_{name}", f"upper_{name}"]
    assert (frame[f"upper_{name}"] > frame[f"lower_{name}"]).all()


def test_parquet_output_without_an_engine_fails_before_predicting(files, diabetes_fit, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name in ("pyarrow", "fastparquet") else real(name, *a, **k))
    result = _run("predict", diabetes_fit[0], files / "diabetes.csv", "-o", tmp_path / "p.parquet")
    assert result.exit_code == 1 and "needs a Parquet engine: pip install pyarrow" in result.output
    assert "predicting" not in result.output and not (tmp_path / "p.parquet").exists()


def test_predict_errors_leave_no_output(files, diabetes_fit, regions_fit, tmp_path):
    model = diabetes_fit[0]
    frame = pd.read_csv(files / "diabetes.csv").drop(columns="bmi")
    frame.to_csv(tmp_path / "nobmi.csv", index=False)
    result = _run("predict", model, tmp_path / "nobmi.csv", "-o", tmp_path / "p.csv")
    assert result.exit_code == 1 and "missing the column(s) 'bmi'" in result.output
    assert not (tmp_path / "p.csv").exists()

    broken = tmp_path / "broken.hdgp"
    broken.write_bytes(model.read_bytes()[:500])
    result = _run("predict", broken, files / "diabetes.csv", "-o", tmp_path / "p.csv")
    assert result.exit_code == 1 and "truncated or damaged" in result.output
    assert not (tmp_path / "p.csv").exists()

    frame = pd.read_csv(files / "regions.csv")
    frame["region"] = np.arange(len(frame)) % 3  # numbers where the model was trained on text labels
    frame.to_csv(tmp_path / "coded.csv", index=False)
    result = _run("predict", regions_fit[0], tmp_path / "coded.csv", "-o", tmp_path / "p.csv")
    assert result.exit_code == 1 and "Column 'region' has value(s) '0', '1', '2'" in result.output
    assert "known: 'east', 'north', 'south'" in result.output and not (tmp_path / "p.csv").exists()

    bare = hdgp.save(hdgp.load(model).estimator, tmp_path / "bare.hdgp")
    result = _run("explain", bare, "-o", tmp_path / "rep")
    assert result.exit_code == 1 and "without a table description" in result.output
    assert not (tmp_path / "rep").exists()


def test_unknown_levels_ignored_on_request_with_a_warning(files, regions_fit, tmp_path):
    model = regions_fit[0]
    frame = pd.read_csv(files / "regions.csv").head(6)
    known = _run("predict", model, files / "regions.csv", "-o", tmp_path / "known.csv", "--quiet")
    assert known.exit_code == 0, known.output
    frame.loc[[1, 4], "region"] = "west"
    frame.to_csv(tmp_path / "west.csv", index=False)
    refused = _run("predict", model, tmp_path / "west.csv", "-o", tmp_path / "p.csv")
    assert refused.exit_code == 1 and "--unknown-levels ignore" in refused.output
    result = _run("predict", model, tmp_path / "west.csv", "-o", tmp_path / "p.csv", "--unknown-levels", "ignore",
                  "--json")
    assert result.exit_code == 0, result.output
    assert "Warning: Column 'region' has value(s) 'west' in rows 2, 5" in result.stderr
    assert json.loads(result.stdout)["warnings"][0].endswith("predicted with the average effect of the column.")
    pred, before = pd.read_csv(tmp_path / "p.csv"), pd.read_csv(tmp_path / "known.csv").head(6)
    unchanged = [0, 2, 3, 5]
    np.testing.assert_allclose(pred["mean"][unchanged], before["mean"][unchanged])
    # OAK: the unknown level's prediction is the frequency-weighted mean over the known levels
    # (weights: the training rows' level frequencies, which the constrained kernel holds)
    tm = hdgp.load(model)
    freq = next(m for m in tm.estimator.kernel_.modules() if isinstance(m, ConstrainedCategoricalKernel)).level_weights
    rows = pd.concat([frame.iloc[[1]].assign(region=level) for level in tm.schema.levels["region"]])
    np.testing.assert_allclose(pred["mean"][1], np.dot(freq.numpy(), tm.predict(rows)["mean"]), rtol=1e-6)
    tm.predict(frame, unknown_levels="ignore")
    assert tm.estimator.handle_unknown == "error"  # predicting with unknown levels ignored leaves the model as it was
    with pytest.raises(ValueError, match="unknown_levels must be 'error' or 'ignore'"):
        tm.predict(frame, unknown_levels="warn")


def test_unknown_levels_ignored_by_an_oak_classifier(tmp_path):
    rng = np.random.default_rng(0)
    x, region = rng.normal(size=80), rng.choice(["north", "south", "east"], 80)
    pd.DataFrame({"x": x, "region": region, "label": np.where(x + (region == "north") > 0.3, "yes", "no")}) \
        .to_csv(tmp_path / "cls.csv", index=False)
    pd.DataFrame({"x": [0.1, 0.2], "region": ["west", "north"]}).to_csv(tmp_path / "new.csv", index=False)
    fitted = _run("fit", tmp_path / "cls.csv", "-t", "label", "-m", "oak", "-o", tmp_path / "cls.hdgp",
                  "-p", "max_iter=10", "--quiet")
    assert fitted.exit_code == 0, fitted.output
    result = _run("predict", tmp_path / "cls.hdgp", tmp_path / "new.csv", "-o", tmp_path / "p.csv",
                  "--unknown-levels", "ignore")
    assert result.exit_code == 0, result.output
    assert "Warning: Column 'region' has value(s) 'west' in rows 1" in result.stderr
    proba = pd.read_csv(tmp_path / "p.csv")[["proba_no", "proba_yes"]].to_numpy()
    assert np.isfinite(proba).all() and np.allclose(proba.sum(1), 1.0)


def test_parquet_tsv_and_csv_out_and_other_suffixes_refused(files, regions_fit, tmp_path):
    pd.read_csv(files / "regions.csv").to_parquet(tmp_path / "r.parquet")
    result = _run("predict", regions_fit[0], tmp_path / "r.parquet", "-o", tmp_path / "p.parquet", "--quiet")
    assert result.exit_code == 0, result.output
    for name in ("p.csv", "p.tsv"):
        assert _run("predict", regions_fit[0], files / "regions.csv", "-o", tmp_path / name, "--quiet").exit_code == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "p.parquet"), pd.read_csv(tmp_path / "p.csv"))
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "p.tsv", sep="\t"), pd.read_csv(tmp_path / "p.csv"))
    result = _run("predict", regions_fit[0], files / "regions.csv", "-o", tmp_path / "p.xlsx")
    assert result.exit_code == 1 and "use a file name ending in .csv" in result.output
    assert not (tmp_path / "p.xlsx").exists()  # refused before predicting, not CSV text in an .xlsx file


def test_outputs_never_overwrite_the_inputs(files, diabetes_fit, tmp_path):
    table = tmp_path / "train.csv"
    table.write_bytes((files / "diabetes.csv").read_bytes())
    before = table.read_bytes()
    for args, message in [
        (["fit", table, "-t", "target", "-o", table], "it is the input file"),
        (["fit", table, "-t", "target", "-o", tmp_path / "model.csv"], "that name is for a table"),
        (["predict", diabetes_fit[0], table, "-o", table], "it is the input file"),
    ]:
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 1 and message in result.output, result.output
    assert table.read_bytes() == before and not (tmp_path / "model.csv").exists()


def test_interval_level_too_close_to_one_is_refused(files, diabetes_fit, tmp_path):
    result = _run("predict", diabetes_fit[0], files / "diabetes.csv", "-o", tmp_path / "p.csv",
                  "--level", "0.9999999999999999")
    assert result.exit_code == 1 and "interval is infinite" in result.output
    assert not (tmp_path / "p.csv").exists()


def test_json_output_has_no_nan():
    """NaN and infinity are not JSON: --json writes null for them."""
    from hdgp.workflow.cli import _jsonable

    text = json.dumps(_jsonable({"r2": float("nan"), "a": [np.float64(np.inf), 1.5], "n": np.int64(3)}))
    assert json.loads(text) == {"r2": None, "a": [None, 1.5], "n": 3} and "NaN" not in text


def test_unknown_model_and_param(files, tmp_path):
    result = _run("fit", files / "diabetes.csv", "-t", "target", "-m", "nope", "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 1 and "Unknown model 'nope'" in result.output and "RBF-ARD" in result.output
    result = _run("fit", files / "diabetes.csv", "-t", "target", "-m", "rbf-ard", "-p", "max_itr=3",
                  "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 1 and "no parameter 'max_itr'" in result.output
    assert not (tmp_path / "m.hdgp").exists()


def test_codes_with_leading_zeros_are_read_as_written_at_predict(tmp_path):
    """Training saw '007', '042' and 'X12' (text); a new file with only '007'/'042' must not turn
    them into the numbers 7 and 42, and numbers read back as the levels that training read as numbers."""
    rng = np.random.default_rng(0)
    codes = rng.choice(["007", "042", "X12"], 60)
    x = rng.normal(size=60)
    pd.DataFrame({"code": codes, "x": x, "y": x + (codes == "042")}).to_csv(tmp_path / "fit.csv", index=False)
    (tmp_path / "new.csv").write_text("code,x\n007,0.1\n042,0.2\n")
    result = _run("fit", tmp_path / "fit.csv", "-t", "y", "-m", "rbf-ard", *FAST_GP, "--quiet", "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 0, result.output
    result = _run("predict", tmp_path / "m.hdgp", tmp_path / "new.csv", "-o", tmp_path / "p.csv", "--quiet")
    assert result.exit_code == 0, result.output
    tm = hdgp.load(tmp_path / "m.hdgp")
    direct = tm.estimator.predict(tm.schema.encode(pd.DataFrame({"code": ["007", "042"], "x": [0.1, 0.2]})))
    np.testing.assert_allclose(pd.read_csv(tmp_path / "p.csv")["mean"], direct, rtol=1e-12)

    numbers = pd.DataFrame({"code": rng.choice([7, 42], 60), "x": x, "y": x})
    numbers.to_csv(tmp_path / "fit2.csv", index=False)
    result = _run("fit", tmp_path / "fit2.csv", "-t", "y", "-m", "rbf-ard", "--categorical", "code", *FAST_GP,
                  "--quiet", "-o", tmp_path / "m2.hdgp")
    assert result.exit_code == 0, result.output
    schema = hdgp.load(tmp_path / "m2.hdgp").schema
    encoded = schema.encode(pd.DataFrame({"code": ["007", "42.0"], "x": [0.0, 0.0]}))
    assert encoded.filter(like="code").to_numpy().argmax(1).tolist() == [schema.levels["code"].index("7"),
                                                                         schema.levels["code"].index("42")]


def test_a_column_name_with_a_comma_can_be_dropped_whole(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    pd.DataFrame({"size, m2": rng.normal(size=40), "x": x, "y": 2 * x}).to_csv(tmp_path / "t.csv", index=False)
    result = _run("fit", tmp_path / "t.csv", "-t", "y", "-m", "rbf-ard", "--drop", "size, m2", *FAST_GP, "--quiet",
                  "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 0, result.output
    assert hdgp.load(tmp_path / "m.hdgp").schema.features == ["x"]


def test_report_components_of_a_date_column_have_calendar_dates_on_their_axis():
    from hdgp.workflow import fit_table
    from hdgp.workflow.report import _component_figure

    rng = np.random.default_rng(0)
    when = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 1000, 80), unit="D")
    days = (when - pd.Timestamp("2020-01-01")).days.to_numpy()
    frame = pd.DataFrame({"when": when.strftime("%Y-%m-%d"), "x": rng.normal(size=80)})
    frame["y"] = np.sin(days / 150) + frame.x
    tm = fit_table(frame, "y", model="oak", params={"max_iter": 10, "max_order": 1})
    assert tm.schema.kinds["when"] == "datetime"
    fig = _component_figure(tm, ("when",))
    fig.canvas.draw()
    ax = next(a for a in fig.axes if a.get_xlabel() == "when")
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"20\d\d-\d\d-\d\d", t) for t in labels), labels


def test_refit_all_saves_the_model_refitted_on_every_row(files, tmp_path):
    model = tmp_path / "all.hdgp"
    result = _run("fit", files / "diabetes.csv", "-t", "target", "-m", "rbf-ard", *FAST_GP, "--refit-all",
                  "-o", model, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["n_train"] == 120 and out["n_test"] == 30 and out["refit_all"]["n_rows"] == 150
    tm = hdgp.load(model)
    assert tm.estimator.X_train_.shape[0] == 150 and tm.estimator.get_params()["warm_start"] is False
    assert tm.estimator.start_ == "warm"  # from the evaluated fit's hyper-parameters
    # the held-out predictions kept in the file are those of the model that did not see these rows
    holdout = tm.metadata["holdout"]
    refitted = tm.estimator.predict(pd.DataFrame(holdout["X"], columns=tm.schema.encoded_names))
    assert np.abs(refitted - holdout["mean"]).max() > 1e-3
    text = _run("fit", files / "diabetes.csv", "-t", "target", "-m", "rbf-ard", *FAST_GP, "--refit-all",
                "-o", tmp_path / "b.hdgp", "--quiet").stdout
    assert "Refitted on all 150 rows" in text
    result = _run("explain", model, "-o", tmp_path / "report", "--quiet")
    assert result.exit_code == 0 and "refitted on all 150 rows" in (tmp_path / "report" / "report.html").read_text()


def test_refit_all_keeps_the_validation_variance_factor_of_auto(monkeypatch):
    import hdgp.workflow.select as select
    from hdgp.workflow import fit_table

    monkeypatch.setattr(select, "candidate_models", lambda n: ["RBF-ARD", "GAM"])  # GPs: no factor of their own
    frame = load_diabetes(as_frame=True).frame.head(80)
    tm = fit_table(frame, "target", model="auto", params={"max_iter": 5}, refit_all=True)
    factors = {r["model"]: r["val_variance_ratio"] for r in tm.metadata["selection"]}
    assert tm.metadata["refit_all"]["n_rows"] == 80
    for name, est, _, _ in getattr(tm.estimator, "members_", None) or [(tm.metadata["model"], tm.estimator, 0, 0)]:
        assert factors[name] != 1.0  # each member of a stack keeps its own factor after the refit
        np.testing.assert_allclose(est.variance_scale_, factors[name], rtol=1e-12)


def test_data_summary_shows_dates_without_a_midnight_time():
    frame = pd.DataFrame({"d": pd.date_range("2000-01-15", periods=30, freq="7D").astype(str), "y": np.arange(30.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = fit_table(frame, "y", model="gam", params={"max_iter": 5})
    (entry,) = tm.metadata["data"]["features"]
    assert (entry["first"], entry["last"]) == ("2000-01-15", "2000-08-05")
    frame["d"] = pd.date_range("2000-01-15 10:30", periods=30, freq="7h").astype(str)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = fit_table(frame, "y", model="gam", params={"max_iter": 5})
    assert tm.metadata["data"]["features"][0]["first"] == "2000-01-15 10:30:00"
