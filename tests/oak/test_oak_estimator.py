"""OAKRegressor: FANOVA recovery, components, DataFrames with categoricals, bad input."""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import hdgp
from hdgp.data.synthetic import oak_2d
from hdgp._input_summary import HISTOGRAM_BINS
from hdgp.exceptions import HDGPWarning
from hdgp.estimators.oak import (FEATURE_START_LENGTHSCALE, LOW_NOISE_START_FACTOR, SMOOTH_START_LENGTHSCALE,
                                 SMOOTH_START_MIN_FEATURES, OAKRegressor)
from hdgp.estimators.oak_classifier import OAKClassifier


def fanova_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X[:, 0] ** 2 + 2 * X[:, 1] + X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = fanova_data()
    return OAKRegressor(max_order=2, random_state=0).fit(X, y), X, y


def test_recovers_true_fanova_shares(fitted):
    est, _, _ = fitted
    # x ~ N(0, I): Var(x0² - 1) = 2, Var(2 x1) = 4, Var(x0 x1) = 1; total 7
    truth = {("x0",): 2 / 7, ("x1",): 4 / 7, ("x0", "x1"): 1 / 7}
    for term, share in truth.items():
        assert est.sobol_indices_[term] == pytest.approx(share, abs=0.05)
    assert sum(est.sobol_indices_.values()) == pytest.approx(1.0)
    assert set(est.components_) == {(0,), (1,), (0, 1)}
    assert est.sobol_order_.sum() == pytest.approx(1.0)


def test_components_add_up_to_prediction(fitted):
    est, X, _ = fitted
    Xs = X[:10] + 0.1
    terms = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]
    total = est.predict_truncated(Xs, terms=terms)
    np.testing.assert_allclose(total, est.predict(Xs), rtol=1e-8, atol=1e-8)
    mean, std = est.predict_component(Xs, ("x0", "x1"), return_std=True)
    assert mean.shape == std.shape == (10,) and (std > 0).all()
    curve = est.truncation_curve(X[:50], X[:50, 0] ** 2 + 2 * X[:50, 1] + X[:50, 0] * X[:50, 1], max_terms=4)
    assert curve["rmse"][2] < curve["rmse"][0]
    assert np.all(np.diff(curve["cumulative_sobol"]) >= 0)
    with pytest.raises(ValueError, match="names a feature more than once"):
        est.predict_component(Xs, ("x0", "x0"))
    with pytest.raises(ValueError, match="lists a term more than once"):
        est.predict_truncated(Xs, terms=["x0", (0,)])


def test_components_are_in_the_units_of_the_target(fitted):
    """Fitting 3 + 10·y scales every component's mean and std by 10 (the constant goes to the mean).

    Equal up to the optimiser's stopping point (the standardised targets differ by rounding only)."""
    est, X, y = fitted
    scaled = OAKRegressor(max_order=2, random_state=0).fit(X, 3.0 + 10.0 * y)
    Xs = X[:10] + 0.1
    for term in [("x0",), ("x0", "x1")]:
        mean, std = est.predict_component(Xs, term, return_std=True)
        mean_s, std_s = scaled.predict_component(Xs, term, return_std=True)
        np.testing.assert_allclose(mean_s, 10.0 * mean, rtol=1e-4, atol=1e-4 * np.abs(mean_s).max())
        np.testing.assert_allclose(std_s, 10.0 * std, rtol=2e-3)
    np.testing.assert_allclose(scaled.predict(Xs), 3.0 + 10.0 * est.predict(Xs), rtol=1e-4, atol=1e-3)


def test_dataframe_with_categorical_and_binary_columns():
    rng = np.random.default_rng(1)
    n = 150
    df = pd.DataFrame({
        "age": rng.normal(40, 10, n),
        "city": pd.Categorical(rng.choice(["paris", "rome", "oslo"], n)),
        "member": rng.integers(0, 2, n),
        "const": np.ones(n),
    })
    effect = df["city"].map({"paris": 1.0, "rome": -1.0, "oslo": 0.0}).to_numpy()
    y = 0.05 * df["age"].to_numpy() + effect + 0.8 * df["member"].to_numpy() + 0.05 * rng.normal(size=n)
    est = OAKRegressor(max_order=2, random_state=0).fit(df, y)
    assert est.categorical_features_ == [1] and est.binary_features_ == [2]
    assert set(est.sobol_indices_) >= {("age",), ("city",), ("member",)}
    top = {t for t, _ in list(est.sobol_indices_.items())[:3]}
    assert top == {("age",), ("city",), ("member",)}
    pred = est.predict(df.iloc[:5])
    assert np.isfinite(pred).all()
    bad = df.iloc[:2].copy()
    bad["city"] = pd.Categorical(["london", "rome"])
    with pytest.raises(ValueError, match="not seen during fit"):
        est.predict(bad)
    # plots of every kind of term with discrete columns present (other columns held at valid codes)
    fig = est.plot_components([("age",), ("city",), ("member",), ("age", "member")], target_name="y")
    age, city, member, age_member = fig.axes[:4]
    assert [t.get_text() for t in city.get_xticklabels()] == ["oslo", "paris", "rome"]
    assert len(city.patches) == 3
    # the two-valued column is drawn at its two values, not as a curve between them
    assert [t.get_text() for t in member.get_xticklabels()] == ["0", "1"] and len(member.patches) == 2
    two_rows = df.iloc[:2].assign(member=[0, 1])
    np.testing.assert_allclose([b.get_height() for b in member.patches], est.predict_component(two_rows, "member"))
    # a continuous × discrete interaction: one curve per level (unlabelled lines, matplotlib's
    # "_"-prefixed labels, are the ±2σ band edges and the rug)
    assert sorted(line.get_label() for line in age_member.lines if not line.get_label().startswith("_")) \
        == ["member=0", "member=1"]
    assert age.get_ylabel() == "effect on y"
    [age_hist] = [ax for ax in fig.axes[4:] if ax.patches and ax.bbox.bounds == age.bbox.bounds]
    [steps] = age_hist.patches  # training histogram behind the curve, over the training range in years
    density, edges, _ = steps.get_data()
    assert (density * np.diff(edges)).sum() == pytest.approx(n) and len(density) == HISTOGRAM_BINS
    np.testing.assert_allclose([edges[0], edges[-1]], [df["age"].min(), df["age"].max()], rtol=1e-6)


