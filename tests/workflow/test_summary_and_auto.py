"""Summaries/repr of fitted estimators, pandas in → pandas out, and `--model auto` selection."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import hdgp
from hdgp.cli import main
from hdgp.io import TableError
from hdgp.workflow import fit_table, learned_quantities, select_model
from hdgp.workflow import select as select_module

RNG = np.random.default_rng(3)
FRAME = pd.DataFrame(RNG.normal(size=(60, 3)), columns=["alpha", "beta", "noise_col"])
FRAME["y"] = 2 * np.sin(2 * FRAME["alpha"]) + FRAME["beta"] + 0.05 * RNG.normal(size=60)


def test_fitted_repr_shows_learned_quantities():
    est = hdgp.preset("RBF-ARD", random_state=0, max_iter=30)
    assert repr(est) == "GPRegressor(max_iter=30, random_state=0)"
    est.fit(FRAME[["alpha", "beta", "noise_col"]], FRAME["y"])
    text = repr(est)
    assert text.startswith("GPRegressor(max_iter=30, random_state=0)\n")
    assert "noise std" in text and "length-scales (shortest first): alpha=" in text
    q = learned_quantities(est)
    assert list(q["lengthscales"])[0] == "alpha" and list(q["lengthscales"])[-1] == "noise_col"
    assert 0 < q["noise_variance"] < 0.1


@pytest.mark.parametrize("name, params, learned", [
    ("GP-classifier", dict(max_iter=10), "length-scales (shortest first): alpha="),
    ("SIGP-classifier", dict(rank=1, lengthscale=2.0, eta=1e-3), "softmax inverse temperature"),
    ("SIGP", dict(rank=1, lengthscale=2.0, eta=1e-3), "noise std"),
])
def test_every_family_repr_shows_what_it_learned(name, params, learned):
    est = hdgp.preset(name, **params)
    X, y = FRAME[["alpha", "beta"]], FRAME["y"]
    est.fit(X, y > y.median() if "classifier" in name else y)
    head, _, rest = repr(est).partition("\n")
    assert head == repr(hdgp.preset(name, **params)) and learned in rest


def test_a_constant_feature_is_not_ranked_by_its_length_scale():
    """Its length-scale never moves from the start, which ranked it as the most relevant feature."""
    est = hdgp.preset("RBF-ARD", random_state=0, max_iter=30).fit(FRAME[["alpha", "beta"]].assign(c=1.0), FRAME["y"])
    q = learned_quantities(est)
    assert list(q["lengthscales"]) == ["alpha", "beta"] and q["constant_features"] == ["c"]
    assert "constant in training (no effect): c" in repr(est)


def test_oak_summary_lists_order_variances_and_sobol_terms():
    est = hdgp.preset("OAK", random_state=0, max_iter=15, max_order=2)
    est.fit(FRAME[["alpha", "beta", "noise_col"]], FRAME["y"])
    text = hdgp.summary(est)
    assert "order variances σ²_0..R" in text and "top Sobol terms: alpha" in text
    q = learned_quantities(est)
    assert len(q["order_variances"]) == 3
    assert sum(q["sobol_by_order"]) == pytest.approx(1.0, abs=1e-6)


def test_sigp_summary_uses_its_noise_and_parameters():
    est = hdgp.preset("SIGP", random_state=0, rank=2, lengthscale=2.0, eta=1e-3, mean_penalty=1.0, y_bandwidth=0.5)
    est.fit(FRAME[["alpha", "beta", "noise_col"]], FRAME["y"])
    q = learned_quantities(est)
    assert q["noise_variance"] == est.noise_ and q["best_params"]["rank"] == 2
    assert "hyper-parameters: lengthscale=2.0" in hdgp.summary(est)
    assert q["variance_scale"] == est.variance_scale_
    assert f"predictive variance × {est.variance_scale_:.3g}" in hdgp.summary(est)
    assert q["cv_score"] == {"value": est.best_score_, "scoring": "minus the mean squared error"}
    tuned = hdgp.preset("SIGP-classifier", rank=1, lengthscale=[1.0, 2.0], eta=1e-3, scoring="accuracy")
    tuned.fit(FRAME[["alpha", "beta"]], FRAME["y"] > FRAME["y"].median())
    assert f"their cross-validation score: {tuned.best_score_:.4g} (accuracy)" in hdgp.summary(tuned)


def test_tabular_model_pandas_in_pandas_out():
    tm = fit_table(FRAME, "y", model="rbf-ard", params={"max_iter": 20}, test_size=0.25)
    new = FRAME.drop(columns="y").set_index(pd.Index([f"r{i}" for i in range(60)]))
    pred = tm.predict(new.iloc[:5], level=0.5)
    assert isinstance(pred, pd.DataFrame) and list(pred.index) == ["r0", "r1", "r2", "r3", "r4"]
    assert list(pred.columns) == ["mean", "std", "lower_50", "upper_50"]
    assert np.all(pred["lower_50"] < pred["mean"]) and np.all(pred["mean"] < pred["upper_50"])
    assert "held-out: rmse" in repr(tm)
    assert set(tm.metadata["metrics"]) >= {"rmse", "nlpd", "coverage_50", "coverage_90", "coverage_95"}


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_an_id_column_named_like_a_prediction_column_is_refused_before_predicting(task, monkeypatch):
    frame = FRAME.assign(y=FRAME["y"] > FRAME["y"].median()) if task == "classification" else FRAME
    tm = fit_table(frame, "y", model="linear" if task == "regression" else "sigp-classifier",
                   params={} if task == "regression" else {"rank": 1, "lengthscale": 2.0, "eta": 1e-3}, test_size=0)
    clash = "upper_90" if task == "regression" else "proba_True"
    new = FRAME.drop(columns="y").assign(**{clash: np.arange(len(FRAME))})
    calls = []
    monkeypatch.setattr(type(tm.estimator), "predict", lambda *a, **k: calls.append(a), raising=False)
    monkeypatch.setattr(type(tm.estimator), "predict_proba", lambda *a, **k: calls.append(a), raising=False)
    with pytest.raises(TableError, match=f"id column '{clash}' has the name of a prediction column"):
        tm.predict(new, level=0.9, id_column=clash)
    assert calls == []


def test_select_model_keeps_best_calibrated_validation_log_density():
    X = FRAME.drop(columns="y")
    from hdgp.io import TableSchema

    schema, X, y = TableSchema.infer(FRAME, "y")
    name, rows = select_model(X, y, schema, params={"max_iter": 20}, candidates=["Linear", "RBF-ARD", "GAM"])
    scores = {r["model"]: r["val_log_density_calibrated"] for r in rows}
    assert name == max(scores, key=scores.get)
    assert scores["RBF-ARD"] > scores["Linear"]  # sin(2 alpha) is not linear
    assert [r["selected"] for r in rows].count(True) == 1
    assert all(r["val_log_density_calibrated"] >= r["val_log_density"] for r in rows)


class _FixedPrediction:
    """A 'fitted model' that predicts the given mean and std whatever the rows."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def predict(self, X, return_std=False):
        return self.mean, self.std


