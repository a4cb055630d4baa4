"""`hdgp bench status` and `hdgp bench run --dry-run`: stored states, what would run, cost estimates."""

import pytest
from click.testing import CliRunner

from hdgp.bench import run_protocol
from hdgp.bench.cli import bench
from hdgp.bench.status import status_table, task_status


def _protocol(tiny_protocol, protocol_file):
    spec = tiny_protocol(splits=(0, 1, 2), models=[
        {"label": "Linear", "preset": "Linear"},
        {"label": "Broken", "preset": "Linear", "params": {"optimizer": "no-such-optimizer"}}])
    return str(protocol_file(spec))


def test_states_and_what_a_run_would_do(tiny_protocol, protocol_file, tmp_path):
    path, db = _protocol(tiny_protocol, protocol_file), tmp_path / "r.sqlite"
    before = task_status(path, db=db)  # no database yet: everything missing and to run
    assert (before["state"] == "missing").all() and before["to_run"].all() and before["estimate"].isna().all()
    run_protocol(path, splits=[0, 1], workers=0, db=db, progress=False)
    frame = task_status(path, db=db)
    states = frame.set_index(["model", "split"])["state"]
    assert states[("Linear", 0)] == "done" and states[("Broken", 1)] == "failed" and states[("Linear", 2)] == "missing"
    assert frame.loc[frame.state == "failed", "error"].str.contains("optimizer").all()
    assert sorted(frame.loc[frame.to_run, "split"]) == [2, 2]  # failed ones wait for --retry-failed
    done_time = frame.loc[(frame.model == "Linear") & (frame.state == "done"), "seconds"]
    assert (done_time > 0).all()
    linear_missing = frame[(frame.model == "Linear") & (frame.split == 2)]
    assert linear_missing["estimate"].item() == done_time.mean()
    assert task_status(path, db=db, retry_failed=True)["to_run"].sum() == 4
    assert task_status(path, db=db, rerun=True)["to_run"].all()
    table = status_table(frame).set_index("model")
    assert table.loc["Linear", ["done", "failed", "missing", "to_run"]].tolist() == [2, 0, 1, 1]
    assert table.loc["Broken", ["done", "failed", "missing", "to_run"]].tolist() == [0, 2, 1, 1]
    assert table.loc["Linear", "estimate_s"] == done_time.mean()


def test_status_and_dry_run_commands_run_nothing(tiny_protocol, protocol_file, tmp_path):
    path, db = _protocol(tiny_protocol, protocol_file), str(tmp_path / "r.sqlite")
    runner = CliRunner()
    run_protocol(path, splits=[0], workers=0, db=db, progress=False)
    result = runner.invoke(bench, ["status", path, "--db", db])
    assert result.exit_code == 0, result.output
    assert "6 tasks: 1 done, 1 failed, 4 missing." in result.output
    assert "Failed (1): " in result.output and "optimizer" in result.output and "Broken/bach/split 0/seed 0" in result.output
    result = runner.invoke(bench, ["run", path, "--db", db, "--dry-run", "--retry-failed", "--workers", "0"])
    assert result.exit_code == 0, result.output
    assert "Would run 5 task(s); from the stored times" in result.output and "for 2 of them" in result.output
    assert "3 in cells with no finished task have no estimate" in result.output
    result = runner.invoke(bench, ["run", path, "--db", db, "--dry-run", "--models", "Linear", "--workers", "2"])
    assert "Would run 2 task(s)" in result.output and "with 2 workers)." in result.output
    assert "6 tasks: 1 done, 1 failed, 4 missing." in runner.invoke(bench, ["status", path, "--db", db]).output  # ran nothing


def test_status_errors_are_clear(tiny_protocol, protocol_file, tmp_path):
    path = _protocol(tiny_protocol, protocol_file)
    result = CliRunner().invoke(bench, ["status", path, "--models", "Nope", "--db", str(tmp_path / "r.sqlite")])
    assert result.exit_code != 0 and "Unknown model 'Nope'" in result.output
    result = CliRunner().invoke(bench, ["status", path, "--splits", "x"])
    assert result.exit_code != 0 and "integers" in result.output


def test_status_without_the_data_folder_lists_the_stored_tasks(tmp_path, monkeypatch):
    """The number of splits comes from the data, so without the folder the missing tasks are unknown;
    status still shows what the store holds (it refused to run at all), and says what it left out."""
    from hdgp.bench.store import ResultStore

    monkeypatch.delenv("HDGP_DATA_DIR", raising=False)
    db = str(tmp_path / "r.sqlite")
    with ResultStore(db, writer=True) as store:
        for dataset, split, status in [("housing", 0, "done"), ("housing", 1, "failed"), ("machine", 0, "done")]:
            store.write({"protocol": "oak-table5", "dataset": dataset, "model": "OAK", "split": split, "seed": 0,
                         "status": status, "fit_seconds": 2.0, "predict_seconds": 0.0, "error": "boom"})
    result = CliRunner().invoke(bench, ["status", "oak-table5", "--db", db])
    assert result.exit_code == 0, result.output
    assert "3 tasks: 2 done, 1 failed, 0 missing." in result.output
    assert "HDGP_DATA_DIR is not set" in result.output and "the missing ones are not counted" in result.output
    result = CliRunner().invoke(bench, ["status", "oak-table5", "--db", db, "--datasets", "housing", "--splits", "1"])
    assert "1 tasks: 0 done, 1 failed, 0 missing." in result.output
    result = CliRunner().invoke(bench, ["status", "oak-table5", "--db", db, "--datasets", "energy"])
    assert result.exit_code != 0 and "No stored task of oak-table5 matches" in result.output
    with pytest.raises(FileNotFoundError, match="HDGP_DATA_DIR"):  # the library call still says it
        task_status("oak-table5", db=db)
