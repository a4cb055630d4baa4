"""``--model auto``'s stack: stacking weights, the mixture's predictions, and the fitted table model."""

import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.stats import norm
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

import hdgp
from hdgp.workflow import fit_table
from hdgp.workflow import select as select_module
from hdgp.workflow.stacking import (StackedClassifier, StackedRegressor, mixture_evidence, stack_members,
                                    stacking_weights)

MODEL_FILES = Path(__file__).resolve().parents[1] / "data" / "modelfiles"
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


# ----------------------------------------------------------- a scikit-learn estimator: clone, params, refit
CODES = FRAME[["a", "b"]].assign(g=FRAME["g"].map({"u": 0.0, "v": 1.0, "w": 2.0}))
ONEHOT_COLUMNS = ["a", "b", "g=u", "g=v", "g=w"]


def _onehot(X):
    return pd.DataFrame(np.column_stack([X[["a", "b"]].to_numpy()] + [(X["g"] == k).to_numpy(float) for k in range(3)]),
                        columns=ONEHOT_COLUMNS, index=X.index)


def _fitted_stack():
    oak = hdgp.OAKRegressor(max_iter=20, random_state=0).fit(CODES, FRAME["y"])
    gp = hdgp.GPRegressor(max_iter=20, random_state=0).fit(_onehot(CODES), FRAME["y"])
    return StackedRegressor.from_members([("OAK", oak, "codes", ["a", "b", "g"]),
                                          ("RBF-ARD", gp, "onehot", ONEHOT_COLUMNS)],
                                         [0.3, 0.7], ["a", "b", "g"], {"g": 3})


@pytest.fixture(scope="module")
def fitted_stack():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _fitted_stack()


def test_clone_gives_the_same_mixture_unfitted(fitted_stack):
    twin = clone(fitted_stack)
    assert not hasattr(twin, "members_") and not hasattr(twin, "weights_")
    assert twin.weights == [0.3, 0.7] and twin.features == ["a", "b", "g"] and twin.levels == {"g": 3}
    for (name, est, encoding, columns), (fname, fitted, fencoding, fcolumns) in zip(twin.members,
                                                                                    fitted_stack.members_):
        assert (name, encoding, columns) == (fname, fencoding, fcolumns)
        assert type(est) is type(fitted) and est is not fitted and est.get_params() == fitted.get_params()
        assert not hasattr(est, "model_")  # unfitted
    assert "members=[('OAK', OAKRegressor(max_iter=20, random_state=0)" in repr(fitted_stack).replace("\n ", "")


def test_get_params_and_set_params_round_trip(fitted_stack):
    params = fitted_stack.get_params(deep=False)
    assert set(params) == {"members", "weights", "features", "levels", "handle_unknown"}
    other = StackedRegressor().set_params(**params)
    assert all(other.get_params(deep=False)[k] is v for k, v in params.items())
    deep = fitted_stack.get_params()
    assert deep["OAK"] is fitted_stack.members[0][1] and deep["RBF-ARD__max_iter"] == 20
    twin = clone(fitted_stack).set_params(**{"OAK__max_iter": 7, "weights": [0.5, 0.5]})
    assert twin.members[0][1].max_iter == 7 and twin.weights == [0.5, 0.5]
    assert fitted_stack.members[0][1].max_iter == 20 and fitted_stack.members_[0][1].max_iter == 20
    gam = hdgp.GPRegressor(kernel="additive")
    twin.set_params(**{"RBF-ARD": gam})
    assert twin.members[1][1] is gam and [m[0] for m in twin.members] == ["OAK", "RBF-ARD"]
    with pytest.raises(ValueError, match="weights must be 2 non-negative numbers"):
        twin.set_params(weights=[1.0]).fit(CODES, FRAME["y"])
    with pytest.raises(ValueError, match="needs members"):
        StackedRegressor().fit(CODES, FRAME["y"])


