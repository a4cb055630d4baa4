"""OAKClassifier: latent Sobol indices find the relevant features; binary columns stay binary."""

import numpy as np
import pandas as pd
import pytest
import torch

import hdgp
from hdgp._input_summary import HISTOGRAM_BINS, summarize_inputs
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


def _interaction_data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.standard_normal((n, 3)), columns=["a", "b", "c"])
    frame["d"] = pd.Categorical(rng.choice(["u", "v", "w"], n))
    y = (2 * frame["a"] + frame["b"] * frame["c"] > 0).astype(int).to_numpy()
    return frame, y


@pytest.fixture(scope="module")
def latent_fit():
    frame, y = _interaction_data()
    clf = OAKClassifier(max_order=4, n_inducing=30, max_iter=60, random_state=0).fit(frame, y)
    return clf, frame, y


def test_latent_components_add_up_to_the_latent_mean(latent_fit):
    """f = c + Σ_u f_u over every term of the kernel (orders 0..4 of 4 features), so the
    component means plus the constant are the latent posterior mean."""
    import itertools

    clf, frame, _ = latent_fit
    total = clf.models_[0].constant.item() + clf.predict_component(frame.iloc[:20], ())
    for r in range(1, 5):
        for u in itertools.combinations(range(4), r):
            total = total + clf.predict_component(frame.iloc[:20], u)
    np.testing.assert_allclose(total, clf.predict_latent(frame.iloc[:20]), atol=1e-8)


def test_latent_component_of_the_other_class_is_negated(latent_fit):
    clf, frame, _ = latent_fit
    m1, s1 = clf.predict_component(frame.iloc[:10], "a", return_std=True)
    m0, s0 = clf.predict_component(frame.iloc[:10], "a", class_label=0, return_std=True)
    np.testing.assert_allclose(m0, -m1)
    np.testing.assert_allclose(s0, s1)
    np.testing.assert_allclose(clf.predict_component(frame.iloc[:10], ("b", "c"), class_label=1),
                               clf.predict_component(frame.iloc[:10], (1, 2)))
    # the label follows 2a: the component of a rises with a
    grid = frame.iloc[:1].loc[[frame.index[0]] * 2].assign(a=[-1.0, 1.0])
    low, high = clf.predict_component(grid, "a")
    assert high > low
    with pytest.raises(ValueError, match="not one of the classes"):
        clf.predict_component(frame.iloc[:3], "a", class_label=7)


def test_latent_component_plots_in_original_units(latent_fit, tmp_path):
    clf, frame, _ = latent_fit
    fig = clf.plot_components([("a",), ("d",), ("b", "c")], class_label=0)
    fig.savefig(tmp_path / "latent.png")
    line = fig.axes[0].lines[0]
    np.testing.assert_allclose([line.get_xdata().min(), line.get_xdata().max()],
                               [frame["a"].min(), frame["a"].max()], rtol=1e-6)
    # the curve is -f_a of class 1 on the same grid
    x = line.get_xdata()
    query = frame.iloc[[0] * len(x)].assign(a=x)
    np.testing.assert_allclose(line.get_ydata(), clf.predict_component(query, "a", class_label=0), atol=1e-8)
    assert "latent f of class 0" in fig.axes[0].get_ylabel()
    bars = next(ax for ax in fig.axes if ax.get_title().startswith("d "))
    assert [t.get_text() for t in bars.get_xticklabels()] == ["u", "v", "w"]
    default = clf.plot_components()  # the selected terms (components_) of order <= 2
    assert default.axes[0].get_title().startswith("a ")


