"""OAKRegressor's fit policy for speed (issue #40): the subset start of larger exact fits, the order
decision from the per-order Sobol sums, and the cost estimate of flow="choose"."""

import warnings

import numpy as np
import pytest

from hdgp import explain
from hdgp.estimators import _base
from hdgp.estimators import oak as oak_module
from hdgp.estimators.oak import OAKRegressor


def additive_data(n, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.3 * X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


def test_subset_start_polishes_to_the_optimum_of_the_full_fit(monkeypatch):
    """Above SUBSET_FIT_MIN_ROWS rows an exact fit is trained on a random subset of the rows first and
    polished on all rows: it must end at the optimum the fit on all rows reaches from the generic start
    (the same MAP objective per row to the polish's tolerance), in fewer evaluations on all rows."""
    X, y = additive_data(240)
    monkeypatch.setattr(oak_module, "SUBSET_FIT_MIN_ROWS", 10_000)
    full = OAKRegressor(max_order=2, random_state=0, inference="exact").fit(X, y)
    assert full.start_ == "generic" and full.init_result_ is None
    monkeypatch.setattr(oak_module, "SUBSET_FIT_MIN_ROWS", 200)
    monkeypatch.setattr(oak_module, "SUBSET_FIT_ROWS", 120)
    monkeypatch.setattr(oak_module, "SUBSET_FIT_FRACTION", 0.5)
    sub = OAKRegressor(max_order=2, random_state=0, inference="exact").fit(X, y)
    assert sub.start_ == "subset" and sub.init_result_.n_evaluations > 0
    assert sub.fit_result_.loss == pytest.approx(full.fit_result_.loss, abs=1e-3)
    assert sub.n_iter_ < full.n_iter_
    np.testing.assert_allclose(sub.predict(X[:20]), full.predict(X[:20]), atol=0.05 * np.std(y))
    # deterministic for a fixed random_state (the subset is drawn from the fit's seed)
    again = OAKRegressor(max_order=2, random_state=0, inference="exact").fit(X, y)
    assert again.fit_result_.loss == sub.fit_result_.loss


def test_small_and_sparse_fits_keep_their_start(monkeypatch):
    X, y = additive_data(150)
    est = OAKRegressor(max_order=2, random_state=0, max_iter=5).fit(X, y)
    assert est.start_ == "generic"  # 150 <= SUBSET_FIT_MIN_ROWS
    monkeypatch.setattr(oak_module, "SUBSET_FIT_MIN_ROWS", 50)
    monkeypatch.setattr(_base, "SUBSET_INIT_ROWS", 60)
    sparse = OAKRegressor(max_order=2, random_state=0, max_iter=5, inference="sparse", n_inducing=20).fit(X, y)
    # the sparse engine's own policy: subset and generic starts, the better kept
    assert sparse.inference_ == "sparse" and sparse.start_ in ("subset", "generic")


def test_order_decision_reads_the_per_order_sums_of_compute_sobol():
    """The top order's mass that decides a raise (without enumerating terms) is compute_sobol's."""
    X, y = additive_data(120, d=4)
    est = OAKRegressor(max_order=3, random_state=0, max_iter=30).fit(X, y)
    full = explain.compute_sobol(est.kernel_, est.posterior_.X, est.posterior_.alpha)
    assert est._top_order_mass() == pytest.approx(float(full.by_order[-1]), rel=1e-12, abs=1e-15)
    assert est._top_order_mass() == pytest.approx(float(est.sobol_order_[-1]), rel=1e-12, abs=1e-15)


def _starts_estimated(monkeypatch, X, y, **params):
    seen = []
    real = _base.estimate_fit

    def spy(*args, **kwargs):
        seen.append(kwargs["starts"])
        return real(*args, **kwargs)

    monkeypatch.setattr(_base, "estimate_fit", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OAKRegressor(max_order=1, random_state=0, max_iter=3, **params).fit(X, y)
    return seen


def test_cost_estimate_counts_the_second_fit_of_flow_choose(monkeypatch):
    """flow="choose" on <= FLOW_CHOICE_MAX_ROWS rows with a light-tailed feature fits twice: the one
    estimate (made in the first fit) counts both fits; the second fit makes none of its own."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(320, 2))  # uniform: light-tailed, so "choose" also fits flow="auto"
    y = X[:, 0] + 0.1 * rng.normal(size=320)
    assert _starts_estimated(monkeypatch, X, y) == [2]
    assert _starts_estimated(monkeypatch, X, y, flow=True) == [1]
    heavy = np.c_[rng.standard_t(2, size=320), rng.standard_t(2, size=320)]  # heavy tails: one fit
    assert _starts_estimated(monkeypatch, heavy, y) == [1]


def test_large_sparse_fit_runs_in_two_stages(monkeypatch):
    """Above SPARSE_STAGE_ROWS rows a sparse fit runs the whole policy on that many random rows, then one
    warm fit on all rows at the order chosen there: it must keep that order, end at least as high on
    the full data's bound as the subset's parameters do there, restore the user's parameters and be
    deterministic; with fewer rows (or exact inference) it is the one-stage fit."""
    X, y = additive_data(400, d=4)
    monkeypatch.setattr(oak_module, "SPARSE_STAGE_ROWS", 150)
    monkeypatch.setattr(oak_module, "SPARSE_STAGE_TWO_MAX_ITER", 15)
    seen = []
    fit = _base.BaseGPRegressor.fit

    def spy(self, X, y):
        seen.append((len(X), self.warm_start, self.max_iter, self.max_order_))
        return fit(self, X, y)

    monkeypatch.setattr(_base.BaseGPRegressor, "fit", spy)
    params = dict(inference="sparse", n_inducing=30, random_state=0, flow=True)  # one flow: one two-stage fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the capped second stage may stop at its iteration budget
        est = OAKRegressor(**params).fit(X, y)
        stage_one_rows = [rows for rows, *_ in seen[:-1]]
        assert set(stage_one_rows) == {150} and seen[-1] == (400, True, 15, est.max_order_)
        assert est.warm_start is False and est.max_iter is None and est.max_order is None
        assert est.X_train_.shape[0] == 400 and est.n_iter_ <= 2 * 15  # objective evaluations: 2 per iteration at most
        again = OAKRegressor(**params).fit(X, y)
        assert again.fit_result_.loss == est.fit_result_.loss
        seen.clear()
        OAKRegressor(**{**params, "inference": "exact"}).fit(X[:200], y[:200])
        assert all(rows == 200 for rows, *_ in seen)
    rmse = np.sqrt(np.mean((est.predict(X) - y) ** 2))
    assert rmse < 0.5 * np.std(y)
