"""ProjectedAdditiveGPRegressor: presets of Table 2, -ARD behaviour, SKI path, bad input."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone

import hdgp
from hdgp.exceptions import ConvergenceWarning
from hdgp.estimators.projected import ProjectedAdditiveGPRegressor
from hdgp.kernels.projected_kernel import ProjectedAdditiveKernel

TABLE2 = ["Single-RP", "RPA-GP-1", "RPA-GP-2", "RPA-GP-3", "DPA-GP", "RPA-GP-ARD", "DPA-GP-ARD", "DPA-GP-ARD-SKI"]


def _data(n=120, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0] + X[:, 1]) + 0.5 * X[:, 0] * X[:, 1] + 0.05 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("name", TABLE2)
def test_every_table2_preset_builds_the_papers_configuration(name):
    est = hdgp.preset(name, random_state=0)
    assert isinstance(est, ProjectedAdditiveGPRegressor)
    degrees = est._degrees()
    expected = {"Single-RP": 1, "RPA-GP-2": 12, "RPA-GP-3": 14}.get(name, 20)
    assert len(degrees) == expected
    assert est.ard == name.endswith(("ARD", "ARD-SKI"))
    assert est.directions == ("diverse" if name.startswith("DPA") else "random")
    assert (est.inference == "ski") == name.endswith("SKI")
    clone(est)  # scikit-learn parameters round-trip


def test_fit_predict_and_fitted_attributes():
    X, y = _data()
    est = ProjectedAdditiveGPRegressor(8, random_state=0).fit(X[:100], y[:100])
    mean, std = est.predict(X[100:], return_std=True)
    assert mean.shape == std.shape == (20,) and np.all(std > 0)
    assert np.sqrt(np.mean((mean - y[100:]) ** 2)) < 0.5 * np.std(y)
    assert est.projections_.shape == (8, 4) and est.degrees_ == (1,) * 8
    assert isinstance(est.kernel_.base_kernel, ProjectedAdditiveKernel)
    assert 0 < est.min_pairwise_angle_ <= np.pi / 2
    again = ProjectedAdditiveGPRegressor(8, random_state=0).fit(X[:100], y[:100])
    assert np.allclose(again.predict(X[100:]), mean)  # seeded directions and training


def test_ard_prunes_irrelevant_features():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 6))
    y = np.sin(X[:, 0]) + np.cos(X[:, 1]) + 0.05 * rng.normal(size=150)  # features 2..5 irrelevant
    est = ProjectedAdditiveGPRegressor(10, ard=True, random_state=0).fit(X, y)
    ell = est.kernel_.base_kernel.input_lengthscale.numpy()
    assert ell[2:].min() > 3 * ell[:2].max()


def test_mixed_degrees_and_ski_agree_with_exact_on_a_small_problem():
    X, y = _data(n=190)
    Xtr, ytr, Xte, yte = X[:150], y[:150], X[150:], y[150:]
    with warnings.catch_warnings():  # same short L-BFGS budget for both; SKI is slow at tiny n
        warnings.simplefilter("ignore", ConvergenceWarning)
        exact = ProjectedAdditiveGPRegressor(8, random_state=0, inference="exact", max_iter=25).fit(Xtr, ytr)
        ski = ProjectedAdditiveGPRegressor(8, random_state=0, inference="ski", grid_size=128,
                                           max_iter=25).fit(Xtr, ytr)
    assert ski.inference_ == "ski" and exact.inference_ == "exact"
    rmse = lambda e: np.sqrt(np.mean((e.predict(Xte) - yte) ** 2))  # noqa: E731
    assert abs(rmse(ski) - rmse(exact)) < 0.1 * np.std(y)
    far = np.full((1, 4), 1e3)
    m, s = ski.predict(far, return_std=True)
    assert np.isfinite(m).all() and np.isfinite(s).all()
    mixed = ProjectedAdditiveGPRegressor(None, degree=[(4, 1), (4, 2), (2, 3)], directions="random",
                                         ard=False, random_state=0).fit(Xtr, ytr)
    assert mixed.degrees_ == (1,) * 4 + (2,) * 4 + (3,) * 2
    assert rmse(mixed) < 0.5 * np.std(y), rmse(mixed)


def test_several_direction_sets_keep_the_best_marginal_likelihood():
    X, y = _data(n=80)
    one = ProjectedAdditiveGPRegressor(4, ard=False, random_state=0).fit(X, y)
    best = ProjectedAdditiveGPRegressor(4, ard=False, n_direction_sets=3, random_state=0).fit(X, y)
    losses = best.direction_set_losses_
    assert len(losses) == 3 and len(set(np.round(losses, 8))) == 3  # three different direction sets
    assert losses[0] == pytest.approx(one.fit_result_.loss)  # the first set is the single fit's
    # evidence comparison: the kept set is the one with the best objective of those tried, and the kept
    # model's own marginal likelihood (evaluated afresh on the training data) is that objective
    assert best.fit_result_.loss == min(losses)
    assert -best.log_marginal_likelihood_value_ / len(y) == pytest.approx(min(losses), rel=1e-6)
    assert best.log_marginal_likelihood_value_ >= one.log_marginal_likelihood_value_ - 1e-9
    # the fitted attributes describe the kept set (another set than the first one iff it won)
    assert torch.equal(best.projections_, best.kernel_.base_kernel.projections)
    assert torch.equal(best.projections_, one.projections_) == (int(np.argmin(losses)) == 0)
    assert best.n_iter_ > one.n_iter_


def test_ski_options_reach_the_engine():
    X, y = _data(n=60)
    options = {"num_probes": 4, "preconditioner_rank": 0, "max_cg_iterations": 300, "cg_tolerance": 1e-4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = ProjectedAdditiveGPRegressor(3, inference="ski", grid_size=64, ski_options=options, max_iter=3,
                                           random_state=0).fit(X, y)
    assert {k: getattr(est.model_, k) for k in options} == options


def test_single_feature_works():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(40, 1))
    est = ProjectedAdditiveGPRegressor(3, random_state=0).fit(X, np.sin(2 * X[:, 0]))
    assert np.abs(est.predict(X) - np.sin(2 * X[:, 0])).max() < 0.1


def test_degree_above_the_number_of_features_warns_and_fits():
    # the paper's RPA-GP-3 has degree-6 projections on its 4- and 5-feature sets
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    with pytest.warns(hdgp.exceptions.HDGPWarning, match="degree 5 exceeds the number of features"):
        est = ProjectedAdditiveGPRegressor(2, degree=5, directions="random", ard=False, random_state=0).fit(X, y)
    assert est.projections_.shape == (10, 3) and est.degrees_ == (5, 5)
    assert np.sqrt(np.mean((est.predict(X) - y) ** 2)) < 0.2 * y.std()


def test_n_projections_none_chooses_the_number_of_directions_from_the_rows():
    """``n_projections=None`` with an integer degree: MORE_DIRECTIONS directions for n within
    MORE_DIRECTIONS_ROWS, DEFAULT_DIRECTIONS outside; the fitted J is ``n_projections_``; the parameter
    itself is not changed by fit (scikit-learn's contract)."""
    from hdgp.estimators.projected import DEFAULT_DIRECTIONS, MORE_DIRECTIONS, MORE_DIRECTIONS_ROWS

    low, high = MORE_DIRECTIONS_ROWS
    assert MORE_DIRECTIONS > DEFAULT_DIRECTIONS
    est = ProjectedAdditiveGPRegressor(None, random_state=0)
    assert [len(est._degrees(n)) for n in (low - 1, low, high, high + 1)] == \
        [DEFAULT_DIRECTIONS, MORE_DIRECTIONS, MORE_DIRECTIONS, DEFAULT_DIRECTIONS]
    X, y = _data(n=low)
    est.set_params(max_iter=3).fit(X, y)
    assert est.n_projections is None and est.n_projections_ == MORE_DIRECTIONS
    assert est.projections_.shape == (MORE_DIRECTIONS, 4)
    assert est.fit(X[:40], y[:40]).n_projections_ == DEFAULT_DIRECTIONS
    assert ProjectedAdditiveGPRegressor(7, max_iter=3, random_state=0).fit(X, y).n_projections_ == 7
    with pytest.raises(ValueError, match="n_projections"):  # a list of groups fixes J itself
        ProjectedAdditiveGPRegressor(5, degree=[(2, 1), (2, 2)], directions="random").fit(X, y)


def test_ard_accepts_numpy_bools():
    """A parameter grid built from a NumPy array hands ``ard`` over as ``np.bool_``."""
    X, y = _data(n=20)
    est = ProjectedAdditiveGPRegressor(3, ard=np.True_, max_iter=3, random_state=0).fit(X, y)
    assert est.kernel_.base_kernel.ard
    est = ProjectedAdditiveGPRegressor(3, ard=np.False_, max_iter=3, random_state=0).fit(X, y)
    assert not est.kernel_.base_kernel.ard


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n_projections=0), "n_projections"),
        (dict(directions="sobol"), "directions"),
        (dict(degree=2), "diverse"),
        (dict(degree=2, directions="random", inference="ski"), "ski"),
        (dict(grid_size=4), "grid_size"),
        (dict(n_direction_sets=0), "n_direction_sets"),
        (dict(ski_options="fast"), "ski_options must be a dict"),
        (dict(ski_options={"max_cg": 5}), r"Unknown ski_options \['max_cg'\]"),
        (dict(ski_options={"num_probes": 0}, inference="ski"), "num_probes must be an integer >= 1"),
        (dict(ski_options={"num_probes": True}, inference="ski"), "num_probes must be an integer >= 1"),
        (dict(ski_options={"max_cg_iterations": 1}, inference="ski"), "max_cg_iterations must be an integer >= 20"),
        (dict(ski_options={"probe_seed": 2.7}, inference="ski"), "probe_seed must be an integer >= 0"),
        (dict(ski_options={"cg_tolerance": 2.0}, inference="ski"), "cg_tolerance"),
        (dict(ski_options={"preconditioner_rank": -1}, inference="ski"), "preconditioner_rank"),
    ],
)
def test_bad_parameters_raise_clear_errors(params, message):
    X, y = _data(n=20)
    with pytest.raises(ValueError, match=message):
        ProjectedAdditiveGPRegressor(**params).fit(X, y)


