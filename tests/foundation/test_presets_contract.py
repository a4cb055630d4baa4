"""Every registered preset builds a scikit-learn estimator that honours the shared contract."""

import inspect

import pytest
from sklearn.base import clone

import hdgp
from hdgp.estimators._base import COMMON_PARAMS, BaseGPRegressor


@pytest.mark.parametrize("name", sorted(hdgp.presets()))
def test_preset_builds_clonable_estimator(name):
    est = hdgp.preset(name, random_state=7)
    assert est.get_params()["random_state"] == 7
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    assert hasattr(est, "fit") and hasattr(est, "predict")


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@pytest.mark.parametrize("cls", sorted(set(_subclasses(BaseGPRegressor)), key=lambda c: c.__name__))
def test_gp_regressors_accept_every_common_parameter_with_shared_defaults(cls):
    params = inspect.signature(cls.__init__).parameters
    for name, default in COMMON_PARAMS.items():
        assert name in params, f"{cls.__name__} lacks the common parameter {name!r}"
        assert params[name].default == default, f"{cls.__name__}.{name} default differs from COMMON_PARAMS"


@pytest.mark.parametrize("name", sorted(hdgp.presets()))
def test_every_preset_class_is_importable_from_the_top_level(name):
    """``hdgp.<Estimator>`` works for the class behind every preset (scikit-learn's convention)."""
    cls = type(hdgp.preset(name))
    assert getattr(hdgp, cls.__name__, None) is cls
    assert cls.__name__ in hdgp.__all__


def _small_estimators():
    return [hdgp.GPRegressor(max_iter=5), hdgp.AdditiveGPRegressor(max_order=2, max_iter=5),
            hdgp.OAKRegressor(max_order=2, max_iter=5), hdgp.ProjectedAdditiveGPRegressor(n_projections=3, max_iter=5),
            hdgp.SIGPRegressor(rank=1), hdgp.GPClassifier(max_iter=5), hdgp.OAKClassifier(max_order=2, max_iter=5),
            hdgp.SIGPClassifier(rank=1)]


@pytest.mark.parametrize("est", _small_estimators(), ids=lambda e: type(e).__name__)
def test_a_failed_refit_leaves_the_fitted_estimator_as_it_was(est):
    """A refit that raises half-way (here: on a random_state that is not a seed, after the new
    feature count is recorded) must not leave a model whose parts disagree."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=40)
    if hasattr(est, "predict_proba"):
        y = (y > 0).astype(int)
    est.set_params(random_state=0).fit(X, y)
    before = est.predict(X)
    attributes = set(vars(est))
    est.set_params(random_state="not a seed")
    with pytest.raises(ValueError):
        est.fit(X[:, :3], y)
    assert set(vars(est)) == attributes and est.n_features_in_ == 4
    np.testing.assert_array_equal(est.predict(X), before)
