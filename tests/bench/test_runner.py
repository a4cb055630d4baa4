"""The runner in this process (workers=0): failures are recorded, re-runs skip, retries are opt-in."""

import os

import numpy as np
import pytest
import torch

from hdgp.bench import ResultStore, run_protocol
from hdgp.bench.runner import plan_tasks
from hdgp.bench.task import _build_estimator


@pytest.fixture
def raising_protocol(tiny_protocol, protocol_file):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"},
                                 {"label": "Broken", "preset": "Linear", "params": {"optimizer": "no-such-optimizer"}}])
    return str(protocol_file(spec))


def test_a_raising_task_is_recorded_and_the_run_goes_on(raising_protocol, tmp_path):
    db = tmp_path / "r.sqlite"
    summary = run_protocol(raising_protocol, workers=0, db=db, progress=False)
    assert (summary.total, summary.done, summary.failed) == (4, 2, 2)
    with ResultStore(db) as store:
        df = store.frame("tiny")
    failed = df[df.status == "failed"]
    assert set(failed.model) == {"Broken"}
    assert all("optimizer" in e for e in failed.error) and all("Traceback" in t for t in failed.traceback)
    done = df[df.status == "done"]
    assert set(done.model) == {"Linear"} and np.isfinite(done.metric_rmse).all()
    assert (done.fit_seconds > 0).all() and (done.peak_rss_mb > 0).all()
    assert all(v["torch"] for v in done.versions) and all(m["cores"] >= 1 for m in done.machine)
    assert all("likelihood.noise_covar.noise" in h for h in done.hyperparameters)


def test_rerun_skips_finished_and_failed_tasks_and_retries_on_request(raising_protocol, tmp_path):
    db = tmp_path / "r.sqlite"
    run_protocol(raising_protocol, workers=0, db=db, progress=False)
    with ResultStore(db) as store:
        before = store.frame("tiny").set_index(["model", "split"])
    again = run_protocol(raising_protocol, workers=0, db=db, progress=False)
    assert (again.skipped, again.ran) == (4, 0)
    retry = run_protocol(raising_protocol, workers=0, db=db, progress=False, retry_failed=True)
    assert (retry.skipped, retry.failed, retry.done) == (2, 2, 0)
    with ResultStore(db) as store:
        after = store.frame("tiny").set_index(["model", "split"])
        runs = store.runs("tiny")
    assert (after.loc["Broken", "attempts"] == 2).all()
    assert (after.loc["Linear", "finished_at"] == before.loc["Linear", "finished_at"]).all()
    assert len(runs) == 3 and list(runs.done) == [2, 0, 0]


def test_rerun_replaces_the_selected_records_only(raising_protocol, tmp_path):
    db = tmp_path / "r.sqlite"
    run_protocol(raising_protocol, workers=0, db=db, progress=False)
    with ResultStore(db) as store:
        before = store.frame("tiny").set_index(["model", "split"])
    again = run_protocol(raising_protocol, models=["Linear"], splits=[0], workers=0, db=db, progress=False,
                         rerun=True)
    assert (again.skipped, again.done, again.failed) == (0, 1, 0)
    with ResultStore(db) as store:
        after = store.frame("tiny").set_index(["model", "split"])
    assert len(after) == len(before)
    assert after.loc[("Linear", 0), "finished_at"] > before.loc[("Linear", 0), "finished_at"]
    assert after.loc[("Linear", 0), "attempts"] == 2
    assert after.loc[("Linear", 0), "metric_rmse"] == pytest.approx(before.loc[("Linear", 0), "metric_rmse"])
    unselected = [("Linear", 1), ("Broken", 0), ("Broken", 1)]
    assert (after.loc[unselected, "finished_at"] == before.loc[unselected, "finished_at"]).all()


def test_workers_times_threads_may_not_exceed_cores(raising_protocol, tmp_path):
    from hdgp.bench.runner import usable_cores

    with pytest.raises(ValueError, match="exceeds the .* usable cores"):
        run_protocol(raising_protocol, workers=usable_cores(), threads=2, db=tmp_path / "r.sqlite")


def test_results_are_reproducible_per_seed(tiny_protocol, protocol_file, tmp_path):
    path = str(protocol_file(tiny_protocol(models=[{"label": "GAM", "preset": "GAM"}], splits=(0,))))
    frames = []
    for name in ("a", "b"):
        run_protocol(path, workers=0, db=tmp_path / f"{name}.sqlite", progress=False)
        with ResultStore(tmp_path / f"{name}.sqlite") as store:
            frames.append(store.frame("tiny"))
    assert frames[0].metric_rmse.iloc[0] == pytest.approx(frames[1].metric_rmse.iloc[0], rel=1e-10)


