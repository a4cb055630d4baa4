"""plot_components as a user meets it: default terms, histograms of point masses, many levels, long names."""

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import StepPatch

from hdgp.estimators.oak import OAKRegressor
from hdgp.plotting import _LEGEND_LEVELS, MAX_DEFAULT_PANELS, plot_components

pytestmark = pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")


def _titles(fig):
    return [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]


@pytest.fixture(scope="module")
def three_way():
    """A model whose ranked components include a real three-way term x0 x1 x2."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = X[:, 0] * X[:, 1] * X[:, 2] + 0.3 * X[:, 0] + 0.05 * rng.normal(size=150)
    est = OAKRegressor(max_order=3, max_iter=60, random_state=0).fit(X, y)
    assert (0, 1, 2) in est.components_ and (0,) in est.components_
    return est, X


def _contours(ax):
    from matplotlib.contour import ContourSet

    return [c for c in ax.get_children() if isinstance(c, ContourSet)]


def _dots(ax):
    return [c for c in ax.collections if c.get_label() == "training rows"]


def test_three_way_term_is_drawn_as_slices_at_quantiles_of_the_third_feature(three_way):
    """components_ holds x0 × x1 × x2 (it was left out of the default plot, and asking for it raised):
    three panels of x0 by x1 at the 10/50/90 % quantiles of x2 on one colour scale, each with the training
    rows of its third of the data and the posterior std."""
    est, X = three_way
    fig = est.plot_components()
    titles = _titles(fig)
    assert [t.split("  (")[0] for t in titles] == ["x0 × x1 × x2"] * 3 + ["x0"]
    q = np.quantile(X[:, 2], [0.1, 0.5, 0.9])
    for title, value, level in zip(titles, q, (10, 50, 90)):
        shown = re.fullmatch(rf".*\nat x2 = (\S+) \({level} % quantile\)", title, re.S)
        assert shown and float(shown.group(1)) == pytest.approx(value, abs=0.01)
    slices = [ax for ax in fig.axes if ax.get_title().startswith("x0 × x1 × x2")]
    filled = [next(c for c in _contours(ax) if c.filled) for ax in slices]
    np.testing.assert_array_equal(filled[0].levels, filled[2].levels)  # one colour scale
    # the component changes sign with x2: the slices at the low and the high quantile are mirror images
    low, high = (np.array(c.levels) for c in (filled[0], filled[2]))
    assert low.min() < 0 < low.max()
    std_lines = [c for ax in slices for c in _contours(ax) if not c.filled]
    assert len(std_lines) == 3 and all(ax.texts for ax in slices)  # dashed, labelled "sd ..."
    counts = [len(_dots(ax)[0].get_offsets()) for ax in slices]
    assert sum(counts) == len(X) and min(counts) > 0.25 * len(X)  # every training row, in its third
    middle = _dots(slices[1])[0].get_offsets()
    cuts = np.quantile(X[:, 2], [0.3, 0.7])
    inside = X[(X[:, 2] >= cuts[0]) & (X[:, 2] <= cuts[1])]
    np.testing.assert_allclose(np.sort(middle[:, 0]), np.sort(inside[:, 0]), rtol=1e-6, atol=1e-6)
    assert not fig.texts  # nothing left out
    # asked for explicitly, in any order of its features
    assert len(_titles(est.plot_components([("x2", "x0", "x1")]))) == 3


def _band(filled, point):
    """The (low, high) contour levels of the filled band that covers ``point`` (data coordinates)."""
    inside = [i for i, path in enumerate(filled.get_paths()) if len(path.vertices) and path.contains_point(point)]
    assert len(inside) == 1, inside
    return filled.levels[inside[0]], filled.levels[inside[0] + 1]


def test_each_slice_shows_the_component_posterior_at_its_quantile(three_way):
    """The colour of a slice at (x0, x1) is the band holding the component's posterior mean at
    (x0, x1, q), q the slice's quantile of x2 (from predict_component, the public API)."""
    est, X = three_way
    fig = est.plot_components([(0, 1, 2)])
    points = [(1.0, -1.0), (1.5, 1.5), (-1.0, 0.5), (0.2, -1.8)]
    for ax, q in zip(fig.axes, np.quantile(X[:, 2], [0.1, 0.5, 0.9])):
        filled = next(c for c in _contours(ax) if c.filled)
        width = np.diff(filled.levels).max()
        mean = est.predict_component(np.array([[a, b, q] for a, b in points]), (0, 1, 2))
        for point, value in zip(points, mean):
            low, high = _band(filled, point)
            assert low - width <= value <= high + width


