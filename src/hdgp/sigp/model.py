r"""A fitted SIGP and the grid of fits that shares work between hyper-parameters.

Prediction (Tan & Mukherjee, Sec. 5) at test inputs :math:`X_t`, with
:math:`P_t = K(X_t, X) W` and the posterior :math:`N(\hat\beta, \hat S)` of
:math:`\bar\beta` (eqs. 9-10):

.. math::
    E(y_t) = \mu(X_t) + P_t\hat\beta, \qquad
    \operatorname{diag}\operatorname{var}(y_t)_i =
    \lVert [P_t \hat S^{1/2}]_{i:}\rVert^2 + \sigma^2,

which is the paper's diagonal formula
:math:`\lVert [P_{X_t}(\sigma^{-2}P_X^\top P_X + I)^{-1/2}]_{i:}\rVert^2 + \sigma^2`
with :math:`P_Z = K(Z, X) W\Sigma_\beta^{1/2}`, since
:math:`\hat S = \Sigma_\beta^{1/2}(I + \sigma^{-2}\Sigma_\beta^{1/2}P^\top P
\Sigma_\beta^{1/2})^{-1}\Sigma_\beta^{1/2}`. Cost :math:`O(t\,r\,(p + m))` with
the rank-:math:`r` kernel factor.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import torch

from .em import EMResult, fit_em
from .lowrank import KernelFactor, pivoted_cholesky
from .subspace import reduced_pencil, sdr_subspace

__all__ = ["SIGPModel", "linear_mean_basis", "fit_grid"]


def linear_mean_basis(X: torch.Tensor) -> torch.Tensor:
    r"""Basis :math:`V` (p×q) of the linear mean :math:`\mu(x) = c + x^\top V a`.

    The identity when :math:`p \le n`; otherwise the right singular vectors of
    :math:`X` (q = rank X ≤ n), which gives the same ridge estimate as
    :math:`Z = X, H = I` in eq. (14) (the optimal :math:`\alpha` lies in the row
    space of X) without any p×p matrix: the dual estimator of Sec. 5 in
    :math:`O(np\min(n,p))`.
    """
    n, p = X.shape
    if p <= n:
        return torch.eye(p, dtype=X.dtype, device=X.device)
    _, S, Vh = torch.linalg.svd(X, full_matrices=False)
    keep = S > S[0] * 1e-10
    return Vh[keep].T


@dataclass
class SIGPModel:
    """SIGP fitted to one or more targets that share the subspace :math:`W = U z`.

    Attributes
    ----------
    factor : KernelFactor
    coef : torch.Tensor of shape (r, m)
    fits : list of EMResult, one per target column
    X_train : torch.Tensor of shape (n, p)
    mean_basis : torch.Tensor of shape (p, q) (q = 0: constant mean)
    """

    factor: KernelFactor
    coef: torch.Tensor
    fits: list[EMResult]
    X_train: torch.Tensor
    mean_basis: torch.Tensor

    def projected(self, X_new: torch.Tensor) -> torch.Tensor:
        """:math:`P_t = K(X_t, X) W`, shape (t, m)."""
        return self.factor.cross_times_U(X_new, self.X_train) @ self.coef

    def predict_from(
        self, KU_new: torch.Tensor, X_new: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance (t, k) given the precomputed :math:`K(X_t, X)U`."""
        P_t = KU_new @ self.coef
        Z_t = X_new @ self.mean_basis
        means, variances = [], []
        for fit in self.fits:
            means.append(fit.theta[0] + Z_t @ fit.theta[1:] + P_t @ fit.beta)
            variances.append((P_t @ fit.post_cov_sqrt).pow(2).sum(1) + fit.noise)
        return torch.stack(means, 1), torch.stack(variances, 1)

    def predict(self, X_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictive mean and variance of y (Sec. 5), each of shape (t, k)."""
        return self.predict_from(self.factor.cross_times_U(X_new, self.X_train), X_new)

    def loo_mean(self, Y: torch.Tensor) -> torch.Tensor:
        r"""Leave-one-out predictive means :math:`y_i - [G^{-1}r]_i / [G^{-1}]_{ii}` (n, k).

        The mean parameters are held at their full-data values; :math:`G^{-1}` in
        Woodbury form (eq. 13), :math:`O(n m^2)`.
        """
        P = self.factor.U @ (self.factor.eigenvalues[:, None] * self.coef)
        Z = self.X_train @ self.mean_basis
        out = []
        for k, fit in enumerate(self.fits):
            r = Y[:, k] - fit.theta[0] - Z @ fit.theta[1:]
            # G^-1 = (I - P B B^T P^T / s2) / s2 with B B^T = S_hat (posterior covariance)
            PB = P @ fit.post_cov_sqrt
            Ginv_r = (r - PB @ (PB.T @ r) / fit.noise) / fit.noise
            Ginv_diag = (1.0 - PB.pow(2).sum(1) / fit.noise) / fit.noise
            out.append(Y[:, k] - Ginv_r / Ginv_diag)
        return torch.stack(out, 1)


def fit_grid(
    X: torch.Tensor,
    Y: torch.Tensor,
    responses: list[tuple[object, torch.Tensor, float]],
    *,
    lengthscales: list[float],
    etas: list[float],
    ranks: list[int],
    mean_penalties: list[float],
    mean: str,
    kernel_tol: float,
    max_kernel_rank: int | None,
    max_iter: int,
    tol: float,
):
    """Fit SIGP for every hyper-parameter combination, sharing the expensive stages.

    The kernel factor is computed once per length-scale, the pencil (eq. 7) once
    per response estimate, the eigenvectors once per ``eta`` (the leading ``m``
    are nested, so all ranks come from one solve) and EM (Alg. 1) per
    ``(rank, mean_penalty)``.

    Parameters
    ----------
    X : torch.Tensor of shape (n, p)
        Standardised inputs.
    Y : torch.Tensor of shape (n, k)
        Targets (standardised responses or ±1 class codes).
    responses : list of (key, features, ridge)
        Response features :math:`\\Psi` for the pencil, labelled by ``key``.
    mean : {"linear", "constant"}
        Linear mean with penalty :math:`H = pI` in eq. (14), or the intercept only.

    Yields
    ------
    params : dict
        ``lengthscale, response, eta, rank, mean_penalty``.
    model : SIGPModel
        Ranks above the numerical rank of the kernel factor are skipped.
    """
    basis = (
        linear_mean_basis(X)
        if mean == "linear"
        else X.new_zeros(X.shape[1], 0)
    )
    Z = X @ basis
    # H = p I: prior alpha ~ N(0, I / (lam p)) gives the linear mean a per-point prior
    # variance 1/lam on standardised inputs whatever p is (p >> n would otherwise let
    # a weakly penalised linear mean interpolate y and starve the random part)
    H = X.shape[1] * torch.eye(Z.shape[1], dtype=X.dtype, device=X.device)
    for ell in lengthscales:
        factor = pivoted_cholesky(X, ell, tol=kernel_tol, max_rank=max_kernel_rank)
        usable = [m for m in ranks if m <= factor.rank]
        if not usable:
            continue
        for key, Psi, ridge in responses:
            C_r, A_r = reduced_pencil(factor.U, factor.eigenvalues, Psi, ridge)
            for eta in etas:
                sub = sdr_subspace(C_r, A_r, max(usable), eta)
                for m, lam in product(usable, mean_penalties):
                    coef = sub.coef[:, :m]
                    P = factor.U @ (factor.eigenvalues[:, None] * coef)
                    fits = [
                        fit_em(P, Y[:, k], Z, H, lam, max_iter=max_iter, tol=tol, warn=False)
                        for k in range(Y.shape[1])
                    ]
                    params = dict(lengthscale=ell, response=key, eta=eta, rank=m, mean_penalty=lam)
                    yield params, SIGPModel(factor, coef, fits, X, basis)
