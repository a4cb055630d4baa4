"""Render a protocol's stored results as Markdown, CSV and PNG beside the paper's numbers."""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import HDGPWarning
from .compare import HIGHER_IS_BETTER, LOWER_IS_BETTER, aggregate, compare
from .plots import PLOTS, sobol_low_order_table
from .protocols import Protocol, get_protocol
from .ranking import SECTIONS
from .reference import empty_reference, load_reference
from .store import ResultStore, default_db_path

__all__ = ["make_report", "default_report_dir"]


def default_report_dir(protocol: str) -> Path:
    """``benchmarks/results/<protocol>/`` under the current directory."""
    return Path("benchmarks") / "results" / protocol


def _fmt(mean, std, digits=3) -> str:
    if not np.isfinite(mean):
        return ""
    if std is None or not np.isfinite(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {2 * std:.{digits}f}"


def _in_protocol_order(df: pd.DataFrame, dataset_order: list[str], model_order: list[str]) -> pd.DataFrame:
    df = df.copy()
    df["_d"] = df["dataset"].map({d: i for i, d in enumerate(dataset_order)}).fillna(len(dataset_order))
    df["_m"] = df["model"].map({m: i for i, m in enumerate(model_order)}).fillna(len(model_order))
    return df.sort_values(["_d", "dataset", "_m", "model"]).drop(columns=["_d", "_m"])


def _metric_table(cmp: pd.DataFrame, metric: str, dataset_order: list[str], model_order: list[str]) -> list[str]:
    rows = cmp[cmp["metric"] == metric]
    if rows.empty:
        return []
    rows = _in_protocol_order(rows, dataset_order, model_order)
    better = "lower" if metric in LOWER_IS_BETTER else "higher" if metric in HIGHER_IS_BETTER else "no direction"
    lines = [f"### {metric.upper()} ({better} is better)", "",
             "| data set | model | n | ours (mean ± 2·std) | paper (mean ± 2·std) | ours − paper | p(worse) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows.itertuples():
        ours = _fmt(r.mean, r.std)
        if r.match is True:
            ours = f"**{ours}**"
        paper = _fmt(r.paper_mean, r.paper_std)
        diff = f"{r.diff:+.3f}" if np.isfinite(r.diff) else ""
        p = f"{r.p_worse:.3f}" if np.isfinite(r.p_worse) else ""
        lines.append(f"| {r.dataset} | {r.model} | {r.n} | {ours} | {paper} | {diff} | {p} |")
    return lines + [""]


def _timing_table(results: pd.DataFrame, dataset_order: list[str], model_order: list[str]) -> list[str]:
    done = results[results["status"] == "done"].copy()
    if done.empty:
        return []
    # rows from before the device column ran on the CPU; one row per device once some task ran elsewhere
    done["device"] = done["device"].fillna("cpu") if "device" in done else "cpu"
    g = done.groupby(["dataset", "model", "device"]).agg(
        n_train=("n_train", "median"), fit=("fit_seconds", "mean"), predict=("predict_seconds", "mean"),
        peak=("peak_rss_mb", "max"), inc=("rss_increase_mb", "max"), threads=("threads", "max")).reset_index()
    g = _in_protocol_order(g, dataset_order, model_order)
    show_device = bool((done["device"] != "cpu").any())
    header = "| data set | model | n train | fit s (mean) | predict s (mean) | peak RSS MB | RSS increase MB | threads |"
    lines = ["## Cost per task", "", header + (" device |" if show_device else ""),
             "|---|---|---:|---:|---:|---:|---:|---:|" + ("---|" if show_device else "")]
    for r in g.itertuples():
        lines.append(f"| {r.dataset} | {r.model} | {r.n_train:.0f} | {r.fit:.2f} | {r.predict:.3f} | {r.peak:.0f} | "
                     f"{r.inc:.0f} | {r.threads:.0f} |" + (f" {r.device} |" if show_device else ""))
    return lines + [""]


def _failures(results: pd.DataFrame) -> list[str]:
    failed = results[results["status"] == "failed"]
    if failed.empty:
        return []
    lines = ["## Failed tasks", "", "| data set | model | split | seed | attempts | error |", "|---|---|---:|---:|---:|---|"]
    for r in failed.itertuples():
        err = str(r.error).replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(f"| {r.dataset} | {r.model} | {r.split} | {r.seed} | {r.attempts} | {err} |")
    return lines + [""]


def _planned_cells(proto) -> list[tuple[str, str]]:
    """The protocol's (data set, model label) cells, in protocol order."""
    return [(d.name, m.label) for m in proto.models for d in proto.datasets if m.runs_on(d)]


def _not_run(proto, results: pd.DataFrame) -> list[str]:
    """Cells of the protocol without any stored task, per model: a partial run stays visible."""
    have = set(zip(results["dataset"], results["model"]))
    missing: dict[str, list[str]] = {}
    for dataset, model in _planned_cells(proto):
        if (dataset, model) not in have:
            missing.setdefault(model, []).append(dataset)
    if not missing:
        return []
    lines = ["## Not run yet", "", f"Cells of the protocol without a stored task (`hdgp bench run {proto.name} "
             "--dry-run` lists them):", ""]
    return lines + [f"- {model}: {', '.join(datasets)}" for model, datasets in missing.items()] + [""]


def _paper_only(cmp: pd.DataFrame, reference: pd.DataFrame, planned) -> list[str]:
    """Paper numbers of the protocol's cells that have no result of ours (not run, or every task failed)."""
    have = set(zip(cmp["dataset"], cmp["model"], cmp["metric"]))
    planned = set(planned)
    missing = [r for r in reference.itertuples()
               if (r.dataset, r.model) in planned and (r.dataset, r.model, r.metric) not in have]
    if not missing:
        return []
    lines = ["## Paper numbers without a result of ours here", "",
             "| data set | model | metric | paper |", "|---|---|---|---:|"]
    lines += [f"| {r.dataset} | {r.model} | {r.metric} | {_fmt(r.paper_mean, r.paper_std)} |" for r in missing]
    return lines + [""]


def _code_versions(versions: pd.Series) -> str:
    """Which hdgp commits produced the rows: tasks per ``hdgp_git`` (newest first as they appear)."""
    counts: dict = {}
    for v in versions:
        v = v if isinstance(v, dict) else {}
        key = (v.get("hdgp_git", "unknown"), v.get("recorded") == "report header")
        counts[key] = counts.get(key, 0) + 1
    parts = [f"{commit}: {n} task(s)" + (" (restored; the report that held them recorded one commit for all its "
                                          "rows)" if from_header else "")
             for (commit, from_header), n in counts.items()]
    return "Code of the rows (hdgp_git): " + "; ".join(parts) + "."


def _header(proto, runs: pd.DataFrame, results: pd.DataFrame, command: str) -> list[str]:
    lines = [f"# Benchmark report: `{proto.name}`", "", proto.description, ""]
    commands = []
    for run in ([] if runs.empty else runs.to_dict("records")):
        counts = [run.get("done"), run.get("failed")]
        idle = all(c is not None and c == c and c == 0 for c in counts)  # ran nothing (all skipped, or stopped)
        if run.get("command") and not idle:  # (restored runs of older folders have no counts)
            commands.append(run["command"])
    if commands:
        lines += ["Produced by (each `bench run` on this results database that ran tasks, in order):", "", "```"]
        lines += list(dict.fromkeys(commands))
        lines += [command, "```", ""]
    latest = results.sort_values("finished_at", kind="stable") if "finished_at" in results else results
    on_gpu = (latest["device"].fillna("cpu").ne("cpu") & latest["status"].eq("done") if "device" in latest
              else pd.Series(False, latest.index))  # as the cost table counts them
    # the libraries and machine of the last task that finished, on the CPU where any task ran there
    described = latest[~on_gpu] if (~on_gpu).any() else latest
    versions = described["versions"].dropna()
    machines = described["machine"].dropna()
    if len(versions):
        v = versions.iloc[-1]
        lines.append("Libraries: " + ", ".join(f"{k} {val}" for k, val in v.items() if k != "recorded") + ".")
        lines.append(_code_versions(results["versions"]))
    if len(machines):
        m = machines.iloc[-1]
        lines.append(f"Machine: {m.get('platform')}, {m.get('cores')} usable cores; threads per task: "
                     f"{int(results['threads'].max())}. Timings come from a shared, often busy machine.")
    if on_gpu.any():
        gpu = latest[on_gpu]
        v = gpu["versions"].dropna().iloc[-1] if gpu["versions"].notna().any() else {}
        lines.append(f"{int(on_gpu.sum())} task(s) ran on {', '.join(sorted(set(gpu['device'])))} (`bench run "
                     f"--device`; torch {v.get('torch')}, gpytorch {v.get('gpytorch')}; the cost table's device "
                     "column): their times do not compare with the CPU rows'.")
    n_done = int((results["status"] == "done").sum())
    n_failed = int((results["status"] == "failed").sum())
    lines += [f"Tasks in store: {n_done} done, {n_failed} failed. Report written "
              f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.", ""]
    if proto.notes:
        lines += [f"Protocol notes: {proto.notes}", ""]
    lines += ["Bold: we match or beat the paper — a one-sided t-test of \"ours is worse\" does not reject at "
              "5 % (Welch's test with the paper's std and repetitions where published; with only the number "
              "of its runs, their mean taken to spread as ours, so that a paper number from one test split is "
              "one draw; otherwise a one-sample test against the paper's mean; with a single result of ours, "
              "our value is at least as good). "
              "Spreads are 2·std over splits (and seeds); the test takes one value per split (the mean over "
              "its seeds). With few splits (small n) the test has little power, "
              "so a bold entry there means only \"not shown to be worse\".", ""]
    return lines


def _refuse_to_drop_tasks(tasks_csv: Path, results: pd.DataFrame, protocol: str, db) -> None:
    """Raise ``ValueError`` when the report folder's ``tasks.csv`` holds tasks the database lacks.

    That file is what ``restore`` rebuilds a database from: a report written from a database that
    was never restored (a fresh clone's, or another ``--db``) would replace the committed table
    by the few tasks just run.
    """
    if not tasks_csv.is_file():
        return
    key = ["dataset", "model", "split", "seed"]
    try:
        written = pd.read_csv(tasks_csv, usecols=key)
    except (ValueError, pd.errors.ParserError):  # not a report's tasks.csv: nothing of ours to lose
        return
    present = set(map(tuple, results[key].astype({"split": int, "seed": int}).itertuples(index=False)))
    lost = [k for k in map(tuple, written.itertuples(index=False)) if k not in present]
    if lost:
        raise ValueError(
            f"{str(tasks_csv)!r} holds {len(lost)} task(s) that {str(db)!r} lacks (e.g. {lost[0]}); writing the "
            f"report there would drop them. Run `hdgp bench restore {protocol} --from {tasks_csv.parent} --db {db}` "
            "first (it adds them to the database), or write this report elsewhere with --out."
        )


def _refuse_to_drop_paper_numbers(summary_csv: Path) -> None:
    """Raise when the report in place shows paper numbers that this one, made without the
    reference folder, would lose (e.g. the committed report, rewritten on a machine without it)."""
    try:
        shown = pd.read_csv(summary_csv, usecols=["paper_mean"])["paper_mean"].notna().any()
    except (FileNotFoundError, ValueError, pd.errors.ParserError):  # nothing of ours there
        return
    if shown:
        raise ValueError(
            f"{str(summary_csv.parent)!r} holds a report with the papers' numbers, and they were not found "
            "here: set HDGP_REFERENCE_DIR (or --reference-dir) to the folder of the papers' CSVs, or write "
            "this report elsewhere with --out."
        )


def make_report(protocol, db=None, out_dir=None, reference_dir=None, data_dir=None, plots: bool = True,
                command: str | None = None) -> dict:
    """Write ``report.md``, ``summary.csv``, ``tasks.csv``, ``runs.csv`` and PNG plots for ``protocol``.

    Parameters
    ----------
    protocol : str, path or Protocol
    db : path, optional
        Results database (default ``benchmarks/results/<protocol>.sqlite``).
    out_dir : path, optional
        Output folder (default ``benchmarks/results/<protocol>/``).
    reference_dir : path, optional
        Folder with the papers' CSV files (see :mod:`hdgp.bench.reference`).
    data_dir : path, optional
        Benchmark data folder, used to find ``../reference`` when nothing else is given.
    plots : bool, default=True
    command : str, optional
        The command line that made the report, for its list of commands (default:
        ``hdgp bench report PROTOCOL`` with ``--db`` and ``--out`` where they are given).

    Returns
    -------
    dict with the written paths under ``markdown``, ``summary_csv``, ``tasks_csv``, ``runs_csv``,
    ``plots``.

    Raises
    ------
    ValueError
        No results in ``db``, or the output folder's ``tasks.csv`` holds tasks that ``db`` lacks
        (restore them first).
    """
    proto = get_protocol(protocol)
    if command is None:
        command = shlex.join(["hdgp", "bench", "report", proto.name, *(["--db", str(db)] if db is not None else []),
                              *(["--out", str(out_dir)] if out_dir is not None else [])])
    db = Path(db) if db is not None else default_db_path(proto.name)
    out = Path(out_dir) if out_dir is not None else default_report_dir(proto.name)
    with ResultStore(db) as store:
        results = store.frame(proto.name)
        runs = store.runs(proto.name)
    again = proto.name if isinstance(protocol, Protocol) else str(protocol)
    if results.empty:
        raise ValueError(f"No results for protocol {proto.name!r} in {str(db)!r}; run `hdgp bench run {again}` "
                         "(with the same --db) first.")
    _refuse_to_drop_tasks(out / "tasks.csv", results, again, db)
    out.mkdir(parents=True, exist_ok=True)
    try:
        reference = load_reference(proto, reference_dir, data_dir)
    except FileNotFoundError as exc:
        warnings.warn(f"Paper numbers not shown: {exc}", HDGPWarning, stacklevel=2)
        reference = empty_reference()
    if proto.references and reference.empty:
        _refuse_to_drop_paper_numbers(out / "summary.csv")
    metrics = sorted({c[len("metric_"):] for c in results.columns if c.startswith("metric_")})
    cmp = compare(aggregate(results, metrics), reference)
    model_order = [m.label for m in proto.models]
    dataset_order = [d.name for d in proto.datasets]
    cmp = _in_protocol_order(cmp, dataset_order, model_order)
    lines = _header(proto, runs, results, command)
    if proto.references and reference.empty:
        missing = "Paper numbers not found: set HDGP_REFERENCE_DIR (or HDGP_DATA_DIR beside `reference/`)."
        # a report regenerated without them loses its paper column: say so where it is run, not only in the file
        warnings.warn(f"{missing} The report of {proto.name!r} has no paper column.", HDGPWarning, stacklevel=2)
        lines += [f"*{missing}*", ""]
    lines += ["## Results", ""]
    for metric in proto.metrics:
        lines += _metric_table(cmp, metric, dataset_order, model_order)
    if "sobol-by-order" in proto.plots:
        lines += sobol_low_order_table(results)
    for name in proto.plots:  # Markdown sections (e.g. the generalisation protocol's ranking)
        if name in SECTIONS:
            lines += SECTIONS[name](results, proto)
    lines += _timing_table(results, dataset_order, model_order)
    lines += _failures(results)
    lines += _not_run(proto, results)
    lines += _paper_only(cmp, reference, _planned_cells(proto))
    paths = {"markdown": out / "report.md", "summary_csv": out / "summary.csv", "tasks_csv": out / "tasks.csv",
             "runs_csv": out / "runs.csv", "plots": []}
    if plots:
        for name in dict.fromkeys(("rmse",) + tuple(proto.plots)):
            if name in SECTIONS:
                continue
            hook = PLOTS.get(name)
            if hook is None:
                warnings.warn(f"Unknown plot hook {name!r}; registered: {', '.join(PLOTS)}.", HDGPWarning,
                              stacklevel=2)
                continue
            paths["plots"] += hook(results, cmp, proto, out)
    if paths["plots"]:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in paths["plots"]] + [""]
    paths["markdown"].write_text("\n".join(lines))
    cmp.drop(columns=["values"]).to_csv(paths["summary_csv"], index=False, float_format="%.6g")
    tasks = results.drop(columns=["traceback", "machine", "metrics"]).copy()
    for column in ("hyperparameters", "warnings", "extras", "versions"):  # versions: which code made each row
        tasks[column] = [json.dumps(v, default=str) for v in tasks[column]]
    # 10 digits: a restored database re-renders the same table (6 rounded timestamps to 10^4 s and moved
    # a p-value in its third digit)
    tasks.to_csv(paths["tasks_csv"], index=False, float_format="%.10g")
    # tasks.csv + runs.csv are enough to rebuild the database (hdgp.bench.restore)
    run_columns = ["command", "started_at", "finished_at", "planned", "skipped", "done", "failed"]
    runs.reindex(columns=run_columns).to_csv(paths["runs_csv"], index=False)
    return paths
