"""class_weight on the GP classifiers: Bayes' rule on the calibrated probabilities, fit unchanged."""

import numpy as np
import pytest

import hdgp
from hdgp.estimators import GPClassifier, SIGPClassifier
from hdgp.estimators._class_weight import class_weights, reweight_proba

FACTORIES = {
    "GPClassifier": lambda **kw: GPClassifier(n_inducing=20, max_iter=100, random_state=0, **kw),
    "SIGPClassifier": lambda **kw: SIGPClassifier(rank=1, lengthscale=2.0, eta=1e-3, mean_penalty=1.0, **kw),
}


def _imbalanced(n=160, seed=0):
    """Two overlapping Gaussian classes, 20 % of rows in class 1 (labels 'a' / 'b')."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.2, "b", "a")
    X = rng.normal(size=(n, 2)) + np.where(y == "b", 1.0, 0.0)[:, None]
    return X, y


@pytest.mark.parametrize("name", FACTORIES)
def test_balanced_weights_shift_the_probabilities_by_bayes_rule(name):
    X, y = _imbalanced()
    plain = FACTORIES[name]().fit(X, y)
    balanced = FACTORIES[name](class_weight="balanced").fit(X, y)
    n_k = np.array([np.sum(y == c) for c in plain.classes_])
    w = len(y) / (2 * n_k)
    assert np.allclose(balanced.class_weight_, w)
    p, q = plain.predict_proba(X), balanced.predict_proba(X)
    expected = p * w / (p * w).sum(1, keepdims=True)
    assert np.allclose(q, expected, atol=1e-10)
    assert np.array_equal(balanced.predict(X), balanced.classes_[q.argmax(1)])
    # the minority class is predicted more often, and its recall does not drop
    minority = plain.classes_[np.argmin(n_k)]
    recall = lambda est: np.mean(est.predict(X)[y == minority] == minority)  # noqa: E731
    assert np.sum(balanced.predict(X) == minority) > np.sum(plain.predict(X) == minority)
    assert recall(balanced) >= recall(plain)


@pytest.mark.parametrize("name", FACTORIES)
def test_dict_weights_and_bad_values(name):
    X, y = _imbalanced(n=80)
    est = FACTORIES[name](class_weight={"b": 1000.0}).fit(X, y)
    assert np.allclose(est.class_weight_, [1.0, 1000.0])
    assert np.mean(est.predict(X) == "b") > 0.8
    assert "class weights on the probabilities: a 1, b 1e+03" in hdgp.summary(est)
    for bad, message in (("uniform", "class_weight"), ({"b": -1.0}, "positive"),
                         ({"B": 2.0, "a": 1.0}, "class_weight names 'B', not a class of y; the classes are 'a', 'b'")):
        with pytest.raises(ValueError, match=message):
            FACTORIES[name](class_weight=bad).fit(X, y)


def test_reweighting_helper_is_the_identity_without_weights_and_normalises_rows():
    p = np.array([[0.2, 0.8], [0.5, 0.5]])
    assert reweight_proba(p, None) is p
    q = reweight_proba(p, np.array([4.0, 1.0]))
    assert np.allclose(q, [[0.5, 0.5], [0.8, 0.2]])
    assert class_weights(None, np.array([0, 1]), np.array([0, 1, 1])) is None


@pytest.mark.parametrize("name", FACTORIES)
def test_changed_class_weight_takes_effect_at_the_next_fit(name):
    """As in scikit-learn, class_weight_ describes the fit; set_params alone changes nothing."""
    X, y = _imbalanced(n=80)
    est = FACTORIES[name]().fit(X, y)
    before = est.predict_proba(X)
    est.set_params(class_weight="balanced")
    assert est.class_weight_ is None
    np.testing.assert_array_equal(est.predict_proba(X), before)
    assert not np.allclose(est.fit(X, y).predict_proba(X), before)
