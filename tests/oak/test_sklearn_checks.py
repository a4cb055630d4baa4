"""scikit-learn's estimator checks for AdditiveGPRegressor and OAKRegressor."""

import warnings

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from hdgp.estimators.additive import AdditiveGPRegressor
from hdgp.estimators.oak import OAKRegressor


@pytest.mark.slow
@parametrize_with_checks([AdditiveGPRegressor(max_order=1, max_iter=30), OAKRegressor(max_order=1, max_iter=30)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)
