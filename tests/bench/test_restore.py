"""Restoring a results database from a committed report folder (tasks.csv + runs.csv)."""

import numpy as np
import pandas as pd
import pytest

from hdgp.bench import ResultStore, make_report, run_protocol
from hdgp.bench.restore import restore_store


def _keyed(frame):
    cols = ["dataset", "model", "split", "seed", "status", "metric_rmse", "metric_nlpd", "n_train", "attempts"]
    return frame[cols].sort_values(["dataset", "model", "split"]).reset_index(drop=True)


def test_restored_database_reproduces_the_report_and_resumes(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"},
                                 {"label": "Broken", "preset": "Linear", "params": {"max_iter": -3}}])
    path = str(protocol_file(spec))
    db = tmp_path / "first.sqlite"
    run_protocol(path, workers=0, db=db, progress=False, splits=[0], command="hdgp bench run tiny --splits 0")
    run_protocol(path, workers=0, db=db, progress=False, splits=[1], models=["Linear"],
                 command="hdgp bench run tiny --splits 1")
    report = tmp_path / "report"
    make_report(path, db=db, out_dir=report, plots=False)

    fresh = tmp_path / "fresh.sqlite"
    counts = restore_store("tiny", report, fresh)
    assert counts == {"tasks": 3, "kept": 0, "runs": 2}
    with ResultStore(db) as a, ResultStore(fresh) as b:
        old, new = a.frame("tiny"), b.frame("tiny")
        assert list(b.runs("tiny")["command"]) == ["hdgp bench run tiny --splits 0", "hdgp bench run tiny --splits 1"]
    pd.testing.assert_frame_equal(_keyed(old), _keyed(new), check_exact=False, rtol=1e-5)
    assert new.loc[new.model == "Linear", "hyperparameters"].map(lambda h: "n_iter_" in h).all()
    failed = new[new.status == "failed"].iloc[0]
    assert failed.model == "Broken" and "max_iter" in failed.error
    # the report re-rendered from the restored database keeps its libraries and machine lines
    again = tmp_path / "again"
    make_report(path, db=fresh, out_dir=again, plots=False)
    header = [line for line in (report / "report.md").read_text().splitlines()
              if line.startswith(("Libraries:", "Machine:"))]
    assert len(header) == 2
    assert header == [line for line in (again / "report.md").read_text().splitlines()
                      if line.startswith(("Libraries:", "Machine:"))]

    # restoring again adds nothing; a run on the restored database only does what is missing
    assert restore_store("tiny", report, fresh) == {"tasks": 0, "kept": 3, "runs": 0}
    summary = run_protocol(path, workers=0, db=fresh, progress=False, models=["Linear"], command="resume")
    assert summary.skipped == 2 and summary.done == 0
    summary = run_protocol(path, workers=0, db=fresh, progress=False, command="resume")
    assert summary.done == 0 and summary.skipped + summary.failed == 4


def test_restore_from_an_older_report_reads_the_commands_of_report_md(tiny_protocol, protocol_file, tmp_path):
    path = str(protocol_file(tiny_protocol()))
    db = tmp_path / "r.sqlite"
    run_protocol(path, workers=0, db=db, progress=False, command="hdgp bench run tiny --workers 0")
    report = tmp_path / "report"
    make_report(path, db=db, out_dir=report, plots=False)
    (report / "runs.csv").unlink()
    fresh = tmp_path / "fresh.sqlite"
    assert restore_store("tiny", report, fresh) == {"tasks": 2, "kept": 0, "runs": 1}
    with ResultStore(fresh) as store:
        assert list(store.runs("tiny")["command"]) == ["hdgp bench run tiny --workers 0"]


def test_restore_without_tasks_csv_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="hdgp bench report tiny"):
        restore_store("tiny", tmp_path, tmp_path / "db.sqlite")


