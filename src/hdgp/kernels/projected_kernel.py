"""Projected-additive kernel of RPA-GP / DPA-GP and their -ARD variants.

.. math::

    k(x, x') = \\sum_{j=1}^{J} \\alpha_j\\, k_j\\big(P^{(j)} A x,\\; P^{(j)} A x'\\big)

(Delbridge, Bindel & Wilson 2020, eq. 2 and Sec. 4.3). Two parameterisations:

* ``ard=True`` (-ARD, Sec. 4.3): :math:`A = \\mathrm{diag}(1/\\ell)` with one learned
  length-scale per *input* dimension, unit sub-kernel length-scales and fixed
  weights :math:`\\alpha_j = 1/J`;
* ``ard=False`` (RPA-GP-1, DPA-GP, RPA-GP-2/3): :math:`A = I`, every sub-kernel
  :math:`j` has its own length-scale :math:`\\lambda_j` and learned weights
  :math:`\\alpha = \\mathrm{softmax}(\\rho)` (they sum to one, so an outer
  ``ScaleKernel`` carries the total signal variance).

The default RBF sub-kernels are evaluated by a fused autograd function that
accumulates the sum over :math:`j` and recomputes each term in the backward
pass, so memory stays :math:`O(n^2)` for any :math:`J` (a stacked
:math:`J \\times n \\times n` tensor is what runs out of memory in GPyTorch
issue #748).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from gpytorch.constraints import Positive
from gpytorch.kernels import Kernel
from torch.utils.checkpoint import checkpoint

from .ard_kernel import _centred

__all__ = ["ProjectedAdditiveKernel"]


def _sq_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances between rows, ``(..., n1, n2)``; exact differences in 1-D."""
    if a.shape[-1] == 1:
        return (a - b.transpose(-1, -2)) ** 2
    a, b = _centred(a, b)  # translation invariant: a robust centre avoids cancellation
    a2 = (a * a).sum(-1, keepdim=True)
    b2 = (b * b).sum(-1, keepdim=True).transpose(-1, -2)
    return (a2 + b2 - 2.0 * a @ b.transpose(-1, -2)).clamp_min(0.0)


#: Rows of K processed together on the CPU: every pass over a (64 × n) block stays in cache,
#: which measured ~2x faster than whole-matrix passes (forward, n = 927, J = 20, one thread).
_ROW_BLOCK = 64
#: Entries of one block on a GPU: there, cache blocking buys nothing and each elementwise pass
#: is a kernel launch, so blocks are as large as keeps a temporary at 2^26 entries (512 MB in float64).
_GPU_BLOCK_ENTRIES = 2**26