def test_the_selection_score_is_the_log_density_with_the_calibrating_variance_factor():
    from types import SimpleNamespace

    from scipy.stats import norm

    rng = np.random.default_rng(0)
    y = rng.normal(size=400)
    accurate = _FixedPrediction(y + 0.1 * rng.normal(size=400), np.full(400, 0.01))  # 10x over-confident
    vague = _FixedPrediction(np.zeros(400), np.ones(400))  # calibrated, but knows nothing
    regression = SimpleNamespace(task="regression")
    a, v = (select_module._score(m, None, y, regression) for m in (accurate, vague))
    assert a["val_log_density"] < v["val_log_density"]  # raw: the vague model wins...
    assert a["score"] > v["score"]  # ... calibrated, the accurate one
    r = np.mean(((y - accurate.mean) / accurate.std) ** 2)
    assert a["val_variance_ratio"] == pytest.approx(r) and 80 < r < 125
    direct = norm.logpdf(y, accurate.mean, np.sqrt(r) * accurate.std).mean()
    assert a["score"] == a["val_log_density_calibrated"] == pytest.approx(direct, rel=1e-12)


def test_auto_refits_the_winner_from_both_starts_and_keeps_its_variance_factor(monkeypatch):
    monkeypatch.setattr(select_module, "candidate_models", lambda n: ["Linear", "GAM"])
    messages = []
    tm = fit_table(FRAME, "y", model="auto", params={"max_iter": 20}, progress=messages.append)
    rows = {r["model"]: r for r in tm.metadata["selection"]}
    members = getattr(tm.estimator, "members_", None) or [(tm.metadata["model"], tm.estimator, None, None)]
    refits = [m for m in messages if m.startswith("refitted from the validated fit too")]
    assert len(refits) == len(members)  # each member, in the order of the members
    for (name, est, _, _), refit in zip(members, refits):
        assert est.variance_scale_ == pytest.approx(rows[name]["val_variance_ratio"])
        assert est.variance_scale_ != 1.0
        warm, fresh = (float(v) for v in re.findall(r"objective (\S+) per row \(fresh start (\S+)\)", refit)[0])
        assert est.fit_result_.loss == pytest.approx(min(warm, fresh), rel=1e-3)
        assert est.get_params()["warm_start"] is False
    assert rows[members[0][0]]["selected"]


