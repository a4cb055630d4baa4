"""Progress of a fit and the up-front cost estimate (issue #40, item 3). No wall-clock asserts."""

import math
import warnings

import numpy as np
import pytest
import torch

from hdgp import _cost
from hdgp.exceptions import CostWarning
from hdgp.training import fit_hyperparameters


class _Quadratic(torch.nn.Module):
    """A 'model' whose objective is a shifted quadratic bowl in 5 parameters."""

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.zeros(5, dtype=torch.float64))

    def neg_log_marginal_likelihood(self, X, y):
        return ((self.theta - torch.arange(5.0, dtype=torch.float64)) ** 4).sum() * y.shape[0]


@pytest.mark.parametrize("optimizer,restarts", [("lbfgs", 0), ("lbfgs", 2), ("adam", 0)])
def test_the_progress_callback_sees_increasing_counts_and_a_finite_estimate(optimizer, restarts):
    seen = []
    X, y = torch.zeros(10, 1, dtype=torch.float64), torch.zeros(10, dtype=torch.float64)
    result = fit_hyperparameters(_Quadratic(), X, y, optimizer=optimizer, max_iter=30, n_restarts=restarts,
                                 random_state=0, callback=seen.append)
    counts = [s["evaluations"] for s in seen]
    assert counts == list(range(1, len(seen) + 1)) and len(seen) == result.n_evaluations
    budget = (60 if optimizer == "lbfgs" else 30) * (restarts + 1)
    assert all(s["budget"] == budget for s in seen)
    assert [s["start"] for s in seen] == sorted(s["start"] for s in seen) and seen[-1]["start"] == restarts
    for s in seen:
        assert math.isfinite(s["remaining_at_most"]) and s["remaining_at_most"] >= 0
        assert s["remaining_at_most"] == pytest.approx(s["seconds_per_evaluation"] * (budget - s["evaluations"]))
    assert all(b["elapsed"] >= a["elapsed"] for a, b in zip(seen, seen[1:]))


def test_the_cost_estimate_scales_as_its_flop_count():
    rate = 1e9  # a fixed rate: no timing in the test
    small = _cost.estimate_fit(1000, 8, family="rbf", rate=rate)
    big = _cost.estimate_fit(2000, 8, family="rbf", rate=rate)
    assert 4 < big.seconds / small.seconds <= 8  # between the n² kernel and the n³ factorisation
    oak = _cost.estimate_fit(1000, 8, family="oak", rate=rate)
    low = _cost.estimate_fit(1000, 8, family="oak", order=2, rate=rate)
    assert oak.seconds > low.seconds > small.seconds and oak.rbf_seconds == small.seconds
    sparse = _cost.estimate_fit(20000, 8, family="rbf", engine="sparse", n_inducing=256, rate=rate)
    exact = _cost.estimate_fit(20000, 8, family="rbf", rate=rate)
    assert sparse.seconds < exact.seconds / 100
    assert _cost.flop_rate() > 0 and _cost.flop_rate() == _cost.flop_rate()  # measured once


def test_the_cost_warning_fires_on_an_expensive_table_only():
    rate = 2e9
    wide = _cost.estimate_fit(4000, 40, family="oak", starts=2, rate=rate)  # exact OAK, order 10, 40 inputs
    message = _cost.cost_warning(wide, "OAKRegressor")
    assert message is not None
    for knob in ("max_order=2 or 3", "inference='sparse'", "n_inducing", "--model rbf-ard"):
        assert knob in message
    assert _cost.cost_warning(_cost.estimate_fit(500, 8, family="oak", rate=rate), "OAKRegressor") is None
    assert _cost.cost_warning(_cost.estimate_fit(4000, 40, family="rbf", engine="sparse", n_inducing=256,
                                                 rate=rate), "GPRegressor") is None


def test_a_fit_warns_up_front_at_the_users_line(monkeypatch):
    """Through an estimator: the warning comes before the first objective evaluation."""
    import hdgp
    import hdgp.estimators._base as base

    monkeypatch.setattr(_cost, "_RATE", [1e3])  # a machine a million times slower: every fit is expensive
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(base._COST_CHECK_MIN_ROWS, 3)), rng.normal(size=base._COST_CHECK_MIN_ROWS)
    order = []
    monkeypatch.setattr(base, "fit_hyperparameters", lambda *a, **k: order.append("fit") or (_ for _ in ()).throw(
        KeyboardInterrupt))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            hdgp.GPRegressor(max_iter=3).fit(X, y)
    costs = [w for w in caught if issubclass(w.category, CostWarning)]
    assert len(costs) == 1 and costs[0].filename == __file__ and order == ["fit"]
    assert "estimated to take about" in str(costs[0].message)
    with warnings.catch_warnings(record=True) as caught:  # at the real rate, a small fit is quiet
        warnings.simplefilter("always")
        monkeypatch.setattr(_cost, "_RATE", [1e9])
        with pytest.raises(KeyboardInterrupt):
            hdgp.GPRegressor(max_iter=3).fit(X, y)
    assert not [w for w in caught if issubclass(w.category, CostWarning)]
