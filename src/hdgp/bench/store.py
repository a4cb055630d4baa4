"""Results store: one SQLite database (WAL mode) with one row per finished task.

The runner's main process is the only writer: it holds an exclusive lock file
(``<db>.lock``) for the whole run, so a second run on the same database stops
with a clear error instead of interleaving. Every result is committed as soon
as it arrives, so an interrupted run loses only the tasks that were in flight.
Readers (reports) open the database without the lock.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: SQLite's own locking only
    fcntl = None

__all__ = ["ResultStore", "StoreError", "default_db_path"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    protocol TEXT NOT NULL, dataset TEXT NOT NULL, model TEXT NOT NULL,
    split INTEGER NOT NULL, seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    preset TEXT, metrics TEXT, fit_seconds REAL, predict_seconds REAL, peak_rss_mb REAL, rss_increase_mb REAL,
    n_train INTEGER, n_test INTEGER, n_features INTEGER, threads INTEGER, device TEXT,
    hyperparameters TEXT, extras TEXT, warnings TEXT, versions TEXT, machine TEXT,
    error TEXT, traceback TEXT, attempts INTEGER NOT NULL DEFAULT 1,
    started_at REAL, finished_at REAL,
    PRIMARY KEY (protocol, dataset, model, split, seed)
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, protocol TEXT NOT NULL, command TEXT,
    started_at REAL, finished_at REAL, planned INTEGER, skipped INTEGER, done INTEGER, failed INTEGER,
    versions TEXT, machine TEXT
);
"""
_JSON_COLUMNS = ("metrics", "hyperparameters", "extras", "warnings", "versions", "machine")
_COLUMNS = ("protocol", "dataset", "model", "split", "seed", "status", "preset", "metrics", "fit_seconds",
            "predict_seconds", "peak_rss_mb", "rss_increase_mb", "n_train", "n_test", "n_features", "threads",
            "device", "hyperparameters", "extras", "warnings", "versions", "machine", "error", "traceback",
            "started_at", "finished_at")


class StoreError(RuntimeError):
    """The results database cannot be used (corrupt, locked by another run, unwritable)."""


def default_db_path(protocol: str) -> Path:
    """``benchmarks/results/<protocol>.sqlite`` under the current directory."""
    return Path("benchmarks") / "results" / f"{protocol}.sqlite"


