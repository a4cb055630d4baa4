"""plot_components as a user meets it: default terms, histograms of point masses, many levels, long names."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import StepPatch

from hdgp.estimators.oak import OAKRegressor
from hdgp.plotting import _LEGEND_LEVELS, MAX_DEFAULT_PANELS, plot_components

pytestmark = pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")


def _titles(fig):
    return [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]


def test_default_plot_leaves_out_third_order_components():
    """components_ may hold a third-order term; the default plot draws the terms it can draw
    (it raised "Only first- and second-order components can be plotted")."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = X[:, 0] * X[:, 1] * X[:, 2] + 0.3 * X[:, 0] + 0.05 * rng.normal(size=150)
    est = OAKRegressor(max_order=3, max_iter=60, random_state=0).fit(X, y)
    assert (0, 1, 2) in est.components_
    drawn = [u for u in est.components_ if len(u) <= 2]
    assert drawn  # x0 carries a share of its own
    titles = _titles(est.plot_components())
    assert [t.split("  (")[0] for t in titles] == [" × ".join(f"x{j}" for j in u) for u in drawn]
    # a threshold that keeps the three-way term alone: the top-ranked terms it can draw
    est.components_ = [(0, 1, 2)]
    ranked = [u for u in est.sobol_.terms if len(u) <= 2][:MAX_DEFAULT_PANELS]
    assert len(_titles(est.plot_components())) == len(ranked)
    with pytest.raises(ValueError, match="first- and second-order"):  # asked for explicitly: still an error
        est.plot_components([(0, 1, 2)])


def _steps(fig):
    (patch,) = [p for ax in fig.axes for p in ax.patches if isinstance(p, StepPatch)]
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
    est = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(frame, y)
    fig = est.plot_components([("department_of_origin",), ("household_income_in_euros_per_year",),
                               ("household_income_in_euros_per_year", "department_of_origin")])
    bars, curve, pair = fig.axes[:3]
    # 20 level names: upright, not slanted over each other
    assert {t.get_rotation() for t in bars.get_xticklabels()} == {90.0}
    assert len(bars.get_xticklabels()) == 20
    # one curve per level, but a legend of at most _LEGEND_LEVELS entries
    assert len(pair.lines) == 20
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
