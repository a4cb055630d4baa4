"""Classification in the user workflow: task detection, labels, stratified split, metrics, files, CLI."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn import metrics as skm
from sklearn.datasets import load_breast_cancer

import hdgp
from hdgp.cli import main
from hdgp.io import TableError, TableSchema
from hdgp.workflow import fit_table
from hdgp.workflow.classification import classification_metrics, reliability_bins

RNG = np.random.default_rng(7)
N = 80
FRAME = pd.DataFrame({"a": RNG.normal(size=N), "b": RNG.normal(size=N), "g": RNG.choice(["u", "v"], N)})
SCORE = 2.5 * FRAME["a"] - FRAME["b"] + 0.3 * RNG.normal(size=N)
FRAME["answer"] = np.where(SCORE > np.quantile(SCORE, 0.6), "yes", "no")  # 32 yes, 48 no
FAST_GPC = {"max_iter": 40, "n_inducing": 16}
FAST_OAKC = {"max_iter": 25, "n_inducing": 16, "max_order": 2}
FIXED_SIGPC = {"rank": 2, "lengthscale": 2.0, "eta": 1e-3, "mean_penalty": 1.0}


def _quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the deliberately short fits
        return fit_table(*args, **kwargs)


@pytest.mark.parametrize("values, task, classes, why", [
    (np.where(np.arange(12) % 3 == 0, "spam", "ham"), "classification", ["ham", "spam"], "holds text"),
    (np.arange(12) % 2 == 0, "classification", [False, True], "true/false"),
    (np.arange(12) % 2, "classification", [0, 1], "exactly two distinct values (0, 1)"),
    (np.where(np.arange(12) % 2 == 0, 2.5, -1.0), "classification", [-1.0, 2.5], "exactly two distinct values"),
    (pd.Categorical(["lo", "mid", "hi"] * 4), "classification", ["hi", "lo", "mid"], "categorical"),
    (np.arange(12) % 3, "regression", [],
     "numeric with 3 distinct values (if these integers are class codes, use --task classification)"),
    (np.linspace(0, 1, 12), "regression", [], "numeric with 12 distinct values"),
])
def test_auto_task_from_the_target_column(values, task, classes, why):
    frame = pd.DataFrame({"x": np.arange(12.0), "y": values})
    schema, _, y = TableSchema.infer(frame, "y", task="auto")
    assert schema.task == task and why in schema.task_reason
    assert schema.classes == classes
    if task == "classification":
        assert y.dtype == np.int64 and set(y) == set(range(len(classes)))
        np.testing.assert_array_equal(schema.class_labels(y), np.asarray(frame["y"]).astype(np.asarray(classes).dtype))
    else:
        np.testing.assert_array_equal(y, np.asarray(values, float))


def test_task_can_be_forced_either_way():
    frame = pd.DataFrame({"x": np.arange(12.0), "y": np.arange(12) % 2, "r": np.arange(12) % 3})
    schema, _, y = TableSchema.infer(frame, "y", task="regression", drop=["r"])
    assert schema.task == "regression" and y.dtype == np.float64
    schema, _, y = TableSchema.infer(frame, "r", task="classification", drop=["y"])
    assert schema.task == "classification" and schema.classes == [0, 1, 2]
    with pytest.raises(ValueError, match="task must be one of"):
        TableSchema.infer(frame, "y", task="clasification")


def test_one_class_or_tiny_class_is_a_clear_error():
    frame = pd.DataFrame({"x": np.arange(10.0), "y": ["a"] * 10})
    with pytest.raises(TableError, match=r"single class \('a': 10 rows\)"):
        fit_table(frame, "y", model="gp-classifier")
    frame["y"] = ["a"] * 6 + ["b"] * 3 + ["c"]
    with pytest.raises(TableError, match=r"class\(es\) 'c' with fewer than 2 rows.*'a': 6 rows, 'b': 3 rows, 'c': 1 "):
        fit_table(frame, "y", model="gp-classifier")
    frame["y"] = [3.0] * 9 + [5.0]  # two numbers: classification by default, with a way out
    with pytest.raises(TableError, match=r"class\(es\) 5 with fewer.*chosen automatically.*--task regression"):
        fit_table(frame, "y", model="rbf-ard")
    schema, _, y = TableSchema.infer(frame, "y", task="regression")
    assert schema.task == "regression" and set(y) == {3.0, 5.0}


def test_wrong_model_for_the_task_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"DPA-GP-ARD fits regression only.*oak-classifier \(or oak\).*--task regr"):
        fit_table(FRAME, "answer", model="dpa-gp-ard")
    with pytest.raises(ValueError, match=r"GP-classifier is a classifier.*--task classification"):
        fit_table(FRAME.assign(answer=SCORE), "answer", model="gp-classifier")


def test_string_labels_come_back_and_the_split_is_stratified():
    messages = []
    tm = _quiet_fit(FRAME, "answer", model="rbf-ard", params=FAST_GPC, test_size=0.25, progress=messages.append)
    assert tm.metadata["model"] == "GP-classifier" and tm.task == "classification"
    assert any(m.startswith("task: classification (target 'answer' holds text)") for m in messages)
    held = tm.metadata["holdout"]["y"]
    assert len(held) == 20 and np.bincount(held).tolist() == [12, 8]  # 60 % / 40 %, as in the whole table
    new = FRAME.drop(columns="answer").set_index(pd.Index([f"r{i}" for i in range(N)]))
    pred = tm.predict(new)
    assert list(pred.columns) == ["label", "proba_no", "proba_yes"] and list(pred.index[:2]) == ["r0", "r1"]
    assert set(pred["label"]) <= {"no", "yes"} and isinstance(pred["label"].iloc[0], str)
    np.testing.assert_allclose(pred[["proba_no", "proba_yes"]].sum(axis=1), 1.0, atol=1e-12)
    assert np.mean(pred["label"].to_numpy() == FRAME["answer"].to_numpy()) > 0.8
    assert tm.metadata["metrics"]["accuracy"] > 0.7 and tm.metadata["metrics"]["roc_auc"] > 0.8
    np.testing.assert_array_equal(tm.classes_, ["no", "yes"])


def test_the_held_out_rows_hold_every_class():
    """2 of 60 rows in class C: the stratified split's share, 0.4 rows, rounded to none held out."""
    from hdgp.workflow.fitting import _split

    frame = FRAME.head(60).assign(answer="A")
    frame.loc[[0, 1], "answer"] = "C"
    schema, _, y = TableSchema.infer(frame, "answer", task="classification")
    for seed in range(5):
        train, test = _split(schema, y, 0.2, seed)
        assert np.bincount(y[test]).tolist() == [12, 1] and np.bincount(y[train]).tolist() == [46, 1]
        assert sorted(np.concatenate([train, test]).tolist()) == list(range(60))
    tm = _quiet_fit(frame, "answer", model="rbf-ard", params=FAST_GPC)
    assert np.bincount(tm.metadata["holdout"]["y"]).tolist() == [12, 1]


