"""Route groups of input features to different per-feature kernels and stack the results."""

from __future__ import annotations

from typing import Sequence

import torch
from gpytorch.kernels import Kernel
from linear_operator import to_dense

from ._own_batch_shape import OwnBatchShape
from .functions.se_additive_sum import OuterPartsSums

__all__ = ["FeatureStackKernel"]


class FeatureStackKernel(OuterPartsSums, OwnBatchShape, Kernel):
    r"""Per-feature kernels for mixed feature types, in the feature-stacked layout.

    Input ``(..., D, n, 1)`` holds one feature per batch entry. Group :math:`g`
    receives the features ``columns[g]`` (shape ``(..., |g|, n, 1)``) and returns
    ``(..., |g|, n, m)``; the groups' outputs are put back in feature order, giving
    ``(..., D, n, m)``. Used as the base kernel of
    :class:`~hdgp.kernels.additive_kernel.AdditiveKernel` when, e.g., continuous
    features get constrained SE kernels and categorical ones categorical kernels.

    Parameters
    ----------
    kernels : sequence of gpytorch.kernels.Kernel
        One kernel per group.
    columns : sequence of sequences of int
        Feature indices of each group; together a partition of ``0..D-1``.
    """

    def __init__(self, kernels: Sequence[Kernel], columns: Sequence[Sequence[int]], **kwargs):
        super().__init__(**kwargs)
        if len(kernels) != len(columns) or not kernels:
            raise ValueError("kernels and columns must be non-empty and of equal length.")
        flat = [int(c) for cols in columns for c in cols]
        if sorted(flat) != list(range(len(flat))):
            raise ValueError(f"columns must partition 0..D-1 exactly once each, got {list(columns)}.")
        self.kernels = torch.nn.ModuleList(kernels)
        self.columns = [list(map(int, cols)) for cols in columns]
        self.register_buffer("_order", torch.argsort(torch.tensor(flat)), persistent=False)

    def _stack(self, pieces, feat_dim):
        return torch.cat(pieces, dim=feat_dim).index_select(feat_dim, self._order.to(pieces[0].device))

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError("FeatureStackKernel does not support last_dim_is_batch.")
        pieces = [
            to_dense(k.forward(x1[..., cols, :, :], x2[..., cols, :, :], diag=diag))
            for k, cols in zip(self.kernels, self.columns)
        ]
        return self._stack(pieces, -2 if diag else -3)

    def sobol_integral(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """Stack of every group's ``sobol_integral`` in feature order, shape (D, n, m)."""
        pieces = [k.sobol_integral(x1[cols], x2[cols]) for k, cols in zip(self.kernels, self.columns)]
        return self._stack(pieces, 0)

    def outer_parts(self, x: torch.Tensor):
        r"""Every group's ``outer_parts`` (``(x, miss, l2, u, v)``, see
        :meth:`~hdgp.kernels.orthogonal_kernel.ConstrainedSEKernel.outer_parts`) put back in feature order,
        for inputs ``(D, n, 1)``; None when a group has none (e.g. a categorical kernel)."""
        if x.dim() != 3:
            return None
        parts = []
        for kernel, cols in zip(self.kernels, self.columns):
            piece = getattr(kernel, "outer_parts", None)
            if piece is None:
                return None
            parts.append(piece(x[cols]))
        xs, misses, l2s, us, vs = zip(*parts)
        order = self._order.to(x.device)

        def stacked(pieces):
            return torch.cat(pieces, 0).index_select(0, order)

        miss = None
        if any(m is not None for m in misses):
            miss = stacked([torch.zeros(p.shape, dtype=torch.bool, device=p.device) if m is None else m
                            for m, p in zip(misses, xs)])
        return stacked(xs), miss, stacked(l2s), stacked(us), stacked(vs)
