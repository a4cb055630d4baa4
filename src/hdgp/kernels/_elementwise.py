"""In-place elementwise functions for the kernels' fused forward and backward passes.

The exponential is most of the time of a stationary kernel matrix. On the CPU, NumPy's
``exp`` is SIMD where its build has a vector loop for the CPU and dtype (float64: AVX-512F;
float32: AVX2 or AVX-512F), and then faster than torch's, with the same accuracy; without one
it calls the scalar C library ``exp``, several times slower than torch's vectorised loop
(timings and the largest relative difference: benchmarks/README.md, "Numbers behind choices in
src/"). The kernels call NumPy's through the shared memory of a CPU tensor where it is SIMD, and
torch's otherwise; other devices, and tensors that autograd tracks, use torch. The choice is
fixed per machine (CPU features), so results do not depend on timing.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["exp_"]


def _numpy_simd_dtypes() -> tuple:
    """The torch dtypes whose ``exp`` NumPy runs as a SIMD loop on this CPU."""
    try:
        features = np._core._multiarray_umath.__cpu_features__
    except AttributeError:  # NumPy < 2 keeps them in np.core
        features = getattr(getattr(np, "core", None), "_multiarray_umath", None)
        features = getattr(features, "__cpu_features__", {})
    dtypes = []
    if features.get("AVX512F"):
        dtypes.append(torch.float64)
    if features.get("AVX512F") or (features.get("AVX2") and features.get("FMA3")):
        dtypes.append(torch.float32)
    return tuple(dtypes)


_NUMPY_DTYPES = _numpy_simd_dtypes()


def exp_(t: torch.Tensor) -> torch.Tensor:
    """Replace ``t`` by :math:`e^t` in place and return it."""
    if t.device.type == "cpu" and t.dtype in _NUMPY_DTYPES and not t.requires_grad:
        a = t.numpy()
        np.exp(a, out=a)
        return t
    return t.exp_()