def test_multiclass_latent_components_need_a_class(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes along x0
    clf = OAKClassifier(max_order=2, n_inducing=15, max_iter=40, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="pass class_label"):
        clf.predict_component(X[:3], 0)
    low = clf.predict_component(np.array([[-2.0, 0.0], [2.0, 0.0]]), 0, class_label=0)
    high = clf.predict_component(np.array([[-2.0, 0.0], [2.0, 0.0]]), 0, class_label=2)
    assert low[0] > low[1] and high[1] > high[0]  # class 0 lives at small x0, class 2 at large
    clf.plot_components([(0,)], class_label=2).savefig(tmp_path / "multi.png")
    with pytest.raises(ValueError, match="pass class_label"):
        clf.plot_components()


def test_latent_components_survive_save_and_load(latent_fit, tmp_path):
    clf, frame, _ = latent_fit
    path = hdgp.save(clf, tmp_path / "clf.hdgp")
    loaded = hdgp.load(path)
    np.testing.assert_allclose(loaded.predict_component(frame.iloc[:5], ("b", "c")),
                               clf.predict_component(frame.iloc[:5], ("b", "c")))
    loaded.plot_components([("a",)]).savefig(tmp_path / "loaded.png")


def test_input_summary_holds_ranges_typical_values_and_histograms():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.standard_normal(500), rng.choice([0.0, 1.0, 2.0], 500, p=[0.2, 0.5, 0.3]),
                         np.full(500, 4.0)])
    s = summarize_inputs(torch.as_tensor(X), level_columns=[1])
    assert s["n_rows"] == 500
    np.testing.assert_allclose(s["low"], X.min(0))
    np.testing.assert_allclose(s["high"], X.max(0))
    np.testing.assert_allclose(s["centre"], [X[:, 0].mean(), 1.0, 4.0])  # level column: its most frequent code
    assert s["counts"].shape == (3, HISTOGRAM_BINS) and s["edges"].shape == (3, HISTOGRAM_BINS + 1)
    np.testing.assert_array_equal(s["counts"].sum(1), 500)
    np.testing.assert_allclose(s["edges"][0, [0, -1]], [X[:, 0].min(), X[:, 0].max()])
    np.testing.assert_allclose(np.histogram(X[:, 0], HISTOGRAM_BINS)[0], s["counts"][0])
    np.testing.assert_allclose(s["edges"][2, [0, -1]], [3.5, 4.5])  # a constant column: a unit range around it


def test_model_file_does_not_grow_with_the_training_rows(tmp_path):
    """The classifier predicts from its inducing points; the plots need only a per-column summary,
    so 20× the training rows must not mean a 20× model file (the rows are not kept)."""
    sizes = []
    for n in (150, 3000):
        X, y = _data(n)
        clf = OAKClassifier(max_order=2, n_inducing=15, max_iter=5, random_state=0).fit(X, y)
        assert not hasattr(clf, "X_train_") and clf.input_summary_["n_rows"] == n
        sizes.append(hdgp.save(clf, tmp_path / f"clf{n}.hdgp").stat().st_size)
    assert sizes[1] < 1.1 * sizes[0]
    assert hdgp.workflow.learned_quantities(clf)["n_train"] == 3000


def test_components_of_files_that_kept_rows_or_neither(latent_fit, tmp_path):
    """Files saved on 2026-11-24 hold the transformed rows (X_train_) instead of the summary; older
    ones neither, and then plotting asks for a refit."""
    clf, frame, _ = latent_fit
    old = hdgp.load(hdgp.save(clf, tmp_path / "clf.hdgp"))
    del old.input_summary_
    with pytest.raises(ValueError, match="refit it to plot components"):
        old.plot_components([("a",)])
    old.X_train_ = clf._standardise(clf._check_X(frame), fit=False)  # the training rows, transformed
    a_old = old.plot_components([("a",), ("d",)]).axes[0].lines[0]
    a_new = clf.plot_components([("a",), ("d",)]).axes[0].lines[0]
    np.testing.assert_allclose(a_old.get_ydata(), a_new.get_ydata(), atol=1e-10)


@pytest.mark.parametrize("params, match", [(dict(max_sobol_terms=0), "max_sobol_terms must be a positive integer"),
                                           (dict(flow="yes"), "flow must be True, False or .auto."),
                                           (dict(order_variance_prior=None), "order_variance_prior must be True or False")])
def test_oak_parameters_are_validated_in_the_classifier_too(params, match):
    X = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match=match):
        OAKClassifier(**params).fit(X, np.arange(20) % 2)
    with pytest.raises(ValueError, match=match):
        hdgp.OAKRegressor(**params).fit(X, X[:, 0])


# ---------------------------------------------------------------- truncation (OAK Fig. 5, bottom row)
def _probit(z):
    from scipy.stats import norm

    return norm.cdf(z)


