r"""RBF kernel and its pivoted-Cholesky (Nyström) feature map, the RKHS basis of SIGP.

SIGP (Tan & Mukherjee) only ever needs the kernel matrix through products with
thin matrices, so the kernel is represented by explicit features

.. math:: K \approx \Phi\Phi^\top, \qquad \Phi \in \mathbb{R}^{n\times r},

the greedy pivoted-Cholesky factor. It stops when the trace of the residual
:math:`\operatorname{tr}(K - \Phi\Phi^\top)` falls below ``tol * tr(K)``, so it is
exact (``r = n``) in the limit ``tol -> 0`` and costs :math:`O(n r^2 + n r p)` time
and :math:`O(nr)` memory: no :math:`n\times n` (or :math:`p\times p`) matrix is formed.

:math:`\Phi` is a finite-dimensional feature map of the training span of the
RKHS: a function :math:`f = \sum_i W_{ij}\phi(x_i)` has coordinates
:math:`v = \Phi^\top W` and :math:`\lVert f\rVert_{\mathcal H}^2 = W^\top K W = v^\top v`
(any factor with :math:`K = \Phi\Phi^\top` has this property; orthogonal columns
are not needed). A new point gets :math:`\phi(x) = L_{pp}^{-1} k(X_{\text{piv}}, x)`
(the Nyström extension, :math:`L_{pp}` the factor's rows at the pivots), so
:math:`k(x, X) \approx \phi(x)^\top\Phi^\top`, exactly consistent with the training
factor (:math:`\phi(x_i) = \Phi_{i:}`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["rbf_kernel", "KernelFactor", "pivoted_cholesky"]


def rbf_kernel(X1: torch.Tensor, X2: torch.Tensor, lengthscale: float) -> torch.Tensor:
    r"""Unit-variance RBF kernel :math:`k(x, z) = \exp(-\lVert x - z\rVert^2 / (2\ell^2))`.

    Parameters
    ----------
    X1 : torch.Tensor of shape (n1, p)
    X2 : torch.Tensor of shape (n2, p)
    lengthscale : float
        Length-scale :math:`\ell > 0`.

    Returns
    -------
    torch.Tensor of shape (n1, n2)
    """
    shift = X1.mean(0, keepdim=True)  # distances are translation invariant: centring avoids cancellation
    X1, X2 = X1 - shift, X2 - shift
    sq = (
        X1.pow(2).sum(-1, keepdim=True)
        - 2.0 * X1 @ X2.T
        + X2.pow(2).sum(-1).unsqueeze(0)
    ).clamp_min(0.0)
    return torch.exp(-0.5 * sq / lengthscale**2)


@dataclass
class KernelFactor:
    r"""Feature representation :math:`K \approx \Phi\Phi^\top` of a kernel matrix.

    Attributes
    ----------
    features : torch.Tensor of shape (n, r), or None
        :math:`\Phi`, the pivoted-Cholesky factor; None in a fitted estimator's model
        (prediction needs only the pivots, and the factor would make model files grow as
        n·r; :meth:`features_at` on the training rows gives it back).
    pivots : torch.Tensor of shape (r,)
        Indices of the training points chosen as pivots, in order.
    pivot_inputs : torch.Tensor of shape (r, p)
        The training inputs at the pivots: all that :meth:`features_at` reads of the
        training data, so a fitted model keeps no n×p copy of it.
    L_pp : torch.Tensor of shape (r, r)
        Lower-triangular Cholesky factor of :math:`K` on the pivots (:math:`\Phi` at the pivot rows).
    residual : float
        Relative trace error :math:`\operatorname{tr}(K - \Phi\Phi^\top)/\operatorname{tr}K`.
    lengthscale : float
        RBF length-scale used.
    """

    features: torch.Tensor | None
    pivots: torch.Tensor
    pivot_inputs: torch.Tensor
    L_pp: torch.Tensor
    residual: float
    lengthscale: float

    @property
    def rank(self) -> int:
        """Rank :math:`r` of the factor."""
        return int(self.L_pp.shape[0])

    def features_at(self, X_new: torch.Tensor) -> torch.Tensor:
        r"""Nyström features :math:`\phi(X_*)` of shape (t, r), cost :math:`O(t r p + t r^2)`."""
        k_piv = rbf_kernel(self.pivot_inputs, X_new, self.lengthscale)
        return torch.linalg.solve_triangular(self.L_pp, k_piv, upper=False).T


def pivoted_cholesky(
    X: torch.Tensor,
    lengthscale: float,
    *,
    tol: float = 1e-8,
    max_rank: int | None = None,
) -> KernelFactor:
    r"""Greedy pivoted Cholesky :math:`K \approx \Phi\Phi^\top` of the RBF kernel matrix of ``X``.

    Each step picks the point with the largest residual diagonal
    :math:`d_i = K_{ii} - \lVert \Phi_{i:}\rVert^2`, computes one kernel column and
    appends :math:`(K_{:i} - \Phi \Phi_{i:}^\top)/\sqrt{d_i}`. Every pivot has
    :math:`d_i \ge \operatorname{tr}(K - \Phi\Phi^\top)/n > ` ``tol``, and above the
    round-off level :math:`n\varepsilon` of the residual diagonal (which decides when
    ``tol=0``), so the factor is well conditioned and its Nyström solves stay finite. The loop runs in NumPy on inputs centred once (squared distances by
    :math:`\lVert a\rVert^2 + \lVert b\rVert^2 - 2a^\top b` lose no precision far from
    the origin), one :math:`O(np + nk)` column per step.

    Parameters
    ----------
    X : torch.Tensor of shape (n, p)
    lengthscale : float
    tol : float, default=1e-8
        Stop when the residual trace is at most ``tol * n``.
    max_rank : int or None
        Upper bound on the rank (default ``n``).

    Returns
    -------
    KernelFactor
    """
    n = X.shape[0]
    max_rank = n if max_rank is None else min(int(max_rank), n)
    Xc = X.detach().cpu().numpy().astype(np.float64)
    Xc = Xc - Xc.mean(0)
    sq = np.einsum("ij,ij->i", Xc, Xc)
    scale = -0.5 / float(lengthscale) ** 2
    d = np.ones(n)  # unit-variance RBF diagonal
    F = np.zeros((max_rank, n))  # rows are the columns of the factor (contiguous updates)
    pivots = []
    total = float(n)
    trace = total
    roundoff = n * np.finfo(np.float64).eps  # below this a residual diagonal is rounding noise
    k = 0
    while k < max_rank:
        i = int(np.argmax(d))
        if trace <= tol * total or d[i] <= roundoff:
            break
        dist = np.maximum(sq + sq[i] - 2.0 * (Xc @ Xc[i]), 0.0)
        col = np.exp(scale * dist) - F[:k, i] @ F[:k]
        F[k] = col / math.sqrt(d[i])
        d -= F[k] ** 2
        np.maximum(d, 0.0, out=d)
        d[i] = 0.0
        trace = float(d.sum())
        pivots.append(i)
        k += 1
    F = torch.as_tensor(F[:k].T.copy(), dtype=X.dtype, device=X.device)
    piv = torch.tensor(pivots, dtype=torch.long, device=X.device)
    return KernelFactor(
        features=F,
        pivots=piv,
        pivot_inputs=X[piv],
        L_pp=torch.tril(F[piv]),
        residual=trace / total,
        lengthscale=float(lengthscale),
    )
