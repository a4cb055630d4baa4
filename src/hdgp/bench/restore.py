"""Rebuild a results database from a committed report folder.

The SQLite store is a local working file (not committed); what is committed is
the report folder ``benchmarks/results/<protocol>/`` that :func:`make_report`
writes: ``tasks.csv`` (one row per finished task, every column but the
traceback and machine, with the library versions of each task from 2026-11-25 on; older folders
lack the ``extras`` column, e.g. OAK truncation curves, which then stay empty) and ``runs.csv``
(the ``bench run`` commands).
:func:`restore_store` reads them back so that a fresh clone can extend a table
(``bench run`` skips the restored tasks) and re-render its report without
recomputing anything. Older report folders without ``runs.csv`` still give
their commands through the "Produced by" block of ``report.md``, and the machine of the
restored tasks (and their library versions, where ``tasks.csv`` has none) come from its
"Libraries:" and "Machine:" lines, so a re-rendered report keeps them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from .store import ResultStore

__all__ = ["restore_store"]

_KEY = ("protocol", "dataset", "model", "split", "seed")


def _json_or_none(value):
    if isinstance(value, str) and value:
        return json.loads(value)
    return None


def _number_or_none(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _task_records(tasks: pd.DataFrame, protocol: str) -> list[dict]:
    missing = [c for c in _KEY + ("status",) if c not in tasks.columns]
    if missing:
        raise ValueError(f"tasks.csv lacks the columns {missing}; is it a `hdgp bench report` output?")
    if not (tasks["protocol"] == protocol).any():
        held = sorted(tasks["protocol"].dropna().astype(str).unique())
        raise ValueError(f"tasks.csv holds no tasks of protocol {protocol!r} (it holds: "
                         f"{', '.join(held) or 'no tasks'}); pass the matching protocol or --from folder.")
    metric_cols = [c for c in tasks.columns if c.startswith("metric_")]
    records = []
    for row in tasks[tasks["protocol"] == protocol].to_dict("records"):
        record = {c: _number_or_none(v) for c, v in row.items() if not c.startswith("metric_")}
        record["split"], record["seed"] = int(row["split"]), int(row["seed"])
        record["metrics"] = {c[len("metric_"):]: float(row[c]) for c in metric_cols
                             if _number_or_none(row[c]) is not None}
        record["hyperparameters"] = _json_or_none(row.get("hyperparameters"))
        record["warnings"] = _json_or_none(row.get("warnings")) or []
        record["extras"] = _json_or_none(row.get("extras"))
        if _json_or_none(row.get("versions")) is not None:  # folders before 2026-11-25 lack the column
            record["versions"] = _json_or_none(row.get("versions"))
        else:
            record.pop("versions", None)
        records.append(record)
    return records


def _report_commands(report_md: Path) -> list[str]:
    """The ``hdgp bench run`` lines of the report's "Produced by" code block."""
    lines = report_md.read_text().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Produced by")) + 2
    except StopIteration:
        return []
    commands = []
    for line in lines[start + 1:]:
        if line.startswith("```"):
            break
        if line.startswith("hdgp bench run"):
            commands.append(line)
    return commands


def _report_environment(report_md: Path) -> dict:
    """``versions`` and ``machine`` of a report's header lines (what :func:`make_report` wrote from them)."""
    out = {}
    if not report_md.is_file():
        return out
    for line in report_md.read_text().splitlines():
        if line.startswith("Libraries: "):
            pairs = (item.split(" ", 1) for item in line[len("Libraries: "):].rstrip(".").split(", "))
            out["versions"] = {k: v for k, v in (p for p in pairs if len(p) == 2)}
        elif match := re.match(r"Machine: (.*), (\d+) usable cores;", line):
            out["machine"] = {"platform": match.group(1), "cores": int(match.group(2))}
    return out


def _run_records(folder: Path) -> list[dict]:
    runs_csv = folder / "runs.csv"
    if runs_csv.is_file():
        runs = pd.read_csv(runs_csv)
        return [{k: _number_or_none(v) for k, v in r.items()} for r in runs.to_dict("records")]
    report_md = folder / "report.md"
    if report_md.is_file():
        return [{"command": c} for c in _report_commands(report_md)]
    return []


def _instant(value):
    """A start time as a float (stores hold floats; a CSV may give text), or None, also for a missing
    one (NaN, which equals nothing: such runs, from reports that kept only commands, were logged again
    at every restore)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else round(value, 3)


def restore_store(protocol: str, folder, db) -> dict:
    """Insert the tasks and run commands of a report ``folder`` into the database ``db``.

    Tasks already in the database are kept as they are (a newer result wins); run
    commands already logged are not logged twice.

    Returns
    -------
    dict with ``tasks`` (rows inserted), ``kept`` (rows already present) and ``runs``
    (commands added).

    Raises
    ------
    FileNotFoundError
        ``folder`` has no ``tasks.csv``.
    ValueError
        ``tasks.csv`` is not a report's, or holds no task of ``protocol``.
    """
    folder = Path(folder)
    tasks_csv = folder / "tasks.csv"
    if not tasks_csv.is_file():
        raise FileNotFoundError(f"No {str(tasks_csv)!r} to restore from; run `hdgp bench report {protocol}` "
                                "where the results are, or pass --from.")
    table = pd.read_csv(tasks_csv)
    records = _task_records(table, protocol)
    environment = _report_environment(folder / "report.md")
    if "versions" in table.columns:  # per-row versions: a row without one stays unknown
        environment.pop("versions", None)
    elif "versions" in environment:  # an older folder: one set for every row, said so where a row carries it
        environment["versions"] = {**environment["versions"], "recorded": "report header"}
    for record in records:
        for key, value in environment.items():
            record.setdefault(key, value)
    runs = _run_records(folder)
    with ResultStore(db, writer=True) as store:
        present = store.status(protocol)
        new = [r for r in records if tuple(r[k] for k in _KEY[1:]) not in present]
        for record in new:
            store.write(record, attempts=record.get("attempts"))
        # a run is its command and start time: the same command run twice (a retry) is two runs
        logged = {(r.command, _instant(r.started_at)) for r in store.runs(protocol).itertuples()}
        added = 0
        for run in runs:
            key = (run.get("command"), _instant(run.get("started_at")))
            if key in logged:
                continue
            store.log_run(protocol, run.get("command"), run.get("started_at"), run.get("finished_at"),
                          run.get("planned"), run.get("skipped"), run.get("done"), run.get("failed"), {}, {})
            logged.add(key)
            added += 1
    return {"tasks": len(new), "kept": len(records) - len(new), "runs": added}
