import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hdgp.bench.compare import aggregate, compare, worse_p_value


def test_welch_p_value_matches_scipy_one_sided():
    rng = np.random.default_rng(0)
    ours = rng.normal(0.30, 0.05, size=10)
    paper_mean, paper_std, paper_n = 0.27, 0.04, 20
    p = worse_p_value(ours, paper_mean, paper_std, paper_n, lower_is_better=True)
    ref = stats.ttest_ind_from_stats(ours.mean(), ours.std(ddof=1), 10, paper_mean, paper_std, paper_n,
                                     equal_var=False, alternative="greater")
    assert p == pytest.approx(ref.pvalue, rel=1e-10)


def test_one_sample_test_when_paper_has_no_spread():
    ours = np.array([0.80, 0.82, 0.85, 0.79])
    p = worse_p_value(ours, 0.84, np.nan, np.nan, lower_is_better=False)  # F1: higher is better
    ref = stats.ttest_1samp(ours, 0.84, alternative="less")
    assert p == pytest.approx(ref.pvalue, rel=1e-10)


def test_a_single_published_run_is_one_draw_not_the_population_mean():
    """A paper F1 from one test split (n_p = 1, no spread): the test is the pooled two-sample
    t-test of our splits against that one value (equal spreads, n - 1 degrees of freedom)."""
    ours = np.array([0.80, 0.78, 0.85, 0.74, 0.82, 0.79, 0.77, 0.83])
    p = worse_p_value(ours, 0.86, np.nan, 1, lower_is_better=False)
    ref = stats.ttest_ind(ours, [0.86], equal_var=True, alternative="less")
    assert p == pytest.approx(ref.pvalue, rel=1e-10)
    assert p > worse_p_value(ours, 0.86, np.nan, np.nan, lower_is_better=False)  # less certain than vs an exact mean
    # n_p runs summarised without a spread: their mean has our spread over n_p
    s = ours.std(ddof=1)
    p10 = worse_p_value(ours, 0.86, np.nan, 10, lower_is_better=False)
    expected = stats.t.sf((0.86 - ours.mean()) / (s * np.sqrt(1 / ours.size + 1 / 10)), ours.size - 1)
    assert p10 == pytest.approx(expected, rel=1e-10)


def test_direction_matters():
    worse_rmse = np.full(10, 0.5) + np.linspace(-0.01, 0.01, 10)
    assert worse_p_value(worse_rmse, 0.3, 0.02, 20, lower_is_better=True) < 1e-6
    assert worse_p_value(worse_rmse, 0.3, 0.02, 20, lower_is_better=False) > 1 - 1e-6
    assert np.isnan(worse_p_value(np.array([0.4]), 0.3, 0.02, 20, True))


def _results(values, dataset="yacht", model="RBF-ARD", metric="rmse"):
    return pd.DataFrame({"dataset": dataset, "model": model, "split": range(len(values)), "status": "done",
                         f"metric_{metric}": values})


def test_compare_flags_match_beat_and_worse():
    ref = pd.DataFrame({"dataset": ["yacht", "servo", "housing"], "model": "RBF-ARD", "metric": "rmse",
                        "paper_mean": [0.08, 0.31, 0.30], "paper_std": [0.055, 0.075, np.nan],
                        "paper_n": [20, 20, np.nan]})
    rng = np.random.default_rng(1)
    res = pd.concat([_results(0.08 + 0.03 * rng.standard_normal(10), "yacht"),   # same as the paper
                     _results(0.60 + 0.01 * rng.standard_normal(10), "servo"),   # clearly worse
                     _results(0.20 + 0.01 * rng.standard_normal(10), "housing"),  # beats the paper's mean
                     _results(0.5 + 0.01 * rng.standard_normal(10), "energy")])   # no paper number
    cmp = compare(aggregate(res, ["rmse"]), ref).set_index("dataset")
    assert cmp.loc["yacht", "match"] and cmp.loc["housing", "match"]
    assert cmp.loc["servo", "match"] is False
    assert cmp.loc["energy", "match"] is None
    assert cmp.loc["servo", "diff"] == pytest.approx(cmp.loc["servo", "mean"] - 0.31)


def test_single_result_compares_the_numbers():
    ref = pd.DataFrame({"dataset": ["arcene"], "model": ["SIGP m=1"], "metric": ["f1"], "paper_mean": [0.857],
                        "paper_std": [np.nan], "paper_n": [np.nan]})
    better = compare(aggregate(_results([0.9], "arcene", "SIGP m=1", "f1"), ["f1"]), ref)
    worse = compare(aggregate(_results([0.8], "arcene", "SIGP m=1", "f1"), ["f1"]), ref)
    assert better["match"].iloc[0] and not worse["match"].iloc[0]


def test_failed_tasks_are_not_aggregated():
    res = _results([0.1, 0.2, 99.0])
    res.loc[2, "status"] = "failed"
    agg = aggregate(res, ["rmse"])
    assert agg["n"].iloc[0] == 2 and agg["mean"].iloc[0] == pytest.approx(0.15)


def test_seeds_on_one_split_are_one_value_of_the_test():
    """Two seeds on each of 10 splits: the reported n, mean and std are over the 20 runs, the test
    sample is the 10 per-split means (runs on one split share its data)."""
    rng = np.random.default_rng(3)
    split_effect = 0.05 * rng.standard_normal(10)
    runs = pd.concat([_results(0.3 + split_effect + 0.005 * rng.standard_normal(10)).assign(seed=seed)
                      for seed in (0, 1)], ignore_index=True)
    agg = aggregate(runs, ["rmse"]).iloc[0]
    assert agg["n"] == 20 and agg["mean"] == pytest.approx(runs["metric_rmse"].mean())
    per_split = runs.groupby("split")["metric_rmse"].mean().to_numpy()
    np.testing.assert_allclose(agg["values"], per_split)
    p = worse_p_value(agg["values"], 0.28, 0.04, 20, lower_is_better=True)
    ref = stats.ttest_ind_from_stats(per_split.mean(), per_split.std(ddof=1), 10, 0.28, 0.04, 20,
                                     equal_var=False, alternative="greater")
    assert p == pytest.approx(ref.pvalue, rel=1e-10)


def test_a_zero_predictive_std_leaves_out_nlpd_with_a_warning():
    from hdgp.bench.task import _regression_metrics

    class Degenerate:
        def predict(self, X, return_std=False):
            mean = np.zeros(len(X))
            return (mean, np.where(np.arange(len(X)) == 0, 0.0, 1.0)) if return_std else mean

    with pytest.warns(RuntimeWarning, match="1 of 4 predictive standard deviations are not positive"):
        scores = _regression_metrics(Degenerate(), np.zeros((4, 1)), np.ones(4))
    assert set(scores) == {"rmse", "mse"}
