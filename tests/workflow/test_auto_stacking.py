"""``--model auto``'s stack: stacking weights, the mixture's predictions, and the fitted table model."""

import pickle

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

import hdgp
from hdgp.workflow import fit_table
from hdgp.workflow import select as select_module
from hdgp.workflow.stacking import (StackedClassifier, StackedRegressor, mixture_evidence, stack_members,
                                    stacking_weights)

RNG = np.random.default_rng(5)
FRAME = pd.DataFrame(RNG.normal(size=(70, 2)), columns=["a", "b"])
FRAME["g"] = RNG.choice(["u", "v", "w"], 70)
FRAME["y"] = np.sin(2 * FRAME["a"]) + 0.3 * FRAME["b"] ** 2 + (FRAME["g"] == "u") + 0.1 * RNG.normal(size=70)


def _objective(w, logs):
    return float(np.mean(np.log(np.exp(logs) @ w)))


def test_stacking_weights_reach_the_optimum_of_the_mixture_log_density():
    logs = RNG.normal(size=(200, 4)) + np.array([0.0, 0.3, 0.2, -2.0])
    w = stacking_weights({k: logs[:, j] for j, k in enumerate("abcd")})
    found = np.array(list(w.values()))
    assert found.min() >= 0 and found.sum() == pytest.approx(1.0)
    # the same problem by a general optimiser over the softmax parameterisation
    best = minimize(lambda t: -_objective(np.exp(t) / np.exp(t).sum(), logs), np.zeros(4), method="Nelder-Mead",
                    options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 20000})
    assert _objective(found, logs) >= -best.fun - 1e-7


def test_a_candidate_better_on_every_row_takes_all_the_weight():
    logs = RNG.normal(size=(50, 1))
    members = stack_members({"good": logs[:, 0], "bad": logs[:, 0] - 1.0, "worse": logs[:, 0] - 3.0})
    assert list(members) == ["good"] and members["good"] == 1.0


def test_small_weights_are_dropped_and_the_rest_solved_again():
    logs = np.log(np.column_stack([np.r_[np.full(40, 0.9), np.full(40, 0.1)], np.r_[np.full(40, 0.1), np.full(40, 0.9)],
                                   np.full(80, 0.3)]))
    members = stack_members({"a": logs[:, 0], "b": logs[:, 1], "c": logs[:, 2]}, max_members=2)
    assert set(members) == {"a", "b"} and sum(members.values()) == pytest.approx(1.0)
    assert members["a"] == pytest.approx(0.5, abs=1e-4)


def test_a_mixture_is_kept_only_beyond_what_its_fitted_weights_explain():
    base = RNG.normal(size=400)
    twins = {"a": base + 0.01 * RNG.normal(size=400), "b": base + 0.01 * RNG.normal(size=400)}
    weights = stacking_weights(twins)  # two copies of one model: any mixture, a gain of noise only
    gain, penalty = mixture_evidence(twins, weights)
    assert -1e-12 <= gain < penalty == pytest.approx(1 / 800)
    # complementary candidates: each is right on half of the rows
    half = np.r_[np.zeros(200), np.ones(200)].astype(bool)
    pair = {"a": np.where(half, -0.5, -3.0), "b": np.where(half, -3.0, -0.5)}
    gain, penalty = mixture_evidence(pair, stack_members(pair))
    assert gain == pytest.approx(np.log(0.5 * np.exp(-0.5) + 0.5 * np.exp(-3.0)) - np.mean(pair["a"]), rel=1e-6)
    assert gain > 0.5 > penalty


class _Fixed:
    """A fitted 'model' predicting fixed values, recording the inputs it sees."""

    def __init__(self, mean, std, proba=None):
        self.mean, self.std, self.proba, self.seen = mean, std, proba, []
        self.classes_ = np.arange(2)

    def predict(self, X, return_std=False):
        self.seen.append(X)
        return (self.mean, self.std) if return_std else self.mean

    def predict_proba(self, X):
        self.seen.append(X)
        return self.proba


