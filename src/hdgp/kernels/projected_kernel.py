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

import math
from collections.abc import Sequence

import torch
from gpytorch.constraints import Positive
from gpytorch.kernels import Kernel
from torch.utils.checkpoint import checkpoint

__all__ = ["ProjectedAdditiveKernel"]


#: Entries of one block's (J, rows, cols) temporaries on the CPU: ~1 MB in float64, so every
#: elementwise pass runs in cache, yet each torch call covers all J terms and several rows
#: (per-term 64-row blocks spent a third of the kernel time dispatching small ops).
_CPU_BLOCK_ENTRIES = 2**17
#: The same on a GPU: there, cache blocking buys nothing and each elementwise pass is a kernel
#: launch, so blocks are as large as keeps a temporary at 2^26 entries (512 MB in float64).
_GPU_BLOCK_ENTRIES = 2**26
#: Fewest rows per block: below ~8 the per-call overhead outweighs the cache (n = 1353, J = 20).
_MIN_BLOCK_ROWS = 8


def _stacked(Z: torch.Tensor, slices) -> torch.Tensor:
    """The J projections of ``Z (..., n, sum(degrees))`` as ``(..., J, n, max degree)``, scaled by √½.

    Lower-degree terms are padded with zero coordinates, which add nothing to a
    distance; the √½ scaling makes every term :math:`\\exp(-\\lVert u - u' \\rVert^2)`.
    """
    width = max(sl.stop - sl.start for sl in slices)
    U = Z.new_zeros(Z.shape[:-2] + (len(slices), Z.shape[-2], width))
    for j, sl in enumerate(slices):
        U[..., j, :, : sl.stop - sl.start] = Z[..., sl]
    return U.mul_(math.sqrt(0.5))


