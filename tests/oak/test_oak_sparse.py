"""OAKRegressor with sparse (SGPR) and variational (SVGP) inference: limits, accuracy, discrete columns."""

import copy
import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from hdgp import explain
from hdgp.estimators.oak import OAKRegressor
from hdgp.exceptions import ConvergenceWarning
from hdgp.inference import ExactGPModel, InducingPosterior, SGPRModel


def additive_data(n, seed=0, d=3, noise=0.1):
    """f = sin(1.5 x0) + 0.6 x1 + 0.5 x0 x2 on x ~ N(0, I_d)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, additive_f(X) + noise * rng.normal(size=n)


def additive_f(X):
    return np.sin(1.5 * X[:, 0]) + 0.6 * X[:, 1] + 0.5 * X[:, 0] * X[:, 2]


# x ~ N(0, I): Var sin(1.5 x0) = (1 - exp(-2 * 1.5**2)) / 2, Var 0.6 x1 = 0.36, Var 0.5 x0 x2 = 0.25
_VARS = {("x0",): (1 - math.exp(-4.5)) / 2, ("x1",): 0.36, ("x0", "x2"): 0.25}
TRUE_SHARES = {term: v / sum(_VARS.values()) for term, v in _VARS.items()}


def _standardised_y(est, y):
    return est.X_train_.new_tensor((y - est.y_mean_) / est.y_scale_)


def _same_hyperparameters(est, engine, y, **kwargs):
    """Posterior of ``engine`` around the fitted kernel, noise and constant of ``est``."""
    model = engine(est.kernel_, **kwargs).to(est.X_train_)
    model.likelihood.noise = est.model_.noise
    model.mean.constant.data.fill_(float(est.model_.constant))
    return model.posterior(est.X_train_, _standardised_y(est, y))


def _all_terms(D, R):
    return [u for r in range(R + 1) for u in itertools.combinations(range(D), r)]


def test_inducing_points_at_all_training_rows_reproduce_exact_oak():
    # SGPR with Z = X is exact (Titsias 2009): same hyperparameters, same predictions,
    # Sobol indices, component means and component variances.
    X, y = additive_data(60)
    est = OAKRegressor(max_order=2, random_state=0, inference="exact").fit(X, y)
    sparse = copy.copy(est)
    sparse.posterior_ = _same_hyperparameters(est, SGPRModel, y, inducing_points=est.X_train_, jitter=1e-10)
    assert isinstance(sparse.posterior_, InducingPosterior)
    Xs = np.random.default_rng(5).normal(size=(15, 3))
    for latent in (False, True):
        for a, b in zip(est.predict(Xs, return_std=True, latent=latent),
                        sparse.predict(Xs, return_std=True, latent=latent)):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    s_sparse = explain.compute_sobol(est.kernel_, sparse.posterior_.X, sparse.posterior_.alpha)
    assert s_sparse.terms[:3] == est.sobol_.terms[:3]
    torch.testing.assert_close(s_sparse.by_order, est.sobol_.by_order, rtol=1e-6, atol=1e-8)
    assert s_sparse.total == pytest.approx(est.sobol_.total, rel=1e-6)
    for term in _all_terms(3, 2):
        for a, b in zip(est.predict_component(Xs, term, return_std=True),
                        sparse.predict_component(Xs, term, return_std=True)):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    Xt = est.X_train_.new_tensor(Xs)
    _, cov_exact = explain.component_posterior(est.posterior_, (0, 2), Xt, full_cov=True)
    _, cov_sparse = explain.component_posterior(sparse.posterior_, (0, 2), Xt, full_cov=True)
    torch.testing.assert_close(cov_sparse, cov_exact, rtol=1e-5, atol=1e-9)


def test_sparse_fit_with_n_inducing_equal_n_matches_exact_fit():
    # end to end: k-means init returns the training rows, and the collapsed bound then equals
    # the exact evidence, so both fits reach (nearly) the same optimum
    X, y = additive_data(80, seed=1)
    exact = OAKRegressor(max_order=2, random_state=0, inference="exact").fit(X, y)
    sparse = OAKRegressor(max_order=2, random_state=0, inference="sparse", n_inducing=80).fit(X, y)
    assert sparse.inference_ == "sparse"
    torch.testing.assert_close(sparse.posterior_.X, sparse.X_train_)
    # the bound is below the evidence only through the jitter on K_uu (1e-6 of its diagonal)
    assert exact.log_marginal_likelihood_value_ - 0.1 < sparse.log_marginal_likelihood_value_ \
        < exact.log_marginal_likelihood_value_ + 1e-3
    np.testing.assert_allclose(sparse.predict(X[:10]), exact.predict(X[:10]), atol=5e-3 * y.std())
    for term, share in exact.sobol_indices_.items():
        assert sparse.sobol_indices_[term] == pytest.approx(share, abs=2e-3)


def test_sparse_sobol_close_to_exact_sobol_on_1000_rows():
    # issue 6: with a few hundred inducing points the sparse Sobol indices match the exact
    # ones at the same hyperparameters, and both match the true FANOVA shares
    X, y = additive_data(1000, seed=2)
    est = OAKRegressor(max_order=2, random_state=0, inference="sparse", n_inducing=150).fit(X, y)
    assert est.posterior_.X.shape == (150, 3)
    exact = _same_hyperparameters(est, ExactGPModel, y)
    s_exact = explain.compute_sobol(est.kernel_, exact.X, exact.alpha)
    torch.testing.assert_close(est.sobol_.by_order, s_exact.by_order, rtol=0, atol=1e-3)
    exact_terms = dict(zip(s_exact.terms, s_exact.values.tolist()))
    for term, value in zip(est.sobol_.terms, est.sobol_.values.tolist()):
        assert value == pytest.approx(exact_terms[term], abs=1e-3)
    assert est.sobol_.total == pytest.approx(s_exact.total, rel=1e-3)
    for term, share in TRUE_SHARES.items():
        assert est.sobol_indices_[term] == pytest.approx(share, abs=0.03)
    Xs = est.X_train_[:20]
    mean_s, var_s = explain.component_posterior(est.posterior_, (0,), Xs)
    mean_e, var_e = explain.component_posterior(exact, (0,), Xs)
    torch.testing.assert_close(mean_s, mean_e, rtol=0, atol=0.02)
    assert (var_s >= var_e - 1e-6).all()  # the sparse posterior never is more confident here


def test_auto_inference_picks_sparse_above_5000_rows(monkeypatch):
    from hdgp.estimators import _base

    monkeypatch.setattr(_base, "AUTO_EXACT_MAX_N", 50)
    X, y = additive_data(60, seed=3)
    est = OAKRegressor(max_order=1, n_inducing=20, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert est.inference_ == "sparse" and est.posterior_.X.shape == (20, 3)


def test_variational_oak_fits_additive_function():
    X, y = additive_data(400, seed=4)
    est = OAKRegressor(max_order=2, inference="variational", n_inducing=40, max_iter=400, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 400 steps do not reach the stopping rule
        est.fit(X, y)
    assert est.inference_ == "variational" and isinstance(est.posterior_, InducingPosterior)
    Xt = np.random.default_rng(40).normal(size=(500, 3))
    rmse = np.sqrt(np.mean((est.predict(Xt) - additive_f(Xt)) ** 2))
    assert rmse < 0.2 * additive_f(Xt).std()  # about 0.12 here; the mean alone gives 1
    for term, share in TRUE_SHARES.items():
        assert est.sobol_indices_[term] == pytest.approx(share, abs=0.06)
    mean, std = est.predict_component(Xt[:10], (0, 2), return_std=True)
    assert np.isfinite(mean).all() and (std > 0).all()


def _mixed_frame(n, seed):
    rng = np.random.default_rng(seed)
    shops = [f"shop{i:02d}" for i in range(12)]  # more levels than k-means init detects by itself
    df = pd.DataFrame({
        "x": rng.normal(size=n),
        "shop": pd.Categorical(rng.choice(shops, n)),
        "member": rng.integers(0, 2, n),
    })
    effect = dict(zip(shops, np.linspace(-1.5, 1.5, 12)))
    y = np.sin(df["x"].to_numpy()) + df["shop"].map(effect).astype(float).to_numpy() \
        + 0.7 * df["member"].to_numpy() + 0.05 * rng.normal(size=n)
    return df, y


@pytest.mark.parametrize("inference", ["sparse", "variational"])
def test_categorical_and_binary_columns_under_inducing_inference(inference):
    df, y = _mixed_frame(400, seed=5)
    est = OAKRegressor(max_order=2, inference=inference, n_inducing=60, max_iter=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(df, y)
    assert est.categorical_features_ == [1] and est.binary_features_ == [2]
    Z = est.posterior_.X.numpy()
    # k-means centres are no level codes: every inducing point holds observed codes, also
    # after SVGP moved the inducing inputs (the codes get no gradient)
    assert set(np.unique(Z[:, 1])) <= set(range(12)) and len(np.unique(Z[:, 1])) > 1
    if inference == "sparse":
        # the auto-detected binary column (a constrained SE kernel under its two-point
        # measure) starts on the observed values; SVGP then learns it like any continuous input
        assert set(np.unique(Z[:, 2])) <= {0.0, 1.0} and len(np.unique(Z[:, 2])) == 2
    assert len(np.unique(Z[:, 0])) > 20  # continuous column keeps centroids
    top = {t for t, _ in list(est.sobol_indices_.items())[:3]}
    assert top == {("x",), ("shop",), ("member",)}
    test, y_test = _mixed_frame(200, seed=6)
    rmse = np.sqrt(np.mean((est.predict(test) - y_test) ** 2))
    assert rmse < 0.25 * y_test.std()
    mean, std = est.predict_component(test.iloc[:5], "shop", return_std=True)
    assert np.isfinite(mean).all() and (std >= 0).all()


def test_bad_inference_arguments():
    X, y = additive_data(30, seed=7)
    for inference in ("sparse", "variational"):
        with pytest.raises(ValueError, match="n_inducing"):
            OAKRegressor(max_order=1, inference=inference, n_inducing=0).fit(X, y)
        # more inducing points than rows: one per row, as the classifiers do
        est = OAKRegressor(max_order=1, inference=inference, n_inducing=31, max_iter=3).fit(X, y)
        assert est.model_.inducing_points.shape[0] == 30
    with pytest.raises(ValueError, match="inference"):
        OAKRegressor(inference="bogus").fit(X, y)


@pytest.mark.parametrize("inference", ["sparse", "variational"])
def test_model_file_round_trip(tmp_path, inference):
    import hdgp

    X, y = additive_data(40, seed=8)
    X[:, 2] = np.random.default_rng(8).integers(0, 3, 40)
    est = OAKRegressor(max_order=2, inference=inference, n_inducing=8, max_iter=10, categorical_features=[2],
                       random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    back = hdgp.load(hdgp.save(est, tmp_path / "oak.hdgp"))
    Xs = X[:5] + np.array([0.1, -0.1, 0.0])
    for a, b in zip(est.predict(Xs, return_std=True), back.predict(Xs, return_std=True)):
        np.testing.assert_array_equal(b, a)
    for a, b in zip(est.predict_component(Xs, (0, 2), return_std=True),
                    back.predict_component(Xs, (0, 2), return_std=True)):
        np.testing.assert_array_equal(b, a)
    assert back.sobol_indices_ == est.sobol_indices_
