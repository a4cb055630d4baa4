"""``warm_start``: the next fit starts from the previous fit's hyper-parameters (as in scikit-learn)."""

import warnings

import numpy as np
import pytest
import torch

import hdgp

RNG = np.random.default_rng(8)
X = RNG.normal(size=(70, 4))
Y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * RNG.normal(size=70)


def _fit(est, X=X, Y=Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


@pytest.mark.parametrize("name, params", [("RBF-ARD", {}), ("OAK", {"max_order": 2}),
                                          ("SGPR-RBF-ARD", {"n_inducing": 10})])
def test_a_warm_fit_starts_at_the_previous_optimum(name, params):
    est = _fit(hdgp.preset(name, random_state=0, **params), X[:50], Y[:50])
    before = {k: v.clone() for k, v in est.model_.named_parameters()}
    est.set_params(warm_start=True, max_iter=1)
    _fit(est, X[:50], Y[:50])  # the same rows: one step from the optimum stays there
    assert est.start_ == "warm"
    for key, value in est.model_.named_parameters():
        torch.testing.assert_close(value, before[key], rtol=1e-3, atol=1e-4)
    est.set_params(max_iter=None)
    _fit(est)  # more rows: trained on from the old optimum, cheaper than a fresh fit
    fresh = _fit(hdgp.preset(name, random_state=0, **params))
    assert est.start_ == "warm" and est.n_iter_ < fresh.n_iter_


def test_a_warm_fit_keeps_the_winning_direction_set():
    est = _fit(hdgp.preset("DPA-GP-ARD", random_state=0, n_projections=4, n_direction_sets=3), X[:50], Y[:50])
    won, projections = est.best_candidate_, est.projections_.clone()
    _fit(est.set_params(warm_start=True))
    assert est.best_candidate_ == won and len(est.direction_set_losses_) == 1
    torch.testing.assert_close(est.projections_, projections)


def test_without_warm_start_or_with_another_engine_the_fit_starts_afresh():
    est = _fit(hdgp.preset("RBF-ARD", random_state=0))
    assert est.start_ == "generic"
    _fit(est)
    assert est.start_ == "generic"
    est.set_params(warm_start=True, inference="sparse", n_inducing=10)
    _fit(est)  # exact -> sparse: nothing to start from
    assert est.start_ != "warm"


def test_warm_start_must_be_a_bool():
    with pytest.raises(ValueError, match="'warm_start' parameter of .* must be an instance of 'bool'"):
        _fit(hdgp.GPRegressor(warm_start="yes"))


def test_a_loaded_model_warm_starts_even_from_a_file_without_a_fit_seed(tmp_path):
    est = _fit(hdgp.preset("SGPR-RBF-ARD", random_state=0, n_inducing=10), X[:50], Y[:50])
    back = hdgp.load(hdgp.save(est, tmp_path / "m.hdgp"))  # no training rows in the file
    back.__dict__.pop("_fit_seed_", None)  # as in files of older versions
    _fit(back.set_params(warm_start=True))
    assert back.start_ == "warm"
