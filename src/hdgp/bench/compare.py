r"""Aggregate stored results per (data set, model) and compare them with paper numbers.

"Match or beat" is decided by a one-sided test of the hypothesis that we are
*worse* than the paper: with the paper's spread and repetitions known, Welch's
t-test of our per-split values against the paper's mean and std; with the number
of the paper's repetitions but no spread, the paper's mean is taken as the mean of
that many runs with our spread (standard error :math:`s\sqrt{1/n + 1/n_p}`: a
paper number from one test split, :math:`n_p = 1`, is one noisy draw, not the
population mean); with only the paper's mean, a one-sample t-test against it. We
match or beat the paper when that test does not reject at level ``alpha``
(p ≥ alpha), or, with a single result (no spread), when our value is at least as
good as the paper's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["LOWER_IS_BETTER", "HIGHER_IS_BETTER", "aggregate", "compare", "worse_p_value"]

LOWER_IS_BETTER = frozenset({"rmse", "mse", "nlpd", "log_loss"})
HIGHER_IS_BETTER = frozenset({"f1", "accuracy", "auc"})  # coverage95 has a target (0.95), no direction


def aggregate(results: pd.DataFrame, metrics) -> pd.DataFrame:
    """Mean, std (ddof=1) and count per (dataset, model, metric) over splits and seeds of done tasks;
    ``values`` (what :func:`compare` tests) holds one mean per split."""
    rows = []
    done = results[results["status"] == "done"]
    for (dataset, model), grp in done.groupby(["dataset", "model"], sort=True):
        for metric in metrics:
            col = f"metric_{metric}"
            if col not in grp:
                continue
            scored = grp[grp[col].notna()]
            values = scored[col].to_numpy(float)
            if values.size == 0:
                continue
            rows.append({"dataset": dataset, "model": model, "metric": metric, "n": int(values.size),
                         "mean": float(values.mean()),
                         "std": float(values.std(ddof=1)) if values.size > 1 else float("nan"),
                         # the test's sample: one value per split (runs of other seeds on the same split
                         # share its data and are far from independent)
                         "values": scored.groupby("split")[col].mean().to_numpy(float)
                         if "split" in scored else values})
    return pd.DataFrame(rows, columns=["dataset", "model", "metric", "n", "mean", "std", "values"])


def worse_p_value(values: np.ndarray, paper_mean: float, paper_std: float, paper_n: float,
                  lower_is_better: bool) -> float:
    """One-sided p-value of "ours is worse than the paper" (NaN when no test is possible)."""
    values = np.asarray(values, float)
    n = values.size
    if n < 2:
        return float("nan")
    sign = 1.0 if lower_is_better else -1.0
    diff = sign * (values.mean() - paper_mean)  # > 0 means worse
    var_ours = values.var(ddof=1) / n
    if np.isfinite(paper_std) and np.isfinite(paper_n) and paper_n >= 2:
        var_paper = paper_std**2 / paper_n
        se = np.sqrt(var_ours + var_paper)
        if se == 0:
            return float("nan")
        dof = se**4 / ((var_ours**2 / (n - 1) if var_ours > 0 else 0.0) + var_paper**2 / (paper_n - 1))
    else:  # the paper's runs taken to spread as ours do; without their number, its mean is exact
        extra = values.var(ddof=1) / paper_n if np.isfinite(paper_n) and paper_n >= 1 else 0.0
        se, dof = np.sqrt(var_ours + extra), n - 1
        if se == 0:
            return float("nan")
    return float(stats.t.sf(diff / se, dof))


def compare(agg: pd.DataFrame, reference: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Join our aggregates with the paper's numbers and flag matches.

    Returns
    -------
    DataFrame with ``dataset, model, metric, n, mean, std, paper_mean, paper_std,
    paper_n, diff, p_worse, match`` (``match`` is None without a paper number).
    """
    ref = reference[["dataset", "model", "metric", "paper_mean", "paper_std", "paper_n"]]
    out = agg.merge(ref, on=["dataset", "model", "metric"], how="left")
    out["diff"] = out["mean"] - out["paper_mean"]
    p_values, matches = [], []
    for row in out.itertuples():
        lower = row.metric in LOWER_IS_BETTER
        if not np.isfinite(row.paper_mean) or (row.metric not in LOWER_IS_BETTER | HIGHER_IS_BETTER):
            p_values.append(float("nan"))
            matches.append(None)
            continue
        p = worse_p_value(row.values, row.paper_mean, row.paper_std, row.paper_n, lower)
        p_values.append(p)
        if np.isfinite(p):
            matches.append(bool(p >= alpha))
        else:  # one result or zero spread: compare the numbers themselves
            matches.append(bool(row.mean <= row.paper_mean if lower else row.mean >= row.paper_mean))
    out["p_worse"] = p_values
    out["match"] = matches
    return out
