"""``--model auto`` by successive halving: rung sizes, the noise-aware screen, nested subsets."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from hdgp.io import TableSchema
from hdgp.workflow import select as select_module
from hdgp.workflow import select_model


def test_rung_sizes_grow_by_three_up_to_every_fitting_row():
    assert select_module.rung_sizes(300) == [300]  # below 3 × 200: one rung, as a plain comparison
    assert select_module.rung_sizes(640) == [214, 640]
    sizes = select_module.rung_sizes(12_800)
    assert sizes[-1] == 12_800 and sizes[0] >= select_module.MIN_RUNG_ROWS
    assert all(b / a == pytest.approx(3, rel=0.01) for a, b in zip(sizes, sizes[1:]))


def test_a_candidate_within_noise_is_kept_and_a_clearly_worse_one_stops():
    rng = np.random.default_rng(0)
    base = rng.normal(size=400)
    scores = {"leader": base, "close": base - 0.01 + 0.3 * rng.normal(size=400),
              "far": base - 1.0 + 0.3 * rng.normal(size=400), "farther": base - 2.0}
    kept = select_module.survivors(scores)
    assert kept[0] == "leader" and "close" in kept  # the better half
    assert "far" not in kept and "farther" not in kept
    # the same gap with noise as large as the gap: within noise, so kept outside the better half
    e = rng.normal(size=(3, 400))
    e -= e.mean(axis=1, keepdims=True)  # mean gaps exactly 0.01 and 0.05, standard errors 0.005 and 0.15
    noisy = {"leader": base, "a": base - 0.01 + 0.1 * e[0], "b": base - 0.05 + 3.0 * e[1], "c": base - 0.05 + 3.0 * e[2]}
    assert set(select_module.survivors(noisy)) == {"leader", "a", "b", "c"}


def test_nested_subsets_keep_class_shares_and_every_level():
    rng = np.random.default_rng(1)
    codes = (rng.random(1000) < 0.1).astype(int)
    frame = pd.DataFrame({"x": rng.normal(size=1000), "g": ["common"] * 999 + ["rare"]})
    schema, X, _ = TableSchema.infer(frame.assign(y=rng.normal(size=1000)), "y")
    order = select_module._nested_order(schema, X, codes, np.arange(1000), 0)
    assert sorted(order) == list(range(1000))
    for size in (50, 200, 600):
        assert codes[order[:size]].mean() == pytest.approx(codes.mean(), abs=0.02)
    sub = select_module._with_every_level(schema, X, order, 100)
    assert len(sub) == 101 and 999 in sub and set(order[:100]) <= set(sub)


def test_halving_stops_a_clearly_worse_candidate_after_the_first_rung():
    rng = np.random.default_rng(0)
    n = 900  # 720 fitting rows: rungs of 240 and 720
    x = rng.uniform(-2, 2, size=(n, 2))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": np.sin(3 * x[:, 0]) * np.cos(2 * x[:, 1])
                          + 0.05 * rng.normal(size=n)})
    schema, X, y = TableSchema.infer(frame, "y")
    messages = []
    name, rows = select_model(X, y, schema, params={"max_iter": 30}, candidates=["Linear", "RBF-ARD", "GAM"],
                              progress=messages.append)
    n_fit = len(y) - int(np.ceil(0.2 * len(y)))
    sizes = select_module.rung_sizes(n_fit)
    assert len(sizes) == 2
    by = {r["model"]: r for r in rows}
    assert name == "RBF-ARD" and by["RBF-ARD"]["selected"]
    assert by["Linear"]["rung_rows"] == sizes[0]  # stopped at the first rung
    assert any("stopped Linear" in m for m in messages)
    alone = any("RBF-ARD is the only candidate left" in m for m in messages)
    assert by["RBF-ARD"]["rung_rows"] == (sizes[0] if alone else n_fit)


def test_small_tables_are_validated_by_folds_that_score_every_training_row_once():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.normal(size=100), "y": rng.normal(size=100)})
    schema, X, y = TableSchema.infer(frame, "y")
    fit_idx, val_idx = np.arange(20, 100), np.arange(20)
    folds = [(fit_idx, val_idx)] + select_module._more_folds(schema, X, 100, fit_idx, None, 0)
    assert len(folds) == 5
    validated = np.concatenate([v for _, v in folds])
    assert sorted(validated) == list(range(100))
    assert all(len(np.intersect1d(f, v)) == 0 and len(f) + len(v) == 100 for f, v in folds)


def test_a_rung_fits_with_the_engine_of_the_full_fit():
    import hdgp

    for name, engine in (("RBF-ARD", "sparse"), ("DPA-GP-ARD", "ski")):
        est = hdgp.preset(name)
        select_module._same_engine(est, {}, 12_800)  # a 1,422-row rung of a 16,000-row table
        assert est.get_params()["inference"] == engine
        small = hdgp.preset(name)
        select_module._same_engine(small, {}, 800)
        assert small.get_params()["inference"] == "exact"
        chosen = hdgp.preset(name).set_params(inference="exact")  # the user's -p inference=... stays
        select_module._same_engine(chosen, {"inference": "exact"}, 12_800)
        assert chosen.get_params()["inference"] == "exact"


def test_the_refit_above_the_cross_validated_sizes_polishes_the_validated_fit_only():
    import hdgp
    import importlib

    fitting = importlib.import_module("hdgp.workflow.fitting")

    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(700, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=700)
    winner = hdgp.preset("RBF-ARD").set_params(random_state=0).fit(X[:200], y[:200])
    assert not fitting._warm_refit_only(winner, select_module.CV_MAX_ROWS)  # small: fresh and warm starts
    assert fitting._warm_refit_only(winner, select_module.CV_MAX_ROWS + 1)
    start = winner.kernel_.lengthscale.detach().clone()
    one_step = copy.deepcopy(winner).set_params(warm_start=True, max_iter=1)
    est, seconds, _ = fitting._refit_validated(winner, X, y, False, None)
    assert est is winner and est.start_ == "warm" and est.X_train_.shape[0] == 700 and seconds > 0
    assert est.n_iter_ <= 2 * fitting.REFIT_MAX_ITER  # the polish cap (L-BFGS: 2 evaluations per iteration)
    assert est.get_params()["max_iter"] is None and est.get_params()["warm_start"] is False  # as the preset's
    assert not torch.equal(est.kernel_.lengthscale, start)  # the hyper-parameters moved
    # the polish ends below one L-BFGS step from the validated hyper-parameters on all rows
    with pytest.warns(Warning, match="max_iter=1"):
        one_step.fit(X, y)
    assert est.fit_result_.loss < one_step.fit_result_.loss
    # a max_iter of the user's (set on the candidates by make_estimator) is kept
    mine = hdgp.preset("RBF-ARD").set_params(random_state=0, max_iter=2)
    with pytest.warns(Warning, match="max_iter=2"):
        mine.fit(X[:200], y[:200])
        capped, _, _ = fitting._refit_validated(mine, X, y, False, {"max_iter": 2})
    assert capped.n_iter_ <= 4 and capped.get_params()["max_iter"] == 2


def test_a_refit_that_changes_engine_starts_afresh_with_its_full_budget(monkeypatch):
    import importlib

    import hdgp

    fitting = importlib.import_module("hdgp.workflow.fitting")
    base = importlib.import_module("hdgp.estimators._base")
    rng = np.random.default_rng(6)
    X = rng.uniform(-2, 2, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=300)
    winner = hdgp.preset("RBF-ARD").set_params(random_state=0, n_inducing=20).fit(X[:150], y[:150])
    assert winner.inference_ == "exact"
    monkeypatch.setattr(base, "AUTO_EXACT_MAX_N", 200)  # all 300 rows: the sparse engine
    monkeypatch.setattr(fitting, "REFIT_MAX_ITER", 1)
    est, _, caught = fitting._refit_validated(winner, X, y, False, None)
    assert est.inference_ == "sparse" and est.start_ != "warm"
    assert not any("max_iter=1" in w for w in caught)  # not held to the polish cap
