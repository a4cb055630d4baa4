r"""The additive sum of constrained SE matrices over the lower triangle of :math:`k(X, X)`, in one
autograd function that keeps no base matrix between its passes.

With per-feature matrices :math:`K_i = E_i - u_i v_i^\top`, :math:`E_i = e^{-(x_{ia} - x_{ib})^2/2\ell_i^2}`
(:class:`~hdgp.kernels.se_kernel._SEMinusOuter`), the value is
:math:`\sum_{r=0}^{R} \sigma_r^2 e_r(K_1, \dots, K_D)` (:class:`._SymmetricAdditiveSum`). Chained,
those two functions hold every row block's :math:`D` base matrices from the forward pass to the
backward pass (:math:`D n^2/2` values, fresh memory at every evaluation) and hand the backward pass a
second stack of that size, :math:`\partial L/\partial K_i`. Here each row block's matrices live in one
reused buffer: the forward pass sums them and moves on; the backward pass forms them again (one
exponential per entry and feature), runs the order sum's reverse sweep into a second reused buffer and
reduces it at once to the gradients of :math:`\ell_i^2`, :math:`u_i` and :math:`v_i` (the formulas of
:class:`~hdgp.kernels.se_kernel._SEMinusOuter`). Values and gradients are those of the chained functions.
"""

from __future__ import annotations

import numpy as np
import torch

from .._autograd import refuse_double_backward
from .._compiled import as_array, rows_backward, rows_forward, se_exponent_rows
from .._elementwise import exp_
from ..ard_kernel import _centred
from ..se_kernel import _compiled_reductions
from .triangle import _fold_upper_onto_lower, _mirror_lower

__all__ = ["se_lower_additive_sum"]


def _block(x, r0, r1, l2, u, v, miss, buf, scale):
    r"""Row block ``(D, r1 - r0, r1)`` of the constrained SE matrices in ``buf``'s first entries, with
    the rows and columns of missing cells zeroed; ``scale`` is :math:`-1/2\ell^2` as an array ``(D,)``."""
    n_dims = x.shape[0]
    K = buf[: n_dims * (r1 - r0) * r1].view(n_dims, r1 - r0, r1)
    se_exponent_rows(x.numpy().reshape(n_dims, -1), r0, scale, K.numpy())
    exp_(K)
    K.addcmul_(u[:, r0:r1].unsqueeze(-1), v[:, :r1].unsqueeze(-2), value=-1.0)
    if miss is not None:
        _zero_rows_cols(K, miss, r0, r1)
    return K


def _zero_rows_cols(K, miss, r0, r1):
    K.masked_fill_(miss[:, r0:r1], 0.0)
    K.masked_fill_(miss[:, :r1].transpose(-1, -2), 0.0)


class _SELowerAdditiveSum(torch.autograd.Function):
    """See the module docstring. Inputs ``x`` (D, n, 1) with missing cells set to 0, ``miss`` (D, n, 1)
    or None, ``l2`` (D, 1, 1), ``u``, ``v`` (D, n); ``bounds`` the row blocks ``(r0, r1)`` of rows 0..n."""

    @staticmethod
    def forward(ctx, order_variances, l2, u, v, x, miss, bounds):
        n = x.shape[-2]
        out = x.new_empty(n, n)
        size = max(x.shape[0] * (r1 - r0) * r1 for r0, r1 in bounds)
        buf = x.new_empty(size)
        variances, scale = as_array(order_variances, x.dtype), as_array((-0.5 / l2).reshape(-1))
        for r0, r1 in bounds:
            rows_forward(as_array(_block(x, r0, r1, l2, u, v, miss, buf, scale)), r0, True, variances, out.numpy())
        ctx.save_for_backward(order_variances, l2, u, v, x, miss)
        ctx.bounds = bounds
        return _mirror_lower(out)

    @staticmethod
    def backward(ctx, grad_out):
        refuse_double_backward("AdditiveKernel")
        order_variances, l2, u, v, x, miss = ctx.saved_tensors
        need_var, need_l2, need_u, need_v = ctx.needs_input_grad[:4]
        mirrored = as_array(_fold_upper_onto_lower(grad_out))  # an entry left of the diagonal stands for its mirror too
        variances, scale = as_array(order_variances, x.dtype), as_array((-0.5 / l2).reshape(-1))
        grad_var = np.zeros(variances.shape, dtype=np.float64)
        n_dims = x.shape[0]
        size = max(n_dims * (r1 - r0) * r1 for r0, r1 in ctx.bounds)
        buf, gbuf = x.new_empty(size), x.new_empty(size)
        total = torch.zeros(n_dims, dtype=torch.float64)
        g_u, g_v = torch.zeros_like(u), torch.zeros_like(v)
        need_base = need_l2 or need_u or need_v
        for r0, r1 in ctx.bounds:
            K = _block(x, r0, r1, l2, u, v, miss, buf, scale)
            gK = gbuf[: K.numel()].view(K.shape)
            rows_backward(as_array(K), r0, True, variances, mirrored, need_base, gK.numpy(), grad_var)
            if not need_base:
                continue
            if miss is not None:  # masked entries are constants: no gradient reaches their parameters
                _zero_rows_cols(gK, miss, r0, r1)
            a0, b0 = _centred(x[:, r0:r1], x[:, :r1])
            ub, vb = u[:, r0:r1], v[:, :r1]
            rows, cols, Wb, WTa, gu, gv = _compiled_reductions(K, gK, a0, b0, ub, vb)
            # Σ W (a − b)² of _SEMinusOuter's ℓ² gradient, W = G ⊙ (K + u vᵀ)
            total += ((a0.square() * rows).sum((-1, -2)) - 2 * (a0 * Wb).sum((-1, -2))
                      + (b0.square() * cols).sum((-1, -2))).to(total)
            g_u[:, r0:r1] += gu
            g_v[:, :r1] += gv
        g_l2 = (total.to(l2).reshape(l2.shape) / (2 * l2.square())) if need_l2 else None
        return (torch.from_numpy(grad_var).to(order_variances) if need_var else None, g_l2,
                g_u if need_u else None, g_v if need_v else None, None, None, None)


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
    return _SELowerAdditiveSum.apply(order_variances, l2, u, v, x.detach().contiguous(), miss,
                                     tuple((int(r0), int(r1)) for r0, r1 in bounds))