class ResultStore:
    """SQLite store of task results.

    Parameters
    ----------
    path : path-like
        Database file (created with its folder when ``writer=True``).
    writer : bool, default=False
        Take the exclusive writer lock (only the runner does).
    """

    def __init__(self, path, writer: bool = False):
        self.path = Path(path)
        self.writer = writer
        self._lock_fh = None
        if writer:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()
        elif not self.path.is_file():
            raise StoreError(f"No results database at {str(self.path)!r}; run `hdgp bench run` first (or pass --db).")
        try:
            uri = self.path.resolve().as_uri() + ("" if writer else "?mode=ro")
            self._conn = sqlite3.connect(uri, uri=True, timeout=30.0)
            if writer:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA)
                self._add_missing_columns()
            else:
                self._conn.execute("SELECT count(*) FROM results").fetchone()
        except sqlite3.DatabaseError as exc:
            self._release_lock()
            raise StoreError(
                f"Cannot use results database {str(self.path)!r}: {exc}. If the file is corrupt, move it aside "
                "(it is never overwritten) and run again to recompute."
            ) from exc

    def _add_missing_columns(self) -> None:
        """Databases written by an older hdgp get the newer result columns (NULL for old rows)."""
        have = {row[1] for row in self._conn.execute("PRAGMA table_info(results)")}
        with self._conn:
            for col in _COLUMNS:
                if col not in have:
                    kind = "REAL" if col.endswith(("_mb", "_seconds", "_at")) else "TEXT"
                    self._conn.execute(f"ALTER TABLE results ADD COLUMN {col} {kind}")

    # --------------------------------------------------------------- locking
    def _acquire_lock(self) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        self._lock_fh = open(lock_path, "a+")
        if fcntl is None:  # pragma: no cover - non-POSIX: SQLite's own locking only
            return
        try:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_fh.close()
            self._lock_fh = None
            raise StoreError(
                f"Results database {str(self.path)!r} is being written by another `hdgp bench run` "
                f"(lock {str(lock_path)!r} is held). Wait for it to finish or use another --db."
            ) from None

    def _release_lock(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    def close(self) -> None:
        """Close the connection and release the writer lock."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
            self._conn = None
        self._release_lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------- writes
    def write(self, record: dict, attempts: int | None = None, run_id: int | None = None) -> None:
        """Insert or replace one task's result and commit at once.

        A task already in the store (failed, or re-run) has its ``attempts`` incremented, unless
        ``attempts`` gives the count (a task restored from a report keeps its own). Given ``run_id``
        (from :meth:`log_run`), that run's ``done`` or ``failed`` count goes up by one in the same
        transaction, so a run killed at any moment lists exactly the rows it wrote.
        """
        if not self.writer:
            raise StoreError("This ResultStore was opened read-only; open it with writer=True to record results.")
        row = {c: record.get(c) for c in _COLUMNS}
        for c in _JSON_COLUMNS:
            row[c] = json.dumps(row[c], default=str)
        key = tuple(row[c] for c in ("protocol", "dataset", "model", "split", "seed"))
        try:
            with self._conn:
                prev = self._conn.execute(
                    "SELECT attempts FROM results WHERE protocol=? AND dataset=? AND model=? AND split=? AND seed=?",
                    key).fetchone()
                row["attempts"] = int(attempts) if attempts is not None else 1 + (prev[0] if prev else 0)
                cols = ", ".join(row)
                marks = ", ".join("?" for _ in row)
                self._conn.execute(f"INSERT OR REPLACE INTO results ({cols}) VALUES ({marks})", tuple(row.values()))
                if run_id is not None:
                    counter = "done" if row["status"] == "done" else "failed"
                    self._conn.execute(f"UPDATE runs SET {counter} = {counter} + 1 WHERE id=?", (run_id,))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"Could not write to results database {str(self.path)!r}: {exc}") from exc

    def log_run(self, protocol: str, command: str | None, started_at: float, finished_at: float | None,
                planned: int, skipped: int, done: int, failed: int, versions: dict, machine: dict,
                run_id: int | None = None) -> int:
        """Insert (or update, given ``run_id``) the record of one ``bench run`` invocation; return its id."""
        values = (protocol, command, started_at, finished_at, planned, skipped, done, failed,
                  json.dumps(versions), json.dumps(machine))
        with self._conn:
            if run_id is None:
                cur = self._conn.execute(
                    "INSERT INTO runs (protocol, command, started_at, finished_at, planned, skipped, done, failed, "
                    "versions, machine) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
                return int(cur.lastrowid)
            self._conn.execute(
                "UPDATE runs SET protocol=?, command=?, started_at=?, finished_at=?, planned=?, skipped=?, done=?, "
                "failed=?, versions=?, machine=? WHERE id=?", (*values, run_id))
            return run_id

    # ----------------------------------------------------------------- reads
    def runs(self, protocol: str) -> pd.DataFrame:
        """The logged ``bench run`` invocations of ``protocol``, oldest first."""
        try:
            return pd.read_sql_query("SELECT * FROM runs WHERE protocol=? ORDER BY id", self._conn,
                                     params=(protocol,))
        except (sqlite3.DatabaseError, pd.errors.DatabaseError):
            return pd.DataFrame(columns=["protocol", "command", "started_at", "finished_at", "planned", "skipped",
                                         "done", "failed", "versions", "machine"])

    def status(self, protocol: str) -> dict:
        """Map each stored task key ``(dataset, model, split, seed)`` to its status."""
        rows = self._conn.execute(
            "SELECT dataset, model, split, seed, status FROM results WHERE protocol=?", (protocol,)).fetchall()
        return {tuple(r[:4]): r[4] for r in rows}

    def frame(self, protocol: str | None = None, status: str | None = None) -> pd.DataFrame:
        """Stored results as a DataFrame, JSON columns decoded, metrics expanded as ``metric_<name>``."""
        query, args = "SELECT * FROM results", []
        clauses = []
        if protocol is not None:
            clauses.append("protocol=?")
            args.append(protocol)
        if status is not None:
            clauses.append("status=?")
            args.append(status)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        try:
            df = pd.read_sql_query(query + " ORDER BY dataset, model, split, seed", self._conn, params=args)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
            raise StoreError(f"Could not read results database {str(self.path)!r}: {exc}") from exc
        for c in _COLUMNS:  # a database from an older hdgp may lack newer columns
            if c not in df:
                df[c] = None
        for c in _JSON_COLUMNS:
            df[c] = [json.loads(v) if isinstance(v, str) else v for v in df[c]]
        metric_names = sorted({k for m in df["metrics"] if isinstance(m, dict) for k in m})
        for name in metric_names:
            df[f"metric_{name}"] = [m.get(name, float("nan")) if isinstance(m, dict) else float("nan")
                                    for m in df["metrics"]]
        return df