def _differences(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """:math:`t_{jik} = a_{ji} - b_{jk}`, ``(..., J, r, m, D)``: exact differences, never the expansion
    :math:`a^2 + b^2 - 2ab`, so a far-out row cannot cancel away the precision of the others."""
    return a.unsqueeze(-2) - b.unsqueeze(-3)


def _rbf(t: torch.Tensor, zero: torch.Tensor, reuse: bool = False) -> torch.Tensor:
    """:math:`\\exp(-\\lVert t \\rVert^2)` over the last axis, ``(..., J, r, m)``; overwrites ``t`` when ``reuse``.

    In 1-D, :math:`-t^2` is one fused ``addcmul`` pass (square and negate) onto ``zero``,
    a 0-d zero tensor.
    """
    if t.shape[-1] == 1:
        return torch.addcmul(zero, t, t, value=-1.0, out=t if reuse else None).squeeze(-1).exp_()
    return t.square().sum(-1).neg_().exp_()


def _row_blocks(U1: torch.Tensor, n_cols: int, symmetric: bool):
    """``(first row, number of rows, first column)`` of blocks of rows that tile the ``(n, n_cols)`` matrix K.

    A block's temporaries hold J × rows × cols × D entries: about
    :data:`_CPU_BLOCK_ENTRIES` on the CPU, :data:`_GPU_BLOCK_ENTRIES` on a GPU. For a
    symmetric K (both arguments the same tensor) each block only spans the columns
    from its own diagonal on: the upper triangle, half the work.
    """
    budget = _CPU_BLOCK_ENTRIES if U1.device.type == "cpu" else _GPU_BLOCK_ENTRIES
    step = max(_MIN_BLOCK_ROWS, budget // max(1, U1.shape[-3] * n_cols * U1.shape[-1]))
    n = U1.shape[-2]
    for start in range(0, n, step):
        yield start, min(step, n - start), start if symmetric else 0


class _ProjectedRBFSum(torch.autograd.Function):
    """:math:`K = \\sum_j w_j \\exp(-\\tfrac12 \\lVert Z_1^{(j)} - Z_2^{(j)} \\rVert^2)` with O(n^2) memory.

    ``slices[j]`` gives the columns of ``Z1``/``Z2`` that belong to sub-kernel
    ``j``; internally the terms are stacked as :math:`u = \\sqrt{1/2}\\, z`
    (:func:`_stacked`) so that :math:`E_j = \\exp(-\\lVert u_1 - u_2 \\rVert^2)`.
    With :math:`M_j = G \\odot E_j` and the differences :math:`t_{jik} = u_{1,ji} - u_{2,jk}`
    (which the forward pass squares) the backward pass is

    .. math::

        \\frac{\\partial}{\\partial u_{1,ji}} = -2 w_j \\sum_k M_{jik}\\, t_{jik},\\qquad
        \\frac{\\partial}{\\partial u_{2,jk}} = 2 w_j \\sum_i M_{jik}\\, t_{jik},

    (:math:`= -2 w_j (\\mathrm{rowsum}(M_j)\\, u_1 - M_j u_2)`, one product
    :math:`M \\odot t` summed both ways instead of two matrix products),
    and :math:`\\partial/\\partial w_j = \\sum M_j`. When both arguments are the same
    tensor :math:`Z` (training, :math:`K(X, X)`) the two add up to the first with
    :math:`G + G^\\top` in place of :math:`G`. Both passes walk K in blocks of rows
    (:func:`_row_blocks`), all J terms at once, and recompute the terms there, so
    memory stays O(n²) for any J; for :math:`K(X, X)` they visit only the upper
    triangle (half the exponentials) and mirror it.
    """

    @staticmethod
    def forward(ctx, Z1, Z2, weights, slices):
        symmetric = Z1 is Z2
        U1 = _stacked(Z1, slices)
        U2 = U1 if symmetric else _stacked(Z2, slices)
        shape = torch.broadcast_shapes(Z1.shape[:-2], Z2.shape[:-2]) + (Z1.shape[-2], Z2.shape[-2])
        K = Z1.new_empty(shape)
        zero = K.new_zeros(())
        for r0, nr, c0 in _row_blocks(U1, U2.shape[-2], symmetric):
            E = _rbf(_differences(U1.narrow(-2, r0, nr), U2.narrow(-2, c0, U2.shape[-2] - c0)), zero, reuse=True)
            block = (weights @ E.flatten(-2)).unflatten(-1, E.shape[-2:])  # Σ_j w_j E_j
            K.narrow(-2, r0, nr).narrow(-1, c0, block.shape[-1]).copy_(block)
            if symmetric:  # mirror the block right of the diagonal into the lower triangle
                right = block.narrow(-1, nr, block.shape[-1] - nr)
                K.narrow(-2, r0 + nr, right.shape[-1]).narrow(-1, r0, nr).copy_(right.transpose(-1, -2))
        ctx.slices, ctx.symmetric = slices, symmetric
        ctx.save_for_backward(Z1, Z2, weights)
        return K

    @staticmethod
    def backward(ctx, G):
        Z1, Z2, weights = ctx.saved_tensors
        need_z1, need_z2, need_w = ctx.needs_input_grad[:3]
        symmetric = ctx.symmetric and need_z1 and need_z2
        U1 = _stacked(Z1, ctx.slices)
        U2 = U1 if ctx.symmetric else _stacked(Z2, ctx.slices)
        G = torch.broadcast_to(G, torch.broadcast_shapes(G.shape, Z1.shape[:-2] + (Z1.shape[-2], Z2.shape[-2])))
        g1 = torch.zeros(G.shape[:-2] + U1.shape[-3:], dtype=G.dtype, device=G.device) if need_z1 else None
        g2 = torch.zeros(G.shape[:-2] + U2.shape[-3:], dtype=G.dtype, device=G.device) \
            if need_z2 and not symmetric else None
        gw = torch.zeros(G.shape[:-2] + weights.shape, dtype=G.dtype, device=G.device) if need_w else None
        zero = G.new_zeros(())
        for r0, nr, c0 in _row_blocks(U1, U2.shape[-2], symmetric):
            a, b = U1.narrow(-2, r0, nr), U2.narrow(-2, c0, U2.shape[-2] - c0)
            G_block = G.narrow(-2, r0, nr).narrow(-1, c0, b.shape[-2])
            if symmetric:  # G + G^T on this block: each entry of M + M^T below, computed once
                G_block = G_block + G.narrow(-2, c0, b.shape[-2]).narrow(-1, r0, nr).transpose(-1, -2)
            t = _differences(a, b)
            M = _rbf(t, zero).mul_(G_block.unsqueeze(-3))
            if need_w:
                # symmetric: the block's square diagonal part holds both triangles of G + G^T,
                # the part right of it also stands for its mirror image below the diagonal
                gw += (0.5 * M[..., :nr].sum((-1, -2)) + M[..., nr:].sum((-1, -2))
                       if symmetric else M.sum((-1, -2)))
            Mt = t.mul_(M.unsqueeze(-1))  # M_jik t_jik: rows sum to rowsum(M) u_1 - M u_2
            if symmetric:
                g1.narrow(-2, r0, nr).add_(Mt.sum(-2))
                g1.narrow(-2, r0 + nr, b.shape[-2] - nr).sub_(Mt.narrow(-2, nr, b.shape[-2] - nr).sum(-3))
                continue
            if need_z1:
                g1.narrow(-2, r0, nr).copy_(Mt.sum(-2))
            if g2 is not None:
                g2.sub_(Mt.sum(-3))
        # chain rule through u = √½ z: ∂/∂z = -2 w_j √½ (...)
        scale = -math.sqrt(2.0) * weights.unsqueeze(-1).unsqueeze(-1)
        gZ1 = _unstacked(g1 * scale, ctx.slices).sum_to_size(Z1.shape) if need_z1 else None
        gZ2 = _unstacked(g2 * scale, ctx.slices).sum_to_size(Z2.shape) if g2 is not None else None
        # with Z1 and Z2 the same tensor autograd adds the two gradients: all of it is in gZ1
        return gZ1, gZ2, gw.sum_to_size(weights.shape) if need_w else None, None


def _unstacked(g: torch.Tensor, slices) -> torch.Tensor:
    """Inverse layout of :func:`_stacked` (without the scaling): ``(..., J, n, D)`` to ``(..., n, sum(degrees))``."""
    return torch.cat([g[..., j, :, : sl.stop - sl.start] for j, sl in enumerate(slices)], dim=-1)


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
        :math:`z` with unit length-scale. Computed in the dtype of ``x``, whatever the
        dtype of the projections and length-scales (as GPyTorch's kernels do).
        """
        if x.shape[-1] != self.projections.shape[1]:
            raise ValueError(
                f"inputs have {x.shape[-1]} features but the projections expect {self.projections.shape[1]}."
            )
        P = self.projections.to(x)
        if self.ard:
            return (x / self.input_lengthscale.to(x)) @ P.T
        lam = torch.repeat_interleave(self.projection_lengthscale, torch.tensor(self.degrees, device=x.device))
        return (x @ P.T) / lam.to(x)

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