def test_clip_inputs_holds_predictions_at_the_training_boundary(fitted):
    est, X, _ = fitted
    clipped = copy.deepcopy(est).set_params(clip_inputs=True)  # only used at prediction
    np.testing.assert_array_equal(clipped.input_min_, X.min(0))
    np.testing.assert_array_equal(clipped.input_max_, X.max(0))
    inside = X[:5]
    np.testing.assert_allclose(clipped.predict(inside), est.predict(inside), rtol=0, atol=0)
    outside = np.array([[X[:, 0].max() + 3.0, 0.0, X[:, 2].min() - 2.0]])
    boundary = np.array([[X[:, 0].max(), 0.0, X[:, 2].min()]])
    np.testing.assert_allclose(clipped.predict(outside), est.predict(boundary), rtol=0, atol=0)
    np.testing.assert_allclose(clipped.predict_component(outside, 0), est.predict_component(boundary, 0))
    assert not np.allclose(est.predict(outside), est.predict(boundary))
    with pytest.raises(ValueError, match="clip_inputs"):
        OAKRegressor(clip_inputs="yes").fit(X, X[:, 0])


def test_numeric_unknown_level_and_bad_declarations():
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.normal(size=40), rng.integers(0, 3, 40)])
    y = X[:, 0] + X[:, 1]
    est = OAKRegressor(max_order=1, categorical_features=[1], random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="not seen during fit"):
        est.predict(np.array([[0.0, 7.0]]))
    with pytest.raises(ValueError, match="non-integer"):
        OAKRegressor(categorical_features=[0]).fit(X, y)
    # a column declared binary refuses a third value at predict time
    X2 = np.column_stack([X[:, 0], np.where(X[:, 1] > 0, 2.0, 0.0)])
    declared = OAKRegressor(max_order=1, binary_features=[1], random_state=0, max_iter=5).fit(X2, y)
    with pytest.raises(ValueError, match="not seen during fit"):
        declared.predict(np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="max_order"):
        OAKRegressor(max_order=3).fit(X, y)
    with pytest.raises(ValueError, match="measure"):
        OAKRegressor(measure="uniform").fit(X, y)
    for count in (True, 2.0, 0):
        with pytest.raises(ValueError, match="gmm_components must be a positive integer"):
            OAKRegressor(measure="gmm", gmm_components=count).fit(X, y)
    with pytest.raises(ValueError, match="flow must be True, False or 'auto' or 'choose'"):
        OAKRegressor(flow="yes").fit(X, y)


def test_flow_auto_on_the_papers_uniform_example_is_the_unwarped_fit():
    # eq. (5): x ~ U(-1, 1)^2; the default flow stretches the uniform edges (RMSE vs f 0.064 against 0.032)
    X, y = oak_2d(n=300, rng=0)
    auto = OAKRegressor(max_order=2, flow="auto", random_state=0).fit(X, y)
    plain = OAKRegressor(max_order=2, flow=False, random_state=0).fit(X, y)
    assert not auto.flow_.warped_.any()
    np.testing.assert_allclose(auto.predict(X[:20]), plain.predict(X[:20]), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("measure", ["empirical", "gmm"])
def test_other_measures_fit(measure):
    X, y = fanova_data(n=120, seed=3)
    est = OAKRegressor(max_order=2, measure=measure, flow=False, random_state=0).fit(X, y)
    assert est.sobol_indices_[("x1",)] == max(est.sobol_indices_.values())
    assert np.isfinite(est.predict(X[:5])).all()


def test_preset():
    assert isinstance(hdgp.preset("OAK", max_order=2), OAKRegressor)


def test_plots_in_original_units(fitted, tmp_path):
    import matplotlib

    est, X, y = fitted
    fig = est.plot_components([(0,), (0, 1)])
    fig.savefig(tmp_path / "components.png")
    # the 1-D panel's x axis spans the raw training range of x0 (flow inverted)
    line = fig.axes[0].lines[0]
    np.testing.assert_allclose([line.get_xdata().min(), line.get_xdata().max()], [X[:, 0].min(), X[:, 0].max()], rtol=1e-6)
    from hdgp.plotting import plot_truncation_curve

    plot_truncation_curve(est.truncation_curve(X[:40], y[:40], max_terms=3)).savefig(tmp_path / "curve.png")
    assert matplotlib.get_backend().lower() == "agg"
    with pytest.raises(ValueError, match="up to order 2 .max_order., so it has no component x0 × x1 × x2"):
        est.plot_components([(0, 1, 2)])


def test_truncation_curve_rejects_bad_max_terms_and_y(fitted):
    """max_terms=-1 sliced off the last ranked term, and a y of one value broadcast against every row."""
    est, X, y = fitted
    with pytest.raises(ValueError, match="max_terms must be a positive integer"):
        est.truncation_curve(X[:20], y[:20], max_terms=-1)
    with pytest.raises(ValueError, match="X has 20 rows but y has 1"):
        est.truncation_curve(X[:20], y[:1])
    assert len(est.truncation_curve(X[:20], y[:20], max_terms=2)["rmse"]) == 2


def test_pickle_roundtrip(fitted):
    import pickle

    est, X, _ = fitted
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_allclose(clone.predict(X[:5]), est.predict(X[:5]))
    assert clone.sobol_indices_ == est.sobol_indices_


def test_many_features_warn_about_cost_and_finish():
    from hdgp.exceptions import CostWarning

    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 35))
    y = X[:, 0] + 0.1 * rng.normal(size=30)
    with pytest.warns(CostWarning, match="enumerating only orders"):
        est = OAKRegressor(max_order=6, max_sobol_terms=2000, max_iter=5, flow=False).fit(X, y)
    # per-order totals stay exact even though only orders <= 2 were enumerated term by term
    assert est.sobol_order_.shape == (6,) and est.sobol_order_.sum() == pytest.approx(1.0)
    assert max(len(t) for t in est.sobol_indices_) == 2


