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

__all__ = ["PLOTS", "register_plot", "plot_metric", "plot_sobol_by_order", "sobol_shares", "sobol_low_order_table",
           "plot_convergence_in_j", "plot_metric_vs_n", "plot_cumulative_sobol", "plot_scaling"]

PLOTS: dict[str, Callable] = {}


def register_plot(name: str, hook: Callable) -> None:
    """Register ``hook`` under ``name`` for ``Protocol.plots``."""
    PLOTS[name] = hook


def _pyplot():
    # deferred: matplotlib loads, and takes the Agg backend, only when a report draws (`hdgp bench` starts without)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # deferred: imported after the backend is chosen

    return plt


def _save(plt, fig, out_dir: Path, name: str) -> list[Path]:
    """Lay ``fig`` out, write it to ``out_dir / name`` (110 dpi) and close it; returns the path as a hook does."""
    fig.tight_layout()
    path = Path(out_dir) / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


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
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(3.2 * ncol, 4.5), 0.35 * len(models) * nrow + 1.2 * nrow + 0.3),
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
    # two lines: one panel is too narrow for the whole title
    fig.suptitle(f"{protocol.name}: test {metric.upper()}\n(ours: mean ± 2·std, dots; paper: crosses)", fontsize=10)
    return _save(plt, fig, out_dir, f"{metric}.png")


def sobol_shares(results: pd.DataFrame) -> pd.DataFrame:
    """Per done task with a fitted ``sobol_order_``: ``dataset, model, split, shares`` (normalised per order)."""
    rows = []
    for row in results[results["status"] == "done"].itertuples():
        hp = row.hyperparameters if isinstance(row.hyperparameters, dict) else {}
        v = hp.get("sobol_order_")
        if isinstance(v, (list, float, int)):
            v = np.atleast_1d(np.asarray(v, float))
            if v.sum() > 0:
                noise = hp.get("likelihood.noise_covar.noise")
                rows.append({"dataset": row.dataset, "model": row.model, "split": row.split, "shares": v / v.sum(),
                             "noise": float(noise) if isinstance(noise, (float, int)) else np.nan})
    return pd.DataFrame(rows, columns=["dataset", "model", "split", "shares", "noise"])


