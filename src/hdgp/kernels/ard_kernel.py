r"""Fused, scaled ARD stationary kernels (RBF, IMQ) with a hand-written backward pass.

GPyTorch's ``ScaleKernel(RBFKernel(ard_num_dims=d))`` builds its distance matrix
through several n×n temporaries (abs, pow, where, clamp), multiplies by the
output scale in a separate pass, and autograd keeps every temporary for the
backward pass, so on small data the kernel, not the Cholesky factorisation it
feeds, dominates training (timings: benchmarks/README.md, "Numbers behind choices
in src/"). Here the kernel matrix is
built in place from one matrix product, and every gradient reduces to one n×m
element-wise pass plus matrix products:

.. math::

    D_{ab} = \sum_i \frac{(x_{ai} - x'_{bi})^2}{\ell_i^2},\quad k = \sigma^2\varphi(D),\quad
    H = G \odot \sigma^2\varphi'(D),

    \frac{\partial L}{\partial \ell_i} = -\frac{2}{\ell_i^3}\Big[(H\mathbf 1)^\top x_{:i}^2
      + (H^\top\mathbf 1)^\top x'^2_{:i} - 2\,x_{:i}^\top (H x')_{:i}\Big],\quad
    \frac{\partial L}{\partial \sigma^2} = \frac{\langle G, K\rangle}{\sigma^2}

where :math:`G = \partial L / \partial K`. No n×m×d tensor is ever formed.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from ._constraints import log_positive
from ._elementwise import exp_

__all__ = ["RBFARDKernel", "IMQKernel"]


def _scaled_sq_dist(z1: torch.Tensor, z2: torch.Tensor, same: bool = False) -> torch.Tensor:
    """‖z1_a − z2_b‖² for all pairs via one matrix product (in place, clamped at 0).

    Pass inputs centred on a common point (see :meth:`_ScaledARDKernel.forward`): the
    expansion ‖a‖² + ‖b‖² − 2a·b loses every digit when ‖a‖ ≫ ‖a − b‖. ``same``: z1
    and z2 are the same points, so the diagonal is set to exactly 0.
    """
    D = z1 @ z2.transpose(-1, -2)
    D.mul_(-2.0).add_(z1.square().sum(-1, keepdim=True)).add_(z2.square().sum(-1).unsqueeze(-2))
    if same:
        D.diagonal(dim1=-2, dim2=-1).fill_(0.0)
    return D.clamp_min_(0.0)


def _centred(x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both inputs shifted by the coordinate-wise median of ``x2`` (distances do not change).

    The expansion in :func:`_scaled_sq_dist` is exact only near the centre: far-out
    points (a new value of a column that was constant in training) need a centre near
    them, and one extreme row in a batch must not drag the centre away from the
    others, which a mean would (1e9 in one of six rows cost the other five their
    digits). The median of ``x2`` (the training inputs when predicting) does both.
    """
    shift = x2.detach().median(-2, keepdim=True).values
    return x1 - shift, x2 - shift


class _FusedScaledARD(torch.autograd.Function):
    """K = σ² φ(D(x1/ℓ, x2/ℓ)) with φ given by ``profile`` (see module docstring)."""

    @staticmethod
    def forward(ctx, x1, x2, lengthscale, outputscale, profile, same=False):
        K = profile.value_(_scaled_sq_dist(x1 / lengthscale, x2 / lengthscale, same)).mul_(outputscale)
        ctx.profile = profile
        ctx.save_for_backward(x1, x2, lengthscale, outputscale, K)
        return K

    @staticmethod
    def backward(ctx, grad_out):
        x1, x2, ls, scale, K = ctx.saved_tensors
        need_x1, need_x2, need_ls, need_scale = ctx.needs_input_grad[:4]
        g_scale = (grad_out * K).sum().reshape(scale.shape) / scale if need_scale else None
        H = ctx.profile.grad_times_derivative(grad_out, K, scale)  # G ⊙ σ²φ'(D)
        row, col = H.sum(-1), H.sum(-2)  # H1, Hᵀ1
        inv_ls2 = ls.reciprocal().square()
        Hx2 = H @ x2
        g_x1 = g_x2 = g_ls = None
        if need_ls:
            # Σ_ab H_ab (x1_ai − x2_bi)², reduced over any batch dimensions
            quad = (row.unsqueeze(-1) * x1.square()).sum(-2) + (col.unsqueeze(-1) * x2.square()).sum(-2) \
                - 2.0 * (x1 * Hx2).sum(-2)
            while quad.dim() > 1:
                quad = quad.sum(0)
            g_ls = -2.0 * quad * inv_ls2 / ls
            g_ls = g_ls.sum().reshape(ls.shape) if ls.numel() == 1 else g_ls.reshape(ls.shape)
        if need_x1:
            g_x1 = 2.0 * inv_ls2 * (row.unsqueeze(-1) * x1 - Hx2)
        if need_x2:
            g_x2 = 2.0 * inv_ls2 * (col.unsqueeze(-1) * x2 - H.transpose(-1, -2) @ x1)
        return g_x1, g_x2, g_ls, g_scale, None, None


