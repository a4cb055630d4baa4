"""``hdgp explain``: a self-contained HTML report (figures embedded as PNG data URIs).

The report works offline (no scripts, fonts or styles from the network) and the
PNGs are also written next to ``report.html``. Sections: data summary, held-out
accuracy and calibration, model choice (``--model auto``), learned quantities,
the Sobol ranking table, the top components, the cumulative-Sobol curve and the credible intervals
of the ranked indices with the ranking's stability (:mod:`hdgp.workflow.report_sobol`); for
classifiers the accuracy section shows classification metrics, a reliability diagram
and confusion counts (:mod:`hdgp.workflow.report_classification`).
"""

from __future__ import annotations

import base64
import copy
import html
import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from .._version import __version__
from ..io import atomic
from ..plotting import MAX_PLOT_ORDER, _pyplot, plot_components, plot_truncation_curve
from .report_classification import accuracy_section, majority_class_rate, reliability_figure
from .report_sobol import interval_data, interval_results, interval_section
from .summary import format_lengthscale, learned_quantities

__all__ = ["write_report", "report_data", "mean_baseline_rmse"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}figure{display:inline-block;margin:.5em}
figure img{max-width:100%;border:1px solid #eee}.note{color:#555;font-size:.92em}.bad{color:#a00}
"""


def _png(fig) -> bytes:
    plt = _pyplot()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _e(value) -> str:
    return html.escape(str(value))


def _table(header, rows, cls="", left=1) -> str:
    head = "".join(f"<th class='l'>{_e(h)}</th>" if i < left else f"<th>{_e(h)}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td class='l'>{_e(v)}</td>" if i < left else f"<td>{_e(v)}</td>"
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(v, digits=4) -> str:
    return "—" if v is None else f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _r2(v) -> str:
    """R² with three decimals (a perfect fit reads 1.000, not 1; an undefined one —)."""
    return "—" if v is None or not np.isfinite(v) else f"{v:.3f}"


def mean_baseline_rmse(tm) -> float | None:
    r"""Held-out RMSE of the constant prediction :math:`\bar y_{\text{train}}` (the training rows' mean target).

    :math:`\sqrt{\tfrac1m \sum_i (y_i - \bar y_{\text{train}})^2}` over the held-out rows; a model whose
    RMSE is not below it has learned nothing from the features. The training mean comes from the mean of
    all rows and the held-out targets, :math:`\bar y_{\text{train}} = (N \bar y - \sum_i y_i) / n_{\text{train}}`.
    None without held-out rows, for a classifier, or when the rows were not split into training and
    held-out rows only.
    """
    data, holdout = tm.metadata.get("data") or {}, tm.metadata.get("holdout")
    target = data.get("target") or {}
    if holdout is None or not len(holdout["y"]) or "mean" not in target:
        return None
    y = np.asarray(holdout["y"], dtype=float)
    n_rows, n_train = data.get("n_rows"), data.get("n_train")
    if not n_train or n_rows != n_train + len(y):
        return None
    train_mean = (n_rows * target["mean"] - y.sum()) / n_train
    return float(np.sqrt(np.mean((y - train_mean) ** 2)))


# ------------------------------------------------------------------ figures
def _calibration_figure(y, mean, std):
    plt = _pyplot()
    levels = np.linspace(0.05, 0.99, 30)
    z = np.abs(y - mean) / std
    observed = [(z <= norm.ppf(0.5 + p / 2)).mean() for p in levels]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot([0, 1], [0, 1], "k:", label="perfect calibration")
    a.plot(levels, observed, "o-", ms=3, label="held-out rows")
    a.set_xlabel("nominal probability of the central interval")
    a.set_ylabel("observed fraction inside")
    a.set_title("Calibration of predictive intervals")
    a.legend(loc="upper left")
    b.errorbar(y, mean, yerr=2 * std, fmt="o", ms=3, alpha=0.6, elinewidth=0.8)
    lo, hi = min(y.min(), mean.min()), max(y.max(), mean.max())
    b.plot([lo, hi], [lo, hi], "k:")
    b.set_xlabel("observed")
    b.set_ylabel("predicted mean ± 2 std")
    b.set_title("Held-out predictions")
    fig.tight_layout()
    return fig


def _tick_labels(tm, name: str, values) -> list:
    if tm.schema.kinds[name] == "categorical":
        return tm.schema.level_labels(name, values)
    return [f"{v:.3g}" for v in values]


def _component_figure(tm, term: tuple, class_code: int | None = None):
    """One component of order up to 3 (:func:`hdgp.plotting.plot_components`; a three-feature one as a row of
    slices), levels named as in the table; ``class_code``: whose latent function, for a classifier of more
    than two classes."""
    # a binary classifier's components add up to the latent function of its second class (the estimator
    # sees class codes; the table's schema names them)
    if tm.task == "classification":
        target = f"latent f of {tm.target} = {tm.schema.classes[1 if class_code is None else class_code]}"
    else:
        target = tm.target
    extra = {} if class_code is None else {"class_label": class_code}
    wide = len(term) == 3  # three slices side by side
    fig = plot_components(tm.estimator, [term], ncols=3 if wide else 1, figsize_per=(4.0, 3.4) if wide else (4.8, 3.5),
                          target_name=target,
                          level_labels=lambda name, values: _tick_labels(tm, name, values), **extra)
    _calendar_axes(fig, tm)
    return fig


def _calendar_axes(fig, tm) -> None:
    """Dates, not the days since 1970 that the model sees, on the axes of date columns (found by
    their axis labels, which :func:`~hdgp.plotting.plot_components` sets to the feature names)."""
    from matplotlib.ticker import FuncFormatter  # deferred: matplotlib loads only when a figure is drawn

    calendar = FuncFormatter(lambda days, _: str(np.datetime64(int(round(days)), "D")))
    for ax in fig.axes:
        for name, axis, label in (("x", ax.xaxis, ax.get_xlabel()), ("y", ax.yaxis, ax.get_ylabel())):
            if tm.schema.kinds.get(label) == "datetime":
                axis.set_major_formatter(calendar)
                ax.tick_params(axis=name, labelrotation=30)


@dataclass
class _Explained:
    """The Sobol decomposition of one latent function of an OAK model."""

    indices: dict  # term (feature names) -> normalised Sobol index, ranked
    by_order: np.ndarray
    result: object  # hdgp.explain.SobolResult (terms as feature indices, values)
    class_code: int | None = None  # one-vs-rest latent function of this class (more than two classes)


def _explained(est) -> list[_Explained]:
    """One entry per latent function with a Sobol decomposition: the regressor's or binary classifier's
    function, or one per class of a classifier of more than two classes; empty for other models."""
    indices = getattr(est, "sobol_indices_", None)
    if isinstance(indices, dict):
        result = est.sobol_[0] if isinstance(est.sobol_, list) else est.sobol_
        return [_Explained(indices, np.asarray(est.sobol_order_, float), result)]
    if isinstance(indices, list):
        return [_Explained(ind, np.asarray(order, float), res, int(code))
                for ind, order, res, code in zip(indices, est.sobol_order_, est.sobol_, est.classes_)]
    return []


def _explained_view(tm):
    """``tm``, or for ``--model auto``'s mixture the same table model seen through one member: the heaviest
    with a Sobol decomposition, else the heaviest. Its metadata (metrics, selection, the mixture's
    held-out predictions) stays the mixture's; the held-out inputs are put in the member's encoding and
    ``explained_member`` names it with its weight."""
    stack = tm.estimator
    members = getattr(stack, "members_", None)
    if not members:
        return tm
    k = next((k for k, m in enumerate(members) if _explained(m[1])), 0)
    name, est, encoding, columns = members[k]
    schema = copy.copy(tm.schema)
    schema.encoding = encoding
    meta = {**tm.metadata, "explained_member": {"model": name, "weight": float(stack.weights_[k])}}
    if meta.get("holdout") is not None:
        meta["holdout"] = {**meta["holdout"],
                           "X": stack._inputs(np.asarray(meta["holdout"]["X"]), encoding, columns).to_numpy()}
    return type(tm)(est, schema, meta)


def _member_note(meta) -> str:
    """A sentence naming the member whose parameters and explanations the report shows, or ''."""
    member = meta.get("explained_member")
    if not member:
        return ""
    return (f" The model predicts with a mixture of {len(meta['members'])} members (stacking weights: "
            + ", ".join(f"{m['model']} {m['weight']:.3f}" for m in meta["members"])
            + f"); the parameters and explanations below are those of its member {member['model']} "
            f"(weight {member['weight']:.3f}), the held-out numbers above the mixture's.")


#: Smallest normalised Sobol index of a component drawn in the report (smaller ones would be flat).
_MIN_DRAWN_SOBOL = 1e-3


def _component_plan(tm, explained, top: int) -> list[tuple[list, list]]:
    """Per latent function: the ranked terms (among the ``top``) drawn under "Top components", and those left
    out as ``(rank, term, reason)`` (order above :data:`~hdgp.plotting.MAX_PLOT_ORDER`, a Sobol index below
    :data:`_MIN_DRAWN_SOBOL`, or beyond the figures the report draws), so that none is skipped silently."""
    per_function = max(1, _MAX_COMPONENT_FIGURES // max(1, len(explained)))  # shared between the classes
    plans = []
    for entry in explained:
        drawn, left_out = [], []
        for rank, (u, v) in enumerate(zip(entry.result.terms[:top], entry.result.values[:top].tolist()), start=1):
            u = tuple(int(j) for j in u)
            if len(u) > MAX_PLOT_ORDER:
                left_out.append((rank, u, f"order {len(u)}: components are drawn up to order {MAX_PLOT_ORDER}"))
            elif v < _MIN_DRAWN_SOBOL:
                left_out.append((rank, u, f"Sobol index below {_MIN_DRAWN_SOBOL:g}, too small to see"))
            elif len(drawn) >= per_function:
                left_out.append((rank, u, f"beyond the {per_function} figures drawn per function"))
            else:
                drawn.append(u)
        plans.append((drawn, left_out))
    return plans


def _term_name(tm, u) -> str:
    return " × ".join(str(tm.schema.encoded_names[j]) for j in u)


def _has_truncation_curve(tm) -> bool:
    """Whether the report draws the held-out truncation curve (a model refitted on all rows has seen them)."""
    holdout = tm.metadata.get("holdout")
    return (hasattr(tm.estimator, "truncation_curve") and not tm.metadata.get("refit_all")
            and holdout is not None and len(holdout["y"]) > 0
            and (tm.task != "classification" or len(np.unique(holdout["y"])) > 1))


def _truncated_metric(tm) -> str:
    if tm.task != "classification":
        return "RMSE"
    if len(tm.schema.classes) == 2:
        return "AUC"
    return "AUC (one-vs-rest, averaged over the classes; green: the classes' mean)"


def _truncation_curve(tm) -> dict:
    """The held-out metric as the top 50 ranked terms are added (OAK Fig. 5)."""
    holdout = tm.metadata["holdout"]
    X = pd.DataFrame(np.asarray(holdout["X"]), columns=tm.schema.encoded_names)
    return tm.estimator.truncation_curve(X, holdout["y"], max_terms=50)


def _cumulative_figure(tm):
    est = tm.estimator
    if _has_truncation_curve(tm):
        return plot_truncation_curve(_truncation_curve(tm), metric="auc" if tm.task == "classification" else "rmse")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    explained = _explained(est)
    for entry in explained:
        values = entry.result.values.cpu().numpy()[:50]
        label = None if entry.class_code is None else f"{tm.schema.classes[entry.class_code]} vs rest"
        ax.plot(np.arange(1, len(values) + 1), np.cumsum(values), "--", color="g" if label is None else None,
                label=label)
    if len(explained) > 1:
        ax.legend(fontsize=7)
    ax.set_xlabel("number of terms (ranked by Sobol index)")
    ax.set_ylabel("cumulative normalised Sobol")
    ax.set_ylim(0, 1.05)
    return fig


# ------------------------------------------------------------------ content
def report_data(tm, top: int = 10) -> dict:
    """Numbers shown in the report (also printed by ``hdgp explain --json``)."""
    tm = _explained_view(tm)
    est, meta = tm.estimator, tm.metadata
    out = {"model": meta.get("model"), "task": tm.task, "target": tm.target, "metrics": meta.get("metrics"),
           "baseline": ({"majority_class_rate": majority_class_rate(tm)} if tm.task == "classification"
                        else {"mean_rmse": mean_baseline_rmse(tm)}),
           "selection": meta.get("selection"), "learned": learned_quantities(est, classes=tm.schema.classes), "sobol": None,
           "members": meta.get("members"), "explained_member": meta.get("explained_member")}
    if tm.task == "classification":
        out["classes"] = list(tm.schema.classes)
    explained = _explained(est)
    ranked = [[{"term": list(k), "sobol": float(v)} for k, v in list(e.indices.items())[:top]] for e in explained]
    if len(explained) == 1:
        out["sobol"], out["sobol_by_order"] = ranked[0], explained[0].by_order.tolist()
    elif explained:  # more than two classes: one latent function per class, against the rest
        labels = [str(tm.schema.classes[e.class_code]) for e in explained]
        out["sobol_by_class"] = dict(zip(labels, ranked))
        out["sobol_by_order_by_class"] = {label: e.by_order.tolist() for label, e in zip(labels, explained)}
    intervals = interval_data(interval_results(est, explained, top))
    if len(explained) == 1:
        out["sobol_intervals"] = intervals[0]
    elif explained:
        out["sobol_intervals_by_class"] = dict(zip(labels, intervals))
    if explained and _has_truncation_curve(tm):
        out["truncation_curve"] = {k: np.asarray(v).tolist() for k, v in _truncation_curve(tm).items()}
    return out


def _sections(tm, top: int, images: dict) -> list[str]:
    est, meta = tm.estimator, tm.metadata
    data = meta.get("data") or {}
    parts = []
    # data summary
    tgt = data.get("target", {})
    parts.append("<h2 id='data'>Data</h2>")
    if tm.task == "classification":
        classes = ", ".join(f"{c} ({n} rows)" for c, n in zip(tgt.get("classes", []), tgt.get("counts", [])))
        described = f"classification, {len(tm.schema.classes)} classes: {classes}"
    else:
        described = (f"mean {_fmt(tgt.get('mean'))}, std {_fmt(tgt.get('std'))}, "
                     f"range [{_fmt(tgt.get('min'))}, {_fmt(tgt.get('max'))}]")
    reason = f" Task chosen because the {tgt['reason']}." if tgt.get("reason", "").startswith("target") else ""
    refit = tm.metadata.get("refit_all")
    refitted = (f" After the held-out evaluation the model was refitted on all {refit['n_rows']} rows: the "
                "parameters and components below are the refitted model's, the held-out numbers those of the "
                "model fitted without the held-out rows." if refit else "")
    parts.append(f"<p>{_e(data.get('n_rows', '?'))} rows: {_e(data.get('n_train', '?'))} for training, "
                 f"{_e(data.get('n_test', 0))} held out.{_e(refitted)} Target <b>{_e(tm.target)}</b>: "
                 f"{_e(described)}.{_e(reason)}</p>")
    rows = []
    for f in data.get("features", []):
        if f["kind"] == "categorical":
            desc = ", ".join(f"{k} ({v})" for k, v in list(f["levels"].items())[:8]) + (" …" if len(f["levels"]) > 8 else "")
            rows.append([f["name"], "categorical", desc, ""])
        elif f["kind"] == "datetime":
            rows.append([f["name"], "date (days since 1970 in the model)", f"{f['first']} … {f['last']}", ""])
        else:
            rows.append([f["name"], "numeric", f"[{_fmt(f['min'])}, {_fmt(f['max'])}]", _fmt(f["mean"])])
    parts.append(_table(["column", "type", "range / levels (count)", "mean"], rows, "data-summary", left=3))
    if data.get("dropped"):
        parts.append(f"<p class='note'>Ignored columns: {_e(', '.join(data['dropped']))}.</p>")
    # accuracy and calibration
    parts.append("<h2 id='accuracy'>Accuracy and calibration (held-out rows)</h2>")
    metrics = meta.get("metrics")
    if tm.task == "classification":
        parts += accuracy_section(tm, images, _table, _fmt, _e)
    elif metrics:
        baseline = mean_baseline_rmse(tm)
        rows = [["RMSE", _fmt(metrics["rmse"]), "target units; lower is better"]]
        if baseline is not None:
            rows.append(["baseline RMSE", _fmt(baseline), "predicting the training mean; the RMSE to beat"])
        rows += [["MAE", _fmt(metrics["mae"]), "target units"],
                 ["R²", _r2(metrics["r2"]), "1 = perfect, 0 = predicting the mean"],
                ["NLPD", _fmt(metrics["nlpd"]), "negative log predictive density; lower is better"]]
        for key in ("coverage_50", "coverage_90", "coverage_95"):
            nominal = int(key.split("_")[1])
            rows.append([f"coverage of {nominal} % intervals", f"{100 * metrics[key]:.1f} %", f"ideal {nominal} %"])
        parts.append(_table(["metric", "value", "meaning"], rows, "calibration", left=1))
        parts.append(f"<figure class='calibration'><img alt='calibration plot' src='{images['calibration.png']}'>"
                     "<figcaption>Observed vs nominal interval coverage, and predictions with ±2 std.</figcaption></figure>")
    else:
        parts.append("<p class='note'>No rows were held out (test size 0), so accuracy and calibration "
                     "could not be measured. Refit with --test-size 0.2.</p>")
    # selection
    if meta.get("selection"):
        classify = tm.task == "classification"
        keys = (("val_log_loss", "val_accuracy") if classify else
                ("val_log_density", "val_log_density_calibrated", "val_variance_ratio", "val_rmse"))
        header = (["validation log-loss", "validation accuracy"] if classify
                  else ["validation log density", "calibrated", "variance factor", "validation RMSE"])
        parts.append("<h2 id='selection'>Model choice (--model auto)</h2>")
        parts.append("<p class='note'>Candidates were fitted by successive halving on growing subsets of 80 % of the "
                     "training rows (one stopped once clearly behind the leader) and scored by their "
                     + ("log-loss on the other 20 % (lower is better)" if classify else
                        "mean log predictive density on the other 20 % once its predictive variances were "
                        "multiplied by the factor that calibrates them there (higher is better)")
                     + "; the candidates left were stacked (mixture weights that maximise the validation log "
                     "density of their mixture), and those with a weight were refitted on all training rows"
                     + ("" if classify else ", each keeping its factor") + ".</p>")
        # files written before the calibration have no calibrated columns, before stacking no weights
        rows = [[r["model"] + (" ✔" if r.get("selected") else ""), *(_fmt(r.get(k)) for k in keys),
                 _fmt(r.get("weight")), _fmt(r["fit_seconds"], 3), r["error"] or ""] for r in meta["selection"]]
        parts.append(_table(["model", *header, "weight", "fit (s)", "error"], rows, "selection"))
    # learned quantities
    q = learned_quantities(est, classes=tm.schema.classes)
    parts.append("<h2 id='model'>Fitted model</h2>")
    parts.append(f"<p>{_e(meta.get('model'))} ({_e(q['estimator'])}), fitted in {_fmt(meta.get('fit_seconds'), 3)} s."
                 + (f" Noise std {np.sqrt(q['noise_variance']):.4g} (target units)." if "noise_variance" in q else "")
                 + _e(_member_note(meta)) + "</p>")
    if "lengthscales" in q:
        rows = [[k, format_lengthscale(v, k in q["flat_features"])] for k, v in list(q["lengthscales"].items())[:top]]
        parts.append("<p class='note'>Shortest length-scales (on standardised or flow-warped inputs): the "
                     "function changes fastest along these features.</p>")
        parts.append(_table(["feature", "length-scale"], rows, "lengthscales"))
    for label, scales in q.get("lengthscales_by_class", {}).items():
        flat = q["flat_features_by_class"][label]
        rows = [[k, format_lengthscale(v, k in flat)] for k, v in list(scales.items())[:top]]
        parts.append(f"<p class='note'>Shortest length-scales of the latent function of class {_e(label)} against "
                     "the other classes (on standardised inputs).</p>")
        parts.append(_table(["feature", "length-scale"], rows, "lengthscales"))
    if meta.get("warnings"):
        parts.append("<p class='note'>Warnings during fitting: " + _e("; ".join(meta["warnings"][:5])) + "</p>")
    # Sobol
    parts.append("<h2 id='sobol'>Which features and interactions matter (Sobol indices)</h2>")
    explained = _explained(est)
    if explained:
        latent = ""
        if tm.task == "classification":
            latent = (" For a classifier the function is the latent score whose probit gives the class probability"
                      + (": one per class, against the rest." if len(explained) > 1 else "."))
        parts.append("<p class='note'>Normalised Sobol index: the share of the variance of the fitted function "
                     f"explained by each additive component (a feature or an interaction of features).{latent}</p>")
        for entry in explained:
            if entry.class_code is not None:
                label = tm.schema.classes[entry.class_code]
                parts.append(f"<h3>{_e(tm.target)} = {_e(label)} against the other classes</h3>")
            ranked = list(entry.indices.items())[:top]
            cum = np.cumsum([v for _, v in ranked])
            rows = [[str(i + 1), " × ".join(k), str(len(k)), f"{v:.4f}", f"{c:.4f}"]
                    for i, ((k, v), c) in enumerate(zip(ranked, cum))]
            parts.append(_table(["rank", "term", "order", "Sobol index", "cumulative"], rows, "sobol", left=2))
            shares = ", ".join(f"order {i + 1}: {v:.3f}" for i, v in enumerate(entry.by_order) if v > 5e-4)
            parts.append(f"<p>Share by interaction order: {_e(shares)}</p>")
        if hasattr(est, "predict_component"):
            parts.append("<h2 id='components'>Top components</h2>")
            k = 0
            for entry, (drawn, left_out) in zip(explained, _component_plan(tm, explained, top)):
                ranks = {tuple(int(j) for j in u): i + 1 for i, u in enumerate(entry.result.terms[:top])}
                for u in drawn:
                    k += 1
                    name = f"component_{k:02d}.png"
                    caption = f"rank {ranks[u]}: {_term_name(tm, u)}"
                    if entry.class_code is not None:
                        caption += f" ({tm.target} = {tm.schema.classes[entry.class_code]} against the rest)"
                    parts.append(f"<figure class='component' data-file='{name}'><img alt='{_e(caption)}' "
                                 f"src='{images[name]}'><figcaption>{_e(caption)}</figcaption></figure>")
                if left_out:
                    whose = ("" if entry.class_code is None
                             else f" of {tm.target} = {tm.schema.classes[entry.class_code]}")
                    listed = "; ".join(f"rank {rank} {_term_name(tm, u)} ({reason})" for rank, u, reason in left_out)
                    parts.append(f"<p class='note left-out'>Ranked terms{_e(whose)} not drawn: {_e(listed)}.</p>")
            if tm.task != "classification":
                effect = "its effect on the target, in target units"
            elif len(explained) == 1:
                effect = ("its effect on the latent function f of the classifier, P(" + _e(f"{tm.target} = "
                          f"{tm.schema.classes[1]}") + ") = Φ(f) up to the posterior spread, so positive values "
                          "favour that class")
            else:
                effect = ("its effect on the latent function f of the class named in the plot against the other "
                          "classes, so positive values favour that class")
            parts.append(f"<p class='note'>Posterior mean of each component ({effect}) with a ±2 std band or error "
                         "bars; features not in a component do not change it. "
                         "Two-feature components with a discrete feature show one curve per level; two continuous "
                         "features a map with the training rows as dots and the posterior std as dashed lines. "
                         "A three-feature component is drawn as three such maps, slices at the 10, 50 and 90 % "
                         "quantiles of one of its features (or at levels of a discrete one), on one colour scale, "
                         "each with the training rows of its third of the data. Features the model log-transformed "
                         "are drawn on log axes.</p>")
        parts.append("<h2 id='cumulative'>Cumulative Sobol curve</h2>")
        parts.append(f"<figure class='cumulative'><img alt='cumulative Sobol curve' src='{images['cumulative_sobol.png']}'>"
                     "<figcaption>Cumulative Sobol index (green)"
                     + (f" and, with held-out rows, the {_truncated_metric(tm)} of the model truncated to the top "
                        "terms (red)" if _has_truncation_curve(tm) else
                        "; one curve per class against the rest for more than two classes")
                     + ".</figcaption></figure>")
        labels = [None if entry.class_code is None
                  else f"{tm.target} = {tm.schema.classes[entry.class_code]} against the other classes"
                  for entry in explained]
        parts += interval_section(interval_results(est, explained, top), labels)
    else:
        parts.append(f"<p class='note'>{_e(meta.get('model'))} is not an orthogonal additive model, so it has no Sobol "
                     "decomposition. Refit with <code>--model oak</code> for a ranking of features and "
                     "interactions.</p>")
    return parts


def _figures(tm, top: int) -> dict:
    est, meta = tm.estimator, tm.metadata
    figures = {}
    holdout = meta.get("holdout")
    if holdout is not None and len(holdout["y"]) and tm.task == "classification":
        figures["reliability.png"] = _png(reliability_figure(holdout["y"], holdout["proba"], _pyplot()))
    elif holdout is not None and len(holdout["y"]):
        figures["calibration.png"] = _png(_calibration_figure(np.asarray(holdout["y"]), np.asarray(holdout["mean"]),
                                                              np.asarray(holdout["std"])))
    explained = _explained(est)
    k = 0
    for entry, (drawn, _) in zip(explained, _component_plan(tm, explained, top)):
        for u in drawn:
            k += 1
            figures[f"component_{k:02d}.png"] = _png(_component_figure(tm, u, entry.class_code))
    if explained:
        figures["cumulative_sobol.png"] = _png(_cumulative_figure(tm))
    return figures


#: Most component figures in a report (shared between the classes' latent functions, at least one each).
_MAX_COMPONENT_FIGURES = 12
#: The names of the figures :func:`write_report` writes.
_FIGURE_NAME = re.compile(r"component_\d{2}\.png|calibration\.png|reliability\.png|cumulative_sobol\.png")


def write_report(tm, output_dir, *, top: int = 10, title: str | None = None) -> Path:
    """Write ``report.html`` (self-contained) and its PNG figures into ``output_dir``.

    Parameters
    ----------
    tm : hdgp.workflow.TabularModel
    output_dir : str or Path
        Created if needed. Every file is written to a temporary name first and
        renamed, so a failure leaves no half-written file. Figures of an earlier
        report in the folder that this one does not draw are removed (only files
        named as this function names them).
    top : int, default=10
        Number of Sobol terms listed and components plotted (at most 12 plots).

    Returns
    -------
    Path of ``report.html``.
    """
    if not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be a positive integer, got {top!r}.")
    tm = _explained_view(tm)
    figures = _figures(tm, top)  # everything is computed before anything is written
    images = {name: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for name, png in figures.items()}
    title = title or f"hdgp report — {tm.metadata.get('model')} predicting {tm.target}"
    body = "\n".join(_sections(tm, top, images))
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f"<p class='note'>Generated by hdgp {_e(__version__)}. This page is self-contained and works offline.</p>"
            f"{body}</body></html>")
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a folder; choose another -o for the report.")
    out.mkdir(parents=True, exist_ok=True)
    for name, png in figures.items():
        atomic.write_bytes_atomic(out / name, png)
    atomic.write_bytes_atomic(out / "report.html", page.encode("utf-8"))
    for stale in out.glob("*.png"):
        if _FIGURE_NAME.fullmatch(stale.name) and stale.name not in figures:
            stale.unlink()
    return out / "report.html"