def test_auto_inference_switches_to_ski_above_the_projected_exact_limit():
    from hdgp.estimators import projected

    limit = projected.PROJECTED_EXACT_MAX_N
    est = hdgp.preset("DPA-GP-ARD")
    assert est._resolve_inference(limit) == "exact" and est._resolve_inference(limit + 1) == "ski"
    rpa2 = hdgp.preset("RPA-GP-2")  # 2-D projections: no SKI, exact up to the common limit, then sparse
    assert rpa2._resolve_inference(limit + 1) == "exact"
    assert rpa2._resolve_inference(10**5) == "sparse"
    assert hdgp.preset("DPA-GP-ARD").set_params(inference="exact")._resolve_inference(limit + 1) == "exact"


def test_large_fits_start_from_an_exact_subset_fit_and_reach_the_generic_optimum(monkeypatch):
    from hdgp.estimators import projected

    X, y = _data(n=400, d=3, seed=4)
    generic = ProjectedAdditiveGPRegressor(6, random_state=0, inference="exact").fit(X, y)
    assert generic.start_ == "generic" and generic.init_result_ is None
    monkeypatch.setattr(projected, "PROJECTED_EXACT_MAX_N", 300)
    monkeypatch.setattr(projected, "SUBSET_START_ROWS", 120)
    est = ProjectedAdditiveGPRegressor(6, random_state=0, inference="exact").fit(X, y)
    assert est.start_ == "subset" and est.init_result_ is not None
    assert est.fit_result_.loss == pytest.approx(generic.fit_result_.loss, abs=2e-3)
    assert np.allclose(est.predict(X[:50]), generic.predict(X[:50]), atol=0.05 * np.std(y))
    again = ProjectedAdditiveGPRegressor(6, random_state=0, inference="exact").fit(X, y)
    assert again.fit_result_.loss == est.fit_result_.loss  # seeded subset: deterministic
    warm = clone(est).set_params(warm_start=True).fit(X[:350], y[:350])
    assert warm.set_params(warm_start=True).fit(X, y).start_ == "warm"  # a warm start skips the subset