def sobol_low_order_table(results: pd.DataFrame, max_order: int = 3, threshold: float = 0.95) -> list[str]:
    """Markdown: the Sobol mass of orders ≤ ``max_order`` per data set and model (OAK Fig. 4's finding,
    that it is at least ``threshold`` everywhere), with the fits below it counted and the mean fitted noise
    variance (of the standardised target: near 1, the shares describe a signal the model barely found)."""
    df = sobol_shares(results)
    if df.empty:
        return []
    df["low"] = [float(s[:max_order].sum()) for s in df["shares"]]
    lines = [f"## Sobol mass of interaction orders ≤ {max_order} (OAK Fig. 4: ≥ {threshold} on every set)", "",
             f"| data set | model | fits | mean | min | fits below {threshold} | noise variance (mean) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (dataset, model), grp in df.groupby(["dataset", "model"], sort=False):
        below = int((grp["low"] < threshold).sum())
        noise = grp["noise"].mean()
        lines.append(f"| {dataset} | {model} | {len(grp)} | {grp['low'].mean():.3f} | {grp['low'].min():.3f} | "
                     + (f"**{below}**" if below else "0") + f" | {'' if np.isnan(noise) else f'{noise:.2f}'} |")
    return lines + [""]


def plot_sobol_by_order(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path) -> list[Path]:
    """OAK Fig. 4: share of the Sobol variance per interaction order (mean ± std over splits).

    Reads the fitted ``sobol_order_`` vector from the stored hyperparameter summaries.
    """
    df = sobol_shares(results)
    if df.empty:
        return []
    plt = _pyplot()
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
    ax.set_title("Sobol share by interaction order\n(mean ± std over splits)", fontsize=9)
    return _save(plt, fig, out_dir, "sobol_by_order.png")


_PARAM_LABELS = {"n_projections": "number of projections J", "n_inducing": "number of inducing points M"}
_PARAM_SYMBOLS = {"n_projections": "J", "n_inducing": "M"}


def plot_convergence_in_j(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path,
                          param: str = "n_projections", metric: str = "rmse") -> list[Path]:
    """Test metric against a model size parameter (mean, 2·std band).

    RPA-GP Fig. 3 (``param="n_projections"``: number of projections J) and OAK
    Fig. 3 (``param="n_inducing"``: number of inducing points M). Models whose
    spec sets ``param`` are drawn as curves (one per preset); the others
    (full-dimensional baselines) as horizontal lines.
    """
    rows = comparison[comparison["metric"] == metric]
    if rows.empty:
        return []
    specs = {m.label: m for m in protocol.models}
    plt = _pyplot()
    datasets = list(dict.fromkeys(rows["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4 * len(datasets), 3.2), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        sub = rows[rows["dataset"] == dataset]
        curves: dict[str, list] = {}
        for r in sub.itertuples():
            spec = specs.get(r.model)
            if spec is not None and param in spec.params:
                curves.setdefault(spec.preset, []).append((spec.params[param], r.mean, r.std))
            else:
                ax.axhline(r.mean, ls="--", lw=1, label=r.model, color=f"C{len(ax.lines) % 10}")
        for k, (name, pts) in enumerate(sorted(curves.items())):
            pts.sort()
            x, m, sd = (np.array(v, float) for v in zip(*pts))
            sd = np.nan_to_num(sd)
            ax.plot(x, m, "o-", ms=3, label=name, color=f"C{(k + 5) % 10}")
            ax.fill_between(x, m - 2 * sd, m + 2 * sd, alpha=0.15, color=f"C{(k + 5) % 10}")
        ax.set_xscale("log")
        ax.set_xlabel(_PARAM_LABELS.get(param, param))
        ax.set_ylabel(f"test {metric.upper()}")
        ax.set_title(dataset, fontsize=9)
        ax.legend(fontsize=6)
    return _save(plt, fig, out_dir, f"convergence_in_{_PARAM_SYMBOLS.get(param, param)}.png")


def plot_cumulative_sobol(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path) -> list[Path]:
    """OAK Fig. 5: test RMSE (regression) or AUC (classification) and cumulative Sobol share against the
    number of ranked terms (the first split of each set)."""
    curves = []
    for row in results[results["status"] == "done"].itertuples():
        extras = getattr(row, "extras", None)
        curve = extras.get("truncation-curve") if isinstance(extras, dict) else None
        if curve:
            curves.append((row.dataset, row.model, row.split, curve))
    if not curves:
        return []
    first = {}
    for dataset, model, split, curve in sorted(curves, key=lambda c: c[2]):
        first.setdefault((dataset, model), curve)
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(first), figsize=(3.4 * len(first), 3.0), squeeze=False)
    for ax, ((dataset, model), curve) in zip(axes[0], sorted(first.items())):
        metric = "rmse" if "rmse" in curve else "auc"
        ax.plot(curve["n_terms"], curve[metric], "-", color="C3", label=f"test {metric.upper()}")
        ax.set_xlabel("number of terms (ranked by Sobol index)")
        ax.set_ylabel(f"test {metric.upper()}", color="C3")
        twin = ax.twinx()
        total = curve["cumulative_sobol"][-1] if curve["cumulative_sobol"] else 1.0
        twin.plot(curve["n_terms"], np.asarray(curve["cumulative_sobol"]) / (total or 1.0), "--", color="C2")
        twin.set_ylabel("cumulative Sobol (normalised)", color="C2")
        ax.set_title(f"{dataset} ({model})", fontsize=9)
    return _save(plt, fig, out_dir, "cumulative_sobol.png")


def plot_scaling(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path) -> list[Path]:
    """RPA-GP Fig. 5: training seconds against the number of training points, per model (log-log)."""
    done = results[(results["status"] == "done") & results["fit_seconds"].notna()]
    if done.empty:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    for k, (model, grp) in enumerate(done.groupby("model", sort=True)):
        g = grp.groupby("n_train")["fit_seconds"].mean().sort_index()
        ax.plot(g.index, g.values, "o-", ms=4, label=model, color=f"C{k}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training points n")
    ax.set_ylabel("training time (s)")
    ax.legend(fontsize=7)
    ax.set_title(f"{protocol.name}: training time", fontsize=9)
    return _save(plt, fig, out_dir, "scaling.png")


def plot_metric_vs_n(results: pd.DataFrame, comparison: pd.DataFrame, protocol, out_dir: Path,
                     metric: str = "rmse") -> list[Path]:
    """RPA-GP Fig. 6: test metric against training size, one panel per generating function.

    Data sets are grouped by their generator (``DatasetSpec.loader_name``); each
    model is a line of split means with a 2·std band over splits.
    """
    column = f"metric_{metric}"
    if column not in results:
        return []
    done = results[(results["status"] == "done") & results[column].notna()]
    generator = {d.name: d.loader_name or d.name for d in protocol.datasets}
    done = done.assign(function=done["dataset"].map(generator), value=done[column])
    if done.empty:
        return []
    plt = _pyplot()
    functions = list(dict.fromkeys(generator[d.name] for d in protocol.datasets if d.name in set(done["dataset"])))
    fig, axes = plt.subplots(1, len(functions), figsize=(3.6 * len(functions), 3.2), squeeze=False)
    for ax, function in zip(axes[0], functions):
        sub = done[done["function"] == function]
        for k, (model, grp) in enumerate(sub.groupby("model", sort=True)):
            stats = grp.groupby("n_train")["value"].agg(["mean", "std"]).sort_index()
            sd = np.nan_to_num(stats["std"].to_numpy())
            ax.plot(stats.index, stats["mean"], "o-", ms=3, label=model, color=f"C{k}")
            ax.fill_between(stats.index, stats["mean"] - 2 * sd, stats["mean"] + 2 * sd, alpha=0.15, color=f"C{k}")
        ax.set_xscale("log")
        ax.set_xlabel("training points n")
        ax.set_ylabel(f"test {metric.upper()}")
        ax.set_title(function, fontsize=9)
        ax.legend(fontsize=6)
    return _save(plt, fig, out_dir, f"{metric}_vs_n.png")


register_plot("rmse", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "rmse"))
register_plot("mse", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "mse"))
register_plot("nlpd", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "nlpd"))
register_plot("f1", lambda res, cmp, proto, out: plot_metric(res, cmp, proto, out, "f1"))
register_plot("sobol-by-order", plot_sobol_by_order)
register_plot("convergence-in-J", plot_convergence_in_j)
register_plot("convergence-in-M", lambda res, cmp, proto, out: plot_convergence_in_j(res, cmp, proto, out,
                                                                                     param="n_inducing"))
register_plot("cumulative-sobol", plot_cumulative_sobol)
register_plot("scaling", plot_scaling)
register_plot("rmse-vs-n", plot_metric_vs_n)