def _rbf_term(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """:math:`\\exp(-\\tfrac12 \\lVert a_i - b_k \\rVert^2)` as a fresh ``(..., n1, n2)`` tensor, built in place."""
    if a.shape[-1] == 1:
        K = a - b.transpose(-1, -2)
        K.square_()
    else:
        K = _sq_dist(a, b)
    return K.mul_(-0.5).exp_()


def _row_blocks(Z1: torch.Tensor, n_cols: int, symmetric: bool):
    """``(rows, cols)`` slices that tile the ``(n, n_cols)`` matrix K in blocks of rows.

    :data:`_ROW_BLOCK` rows on the CPU, ~:data:`_GPU_BLOCK_ENTRIES` entries on a GPU.
    For a symmetric K (both arguments the same tensor) each block only spans the
    columns from its own diagonal on: the upper triangle, half the work.
    """
    step = _ROW_BLOCK if Z1.device.type == "cpu" else max(_ROW_BLOCK, _GPU_BLOCK_ENTRIES // max(n_cols, 1))
    for start in range(0, Z1.shape[-2], step):
        yield slice(start, start + step), slice(start if symmetric else 0, None)


class _ProjectedRBFSum(torch.autograd.Function):
    """:math:`K = \\sum_j w_j \\exp(-\\tfrac12 \\lVert Z_1^{(j)} - Z_2^{(j)} \\rVert^2)` with O(n^2) memory.

    ``slices[j]`` gives the columns of ``Z1``/``Z2`` that belong to sub-kernel
    ``j``. With :math:`M = w_j\\, G \\odot K_j` the backward pass is
    :math:`\\partial/\\partial Z_1 = M Z_2 - \\mathrm{rowsum}(M) Z_1` and
    :math:`\\partial/\\partial Z_2 = M^\\top Z_1 - \\mathrm{colsum}(M) Z_2`. When both
    arguments are the same tensor :math:`Z` (training, :math:`K(X, X)`) the two add
    up to :math:`S Z - \\mathrm{rowsum}(S) Z` with :math:`S = w_j (G + G^\\top) \\odot K_j`:
    one product per term instead of two, and no transposed (strided) passes.
    Both passes walk K in blocks of rows (:func:`_row_blocks`) and recompute each
    term :math:`K_j` there, so memory stays O(n²) for any J and every elementwise
    pass runs in cache; for :math:`K(X, X)` they visit only the upper triangle
    (half the exponentials) and mirror it.
    """

    @staticmethod
    def forward(ctx, Z1, Z2, weights, slices):
        w = weights.tolist()
        symmetric = Z1 is Z2
        shape = torch.broadcast_shapes(Z1.shape[:-2], Z2.shape[:-2]) + (Z1.shape[-2], Z2.shape[-2])
        K = Z1.new_zeros(shape)
        for rows, cols in _row_blocks(Z1, Z2.shape[-2], symmetric):
            block = K[..., rows, cols]
            for j, sl in enumerate(slices):
                block.add_(_rbf_term(Z1[..., rows, sl], Z2[..., cols, sl]), alpha=w[j])
            if symmetric:  # mirror the block right of the diagonal into the lower triangle
                K[..., cols.start + block.shape[-2]:, rows] = block[..., block.shape[-2]:].transpose(-1, -2)
        ctx.slices, ctx.symmetric = slices, symmetric
        ctx.save_for_backward(Z1, Z2, weights)
        return K

    @staticmethod
    def backward(ctx, G):
        Z1, Z2, weights = ctx.saved_tensors
        need_z1, need_z2, need_w = ctx.needs_input_grad[:3]
        symmetric = ctx.symmetric and need_z1 and need_z2
        G = torch.broadcast_to(G, torch.broadcast_shapes(G.shape, Z1.shape[:-2] + (Z1.shape[-2], Z2.shape[-2])))
        gZ1 = G.new_zeros(G.shape[:-1] + Z1.shape[-1:]) if need_z1 else None
        gZ2 = G.new_zeros(G.shape[:-2] + Z2.shape[-2:]) if need_z2 and not symmetric else None
        gw = torch.zeros_like(weights) if need_w else None
        if symmetric:
            G = G + G.transpose(-1, -2)  # each entry of M + M^T below, computed once
        w = weights.tolist()
        for rows, cols in _row_blocks(Z1, Z2.shape[-2], symmetric):
            G_block = G[..., rows, cols]
            for j, sl in enumerate(ctx.slices):
                a, b = Z1[..., rows, sl], Z2[..., cols, sl]
                M = _rbf_term(a, b)
                M = M.mul_(G_block) if M.shape == G_block.shape else M * G_block
                if symmetric:
                    # M is the upper-triangle part of the symmetric S: the block's square
                    # diagonal part counts once, the part right of it also stands for its
                    # mirror image below the diagonal.
                    nr = a.shape[-2]
                    if need_w:
                        gw[j] += 0.5 * M[..., :nr].sum() + M[..., nr:].sum()
                    M.mul_(w[j])
                    right, far = M[..., nr:], Z2[..., cols.start + nr:, sl]
                    gZ1[..., rows, sl] += M @ b - M.sum(-1, keepdim=True) * a
                    gZ1[..., cols.start + nr:, sl] += right.transpose(-1, -2) @ a - right.sum(-2).unsqueeze(-1) * far
                    continue
                if need_w:
                    gw[j] += M.sum()
                M.mul_(w[j])
                if need_z1:
                    gZ1[..., rows, sl] = M @ b - M.sum(-1, keepdim=True) * a
                if gZ2 is not None:
                    gZ2[..., sl] += M.transpose(-1, -2) @ a - M.sum(-2).unsqueeze(-1) * b
        # with Z1 and Z2 the same tensor autograd adds the two gradients: all of it is in gZ1
        if need_z1:
            gZ1 = gZ1.sum_to_size(Z1.shape)
        if gZ2 is not None:
            gZ2 = gZ2.sum_to_size(Z2.shape)
        return gZ1, gZ2, gw, None


class ProjectedAdditiveKernel(Kernel):
    """Sum of low-dimensional kernels on fixed linear projections of the inputs.

    .. math::

        k(x, x') = \\sum_{j=1}^{J} \\alpha_j\\, k_j\\big(P^{(j)} A x,\\; P^{(j)} A x'\\big)

    Parameters
    ----------
    projections : torch.Tensor of shape (sum(degrees), d)
        Stacked rows of :math:`P^{(1)}, \\dots, P^{(J)}` (see :mod:`hdgp.projections`).
        Fixed (a buffer), never learned.
    degrees : sequence of int, optional
        :math:`D_j`, the number of rows of each :math:`P^{(j)}`; default all 1.
    ard : bool, default True
        -ARD parameterisation (learned :math:`A = \\mathrm{diag}(1/\\ell)`, unit
        sub-kernel length-scales, :math:`\\alpha_j = 1/J`); otherwise per-projection
        length-scales :math:`\\lambda_j` and learned softmax weights.
    base_kernel : gpytorch.kernels.Kernel, optional
        Sub-kernel applied to each scaled projection :math:`z_j` (shared by all
        :math:`j`). Default: the unit RBF :math:`\\exp(-\\tfrac12\\lVert z - z'\\rVert^2)`
        through a fused, memory-light path. A custom kernel is evaluated term by
        term under activation checkpointing, so memory also stays :math:`O(n^2)`.

    Attributes
    ----------
    weights : torch.Tensor of shape (J,)
        :math:`\\alpha`.
    input_lengthscale : torch.Tensor of shape (d,)
        :math:`\\ell` (only when ``ard``).
    projection_lengthscale : torch.Tensor of shape (J,)
        :math:`\\lambda` (only when not ``ard``).

    References
    ----------
    Delbridge, Bindel & Wilson (2020), eq. (2)-(4) and Sec. 4.3.

    Examples
    --------
    >>> import torch
    >>> from hdgp.projections import diverse_directions
    >>> k = ProjectedAdditiveKernel(diverse_directions(3, 5, random_state=0))
    >>> X = torch.randn(4, 3, dtype=torch.float64)
    >>> k(X, X).to_dense().shape
    torch.Size([4, 4])
    """

    has_lengthscale = False

    def __init__(
        self,
        projections: torch.Tensor,
        degrees: Sequence[int] | None = None,
        *,
        ard: bool = True,
        base_kernel: Kernel | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if projections.dim() != 2 or projections.shape[0] < 1:
            raise ValueError(f"projections must be a (sum(degrees), d) matrix, got shape {tuple(projections.shape)}.")
        degrees = (1,) * projections.shape[0] if degrees is None else tuple(int(D) for D in degrees)
        if sum(degrees) != projections.shape[0] or min(degrees) < 1:
            raise ValueError(
                f"degrees {degrees} must be positive and sum to the number of projection rows "
                f"({projections.shape[0]})."
            )
        self.register_buffer("projections", projections)
        self.degrees = degrees
        ends = torch.tensor(degrees).cumsum(0).tolist()
        self._slices = tuple(slice(e - D, e) for e, D in zip(ends, degrees))
        self.ard = bool(ard)
        self.base_kernel = base_kernel
        J, d = len(degrees), projections.shape[1]
        dtype = projections.dtype
        if self.ard:
            self.register_parameter("raw_input_lengthscale", torch.nn.Parameter(torch.zeros(d, dtype=dtype)))
            self.register_constraint("raw_input_lengthscale", Positive())
        else:
            self.register_parameter("raw_projection_lengthscale", torch.nn.Parameter(torch.zeros(J, dtype=dtype)))
            self.register_constraint("raw_projection_lengthscale", Positive())
            self.register_parameter("raw_weights", torch.nn.Parameter(torch.zeros(J, dtype=dtype)))

    @property
    def n_projections(self) -> int:
        """Number of sub-kernels :math:`J`."""
        return len(self.degrees)

    @property
    def input_lengthscale(self) -> torch.Tensor:
        return self.raw_input_lengthscale_constraint.transform(self.raw_input_lengthscale)

    @input_lengthscale.setter
    def input_lengthscale(self, value) -> None:
        value = torch.as_tensor(value).to(self.raw_input_lengthscale)
        self.initialize(raw_input_lengthscale=self.raw_input_lengthscale_constraint.inverse_transform(value))

    @property
    def projection_lengthscale(self) -> torch.Tensor:
        return self.raw_projection_lengthscale_constraint.transform(self.raw_projection_lengthscale)

    @projection_lengthscale.setter
    def projection_lengthscale(self, value) -> None:
        value = torch.as_tensor(value).to(self.raw_projection_lengthscale)
        self.initialize(
            raw_projection_lengthscale=self.raw_projection_lengthscale_constraint.inverse_transform(value)
        )

    @property
    def weights(self) -> torch.Tensor:
        if self.ard:
            J = self.n_projections
            return self.projections.new_full((J,), 1.0 / J)
        return torch.softmax(self.raw_weights, dim=0)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Scaled projections :math:`z = P A x`, one column per projection row, ``(..., n, sum(degrees))``.

        Each sub-kernel's length-scale is folded in, so the sub-kernels act on
        :math:`z` with unit length-scale.
        """
        if x.shape[-1] != self.projections.shape[1]:
            raise ValueError(
                f"inputs have {x.shape[-1]} features but the projections expect {self.projections.shape[1]}."
            )
        P = self.projections.to(x)
        if self.ard:
            return (x / self.input_lengthscale) @ P.T
        lam = torch.repeat_interleave(self.projection_lengthscale, torch.tensor(self.degrees, device=x.device))
        return (x @ P.T) / lam

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise ValueError("ProjectedAdditiveKernel does not support last_dim_is_batch=True.")
        z1 = self.project(x1)
        z2 = z1 if x2 is x1 else self.project(x2)
        w = self.weights.to(z1)
        if self.base_kernel is None:
            if diag:
                return sum(w[j] * torch.exp(-0.5 * ((z1[..., sl] - z2[..., sl]) ** 2).sum(-1))
                           for j, sl in enumerate(self._slices))
            return _ProjectedRBFSum.apply(z1, z2, w, self._slices)
        K = None
        for j, sl in enumerate(self._slices):
            Kj = checkpoint(self._weighted_term, z1[..., sl], z2[..., sl], w[j], diag, use_reentrant=False)
            K = Kj if K is None else K + Kj
        return K

    def _weighted_term(self, a, b, wj, diag):
        return wj * self.base_kernel(a, b, diag=diag).to_dense()
