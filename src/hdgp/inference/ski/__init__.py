"""Additive structured kernel interpolation (SKI) for 1-D projected-additive kernels.

Each 1-D projection :math:`z_j = \\eta_j^\\top A x` gets its own regular grid
:math:`U_j` of :math:`m` points, local cubic (Keys) interpolation weights
:math:`W_j` (4 non-zeros per row) and a Toeplitz grid covariance
:math:`T_j = k(U_j, U_j)`:

.. math::

    K \\approx K^{\\mathrm{SKI}} = s \\sum_{j=1}^{J} \\alpha_j W_j T_j W_j^\\top

(Wilson & Nickisch 2015; Delbridge, Bindel & Wilson 2020, Sec. 2.2 and 4.4).
A matrix-vector product costs :math:`O(J(n + m \\log m))` (sparse interpolation
plus an FFT circulant embedding of every :math:`T_j`). Solves use linear
conjugate gradients and the log-determinant stochastic Lanczos quadrature,
both from ``linear_operator`` (its ``inv_quad_logdet``); predictive variances use
a Lanczos factorisation cached on the grids (LOVE, Pleiss et al. 2018), so a
test point costs :math:`O(J k)` for a rank-:math:`k` cache.

The grids follow the projected training data: :math:`h_j = \\max(\\mathrm{range}_j, 1)/(m-5)`
with two spare points at each end, and depend differentiably on the
hyperparameters. At prediction time a grid is extended (same spacing) to cover
test projections up to :data:`posterior._CUTOFF` unit length-scales beyond it; farther
out the RBF sub-kernel is below :math:`e^{-40}` and the test point's
cross-covariance through that projection is exactly zero.

One job per module:

- :mod:`.interpolation`: cubic interpolation weights :math:`W_j` and their products;
- :mod:`.toeplitz`: the grid covariances :math:`T_j` (FFT products, eigendecomposition);
- :mod:`.operator`: :math:`K^{\\mathrm{SKI}}` as a linear operator and as a dense matrix;
- :mod:`.preconditioner`: the Nyström–Woodbury preconditioner of conjugate gradients;
- :mod:`.solver`: conjugate gradients and the ``linear_operator`` settings;
- :mod:`.model`: :class:`SKIProjectedGPModel`, its marginal likelihood and conditioning;
- :mod:`.posterior`: :class:`SKIPosterior`, prediction from the grid caches.
"""

from .interpolation import cubic_interpolation
from .model import SKIProjectedGPModel
from .operator import ProjectedSKIOperator
from .posterior import SKIPosterior
from .toeplitz import symmetric_toeplitz_eigh

__all__ = ["ProjectedSKIOperator", "SKIProjectedGPModel", "SKIPosterior", "cubic_interpolation",
           "symmetric_toeplitz_eigh"]