def test_truncated_probabilities_drop_exactly_the_left_out_components(latent_fit):
    """Keeping only ("a",) leaves the latent mean minus every other non-constant component,
    with the full latent variance: P(class 1) = Φ(m_T / sqrt(1 + s²))."""
    import itertools

    clf, frame, _ = latent_fit
    X = frame.iloc[:25]
    mean, std = clf.predict_latent(X, return_std=True)
    dropped = sum(clf.predict_component(X, u) for r in range(1, 5) for u in itertools.combinations(range(4), r)
                  if u != (0,))
    expected = _probit((mean - dropped) / np.sqrt(1 + std ** 2))
    np.testing.assert_allclose(clf.predict_proba_truncated(X, terms=["a"])[:, 1], expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(clf.predict_truncated(X, terms=[("a",)]),
                                  clf.classes_[(expected > 0.5).astype(int)])
    # every term kept: the full model
    np.testing.assert_allclose(clf.predict_proba_truncated(X, terms=clf.sobol_[0].terms), clf.predict_proba(X),
                               rtol=1e-10, atol=1e-13)


def test_components_are_the_shortest_ranked_prefix_reaching_the_threshold(latent_fit):
    clf, _, _ = latent_fit
    values = clf.sobol_[0].values.numpy()
    k = len(clf.components_)
    assert clf.components_ == clf.sobol_[0].terms[:k]
    assert values[:k].sum() >= clf.sobol_threshold - 1e-12 > values[:k - 1].sum()
    frame, y = _interaction_data()
    loose = OAKClassifier(max_order=4, n_inducing=30, max_iter=60, sobol_threshold=0.5, random_state=0).fit(frame, y)
    assert loose.components_ == [(0,)]  # the label follows 2a: a alone carries half the latent variance


def test_truncation_without_stored_components_uses_the_same_selection(latent_fit):
    """A model file written before components_ existed truncates to the same terms."""
    import copy

    clf, frame, _ = latent_fit
    old = copy.deepcopy(clf)
    del old.components_
    X = frame.iloc[:10]
    np.testing.assert_array_equal(old.predict_proba_truncated(X), clf.predict_proba_truncated(X))


def test_truncation_curve_ends_at_the_full_models_scores(latent_fit):
    """With every ranked term added the curve's last point is the full model scored by scikit-learn."""
    from sklearn.metrics import log_loss, roc_auc_score

    clf, frame, y = latent_fit
    X, y = frame.iloc[100:], y[100:]
    n_terms = len(clf.sobol_[0].terms)  # 15 terms of orders 1..4 of 4 features
    curve = clf.truncation_curve(X, y, max_terms=100)
    assert list(curve["n_terms"]) == list(range(1, n_terms + 1))
    proba = clf.predict_proba(X)
    assert curve["auc"][-1] == pytest.approx(roc_auc_score(y, proba[:, 1]), abs=1e-12)
    assert curve["accuracy"][-1] == pytest.approx(clf.score(X, y), abs=1e-12)
    assert curve["log_loss"][-1] == pytest.approx(log_loss(y, proba), rel=1e-10)
    np.testing.assert_allclose(curve["cumulative_sobol"], np.cumsum(clf.sobol_[0].values.numpy()))
    # the first point is the model truncated to the top-ranked term
    first = clf.predict_proba_truncated(X, terms=clf.sobol_[0].terms[:1])
    assert curve["auc"][0] == pytest.approx(roc_auc_score(y, first[:, 1]), abs=1e-12)
    assert len(clf.truncation_curve(X, y, max_terms=3)["auc"]) == 3


def test_multiclass_truncation_keeps_each_classes_own_ranking(tmp_path):
    from sklearn.metrics import roc_auc_score

    from hdgp.plotting import plot_truncation_curve

    rng = np.random.default_rng(1)
    X = rng.standard_normal((150, 3))
    y = np.array(["low", "mid", "high"])[np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])]
    clf = OAKClassifier(max_order=2, n_inducing=15, max_iter=40, random_state=0).fit(X[:100], y[:100])
    assert len(clf.components_) == 3 and all(isinstance(c, list) for c in clf.components_)
    curve = clf.truncation_curve(X[100:], y[100:], max_terms=6)
    assert curve["cumulative_sobol_by_class"].shape == (3, 6)
    np.testing.assert_allclose(curve["cumulative_sobol"], curve["cumulative_sobol_by_class"].mean(axis=0))
    # step 2 keeps each class's own top two terms: its latent mean minus its other components,
    # probit of each with the full latent variance, normalised over the classes (one-vs-rest)
    mean, std = clf.predict_latent(X[100:], return_std=True)
    all_terms = [(i,) for i in range(3)] + [(i, j) for i in range(3) for j in range(i + 1, 3)]
    columns = []
    for k, label in enumerate(clf.classes_):
        dropped = sum(clf.predict_component(X[100:], u, class_label=label) for u in all_terms
                      if u not in clf.sobol_[k].terms[:2])
        columns.append(_probit((mean[:, k] - dropped) / np.sqrt(1 + std[:, k] ** 2)))
    manual = np.column_stack(columns)
    manual /= manual.sum(axis=1, keepdims=True)
    assert curve["auc"][1] == pytest.approx(roc_auc_score(y[100:], manual, multi_class="ovr", labels=clf.classes_),
                                            abs=1e-12)
    plot_truncation_curve(curve, metric="auc").savefig(tmp_path / "curve.png")


