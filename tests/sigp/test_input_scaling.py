"""SIGP on inputs with irrelevant features (issue #41): the isotropic kernel must not be swamped by them."""

import numpy as np
import pytest

from hdgp.estimators import SIGPRegressor

GRID = dict(rank=[1, 3, 10], eta=[1e-7, 1e-5, 1e-3], random_state=0)


def _data(n, p=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, p))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.01 * rng.standard_normal(n)  # features 2.. are irrelevant
    return X, y


def test_compared_input_scaling_ignores_irrelevant_features():
    X, y = _data(400)
    Xt, yt = _data(300, seed=1)
    default = SIGPRegressor(input_scaling="compare", **GRID).fit(X, y)
    isotropic = SIGPRegressor(input_scaling=None, **GRID).fit(X, y)
    rmse = {name: float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2))) / yt.std()
            for name, est in (("default", default), ("isotropic", isotropic))}
    # on the relevant features alone the isotropic kernel is as good as the weighted one ...
    alone = SIGPRegressor(input_scaling=None, **GRID).fit(X[:, :2], y)
    rmse_alone = float(np.sqrt(np.mean((alone.predict(Xt[:, :2]) - yt) ** 2))) / yt.std()
    # ... while with ten irrelevant features beside them it collapses (the #41 failure), input_scaling="compare" does not
    assert rmse["isotropic"] > 3 * rmse_alone
    assert rmse["default"] < 2 * rmse_alone
    w = default.input_weights_
    assert w.shape == (12,) and np.sum(w**2) == pytest.approx(12)
    assert w[:2].min() > 5 * w[2:].max()
    assert default.input_scaling_ == "ard" and isotropic.input_scaling_ is None and isotropic.input_weights_ is None


def test_input_scaling_bad_value():
    X, y = _data(30)
    with pytest.raises(ValueError, match="input_scaling"):
        SIGPRegressor(input_scaling="max", **GRID).fit(X, y)


def test_auto_input_scaling_compares_only_from_its_row_count(monkeypatch):
    """``"auto"``: the isotropic kernel alone below COMPARE_MIN_ROWS rows, both scalings (the better CV kept) from it."""
    from hdgp.estimators import sigp_regressor

    X, y = _data(120)
    small = SIGPRegressor(input_scaling="auto", **GRID).fit(X, y)
    assert small.input_scaling_ is None and small.input_weights_ is None
    monkeypatch.setattr(sigp_regressor, "COMPARE_MIN_ROWS", 100)
    large = SIGPRegressor(input_scaling="auto", **GRID).fit(X, y)
    compared = SIGPRegressor(input_scaling="compare", **GRID).fit(X, y)
    assert large.input_scaling_ == compared.input_scaling_ == "ard"
    np.testing.assert_array_equal(large.predict(X[:5]), compared.predict(X[:5]))
