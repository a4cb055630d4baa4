"""OAKClassifier: latent Sobol indices find the relevant features; binary columns stay binary."""

import numpy as np
import pandas as pd
import pytest

import hdgp
from hdgp.estimators.oak_classifier import OAKClassifier

pytestmark = pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")


def _data(n=160, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.standard_normal(n), rng.standard_normal(n), rng.binomial(1, 0.5, n)])
    y = (2 * X[:, 0] + 1.5 * X[:, 2] - 0.75 + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def test_sobol_of_latent_function_ranks_relevant_features():
    X, y = _data()
    clf = OAKClassifier(max_order=2, binary_features=[2], n_inducing=15, max_iter=80, random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.85
    assert clf.encoder_.binary_features_ == [2] and list(clf.encoder_.levels_) == [2]
    # the inducing inputs of the declared binary column are observed levels (codes 0/1), not averages
    assert set(np.unique(clf.posteriors_[0].X[:, 2].numpy())) <= {0.0, 1.0}
    s = clf.sobol_indices_
    assert sum(s.values()) == pytest.approx(1.0)
    assert clf.sobol_order_.sum() == pytest.approx(1.0)
    assert s[("x0",)] > 0.3 and s[("x2",)] > 0.05
    assert s[("x1",)] < 0.05  # irrelevant feature
    proba = clf.predict_proba(X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_dataframe_with_string_category_and_preset():
    X, y = _data(n=120, seed=1)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": np.where(X[:, 2] > 0, "yes", "no")})
    clf = hdgp.preset("OAK-classifier", max_order=1, n_inducing=10, max_iter=40, random_state=0).fit(frame, y)
    assert set(clf.sobol_indices_) == {("a",), ("b",), ("c",)}
    assert clf.predict(frame.iloc[:3]).shape == (3,)
    with pytest.raises(ValueError, match="not seen during fit"):
        clf.predict(frame.assign(c="maybe").iloc[:3])


def test_many_level_categorical_keeps_inducing_inputs_on_level_codes():
    """A 30-level category exceeds k-means' own few-levels rule; the classifier still keeps codes."""
    rng = np.random.default_rng(3)
    n = 300
    level = rng.integers(0, 30, n)
    frame = pd.DataFrame({"a": rng.standard_normal(n), "c": pd.Categorical([f"l{i}" for i in level])})
    y = (frame["a"].to_numpy() + (level % 3 == 0) > 0.5).astype(int)
    clf = OAKClassifier(max_order=2, n_inducing=20, max_iter=30, random_state=0).fit(frame, y)
    codes = clf.posteriors_[0].X[:, 1].numpy()
    assert set(np.unique(codes)) <= set(range(30)) and len(np.unique(codes)) > 1
    assert np.isfinite(clf.predict_proba(frame)).all()


@pytest.mark.parametrize("n_features, expected", [(3, 3), (6, 4)])
def test_default_max_order_is_the_papers_classification_choice(n_features, expected):
    """max_order=None means min(D, 4) for classification (OAK paper Sec. 5.1), not the regressor's min(D, 10)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, n_features))
    clf = OAKClassifier(n_inducing=8, max_iter=2, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    assert clf.models_[0].kernel.order_variances.numel() == expected + 1
    assert clf.get_params()["max_order"] is None
    assert clf.sobol_order_.shape == (expected,)


def test_clip_inputs_reaches_the_encoder():
    X, y = _data()
    clf = OAKClassifier(max_order=1, clip_inputs=True, n_inducing=10, max_iter=30, random_state=0).fit(X, y)
    assert clf.encoder_.clip_inputs
    far = np.array([[X[:, 0].max() + 5.0, 0.0, 1.0]])
    edge = np.array([[X[:, 0].max(), 0.0, 1.0]])
    np.testing.assert_array_equal(clf.predict_proba(far), clf.predict_proba(edge))
