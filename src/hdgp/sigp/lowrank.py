r"""RBF kernel and its pivoted-Cholesky (Nyström) factor, the RKHS basis of SIGP.

SIGP (Tan & Mukherjee) only ever needs the kernel matrix through products with
thin matrices, so the kernel is represented by a rank-:math:`r` factor

.. math:: K \approx F F^\top = U \Lambda U^\top, \qquad F \in \mathbb{R}^{n\times r},

obtained by greedy pivoted Cholesky. It stops when the trace of the residual
:math:`\operatorname{tr}(K - FF^\top)` falls below ``tol * tr(K)``, so it is exact
(``r = n``) in the limit ``tol -> 0`` and costs :math:`O(n r^2 + n r p)` time and
:math:`O(nr)` memory: no :math:`n\times n` (or :math:`p\times p`) matrix is formed.
A new point :math:`x` gets its factor row :math:`f(x) = L_{pp}^{-1} k(X_{\text{piv}}, x)`
(the Nyström extension), so :math:`k(x, X) \approx f(x)^\top F^\top` exactly
consistent with the training factor.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    r"""Low-rank eigen-representation :math:`K \approx U \Lambda U^\top` of a kernel matrix.

    Attributes
    ----------
    U : torch.Tensor of shape (n, r)
        Orthonormal eigenvectors of the approximated kernel matrix.
    eigenvalues : torch.Tensor of shape (r,)
        Positive eigenvalues :math:`\Lambda`.
    pivots : torch.Tensor of shape (r_piv,)
        Indices of the training points chosen as pivots.
    L_pp : torch.Tensor of shape (r_piv, r_piv)
        Lower-triangular Cholesky factor of :math:`K` on the pivots.
    to_eigen : torch.Tensor of shape (r_piv, r)
        Map from Cholesky factor rows to the eigen-basis:
        :math:`K(x, X) U \approx f(x)^\top` ``to_eigen``.
    residual : float
        Relative trace error :math:`\operatorname{tr}(K - FF^\top)/\operatorname{tr}K`.
    lengthscale : float
        RBF length-scale used.
    """

    U: torch.Tensor
    eigenvalues: torch.Tensor
    pivots: torch.Tensor
    L_pp: torch.Tensor
    to_eigen: torch.Tensor
    residual: float
    lengthscale: float

    @property
    def rank(self) -> int:
        """Rank :math:`r` of the factor."""
        return int(self.eigenvalues.shape[0])

    def cross_times_U(self, X_new: torch.Tensor, X_train: torch.Tensor) -> torch.Tensor:
        r"""Nyström product :math:`K(X_*, X)\,U` of shape (t, r), cost :math:`O(t r p + t r^2)`."""
        k_piv = rbf_kernel(X_train[self.pivots], X_new, self.lengthscale)
        f_new = torch.linalg.solve_triangular(self.L_pp, k_piv, upper=False)
        return f_new.T @ self.to_eigen


def pivoted_cholesky(
    X: torch.Tensor,
    lengthscale: float,
    *,
    tol: float = 1e-8,
    max_rank: int | None = None,
) -> KernelFactor:
    r"""Greedy pivoted Cholesky of the RBF kernel matrix of ``X``, then its thin SVD.

    Each step picks the point with the largest residual diagonal
    :math:`d_i = K_{ii} - \lVert F_{i:}\rVert^2`, computes one kernel column and
    appends :math:`(K_{:i} - F F_{i:}^\top)/\sqrt{d_i}`. The thin SVD
    :math:`F = U S V^\top` then gives :math:`K \approx U S^2 U^\top`.

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
    d = torch.ones(n, dtype=X.dtype, device=X.device)  # unit-variance RBF diagonal
    F = X.new_zeros(n, max_rank)
    pivots = []
    total = float(n)
    k = 0
    while k < max_rank:
        i = int(torch.argmax(d))
        if float(d.sum()) <= tol * total or float(d[i]) <= 0.0:
            break
        col = rbf_kernel(X, X[i : i + 1], lengthscale).squeeze(1) - F[:, :k] @ F[i, :k]
        F[:, k] = col / d[i].sqrt()
        d = (d - F[:, k] ** 2).clamp_min(0.0)
        d[i] = 0.0
        pivots.append(i)
        k += 1
    F = F[:, :k]
    piv = torch.tensor(pivots, dtype=torch.long, device=X.device)
    U, S, Vh = torch.linalg.svd(F, full_matrices=False)
    keep = S > S[0] * 1e-12 if k else S > 0
    U, S, V = U[:, keep], S[keep], Vh[keep].T
    # K(x, X) U = f(x)^T F^T U = f(x)^T V S
    return KernelFactor(
        U=U,
        eigenvalues=S**2,
        pivots=piv,
        L_pp=torch.tril(F[piv]),
        to_eigen=V * S,
        residual=float(d.sum()) / total,
        lengthscale=float(lengthscale),
    )
