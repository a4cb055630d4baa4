"""The runner in this process (workers=0): failures are recorded, re-runs skip, retries are opt-in."""

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


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without a GPU")
def test_a_cuda_run_without_a_gpu_stops_before_any_task(tiny_protocol, protocol_file, tmp_path):
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        run_protocol(str(protocol_file(tiny_protocol())), workers=0, db=tmp_path / "r.sqlite", device="cuda")
    assert not (tmp_path / "r.sqlite").exists()


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
