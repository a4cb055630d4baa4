import sqlite3

import pytest

from hdgp.bench.store import ResultStore, StoreError


def _record(split, status="done", **kw):
    rec = {"protocol": "p", "dataset": "d", "model": "m", "split": split, "seed": 0, "status": status,
           "metrics": {"rmse": 0.1 * (split + 1)} if status == "done" else {}, "fit_seconds": 1.0,
           "hyperparameters": {"noise": 0.01}, "versions": {"hdgp": "x"}, "machine": {"cores": 2}}
    rec.update(kw)
    return rec


def test_round_trip_and_attempts(tmp_path):
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        store.write(_record(0))
        store.write(_record(1, status="failed", error="ValueError: boom"))
        store.write(_record(1, status="failed", error="ValueError: boom again"))
        assert store.status("p") == {("d", "m", 0, 0): "done", ("d", "m", 1, 0): "failed"}
    with ResultStore(db) as reader:
        df = reader.frame("p").set_index("split")
    assert df.loc[0, "metric_rmse"] == pytest.approx(0.1)
    assert df.loc[0, "hyperparameters"] == {"noise": 0.01}
    assert df.loc[1, "attempts"] == 2 and df.loc[1, "error"] == "ValueError: boom again"
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_result_and_its_run_count_commit_together(tmp_path):
    """The run's done/failed counters move in the result's own transaction: a row the database
    refuses leaves them where they were, so a killed run never lists a row it did not write."""
    with ResultStore(tmp_path / "r.sqlite", writer=True) as store:
        run_id = store.log_run("p", "cmd", 0.0, None, 3, 0, 0, 0, {}, {})
        store.write(_record(0), run_id=run_id)
        store.write(_record(1, status="failed", error="ValueError: boom"), run_id=run_id)
        with pytest.raises(StoreError, match="Could not write"):
            store.write(_record(2, status="unknown"), run_id=run_id)  # violates the status CHECK
        run = store.runs("p").iloc[-1]
        assert (run.done, run.failed) == (1, 1)
        assert set(store.status("p")) == {("d", "m", 0, 0), ("d", "m", 1, 0)}


def test_second_writer_is_refused_with_a_clear_error(tmp_path):
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True):
        with pytest.raises(StoreError, match="being written by another `hdgp bench run`"):
            ResultStore(db, writer=True)
    ResultStore(db, writer=True).close()  # lock released on close


def test_corrupt_database_is_reported_and_left_untouched(tmp_path):
    db = tmp_path / "r.sqlite"
    garbage = b"this is not an sqlite database" * 100
    db.write_bytes(garbage)
    with pytest.raises(StoreError, match="move it aside"):
        ResultStore(db, writer=True)
    with pytest.raises(StoreError, match="Cannot use results database"):
        ResultStore(db)
    assert db.read_bytes() == garbage
    ResultStore(tmp_path / "other.sqlite", writer=True).close()  # the lock of the failed open was released
    with ResultStore(db.with_name("r2.sqlite"), writer=True):
        pass


def test_missing_database_for_reading(tmp_path):
    with pytest.raises(StoreError, match="run `hdgp bench run` first"):
        ResultStore(tmp_path / "none.sqlite")


def test_read_only_store_refuses_writes(tmp_path):
    db = tmp_path / "r.sqlite"
    ResultStore(db, writer=True).close()
    with ResultStore(db) as reader, pytest.raises(StoreError, match="read-only"):
        reader.write(_record(0))
