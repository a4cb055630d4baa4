"""Squared-exponential kernels of one feature each, from exact differences.

The layout of :class:`~hdgp.kernels.additive_kernel.AdditiveKernel`'s base kernels:
inputs ``(..., D, n, 1)`` with one feature per batch entry, output ``(..., D, n, m)``.
GPyTorch's ``RBFKernel`` forms distances by the expansion a² + b² − 2ab around the
mean of its first argument, so one far-out row in a batch of test points (1e9 in a
column) cancels every other row's digits; in one dimension the difference a − b is
exact and no more expensive.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from ._constraints import log_positive
from ._compiled import se_outer_reductions, use_compiled
from ._elementwise import exp_
from ._own_batch_shape import broadcast_batch
from .ard_kernel import _centred
from .functions.se_additive_sum import OuterPartsSums

__all__ = ["FeatureKernel", "SEKernel", "UnitStationaryFeatureKernel", "se_minus_outer"]


class _SEMinusOuter(torch.autograd.Function):
    r""":math:`K = e^{-(a_i - b_j)^2 / 2\ell^2} - u_i v_j` per feature, with a hand-written backward.

    ``u = v = None`` drops the outer term (the plain SE kernel).

    Autograd through the plain expression allocates six :math:`D \times n \times m`
    tensors forward and keeps three for the backward pass; the constrained kernel is
    the dominant cost of OAK fits (e.g. :math:`K_{uf}` of sparse OAK, :math:`m = 500`,
    :math:`n = 36000`, :math:`D = 8`). Here the forward pass fills one buffer in place
    and the backward pass rebuilds :math:`E = K + uv^\top` in one more. With
    :math:`W = G \odot E` (:math:`G = \partial\mathcal L/\partial K`):

    .. math::

        \frac{\partial\mathcal L}{\partial \ell^2} = \frac{\sum_{ij} W_{ij}(a_i - b_j)^2}{2\ell^4}, \quad
        \frac{\partial\mathcal L}{\partial a_i} = -\frac{a_i (W\mathbf 1)_i - (Wb)_i}{\ell^2}, \quad
        \frac{\partial\mathcal L}{\partial b_j} = \frac{(W^\top a)_j - b_j (W^\top\mathbf 1)_j}{\ell^2},

    .. math::

        \frac{\partial\mathcal L}{\partial u} = -G v, \qquad \frac{\partial\mathcal L}{\partial v} = -G^\top u,

    where :math:`\sum_{ij} W_{ij}(a_i-b_j)^2 = \sum_i a_i^2 (W\mathbf 1)_i - 2a^\top W b +
    \sum_j b_j^2 (W^\top\mathbf 1)_j` is evaluated on inputs shifted by the median of
    :math:`b` (the kernel depends only on differences; the shift keeps this sum free of
    cancellation for inputs far from the origin).
    """

    @staticmethod
    def forward(ctx, a, b, l2, u, v):
        # a (..., D, n, 1), b (..., D, m, 1), l2 (D, 1, 1), u (..., D, n), v (..., D, m)
        K = a - b.transpose(-1, -2)
        exp_(K.square_().mul_(-0.5 / l2))
        if u is not None:
            K.addcmul_(u.unsqueeze(-1), v.unsqueeze(-2), value=-1.0)  # in place: no (D, n, m) temporary
        ctx.save_for_backward(a, b, l2, u, v, K)
        return K

    @staticmethod
    def backward(ctx, G):
        a, b, l2, u, v, K = ctx.saved_tensors
        need_a, need_b, need_l2, need_u, need_v = ctx.needs_input_grad
        a0, b0 = _centred(a, b)  # (..., D, n, 1), (..., D, m, 1)
        if use_compiled(K):  # the reductions below in one pass over K and G
            rows, cols, Wb, WTa, g_u, g_v = se_outer_reductions(K, G, a0, b0, u, v)
        else:
            g_u = -(G @ v.unsqueeze(-1)).squeeze(-1) if need_u else None
            g_v = -(G.transpose(-1, -2) @ u.unsqueeze(-1)).squeeze(-1) if need_v else None
            if need_a or need_b or need_l2:
                W = (K * G) if u is None else torch.addcmul(K, u.unsqueeze(-1), v.unsqueeze(-2)).mul_(G)  # G ⊙ E
                rows, cols = W.sum(-1, keepdim=True), W.sum(-2).unsqueeze(-1)
                Wb, WTa = W @ b0, W.transpose(-1, -2) @ a0
        g_a = g_b = g_l2 = None
        if need_a or need_b or need_l2:
            if need_l2:
                total = (a0.square() * rows).sum((-1, -2)) - 2 * (a0 * Wb).sum((-1, -2)) \
                    + (b0.square() * cols).sum((-1, -2))
                g_l2 = total[..., None, None].sum_to_size(l2.shape) / (2 * l2.square())
            if need_a:
                g_a = (Wb - a0 * rows) / l2
            if need_b:
                g_b = (WTa - b0 * cols) / l2
        return g_a, g_b, g_l2, (g_u if need_u else None), (g_v if need_v else None)


def se_minus_outer(a, b, l2, u=None, v=None):
    """SE matrix ``exp(-(a - bᵀ)² / 2 l2)``, minus ``u vᵀ`` when given (see :class:`_SEMinusOuter`)."""
    batch = broadcast_batch(a.shape[:-2], b.shape[:-2])
    a, b = a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])
    if u is not None:
        u, v = u.expand(*batch, u.shape[-1]), v.expand(*batch, v.shape[-1])
    return _SEMinusOuter.apply(a, b, l2, u, v)


class FeatureKernel(Kernel):
    """Base of kernels that hold one 1-D kernel per feature along their last batch dimension.

    They take the feature-stacked layout (module docstring): inputs ``(..., D, n, 1)``.
    The feature dimension holds the terms of one additive kernel, not independent
    kernels, so ``batch_shape`` (what GPyTorch broadcasts over every kernel inside a
    ``ScaleKernel`` or a sum) leaves it out: ``ScaleKernel(AdditiveKernel(SEKernel(D), D))``
    has one output scale and returns ``(n, m)``. (A GPyTorch ``RBFKernel(batch_shape=(D,))``
    base cannot say so, and makes such compositions a batch of ``D`` kernels.)

    Parameters
    ----------
    num_features : int
        :math:`D`.
    """

    def __init__(self, num_features: int, **kwargs):
        # GPyTorch's constructor shapes the parameters by batch_shape: the full (D,) until it is done
        self._feature_dim_hidden = False
        super().__init__(batch_shape=torch.Size([num_features]), **kwargs)
        self._feature_dim_hidden = True

    @property
    def batch_shape(self) -> torch.Size:
        return self._batch_shape[:-1] if self.__dict__.get("_feature_dim_hidden", True) else self._batch_shape

    @batch_shape.setter
    def batch_shape(self, value: torch.Size) -> None:
        self._batch_shape = torch.Size(value) + self._batch_shape[-1:]

    @property
    def num_features(self) -> int:
        """Number of features :math:`D` (the size of the feature dimension)."""
        return self._batch_shape[-1]

    def _check_layout(self, x: torch.Tensor) -> None:
        if x.dim() < 3 or x.shape[-1] != 1 or x.shape[-3] != self.num_features:
            raise ValueError(
                f"{type(self).__name__} holds one 1-D kernel for each of {self.num_features} features and takes "
                f"inputs of shape (..., {self.num_features}, n, 1), one feature per batch entry (as "
                f"AdditiveKernel passes them); got {tuple(x.shape)}. For (n, d) inputs wrap it: "
                f"AdditiveKernel({type(self).__name__}(...), num_dims=d)."
            )


class UnitStationaryFeatureKernel(FeatureKernel):
    """Base of unit-variance stationary kernels per feature: :math:`k_i(x, x) = 1`, so the diagonal is ones;
    subclasses give the matrix of one pair of feature-stacked inputs in ``_matrix``."""

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        self._check_layout(x1)
        if diag:
            return torch.ones(x1.shape[:-1], dtype=x1.dtype, device=x1.device)
        self._check_layout(x2)
        return self._matrix(x1, x2)

    def _matrix(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class SEKernel(OuterPartsSums, UnitStationaryFeatureKernel):
    r"""Unit-variance squared-exponential kernels, one per feature: :math:`k_i(x, x') = e^{-(x-x')^2/2\ell_i^2}`.

    The default base kernel of :class:`~hdgp.estimators.additive.AdditiveGPRegressor`
    (the order variances carry the scale). Equal to GPyTorch's
    ``RBFKernel(batch_shape=(D,))`` in that layout, but computed from exact differences
    with a hand-written backward pass (module docstring).

    Parameters
    ----------
    num_dims : int
        Number of features :math:`D` (the batch size of the kernel).
    """

    has_lengthscale = True

    def __init__(self, num_dims: int, **kwargs):
        kwargs.setdefault("lengthscale_constraint", log_positive())
        super().__init__(num_dims, **kwargs)

    def _matrix(self, x1, x2):
        return se_minus_outer(x1, x2, self.lengthscale**2)

    def outer_parts(self, x: torch.Tensor):
        r"""``(x, None, l2, 0, 0)``: the SE matrices as the constrained ones of
        :meth:`~hdgp.kernels.orthogonal_kernel.ConstrainedSEKernel.outer_parts` with no constraint term
        (:math:`u = v = 0`), so that :class:`~hdgp.kernels.additive_kernel.AdditiveKernel` sums them by the same
        compiled walk; None for a batch of length-scales (the walk takes one per feature)."""
        self._check_layout(x)
        l2 = self.lengthscale**2
        if x.dim() != 3 or l2.shape != (self.num_features, 1, 1):
            return None
        zeros = x.new_zeros(x.shape[0], x.shape[1])
        return x, None, l2, zeros, zeros
