r"""EM for the SIGP covariance and the penalised mean function (Tan & Mukherjee, Sec. 4–5).

Model (Sec. 4): :math:`y = D\theta + P\bar\beta + \gamma` with :math:`P = KW`
(n×m), :math:`\bar\beta \sim N(0, \Sigma_\beta)`, :math:`\gamma \sim N(0,\sigma^2 I)`
and the mean :math:`\mu = D\theta = c\mathbf 1 + Z\alpha` (the paper's
:math:`\mu(Z) = Z\alpha + c\mathbf 1`). The marginal covariance is
:math:`G = P\Sigma_\beta P^\top + \sigma^2 I` (eq. 13).

Every quantity is computed from the Woodbury form of :math:`G^{-1}` (eq. 13),
written with :math:`R = P\Sigma_\beta^{1/2}` so that a singular
:math:`\Sigma_\beta` is allowed:

.. math::
    G^{-1} = \sigma^{-2}\,[I - R M^{-1} R^\top], \qquad M = \sigma^2 I_m + R^\top R,
    \qquad \log\det G = (n - m)\log\sigma^2 + \log\det M.

All products with the data go through the Gram blocks :math:`P^\top P`,
:math:`P^\top D`, :math:`D^\top D`, :math:`P^\top y`, :math:`D^\top y`, formed once
in :math:`O(n(m+q)^2)`; each EM iteration then costs :math:`O(m^3 + q^3)`,
independent of :math:`n`. The :math:`n\times n` :math:`G^{-1}` is never formed.

One iteration of Algorithm 1:

1. mean step, eq. (14): :math:`\theta = \arg\max_\theta \log N(y; D\theta, G) -
   \tfrac\lambda2 \alpha^\top H\alpha` (generalised ridge; augmenting :math:`Z`
   with the intercept column is the same as the :math:`L`-projection of eq. 14);
2. E-step, eqs. (9)–(10): :math:`\hat\beta = \Sigma_\beta P^\top G^{-1} r`,
   :math:`\hat S = \Sigma_\beta - \Sigma_\beta P^\top G^{-1} P \Sigma_\beta
   = \sigma^2 \Sigma_\beta^{1/2} M^{-1}\Sigma_\beta^{1/2}`, :math:`r = y - D\theta`;
3. M-step, eqs. (11)–(12): :math:`\Sigma_\beta \leftarrow \hat S +
   \hat\beta\hat\beta^\top`, :math:`\sigma^2 \leftarrow (\lVert r -
   P\hat\beta\rVert^2 + \operatorname{tr}(P\hat S P^\top))/n`.

Both steps maximise (the mean step exactly, the EM step by the EM inequality)
the penalised marginal log-likelihood

.. math:: J = \log N(y; D\theta, G) - \tfrac\lambda2\,\alpha^\top H \alpha,

so the recorded sequence of :math:`J` is non-decreasing.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch

from ..exceptions import ConvergenceWarning

__all__ = ["EMResult", "fit_em", "initial_sigma_beta", "psd_sqrt"]


def psd_sqrt(S: torch.Tensor) -> torch.Tensor:
    """Symmetric square root of a positive semi-definite matrix (negative eigenvalues clipped)."""
    evals, evecs = torch.linalg.eigh(0.5 * (S + S.T))
    return (evecs * evals.clamp_min(0.0).sqrt()) @ evecs.T


def initial_sigma_beta(PtP: torch.Tensor, scale: float) -> torch.Tensor:
    r"""Basis-invariant start :math:`\Sigma_\beta = s\,(P^\top P)^{+}`.

    Then :math:`P\Sigma_\beta P^\top = s\,\Pi_P` (the projection on
    :math:`\operatorname{span} P`) does not depend on the basis of the subspace,
    so the whole EM path is invariant to :math:`W \to WT`.
    """
    evals, evecs = torch.linalg.eigh(0.5 * (PtP + PtP.T))
    keep = evals > evals.max() * 1e-12
    inv = (evecs[:, keep] / evals[keep]) @ evecs[:, keep].T
    return scale * inv


@dataclass
class EMResult:
    r"""Fitted SIGP parameters.

    Attributes
    ----------
    sigma_beta : torch.Tensor of shape (m, m)
        :math:`\Sigma_\beta`.
    noise : float
        :math:`\sigma^2`.
    theta : torch.Tensor of shape (q + 1,)
        Mean parameters :math:`(c, \alpha)`.
    beta : torch.Tensor of shape (m,)
        Posterior mean :math:`\hat\beta` of :math:`\bar\beta` (eq. 10) at the final parameters.
    post_cov_sqrt : torch.Tensor of shape (m, m)
        :math:`B` with :math:`BB^\top = \hat S`, the posterior covariance of :math:`\bar\beta`.
    objective : list of float
        :math:`J` after each mean step (non-decreasing).
    n_iter : int
    converged : bool
    """

    sigma_beta: torch.Tensor
    noise: float
    theta: torch.Tensor
    beta: torch.Tensor
    post_cov_sqrt: torch.Tensor
    objective: list = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False


def _solve_psd(M: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cholesky_solve(b, torch.linalg.cholesky(M))


def _mean_and_e_step(grams, sigma_beta, noise, n):
    """Mean step (eq. 14), objective J, and E-step (eqs. 9-10) at fixed (Sigma_beta, sigma^2)."""
    PtP, PtD, DtD, Pty, Dty, yty, Omega = grams
    m = PtP.shape[0]
    eye_m = torch.eye(m, dtype=PtP.dtype, device=PtP.device)
    S_half = psd_sqrt(sigma_beta)
    M = noise * eye_m + S_half @ PtP @ S_half
    M_chol = torch.linalg.cholesky(0.5 * (M + M.T))
    RtD = S_half @ PtD
    Rty = S_half @ Pty
    # (D^T G^-1 D + Omega) theta = D^T G^-1 y, with G^-1 in Woodbury form (eq. 13)
    DtGD = (DtD - RtD.T @ torch.cholesky_solve(RtD, M_chol)) / noise
    DtGy = (Dty - RtD.T @ torch.cholesky_solve(Rty[:, None], M_chol)[:, 0]) / noise
    theta = _solve_psd(DtGD + Omega, DtGy[:, None])[:, 0]
    # residual r = y - D theta through its Gram statistics
    Rtr = Rty - RtD @ theta
    rtr = yty - 2.0 * float(theta @ Dty) + float(theta @ DtD @ theta)
    Minv_Rtr = torch.cholesky_solve(Rtr[:, None], M_chol)[:, 0]
    quad = (rtr - float(Rtr @ Minv_Rtr)) / noise
    logdet = (n - m) * math.log(noise) + 2.0 * float(torch.log(M_chol.diagonal()).sum())
    value = -0.5 * (n * math.log(2.0 * math.pi) + logdet + quad) - 0.5 * float(
        theta @ Omega @ theta
    )
    beta = S_half @ Minv_Rtr
    post_sqrt = math.sqrt(noise) * S_half @ torch.linalg.solve_triangular(
        M_chol, eye_m, upper=False
    ).T
    return theta, beta, post_sqrt, value


def fit_em(
    P: torch.Tensor,
    y: torch.Tensor,
    Z: torch.Tensor,
    H: torch.Tensor,
    lam: float,
    *,
    sigma_beta0: torch.Tensor | None = None,
    noise0: float | None = None,
    max_iter: int = 500,
    tol: float = 1e-9,
    min_noise: float = 1e-10,
    warn: bool = True,
) -> EMResult:
    r"""Run Algorithm 1 to convergence.

    Parameters
    ----------
    P : torch.Tensor of shape (n, m)
        Projected features :math:`KW`.
    y : torch.Tensor of shape (n,)
    Z : torch.Tensor of shape (n, q)
        Mean-function design (``q`` may be 0: intercept only).
    H : torch.Tensor of shape (q, q)
        Penalty matrix of :math:`\alpha` (eq. 14).
    lam : float
        Mean penalty :math:`\lambda \ge 0`.
    sigma_beta0, noise0 :
        Starting values; default :math:`\Sigma_\beta = s(P^\top P)^+` and
        :math:`\sigma^2` both explaining half the variance of :math:`y`.
    max_iter : int
    tol : float
        Stop when the increase of :math:`J` is below ``tol * n``.
    min_noise : float
        Floor on :math:`\sigma^2` relative to the variance of :math:`y`.
    warn : bool
        Emit :class:`~hdgp.exceptions.ConvergenceWarning` if ``max_iter`` is reached.

    Returns
    -------
    EMResult
    """
    n, m = P.shape
    dtype, device = P.dtype, P.device
    D = torch.cat([torch.ones(n, 1, dtype=dtype, device=device), Z], dim=1)
    q1 = D.shape[1]
    Omega = torch.zeros(q1, q1, dtype=dtype, device=device)
    Omega[1:, 1:] = lam * H
    # Gram blocks, formed once: O(n (m + q)^2)
    PtP, PtD, DtD = P.T @ P, P.T @ D, D.T @ D
    Pty, Dty, yty = P.T @ y, D.T @ y, float(y @ y)
    var_y = float(((y - y.mean()) ** 2).mean().clamp_min(torch.finfo(dtype).tiny))
    noise_floor = min_noise * var_y
    sigma_beta = (
        initial_sigma_beta(PtP, 0.5 * var_y * n / m) if sigma_beta0 is None else sigma_beta0
    )
    noise = 0.5 * var_y if noise0 is None else float(noise0)
    grams = (PtP, PtD, DtD, Pty, Dty, yty, Omega)
    objective: list[float] = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        theta, beta, post_sqrt, value = _mean_and_e_step(grams, sigma_beta, noise, n)
        objective.append(value)
        if len(objective) > 1 and objective[-1] - objective[-2] < tol * n:
            converged = True
            break
        # M-step (eqs. 11-12)
        S_post = post_sqrt @ post_sqrt.T
        sigma_beta = S_post + torch.outer(beta, beta)
        Ptr = Pty - PtD @ theta
        rtr = yty - 2.0 * float(theta @ Dty) + float(theta @ DtD @ theta)
        resid2 = rtr - 2.0 * float(beta @ Ptr) + float(beta @ PtP @ beta)
        noise = max((resid2 + float((S_post * PtP).sum())) / n, noise_floor)
    if not converged:
        theta, beta, post_sqrt, value = _mean_and_e_step(grams, sigma_beta, noise, n)
        objective.append(value)
        if warn:
            warnings.warn(
                f"SIGP EM stopped after max_iter={max_iter} iterations with objective "
                f"change {objective[-1] - objective[-2]:.3g} (tol*n = {tol * n:.3g}); "
                "increase max_iter.",
                ConvergenceWarning,
                stacklevel=2,
            )
    return EMResult(
        sigma_beta=sigma_beta,
        noise=noise,
        theta=theta,
        beta=beta,
        post_cov_sqrt=post_sqrt,
        objective=objective,
        n_iter=it,
        converged=converged,
    )