@pytest.mark.parametrize("d", [SMOOTH_START_MIN_FEATURES - 1, SMOOTH_START_MIN_FEATURES])
def test_many_continuous_features_also_start_smooth_and_keep_the_better_fit(d):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(40, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    est = OAKRegressor(max_order=2, max_iter=8, flow=False).fit(X, y)
    starts = ["authors", "smooth"] if d >= SMOOTH_START_MIN_FEATURES else ["authors"]
    assert list(est.start_losses_) == starts
    assert est.fit_result_.loss == min(est.start_losses_.values())
    sparse = OAKRegressor(max_order=2, max_iter=3, flow=False, inference="sparse", n_inducing=10).fit(X, y)
    assert list(sparse.start_losses_) == starts and sparse.fit_result_.loss == min(sparse.start_losses_.values())
    svgp = OAKRegressor(max_order=2, max_iter=3, flow=False, inference="variational", n_inducing=10).fit(X, y)
    assert list(svgp.start_losses_) == ["authors"]  # minibatch SVGP keeps the authors' start
    X_t = torch.as_tensor(X, dtype=torch.float64)
    if d >= SMOOTH_START_MIN_FEATURES:
        est._candidate_ = 1
        assert float(est._make_kernel(X_t).base_kernel.lengthscale.detach().min()) == SMOOTH_START_LENGTHSCALE
    est._candidate_ = 0
    assert float(est._make_kernel(X_t).base_kernel.lengthscale.detach().max()) == 1.0


def test_auto_two_valued_column_matches_binary_kernel_and_accepts_unseen_values():
    """binary_features="auto": a constrained SE kernel under the two-point measure. On the two
    training values it spans the binary kernel's zero-mean functions (same fit); between them
    it interpolates, where the binary kernel can only refuse."""
    rng = np.random.default_rng(3)
    n = 120
    X = np.column_stack([rng.normal(size=n), np.where(rng.random(n) < 0.3, 2.0, 0.0)])
    y = np.sin(X[:, 0]) + 0.75 * X[:, 1] + 0.1 * rng.normal(size=n)
    auto = OAKRegressor(max_order=2, random_state=0).fit(X, y)
    declared = OAKRegressor(max_order=2, binary_features=[1], random_state=0).fit(X, y)
    assert auto.two_point_features_ == [1] and auto.binary_features_ == [1] and auto.levels_ == {}
    assert declared.two_point_features_ == [] and list(declared.levels_) == [1]
    assert auto.two_point_values_[1] == pytest.approx((0.0, 2.0, np.mean(X[:, 1] == 2.0)))
    grid = np.column_stack([np.linspace(-2, 2, 30), np.tile([0.0, 2.0], 15)])
    np.testing.assert_allclose(auto.predict(grid), declared.predict(grid), atol=0.02)
    assert auto.log_marginal_likelihood_value_ == pytest.approx(declared.log_marginal_likelihood_value_, abs=0.05)
    # the two-point kernel integrates to zero under its measure at every x, seen or not
    stack = auto.kernel_.base_kernel
    two_point = stack.kernels[1]
    x = torch.tensor([[0.0], [1.0], [0.5], [3.0]], dtype=torch.float64).reshape(1, -1, 1)
    support = torch.tensor([0.0, 1.0], dtype=torch.float64).reshape(1, -1, 1)
    K = two_point.forward(x, support)[0]
    weights = two_point.measure.weights[0]
    np.testing.assert_allclose((K @ weights).detach().numpy(), 0.0, atol=1e-12)
    # an unseen middle value gets a finite prediction between the two levels' predictions
    lo, mid, hi = auto.predict(np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 2.0]]))
    assert lo < mid < hi
    # Sobol shares: the binary effect is found either way
    assert auto.sobol_indices_[("x1",)] == pytest.approx(declared.sobol_indices_[("x1",)], abs=0.05)


