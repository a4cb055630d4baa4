"""Differentiable weighted sums :math:`\\sum_r \\sigma_r^2 e_r(k_1, \\dots, k_D)` of elementary symmetric
polynomials (:mod:`hdgp.kernels.symmetric_polynomials`), as autograd functions with memory-light
backward passes: compiled loops on the CPU (:mod:`hdgp.kernels._compiled`), tensor tiles elsewhere.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from .._autograd import refuse_double_backward
from .._compiled import as_array, rows_backward, rows_forward, use_compiled
from ..symmetric_polynomials import _reverse_sweep, elementary_symmetric
from .triangle import _fold_upper_onto_lower, _mirror_lower, _tiles

__all__ = ["additive_sum", "symmetric_additive_sum"]


#: Elements processed together on the CPU: the D + 2(R + 1) rows of one tile stay in cache,
#: and the backward pass stores only D·R·_CHUNK prefix values (timings: benchmarks/README.md).
_CHUNK = 16384
#: On a GPU, tiles are as wide as keeps the backward's D·R prefix rows at 2^28 entries (2 GB in
#: float64): cache tiling buys nothing there and every elementwise pass is a kernel launch
#: (benchmarks/additive_gpu_tiles.py compares both tile sizes).
_GPU_PREFIX_ENTRIES = 2**28


class _AdditiveSum(torch.autograd.Function):
    r""":math:`\sum_{r=0}^{R} \sigma_r^2 e_r(k_1..k_D)` with a memory-light backward pass.

    Forward keeps only :math:`R+1` running buffers. Backward reverses the recurrence:
    with adjoints :math:`a_r = \partial L / \partial e_r^{(i)}`, starting from
    :math:`a_r = \sigma_r^2 G`, each step gives
    :math:`\partial L/\partial k_i = \sum_r a_r\, e_{r-1}^{(i-1)}` and
    :math:`a_r \leftarrow a_r + k_i a_{r+1}`. The prefix polynomials
    :math:`e^{(i-1)}` are recomputed tile by tile (``chunk`` elements), so the extra
    storage is :math:`D R` tiles, never :math:`D R` full matrices. On the CPU both passes run as
    compiled loops instead (:mod:`._compiled`), the same recurrences over short runs of entries.
    """

    @staticmethod
    def forward(ctx, base, order_variances, chunk):
        ctx.save_for_backward(base, order_variances)
        ctx.chunk = chunk
        if use_compiled(base):
            rows = _as_rows(base)
            out = rows.new_empty(rows.shape[1:])
            return _compiled_forward([rows], order_variances, False, out).reshape(base.shape[1:])
        flat = base.reshape(base.shape[0], -1)
        out = flat.new_empty(flat.shape[1])
        # element tiles keep the (R + 1 + D) working rows in cache
        for start in range(0, flat.shape[1], chunk):
            e = elementary_symmetric(flat[:, start : start + chunk], order_variances.numel() - 1)
            out[start : start + chunk] = order_variances @ e
        return out.reshape(base.shape[1:])

    @staticmethod
    def backward(ctx, grad_out):
        refuse_double_backward("AdditiveKernel")
        base, variances = ctx.saved_tensors
        if use_compiled(base):
            rows = _as_rows(base)
            (grad_rows,), grad_var = _compiled_backward([rows], variances, False, grad_out.reshape(rows.shape[1:]),
                                                        ctx.needs_input_grad[:1])
            return (grad_rows.reshape(base.shape) if grad_rows is not None else None), grad_var, None
        n_dims, max_order = base.shape[0], variances.numel() - 1
        flat_base = base.reshape(n_dims, -1)
        flat_grad = grad_out.reshape(-1)
        grad_base = torch.empty_like(flat_base) if ctx.needs_input_grad[0] else None
        grad_var = torch.zeros_like(variances)
        # buffers reused across tiles (fresh allocations page-fault on every tile)
        width = min(ctx.chunk, flat_grad.numel())
        prefix_buf = flat_base.new_empty((n_dims, max_order, width))
        e_buf = flat_base.new_empty((max_order + 1, width))
        for start in range(0, flat_grad.numel(), ctx.chunk):
            k = flat_base[:, start : start + ctx.chunk]
            width = k.shape[1]
            grad_k = grad_base[:, start : start + ctx.chunk] if grad_base is not None else None
            grad_var += _reverse_sweep(k, flat_grad[start : start + ctx.chunk], variances,
                                       prefix_buf[..., :width], e_buf[:, :width], grad_k)
        grad_base = grad_base.reshape(base.shape) if grad_base is not None else None
        return grad_base, grad_var, None


class _SymmetricAdditiveSum(torch.autograd.Function):
    r""":class:`_AdditiveSum` of symmetric :math:`n \times n` base matrices, on their lower triangle.

    Every :math:`k_i(X, X)` is symmetric and so is the sum, so both passes walk only the row
    blocks' entries left of and inside the diagonal (about :math:`n^2/2` of the :math:`n^2`)
    and the upper triangle is copied from the lower. The base arrives as row blocks
    :math:`k_i(X_{[R_0, R_1)}, X_{[0, R_1)})` (:func:`symmetric_additive_sum`), walked in tiles of
    at most ``chunk`` entries. Backward sees :math:`G + G^\top` left of the tiles' diagonal squares
    (each such entry stands for its mirror too) and :math:`G` inside them (where both mirrors are
    computed), and returns a base gradient that is zero right of those squares: the base kernels'
    own backward then gives the same parameter gradients as the full sum, since
    :math:`k_i(x_a, x_b) = k_i(x_b, x_a)`.
    """

    @staticmethod
    def forward(ctx, order_variances, chunk, *blocks):
        ctx.save_for_backward(order_variances, *blocks)
        ctx.chunk = chunk
        n = blocks[-1].shape[-1]
        out = blocks[0].new_empty(n, n)
        if use_compiled(blocks[0]):
            _compiled_forward(blocks, order_variances, True, out)
        else:
            for i, row0, r0, r1 in _tiles(blocks, chunk):
                e = elementary_symmetric(blocks[i][:, r0 - row0 : r1 - row0, :r1], order_variances.numel() - 1)
                out[r0:r1, :r1] = torch.tensordot(order_variances, e, dims=1)
        return _mirror_lower(out)

    @staticmethod
    def backward(ctx, grad_out):
        refuse_double_backward("AdditiveKernel")
        variances, *blocks = ctx.saved_tensors
        if use_compiled(blocks[0]):
            mirrored = _fold_upper_onto_lower(grad_out)  # each entry left of the diagonal stands for its mirror too
            grads, grad_var = _compiled_backward(blocks, variances, True, mirrored, ctx.needs_input_grad[2:])
            return (grad_var, None, *grads)
        n_dims, max_order = blocks[0].shape[0], variances.numel() - 1
        # right of each tile's diagonal square is the only part the sweeps leave unwritten
        grads = [torch.empty_like(b) if needs else None for b, needs in zip(blocks, ctx.needs_input_grad[2:])]
        grad_var = torch.zeros_like(variances)
        tiles = list(_tiles(blocks, ctx.chunk))
        size = max((r1 - r0) * r1 for _, _, r0, r1 in tiles)
        prefix_buf, e_buf = blocks[0].new_empty((n_dims, max_order, size)), blocks[0].new_empty((max_order + 1, size))
        for i, row0, r0, r1 in tiles:
            shape = (r1 - r0, r1)
            g = grad_out[r0:r1, :r1].clone()
            g[:, :r0] += grad_out[:r0, r0:r1].T  # left of the diagonal square: each entry also stands for its mirror
            grad_k = None
            if grads[i] is not None:
                rows = grads[i][:, r0 - row0 : r1 - row0]
                rows[..., r1:].zero_()
                grad_k = rows[..., :r1]
            grad_var += _reverse_sweep(blocks[i][:, r0 - row0 : r1 - row0, :r1], g, variances,
                                       prefix_buf[..., : shape[0] * shape[1]].view(n_dims, max_order, *shape),
                                       e_buf[:, : shape[0] * shape[1]].view(max_order + 1, *shape), grad_k)
        return (grad_var, None, *grads)


def _as_rows(base: torch.Tensor) -> torch.Tensor:
    """A base stack ``(D, ...)`` as one row ``(D, 1, N)`` of the compiled kernels: the whole sum is
    elementwise, and long rows keep their loops busy (an ``(n, 1)`` layout would pay a row's fixed
    cost for every entry)."""
    return base.reshape(base.shape[0], 1, math.prod(base.shape[1:]))


def _compiled_forward(blocks, variances, lower: bool, out: torch.Tensor) -> torch.Tensor:
    """Fill ``out`` from consecutive row blocks ``(D, rows, cols)`` (:func:`._compiled.rows_forward`)."""
    v, row0 = as_array(variances, out.dtype), 0
    for block in blocks:
        rows_forward(as_array(block), row0, lower, v, out.numpy())
        row0 += block.shape[1]
    return out


def _compiled_backward(blocks, variances, lower: bool, grad_out: torch.Tensor, needs):
    """Gradients of :func:`_compiled_forward`: one per block (None where ``needs`` is false) and the variances'."""
    g, v = as_array(grad_out), as_array(variances, grad_out.dtype)
    # float64 sums whatever the dtype: a float32 total of n² terms would keep few digits
    grad_var, grads, row0 = np.zeros(v.shape, dtype=np.float64), [], 0
    for block, need in zip(blocks, needs):
        b = as_array(block)
        grad = np.empty_like(b) if need else np.empty((1, 1, 1), dtype=b.dtype)
        rows_backward(b, row0, lower, v, g, bool(need), grad, grad_var)
        grads.append(torch.from_numpy(grad) if need else None)
        row0 += block.shape[1]
    return grads, torch.from_numpy(grad_var).to(variances)