def test_classifier_file_round_trip_gives_identical_probabilities(tmp_path):
    frame = FRAME.assign(answer=FRAME["answer"] == "yes")  # boolean labels
    tm = _quiet_fit(frame, "answer", model="oak", params=FAST_OAKC)
    assert tm.metadata["model"] == "OAK-classifier"
    back = hdgp.load(tm.save(tmp_path / "c.hdgp"))
    assert back.task == "classification" and back.schema.classes == [False, True]
    pd.testing.assert_frame_equal(back.predict(frame), tm.predict(frame))
    assert back.predict(frame)["label"].dtype == bool
    assert back.estimator.sobol_indices_ == tm.estimator.sobol_indices_
    assert next(iter(back.estimator.sobol_indices_)) == ("a",)  # the latent function is mostly 2.5·a


def test_binary_oak_report_draws_the_held_out_auc_of_truncated_models(tmp_path):
    """OAK Fig. 5 (bottom row) in the report: the held-out AUC as ranked terms are added."""
    from hdgp.workflow.report import write_report

    tm = _quiet_fit(FRAME, "answer", model="oak", params=FAST_OAKC)
    html = write_report(tm, tmp_path / "report").read_text()
    assert "the AUC of the model truncated to the top terms" in html
    holdout = tm.metadata["holdout"]
    X = pd.DataFrame(holdout["X"], columns=tm.schema.encoded_names)
    curve = tm.estimator.truncation_curve(X, holdout["y"])
    assert curve["auc"][-1] == pytest.approx(tm.metadata["metrics"]["roc_auc"], abs=1e-9)
    from hdgp.workflow.report import report_data

    assert report_data(tm)["truncation_curve"]["auc"] == pytest.approx(curve["auc"].tolist())  # explain --json