def _frame_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    a, c = rng.normal(size=n), rng.choice(["u", "v", "w"], n)
    return rng, a, c, a + 2 * (c == "u")


def test_an_array_after_a_dataframe_fit_holds_level_values_not_codes():
    _, a, c, y = _frame_data()
    frame = pd.DataFrame({"a": a, "c": c})
    est = OAKRegressor(max_order=2, max_iter=5, random_state=0).fit(frame, y)
    with pytest.warns(UserWarning, match="does not have valid feature names"):  # scikit-learn's, kept
        np.testing.assert_array_equal(est.predict(frame.to_numpy()), est.predict(frame))
    with pytest.raises(ValueError, match=r"Column 'c' has level\(s\) 1 not seen during fit \(known: u, v, w\)"):
        est.predict(np.array([[0.1, 1.0]]))  # a code is not a level


def test_an_object_array_with_text_cells_reads_like_a_table_of_columns_x0_x1():
    """A ColumnTransformer without pandas output hands over an object array: its text columns are
    categorical, its numeric ones continuous, the names x0, x1, ... as for any array."""
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    _, a, c, y = _frame_data()
    frame = pd.DataFrame({"a": a, "c": c})
    as_table = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(frame.set_axis(["x0", "x1"], axis=1), y)
    objects = frame.to_numpy(dtype=object)
    est = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(objects, y)
    assert est.categorical_features_ == [1] and not hasattr(est, "feature_names_in_")
    assert set(est.sobol_indices_) == set(as_table.sobol_indices_) == {("x0",), ("x1",), ("x0", "x1")}
    np.testing.assert_allclose(est.predict(objects), as_table.predict(frame.set_axis(["x0", "x1"], axis=1)),
                               atol=1e-8)
    with pytest.raises(ValueError, match=r"Column 'x1' has level\(s\) z not seen during fit"):
        est.predict(np.array([[0.1, "z"]], dtype=object))
    pipe = make_pipeline(make_column_transformer((StandardScaler(), ["a"]), remainder="passthrough"),
                         OAKRegressor(categorical_features=[1], max_order=2, max_iter=20, random_state=0))
    assert pipe.fit(frame, y).predict(frame.iloc[:4]).shape == (4,)


def test_text_columns_are_found_by_position_whatever_their_label_type():
    """Integer column labels: the category column used to be read as a continuous code."""
    _, a, c, y = _frame_data()
    by_int = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(pd.DataFrame({0: a, 1: pd.Categorical(c)}), y)
    by_str = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(pd.DataFrame({"0": a, "1": c}), y)
    assert by_int.categorical_features_ == by_str.categorical_features_ == [1]
    assert set(by_int.sobol_indices_) == {("0",), ("1",), ("0", "1")}
    new = pd.DataFrame({0: [0.1, 0.5], 1: ["v", "u"]})
    np.testing.assert_allclose(by_int.predict(new), by_str.predict(new.set_axis(["0", "1"], axis=1)), atol=1e-8)
    fig = by_int.plot_components([("1",)])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["u", "v", "w"]


@pytest.mark.parametrize("Estimator", [OAKRegressor, OAKClassifier])
def test_duplicate_column_names_are_a_clear_error(Estimator):
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(20, 3)), columns=["a", "a", "b"])
    with pytest.raises(ValueError, match="Column names must be unique; 'a' appears more than once"):
        Estimator(max_iter=2).fit(frame, np.arange(20) % 2)


def _unknown_level_model(handle_unknown, frame=False):
    rng = np.random.default_rng(3)
    a, c = rng.normal(size=80), rng.integers(0, 3, 80)
    y = np.sin(a) + np.array([1.0, -1.0, 0.0])[c] + 0.5 * a * (c == 0) + 0.05 * rng.normal(size=80)
    if frame:
        X = pd.DataFrame({"a": a, "c": pd.Categorical(np.array(["u", "v", "w"])[c])})
    else:
        X = np.c_[a, c]
    est = OAKRegressor(max_order=2, categorical_features=None if frame else [1], handle_unknown=handle_unknown,
                       random_state=0).fit(X, y)
    return est, np.bincount(c) / len(c)


@pytest.mark.parametrize("frame", [False, True])
def test_an_unknown_level_predicts_the_average_over_the_training_levels(frame):
    """With handle_unknown="ignore" the categorical component and its interaction are zero at an
    unseen level; by the constraint they average to zero over the training levels, so the
    prediction there is the frequency-weighted mean of the predictions at the known levels."""
    est, freq = _unknown_level_model("ignore", frame)
    a = np.linspace(-1.5, 1.5, 7)
    levels, unseen = (["u", "v", "w"], "zz") if frame else ([0.0, 1.0, 2.0], 9.0)

    def rows(level):
        if frame:
            return pd.DataFrame({"a": a, "c": [level] * len(a)})
        return np.c_[a, np.full(len(a), level)]

    average = sum(f * est.predict(rows(level)) for f, level in zip(freq, levels))
    mean, std = est.predict(rows(unseen), return_std=True)
    np.testing.assert_allclose(mean, average, atol=1e-8)
    assert np.all(np.isfinite(std)) and np.all(std > 0)
    # the feature's main effect is zero there, and adds no variance
    effect, effect_std = est.predict_component(rows(unseen), ("c",) if frame else (1,), return_std=True)
    assert np.all(effect == 0) and np.all(effect_std == 0)
    # the other component is unchanged
    np.testing.assert_allclose(est.predict_component(rows(unseen), ("a",) if frame else (0,)),
                               est.predict_component(rows(levels[0]), ("a",) if frame else (0,)))
    warner, _ = _unknown_level_model("warn", frame)
    with pytest.warns(HDGPWarning, match="not seen during fit in 7 row") as caught:
        np.testing.assert_allclose(warner.predict(rows(unseen)), mean)
    assert caught[0].filename == __file__  # attributed to the caller's line, array or DataFrame
    est.set_params(handle_unknown="Error")  # set after fit: checked where it is used
    with pytest.raises(ValueError, match="handle_unknown must be one of"):
        est.predict(rows(unseen))
    with pytest.raises(ValueError, match="handle_unknown='ignore'"):
        _unknown_level_model("error", frame)[0].predict(rows(unseen))


