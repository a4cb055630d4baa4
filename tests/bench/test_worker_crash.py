"""A worker process that dies (OOM killer, segfault) fails its own task only; the run goes on."""

from hdgp.bench import plan_tasks
from hdgp.bench.runner import _run_local


def test_a_worker_that_dies_fails_only_its_own_task(tiny_protocol, protocol_file):
    path = str(protocol_file(tiny_protocol(splits=(0, 1, 2), n=40)))
    tasks, _ = plan_tasks(path)
    from _crashing_task import crash_on_split_1

    records = []
    _run_local(tasks, workers=1, threads=1, on_result=records.append, fn=crash_on_split_1)
    status = {r["split"]: r["status"] for r in records}
    assert status == {0: "done", 1: "failed", 2: "done"}
    assert "worker process died" in next(r["error"] for r in records if r["split"] == 1)
