"""``scale_variance``: every predictive variance times the factor, the means unchanged, in every engine."""

import warnings

import numpy as np
import pytest

import hdgp

RNG = np.random.default_rng(5)
X = RNG.normal(size=(60, 3))
Y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * RNG.normal(size=60)
XT = RNG.normal(size=(9, 3))

ENGINES = {
    "RBF-ARD": dict(max_iter=10),  # exact posterior
    "SGPR-RBF-ARD": dict(max_iter=10, n_inducing=12),  # inducing-point posterior
    "DPA-GP-ARD-SKI": dict(max_iter=5, n_projections=3, grid_size=64),  # SKI posterior
    "OAK": dict(max_iter=10, max_order=2),  # exact, with components
    "SIGP": dict(rank=2, lengthscale=2.0, eta=1e-3, mean_penalty=1.0, y_bandwidth=0.5),
}


def _fit(name):
    est = hdgp.preset(name, random_state=0, **ENGINES[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_scaling_multiplies_every_variance_and_keeps_the_mean(name, tmp_path):
    est = _fit(name)
    before = est.variance_scale_  # 1, except SIGP's own cross-validated calibration
    mean, std = est.predict(XT, return_std=True)
    _, latent_std = est.predict(XT, return_std=True, latent=True)
    _, cov = est.predict(XT, return_cov=True)
    assert est.scale_variance(4.0) is est and est.variance_scale_ == pytest.approx(4.0 * before)
    mean4, std4 = est.predict(XT, return_std=True)
    np.testing.assert_array_equal(mean4, mean)
    np.testing.assert_allclose(std4, 2 * std, rtol=1e-12)
    np.testing.assert_allclose(est.predict(XT, return_std=True, latent=True)[1], 2 * latent_std, rtol=1e-12)
    np.testing.assert_allclose(est.predict(XT, return_cov=True)[1], 4 * cov, rtol=1e-12, atol=1e-14)
    if name == "OAK":
        _, component_std = _fit(name).predict_component(XT, 0, return_std=True)
        np.testing.assert_allclose(est.predict_component(XT, 0, return_std=True)[1], 2 * component_std, rtol=1e-10)
    back = hdgp.load(hdgp.save(est, tmp_path / "m.hdgp"))
    assert back.variance_scale_ == est.variance_scale_
    np.testing.assert_allclose(back.predict(XT, return_std=True)[1], std4, rtol=1e-12)


def test_factors_compound_and_a_refit_starts_again_from_one():
    est = _fit("RBF-ARD").scale_variance(4.0).scale_variance(2.25)
    assert est.variance_scale_ == pytest.approx(9.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, Y)
    assert est.variance_scale_ == 1.0 and est.posterior_.variance_scale == 1.0


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf"), True, "2"])
def test_a_factor_that_is_not_positive_and_finite_is_refused(factor):
    with pytest.raises(ValueError, match="factor must be a positive finite number"):
        _fit("RBF-ARD").scale_variance(factor)


def test_scaling_an_unfitted_estimator_says_fit_first():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        hdgp.GPRegressor().scale_variance(2.0)