def test_handle_unknown_is_validated_and_reaches_the_classifier():
    with pytest.raises(ValueError, match="handle_unknown must be one of"):
        OAKRegressor(handle_unknown="skip").fit(np.c_[np.arange(5.0)], np.arange(5.0))
    rng = np.random.default_rng(4)
    X = np.c_[rng.normal(size=60), rng.integers(0, 3, 60)]
    y = (X[:, 0] + (X[:, 1] == 1) > 0.5).astype(int)
    clf = OAKClassifier(max_order=2, categorical_features=[1], handle_unknown="ignore", max_iter=20,
                        random_state=0).fit(X, y)
    proba = clf.predict_proba(np.array([[0.3, 5.0]]))
    assert proba.shape == (1, 2) and np.isfinite(proba).all()
    # the setting is read at prediction, as the regressor's: no refit needed to change it
    with pytest.raises(ValueError, match="not seen during fit"):
        clf.set_params(handle_unknown="error").predict(np.array([[0.3, 5.0]]))
    with pytest.warns(HDGPWarning, match="not seen during fit in 1 row") as caught:
        np.testing.assert_allclose(clf.set_params(handle_unknown="warn").predict_proba([[0.3, 5.0]]), proba)
    assert caught[0].filename == __file__
    assert clf.encoder_.handle_unknown == "ignore"  # the fitted encoder is not changed by it


def test_unknown_level_test_agrees_with_the_codes_of_a_dataframe_column():
    """True/False are 1/0 to pandas' isin but not to the level index: both must call them unknown."""
    rng = np.random.default_rng(5)
    a, c = rng.normal(size=60), rng.integers(0, 3, 60)
    est = OAKRegressor(max_order=2, max_iter=10, random_state=0).fit(
        pd.DataFrame({"a": a, "c": pd.Series(c, dtype=object)}), np.sin(a) + c)
    with pytest.raises(ValueError, match=r"level\(s\) False, True not seen during fit"):
        est.predict(pd.DataFrame({"a": [0.0, 0.0], "c": pd.Series([False, True], dtype=object)}))


def test_missing_categories_are_marginalised_and_unused_ones_get_clear_errors():
    _, a, c, y = _frame_data()
    gaps = pd.Series(np.where(np.arange(60) % 7 == 0, None, c), dtype="category")
    fitted = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(pd.DataFrame({"a": a, "c": gaps}), y)
    # a missing level: the average of the predictions over the levels, weighted by their training frequencies
    levels, counts = np.unique(gaps.dropna().astype(str), return_counts=True)
    each = fitted.predict(pd.DataFrame({"a": [0.3] * len(levels), "c": pd.Categorical(levels)}))
    missing = fitted.predict(pd.DataFrame({"a": [0.3], "c": pd.Categorical([None], categories=levels)}))
    np.testing.assert_allclose(missing[0], each @ (counts / counts.sum()))
    est = OAKRegressor(max_order=1, max_iter=5, random_state=0).fit(
        pd.DataFrame({"a": a, "c": pd.Categorical(c, categories=["u", "v", "w", "zz"])}), y)
    assert est.frame_levels_["c"] == ["u", "v", "w"]  # the unused category is not a level
    with pytest.raises(ValueError, match=r"level\(s\) zz not seen during fit \(known: u, v, w\); map them"):
        est.predict(pd.DataFrame({"a": [0.0], "c": ["zz"]}))


def test_declarations_by_name_single_value_and_binary_text():
    rng, a, c, y = _frame_data()
    codes = rng.integers(0, 3, 60)
    assert OAKRegressor(categorical_features=1, max_iter=5).fit(np.c_[a, codes], y).categorical_features_ == [1]
    named = OAKRegressor(categorical_features="code", max_iter=5).fit(pd.DataFrame({"a": a, "code": codes}), y)
    assert named.categorical_features_ == [1]
    with pytest.raises(ValueError, match="mixes booleans"):
        OAKRegressor(categorical_features=[False, 1]).fit(np.c_[a, codes], y)
    # a two-level text column declared binary gets the binary kernel (it is categorical only by default)
    sex = rng.choice(["M", "F"], 60)
    est = OAKRegressor(binary_features=["sex"], max_iter=5).fit(pd.DataFrame({"a": a, "sex": sex}), y)
    assert est.binary_features_ == [1] and est.categorical_features_ == []
    with pytest.raises(ValueError, match=r"\['sex'\] are declared both binary and categorical"):
        OAKRegressor(binary_features=["sex"], categorical_features=["sex"]).fit(pd.DataFrame({"a": a, "sex": sex}), y)


