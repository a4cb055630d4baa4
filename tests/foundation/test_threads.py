"""The thread budget of small problems covers torch and NumPy/SciPy's BLAS, and restores both."""

import torch
from threadpoolctl import threadpool_limits

from hdgp._threads import SINGLE_THREAD_MAX_N, blas_libraries, thread_budget


def _blas_threads() -> set:
    return {lib.num_threads for lib in blas_libraries().lib_controllers}


def test_small_problems_run_on_one_thread_of_each_library_and_restore_them():
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with threadpool_limits(2, user_api="blas"):
            with thread_budget(SINGLE_THREAD_MAX_N):
                assert torch.get_num_threads() == 1
                assert _blas_threads() == {1}
            assert torch.get_num_threads() == 2
            assert _blas_threads() == {2}
            with thread_budget(SINGLE_THREAD_MAX_N + 1):  # large: the caller's settings
                assert torch.get_num_threads() == 2
                assert _blas_threads() == {2}
    finally:
        torch.set_num_threads(previous)


def test_the_budget_finds_scipys_blas():
    assert blas_libraries().lib_controllers, "threadpoolctl found no BLAS library to limit"