def test_terms_that_cannot_be_drawn_are_named_in_the_figure():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 4))
    y = X[:, 0] * X[:, 1] * X[:, 2] * X[:, 3] + X[:, 0] + 0.05 * rng.normal(size=80)
    est = OAKRegressor(max_order=4, max_iter=8, random_state=0).fit(X, y)
    est.components_ = [(0, 1, 2, 3), (0,), (0, 1, 2)]  # a four-way term ranked first
    fig = est.plot_components()
    assert [t.split("  (")[0] for t in _titles(fig)] == ["x0"] + ["x0 × x1 × x2"] * 3
    (note,) = fig.texts
    assert "x0 × x1 × x2 × x3" in note.get_text() and "order 4" in note.get_text()
    with pytest.raises(ValueError, match="order up to 3.*x0 × x1 × x2 × x3"):
        est.plot_components([(0, 1, 2, 3)])
    # more components than panels drawn by default: the rest are named, not dropped
    singles_pairs = [u for u in est.sobol_.terms if len(u) <= 2]
    assert len(singles_pairs) == 10
    est.components_ = singles_pairs + [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]
    fig = est.plot_components(n_grid=20)
    assert len({t.split("  (")[0] for t in _titles(fig)}) == MAX_DEFAULT_PANELS
    (note,) = fig.texts
    assert note.get_text().replace("\n", " ") == (f"Not drawn (beyond the {MAX_DEFAULT_PANELS} components drawn by "
                                                  "default): x0 × x2 × x3, x1 × x2 × x3.")


def test_log_transformed_features_get_log_axes():
    """A log-normal feature (the flow takes log x) on log axes, a skewed count with zeros (the flow takes the
    started log log(x - x_min + c)) on that scale; the histogram's areas still count the rows."""
    rng = np.random.default_rng(3)
    n = 150
    income = np.exp(rng.normal(10.0, 0.8, n))
    visits = np.floor(rng.exponential(3.0, n))
    X = np.column_stack([income, visits, rng.normal(size=n)])
    y = np.log(income) + np.sqrt(visits) * X[:, 2] + 0.1 * rng.normal(size=n)
    est = OAKRegressor(max_order=2, max_iter=10, random_state=0).fit(X, y)
    flow = est.flow_
    assert flow.use_log_[:2].all() and not flow.use_log_[2]
    assert flow.log_start_[0] == flow.log_min_[0] and flow.log_start_[1] != flow.log_min_[1]
    fig = est.plot_components([(0,), (1,), (0, 2), (2, 1)])
    one, count, pair, pair_count = fig.axes[:4]
    assert one.get_xscale() == "log" and pair.get_xscale() == "log" and pair.get_yscale() == "linear"
    assert count.get_xscale() == "function" and pair_count.get_xscale() == "function"  # (x1, x2) sorted
    # the scale is the flow's log(x - x_min + c), up to an affine map
    to_axis = count.xaxis.get_transform().transform
    a, b = np.array([0.0, 1.0, 4.0, 12.0]), flow.log_start_[1]
    np.testing.assert_allclose(np.diff(to_axis(a)), np.diff(np.log(a - flow.log_min_[1] + b)), rtol=1e-12)
    fig.canvas.draw()
    ticks = [t for t in count.get_xticks() if visits.min() <= t <= visits.max()]
    assert len(ticks) >= 3 and np.all(np.diff(ticks) > 0)
    for ax, values in ((one, income), (count, visits)):
        density, edges = _steps(fig, ax)
        on_axis = ax.xaxis.get_transform().transform(edges)
        assert np.sum(density * np.diff(on_axis)) == pytest.approx(n)
        np.testing.assert_allclose(np.diff(on_axis), np.diff(on_axis)[0])  # equal bins on the axis
        assert edges[0] == pytest.approx(values.min(), rel=1e-6) and edges[-1] == pytest.approx(values.max(), rel=1e-6)