def test_auto_selects_the_lowest_validation_log_loss():
    tm = _quiet_fit(FRAME, "answer", params={**FAST_GPC, **FAST_OAKC, **FIXED_SIGPC})
    rows = {r["model"]: r for r in tm.metadata["selection"]}
    assert set(rows) == {"OAK-classifier", "GP-classifier", "SIGP-classifier"}
    assert all(r["error"] is None and 0 <= r["val_accuracy"] <= 1 for r in rows.values())
    best = min(rows, key=lambda m: rows[m]["val_log_loss"])
    assert rows[best]["weight"] is not None  # stacked; the heaviest member is the one selected
    lead = tm.metadata["members"][0]["model"]
    assert rows[lead]["selected"] and rows[lead]["weight"] == max(r["weight"] for r in rows.values())
    assert tm.metadata["model"] == lead or tm.metadata["model"].startswith(f"stack of {lead} (")


def test_multiclass_with_sigp():
    frame = FRAME.assign(answer=np.select([SCORE < -1, SCORE < 1], ["low", "mid"], "high"))
    tm = _quiet_fit(frame, "answer", model="sigp", params=FIXED_SIGPC)
    assert tm.metadata["model"] == "SIGP-classifier" and tm.schema.classes == ["high", "low", "mid"]
    m = tm.metadata["metrics"]
    assert m["roc_auc"] is None and m["accuracy"] > 0.5  # three classes: guessing gets ~ 1/3
    pred = tm.predict(frame)
    assert list(pred.columns) == ["label", "proba_high", "proba_low", "proba_mid"]
    np.testing.assert_allclose(pred.iloc[:, 1:].sum(axis=1), 1.0, atol=1e-9)