def test_a_misspelt_model_parameter_stops_the_run_before_any_task(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Typo", "preset": "Linear", "params": {"max_iters": 5}}])
    with pytest.raises(ValueError, match=r"Model 'Typo' of protocol 'tiny'.*no parameter\(s\) 'max_iters'"):
        run_protocol(str(protocol_file(spec)), workers=0, db=tmp_path / "r.sqlite", progress=False)
    assert not (tmp_path / "r.sqlite").exists()


def test_device_reaches_the_torch_models_only_and_is_recorded(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"},
                                 {"label": "SIGP", "preset": "SIGP", "params": {"rank": 2}}], splits=(0,))
    tasks, _ = plan_tasks(str(protocol_file(spec)), device="cpu")
    built = {t.model.label: _build_estimator(t) for t in tasks}
    assert built["Linear"].device == "cpu" and "device" not in built["SIGP"].get_params()
    run_protocol(str(protocol_file(spec)), workers=0, db=tmp_path / "r.sqlite", progress=False, device="cpu")
    with ResultStore(tmp_path / "r.sqlite") as store:
        frame = store.frame("tiny")
    assert sorted(frame["device"]) == ["cpu", "cpu"]


@pytest.mark.parametrize("device, message", [
    ("foo", "device must be"), ("meta", "device must be"),
    pytest.param("cuda", "sees no CUDA GPU", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="has a GPU")),
    ("cuda:%d" % torch.cuda.device_count(), "CUDA GPU" if torch.cuda.is_available() else "sees no CUDA GPU")])
def test_a_device_no_task_could_use_stops_the_run_before_any_task(tiny_protocol, protocol_file, tmp_path,
                                                                  device, message):
    with pytest.raises(ValueError, match=message):
        run_protocol(str(protocol_file(tiny_protocol())), workers=0, db=tmp_path / "r.sqlite", device=device)
    assert not (tmp_path / "r.sqlite").exists()


def test_with_dask_the_workers_gpus_count_so_only_the_spelling_is_checked_here():
    from hdgp.bench.runner import _check_device

    _check_device("cuda:3", local=False)
    with pytest.raises(ValueError, match="device must be"):
        _check_device("gpu", local=False)


def test_a_cpu_device_with_an_index_is_recorded_as_the_cpu():
    from hdgp import preset
    from hdgp.bench.task import _device_of

    assert _device_of(preset("Linear").set_params(device="cpu:0")) == "cpu"


def test_the_git_revision_follows_hdgp_git_revision_whenever_it_is_read(monkeypatch):
    from hdgp.bench.task import library_versions

    monkeypatch.delenv("HDGP_GIT_REVISION", raising=False)
    library_versions()  # the checkout's revision, cached
    monkeypatch.setenv("HDGP_GIT_REVISION", "abc123")
    assert library_versions()["hdgp_git"] == "abc123"


def test_an_in_process_run_gives_the_caller_its_thread_settings_back(tiny_protocol, protocol_file, tmp_path,
                                                                     monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    previous = torch.get_num_threads()
    try:
        with threadpool_limits(limits=2):
            torch.set_num_threads(2)
            before = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
            run_protocol(str(protocol_file(tiny_protocol(splits=(0,)))), workers=0, db=tmp_path / "r.sqlite",
                         progress=False, threads=1)
            assert {p["filepath"]: p["num_threads"] for p in threadpool_info()} == before
            assert torch.get_num_threads() == 2 and "OMP_NUM_THREADS" not in os.environ
    finally:
        torch.set_num_threads(previous)


def _thread_counts(threads: int) -> dict:
    from threadpoolctl import threadpool_info

    from hdgp.bench.task import set_threads

    set_threads(threads)
    return {"torch": torch.get_num_threads(), **{f"{p['internal_api']} {p['filepath']}": p["num_threads"]
                                                  for p in threadpool_info()}}


def test_a_pool_worker_runs_its_task_on_the_threads_it_was_given():
    # the fork server imports NumPy, SciPy and torch before any task sets a variable: the
    # pools they loaded must be limited too, not only libraries loaded afterwards
    from concurrent.futures import ProcessPoolExecutor

    from hdgp.bench.runner import _pool_context

    with ProcessPoolExecutor(1, mp_context=_pool_context()) as pool:
        counts = pool.submit(_thread_counts, 1).result()
    assert any(name.startswith(("openblas", "mkl")) for name in counts), counts
    assert set(counts.values()) == {1}, counts