def test_restore_of_another_protocols_folder_is_an_error_not_a_silent_no_op(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    pd.DataFrame({"protocol": ["other"], "dataset": ["bach"], "model": ["Linear"], "split": [0], "seed": [0],
                  "status": ["done"]}).to_csv(folder / "tasks.csv", index=False)
    pd.DataFrame({"command": ["hdgp bench run other"]}).to_csv(folder / "runs.csv", index=False)
    with pytest.raises(ValueError, match=r"tasks\.csv holds no tasks of protocol 'tiny' \(it holds: other\)"):
        restore_store("tiny", folder, tmp_path / "db.sqlite")
    assert not (tmp_path / "db.sqlite").exists()


def test_restore_then_report_regenerates_the_committed_folder(tiny_protocol, protocol_file, tmp_path):
    """Per-task code versions and attempts survive tasks.csv, and its 10 digits re-render the same
    report.md (6 digits had rounded timestamps to 10^4 s and moved a p-value)."""
    path = str(protocol_file(tiny_protocol()))
    db = tmp_path / "r.sqlite"
    run_protocol(path, workers=0, db=db, progress=False, command="first")
    run_protocol(path, workers=0, db=db, progress=False, splits=[0], rerun=True, command="again")
    report = tmp_path / "report"
    make_report(path, db=db, out_dir=report, plots=False)
    fresh = tmp_path / "fresh.sqlite"
    restore_store("tiny", report, fresh)
    with ResultStore(db) as a, ResultStore(fresh) as b:
        old, new = (s.frame("tiny").sort_values(["model", "split"]).reset_index(drop=True) for s in (a, b))
    assert sorted(old["attempts"]) == [1, 2] and list(new["attempts"]) == list(old["attempts"])
    assert list(new["versions"]) == list(old["versions"]) and "hdgp_git" in new["versions"][0]
    pd.testing.assert_series_equal(new["finished_at"], old["finished_at"], rtol=1e-9, check_exact=False)
    again = tmp_path / "again"
    make_report(path, db=fresh, out_dir=again, plots=False)
    def body(folder):
        return [line for line in (folder / "report.md").read_text().splitlines()
                if not line.startswith(("Tasks in store", "hdgp bench report"))]
    assert body(again) == body(report)
    # the report's own command names the database and folder it was made from and to
    assert f"hdgp bench report tiny --db {db} --out {report}" in (report / "report.md").read_text().splitlines()
    assert any(line.startswith("Code of the rows (hdgp_git): ") for line in body(report))


def test_report_refuses_to_drop_the_tasks_of_the_folder_it_replaces(tiny_protocol, protocol_file, tmp_path):
    path = str(protocol_file(tiny_protocol()))
    full, partial = tmp_path / "full.sqlite", tmp_path / "partial.sqlite"
    run_protocol(path, workers=0, db=full, progress=False, command="all")
    run_protocol(path, workers=0, db=partial, progress=False, splits=[0], command="one split")
    report = tmp_path / "report"
    make_report(path, db=full, out_dir=report, plots=False)
    before = (report / "tasks.csv").read_text()
    with pytest.raises(ValueError, match=r"holds 1 task\(s\) that .*partial.sqlite' lacks.*hdgp bench restore .*tiny"):
        make_report(path, db=partial, out_dir=report, plots=False)
    assert (report / "tasks.csv").read_text() == before
    restore_store("tiny", report, partial)  # what the message says to do
    make_report(path, db=partial, out_dir=report, plots=False)


def test_a_command_run_twice_is_restored_as_two_runs(tiny_protocol, protocol_file, tmp_path):
    """An interrupted run retried with the same command line: both runs stay in the log."""
    path = str(protocol_file(tiny_protocol(models=[{"label": "Linear", "preset": "Linear"}])))
    db = tmp_path / "first.sqlite"
    for _ in range(2):
        run_protocol(path, workers=0, db=db, progress=False, splits=[0], command="hdgp bench run tiny --rerun")
    report = tmp_path / "report"
    make_report(path, db=db, out_dir=report, plots=False)
    fresh = tmp_path / "fresh.sqlite"
    assert restore_store("tiny", report, fresh)["runs"] == 2
    assert restore_store("tiny", report, fresh)["runs"] == 0  # restoring again adds nothing
    with ResultStore(fresh) as store:
        assert list(store.runs("tiny")["command"]) == ["hdgp bench run tiny --rerun"] * 2


def test_a_row_without_a_recorded_version_stays_unknown(tiny_protocol, protocol_file, tmp_path):
    """A folder with per-row versions: a row whose version was not recorded is not stamped with the
    commit of the report header (the last task's), which did not make it."""
    path = str(protocol_file(tiny_protocol()))
    db = tmp_path / "r.sqlite"
    run_protocol(path, workers=0, db=db, progress=False, command="first")
    report = tmp_path / "report"
    make_report(path, db=db, out_dir=report, plots=False)
    tasks = pd.read_csv(report / "tasks.csv")
    tasks.loc[0, "versions"] = np.nan
    tasks.to_csv(report / "tasks.csv", index=False)
    fresh = tmp_path / "fresh.sqlite"
    restore_store("tiny", report, fresh)
    with ResultStore(fresh) as store:
        versions = store.frame("tiny").set_index(["model", "split"])["versions"]
    key = tuple(tasks.loc[0, ["model", "split"]])
    assert not versions[key] and all(v and "hdgp_git" in v for k, v in versions.items() if k != key)
    again = tmp_path / "again"
    make_report(path, db=fresh, out_dir=again, plots=False)
    assert "unknown: 1 task(s)" in (again / "report.md").read_text()


def test_restoring_twice_adds_no_run_without_a_start_time(tiny_protocol, protocol_file, tmp_path):
    """runs.csv rows of runs restored from older folders have no start time (an empty cell, read as NaN,
    which equals nothing): every restore logged them again."""
    path = str(protocol_file(tiny_protocol()))
    db = tmp_path / "r.sqlite"
    run_protocol(path, workers=0, db=db, progress=False, splits=[0], command="hdgp bench run tiny --splits 0")
    run_protocol(path, workers=0, db=db, progress=False, splits=[1], command="hdgp bench run tiny --splits 1")
    report = tmp_path / "report"
    make_report(path, db=db, out_dir=report, plots=False)
    runs = pd.read_csv(report / "runs.csv")
    runs.loc[0, ["started_at", "finished_at"]] = np.nan  # the first from an older folder, the second timed
    runs.to_csv(report / "runs.csv", index=False)
    fresh = tmp_path / "fresh.sqlite"
    assert restore_store("tiny", report, fresh)["runs"] == 2
    assert restore_store("tiny", report, fresh)["runs"] == 0
    with ResultStore(fresh) as store:
        assert list(store.runs("tiny")["command"]) == [f"hdgp bench run tiny --splits {s}" for s in (0, 1)]
