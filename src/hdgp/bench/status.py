"""What a protocol's results store holds, and what ``bench run`` would do next.

``hdgp bench status`` and ``hdgp bench run --dry-run`` both read this: every
planned task with its stored state (done / failed / missing), whether the run
would (re)run it, and an estimate of its cost from the stored times of the
same model on the same data set.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .protocols import get_protocol
from .runner import plan_tasks, tasks_to_run
from .store import ResultStore, StoreError, default_db_path

__all__ = ["task_status", "status_table"]


def _stored(db_path: Path, protocol: str) -> pd.DataFrame:
    """The stored rows of ``protocol`` (empty when the database does not exist yet)."""
    cols = ["dataset", "model", "split", "seed", "status", "fit_seconds", "predict_seconds", "error"]
    try:
        with ResultStore(db_path) as store:
            frame = store.frame(protocol)
    except StoreError:
        if db_path.is_file():
            raise
        return pd.DataFrame(columns=cols)
    return frame[cols]


def _selected(key, datasets, models, splits, seeds) -> bool:
    """Whether a stored task ``(dataset, model, split, seed)`` is in the selection (None or empty: all)."""
    return all(not choice or value in choice for value, choice in zip(key, (datasets, models, splits, seeds)))


def task_status(protocol, *, datasets=None, models=None, splits=None, seeds=None, db=None, data_dir=None,
                retry_failed=False, rerun=False, stored_only=False) -> pd.DataFrame:
    """One row per planned task of ``protocol``: its stored state and whether ``bench run`` would run it.

    Parameters are those of :func:`~hdgp.bench.runner.run_protocol`.

    Returns
    -------
    DataFrame
        Columns ``dataset, model, split, seed``; ``state`` ("done", "failed" or
        "missing"); ``to_run`` (with the same ``retry_failed`` / ``rerun``);
        ``seconds`` (stored fit + predict time, NaN unless done); ``error`` (first
        line, failed tasks); ``estimate`` (seconds expected for a task to run: the
        mean stored time of the same model on the same data set, NaN if none is done).

    Without the benchmark data folder (``FileNotFoundError`` from planning) and with
    ``stored_only=True``, the rows are the stored tasks of the selection only: without the data
    the number of splits, hence the missing tasks, is unknown (``to_run`` then marks the stored
    tasks ``bench run`` would redo).
    """
    proto = get_protocol(protocol)
    name = proto.name
    stored = _stored(Path(db) if db is not None else default_db_path(name), name)
    stored = stored.set_index(["dataset", "model", "split", "seed"])
    try:
        tasks, _ = plan_tasks(proto, datasets, models, splits, seeds, data_dir, warn_skipped=False)
        keys, tasks_planned = [t.key[1:] for t in tasks], True
        pending = {t.key[1:] for t in tasks_to_run(tasks, stored["status"].to_dict(), retry_failed, rerun)}
    except FileNotFoundError as exc:
        if not stored_only:
            raise
        unplanned = str(exc).split(";")[0].rstrip(".") + "."
        keys, tasks_planned = [k for k in stored.index if _selected(k, datasets, models, splits, seeds)], False
        pending = {k for k in keys if rerun or (retry_failed and stored.loc[k, "status"] == "failed")}
    rows = []
    for key in keys:
        row = stored.loc[key] if key in stored.index else None
        state = "missing" if row is None else row["status"]
        seconds = (float(row["fit_seconds"] or 0.0) + float(row["predict_seconds"] or 0.0)
                   if state == "done" else float("nan"))
        error = str(row["error"]).strip().splitlines()[0] if state == "failed" and row["error"] else ""
        rows.append({"dataset": key[0], "model": key[1], "split": key[2], "seed": key[3], "state": state,
                     "to_run": key in pending, "seconds": seconds, "error": error})
    frame = pd.DataFrame(rows, columns=["dataset", "model", "split", "seed", "state", "to_run", "seconds", "error"])
    mean_time = frame.groupby(["dataset", "model"])["seconds"].mean()
    frame["estimate"] = [mean_time[(d, m)] for d, m in zip(frame["dataset"], frame["model"])]
    if not tasks_planned:
        frame.attrs["stored_only"] = unplanned
    return frame


def status_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (data set, model): counts of done / failed / missing / to-run tasks, mean stored
    seconds per task and the estimated seconds of the tasks to run (NaN where no time is stored)."""
    g = frame.groupby(["dataset", "model"], sort=False)
    table = pd.DataFrame({
        "done": g["state"].apply(lambda s: int((s == "done").sum())),
        "failed": g["state"].apply(lambda s: int((s == "failed").sum())),
        "missing": g["state"].apply(lambda s: int((s == "missing").sum())),
        "to_run": g["to_run"].sum().astype(int),
        "s_per_task": g["seconds"].mean(),
    })
    table["estimate_s"] = table["to_run"] * table["s_per_task"]
    table.loc[table["to_run"] == 0, "estimate_s"] = 0.0
    return table.reset_index()