def test_two_feature_map_shows_the_training_rows_and_the_posterior_std():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(70, 2))
    est = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(X, X[:, 0] * X[:, 1] + 0.05 * rng.normal(size=70))
    fig = est.plot_components([(0, 1)])
    ax = fig.axes[0]
    (dots,) = _dots(ax)
    np.testing.assert_allclose(np.sort(dots.get_offsets(), axis=0), np.sort(X, axis=0), rtol=1e-6, atol=1e-6)
    (lines,) = [c for c in _contours(ax) if not c.filled]
    assert all(t.get_text().startswith("sd ") for t in ax.texts) and len(ax.texts) >= 2
    # the dashed lines are levels of the component's posterior std over the panel (the training range)
    a, b = np.meshgrid(*(np.linspace(X[:, j].min(), X[:, j].max(), 30) for j in (0, 1)))
    _, std = est.predict_component(np.column_stack([a.ravel(), b.ravel()]), (0, 1), return_std=True)
    drawn = np.array([level for level, segments in zip(lines.levels, lines.allsegs) if segments])
    assert len(drawn) >= 2 and std.min() - 1e-9 <= drawn.min() and drawn.max() <= std.max() + 1e-9
    assert {t.get_text() for t in ax.texts} <= {f"sd {v:.2g}" for v in drawn}


def _steps(fig, panel=None):
    """Density and edges of the histogram (of ``panel``, a curve's axes, else the only one in ``fig``)."""
    axes = fig.axes if panel is None else [a for a in fig.axes if a is not panel and a.bbox.bounds == panel.bbox.bounds]
    (patch,) = [p for ax in axes for p in ax.patches if isinstance(p, StepPatch)]
    density, edges = patch.get_data()[:2]
    return density, edges


def test_histogram_of_a_count_feature_shows_every_value():
    """A count feature with many zeros: the flow puts the zeros in a bin 1/100 of the range wide, whose
    density drowned the bars of 1 and 2 (under 4 % of the zeros' bar, invisible under a y range of 3
    times it). In equal-width bins of the original units every value shows."""
    rng = np.random.default_rng(0)
    n = 150
    counts = rng.choice([0, 1, 2, 3], n, p=[0.55, 0.2, 0.15, 0.1]).astype(float)
    X = np.column_stack([counts, rng.normal(size=n)])
    est = OAKRegressor(max_order=1, max_iter=5, random_state=0).fit(X, X[:, 0] + X[:, 1])
    density, edges = _steps(est.plot_components([(0,)]))
    widths = np.diff(edges)
    np.testing.assert_allclose(widths, widths[0])
    np.testing.assert_allclose([edges[0], edges[-1]], [0.0, 3.0], atol=1e-9)
    assert np.sum(density * widths) == pytest.approx(n)
    centres = 0.5 * (edges[:-1] + edges[1:])
    for value in (1.0, 2.0, 3.0):  # the tallest bar near each value (its rows spread over the flow's bin)
        assert density[np.abs(centres - value) < 0.2].max() > 0.1 * density.max()