@pytest.mark.parametrize("call, match", [
    (lambda clf, X, y: clf.truncation_curve(X, np.where(y == 1, 7, y)), "not classes of the fitted model"),
    (lambda clf, X, y: clf.truncation_curve(X, np.ones_like(y)), "at least two classes"),
    (lambda clf, X, y: clf.truncation_curve(X, y, max_terms=0), "max_terms must be a positive integer"),
    (lambda clf, X, y: clf.truncation_curve(X, y[:-1]), "rows but y has"),
    (lambda clf, X, y: clf.predict_proba_truncated(X, terms=["a", ("a",)]), "more than once"),
    (lambda clf, X, y: clf.predict_truncated(X, terms=["e"]), "Unknown column 'e'"),
])
def test_truncation_rejects_bad_input(latent_fit, call, match):
    clf, frame, y = latent_fit
    with pytest.raises(ValueError, match=match):
        call(clf, frame.iloc[:30], y[:30])


def test_default_latent_plot_draws_the_selected_terms(latent_fit):
    """Without terms, a classifier's plot draws its components_ of order <= 2 as a regressor's does (it drew
    every first- and second-order term, up to 12 panels of Sobol 0.000)."""
    clf, _, _ = latent_fit
    drawn = [u for u in clf.components_ if len(u) <= 2]
    assert len(drawn) < len([u for u in clf.sobol_[0].terms if len(u) <= 2])
    fig = clf.plot_components()
    titles = [ax.get_title().split("  (")[0] for ax in fig.axes if ax.get_visible() and ax.get_title()]
    names = list(clf.feature_names_in_)
    assert titles == [" × ".join(names[j] for j in u) for u in drawn]


def test_classifier_messages_and_curve_plot_defaults(tmp_path):
    from hdgp.plotting import plot_truncation_curve

    rng = np.random.default_rng(1)
    X = rng.standard_normal((90, 2))
    y = np.array(["low", "mid", "high"])[np.digitize(X[:, 0], [-0.5, 0.5])]
    clf = OAKClassifier(max_order=1, n_inducing=10, max_iter=20, random_state=0).fit(X, y)
    # the classes as the user wrote them, not np.str_('high')
    with pytest.raises(ValueError, match=r"pass class_label, one of \['high', 'low', 'mid'\]"):
        clf.predict_component(X[:2], 0)
    # a classifier's curve has no RMSE: the default metric is its AUC
    fig = plot_truncation_curve(clf.truncation_curve(X, y, max_terms=2))
    assert fig.axes[0].get_ylabel() == "test AUC"
    fig.savefig(tmp_path / "curve.png")


def test_auto_optimizer_switches_to_minibatches_earlier_than_the_gp_classifier():
    from hdgp.estimators import oak_classifier

    n_max = oak_classifier.FULL_BATCH_MAX_ROWS
    clf = OAKClassifier()
    assert [clf._resolve_optimizer(n, None) for n in (n_max, n_max + 1)] == ["lbfgs", "adam"]
    assert clf._resolve_optimizer(n_max + 1, n_max + 1) == "lbfgs"  # one batch holds the data
