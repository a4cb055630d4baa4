"""Thread budget for dense linear algebra on small problems.

On small matrices (n below a few thousand) OpenMP threads cost more in
synchronisation than they save, and on a busy machine they oversubscribe the
cores: measured on a 2-core machine under load, one n = 398 RBF-ARD fit took
20 s with one torch thread and 126 s with two. Estimators therefore run their
fits and predictions for small n on a single thread and restore the caller's
setting afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["SINGLE_THREAD_MAX_N", "thread_budget"]

#: Problems with at most this many training rows run on one torch thread.
SINGLE_THREAD_MAX_N = 3000


@contextmanager
def thread_budget(n_rows: int):
    """Use one torch thread while ``n_rows <= SINGLE_THREAD_MAX_N``; otherwise leave threads as set."""
    previous = torch.get_num_threads()
    if n_rows <= SINGLE_THREAD_MAX_N and previous > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)