def test_metrics_agree_with_scikit_learn():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2, 200)
    p1 = np.clip(0.5 + 0.4 * (2 * codes - 1) * rng.random(200) + 0.2 * rng.normal(size=200), 0.01, 0.99)
    proba = np.column_stack([1 - p1, p1])
    m = classification_metrics(codes, proba)
    assert m["accuracy"] == pytest.approx(skm.accuracy_score(codes, p1 > 0.5))
    assert m["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(codes, p1 > 0.5))
    assert m["log_loss"] == pytest.approx(skm.log_loss(codes, proba))
    assert m["brier"] == pytest.approx(skm.brier_score_loss(codes, p1))
    assert m["roc_auc"] == pytest.approx(skm.roc_auc_score(codes, p1))
    three = rng.dirichlet(np.ones(3), 50)
    labels = rng.integers(0, 3, 50)
    m3 = classification_metrics(labels, three)
    assert m3["log_loss"] == pytest.approx(skm.log_loss(labels, three, labels=[0, 1, 2]))
    assert m3["brier"] == pytest.approx(np.mean(np.sum((three - np.eye(3)[labels]) ** 2, axis=1)))
    # ECE by hand: bins [0.6, 0.7) holds rows 0-1 (conf 0.65, one right), [0.9, 1.0] rows 2-3 (conf 0.95, both right)
    proba = np.array([[0.65, 0.35], [0.35, 0.65], [0.95, 0.05], [0.05, 0.95]])
    bins = reliability_bins([0, 0, 0, 1], proba)
    assert [(b["count"], b["accuracy"]) for b in bins] == [(2, 0.5), (2, 1.0)]
    assert classification_metrics([0, 0, 0, 1], proba)["ece"] == pytest.approx(0.5 * 0.15 + 0.5 * 0.05)


# ------------------------------------------------------------------ command line
def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def cancer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cancer")
    data = load_breast_cancer(as_frame=True).frame.sample(120, random_state=0)
    table = data[["mean radius", "mean texture", "mean smoothness", "worst concavity"]].copy()
    table["diagnosis"] = np.where(data["target"] == 1, "benign", "malignant")
    table.to_csv(folder / "cancer.csv", index=False)
    return folder


def test_cli_fit_predict_explain_binary(cancer):
    model = cancer / "c.hdgp"
    result = _run("fit", cancer / "cancer.csv", "-t", "diagnosis", "-m", "oak", "-p", "max_iter=25",
                  "-p", "max_order=2", "-p", "n_inducing=16", "-o", model, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["task"] == "classification" and out["model"] == "OAK-classifier"
    assert out["classes"] == ["benign", "malignant"] and out["n_test"] == 24
    m = out["metrics"]
    assert set(m) == {"accuracy", "balanced_accuracy", "log_loss", "brier", "roc_auc", "ece"}
    assert m["accuracy"] > 0.75 and m["roc_auc"] > 0.85 and 0 <= m["ece"] <= 1 and m["log_loss"] < 0.69
    assert "task: classification (target 'diagnosis' holds text)" in result.stderr

    text = _run("fit", cancer / "cancer.csv", "-t", "diagnosis", "-m", "oak", "-p", "max_iter=5",
                "-p", "max_order=1", "-p", "n_inducing=8", "-o", cancer / "t.hdgp", "--quiet").stdout
    assert "Held-out (24 rows, stratified): accuracy" in text and "ROC AUC" in text

    result = _run("predict", model, cancer / "cancer.csv", "-o", cancer / "p.csv", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["columns"] == ["label", "proba_benign", "proba_malignant"] and sum(info["labels"].values()) == 120
    pred = pd.read_csv(cancer / "p.csv")
    truth = pd.read_csv(cancer / "cancer.csv")["diagnosis"]
    assert set(pred["label"]) <= {"benign", "malignant"} and (pred["label"] == truth).mean() > 0.8
    np.testing.assert_allclose(pred["proba_benign"] + pred["proba_malignant"], 1.0, atol=1e-9)
    result = _run("predict", model, cancer / "cancer.csv", "-o", cancer / "p2.csv", "--level", "0.9")
    assert result.exit_code == 2 and "--level sets the interval of a regression model" in result.output
    assert not (cancer / "p2.csv").exists()

    result = _run("explain", model, "-o", cancer / "report", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["task"] == "classification" and info["metrics"] == m and info["sobol"]
    html = (cancer / "report" / "report.html").read_text()
    assert "class='reliability'" in html and "class='confusion'" in html and "class='sobol'" in html
    assert "expected calibration error" in html and "coverage of 95 %" not in html
    assert (cancer / "report" / "reliability.png").stat().st_size > 1000
    # the latent components of the OAK classifier, as for a regressor
    assert (cancer / "report" / "component_01.png").stat().st_size > 1000 and "component_01.png" in html
    assert "P(diagnosis = malignant) = Φ(f)" in html


def test_cli_refuses_a_regression_model_on_labels(cancer, tmp_path):
    result = _run("fit", cancer / "cancer.csv", "-t", "diagnosis", "-m", "gam", "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 1 and "GAM fits regression only" in result.output
    assert "gp-classifier (or rbf-ard)" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "m.hdgp").exists()
    result = _run("fit", cancer / "cancer.csv", "-t", "diagnosis", "--task", "regression", "-m", "gam",
                  "-o", tmp_path / "m.hdgp")
    assert result.exit_code == 1 and "target must be numeric for regression" in result.output


def test_model_files_from_before_classification_still_load(tmp_path):
    """A table section without task/classes/task_reason (files written before this feature) reads as regression."""
    import zipfile

    frame = FRAME.assign(answer=SCORE)
    tm = _quiet_fit(frame, "answer", model="linear", params={"max_iter": 10})
    path = tm.save(tmp_path / "new.hdgp")
    with zipfile.ZipFile(path) as zf:
        manifest, blob = json.loads(zf.read("manifest.json")), zf.read("tensors.pt")
    state = manifest["table"]["state"]["$dict"]
    manifest["table"]["state"]["$dict"] = [kv for kv in state if kv[0] not in ("task", "classes", "task_reason")]
    with zipfile.ZipFile(tmp_path / "old.hdgp", "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("tensors.pt", blob)
    old = hdgp.load(tmp_path / "old.hdgp")
    assert "task" not in vars(old.schema) and old.task == "regression" and old.schema.classes == ()
    pd.testing.assert_frame_equal(old.predict(frame), tm.predict(frame))


def test_class_weight_is_keyed_by_the_table_labels():
    """The estimator is fitted to codes 0..K-1; a class_weight dict names the table's labels (from
    the CLI a JSON object, whose keys are strings), and the summary reports them by label."""
    tm = _quiet_fit(FRAME, "answer", model="sigp", params={**FIXED_SIGPC, "class_weight": {"yes": 3.0, "no": 1.0}})
    np.testing.assert_allclose(tm.estimator.class_weight_, [1.0, 3.0])
    assert "class weights on the probabilities: no 1, yes 3" in tm.summary()
    from hdgp.workflow.report import report_data

    assert report_data(tm)["learned"]["class_weights"] == {"no": 1.0, "yes": 3.0}
    numeric = FRAME.assign(answer=(FRAME["answer"] == "yes").astype(int))
    tm = _quiet_fit(numeric, "answer", model="sigp", params={**FIXED_SIGPC, "class_weight": {"1": 2.0, "0": 1.0}})
    np.testing.assert_allclose(tm.estimator.class_weight_, [1.0, 2.0])
    with pytest.raises(ValueError, match="class_weight names class 'maybe', which is not a class of the target; "
                                         "its classes are 'no', 'yes'"):
        _quiet_fit(FRAME, "answer", model="sigp", params={**FIXED_SIGPC, "class_weight": {"maybe": 2.0}})


def test_estimator_errors_name_classes_by_label():
    """A 2-row class keeps 1 training row after the stratified hold-out, too few for SIGP's
    stratified cross-validation: the error names the class as the table does, not by its code."""
    frame = FRAME.copy()
    frame.loc[[0, 1], "answer"] = "rare"
    with pytest.raises(TableError, match=r"class 'rare' has 1 \(1 held out for testing\)\. Use --test-size 0"):
        _quiet_fit(frame, "answer", model="sigp")
    # under --model auto the failed candidate's error names the class too
    tm = _quiet_fit(frame, "answer", params={**FAST_GPC, **FAST_OAKC})
    failed = next(r for r in tm.metadata["selection"] if r["model"] == "SIGP-classifier")
    assert "class 'rare' has 1" in failed["error"]


def test_multiclass_gp_classifier_reports_each_classes_length_scales(tmp_path):
    from hdgp.workflow.report import report_data, write_report

    frame = FRAME.assign(answer=np.select([SCORE < -1, SCORE < 1], ["low", "mid"], "high"))
    tm = _quiet_fit(frame, "answer", model="rbf-ard", params=FAST_GPC)
    learned = report_data(tm)["learned"]
    assert "lengthscales" not in learned and list(learned["lengthscales_by_class"]) == ["high", "low", "mid"]
    for label, scales in learned["lengthscales_by_class"].items():
        model = tm.estimator.models_[tm.schema.classes.index(label)]
        assert sorted(scales.values()) == pytest.approx(sorted(model.kernel.lengthscale.detach().reshape(-1).tolist()))
    assert "length-scales, class mid vs rest: " in tm.summary()
    html = write_report(tm, tmp_path / "report").read_text()
    assert "latent function of class low against the other classes" in html


def test_multiclass_oak_is_explained_class_by_class(tmp_path):
    """Beyond two classes OAK-classifier fits one latent function per class against the rest; the
    report ranks the Sobol terms of each and plots components of each, named by the table's labels."""
    from hdgp.workflow.report import report_data, write_report

    frame = FRAME.assign(answer=np.select([SCORE < -1, SCORE < 1], ["low", "mid"], "high"))
    tm = _quiet_fit(frame, "answer", model="oak", params=FAST_OAKC)
    assert tm.metadata["model"] == "OAK-classifier" and len(tm.estimator.sobol_indices_) == 3
    data = report_data(tm)
    assert data["sobol"] is None and list(data["sobol_by_class"]) == ["high", "low", "mid"]
    for label, ranked in data["sobol_by_class"].items():
        assert ranked[0]["term"] in (["a"], ["b"])  # the classes are cut from 2.5 a - b
        assert sum(data["sobol_by_order_by_class"][label]) == pytest.approx(1.0)
    html = write_report(tm, tmp_path / "report").read_text()
    for label in ("high", "low", "mid"):
        assert f"answer = {label} against the other classes" in html
        assert f"top Sobol terms, class {label} vs rest: " in tm.summary()
    components = sorted(p.name for p in (tmp_path / "report").glob("component_*.png"))
    assert 3 <= len(components) <= 12 and (tmp_path / "report" / "cumulative_sobol.png").exists()
    assert "the AUC (one-vs-rest, averaged over the classes" in html  # the truncation curve on the held-out rows
    from hdgp.workflow.classification import classifier_candidates

    assert classifier_candidates(80, 3)[0] == "OAK-classifier" and "OAK-classifier" not in classifier_candidates(1500, 3)
