"""Rank the model families per data set and check issue #41's bars (the ``"ranking"`` report section).

For each data set the models are ranked by their mean primary metric over the splits they
completed: test RMSE for regression, log-loss for classification (lower is better for both;
ties keep the protocol's model order).
Each model's ratio to the best model and to the protocol's reference peer (its first model with
``source="peer"`` for the task, e.g. HistGradientBoosting) is that mean divided by theirs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PRIMARY_METRIC", "SECTIONS", "check_table", "rank_table", "ranking_section"]

#: The metric models are ranked by, per task.
PRIMARY_METRIC = {"regression": "rmse", "classification": "log_loss"}
#: Metrics shown beside the primary one, per task.
_SHOWN = {"regression": ("nlpd", "coverage95"), "classification": ("auc", "accuracy", "ece")}
#: Issue #41: OAK's mean RMSE at most this multiple of RBF-ARD's.
OAK_TO_RBF_BAR = 1.05
#: Issue #41: where any GP beats the peer, no family worse than the peer by more than this factor.
PEER_BAR = 2.0
#: Issue #41: ``--model auto`` (these labels) within this multiple of the best family.
AUTO_BAR = 1.05
AUTO_LABELS = ("auto", "auto-classifier")


def _peers(proto, task: str) -> list[str]:
    """The reference peer of ``task`` (a one-element list), or none."""
    return [m.label for m in proto.models if m.task == task and m.source == "peer"][:1]


def rank_table(results: pd.DataFrame, proto) -> pd.DataFrame:
    """One row per (data set, model) that has done tasks, ranked within each data set.

    Columns: ``dataset, task, model, rank, metric, mean, ratio_best, ratio_peer, n_splits,
    fit_seconds`` and the mean of each shown metric (NLPD and coverage95; AUC, accuracy, ECE).
    ``ratio_peer`` is NaN where the data set has no finished peer.
    """
    done = results[results["status"] == "done"]
    rows = []
    for ds in proto.datasets:
        metric = PRIMARY_METRIC[ds.task]
        here = done[done["dataset"] == ds.name]
        column = f"metric_{metric}"
        if here.empty or column not in here:
            continue
        order = [m.label for m in proto.models if m.task == ds.task]
        per_model = []
        for label in order:
            mine = here[here["model"] == label]
            values = mine[column].astype(float).dropna()
            if values.empty:
                continue
            entry = {"dataset": ds.name, "task": ds.task, "model": label, "metric": metric,
                     "mean": float(values.mean()), "n_splits": int(mine["split"].nunique()),
                     "fit_seconds": float(mine["fit_seconds"].astype(float).mean())}
            for extra in _SHOWN[ds.task]:
                col = f"metric_{extra}"
                vals = mine[col].astype(float).dropna() if col in mine else pd.Series(dtype=float)
                entry[extra] = float(vals.mean()) if len(vals) else np.nan  # empty, not zero (e.g. HGB's NLPD)
            per_model.append(entry)
        if not per_model:
            continue
        best = min(e["mean"] for e in per_model)
        peer = [e["mean"] for e in per_model if e["model"] in _peers(proto, ds.task)]
        ranked = sorted(per_model, key=lambda e: e["mean"])
        for rank, e in enumerate(ranked, start=1):
            e.update(rank=rank, ratio_best=e["mean"] / best if best > 0 else np.nan,
                     ratio_peer=e["mean"] / peer[0] if peer and peer[0] > 0 else np.nan)
            rows.append(e)
    columns = ["dataset", "task", "model", "rank", "metric", "mean", "ratio_best", "ratio_peer", "n_splits",
               "fit_seconds", "nlpd", "coverage95", "auc", "accuracy", "ece"]
    return pd.DataFrame(rows).reindex(columns=columns)


def check_table(ranked: pd.DataFrame, proto) -> pd.DataFrame:
    """Issue #41's bars per data set, from :func:`rank_table`'s output.

    Columns: ``dataset, oak_to_rbf`` (OAK's mean RMSE over RBF-ARD's; NaN where either is
    missing or on classification), ``oak_ok``, ``gp_beats_peer`` (some non-peer model's mean is
    below the peer's), ``over_2x_peer`` (models worse than the peer by more than 2x, listed
    where a GP beats it), ``peer_ok``, ``auto_to_best`` (the auto model's mean over the best
    other family's, HGB aside; NaN without an auto row) and ``auto_ok``.
    """
    rows = []
    for ds_name, group in ranked.groupby("dataset", sort=False):
        means = dict(zip(group["model"], group["mean"]))
        task = group["task"].iloc[0]
        peers = [p for p in _peers(proto, task) if p in means]
        ratio = (means["OAK"] / means["RBF-ARD"] if task == "regression" and "OAK" in means and "RBF-ARD" in means
                 and means["RBF-ARD"] > 0 else np.nan)
        gps = {m: v for m, v in means.items() if m not in peers}
        beats = bool(peers) and any(v < means[peers[0]] for v in gps.values())
        over = sorted(m for m, v in gps.items() if beats and v > PEER_BAR * means[peers[0]])
        auto = next((m for m in AUTO_LABELS if m in gps), None)
        families = [v for m, v in gps.items() if m not in AUTO_LABELS]
        auto_ratio = gps[auto] / min(families) if auto and families and min(families) > 0 else np.nan
        rows.append({"dataset": ds_name, "task": task, "oak_to_rbf": ratio,
                     "oak_ok": None if np.isnan(ratio) else bool(ratio <= OAK_TO_RBF_BAR),
                     "gp_beats_peer": beats if peers else None, "over_2x_peer": over,
                     "peer_ok": (not over) if peers else None, "auto_to_best": auto_ratio,
                     "auto_ok": None if np.isnan(auto_ratio) else bool(auto_ratio <= AUTO_BAR)})
    return pd.DataFrame(rows, columns=["dataset", "task", "oak_to_rbf", "oak_ok", "gp_beats_peer", "over_2x_peer",
                                       "peer_ok", "auto_to_best", "auto_ok"])


def _num(value, digits=3) -> str:
    return "" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def _yes(flag, failing: str = "**no**") -> str:
    """``yes``, ``failing`` (a bar missed: bold) or empty where the check does not apply."""
    if flag is None or (isinstance(flag, float) and np.isnan(flag)):
        return ""
    return "yes" if flag else failing


def _family_summary(ranked: pd.DataFrame, proto) -> list[str]:
    """Markdown: per model (in the protocol's order), over the data sets it ran on, how often it ranked
    first and its ratios."""
    lines = ["Per model over the data sets it finished (each data set counts once): rank-1 count, median and "
             "worst ratio to the best model, median ratio to HGB.", "",
             "| task | model | data sets | first | median / best | worst / best | median / HGB |",
             "|---|---|---|---|---|---|---|"]
    for m in proto.models:
        g = ranked[(ranked["task"] == m.task) & (ranked["model"] == m.label)]
        if g.empty:
            continue
        task, model = m.task, m.label
        lines.append(f"| {task} | {model} | {len(g)} | {int((g['rank'] == 1).sum())} | "
                     f"{_num(g['ratio_best'].median(), 2)} | {_num(g['ratio_best'].max(), 2)} | "
                     f"{_num(g['ratio_peer'].median(), 2)} |")
    return lines + [""]


def ranking_section(results: pd.DataFrame, proto) -> list[str]:
    """Markdown: the ranking per data set and the summary of issue #41's checks."""
    ranked = rank_table(results, proto)
    if ranked.empty:
        return []
    lines = ["## Ranking per data set", "",
             "Models ranked by their mean test RMSE (regression, standardised target) or log-loss "
             "(classification) over the splits each completed (n); ratios are that mean over the best model's "
             "and over the peer's (HGB). Empty NLPD / coverage: the model gives no predictive standard "
             "deviation. Fit time: mean seconds per split.", ""]
    for task in ("regression", "classification"):
        part = ranked[ranked["task"] == task]
        if part.empty:
            continue
        shown = _SHOWN[task]
        lines += [f"| data set | rank | model | {PRIMARY_METRIC[task]} | / best | / HGB | "
                  + " | ".join(shown) + " | fit s | n |",
                  "|---|---|---|---|---|---|" + "---|" * len(shown) + "---|---|"]
        for _, r in part.iterrows():
            name = f"**{r['model']}**" if r["rank"] == 1 else r["model"]
            lines.append(f"| {r['dataset']} | {int(r['rank'])} | {name} | {_num(r['mean'])} | "
                         f"{_num(r['ratio_best'], 2)} | {_num(r['ratio_peer'], 2)} | "
                         + " | ".join(_num(r[m]) for m in shown)
                         + f" | {_num(r['fit_seconds'], 1)} | {int(r['n_splits'])} |")
        lines.append("")
    lines += _family_summary(ranked, proto)
    checks = check_table(ranked, proto)
    lines += ["## Issue #41 checks", "",
              f"OAK/RBF-ARD: OAK's mean RMSE over RBF-ARD's (bar: <= {OAK_TO_RBF_BAR}). Over 2x HGB: the "
              f"families worse than HGB by more than {PEER_BAR}x on a data set where some GP beats HGB (bar: "
              f"none). auto / best: `hdgp fit --model auto`'s mean RMSE or log-loss over the best other family's, "
              f"HGB aside (bar: <= {AUTO_BAR}; empty where auto did not run).", "",
              "| data set | OAK / RBF-ARD | OAK ok | a GP beats HGB | over 2x HGB | ok | auto / best | auto ok |",
              "|---|---|---|---|---|---|---|---|"]
    for _, c in checks.iterrows():
        lines.append(f"| {c['dataset']} | {_num(c['oak_to_rbf'])} | {_yes(c['oak_ok'])} | "
                     f"{_yes(c['gp_beats_peer'], failing='no')} | "
                     f"{', '.join(c['over_2x_peer'])} | {_yes(c['peer_ok'])} | {_num(c['auto_to_best'])} | "
                     f"{_yes(c['auto_ok'])} |")
    oak = checks["oak_ok"].dropna()
    peer = checks["peer_ok"].dropna()
    auto = checks["auto_ok"].dropna()
    lines += ["", f"OAK within {OAK_TO_RBF_BAR} x RBF-ARD on {int(sum(oak))} of {len(oak)} data sets; no family over "
                  f"{PEER_BAR} x HGB (where a GP beats it) on {int(sum(peer))} of {len(peer)}; auto within "
                  f"{AUTO_BAR} x the best family on {int(sum(auto))} of {len(auto)}.", ""]
    return lines


#: Report sections a protocol can name in its ``plots`` (Markdown, not figures).
SECTIONS = {"ranking": ranking_section}
