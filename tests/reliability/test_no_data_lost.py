"""No data lost (issue 9, part 3): the results store and the model-file writer under crashes.

- A process writing results as fast as it can is SIGKILLed at random moments:
  the SQLite store passes ``PRAGMA integrity_check``, holds every result whose
  commit was acknowledged, every row is complete, and the next writer continues.
- A full disk (a real ``RLIMIT_FSIZE`` limit in a child process, and an injected
  "database or disk is full" error inside a benchmark run) gives a clear
  ``StoreError``; earlier results survive and the run resumes once space is back.
- (A worker killed in the middle of a task fails that task only: ``tests/bench/test_worker_crash.py``.)
- ``hdgp.save`` killed in the middle of writing, or hitting ENOSPC, leaves the
  previous model file intact and loadable (write-then-rename).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import hdgp
from hdgp.bench import ResultStore, run_protocol
from hdgp.bench.store import StoreError

_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

_WRITER = textwrap.dedent("""
    import sys
    from hdgp.bench.store import ResultStore
    db, start = sys.argv[1], int(sys.argv[2])
    with ResultStore(db, writer=True) as store:
        for k in range(start, start + 100000):
            store.write({"protocol": "p", "dataset": "d", "model": "m", "split": k, "seed": 0, "status": "done",
                         "metrics": {"rmse": float(k)}, "hyperparameters": {"pad": "x" * 2000},
                         "traceback": "y" * 5000})
            print(k, flush=True)  # acknowledged: the commit returned
""")


def _integrity(db) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def _rows(db):
    with ResultStore(db) as store:
        return store.frame("p")


def test_sigkilled_writer_never_corrupts_or_loses_acknowledged_results(tmp_path):
    db = tmp_path / "r.sqlite"
    rng = np.random.default_rng(0)
    acknowledged = -1
    for round_ in range(2):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db), str(acknowledged + 1)], env=_ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()  # the writer is running and has committed at least once
        assert first.strip(), proc.stderr.read()
        time.sleep(float(rng.uniform(0.05, 0.3)))
        proc.send_signal(signal.SIGKILL)  # mid-stream: most likely inside a transaction
        out, _ = proc.communicate()
        lines = [first] + out.splitlines()
        acknowledged = max(int(x) for x in lines if x.strip())
        assert _integrity(db) == "ok"
        frame = _rows(db)
        assert set(range(acknowledged + 1)) <= set(frame.split), f"round {round_}: acknowledged rows lost"
        assert frame.metrics.map(lambda m: isinstance(m, dict) and "rmse" in m).all()
        assert (frame.traceback.str.len() == 5000).all() and (frame.status == "done").all()
        acknowledged = int(frame.split.max())
    # the lock died with the writer: a new writer takes over at once
    with ResultStore(db, writer=True) as store:
        store.write({"protocol": "p", "dataset": "d", "model": "m", "split": -1, "seed": 0, "status": "done"})


_FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from hdgp.bench.store import ResultStore, StoreError
    db, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit: write() fails with EFBIG, like ENOSPC
    store = ResultStore(db, writer=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    for k in range(100000):
        try:
            store.write({"protocol": "p", "dataset": "d", "model": "m", "split": k, "seed": 0, "status": "done",
                         "metrics": {"rmse": 1.0}, "traceback": "z" * 20000})
        except StoreError as exc:
            print("FULL", k, exc, flush=True)
            break
        print(k, flush=True)
    store.close()
""")


def test_full_disk_gives_a_clear_error_and_keeps_earlier_results(tmp_path):
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True):
        pass  # create the schema before the limit applies
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(db), str(400_000)], env=_ENV,
                          capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    full = [x for x in lines if x.startswith("FULL")]
    assert full, (done.stdout[-500:], done.stderr[-2000:])
    assert "full" in full[0].lower() or "disk" in full[0].lower() or "I/O" in full[0], full[0]
    written = [int(x) for x in lines if x and x[0].isdigit()]
    assert written, "some rows must fit below the limit"
    assert _integrity(db) == "ok"
    frame = _rows(db)
    assert set(written) <= set(frame.split)
    with ResultStore(db, writer=True) as store:  # space is back: writing resumes
        store.write({"protocol": "p", "dataset": "d", "model": "m", "split": 10**6, "seed": 0, "status": "done"})
    assert 10**6 in set(_rows(db).split)


def _tiny_protocol_file(tmp_path, splits=range(6)):
    spec = {"name": "tiny", "description": "reliability", "datasets": [{"name": "bach", "kwargs": {"n": 40}}],
            "models": [{"label": "Linear", "preset": "Linear"}], "splits": list(splits),
            "metrics": ["rmse"], "references": [], "plots": []}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(spec))
    return str(path)


