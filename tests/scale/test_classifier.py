"""GPClassifier: scikit-learn contract, breast-cancer sanity, one-vs-rest, probit predictive."""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import norm
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

import hdgp
from hdgp.estimators.classifier import FULL_BATCH_MAX_ROWS, GPClassifier, probit_predictive
from hdgp.exceptions import ConvergenceWarning

pytestmark = pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")


@parametrize_with_checks([GPClassifier(n_inducing=5, max_iter=10, ngd_lr=0.5, lr=0.1, random_state=0)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hdgp.exceptions.HDGPWarning)
        check(estimator)


def test_probit_predictive_matches_monte_carlo():
    gen = torch.Generator().manual_seed(0)
    mean = torch.tensor([-1.5, 0.0, 0.7, 2.0], dtype=torch.float64)
    var = torch.tensor([0.3, 2.0, 0.01, 4.0], dtype=torch.float64)
    f = mean + var.sqrt() * torch.randn(200_000, 4, generator=gen, dtype=torch.float64)
    mc = torch.special.ndtr(f).mean(0)
    torch.testing.assert_close(probit_predictive(mean, var), mc, rtol=0, atol=5e-3)
    # and the closed form itself, to the last digits (R&W eq. 3.82)
    exact = torch.as_tensor(norm.cdf((mean / torch.sqrt(1 + var)).numpy()))
    torch.testing.assert_close(probit_predictive(mean, var), exact, rtol=1e-12, atol=0)


def test_probabilities_are_the_probit_of_the_latent_posterior():
    """predict_proba from predict_latent: Φ(m / sqrt(1 + s²)) for two classes (the first class the
    upper tail), and one-vs-rest the same per class, normalised over the classes."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((90, 2))
    binary = GPClassifier(n_inducing=15, max_iter=60, random_state=0).fit(X, X[:, 0] + 0.3 * X[:, 1] > 0)
    m, s = binary.predict_latent(X, return_std=True)
    z = m / np.sqrt(1 + s**2)
    np.testing.assert_allclose(binary.predict_proba(X), np.column_stack([norm.sf(z), norm.cdf(z)]), rtol=1e-10)
    labels = np.digitize(X[:, 0], [-0.5, 0.5])
    ovr = GPClassifier(n_inducing=15, max_iter=60, random_state=0).fit(X, labels)
    m, s = ovr.predict_latent(X, return_std=True)
    p = norm.cdf(m / np.sqrt(1 + s**2))
    np.testing.assert_allclose(ovr.predict_proba(X), p / p.sum(axis=1, keepdims=True), rtol=1e-10)


def test_breast_cancer_auc():
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    clf = GPClassifier(n_inducing=30, max_iter=150, random_state=0).fit(Xtr, ytr)
    proba = clf.predict_proba(Xte)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert roc_auc_score(yte, proba[:, 1]) > 0.95
    assert clf.score(Xte, yte) > 0.9
    mean, std = clf.predict_latent(Xte, return_std=True)
    assert mean.shape == std.shape == (len(yte),) and np.all(std > 0)


def test_one_vs_rest_on_iris_with_string_labels():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = GPClassifier(n_inducing=15, max_iter=60, ngd_lr=0.3, random_state=0).fit(X, names)
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"]
    assert len(clf.models_) == 3
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.mean(clf.predict(X) == names) > 0.9


def test_additive_classifier_learns_an_interaction_a_gam_cannot():
    # the sign of x0·x1 (an XOR): no sum of one-feature functions separates it, the second order does
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    accuracy = {}
    for name, est in (("additive", hdgp.preset("Additive-classifier", random_state=0)),
                      ("gam", GPClassifier(kernel="gam", random_state=0))):
        accuracy[name] = (est.fit(X[:200], y[:200]).predict(X[200:]) == y[200:]).mean()
    assert accuracy["additive"] > 0.85 and accuracy["gam"] < 0.7


def test_auto_optimizer_is_full_batch_lbfgs_when_one_batch_holds_the_data():
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:200], y[:200]
    full = GPClassifier(n_inducing=20, random_state=0).fit(X, y)
    assert full.optimizer_ == "lbfgs" and full.fit_results_[0].converged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mini = GPClassifier(n_inducing=20, batch_size=50, max_iter=20, random_state=0).fit(X, y)
    assert mini.optimizer_ == "adam"
    with pytest.raises(ValueError, match="minibatches"):
        GPClassifier(optimizer="lbfgs", batch_size=50).fit(X, y)
    with pytest.raises(ValueError, match="optimizer"):
        GPClassifier(optimizer="newton").fit(X, y)
    # without a batch size, "auto" stays full-batch up to FULL_BATCH_MAX_ROWS, and "lbfgs" at any n
    auto = GPClassifier()
    n_max = FULL_BATCH_MAX_ROWS
    assert [auto._resolve_optimizer(n, None) for n in (1500, n_max, n_max + 1)] == ["lbfgs", "lbfgs", "adam"]
    assert auto._resolve_optimizer(3000, 3000) == "lbfgs" and auto._resolve_optimizer(1500, 1000) == "adam"
    Xl = np.random.default_rng(0).normal(size=(2100, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        big = GPClassifier(optimizer="lbfgs", n_inducing=5, max_iter=2).fit(Xl, Xl[:, 0] > 0)
    assert big.optimizer_ == "lbfgs"


def test_bad_input():
    X = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match="at least 2 classes"):
        GPClassifier().fit(X, np.zeros(20))
    with pytest.raises(ValueError, match="inference"):
        GPClassifier(inference="exact").fit(X, np.arange(20) % 2)
    with pytest.raises(ValueError, match="kernel"):
        GPClassifier(kernel="matern").fit(X, np.arange(20) % 2)
    for params, match in [(dict(lr=np.inf), "lr must be a positive float"), (dict(ngd_lr=5.0), r"'ngd_lr' parameter of GPClassifier must be a float in the range \(0.0, 1.0\]"),
                          (dict(ngd_lr=0.0), "ngd_lr"), (dict(learn_inducing="no"), "'learn_inducing' parameter of GPClassifier must be an instance of 'bool'")]:
        with pytest.raises(ValueError, match=match):
            GPClassifier(**params).fit(X, np.arange(20) % 2)


def test_preset_registered():
    assert isinstance(hdgp.preset("GP-classifier", random_state=0), GPClassifier)


def test_confident_binary_probabilities_do_not_round_to_zero(monkeypatch):
    """A latent mean 12 standard deviations from 0: the first class's probability is Phi(-z)
    (1.8e-33), computed accurately in the tail; 1 - Phi(z), and torch's own ndtr(-z), round to 0
    from z = 8.3 on, so the log-probabilities were -inf (clipped to -708)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    clf = GPClassifier(n_inducing=10, random_state=0, max_iter=5).fit(X, (X[:, 0] > 0).astype(int))
    latent = (torch.tensor([12.0, -12.0, 0.5], dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    monkeypatch.setattr(clf, "_latent", lambda X: [latent])
    proba = clf.predict_proba(X[:3])
    tail = 0.5 * math.erfc(12.0 / math.sqrt(2.0))  # 1.78e-33
    assert proba[0, 0] == pytest.approx(tail, rel=1e-10) and proba[1, 1] == pytest.approx(tail, rel=1e-10)
    assert np.allclose(proba.sum(1), 1.0)
    assert np.log(tail) == pytest.approx(clf.predict_log_proba(X[:3])[0, 0], rel=1e-12)
