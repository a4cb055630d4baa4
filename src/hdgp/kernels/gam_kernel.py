"""First-order additive RBF kernel (the papers' ``GAM`` baseline) in O(n²) memory."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

__all__ = ["AdditiveRBFKernel"]


class _AdditiveRBF(torch.autograd.Function):
    r"""Σ_i exp(-(x_i - x'_i)² / 2ℓ_i²) with a backward pass that recomputes.

    Plain autograd would keep one n×m matrix per input dimension alive until the
    backward pass (O(d·n·m) memory); this function keeps only the inputs and
    rebuilds each 1-D kernel matrix inside ``backward``, so peak memory is a few
    n×m buffers whatever d is. Inputs ``(..., n, d)``, ``(..., m, d)`` and length-scales
    ``(*batch_shape, 1, d)`` broadcast against each other; each gradient is summed back
    to its argument's shape.
    """

    @staticmethod
    def forward(ctx, x1, x2, lengthscale):
        ctx.save_for_backward(x1, x2, lengthscale)
        out = None
        for i in range(x1.shape[-1]):
            k_i = _rbf_1d(x1[..., i], x2[..., i], lengthscale[..., i, None])[0]
            out = k_i if out is None else out.add_(k_i)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x1, x2, lengthscale = ctx.saved_tensors  # (differentiable ops only: second derivatives work)
        need_x1, need_x2, need_ls = ctx.needs_input_grad
        g_x1 = torch.zeros_like(x1) if need_x1 else None
        g_x2 = torch.zeros_like(x2) if need_x2 else None
        g_ls = torch.zeros_like(lengthscale) if need_ls else None
        for i in range(x1.shape[-1]):
            ls = lengthscale[..., i, None]  # (*batch, 1, 1)
            k_i, diff = _rbf_1d(x1[..., i], x2[..., i], ls)
            gk = grad_out * k_i  # dL/dK ⊙ K_i
            if need_ls:
                # ∂k_i/∂ℓ_i = k_i · (x_i - x'_i)² / ℓ_i³
                g = (gk * diff.square()).sum((-1, -2), keepdim=True) / ls**3
                g_ls[..., i] = g.sum_to_size(ls.shape)[..., 0]
            if need_x1 or need_x2:
                # ∂k_i/∂x_i = -k_i · (x_i - x'_i) / ℓ_i²
                gkd = gk * diff / ls**2
                if need_x1:
                    g_x1[..., i] = (-gkd.sum(-1)).sum_to_size(x1.shape[:-1])
                if need_x2:
                    g_x2[..., i] = gkd.sum(-2).sum_to_size(x2.shape[:-1])
        return g_x1, g_x2, g_ls


def _rbf_1d(a: torch.Tensor, b: torch.Tensor, ls: torch.Tensor):
    """1-D RBF matrix of ``a`` (..., n) and ``b`` (..., m) for length-scales ``ls`` (..., 1, 1)."""
    diff = a.unsqueeze(-1) - b.unsqueeze(-2)
    return torch.exp(-0.5 * (diff / ls).square()), diff


class AdditiveRBFKernel(Kernel):
    r"""First-order additive kernel: a sum of one-dimensional RBF kernels.

    .. math::

        k(x, x') = \sum_{i=1}^{d} \exp\!\left(-\frac{(x_i - x'_i)^2}{2\ell_i^2}\right)

    This is the GP-GAM of Duvenaud et al. (2011, eq. 1.2) and
    the ``GAM`` baseline of Delbridge et al. (2020). Evaluation and gradient use
    O(n·m) memory regardless of d (GPyTorch's ``AdditiveStructureKernel`` builds
    a d×n×m tensor). It has no output scale: wrap it in ``ScaleKernel``.

    Parameters
    ----------
    ard_num_dims : int
        Number of input dimensions d (one length-scale :math:`\ell_i` each).
    """

    has_lengthscale = True

    def __init__(self, ard_num_dims: int, **kwargs):
        super().__init__(ard_num_dims=ard_num_dims, **kwargs)

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError("AdditiveRBFKernel does not support last_dim_is_batch.")
        if diag:
            return x1.new_full(x1.shape[:-1], float(x1.shape[-1]))
        return _AdditiveRBF.apply(x1, x2, self.lengthscale)