def test_disk_full_during_a_benchmark_run_stops_cleanly_and_resumes(tmp_path, monkeypatch):
    path = _tiny_protocol_file(tmp_path)
    db = tmp_path / "b.sqlite"
    real_write = ResultStore.write
    count = {"n": 0}

    def filling_up(self, record, **kwargs):
        count["n"] += 1
        if count["n"] == 4:
            raise StoreError(f"Could not write to results database {str(self.path)!r}: database or disk is full")
        return real_write(self, record, **kwargs)

    monkeypatch.setattr(ResultStore, "write", filling_up)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(StoreError, match="disk is full"):
            run_protocol(path, workers=0, db=db, progress=False)
    monkeypatch.setattr(ResultStore, "write", real_write)
    assert _integrity(db) == "ok"
    with ResultStore(db) as store:
        kept = store.frame("tiny")
    assert len(kept) == 3 and (kept.status == "done").all()
    with ResultStore(db) as store:  # the stopped run lists exactly the rows it wrote
        assert store.runs("tiny").iloc[-1].done == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = run_protocol(path, workers=0, db=db, progress=False)  # resumes: only the missing tasks
    assert summary.skipped == 3 and summary.done == 3
    with ResultStore(db) as store:
        after = store.frame("tiny")
    assert sorted(after.split) == list(range(6))
    assert (after.set_index("split").loc[kept.split, "finished_at"].to_numpy() == kept.finished_at.to_numpy()).all()


# ------------------------------------------------------------------ model files
def _fitted(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(20, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hdgp.preset("RBF-ARD", max_iter=5, random_state=0).fit(X, np.sin(X[:, 0]) + seed), X


_KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys, warnings
    import numpy as np, hdgp
    import hdgp.io.atomic as atomic
    path = sys.argv[1]
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 2))
    warnings.simplefilter("ignore")
    est = hdgp.preset("RBF-ARD", max_iter=5, random_state=0).fit(X, np.sin(X[:, 0]) + 1)
    real_fdopen = os.fdopen

    class HalfThenDie:
        def __init__(self, fh): self.fh = fh
        def __enter__(self): return self
        def __exit__(self, *a): return False
        def write(self, data):
            self.fh.write(data[: len(data) // 2]); self.fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)  # crash in the middle of writing the model
        def __getattr__(self, name): return getattr(self.fh, name)

    atomic.os.fdopen = lambda fd, mode: HalfThenDie(real_fdopen(fd, mode))
    hdgp.save(est, path)
""")


def test_save_killed_mid_write_leaves_the_previous_model_intact(tmp_path):
    est, X = _fitted(0)
    path = tmp_path / "model.hdgp"
    hdgp.save(est, path)
    before = path.read_bytes()
    proc = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(path)], env=_ENV, capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert path.read_bytes() == before, "the model file was modified by an interrupted save"
    np.testing.assert_array_equal(hdgp.load(path).predict(X), est.predict(X))
    # the only other file is the hidden temporary one: a half-written file never carries a model's name
    assert all(p.name == "model.hdgp" or p.name.startswith(".model.hdgp.") for p in tmp_path.iterdir())


def test_save_on_a_full_disk_raises_and_cleans_up(tmp_path, monkeypatch):
    import hdgp.io.atomic as atomic

    est, X = _fitted(0)
    path = tmp_path / "model.hdgp"
    hdgp.save(est, path)
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()
            return False

        def write(self, data):
            self.fh.write(data[:100])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    monkeypatch.setattr(atomic.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space left"):
        hdgp.save(_fitted(1)[0], path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.hdgp"], "temporary file left behind"


def test_atomic_write_syncs_data_before_publishing_it(tmp_path, monkeypatch):
    """write_bytes_atomic fsyncs the temporary file before the rename (else power loss can publish zeros)."""
    import hdgp.io.atomic as atomic

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    atomic.write_bytes_atomic(tmp_path / "f.bin", b"payload")
    assert events[:2] == ["fsync", "replace"]
    assert (tmp_path / "f.bin").read_bytes() == b"payload"


def test_cli_reports_a_full_disk_as_an_error_not_a_traceback(tmp_path, monkeypatch):
    import pandas as pd
    from click.testing import CliRunner

    import hdgp.io.atomic as atomic
    from hdgp.cli import main

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(20, 2)), columns=["a", "b"])
    frame["y"] = np.sin(frame.a)
    frame.to_csv(tmp_path / "t.csv", index=False)
    runner = CliRunner()
    ok = runner.invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-m", "Linear", "--test-size", "0",
                              "--quiet", "-o", str(tmp_path / "m.hdgp")])
    assert ok.exit_code == 0, ok.output

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "write_bytes_atomic", full)
    monkeypatch.setattr("hdgp.io.modelfile.write_bytes_atomic", full)
    for args in (["fit", str(tmp_path / "t.csv"), "-t", "y", "-m", "Linear", "--test-size", "0", "--quiet",
                  "-o", str(tmp_path / "m2.hdgp")],
                 ["predict", str(tmp_path / "m.hdgp"), str(tmp_path / "t.csv"), "-o", str(tmp_path / "p.csv"),
                  "--quiet"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (args[0], result.exception)
        assert "No space left on device" in result.output
    assert not (tmp_path / "m2.hdgp").exists() and not (tmp_path / "p.csv").exists()
