"""AdditiveGPRegressor: fits, GAM equivalence at order 1, parameter validation."""

import numpy as np
import pytest
import torch

import hdgp
from hdgp.estimators.additive import AdditiveGPRegressor
from hdgp.kernels import AdditiveRBFKernel


def data(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.05 * rng.normal(size=n)
    return X, y


def test_fit_predict_and_order_shares():
    X, y = data()
    est = AdditiveGPRegressor(max_order=2, random_state=0).fit(X[:100], y[:100])
    rmse = np.sqrt(np.mean((est.predict(X[100:]) - y[100:]) ** 2))
    assert rmse < 0.3 * y.std()
    assert est.order_variance_shares_.shape == (2,)
    assert est.order_variance_shares_.sum() == pytest.approx(1.0)
    # x0·x1 needs the second order: it must carry real prior variance
    assert est.order_variance_shares_[1] > 0.05


def test_first_order_kernel_equals_gam_kernel():
    torch.manual_seed(0)
    X = torch.randn(9, 3, dtype=torch.float64)
    est = AdditiveGPRegressor(max_order=1)
    kern = est._make_kernel(X).double()
    kern.base_kernel.lengthscale = torch.tensor([0.5, 1.0, 2.0]).reshape(3, 1, 1)
    kern.order_variances = torch.tensor([0.0 + 1e-300, 0.7])
    gam = AdditiveRBFKernel(ard_num_dims=3).double()
    gam.lengthscale = torch.tensor([[0.5, 1.0, 2.0]])
    torch.testing.assert_close(kern(X).to_dense(), 0.7 * gam(X).to_dense())


def test_matern_base_kernel_fits_a_rough_function_better_than_se(tmp_path):
    # |x0| + |x1|·sign(x2): kinks the SE base kernel can only round off
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(300, 3))
    y = np.abs(X[:, 0]) + np.abs(X[:, 1]) * np.sign(X[:, 2]) + 0.05 * rng.normal(size=300)
    errors = {}
    for base in ("se", "matern12"):
        est = AdditiveGPRegressor(max_order=2, base_kernel=base, random_state=0).fit(X[:200], y[:200])
        errors[base] = np.sqrt(np.mean((est.predict(X[200:]) - y[200:]) ** 2))
    assert type(est.kernel_.base_kernel).__name__ == "MaternFeatureKernel" and est.kernel_.base_kernel.nu == 0.5
    assert errors["matern12"] < errors["se"]
    hdgp.save(est, tmp_path / "m.hdgp")
    np.testing.assert_allclose(hdgp.load(tmp_path / "m.hdgp").predict(X[200:]), est.predict(X[200:]), rtol=1e-10)
    with pytest.raises(ValueError, match="base_kernel must be one of"):
        AdditiveGPRegressor(base_kernel="rbf").fit(X[:20], y[:20])


@pytest.mark.parametrize("max_order", [0, 5, 2.0, True])
def test_bad_max_order(max_order):
    X, y = data(n=20)
    with pytest.raises(ValueError, match="max_order"):
        AdditiveGPRegressor(max_order=max_order).fit(X, y)


def test_preset():
    est = hdgp.preset("Additive", max_order=3)
    assert isinstance(est, AdditiveGPRegressor) and est.max_order == 3