def test_clone_then_fit_predicts_the_mixture_of_the_refitted_members(fitted_stack):
    X, y = CODES.iloc[:50], FRAME["y"].iloc[:50]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        twin = clone(fitted_stack).fit(X, y)
        oak = clone(fitted_stack.members[0][1]).fit(X, y)
        gp = clone(fitted_stack.members[1][1]).fit(_onehot(X), y)
    assert twin.members_[0][1] is not twin.members[0][1] and not hasattr(twin.members[0][1], "model_")
    np.testing.assert_array_equal(twin.weights_, [0.3, 0.7])
    (m1, s1), (m2, s2) = oak.predict(CODES, return_std=True), gp.predict(_onehot(CODES), return_std=True)
    mean, std = twin.predict(CODES, return_std=True)
    np.testing.assert_allclose(mean, 0.3 * m1 + 0.7 * m2, rtol=1e-10)
    np.testing.assert_allclose(std ** 2, 0.3 * (s1 ** 2 + m1 ** 2) + 0.7 * (s2 ** 2 + m2 ** 2) - mean ** 2,
                               rtol=1e-8)
    assert not np.allclose(mean, fitted_stack.predict(CODES))  # refitted on fewer rows: another mixture
    with pytest.raises(ValueError, match="takes 3 feature columns"):
        twin.set_params(weights=[0.5, 0.5]).fit(X[["a", "b"]], y)
    np.testing.assert_array_equal(twin.predict(CODES), mean)  # a failed refit leaves the fitted mixture
    np.testing.assert_array_equal(twin.weights_, [0.3, 0.7])


def test_a_classifier_stack_clones_and_refits():
    yc = (FRAME["y"] > FRAME["y"].median()).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = hdgp.GPClassifier(max_iter=10, random_state=0).fit(CODES, yc)
        b = hdgp.GPClassifier(max_iter=10, random_state=1).fit(_onehot(CODES), yc)
        stack = StackedClassifier.from_members([("A", a, "codes", ["a", "b", "g"]), ("B", b, "onehot", ONEHOT_COLUMNS)],
                                               [0.6, 0.4], ["a", "b", "g"], {"g": 3}, n_classes=2)
        twin = clone(stack)
        assert twin.n_classes == 2 and not hasattr(twin, "classes_")
        twin.fit(CODES, yc)
    np.testing.assert_array_equal(twin.classes_, [0, 1])
    np.testing.assert_allclose(twin.predict_proba(CODES), stack.predict_proba(CODES), rtol=1e-10)  # same data


def test_a_saved_stack_loads_and_predicts_the_same(fitted_stack, tmp_path):
    hdgp.save(fitted_stack, tmp_path / "s.hdgp")
    loaded = hdgp.load(tmp_path / "s.hdgp")
    for a, b in zip(loaded.predict(CODES, return_std=True), fitted_stack.predict(CODES, return_std=True)):
        np.testing.assert_array_equal(a, b)
    assert repr(loaded) == repr(fitted_stack) and loaded.weights == [0.3, 0.7]
    assert [m[0] for m in loaded.members] == ["OAK", "RBF-ARD"] and not hasattr(loaded.members[0][1], "model_")


def test_a_stack_file_written_before_the_constructor_parameters_still_loads():
    """Format 2.6 files from before kept the members and weights as fitted state only: they predict as
    when written (make_stack_2_6.py), and get their constructor parameters from the fitted mixture, so
    that ``clone`` gives the same mixture unfitted."""
    loaded = hdgp.load(MODEL_FILES / "stack_2_6.hdgp")
    X = pd.DataFrame({"a": [-0.5, 0.0, 0.7], "g": [0.0, 1.0, 2.0]})
    mean, std = loaded.predict(X, return_std=True)
    np.testing.assert_allclose(mean, [-0.8294765196416463, 1.0150595466586856, 0.9710854970793368], rtol=0, atol=1e-12)
    np.testing.assert_allclose(std, [0.03945943159205951, 0.03985224217847356, 0.04039338225229757], rtol=0, atol=1e-12)
    assert loaded.names_ == ["OAK", "RBF-ARD"] and [m[0] for m in loaded.members] == ["OAK", "RBF-ARD"]
    assert not hasattr(loaded.members[0][1], "model_") and loaded.weights == pytest.approx(list(loaded.weights_))
    template = clone(loaded)
    assert [m[0] for m in template.members] == ["OAK", "RBF-ARD"] and template.features == loaded.features


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
