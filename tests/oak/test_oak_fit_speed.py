"""OAKRegressor's fit policy for speed (issue #40): the two stages of larger fits, the order decision from
the per-order Sobol sums, and the cost estimates of flow="choose" and of a staged fit."""

import warnings

import numpy as np
import pytest

from hdgp import explain
from hdgp.estimators import _base
from hdgp.estimators import _oak_fit_policy as policy
from hdgp.estimators.oak import OAKRegressor


def additive_data(n, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.3 * X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


def test_subset_start_polishes_to_the_optimum_of_the_full_fit(monkeypatch):
    """Above STAGE_MIN_ROWS rows an exact fit is trained on a random subset of the rows first (stage one)
    and polished on all rows (stage two): it must end at the optimum the fit on all rows reaches from the
    generic start (the same MAP objective per row to the polish's tolerance), in fewer evaluations on all
    rows."""
    X, y = additive_data(240)
    monkeypatch.setattr(policy, "STAGE_MIN_ROWS", 10_000)
    full = OAKRegressor(max_order=2, random_state=0, inference="exact").fit(X, y)
    assert full.start_ == "generic" and full.init_result_ is None
    monkeypatch.setattr(policy, "STAGE_MIN_ROWS", 200)
    monkeypatch.setattr(policy, "SUBSET_FIT_ROWS", 120)
    monkeypatch.setattr(policy, "SUBSET_FIT_FRACTION", 0.5)
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
    assert est.start_ == "generic"  # 150 <= STAGE_MIN_ROWS
    monkeypatch.setattr(_base, "SUBSET_INIT_ROWS", 60)
    sparse = OAKRegressor(max_order=2, random_state=0, max_iter=5, inference="sparse", n_inducing=20).fit(X, y)
    # one stage: the sparse engine's own policy, subset and generic starts, the better kept
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


def _stages(monkeypatch, X, y, **params):
    """``(rows, inference, warm start, max_iter, max_order_)`` of every fit (BaseGPRegressor._fit) of an OAK fit:
    its stage's, where it sets them, else the constructor parameter's; and the parameters never change."""
    seen = []
    fit = _base.BaseGPRegressor._fit

    def spy(self, X, y, stage=None):
        stage = self._stage if stage is None else stage
        seen.append((len(X), *(getattr(self, param) if getattr(stage, field) is None else getattr(stage, field)
                               for field, param in (("inference", "inference"), ("warm", "warm_start"),
                                                    ("max_iter", "max_iter"))), self.max_order_))
        assert self.get_params() == before
        return fit(self, X, y, stage)

    monkeypatch.setattr(_base.BaseGPRegressor, "_fit", spy)
    est = OAKRegressor(**params)
    before = est.get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    monkeypatch.setattr(_base.BaseGPRegressor, "_fit", fit)
    assert est.get_params() == before and "_stage" not in vars(est)
    return est, seen


@pytest.mark.parametrize("inference", ["sparse", "auto"])
def test_large_fit_runs_in_two_stages(monkeypatch, inference):
    """Above STAGE_MIN_ROWS rows the whole policy (starts, order choice and raise) runs exact on at most
    STAGE_ROWS random rows, then one warm fit on all rows with the inference asked for, at the order chosen
    there and at most STAGE_TWO_MAX_ITER iterations: it must keep that order, restore the user's parameters,
    report the stages (start_ "subset", stage one in init_result_) and be deterministic; with fewer rows it
    is the one-stage fit."""
    X, y = additive_data(400, d=4)
    for name, value in (("STAGE_MIN_ROWS", 150), ("STAGE_ROWS", 150), ("SUBSET_FIT_ROWS", 100),
                        ("STAGE_TWO_MAX_ITER", 15), ("SPARSE_STAGE_TWO_MAX_ITER", 15)):
        monkeypatch.setattr(policy, name, value)
    params = dict(inference=inference, n_inducing=30, random_state=0, flow=True)  # one flow: one two-stage fit
    est, seen = _stages(monkeypatch, X, y, **params)
    assert {(rows, engine) for rows, engine, *_ in seen[:-1]} == {(150, "exact")}
    assert seen[-1] == (400, inference, True, 15, est.max_order_)
    assert est.inference_ == ("sparse" if inference == "sparse" else "exact")
    assert est.warm_start is False and est.max_iter is None and est.max_order is None and est.inference == inference
    assert est.X_train_.shape[0] == 400 and est.n_iter_ <= 2 * 15  # objective evaluations: 2 per iteration at most
    assert est.start_ == "subset" and est.init_result_.n_evaluations > 0 and list(est.start_losses_) == ["authors"]
    again, _ = _stages(monkeypatch, X, y, **params)
    assert again.fit_result_.loss == est.fit_result_.loss
    _, seen = _stages(monkeypatch, X[:150], y[:150], **params)
    assert [rows for rows, *_ in seen] == [150] and seen[0][1] == inference
    rmse = np.sqrt(np.mean((est.predict(X) - y) ** 2))
    assert rmse < 0.5 * np.std(y)


def test_user_max_iter_caps_stage_two(monkeypatch):
    X, y = additive_data(300, d=3)
    monkeypatch.setattr(policy, "STAGE_MIN_ROWS", 150)
    monkeypatch.setattr(policy, "SUBSET_FIT_ROWS", 100)
    est, seen = _stages(monkeypatch, X, y, max_order=2, max_iter=4, random_state=0)
    assert seen[-1][:4] == (300, "auto", True, 4) and est.max_iter == 4


@pytest.mark.parametrize("masses, raised", [
    ([0.983, 0.0143, 0.00247], True),  # concrete's fitted masses
    ([0.9, 1e-6, 0.0999], True),
    ([0.9995, 0.0, 0.0005], False),  # the top order itself holds less than ORDER_RAISE_MASS
    ([0.999, 0.0, policy.ORDER_RAISE_MASS], False),
    ([0.9, 0.1, np.nan], True),  # a failed Sobol sum: refitted
])
def test_order_raise_reads_the_top_order_mass(monkeypatch, masses, raised):
    """``max_order=None`` raises the order when the top order's mass exceeds ORDER_RAISE_MASS, unless every
    order is fitted already."""
    X, y = additive_data(80, d=6)
    est = OAKRegressor(max_order=3, random_state=0, max_iter=3).fit(X, y)
    monkeypatch.setattr(OAKRegressor, "_order_masses", lambda self: np.asarray(masses))
    est.max_order = None
    assert est._raise_order() is raised
    est.max_order_ = 6  # every order already
    assert est._raise_order() is False


def test_staged_cost_estimate_counts_both_stages(monkeypatch):
    """The up-front estimate of a staged fit is made once, in stage one (which knows the starts), for all
    rows: stage one's fits on the subset plus stage two's capped evaluations on every row."""
    seen = []
    monkeypatch.setattr(policy, "estimate_fit", lambda n, d, **kw: seen.append((n, kw["engine"])) or
                        policy.FitCost("oak", n, d, kw["engine"], 1.0, 1.0))
    monkeypatch.setattr(policy, "STAGE_MIN_ROWS", 150)
    monkeypatch.setattr(policy, "SUBSET_FIT_ROWS", 100)
    X, y = additive_data(320, d=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OAKRegressor(max_order=2, random_state=0, max_iter=3, inference="sparse", n_inducing=20, flow=True).fit(X, y)
    assert seen == [(192, "exact"), (320, "sparse")]