class _RBFProfile:
    """φ(D) = exp(−D/2); σ²φ'(D) = −K/2."""

    @staticmethod
    def value_(D):
        return exp_(D.mul_(-0.5))

    @staticmethod
    def grad_times_derivative(G, K, scale):
        return G * K * -0.5


class _IMQProfile:
    """φ(D) = (1 + D)^(−1/2); σ²φ'(D) = −σ²φ³/2 = −K³/(2σ⁴)."""

    @staticmethod
    def value_(D):
        return D.add_(1.0).rsqrt_()

    @staticmethod
    def grad_times_derivative(G, K, scale):
        return G * K.pow(3) * (-0.5 / scale.square())


class _ScaledARDKernel(Kernel):
    has_lengthscale = True
    _profile = None

    def __init__(self, ard_num_dims: int | None = None, *, outputscale_constraint=None, **kwargs):
        super().__init__(ard_num_dims=ard_num_dims, **kwargs)
        self.register_parameter("raw_outputscale", torch.nn.Parameter(torch.zeros(self.batch_shape)))
        self.register_constraint("raw_outputscale", outputscale_constraint or log_positive())

    @property
    def outputscale(self) -> torch.Tensor:
        """Signal variance σ²."""
        return self.raw_outputscale_constraint.transform(self.raw_outputscale)

    @outputscale.setter
    def outputscale(self, value) -> None:
        value = torch.as_tensor(value, dtype=self.raw_outputscale.dtype, device=self.raw_outputscale.device)
        self.initialize(raw_outputscale=self.raw_outputscale_constraint.inverse_transform(value))

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        scale = self.outputscale
        if diag:
            return scale.unsqueeze(-1).expand(*scale.shape, x1.shape[-2]) * self._profile.value_(
                torch.zeros(x1.shape[:-1], dtype=x1.dtype, device=x1.device))
        ls = self.lengthscale
        same = x1 is x2 or (x1.shape == x2.shape and torch.equal(x1, x2))
        x1, x2 = _centred(x1, x2)
        if ls.dim() > 2:  # batched hyperparameters: plain autograd path
            K = self._profile.value_(_scaled_sq_dist(x1 / ls, x2 / ls, same))
            return K * scale[..., None, None]
        return _FusedScaledARD.apply(x1, x2, ls.reshape(-1), scale.reshape(()), self._profile, same)


class RBFARDKernel(_ScaledARDKernel):
    r"""Scaled squared-exponential kernel with ARD length-scales and a fused backward pass.

    .. math:: k(x, x') = \sigma^2 \exp\!\left(-\tfrac12 \sum_i (x_i - x'_i)^2/\ell_i^2\right)

    Equal to ``ScaleKernel(RBFKernel(ard_num_dims=d))`` but several times cheaper
    to differentiate (module docstring). It carries its own ``outputscale``
    :math:`\sigma^2` (log-scale raw parameter): do not wrap it in ``ScaleKernel``.
    """

    _profile = _RBFProfile


class IMQKernel(_ScaledARDKernel):
    r"""Scaled inverse multiquadric kernel with ARD length-scales and a fused backward pass.

    .. math:: k(x, x') = \sigma^2\left(1 + \sum_i (x_i - x'_i)^2/\ell_i^2\right)^{-1/2}

    The rational quadratic kernel with :math:`\alpha = 1/2`; the limit of averaged
    RBF kernels on Gaussian random projections (Delbridge et al. 2020, Cor. 1).
    Carries its own ``outputscale`` :math:`\sigma^2`: do not wrap it in ``ScaleKernel``.
    """

    _profile = _IMQProfile
