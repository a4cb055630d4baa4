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
