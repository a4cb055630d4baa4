"""Thread budget for dense linear algebra on small problems.

On small matrices (n below a few thousand) threads cost more in synchronisation
than they save, and on a busy machine they oversubscribe the cores. NumPy's and
SciPy's BLAS (OpenBLAS) keep their own threads, which contend with torch's even on an
idle machine (measurements: benchmarks/README.md, "Measurements behind defaults").
Estimators therefore run their fits and predictions for small n on one
thread of each and restore the caller's settings afterwards.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager, nullcontext

import torch
from threadpoolctl import ThreadpoolController

__all__ = ["SINGLE_THREAD_MAX_N", "blas_libraries", "thread_budget"]

#: Problems with at most this many training rows run on one thread.
SINGLE_THREAD_MAX_N = 3000


@contextmanager
def thread_budget(n_rows: int):
    """One torch thread and one BLAS thread while ``n_rows <= SINGLE_THREAD_MAX_N``; otherwise leave threads as set."""
    small = n_rows <= SINGLE_THREAD_MAX_N
    previous = torch.get_num_threads()
    if small and previous > 1:
        torch.set_num_threads(1)
    try:
        with blas_libraries().limit(limits=1) if small else nullcontext():
            yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


@functools.cache
def blas_libraries():
    """NumPy's and SciPy's BLAS libraries as one threadpoolctl handle, for limiting their threads.

    Made once, on first use (it scans the libraries loaded in the process, ~3 ms; each
    ``limit`` then costs ~8 µs), after NumPy and SciPy's LAPACK are imported.
    """
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS, so that the scan finds it)

    return ThreadpoolController().select(user_api="blas")
