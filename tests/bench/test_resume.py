"""A run killed mid-way (runner and worker, SIGKILL) resumes with only the missing tasks."""

import os
import signal
import subprocess
import sys
import time

import pytest

from hdgp.bench import ResultStore, run_protocol


def _done_rows(db):
    if not db.exists():
        return 0
    try:
        with ResultStore(db) as store:
            return int((store.frame("tiny").status == "done").sum())
    except Exception:  # noqa: BLE001 - the writer may not have created the table yet
        return 0


def test_killed_run_resumes_with_only_the_missing_tasks(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(splits=range(10), n=60)
    path = str(protocol_file(spec))
    db = tmp_path / "r.sqlite"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hdgp.bench.cli", "run", path, "--workers", "1", "--db", str(db),
                             "--no-progress"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    try:
        while _done_rows(db) < 2:
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"runner ended or stalled before the kill: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its worker, mid-run
        proc.wait()
    with ResultStore(db) as store:
        before = store.frame("tiny").set_index(["model", "split"])
        killed_run = store.runs("tiny").iloc[-1]
    n_before = len(before)
    assert 2 <= n_before < 10, "the kill must land mid-run"
    assert (before.status == "done").all()
    # the killed run's record counts what it wrote (reports list it among the runs that made rows)
    assert killed_run.done == n_before and killed_run.planned == 10 and killed_run.finished_at is None
    summary = run_protocol(path, workers=0, db=db, progress=False)
    assert summary.skipped == n_before
    assert summary.done == 10 - n_before and summary.failed == 0
    with ResultStore(db) as store:
        after = store.frame("tiny").set_index(["model", "split"])
    assert len(after) == 10 and (after.status == "done").all()
    kept = after.loc[before.index]
    assert (kept.finished_at == before.finished_at).all() and (kept.attempts == 1).all()
