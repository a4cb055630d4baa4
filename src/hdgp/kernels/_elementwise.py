"""In-place elementwise functions for the kernels' fused forward and backward passes.

The exponential is most of the time of a stationary kernel matrix. On the CPU,
NumPy's SIMD ``exp`` is faster than torch's, with the same accuracy (timings and
the largest relative difference: benchmarks/README.md, "Numbers behind choices in
src/"). The kernels call it through the shared memory of a CPU tensor; other
devices, and tensors that autograd tracks, use torch.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["exp_"]

_NUMPY_DTYPES = (torch.float32, torch.float64)


def exp_(t: torch.Tensor) -> torch.Tensor:
    """Replace ``t`` by :math:`e^t` in place and return it."""
    if t.device.type == "cpu" and t.dtype in _NUMPY_DTYPES and not t.requires_grad:
        a = t.numpy()
        np.exp(a, out=a)
        return t
    return t.exp_()
