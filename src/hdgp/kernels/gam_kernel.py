r"""First-order additive RBF kernel (the papers' ``GAM`` baseline) in O(n²) memory.

On the CPU, k(X, X) and cross-covariances are OAK's compiled walk of SE sums
(:mod:`hdgp.kernels.functions.se_additive_sum`) with no constraint term and only the first order,
:math:`e_1(k_1, \dots, k_d) = \sum_i k_i`: cache-sized row blocks, compiled loops, threads where torch has
them. Elsewhere (or with inputs that need a gradient) :class:`_AdditiveRBF` loops over the features.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from ._compiled import use_compiled
from .functions.additive_sum import _CHUNK
from .functions.se_additive_sum import se_cross_additive_sum, se_lower_additive_sum
from .functions.triangle import _row_blocks

__all__ = ["AdditiveRBFKernel"]

#: Bytes of one row block's SE matrices (d x rows x columns) in the compiled walk: they stay cached between
#: the block's passes (as OAK's, :meth:`hdgp.kernels.additive_kernel.AdditiveKernel._light_blocks`).
_BLOCK_BYTES = 2**23


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
        if self._compiled(x1, x2):
            return self._compiled_sum(x1, x2)
        return _AdditiveRBF.apply(x1, x2, self.lengthscale)

    def _compiled(self, x1: torch.Tensor, x2: torch.Tensor) -> bool:
        """Whether :meth:`_compiled_sum` takes ``k(x1, x2)``: CPU matrices of one dtype without gradients of
        their own, one length-scale per feature and no batch."""
        return (x1.dim() == 2 and x2.dim() == 2 and use_compiled(x1) and x2.dtype == x1.dtype
                and not (x1.requires_grad or x2.requires_grad) and self.lengthscale.shape == (1, x1.shape[-1]))

    def _compiled_sum(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        r""":math:`\sum_i \exp(-(x_i - x'_i)^2 / 2\ell_i^2)` as the first elementary symmetric polynomial of the
        SE matrices (order variances (0, 1), no constraint term :math:`u v^\top`), on the lower triangle's
        row blocks for k(X, X) (GPyTorch passes X twice) and as a cross-covariance otherwise."""
        d = x1.shape[-1]
        l2 = self.lengthscale.reshape(d, 1, 1).square()
        variances = torch.tensor([0.0, 1.0], dtype=x1.dtype)
        stacked = [x.transpose(-1, -2).unsqueeze(-1).contiguous() for x in (x1, x2)]  # (d, n, 1)
        if x1 is x2:
            zeros = x1.new_zeros(d, x1.shape[0])
            bounds = _row_blocks(0, x1.shape[0], max(_CHUNK, _BLOCK_BYTES // (d * x1.element_size())))
            return se_lower_additive_sum(stacked[0], bounds, l2, zeros, zeros, None, variances)
        return se_cross_additive_sum(stacked[0], stacked[1], l2, x1.new_zeros(d, x1.shape[0]),
                                     x2.new_zeros(d, x2.shape[0]), None, None, variances)
