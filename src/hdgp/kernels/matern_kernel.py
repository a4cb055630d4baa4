r"""Matérn kernels of one feature each, the rougher base kernels of an additive GP.

Duvenaud et al. (2011, Sec. 1.3) allow any one-dimensional base kernel in the
additive kernel; the chapter's experiments use the SE kernel
(:class:`~hdgp.kernels.SEKernel`). These are the unit-variance Matérn kernels of
Rasmussen & Williams (2006, eq. 4.17) with half-integer :math:`\nu`, in the
feature-stacked layout of :class:`~hdgp.kernels.se_kernel.FeatureKernel`, with
:math:`r = |x - x'| / \ell_i` from exact differences:

.. math::

    k_{1/2}(r) = e^{-r}, \qquad
    k_{3/2}(r) = (1 + \sqrt3\, r)\, e^{-\sqrt3\, r}, \qquad
    k_{5/2}(r) = \big(1 + \sqrt5\, r + \tfrac53 r^2\big)\, e^{-\sqrt5\, r}.
"""

from __future__ import annotations

import math

import torch

from ._constraints import log_positive
from .se_kernel import UnitStationaryFeatureKernel

__all__ = ["MaternFeatureKernel"]

#: Smoothness values with a closed form (half-integers).
NUS = (0.5, 1.5, 2.5)


class MaternFeatureKernel(UnitStationaryFeatureKernel):
    r"""Unit-variance Matérn kernels, one per feature: :math:`k_i(x, x') = k_\nu(|x - x'| / \ell_i)`.

    A base kernel for :class:`~hdgp.kernels.additive_kernel.AdditiveKernel` (module docstring
    for :math:`k_\nu`); :math:`\nu = 1/2` gives Ornstein–Uhlenbeck (continuous, nowhere
    differentiable) components, :math:`\nu = 5/2` twice-differentiable ones.

    Parameters
    ----------
    num_dims : int
        Number of features :math:`D`.
    nu : {0.5, 1.5, 2.5}, default=2.5
        Smoothness :math:`\nu`.

    Examples
    --------
    >>> import torch
    >>> from hdgp.kernels import MaternFeatureKernel
    >>> from hdgp.kernels.additive_kernel import AdditiveKernel
    >>> k = AdditiveKernel(MaternFeatureKernel(3, nu=1.5), num_dims=3, max_order=2)
    >>> k(torch.randn(4, 3, dtype=torch.float64)).to_dense().shape
    torch.Size([4, 4])
    """

    has_lengthscale = True

    def __init__(self, num_dims: int, nu: float = 2.5, **kwargs):
        if nu not in NUS:
            raise ValueError(f"nu must be one of {NUS} (closed-form Matérn kernels), got {nu!r}.")
        kwargs.setdefault("lengthscale_constraint", log_positive())
        super().__init__(num_dims, **kwargs)
        self.nu = float(nu)

    def _matrix(self, x1, x2):
        # (..., D, n, m); the derivative of |d| at d = 0 is taken as 0, the kernel's (one-sided) slope average
        r = (x1 - x2.transpose(-1, -2)).abs() / self.lengthscale
        if self.nu == 0.5:
            return torch.exp(-r)
        s = math.sqrt(2 * self.nu) * r
        poly = 1 + s if self.nu == 1.5 else 1 + s + s.square() / 3
        return poly * torch.exp(-s)