def test_the_mixture_predicts_its_mean_and_the_spread_of_its_members():
    codes = _Fixed(np.array([0.0, 1.0]), np.array([1.0, 0.5]))
    onehot = _Fixed(np.array([2.0, 1.0]), np.array([1.0, 2.0]))
    est = StackedRegressor.from_members([("OAK", codes, "codes", ["x", "g"]),
                                         ("RBF-ARD", onehot, "onehot", ["x", "g=p", "g=q", "g=r"])],
                                        [0.25, 0.75], ["x", "g"], {"g": 3})
    X = pd.DataFrame({"x": [0.5, -1.0], "g": [2.0, 0.0]})
    mean, std = est.predict(X, return_std=True)
    np.testing.assert_allclose(mean, [1.5, 1.0])
    # a 25 / 75 mixture of N(0, 1) and N(2, 1): variance 1 + 0.25 * 0.75 * 2^2
    np.testing.assert_allclose(std[0], np.sqrt(1 + 0.75))
    np.testing.assert_allclose(std[1], np.sqrt(0.25 * 0.25 + 0.75 * 4))
    assert list(codes.seen[0].columns) == ["x", "g"]
    np.testing.assert_array_equal(onehot.seen[0].to_numpy(), [[0.5, 0, 0, 1], [-1.0, 1, 0, 0]])
    assert list(onehot.seen[0].columns) == ["x", "g=p", "g=q", "g=r"]
    samples = np.r_[RNG.normal(0, 1, 250_000), RNG.normal(2, 1, 750_000)]  # Monte-Carlo of row 0
    assert samples.std() == pytest.approx(std[0], rel=5e-3)


def test_the_mixture_refuses_a_table_with_the_wrong_number_of_columns():
    member = _Fixed(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
    est = StackedRegressor.from_members([("OAK", member, "codes", ["x", "g"]), ("GAM", member, "codes", ["x", "g"])],
                                        [0.5, 0.5], ["x", "g"], {})
    with pytest.raises(ValueError, match=r"takes 2 feature columns \(x, g\)"):
        est.predict(np.zeros((2, 3)))
    assert member.seen == []  # refused before any member saw it


def test_the_classifier_mixture_averages_probabilities():
    a = _Fixed(None, None, np.array([[0.9, 0.1], [0.2, 0.8]]))
    b = _Fixed(None, None, np.array([[0.5, 0.5], [0.6, 0.4]]))
    est = StackedClassifier.from_members([("A", a, "codes", ["x"]), ("B", b, "onehot", ["x"])], [0.6, 0.4],
                                         ["x"], {}, n_classes=2)
    np.testing.assert_allclose(est.predict_proba(np.zeros((2, 1))), [[0.74, 0.26], [0.36, 0.64]])
    np.testing.assert_array_equal(est.predict(np.zeros((2, 1))), [0, 1])


def test_auto_fits_the_stack_on_a_table_with_a_categorical_column(monkeypatch, tmp_path):
    monkeypatch.setattr(select_module, "candidate_models", lambda n: ["OAK", "RBF-ARD"])  # codes and one-hot
    weights = {"RBF-ARD": 0.6, "OAK": 0.4}  # whatever the data: the path of a mixture
    monkeypatch.setattr(select_module, "stack_members", lambda terms, **kw: {k: weights[k] for k in weights})
    monkeypatch.setattr(select_module, "mixture_evidence", lambda terms, w: (1.0, 0.0))
    messages = []
    tm = fit_table(FRAME, "y", model="auto", params={"max_iter": 20}, progress=messages.append)
    rows = {r["model"]: r for r in tm.metadata["selection"]}
    members = tm.metadata["members"]
    assert sum(m["weight"] for m in members) == pytest.approx(1.0)
    assert [m["model"] for m in members][0] == next(k for k, r in rows.items() if r["selected"])
    assert all(rows[m["model"]]["weight"] == pytest.approx(m["weight"]) for m in members)
    assert members == [{"model": "RBF-ARD", "weight": 0.6}, {"model": "OAK", "weight": 0.4}]
    if len(members) > 1:  # the mixture, from its members' own encodings of the table
        est = tm.estimator
        assert isinstance(est, StackedRegressor) and tm.metadata["model"].startswith("stack of ")
        out = tm.predict(FRAME.head(5))
        parts = []
        for (name, member, encoding, _), w in zip(est.members_, est.weights_):
            tm.schema.encoding = encoding
            assert member.variance_scale_ == pytest.approx(rows[name]["val_variance_ratio"])
            parts.append(member.predict(tm.schema.encode(FRAME.head(5)), return_std=True))
        tm.schema.encoding = "codes"
        mean = sum(w * m for (m, _), w in zip(parts, est.weights_))
        second = sum(w * (s ** 2 + m ** 2) for (m, s), w in zip(parts, est.weights_))
        np.testing.assert_allclose(out["mean"], mean, rtol=1e-10)
        np.testing.assert_allclose(out["std"], np.sqrt(second - mean ** 2), rtol=1e-8)
        assert any(m.startswith("[auto] stacking weights") for m in messages)
    again = pickle.loads(pickle.dumps(tm))
    pd.testing.assert_frame_equal(again.predict(FRAME.head(5)), tm.predict(FRAME.head(5)))
    hdgp.save(tm, tmp_path / "m.hdgp")  # the model file keeps every member, its encoding and weight
    loaded = hdgp.load(tmp_path / "m.hdgp")
    pd.testing.assert_frame_equal(loaded.predict(FRAME.head(5)), tm.predict(FRAME.head(5)), rtol=1e-10)
    assert loaded.metadata["members"] == members and hdgp.summary(loaded) == tm.summary()
    assert "member RBF-ARD, weight 0.600:" in tm.summary() and "member OAK, weight 0.400:" in tm.summary()
    # hdgp explain: the Sobol indices are OAK's, the member that has them, with its weight said
    from hdgp.workflow.report import report_data, write_report

    data = report_data(loaded)
    assert data["explained_member"] == {"model": "OAK", "weight": 0.4} and data["sobol"]
    page = write_report(loaded, tmp_path / "report").read_text()
    assert "its member OAK (weight 0.400)" in page and "stacking weights: RBF-ARD 0.600, OAK 0.400" in page
    score = tm.estimator.score(tm.transform(FRAME), FRAME["y"])
    assert 0.5 < score <= 1.0


def test_cli_fit_and_explain_show_the_members(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from hdgp.cli import main

    monkeypatch.setattr(select_module, "candidate_models", lambda n: ["GAM", "RBF-ARD"])
    monkeypatch.setattr(select_module, "stack_members", lambda terms, **kw: {"GAM": 0.7, "RBF-ARD": 0.3})
    monkeypatch.setattr(select_module, "mixture_evidence", lambda terms, w: (1.0, 0.0))
    FRAME.to_csv(tmp_path / "t.csv", index=False)
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-p", "max_iter=20",
                                       "-o", str(tmp_path / "m.hdgp")])
    assert result.exit_code == 0, result.output
    assert "<- chosen (weight 0.700)" in result.stdout and "<- in the mixture, weight 0.300" in result.stdout
    assert "hdgp model stack of GAM (0.70) + RBF-ARD (0.30)" in result.stdout
    result = CliRunner().invoke(main, ["explain", str(tmp_path / "m.hdgp"), "-o", str(tmp_path / "r"), "--quiet"])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r" / "report.html").read_text()
    assert "its member GAM (weight 0.700)" in page and "no Sobol" in page


