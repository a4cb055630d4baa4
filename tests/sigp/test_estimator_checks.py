"""scikit-learn's estimator contract for the SIGP estimators (no check is skipped)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from hdgp.estimators import SIGPClassifier, SIGPRegressor

FIXED = dict(rank=2, lengthscale=1.0, eta=1e-3, mean_penalty=1.0)


@parametrize_with_checks([SIGPRegressor(y_bandwidth=0.5, **FIXED), SIGPClassifier(**FIXED)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
