r"""The additive sum of constrained SE matrices, :math:`k(X, X)` on its lower triangle or a cross-covariance
:math:`k(X_1, X_2)`, in one autograd function that keeps no base matrix between its passes.

With per-feature matrices :math:`K_i = E_i - u_i v_i^\top`, :math:`E_i = e^{-(x_{ia} - x'_{ib})^2/2\ell_i^2}`
(:class:`~hdgp.kernels.se_kernel._SEMinusOuter`), the value is
:math:`\sum_{r=0}^{R} \sigma_r^2 e_r(K_1, \dots, K_D)` (:class:`._SymmetricAdditiveSum`,
:class:`._AdditiveSum`). Chained, those functions hold every row block's :math:`D` base matrices from the
forward pass to the backward pass (:math:`D n^2/2` values for :math:`k(X, X)`, :math:`D n m` for a
cross-covariance such as SGPR's :math:`K_{uf}`; fresh memory at every evaluation) and hand the backward pass
a second stack of that size, :math:`\partial L/\partial K_i`. Here each row block's matrices live in one
reused buffer: the forward pass sums them and moves on; the backward pass forms them again (one
exponential per entry and feature), runs the order sum's reverse sweep into a second reused buffer and
reduces it at once to the gradients of :math:`\ell_i^2`, :math:`u_i` and :math:`v_i` (the formulas of
:class:`~hdgp.kernels.se_kernel._SEMinusOuter`). Values and gradients are those of the chained functions.

**Threads.** Every step of a block runs in compiled loops or the exponential of
:func:`~hdgp.kernels._elementwise.exp_` (NumPy's where it is SIMD), which release the GIL, and blocks write
disjoint rows of the output (and of :math:`\partial L/\partial u`). With torch allowed more
than one thread (``torch.get_num_threads()``, which :func:`hdgp._threads.thread_budget` sets to one for small
problems) and at least :data:`PARALLEL_MIN_ENTRIES` entries, the blocks are split into that many contiguous
groups of equal work, each walked by its own thread with its own buffers; the backward pass's sums over
blocks (:math:`\partial L/\partial \sigma^2`, :math:`\ell^2`, :math:`v`) are kept per group and added in
group order, so results depend on the thread count only through that order (rounding), never on timing.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from .._autograd import refuse_double_backward
from .._compiled import (as_array, rows_backward, rows_forward, se_exponent_block, se_outer_reductions,
                         subtract_outer_block, zero_missing_block)
from .._elementwise import exp_
from ..ard_kernel import _centred
from .triangle import _fold_upper_onto_lower, _mirror_lower

__all__ = ["OuterPartsSums", "se_cross_additive_sum", "se_lower_additive_sum"]

#: Bytes of one row block of a cross-covariance's base matrices (D x rows x columns): blocks stay below
#: glibc's 32 MB mmap threshold (the forward pass keeps one, the backward pass two), so they are reused
#: from the heap instead of coming fresh from the OS at every call.
_CROSS_BLOCK_BYTES = 2**23
#: Fewest entries (D x rows x columns over all blocks) for which the walk runs on several threads: below,
#: starting threads costs more than it saves.
PARALLEL_MIN_ENTRIES = 2**22


def _block(xa, xb, r0, r1, cols, u, v, miss_a, miss_b, buf, scale):
    r"""Row block ``(D, r1 - r0, cols)`` of the constrained SE matrices between rows ``r0..r1`` of ``xa``
    and the first ``cols`` of ``xb`` (NumPy ``(D, n)``, ``(D, m)``) in ``buf``'s first entries (NumPy), with
    the rows and columns of missing cells zeroed (``miss_a``, ``miss_b``: NumPy ``(D, n)``, ``(D, m)``,
    ``(D, 0)`` for none); ``scale`` is :math:`-1/2\ell^2` as an array ``(D,)``, ``u``, ``v`` NumPy."""
    K = buf[: xa.shape[0] * (r1 - r0) * cols].reshape(xa.shape[0], r1 - r0, cols)
    se_exponent_block(xa, r0, xb, scale, K)
    exp_(torch.from_numpy(K))
    subtract_outer_block(K, r0, u, v[:, :cols])
    zero_missing_block(K, r0, miss_a, miss_b[:, :cols])
    return K


def _missing(miss, n_dims: int) -> np.ndarray:
    """Missing cells ``(D, n, 1)`` or None as the NumPy ``(D, n)`` (``(D, 0)`` for None) of :func:`_block`."""
    return np.zeros((n_dims, 0), dtype=np.bool_) if miss is None else miss.numpy().reshape(n_dims, -1)


def _groups(bounds, entries: int) -> list:
    """``bounds`` split into contiguous groups of (nearly) equal count, one per thread (module docstring);
    the blocks of one walk hold about the same number of entries."""
    workers = torch.get_num_threads()
    if workers < 2 or len(bounds) < 2 or entries < PARALLEL_MIN_ENTRIES:
        return [bounds]
    cuts = np.linspace(0, len(bounds), min(workers, len(bounds)) + 1).round().astype(int)
    return [bounds[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _each_group(groups, walk) -> list:
    """``[walk(group) for group in groups]``, the first on this thread and the others on threads of their
    own (started per call: nothing to hand over across a fork); the first exception is raised."""
    results, errors = [None] * len(groups), []

    def run(i):
        try:
            results[i] = walk(groups[i])
        except BaseException as exc:  # noqa: BLE001 (re-raised on the calling thread)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(1, len(groups))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


class _SEAdditiveSum(torch.autograd.Function):
    """See the module docstring. Inputs ``xa`` (D, n, 1) and ``xb`` (D, m, 1) with missing cells set to 0
    (``lower``: ``xb`` is ``xa``), ``miss_a``, ``miss_b`` their missing cells or None, ``l2`` (D, 1, 1),
    ``u`` (D, n), ``v`` (D, m); ``bounds`` the row blocks ``(r0, r1)`` of rows 0..n. ``lower``: the lower
    triangle of the symmetric k(X, X), block ``(r0, r1)`` covering columns ``0..r1``; otherwise every
    block covers all ``m`` columns."""

    @staticmethod
    def forward(ctx, order_variances, l2, u, v, xa, xb, miss_a, miss_b, bounds, lower):
        n_dims, n, m = xa.shape[0], xa.shape[-2], xb.shape[-2]
        out = xa.new_empty(n, m)
        widths = [r1 if lower else m for _, r1 in bounds]
        size = max(n_dims * (r1 - r0) * w for (r0, r1), w in zip(bounds, widths))
        variances, scale = as_array(order_variances, xa.dtype), as_array((-0.5 / l2).reshape(-1))
        a, b, ua, vb = _rows(xa), _rows(xb), as_array(u, xa.dtype), as_array(v, xa.dtype)
        ma, mb, sums = _missing(miss_a, n_dims), _missing(miss_b, n_dims), out.numpy()

        def walk(group):
            buf = np.empty(size, dtype=a.dtype)
            for r0, r1 in group:
                cols = r1 if lower else m
                rows_forward(_block(a, b, r0, r1, cols, ua, vb, ma, mb, buf, scale), r0, lower, variances, sums)

        entries = n_dims * sum((r1 - r0) * w for (r0, r1), w in zip(bounds, widths))
        _each_group(_groups(bounds, entries), walk)
        ctx.save_for_backward(order_variances, l2, u, v, xa, xb, miss_a, miss_b)
        ctx.bounds, ctx.lower, ctx.entries, ctx.size = bounds, lower, entries, size
        return _mirror_lower(out) if lower else out

    @staticmethod
    def backward(ctx, grad_out):
        refuse_double_backward("AdditiveKernel")
        order_variances, l2, u, v, xa, xb, miss_a, miss_b = ctx.saved_tensors
        lower, size = ctx.lower, ctx.size
        need_var, need_l2, need_u, need_v = ctx.needs_input_grad[:4]
        # lower: an entry left of the diagonal stands for its mirror too
        g = as_array(_fold_upper_onto_lower(grad_out) if lower else grad_out, xa.dtype)
        variances, scale = as_array(order_variances, xa.dtype), as_array((-0.5 / l2).reshape(-1))
        n_dims, m = xa.shape[0], xb.shape[-2]
        g_u = torch.zeros_like(u)  # blocks cover disjoint rows: one for all groups
        need_base = need_l2 or need_u or need_v
        a, b, ua, vb = _rows(xa), _rows(xb), as_array(u, xa.dtype), as_array(v, xa.dtype)
        ma, mb = _missing(miss_a, n_dims), _missing(miss_b, n_dims)
        if not lower:  # every block has all columns: one centre (the median of xb) for all
            a_all, b_all = _centred(xa, xb)

        def walk(group):
            """Sums over ``group``'s blocks: ∂L/∂σ², Σ W (a − b)² of _SEMinusOuter's ℓ² gradient, ∂L/∂v."""
            buf, gbuf = np.empty(size, dtype=a.dtype), np.empty(size, dtype=a.dtype)
            grad_var = np.zeros(variances.shape, dtype=np.float64)
            total, g_v = torch.zeros(n_dims, dtype=torch.float64), torch.zeros_like(v)
            for r0, r1 in group:
                cols = r1 if lower else m
                K = _block(a, b, r0, r1, cols, ua, vb, ma, mb, buf, scale)
                gK = gbuf[: K.size].reshape(K.shape)
                rows_backward(K, r0, lower, variances, g, need_base, gK, grad_var)
                if not need_base:
                    continue
                zero_missing_block(gK, r0, ma, mb[:, :cols])  # masked entries are constants: no gradient
                if lower:
                    a0, b0 = _centred(xa[:, r0:r1], xa[:, :r1])
                else:
                    a0, b0 = a_all[:, r0:r1], b_all
                Kt, gKt = torch.from_numpy(K), torch.from_numpy(gK)
                rows, col_sums, Wb, WTa, gu, gv = se_outer_reductions(Kt, gKt, a0, b0, u[:, r0:r1], v[:, :cols])
                # W = G ⊙ (K + u vᵀ)
                total += ((a0.square() * rows).sum((-1, -2)) - 2 * (a0 * Wb).sum((-1, -2))
                          + (b0.square() * col_sums).sum((-1, -2))).to(total)
                g_u[:, r0:r1] += gu
                g_v[:, :cols] += gv
            return grad_var, total, g_v

        parts = _each_group(_groups(ctx.bounds, ctx.entries), walk)
        grad_var, total, g_v = parts[0]
        for more_var, more_total, more_v in parts[1:]:  # in group order (module docstring)
            grad_var, total, g_v = grad_var + more_var, total + more_total, g_v + more_v
        g_l2 = (total.to(l2).reshape(l2.shape) / (2 * l2.square())) if need_l2 else None
        return (torch.from_numpy(grad_var).to(order_variances) if need_var else None, g_l2,
                g_u if need_u else None, g_v if need_v else None, None, None, None, None, None, None)


def _rows(x: torch.Tensor) -> np.ndarray:
    """``x`` (D, n, 1) as the NumPy array (D, n) the compiled exponent reads (a view)."""
    return x.numpy().reshape(x.shape[0], -1)


def se_lower_additive_sum(x, bounds, l2, u, v, miss, order_variances):
    r""":math:`\sum_r \sigma_r^2 e_r(K_1, \dots, K_D)` with :math:`K_i = E_i - u_i v_i^\top` on the rows of
    ``x``, walked over the lower triangle's row blocks ``bounds`` (module docstring).

    Parameters
    ----------
    x : torch.Tensor of shape (D, n, 1)
        Inputs, one feature per batch entry, missing cells set to any finite value; no gradient.
    bounds : sequence of (r0, r1)
        Consecutive row blocks covering rows 0..n; block ``(r0, r1)`` covers columns ``0..r1``.
    l2 : torch.Tensor of shape (D, 1, 1)
        Squared length-scales.
    u, v : torch.Tensor of shape (D, n)
    miss : torch.Tensor of shape (D, n, 1) or None
        Missing cells: their rows and columns of :math:`K_i` are zero.
    order_variances : torch.Tensor of shape (R + 1,)

    Returns
    -------
    torch.Tensor of shape (n, n)
    """
    if x.requires_grad:
        raise ValueError("se_lower_additive_sum takes inputs without a gradient.")
    x = x.detach().contiguous()
    return _SEAdditiveSum.apply(order_variances, l2, u, v, x, x, miss, miss,
                                tuple((int(r0), int(r1)) for r0, r1 in bounds), True)


def se_cross_additive_sum(x1, x2, l2, u1, v2, miss1, miss2, order_variances):
    r""":math:`\sum_r \sigma_r^2 e_r(K_1, \dots, K_D)` with :math:`K_i = E_i(X_1, X_2) - u_i v_i^\top`, the
    cross-covariance between the rows of ``x1`` and ``x2`` (module docstring), walked over row blocks of
    the longer of the two of at most :data:`_CROSS_BLOCK_BYTES` each.

    For a shorter ``x1`` the sum runs over ``k(x2, x1)`` and returns its transpose: :math:`E_i` is
    symmetric and :math:`u_{ia} v_{ib}` is the same product either way round, so the values are those
    of the direct walk.

    Parameters
    ----------
    x1, x2 : torch.Tensor of shape (D, n, 1) and (D, m, 1)
        Inputs, one feature per batch entry, missing cells set to any finite value; no gradient.
    l2 : torch.Tensor of shape (D, 1, 1)
        Squared length-scales.
    u1, v2 : torch.Tensor of shape (D, n) and (D, m)
    miss1, miss2 : torch.Tensor of shape (D, n, 1) and (D, m, 1), or None
        Missing cells: their rows (of ``x1``) and columns (of ``x2``) of :math:`K_i` are zero.
    order_variances : torch.Tensor of shape (R + 1,)

    Returns
    -------
    torch.Tensor of shape (n, m)
    """
    if x1.requires_grad or x2.requires_grad:
        raise ValueError("se_cross_additive_sum takes inputs without a gradient.")
    x1, x2 = x1.detach().contiguous(), x2.detach().contiguous()
    flip = x1.shape[-2] < x2.shape[-2]
    if flip:
        x1, x2, u1, v2, miss1, miss2 = x2, x1, v2, u1, miss2, miss1
    n, m = x1.shape[-2], x2.shape[-2]
    step = max(1, _CROSS_BLOCK_BYTES // (x1.shape[0] * max(m, 1) * x1.element_size()))
    bounds = tuple((r0, min(r0 + step, n)) for r0 in range(0, n, step))
    out = _SEAdditiveSum.apply(order_variances, l2, u1, v2, x1, x2, miss1, miss2, bounds, False)
    return out.transpose(-1, -2) if flip else out


class OuterPartsSums:
    r"""``lower_additive_sum`` and ``cross_additive_sum`` of :class:`~hdgp.kernels.additive_kernel.AdditiveKernel`'s
    memory-light paths, for a base kernel whose per-feature matrices are :math:`E_i - u_i v_i^\top`: a mixin
    reading the kernel's ``outer_parts(x)``, ``(x, miss, l2, u, v)`` (shapes as in :func:`se_lower_additive_sum`)
    or None where the walk does not apply (the caller then sums base blocks)."""

    def lower_additive_sum(self, x: torch.Tensor, bounds, order_variances: torch.Tensor):
        r""":math:`\sum_r \sigma_r^2 e_r(k_1, \dots, k_D)(X, X)` on the lower triangle's row blocks ``bounds``
        (:func:`se_lower_additive_sum`), or None.

        Parameters
        ----------
        x : torch.Tensor of shape (D, n, 1), without a gradient
        bounds : sequence of (r0, r1)
        order_variances : torch.Tensor of shape (R + 1,)
        """
        parts = self.outer_parts(x)
        if parts is None:
            return None
        x, miss, l2, u, v = parts
        return se_lower_additive_sum(x, bounds, l2, u, v, miss, order_variances)

    def cross_additive_sum(self, x1: torch.Tensor, x2: torch.Tensor, order_variances: torch.Tensor):
        r""":math:`\sum_r \sigma_r^2 e_r(k_1, \dots, k_D)(X_1, X_2)` in row blocks (:func:`se_cross_additive_sum`),
        or None.

        Parameters
        ----------
        x1, x2 : torch.Tensor of shape (D, n, 1) and (D, m, 1), without a gradient
        order_variances : torch.Tensor of shape (R + 1,)
        """
        parts1, parts2 = self.outer_parts(x1), self.outer_parts(x2)
        if parts1 is None or parts2 is None:
            return None
        (x1, miss1, l2, u1, _), (x2, miss2, _, _, v2) = parts1, parts2
        return se_cross_additive_sum(x1, x2, l2, u1, v2, miss1, miss2, order_variances)
