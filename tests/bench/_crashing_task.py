"""A task function for the runner's crash test: split 1 kills its worker process outright."""

import os

from hdgp.bench.task import run_task


def crash_on_split_1(task):
    if task.split == 1:
        os._exit(9)  # like the kernel's OOM killer: no exception, no result
    return run_task(task)
