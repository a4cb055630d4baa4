"""Helper for the runner's crash test, run in its own interpreter with this folder on PYTHONPATH.

``python _crashing_task.py PROTOCOL.json`` runs the protocol's tasks in a one-worker
pool where split 1 kills its worker outright, and prints ``{split: [status, error]}``
as JSON.
"""

import json
import os
import sys

from hdgp.bench.task import run_task


def crash_on_split_1(task):
    if task.split == 1:
        os._exit(9)  # like the kernel's OOM killer: no exception, no result
    return run_task(task)


def main(path):
    from hdgp.bench import plan_tasks
    from hdgp.bench.runner import _run_local

    tasks, _ = plan_tasks(path)
    records = []
    _run_local(tasks, workers=1, threads=1, on_result=records.append, fn=crash_on_split_1)
    print(json.dumps({r["split"]: [r["status"], r["error"]] for r in records}))


if __name__ == "__main__":
    main(sys.argv[1])
