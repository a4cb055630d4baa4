r"""EM for the SIGP covariance and the penalised mean function (Tan & Mukherjee, Sec. 4–5).

Model (Sec. 4): :math:`y = D\theta + P\bar\beta + \gamma` with :math:`P = HKW`
(n×m, the projections on the subspace of the centred features, as
:math:`\widehat{\mathrm{var}}(\phi(x))` of eq. 7 is centred),
:math:`\bar\beta \sim N(0, \Sigma_\beta)`, :math:`\gamma \sim N(0,\sigma^2 I)`
and the mean :math:`\mu = D\theta = c\mathbf 1 + Z\alpha` (the paper's
:math:`\mu(Z) = Z\alpha + c\mathbf 1`). The marginal covariance is
:math:`G = P\Sigma_\beta P^\top + \sigma^2 I` (defined before eq. 9).

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

Constant mean in closed form. With :math:`\mu = c\mathbf 1` and centred
:math:`P` (:math:`\mathbf 1^\top P = 0`) the maximiser of :math:`J` over
:math:`(c, \Sigma_\beta, \sigma^2)`, the fixed point Algorithm 1 climbs to, is
explicit (:func:`fit_constant_mean`), so no iteration is needed.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from ..exceptions import ConvergenceWarning

__all__ = ["EMResult", "fit_em", "fit_constant_mean", "initial_sigma_beta"]

#: A fall of the EM objective by more than this times (|J| + n) is a breakdown, not round-off.
_DIVERGENCE_RTOL = 1e-6


def _psd_sqrt(S: np.ndarray) -> np.ndarray:
    """Symmetric square root of a positive semi-definite matrix (negative eigenvalues clipped)."""
    evals, evecs = np.linalg.eigh(0.5 * (S + S.T))
    return (evecs * np.sqrt(np.clip(evals, 0.0, None))) @ evecs.T


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


def _mean_and_e_step(grams, sigma_beta, noise, n):
    """Mean step (eq. 14), objective J, and E-step (eqs. 9-10) at fixed (Sigma_beta, sigma^2).

    Works on the small Gram blocks only, with plain NumPy (m x m and q x q matrices,
    where call overhead dominates).
    """
    PtP, PtD, DtD, Pty, Dty, yty, Omega = grams
    m = PtP.shape[0]
    S_half = _psd_sqrt(sigma_beta)
    M = noise * np.eye(m) + S_half @ PtP @ S_half
    L_inv = np.linalg.inv(np.linalg.cholesky(0.5 * (M + M.T)))  # M^-1 = L_inv^T L_inv
    RtD = L_inv @ (S_half @ PtD)  # whitened: R^T D with R = P Sigma^1/2
    Rty = L_inv @ (S_half @ Pty)
    # (D^T G^-1 D + Omega) theta = D^T G^-1 y, with G^-1 in Woodbury form (eq. 13)
    DtGD = (DtD - RtD.T @ RtD) / noise
    DtGy = (Dty - RtD.T @ Rty) / noise
    theta = np.linalg.solve(DtGD + Omega, DtGy)
    # residual r = y - D theta through its Gram statistics
    Rtr = Rty - RtD @ theta
    rtr = yty - 2.0 * theta @ Dty + theta @ DtD @ theta
    quad = (rtr - Rtr @ Rtr) / noise
    logdet = (n - m) * math.log(noise) - 2.0 * np.log(np.abs(np.diag(L_inv))).sum()
    value = -0.5 * (n * math.log(2.0 * math.pi) + logdet + quad) - 0.5 * theta @ Omega @ theta
    beta = S_half @ (L_inv.T @ Rtr)
    post_sqrt = math.sqrt(noise) * S_half @ L_inv.T
    return theta, beta, post_sqrt, float(value)


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
        Centred projections :math:`HKW` (the EM itself does not need them centred).
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
    # Gram blocks, formed once: O(n (m + q)^2); the iterations only touch these
    PtP, PtD, DtD = P.T @ P, P.T @ D, D.T @ D
    Pty, Dty, yty = P.T @ y, D.T @ y, float(y @ y)
    var_y = float(((y - y.mean()) ** 2).mean().clamp_min(torch.finfo(dtype).tiny))
    noise_floor = min_noise * var_y
    if sigma_beta0 is None:
        sigma_beta0 = initial_sigma_beta(PtP, 0.5 * var_y * n / m)
    sigma_beta = torch.as_tensor(sigma_beta0).detach().cpu().numpy().astype(np.float64)
    noise = 0.5 * var_y if noise0 is None else float(noise0)
    grams = tuple(
        g.detach().cpu().numpy().astype(np.float64) if torch.is_tensor(g) else g
        for g in (PtP, PtD, DtD, Pty, Dty, yty, Omega)
    )
    PtP, PtD, DtD, Pty, Dty = grams[:5]
    objective: list[float] = []
    converged = diverged = False
    good = None
    it = 0
    for it in range(1, max_iter + 1):
        try:
            theta, beta, post_sqrt, value = _mean_and_e_step(grams, sigma_beta, noise, n)
        except np.linalg.LinAlgError:  # e.g. a NaN Sigma_beta from the previous M-step
            if good is None:
                raise
            theta, beta, post_sqrt, value = good[2], good[3], good[4], math.nan
        # EM never decreases J in exact arithmetic: a non-finite J or state, or a fall far beyond
        # round-off, is a numerical breakdown; keep the last good iterate instead of its output.
        if good is not None and (
            not (math.isfinite(value) and np.isfinite(theta).all() and np.isfinite(beta).all()
                 and np.isfinite(post_sqrt).all() and math.isfinite(noise))
            or value < objective[-1] - _DIVERGENCE_RTOL * (abs(objective[-1]) + n)
        ):
            diverged = True
            sigma_beta, noise, theta, beta, post_sqrt = good
            warnings.warn(
                f"SIGP EM diverged at iteration {it} (objective {value:.6g} after {objective[-1]:.6g}); "
                f"keeping the parameters of iteration {it - 1}. Standardise the inputs or raise the "
                "length-scale / eta.",
                ConvergenceWarning,
                stacklevel=2,
            )
            break
        objective.append(value)
        good = (sigma_beta, noise, theta, beta, post_sqrt)
        if len(objective) > 1 and objective[-1] - objective[-2] < tol * n:
            converged = True
            break
        # M-step (eqs. 11-12)
        S_post = post_sqrt @ post_sqrt.T
        sigma_beta = S_post + np.outer(beta, beta)
        Ptr = Pty - PtD @ theta
        rtr = yty - 2.0 * float(theta @ Dty) + float(theta @ DtD @ theta)
        resid2 = rtr - 2.0 * beta @ Ptr + beta @ PtP @ beta
        noise = max(float(resid2 + (S_post * PtP).sum()) / n, noise_floor)
    if not converged and not diverged:
        theta, beta, post_sqrt, value = _mean_and_e_step(grams, sigma_beta, noise, n)
        if not (math.isfinite(value) and np.isfinite(theta).all()) and good is not None:
            sigma_beta, noise, theta, beta, post_sqrt = good  # the last M-step broke down
            value = objective[-1]
        objective.append(value)
        if warn:
            warnings.warn(
                f"SIGP EM stopped after max_iter={max_iter} iterations with objective "
                f"change {objective[-1] - objective[-2]:.3g} (tol*n = {tol * n:.3g}); "
                "increase max_iter.",
                ConvergenceWarning,
                stacklevel=2,
            )

    def back(a):
        return torch.as_tensor(a, dtype=dtype, device=device)

    return EMResult(
        sigma_beta=back(sigma_beta),
        noise=noise,
        theta=back(theta),
        beta=back(beta),
        post_cov_sqrt=back(post_sqrt),
        objective=objective,
        n_iter=it,
        converged=converged,
    )


def fit_constant_mean(P: torch.Tensor, y: torch.Tensor, *, min_noise: float = 1e-10) -> EMResult:
    r"""Maximum of the marginal likelihood of :math:`y = c\mathbf 1 + P\bar\beta + \gamma` in closed form.

    For centred :math:`P` (:math:`\mathbf 1^\top P = 0`) write :math:`P = QR` with
    orthonormal :math:`Q` (n×k, k = rank P), :math:`r = y - \bar y\mathbf 1`,
    :math:`z = Q^\top r` and :math:`e^2 = \lVert r - Qz\rVert^2` (formed explicitly:
    :math:`\lVert r\rVert^2 - \lVert z\rVert^2` cancels when the noise is small). In the
    coordinates :math:`z` the model is :math:`z \sim N(0, S + \sigma^2 I_k)` with
    :math:`S = R\Sigma_\beta R^\top` free (positive semi-definite), the other
    :math:`n - k` directions are pure noise, and :math:`\mathbf 1` carries no
    variance beyond :math:`\sigma^2`. Hence :math:`\hat c = \bar y` (the :math:`c^\star` formula before eq. 14, with
    :math:`G^{-1}\mathbf 1 = \mathbf 1/\sigma^2`) and

    .. math::
        -2J = n\log 2\pi + \log\det(S + \sigma^2 I) + z^\top (S + \sigma^2 I)^{-1} z
              + (n - k)\log\sigma^2 + e^2/\sigma^2,

    which, over :math:`S \succeq 0` at fixed :math:`\sigma^2`, is minimised by the
    rank-one :math:`S = (\lVert z\rVert^2 - \sigma^2)_+\, \hat u\hat u^\top`,
    :math:`\hat u = z/\lVert z\rVert`. Minimising the remaining function of
    :math:`\sigma^2`:

    * if :math:`(n - 1)\lVert z\rVert^2 > e^2`: :math:`\hat\sigma^2 = e^2/(n - 1)` and
      :math:`J = -\tfrac12[n\log 2\pi + \log\lVert z\rVert^2 + (n-1)\log\hat\sigma^2 + n]`;
    * otherwise :math:`\hat S = 0`, :math:`\hat\sigma^2 = \lVert r\rVert^2/n` and
      :math:`J = -\tfrac12[n\log 2\pi + n\log\hat\sigma^2 + n]`.

    This is the unique maximiser, so it is the limit of Algorithm 1 (whose
    approach to the rank-one :math:`\Sigma_\beta` on the boundary is slow). The
    posterior of :math:`\bar\beta` (eqs. 9-10) then has mean
    :math:`\hat\beta = R^{+}(1 - \hat\sigma^2/\lVert z\rVert^2) z`, i.e. the
    least-squares fit of :math:`r` on :math:`P` shrunk by
    :math:`1 - \hat\sigma^2/\lVert z\rVert^2`, and covariance
    :math:`\hat S_\beta = R^{+}\,\hat\sigma^2(1 - \hat\sigma^2/\lVert z\rVert^2)\,
    \hat u\hat u^\top R^{+\top}`. Cost :math:`O(n m^2)`.

    Parameters
    ----------
    P : torch.Tensor of shape (n, m)
        Centred projections :math:`HKW`.
    y : torch.Tensor of shape (n,)
    min_noise : float
        Floor on :math:`\sigma^2` relative to the variance of :math:`y`.

    Returns
    -------
    EMResult
        With ``n_iter = 1`` (one closed-form step) and ``converged = True``.

    Raises
    ------
    ValueError
        If the columns of ``P`` are not centred.
    """
    n, m = P.shape
    scale = float(P.abs().max()) if P.numel() else 0.0
    if P.numel() and float(P.sum(0).abs().max()) > 1e-8 * n * max(scale, 1e-300):
        raise ValueError("fit_constant_mean needs centred projections P (1^T P = 0); centre P first.")
    dtype, device = P.dtype, P.device
    c = y.mean()
    r = y - c
    r2 = float(r @ r)
    var_y = max(r2 / n, torch.finfo(dtype).tiny)
    U, s, Vh = torch.linalg.svd(P, full_matrices=False)
    top = float(s[0]) if s.numel() else 0.0
    keep = s > top * 1e-10 if top > 0 else torch.zeros_like(s, dtype=torch.bool)
    U, s, Vh = U[:, keep], s[keep], Vh[keep]
    z = U.T @ r
    z2 = float(z @ z)
    e2 = float((r - U @ z).square().sum())  # not r2 - z2, which cancels when the noise is small
    log2pi = math.log(2.0 * math.pi)
    beta = P.new_zeros(m)
    post_sqrt = P.new_zeros(m, m)
    sigma_beta = P.new_zeros(m, m)
    if z2 > 0 and (n - 1) * z2 > e2:
        noise = max(e2 / (n - 1), min_noise * var_y)
        shrink = max(1.0 - noise / z2, 0.0)
        u = z / math.sqrt(z2)
        to_beta = Vh.T / s  # R^+ in the SVD basis: P^+ = V s^-1 U^T
        beta = to_beta @ (shrink * z)
        post_sqrt[:, 0] = to_beta @ (math.sqrt(noise * shrink) * u)
        sigma_beta = torch.outer(to_beta @ u, to_beta @ u) * (z2 - noise)
        value = -0.5 * (n * log2pi + math.log(z2) + (n - 1) * math.log(noise) + 1.0 + e2 / noise)
    else:
        noise = max(r2 / n, min_noise * var_y)
        value = -0.5 * (n * log2pi + n * math.log(noise) + r2 / noise)
    return EMResult(
        sigma_beta=sigma_beta,
        noise=noise,
        theta=torch.stack([c]).to(dtype=dtype, device=device),
        beta=beta,
        post_cov_sqrt=post_sqrt,
        objective=[float(value)],
        n_iter=1,
        converged=True,
    )
