"""The Dask path runs the same tasks with the same results as the local path."""

import pytest

from hdgp.bench import ResultStore, run_protocol

distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install 'hdgp[bench]')")


def test_dask_local_cluster_gives_the_local_results(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"}, {"label": "GAM", "preset": "GAM"}],
                         splits=(0, 1), n=50)
    path = str(protocol_file(spec))
    local = run_protocol(path, workers=0, db=tmp_path / "local.sqlite", progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster:
        remote = run_protocol(path, dask_scheduler=cluster.scheduler_address, db=tmp_path / "dask.sqlite",
                              progress=False)
        again = run_protocol(path, dask_scheduler=cluster.scheduler_address, db=tmp_path / "dask.sqlite",
                             progress=False)
    assert (local.done, remote.done, remote.failed) == (4, 4, 0)
    assert (again.skipped, again.ran) == (4, 0)
    frames = []
    for name in ("local", "dask"):
        with ResultStore(tmp_path / f"{name}.sqlite") as store:
            frames.append(store.frame("tiny").set_index(["dataset", "model", "split", "seed"]).sort_index())
    a, b = frames
    assert list(a.index) == list(b.index)
    for col in ("metric_rmse", "metric_nlpd", "metric_mse"):
        assert a[col].to_numpy() == pytest.approx(b[col].to_numpy(), rel=1e-9, abs=1e-12)
    assert list(a.status) == list(b.status)