def test_the_subset_start_brings_switched_off_inputs_back_within_reach(monkeypatch):
    from hdgp.estimators import projected

    # x3 is noise: the subset fit switches it off (a length-scale far beyond the inputs' spread, where
    # its gradient vanishes); the start on all rows caps it within reach, the others stay as fitted
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 4))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=400)
    monkeypatch.setattr(projected, "PROJECTED_EXACT_MAX_N", 300)
    monkeypatch.setattr(projected, "SUBSET_START_ROWS", 120)
    fitted, starts = [], []
    real = projected.ProjectedAdditiveGPRegressor._subset_start

    def spy(self, model, X, y):
        pk = model.kernel.base_kernel
        generic = pk.input_lengthscale.detach().clone()
        original = projected.fit_hyperparameters

        def record(model, *args, **kwargs):
            result = original(model, *args, **kwargs)
            fitted.append(pk.input_lengthscale.detach().clone())
            return result

        monkeypatch.setattr(projected, "fit_hyperparameters", record)
        result = real(self, model, X, y)
        monkeypatch.setattr(projected, "fit_hyperparameters", original)
        starts.append((generic, pk.input_lengthscale.detach().clone()))
        return result

    monkeypatch.setattr(projected.ProjectedAdditiveGPRegressor, "_subset_start", spy)
    ProjectedAdditiveGPRegressor(6, random_state=0, inference="exact").fit(X, y)
    (generic, start), = starts
    cap = projected.SUBSET_LENGTHSCALE_CAP * generic
    off = fitted[0] > cap
    assert off[3] and not off[0]  # the noise input was switched off on the subset, x0 was not
    assert torch.allclose(start[off], cap[off]) and torch.equal(start[~off], fitted[0][~off])