def test_a_classifier_stack_is_saved_and_loaded(monkeypatch, tmp_path):
    frame = FRAME.assign(y=np.where(FRAME["y"] > FRAME["y"].median(), "high", "low"))
    monkeypatch.setattr(select_module, "classifier_candidates", lambda n, k: ["GP-classifier", "OAK-classifier"])
    monkeypatch.setattr(select_module, "stack_members", lambda terms, **kw: {"OAK-classifier": 0.55,
                                                                             "GP-classifier": 0.45})
    monkeypatch.setattr(select_module, "mixture_evidence", lambda terms, w: (1.0, 0.0))
    tm = fit_table(frame, "y", model="auto", params={"max_iter": 10})
    assert isinstance(tm.estimator, StackedClassifier)
    proba = tm.predict_proba(frame.head(6))
    parts = []
    for (name, member, encoding, _), w in zip(tm.estimator.members_, tm.estimator.weights_):
        tm.schema.encoding = encoding
        parts.append(w * member.predict_proba(tm.schema.encode(frame.head(6))))
    tm.schema.encoding = "codes"
    np.testing.assert_allclose(proba[["proba_high", "proba_low"]].to_numpy(), sum(parts), rtol=1e-10)
    hdgp.save(tm, tmp_path / "c.hdgp")
    pd.testing.assert_frame_equal(hdgp.load(tmp_path / "c.hdgp").predict_proba(frame.head(6)), proba)