def test_many_levels_long_names_and_large_numbers_stay_readable():
    rng = np.random.default_rng(2)
    n = 200
    frame = pd.DataFrame({
        "department_of_origin": pd.Categorical(rng.choice([f"Department of {c}" for c in "ABCDEFGHIJKLMNOPQRST"], n)),
        "household_income_in_euros_per_year": np.exp(rng.normal(10.5, 0.6, n)),
    })
    code = frame["department_of_origin"].cat.codes.to_numpy()
    y = (code % 3) + np.log(frame["household_income_in_euros_per_year"].to_numpy()) + 0.1 * rng.normal(size=n)
    # linear axes (a log-transformed feature gets a log axis: test_log_transformed_features_get_log_axes)
    est = OAKRegressor(max_order=2, max_iter=20, random_state=0, log_transform=False).fit(frame, y)
    fig = est.plot_components([("department_of_origin",), ("household_income_in_euros_per_year",),
                               ("household_income_in_euros_per_year", "department_of_origin")])
    bars, curve, pair = fig.axes[:3]
    # 20 level names: upright, not slanted over each other
    assert {t.get_rotation() for t in bars.get_xticklabels()} == {90.0}
    assert len(bars.get_xticklabels()) == 20
    # one curve per level, but a legend of at most _LEGEND_LEVELS entries
    curves = [line for line in pair.lines if line.get_marker() != "|"]
    (rug,) = [line for line in pair.lines if line.get_marker() == "|"]  # the training incomes along the axis
    assert len(curves) == 20 and len(rug.get_xdata()) == n
    np.testing.assert_allclose(np.sort(rug.get_xdata()), np.sort(frame.iloc[:, 1]), rtol=1e-6)
    texts = [t.get_text() for t in pair.get_legend().get_texts()]
    assert len(texts) == _LEGEND_LEVELS and texts[0] == "15 other levels of department_of_origin"
    # long names wrap instead of running into the neighbouring titles
    assert "\n" in pair.get_title()
    # incomes up to ~1e5: short tick labels with a power-of-ten offset (they ran into each other)
    fig.canvas.draw()
    assert curve.xaxis.get_offset_text().get_text() != ""
    assert max(len(t.get_text()) for t in curve.get_xticklabels()) <= 5


def test_plot_components_of_a_constant_feature_does_not_fail(tmp_path):
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=60), np.full(60, 3.0)])
    est = OAKRegressor(max_order=2, max_iter=5, random_state=0).fit(X, np.sin(X[:, 0]))
    plot_components(est, [(1,), (0, 1)]).savefig(tmp_path / "constant.png")


def test_three_way_term_with_a_categorical_feature_is_sliced_at_its_levels():
    rng = np.random.default_rng(5)
    n = 120
    frame = pd.DataFrame({"a": rng.normal(size=n), "g": pd.Categorical(rng.choice(list("pqrst"), n)),
                          "b": rng.normal(size=n)})
    y = frame.a * frame.b * (frame.g.cat.codes - 2) + 0.05 * rng.normal(size=n)
    est = OAKRegressor(max_order=3, max_iter=10, random_state=0).fit(frame, y)
    fig = est.plot_components([("a", "b", "g")])
    # five levels: three slices, at the levels of the 10/50/90 % quantiles of the training rows, said so
    codes = np.sort(frame.g.cat.codes.to_numpy())
    expected = [list("pqrst")[int(round(np.quantile(codes, q)))] for q in (0.1, 0.5, 0.9)]
    subtitles = [t.split("\n")[-1] for t in _titles(fig)]
    assert subtitles == [f"at g = {level} (of 5 levels)" for level in expected]
    counts = [len(_dots(ax)[0].get_offsets()) for ax in fig.axes[:3]]
    assert counts == [int(np.sum(frame.g == level)) for level in expected]  # each slice shows its level's rows


def test_three_way_slices_of_a_classifier_that_keeps_no_rows():
    """A classifier keeps a histogram of its inputs, not the rows: slices at the histogram's quantiles, no dots."""
    from hdgp.estimators.oak_classifier import OAKClassifier

    rng = np.random.default_rng(6)
    X = rng.normal(size=(100, 3))
    clf = OAKClassifier(max_order=3, n_inducing=20, max_iter=15, random_state=0).fit(
        X, (X[:, 0] * X[:, 1] * X[:, 2] > 0).astype(int))
    assert getattr(clf, "X_train_", None) is None
    fig = clf.plot_components([(0, 1, 2)])
    shown = [float(re.search(r"at x2 = (\S+) \(", t).group(1)) for t in _titles(fig)]
    np.testing.assert_allclose(shown, np.quantile(X[:, 2], [0.1, 0.5, 0.9]), atol=0.15)  # 30 bins' resolution
    assert not any(_dots(ax) for ax in fig.axes)
