"""PNG figures of benchmark reports, as named hooks.

A hook is ``hook(results, comparison, protocol, out_dir) -> list[Path]`` where
``results`` are the stored task rows (:meth:`ResultStore.frame`) and
``comparison`` is :func:`hdgp.bench.compare.compare`'s table. A protocol lists
the hooks its report runs in ``Protocol.plots``; families add theirs with
:func:`register_plot` (e.g. a convergence-in-J curve reading the number of
projections from the stored hyperparameters). A hook returns no paths when the
results hold nothing it can draw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

__all__ = ["PLOTS", "register_plot", "plot_metric", "plot_sobol_by_order"]

PLOTS: dict[str, Callable] = {}


def register_plot(name: str, hook: Callable) -> None:
    """Register ``hook`` under ``name`` for ``Protocol.plots``."""
    PLOTS[name] = hook


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_metric(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path,
                metric: str = "rmse") -> list[Path]:
    """One panel per data set: our mean ± 2·std per model (dots) and the paper's mean (crosses)."""
    rows = comparison[comparison["metric"] == metric]
    if rows.empty:
        return []
    plt = _pyplot()
    datasets = list(dict.fromkeys(rows["dataset"]))
    models = [m.label for m in protocol.models if m.label in set(rows["model"])]
    ncol = min(4, len(datasets))
    nrow = int(np.ceil(len(datasets) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 0.35 * len(models) * nrow + 1.2 * nrow),
                             squeeze=False)
    for ax, dataset in zip(axes.ravel(), datasets):
        sub = rows[rows["dataset"] == dataset].set_index("model")
        for i, model in enumerate(models):
            if model not in sub.index:
                continue
            r = sub.loc[model]
            err = 2 * r["std"] if np.isfinite(r["std"]) else 0.0
            ax.errorbar(r["mean"], i, xerr=err, fmt="o", color="C0", ms=4, capsize=2)
            if np.isfinite(r.get("paper_mean", np.nan)):
                ax.plot(r["paper_mean"], i, "x", color="C3", ms=6)
        ax.set_yticks(range(len(models)))
        ax.set_yticklabels(models, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(dataset, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.ravel()[len(datasets):]:
        ax.axis("off")
    fig.suptitle(f"{protocol.name}: test {metric.upper()} (ours: mean ± 2·std, dots; paper: crosses)", fontsize=10)
    fig.tight_layout()
    path = Path(out_dir) / f"{metric}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def plot_sobol_by_order(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path) -> list[Path]:
    """OAK Fig. 4: share of the Sobol variance per interaction order (mean ± std over splits).

    Reads the fitted ``sobol_order_`` vector from the stored hyperparameter summaries.
    """
    shares = []
    for row in results[results["status"] == "done"].itertuples():
        hp = row.hyperparameters if isinstance(row.hyperparameters, dict) else {}
        v = hp.get("sobol_order_")
        if isinstance(v, (list, float, int)):
            v = np.atleast_1d(np.asarray(v, float))
            if v.sum() > 0:
                shares.append({"dataset": row.dataset, "model": row.model, "shares": v / v.sum()})
    if not shares:
        return []
    plt = _pyplot()
    df = pd.DataFrame(shares)
    groups = list(df.groupby(["model", "dataset"], sort=True))
    width = 0.8 / max(1, max(len(g["shares"].iloc[0]) for _, g in groups))
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(groups)), 3.2))
    max_order = max(len(s) for s in df["shares"])
    for j, ((model, dataset), grp) in enumerate(groups):
        mat = np.zeros((len(grp), max_order))
        for i, s in enumerate(grp["shares"]):
            mat[i, : len(s)] = s
        for k in range(min(max_order, 3)):
            ax.bar(j + (k - 1) * width, mat[:, k].mean(), width, yerr=mat[:, k].std(), color=f"C{k}",
                   label=f"order {k + 1}" if j == 0 else None, capsize=2)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{d}\n({m})" for (m, d), _ in groups], fontsize=7)
    ax.set_ylabel("normalised Sobol index")
    ax.legend(fontsize=7)
    ax.set_title(f"{protocol.name}: Sobol share by interaction order (mean ± std over splits)", fontsize=9)
    fig.tight_layout()
    path = Path(out_dir) / "sobol_by_order.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


register_plot("rmse", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "rmse"))
register_plot("mse", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "mse"))
register_plot("nlpd", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "nlpd"))
register_plot("f1", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "f1"))
register_plot("sobol-by-order", plot_sobol_by_order)