def test_candidates_depend_on_size():
    assert "OAK" in select_module.candidate_models(500)
    assert "OAK" not in select_module.candidate_models(10_000)
    assert select_module.candidate_models(100_000) == ["DPA-GP-ARD", "SGPR-RBF-ARD"]


def test_cli_auto_reports_the_comparison(tmp_path, monkeypatch):
    monkeypatch.setattr(select_module, "candidate_models", lambda n: ["Linear", "GAM", "Nonexistent-model"])
    FRAME.to_csv(tmp_path / "t.csv", index=False)
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-p", "max_iter=20",
                                       "-o", str(tmp_path / "m.hdgp"), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    rows = {r["model"]: r for r in out["selection"]}
    assert rows["Nonexistent-model"]["error"].startswith("ValueError: Unknown model")
    assert out["model"].startswith("GAM") or out["model"].startswith("stack of GAM")
    assert rows["GAM"]["selected"]
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-p", "max_iter=20",
                                       "-o", str(tmp_path / "m.hdgp")])
    assert "Model comparison" in result.stdout and "<- chosen" in result.stdout


def test_auto_refuses_a_parameter_no_candidate_has(tmp_path):
    """A typo in -p must not be dropped by every candidate in silence (each has other parameters)."""
    from hdgp.io import TableSchema

    schema, X, y = TableSchema.infer(FRAME, "y")
    with pytest.raises(ValueError, match="No candidate model .* 'max_itr'"):
        select_model(X, y, schema, params={"max_itr": 20}, candidates=["Linear", "OAK"])
    # a parameter of one candidate only (max_order: OAK) is fine, and reaches that one
    messages = []
    name, rows = select_model(X, y, schema, params={"max_iter": 5, "max_order": 1}, candidates=["Linear", "OAK"],
                              progress=messages.append)
    assert all(r["error"] is None for r in rows)
    assert "-p max_order applies to OAK only (the other candidates have no such parameter)" in messages
    assert not any(m.startswith("-p max_iter") for m in messages)  # both candidates take max_iter


def test_a_level_seen_only_in_held_out_rows_moves_to_training():
    """The random split may hold out the only row of a rare category; the model must still know it."""
    frame = FRAME.copy()
    frame["group"] = ["a", "b"] * 30
    frame.loc[7, "group"] = "rare"
    messages = []
    for seed in range(8):  # seeds whose split holds row 7 out, and seeds whose split does not
        tm = fit_table(frame, "y", model="oak", params={"max_iter": 5, "max_order": 1}, random_state=seed,
                       progress=messages.append)
        assert "rare" in tm.schema.levels["group"]
        assert tm.metadata["data"]["n_train"] + len(tm.metadata["holdout"]["y"]) == 60
        assert "7" not in set(tm.metadata["holdout"]["rows"])
    assert sum("moved to training" in m for m in messages) >= 1


def test_a_held_out_set_emptied_by_rare_levels_is_reported():
    # a level per row (declared categorical): every held-out row's level is unseen, so every one moves
    frame = FRAME.head(12).assign(group=[f"g{i}" for i in range(12)])
    messages = []
    tm = fit_table(frame, "y", model="Linear", categorical=["group"], random_state=0, progress=messages.append)
    assert tm.metadata["holdout"] is None and tm.metadata["data"]["n_train"] == 12
    assert any("moved to training" in m and "no held-out row is left" in m for m in messages)
    messages.clear()
    fit_table(frame.drop(columns="group"), "y", model="Linear", random_state=0, progress=messages.append)
    assert not any("moved to training" in m for m in messages)