def test_nonpositive_value_of_a_log_transformed_feature():
    """A zero in a feature that was positive in training (log-transformed by "auto") is predicted,
    not refused; a flow from a model file without the continuation names the column."""
    rng, a, c, y = _frame_data()
    df = pd.DataFrame({"c": c, "u": rng.uniform(size=60), "s": rng.lognormal(size=60)})
    est = OAKRegressor(max_order=1, max_iter=5, random_state=0).fit(df, y)
    assert est.flow_.use_log_.tolist() == [False, True]
    query = pd.DataFrame({"c": ["u", "u"], "u": [0.5, 0.5], "s": [0.0, -1.0]})
    mean, std = est.predict(query, return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    del est.flow_.log_min_
    with pytest.raises(ValueError, match="Feature 's' was log-transformed"):
        est.predict(query)


def test_float32_model_has_the_float64_sobol_indices():
    """The quadratic forms cancel: in float32 they gave an index of -0.017 where float64 gives 0.001."""
    X = np.random.default_rng(2).normal(size=(100, 5))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.1 * np.random.default_rng(2).normal(size=100)
    est = OAKRegressor(max_order=3, dtype="float32", max_iter=40, random_state=0).fit(X, y)
    values = np.array(list(est.sobol_indices_.values()))
    assert values.min() >= 0 and values.sum() == pytest.approx(1, abs=1e-9)
    # x1 and x2 act only through their product: their main effects have no variance
    assert est.sobol_indices_[("x1",)] < 0.005 and est.sobol_indices_[("x2",)] < 0.005


def test_array_columns_are_named_x0_x1_in_declarations_as_in_the_output():
    """An array's features are reported as x0, x1, ... (sobol_indices_, predict_component), and
    categorical_features may name them so too; an unknown name lists the valid ones."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=40), rng.integers(0, 3, 40)])
    y = X[:, 0] + X[:, 1]
    by_name = OAKRegressor(categorical_features=["x1"], max_order=2, max_iter=5).fit(X, y)
    by_index = OAKRegressor(categorical_features=[1], max_order=2, max_iter=5).fit(X, y)
    assert list(by_name.levels_) == [1] and by_name.sobol_indices_ == by_index.sobol_indices_
    with pytest.raises(ValueError, match="Unknown column 'x2'; the features are 'x0', 'x1'"):
        OAKRegressor(categorical_features=["x2"]).fit(X, y)
    with pytest.raises(ValueError, match=r"non-integer numbers \(e\.g\. -?\d\.\d+\)"):  # a plain number, no numpy repr
        OAKRegressor(categorical_features=["x0"]).fit(X, y)


def test_component_histogram_is_a_density_in_original_units():
    """The summary's bins are equal-width in the flow's units, so unequal in original units; the plot
    moves their rows onto equal-width bins of the original units and draws counts per unit width,
    whose areas add up to the training rows (a uniform feature drawn with raw counts of the flow's
    bins showed a false peak where the flow compresses the axis)."""
    from matplotlib.patches import StepPatch

    from hdgp._input_summary import input_summary
    from hdgp.plotting import _original_units

    rng = np.random.default_rng(1)
    X = np.column_stack([rng.lognormal(size=120), rng.normal(size=120)])
    # a linear axis: with the flow's log x the axis is logarithmic and the bins equal on it
    # (tests/oak/test_plot_components.py::test_log_transformed_features_get_log_axes)
    est = OAKRegressor(max_order=1, max_iter=5, random_state=0, log_transform=False).fit(X, np.log(X[:, 0]) + X[:, 1])
    flow_widths = np.diff(_original_units(est, 0, input_summary(est)["edges"][0]))
    assert flow_widths.max() > 2 * flow_widths.min()  # the flow made its bins unequal in original units
    fig = est.plot_components([(0,)])
    (patch,) = [p for ax in fig.axes for p in ax.patches if isinstance(p, StepPatch)]
    density, edges = patch.get_data()[:2]
    widths = np.diff(edges)
    np.testing.assert_allclose(widths, widths[0])
    np.testing.assert_allclose([edges[0], edges[-1]], [X[:, 0].min(), X[:, 0].max()], rtol=1e-6)
    assert np.sum(density * widths) == pytest.approx(120)
    # a lognormal's histogram falls from its first bins to its tail
    assert density[:3].max() > 5 * density[-10:].max()


def test_an_identifier_like_categorical_column_warns():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=30), "id": [f"row{i}" for i in range(30)]})
    with pytest.warns(hdgp.exceptions.HDGPWarning, match="'id' has 30 levels in 30 rows"):
        OAKRegressor(max_order=1, max_iter=2).fit(frame, frame["a"] ** 2)


def test_astronomical_inputs_give_a_finite_full_covariance():
    """The flow sends 1e300 to +inf; the full predictive covariance at two such points stays finite
    and its diagonal is the variance that return_std gives."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (60, 2))
    est = OAKRegressor(max_order=2, random_state=0, max_iter=50).fit(X, np.sin(3 * X[:, 0]) + X[:, 1])
    queries = np.array([[1e300, 0.0], [0.0, 0.0], [1e300, 0.5], [-1e300, 0.0]])
    mean, cov = est.predict(queries, return_cov=True)
    _, std = est.predict(queries, return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(cov).all()
    np.testing.assert_allclose(np.diag(cov), std**2, rtol=1e-10)


def test_feature_starts_train_one_start_per_continuous_feature_and_keep_the_lowest():
    # x0: 25 codes with unrelated effects (a lookup table: fine detail), x1 smooth, x2 two-point
    rng = np.random.default_rng(0)
    effects, codes = rng.normal(size=25), rng.integers(0, 25, 80)
    X = np.column_stack([codes, rng.normal(size=80), rng.integers(0, 2, 80)]).astype(float)
    y = effects[codes] + 0.5 * X[:, 1] + 0.3 * X[:, 2] + 0.05 * rng.normal(size=80)
    # flow=True: the lookup-table codes are evenly spread, which the default flow="auto" leaves unwarped
    plain = OAKRegressor(max_order=2, flow=True, random_state=0).fit(X, y)
    est = OAKRegressor(max_order=2, flow=True, feature_starts=True, random_state=0).fit(X, y)
    assert list(est.start_losses_) == ["authors", "short x0", "short x1"]  # not the two-point column
    assert est.start_losses_["authors"] == pytest.approx(plain.fit_result_.loss, rel=1e-9)  # the same first fit
    assert est.fit_result_.loss == min(est.start_losses_.values()) <= plain.fit_result_.loss
    X_t = torch.as_tensor(est._transform_inputs(X, fit=False), dtype=torch.float64)
    for candidate, position in ((1, 0), (2, 1)):
        est._candidate_ = candidate
        start = est._make_kernel(X_t).base_kernel.kernels[0].lengthscale.detach().view(-1)
        assert float(start[position]) == pytest.approx(FEATURE_START_LENGTHSCALE)
        assert float(start[1 - position]) == 1.0
    with pytest.raises(ValueError, match="feature_starts must be True or False"):
        OAKRegressor(feature_starts="yes").fit(X, y)
    # a warm start from a feature start, after feature_starts is switched off, starts from the fitted model
    est.set_params(warm_start=True).fit(X, y)
    won = est.best_candidate_
    assert won > 0  # the short start of the lookup-table column x0 ends lower
    est.set_params(feature_starts=False).fit(X, y)
    assert est.best_candidate_ == won and list(est.start_losses_) == ["warm"]


@pytest.mark.data
def test_feature_starts_reach_the_optimum_of_the_authors_code_on_machine(data_dir):
    # machine, split 0 of the OAK paper's own splits: from the authors' start L-BFGS leaves the first
    # column smooth and unused; the authors' code (and a start with that column short) reach an
    # optimum about 7 nats higher where it carries fine detail, and test RMSE falls with it
    from hdgp.data.bayesian_benchmarks import load_bb_split
    from hdgp.metrics import rmse

    X, y, X_test, y_test = load_bb_split("machine", 0, data_dir)
    # the paper's flow on every feature and all orders (the defaults before flow="auto" and the chosen order)
    plain = OAKRegressor(max_order=6, flow=True, random_state=0).fit(X, y)
    est = OAKRegressor(max_order=6, flow=True, feature_starts=True, random_state=0).fit(X, y)
    assert min(est.start_losses_, key=est.start_losses_.get) == "short x0"
    assert (plain.fit_result_.loss - est.fit_result_.loss) * len(y) > 5.0
    assert rmse(y_test, est.predict(X_test)) < rmse(y_test, plain.predict(X_test)) - 0.05


def test_low_noise_start_trains_from_noise_near_its_bound_and_keeps_the_lowest():
    # a noise-free smooth function: the low-noise start must end at least as low as the default one
    rng = np.random.default_rng(3)
    X = rng.normal(size=(70, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2
    # flow=True: the same flow for both (the default "choose" keeps whichever flow has the higher evidence)
    plain = OAKRegressor(max_order=2, flow=True, random_state=0).fit(X, y)
    est = OAKRegressor(max_order=2, flow=True, low_noise_start=True, feature_starts=True, random_state=0).fit(X, y)
    assert list(est.start_losses_) == ["authors", "low noise", "short x0", "short x1", "short x2"]
    assert est.start_losses_["authors"] == pytest.approx(plain.fit_result_.loss, rel=1e-9)
    assert est.fit_result_.loss == min(est.start_losses_.values()) <= plain.fit_result_.loss
    est._candidate_ = 1
    model = est._build_model(torch.as_tensor(est._transform_inputs(X, fit=False), dtype=torch.float64))
    assert float(model.likelihood.noise) == pytest.approx(LOW_NOISE_START_FACTOR * est.noise_lower_bound)
    assert float(model.kernel.base_kernel.lengthscale.detach().max()) == 1.0  # otherwise the authors' start
    with pytest.raises(ValueError, match="low_noise_start must be True or False"):
        OAKRegressor(low_noise_start=1).fit(X, y)


@pytest.mark.data
def test_low_noise_start_reaches_the_optimum_of_the_authors_code_on_energy(data_dir):
    # energy, split 1 of the OAK paper's own splits: nearly noise-free simulation data; from the
    # default noise start L-BFGS ends with noise 2e-3, from a low one about 45 nats higher
    from hdgp.data.bayesian_benchmarks import load_bb_split
    from hdgp.metrics import rmse

    X, y, X_test, y_test = load_bb_split("energy", 1, data_dir)
    est = OAKRegressor(low_noise_start=True, random_state=0).fit(X, y)
    losses = est.start_losses_
    assert (losses["authors"] - losses["low noise"]) * len(y) > 20.0 and est.fit_result_.loss == losses["low noise"]
    assert rmse(y_test, est.predict(X_test)) < 0.035  # 0.042 from the default start alone


def test_capped_sobol_enumeration_is_reported_where_components_fall_short():
    """max_sobol_terms=4 on 4 features enumerates first-order terms only; x0*x1 carries most of the
    variance, so components_ (all four first-order terms, 8 % of it) silently dropped the interaction
    from predict_truncated and the summary listed only first-order terms."""
    from hdgp.exceptions import CostWarning

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (60, 4))
    y = X[:, 0] * X[:, 1] + 0.3 * X[:, 2] + 0.05 * rng.normal(size=60)
    with pytest.warns(CostWarning, match=r"components_ holds the enumerated terms \(orders <= 1\).*Raise max_sobol_terms"):
        model = OAKRegressor(max_iter=40, random_state=0, max_sobol_terms=4).fit(X, y)
    share = float(model.sobol_order_[1:].sum())
    assert share > 0.5 and sum(model.sobol_indices_.values()) == pytest.approx(1 - share, abs=1e-9)
    assert f"terms of order > 1 not enumerated (max_sobol_terms); together they carry {share:.3f}" in hdgp.summary(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostWarning)
        OAKRegressor(max_iter=40, random_state=0).fit(X, y)  # every order enumerated: no warning


def test_order_raised_from_the_data_grows_the_added_orders():
    """max_order=None on six features fits order 3 first; a fourth-order truth puts Sobol mass on order 3,
    the refit at order D starts its added orders near zero (RAISED_ORDER_START) and must still grow them:
    the fitted model gives most of the mass to the order-4 term, as the truth has it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    y = X[:, 0] * X[:, 1] * X[:, 2] * X[:, 3] + 0.5 * X[:, 4] + 0.3 * X[:, 5] + 0.05 * rng.normal(size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = OAKRegressor(random_state=0).fit(X, y)
    assert model.max_order_ == 6
    assert model.sobol_order_[3] > 0.5, model.sobol_order_
    assert model.sobol_order_[4:].sum() < 0.01


def test_few_features_fit_every_order_at_once():
    """Up to FULL_ORDER_MAX_FEATURES features, max_order=None is every order: one fit, no raise, even where
    the top order carries no Sobol mass (an additive truth)."""
    from hdgp.estimators.oak import FULL_ORDER_MAX_FEATURES

    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, FULL_ORDER_MAX_FEATURES))
    y = X.sum(1) + 0.1 * rng.normal(size=60)
    model = OAKRegressor(random_state=0).fit(X, y)
    assert model.max_order_ == FULL_ORDER_MAX_FEATURES and len(model.sobol_order_) == FULL_ORDER_MAX_FEATURES
    assert model.sobol_order_[0] > 0.99
    wide = OAKRegressor(random_state=0).fit(np.column_stack([X, rng.normal(size=60)]), y)
    assert wide.max_order_ == 3  # one more feature: fitted at order 3, not raised for an additive truth


def test_flow_choose_on_a_small_table_keeps_the_better_of_the_flow_and_auto():
    """The default flow="choose" on at most FLOW_CHOICE_MAX_ROWS rows with light-tailed (uniform) features
    fits the full flow and flow="auto" and keeps the higher log marginal likelihood; the kept model's
    attributes are that fit's."""
    from hdgp.estimators.oak import FLOW_CHOICE_MAX_ROWS

    X, y = oak_2d(n=150, rng=np.random.default_rng(0))  # uniform inputs: "auto" leaves them unwarped
    est = OAKRegressor(random_state=0).fit(X, y)
    scores = est.flow_log_likelihoods_
    assert set(scores) == {"flow", "auto"}
    assert est.log_marginal_likelihood_value_ == max(scores.values())
    # on the paper's eq. (5) example the Gaussianising warp of uniform inputs costs evidence (and accuracy)
    assert scores["auto"] > scores["flow"] + 10.0
    auto = OAKRegressor(flow="auto", random_state=0).fit(X, y)
    assert scores["auto"] == pytest.approx(auto.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_allclose(est.predict(X[:20]), auto.predict(X[:20]), rtol=1e-9, atol=1e-12)
    assert not est.flow_.warped_.any() and est.get_params()["flow"] == "choose"  # the parameter stays the user's
    full = OAKRegressor(flow=True, random_state=0).fit(X, y)
    assert scores["flow"] == pytest.approx(full.log_marginal_likelihood_value_, rel=1e-9)
    # not compared: flow=True or "auto" given, or more rows than FLOW_CHOICE_MAX_ROWS
    assert auto.flow_log_likelihoods_ is None and full.flow_log_likelihoods_ is None and full.flow_.warped_.all()
    big_X, big_y = oak_2d(n=FLOW_CHOICE_MAX_ROWS + 1, rng=np.random.default_rng(1))
    assert OAKRegressor(random_state=0, max_iter=3).fit(big_X, big_y).flow_log_likelihoods_ is None
