"""``batch_shape`` as the kernel stores it, not as GPyTorch infers it from the sub-kernels; broadcast of batch shapes."""

from __future__ import annotations

import numpy as np
import torch


class OwnBatchShape:
    """Mixin (before ``gpytorch.kernels.Kernel`` in the bases) for kernels built on per-feature base
    kernels: GPyTorch's ``Kernel.batch_shape`` would take the base kernels' feature dimension for a
    batch of independent kernels, so the kernel reports the batch shape it was built with."""

    @property
    def batch_shape(self) -> torch.Size:
        return self._batch_shape

    @batch_shape.setter
    def batch_shape(self, value: torch.Size) -> None:
        self._batch_shape = value


def broadcast_batch(*shapes) -> torch.Size:
    """The broadcast of ``shapes`` (NumPy's rule). ``torch.broadcast_shapes`` is avoided on purpose: its
    first call imports SymPy (about a second), which every process's first kernel evaluation paid."""
    return torch.Size(np.broadcast_shapes(*(tuple(s) for s in shapes)))
