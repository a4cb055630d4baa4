"""Inverse multiquadric (IMQ) kernel with ARD length-scales."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

__all__ = ["IMQKernel"]


class IMQKernel(Kernel):
    r"""Inverse multiquadric kernel (rational quadratic with :math:`\alpha = 1/2`).

    .. math::

        k(x, x') = \left(1 + \lVert (x - x') / \ell \rVert^2\right)^{-1/2}

    with one length-scale :math:`\ell_i` per input dimension when
    ``ard_num_dims=d``. It is the limit of an average of RBF kernels on random
    Gaussian projections (Delbridge et al. 2020, Corollary 1) and the kernel of
    the paper's ``IMQ-ARD`` baseline. Like GPyTorch's ``RBFKernel`` it has no
    output scale: wrap it in ``gpytorch.kernels.ScaleKernel``.

    Examples
    --------
    >>> import torch
    >>> k = IMQKernel(ard_num_dims=2)
    >>> k(torch.zeros(3, 2, dtype=torch.float64)).to_dense().shape
    torch.Size([3, 3])
    """

    has_lengthscale = True

    def forward(self, x1, x2, diag: bool = False, **params) -> torch.Tensor:
        x1_ = x1.div(self.lengthscale)
        x2_ = x2.div(self.lengthscale)
        sq_dist = self.covar_dist(x1_, x2_, square_dist=True, diag=diag, **params)
        return sq_dist.add(1.0).rsqrt()
