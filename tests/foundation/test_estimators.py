"""GPRegressor: scikit-learn contract, bad input, persistence, determinism, presets."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

import hdgp
from hdgp import GPRegressor


def _data(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.standard_normal(n)


@parametrize_with_checks([GPRegressor(), GPRegressor(kernel="gam", max_iter=50)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hdgp.exceptions.HDGPWarning)
        check(estimator)


@pytest.mark.parametrize("kernel", ["rbf-ard", "imq-ard", "gam", "linear"])
def test_fits_and_returns_original_units(kernel):
    """The target is standardised inside: fitting a + b·y gives a + b·mean and b·std."""
    X, y = _data()
    est = GPRegressor(kernel=kernel, random_state=0).fit(X, y)
    shifted = GPRegressor(kernel=kernel, random_state=0).fit(X, 1000.0 + 50.0 * y)
    mean, std = est.predict(X[:10], return_std=True)
    mean_s, std_s = shifted.predict(X[:10], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    np.testing.assert_allclose(mean_s, 1000.0 + 50.0 * mean, rtol=1e-6)
    np.testing.assert_allclose(std_s, 50.0 * std, rtol=1e-5)
    if kernel != "linear":
        assert est.score(X, y) > 0.9


def test_rbf_recovers_smooth_function_and_calibrated_noise():
    X, y = _data(n=150, seed=1)
    est = GPRegressor(random_state=0).fit(X, y)
    Xt, yt = _data(n=200, seed=2)
    mean, std = est.predict(Xt, return_std=True)
    assert hdgp.metrics.rmse(yt, mean) < 0.1
    assert 0.85 < hdgp.metrics.interval_coverage(yt, mean, std, 0.95) <= 1.0
    assert est.model_.noise.item() * est.y_scale_**2 == pytest.approx(0.05**2, rel=0.6)


def test_pickle_round_trip_gives_identical_predictions():
    X, y = _data()
    est = GPRegressor(kernel="gam", random_state=0).fit(X, y)
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict(X, return_std=True)[1], est.predict(X, return_std=True)[1])


def test_same_seed_is_bitwise_reproducible_with_restarts():
    X, y = _data()
    a = GPRegressor(n_restarts=2, random_state=3).fit(X, y)
    b = GPRegressor(n_restarts=2, random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert len(a.fit_result_.restart_losses) == 3
    assert a.fit_result_.loss == min(a.fit_result_.restart_losses)


def test_adam_protocol_stops_by_moving_average_rule_and_lbfgs_is_no_worse():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hdgp.exceptions.ConvergenceWarning)
        start = GPRegressor(optimizer="adam", max_iter=1).fit(X, y)
    adam = GPRegressor(optimizer="adam", random_state=0).fit(X, y)
    lbfgs = GPRegressor(random_state=0).fit(X, y)
    assert adam.fit_result_.converged and 20 <= adam.n_iter_ < 1000
    assert adam.log_marginal_likelihood_value_ > start.log_marginal_likelihood_value_ + 10
    assert lbfgs.log_marginal_likelihood_value_ >= adam.log_marginal_likelihood_value_ - 1e-6
    assert lbfgs.n_iter_ < adam.n_iter_


def test_sample_y_matches_predictive_moments():
    """Joint draws: sample mean and covariance match predict(return_cov=True) on close points."""
    X, y = _data()
    est = GPRegressor(random_state=0).fit(X, y)
    # close points beyond the data: large, strongly correlated latent variances
    Xt = np.full((5, 3), 2.5) + np.linspace(0.0, 0.3, 5)[:, None]
    n_samples = 4000
    samples = est.sample_y(Xt, n_samples=n_samples, random_state=1, latent=True)
    mean, cov = est.predict(Xt, return_cov=True, latent=True)
    assert samples.shape == (5, n_samples)
    sd = np.sqrt(np.diag(cov))
    assert (cov / np.outer(sd, sd))[0, 1] > 0.5  # the check below can tell joint from independent draws
    np.testing.assert_allclose(samples.mean(1), mean, atol=4 * sd.max() / np.sqrt(n_samples))
    np.testing.assert_allclose(np.cov(samples), cov, atol=5 * cov.diagonal().max() / np.sqrt(n_samples))


def test_dataframe_feature_names_are_kept_and_checked():
    X, y = _data()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    est = GPRegressor(random_state=0).fit(df, y)
    assert list(est.feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df.rename(columns={"a": "z"}))


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0], [2.0, 1.0]]), np.array([0.0, 1.0, 2.0]), "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0], [2.0, 1.0]]), np.array([0.0, 1.0, 2.0]), "infinity"),
        (np.ones((3, 2)), np.array([0.0, np.nan, 1.0]), "NaN"),
        (np.ones((3, 2)), np.array([0.0, 1.0]), "inconsistent numbers of samples"),
        (np.ones((1, 2)), np.array([0.0]), "minimum of 2 is required"),
        (np.array([["a", "b"], ["c", "d"]]), np.array([0.0, 1.0]), "could not convert"),
    ],
)
def test_bad_training_input_raises_clear_value_error(X, y, match):
    with pytest.raises(ValueError, match=match):
        GPRegressor().fit(X, y)


def test_bad_predict_input():
    X, y = _data()
    est = GPRegressor(random_state=0)
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2])


@pytest.mark.parametrize("params, match", [
    ({"kernel": "nope"}, "kernel must be one of"),
    ({"optimizer": "sgd"}, "'optimizer' parameter of .* must be a str among"),
    ({"noise_lower_bound": 0.0}, "noise_lower_bound"),
    ({"inference": "magic"}, "inference must be"),
    ({"dtype": "float16"}, "dtype must be"),
])
def test_bad_parameters_name_the_parameter(params, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        GPRegressor(**params).fit(X, y)


def test_constant_target_and_constant_column_give_finite_predictions():
    X, _ = _data()
    X[:, 1] = 4.2
    est = GPRegressor(random_state=0).fit(X, np.full(len(X), 3.0))
    mean, std = est.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))
    np.testing.assert_allclose(mean, 3.0, atol=1e-6)


def test_presets_registry_lists_and_builds_baselines():
    names = hdgp.presets()
    for name in ("RBF-ARD", "IMQ-ARD", "GAM", "Linear"):
        assert name in names and names[name]
    est = hdgp.preset("imq-ard", random_state=4)
    assert isinstance(est, GPRegressor) and est.kernel == "imq-ard" and est.random_state == 4
    with pytest.raises(ValueError, match="Available presets"):
        hdgp.preset("no-such-model")


@pytest.mark.parametrize("name", ["RBF-ARD", "Additive", "GP-classifier", "OAK-classifier"])
def test_fit_does_not_depend_on_the_global_torch_default_dtype(name):
    """Parameters are created and initialised in the estimator's dtype, not torch's default."""
    import torch

    X, y = _data(n=40)
    classifier = name.endswith("classifier")
    y = y > np.median(y) if classifier else y
    extra = dict(n_inducing=20, max_order=2) if name == "OAK-classifier" else dict(n_inducing=20) if classifier else {}
    previous = torch.get_default_dtype()
    results = []
    try:
        for dtype in (torch.float32, torch.float64):
            torch.set_default_dtype(dtype)
            est = hdgp.preset(name, random_state=0, max_iter=20, **extra).fit(X, y)
            results.append(est.predict_proba(X) if classifier else est.predict(X))
    finally:
        torch.set_default_dtype(previous)
    # a parameter made in float32 moves predictions by ~1e-7
    np.testing.assert_array_equal(*results)


def test_repeated_classifier_fits_in_one_process_are_bitwise_equal():
    """Same data, same random_state: each fit gives bitwise the same probabilities, however many
    fits (and freed buffers) came before it in the process."""
    X, y = _data(n=40)
    y = y > np.median(y)
    fits = [hdgp.preset("GP-classifier", random_state=0, max_iter=20, n_inducing=20).fit(X, y) for _ in range(3)]
    first, *rest = [est.predict_proba(X) for est in fits]
    for proba in rest:
        np.testing.assert_array_equal(proba, first)