def test_too_few_rows_to_hold_two_out_are_all_fitted():
    """Five rows at the default 20 %: one held-out row measures nothing, so none is held out."""
    tm = fit_table(FRAME.head(5), "y", model="Linear", random_state=0)
    assert tm.metadata["data"]["n_train"] == 5 and tm.metadata["holdout"] is None
    with pytest.raises(TableError, match="4 usable rows; at least 5 training rows are needed. Add rows."):
        fit_table(FRAME.head(4), "y", model="Linear", random_state=0)


def test_summary_of_a_table_model_is_its_own(tmp_path):
    tm = fit_table(FRAME, "y", model="Linear", random_state=0)
    assert hdgp.summary(tm) == tm.summary()
    hdgp.save(tm, tmp_path / "m.hdgp")
    assert hdgp.summary(hdgp.load(tmp_path / "m.hdgp")) == tm.summary()


def test_auto_needs_enough_rows(tmp_path):
    FRAME.head(20).to_csv(tmp_path / "small.csv", index=False)
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "small.csv"), "-t", "y", "-o", str(tmp_path / "m.hdgp")])
    assert result.exit_code == 1 and "--model auto needs at least 25 training rows" in result.output


def test_auto_stops_at_a_parameter_value_a_candidate_rejects(tmp_path):
    """-p n_projections=0 is the user's mistake: it must be reported, not turn DPA-GP-ARD into a
    quietly failed candidate while another one wins."""
    from hdgp.io import TableSchema

    schema, X, y = TableSchema.infer(FRAME, "y")
    with pytest.raises(ValueError, match=r"-p n_projections=0 is not valid for candidate DPA-GP-ARD: n_projections"):
        select_model(X, y, schema, params={"n_projections": 0}, candidates=["Linear", "DPA-GP-ARD"])
    FRAME.to_csv(tmp_path / "t.csv", index=False)
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-p", "noise_lower_bound=2",
                                       "-o", str(tmp_path / "m.hdgp"), "--quiet"])
    assert result.exit_code != 0 and "noise_lower_bound=2" in result.output
    assert not (tmp_path / "m.hdgp").exists()


@pytest.mark.parametrize("name", ["OAK", "SIGP", "GP-classifier"])
def test_summary_of_an_unfitted_estimator_says_so(name):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        hdgp.summary(hdgp.preset(name))
    with pytest.raises(NotFittedError):
        learned_quantities(hdgp.preset(name))


def test_flat_length_scales_are_marked():
    from hdgp.workflow.summary import format_lengthscale

    assert format_lengthscale(0.73) == "0.73" and format_lengthscale(6.03e16, flat=True) == "6.03e+16 (flat)"
    est = hdgp.preset("RBF-ARD", random_state=0, max_iter=50).fit(FRAME[["alpha", "noise_col"]], FRAME["y"])
    q = learned_quantities(est)
    scales, flat = q["lengthscales"], q["flat_features"]
    assert all(f"{k}={format_lengthscale(scales[k], k in flat)}" in repr(est) for k in scales) and "alpha" not in flat


def test_a_weak_linear_trend_is_not_called_flat():
    """y = 0.5 u + 0.1 v: an RBF kernel fits the trends with long length-scales under a large signal
    variance, so v's length-scale is long but the function is not flat along v; w is irrelevant."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = 0.5 * X[:, 0] + 0.1 * X[:, 1] + 0.01 * rng.standard_normal(200)
    est = hdgp.preset("RBF-ARD", random_state=0).fit(X, y)
    q = learned_quantities(est)
    assert q["lengthscales"]["x1"] > 50  # long, yet...
    assert q["flat_features"] == ["x2"]


def test_a_pipeline_is_summarised_by_its_final_step():
    """It said only "Pipeline with 2 feature(s)"."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), hdgp.preset("RBF-ARD", random_state=0, max_iter=30))
    pipe.fit(FRAME[["alpha", "beta"]], FRAME["y"])
    text = hdgp.summary(pipe)
    assert text.startswith("Pipeline StandardScaler → GPRegressor; its final step:\nGPRegressor with 2 feature(s)")
    assert text.endswith(hdgp.summary(pipe[-1]))