def additive_sum(base: torch.Tensor, order_variances: torch.Tensor, chunk: Optional[int] = None):
    r"""Weighted sum of elementary symmetric polynomials, differentiable.

    .. math::

        k = \sum_{r=0}^{R} \sigma_r^2\, e_r(k_1, \dots, k_D)

    Parameters
    ----------
    base : torch.Tensor of shape (D, ...)
        Stack of the :math:`D` one-dimensional kernel evaluations.
    order_variances : torch.Tensor of shape (R + 1,)
        :math:`\sigma_0^2, \dots, \sigma_R^2`.
    chunk : int, optional
        Elements processed together by the tensor tiles (tuning / tests; the compiled CPU
        loops need none). Default :data:`_CHUNK`; on a GPU as many as keep the backward's
        prefix buffer at :data:`_GPU_PREFIX_ENTRIES`.

    Returns
    -------
    torch.Tensor of shape base.shape[1:]
    """
    constant = _order_zero_only(order_variances, base.shape[1:], base)
    if constant is not None:
        return constant
    if chunk is None:
        passes = base.shape[0] * max(order_variances.numel() - 1, 1)
        chunk = _CHUNK if base.device.type == "cpu" else max(_CHUNK, _GPU_PREFIX_ENTRIES // passes)
    return _AdditiveSum.apply(base, order_variances, int(chunk))


def symmetric_additive_sum(base, order_variances: torch.Tensor, chunk: Optional[int] = None):
    r""":func:`additive_sum` of symmetric base matrices :math:`k_i(X, X)`, computed on their lower
    triangle (about half the elementwise passes, forward and backward; see :class:`_SymmetricAdditiveSum`).

    Parameters
    ----------
    base : torch.Tensor of shape (D, n, n), or a sequence of row blocks
        The symmetric base matrices, whole, or as consecutive row blocks
        :math:`k_i(X_{[R_0, R_1)}, X_{[0, R_1)})` of shape :math:`(D, R_1 - R_0, R_1)` covering
        rows :math:`0..n` (the part of the lower triangle they hold, so the base kernels need not
        evaluate the upper one). Only entries left of and inside the diagonal tiles are read.
    order_variances : torch.Tensor of shape (R + 1,)
    chunk : int, optional
        Entries per tile of the tensor tiles (default :data:`_CHUNK`; the compiled CPU loops need none).

    Returns
    -------
    torch.Tensor of shape (n, n)
    """
    blocks = (base,) if isinstance(base, torch.Tensor) else tuple(base)
    row0 = 0
    for block in blocks:
        if block.dim() != 3 or block.shape[-1] != row0 + block.shape[-2] or block.shape[0] != blocks[0].shape[0]:
            raise ValueError(f"Row blocks of a symmetric base must be (D, R1 - R0, R1) for consecutive rows "
                             f"R0..R1; got {tuple(block.shape)} for rows from {row0}.")
        row0 = block.shape[-1]
    constant = _order_zero_only(order_variances, (row0, row0), blocks[0])
    if constant is not None:
        return constant
    return _SymmetricAdditiveSum.apply(order_variances, int(chunk or _CHUNK), *blocks)


def _order_zero_only(order_variances: torch.Tensor, shape, like: torch.Tensor):
    r"""The sum when it has no order above 0 (R = 0): the constant :math:`\sigma_0^2` (no base
    gradient); None otherwise. Refuses an empty ``order_variances``."""
    if order_variances.dim() != 1 or order_variances.numel() < 1:
        raise ValueError(f"order_variances must have shape (R + 1,) with R >= 0, got {tuple(order_variances.shape)}.")
    if order_variances.numel() > 1:
        return None
    return order_variances.to(like)[0].expand(shape).clone()
