"""Posterior of the SKI model: predictions on grids extended to cover the test points, from
caches on the training grids (mean weights and a truncated eigen-root, LOVE-style)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from gpytorch.kernels import ScaleKernel

from ..._blocks import in_row_blocks
from .interpolation import _interp_each, cubic_interpolation
from .toeplitz import _grid_columns, _toeplitz_matmul


#: Floats of a (J, block, 1 + r) tensor of grid values at test points: prediction goes in blocks of rows.
_PREDICT_BLOCK_FLOATS = 1 << 23

#: Unit length-scales beyond which an RBF sub-kernel is treated as exactly zero (exp(-40.5)).
_CUTOFF = 9.0


def _ski_prior_variance(weight, inside, h, coef) -> torch.Tensor:
    """Prior variance of the SKI model at test points, (t,): :math:`\\sum_j c_j w_{*j}^\\top T_j w_{*j}`.

    ``weight`` (J, t, 4) are the test points' interpolation weights on the (extended) grids;
    a point outside projection ``j``'s reach (``inside`` False) has no cross-covariance through it,
    and its exact prior variance :math:`c_j` there. The posterior variance must start from this
    prior, not from the exact :math:`k(x_*, x_*)`: it subtracts the SKI covariances
    :math:`\\lVert\\phi_*\\rVert^2`, and the interpolation error of the diagonal would stay in the
    result, many times the posterior variance when the noise is small.
    """
    lag = torch.arange(4, device=h.device, dtype=h.dtype)
    C = torch.exp(-0.5 * ((lag[:, None] - lag) * h[:, None, None]) ** 2)  # (J, 4, 4): a row's 4 indices are consecutive
    ski = torch.einsum("jtk,jkl,jtl->jt", weight, C, weight)
    return (coef[:, None] * torch.where(inside, ski, torch.ones_like(ski))).sum(0)


def _ski_prior_covariance(z, index, weight, inside, h, coef) -> torch.Tensor:
    """Prior covariance of the SKI model at test points, (t, t): :math:`\\sum_j c_j W_{*j} T_j W_{*j}^\\top`
    where both points are within projection ``j``'s reach, the exact sub-kernel elsewhere (there the
    cross-covariance with the training data is zero); see :func:`_ski_prior_variance`."""
    J, t, _ = weight.shape
    cov = z.new_zeros(t, t)
    for j in range(J):
        diff = z[j, :, None] - z[j]
        diff = torch.where(diff.isnan(), torch.zeros_like(diff), diff)  # a point beyond float range: inf - inf
        term = torch.exp(-0.5 * diff**2)
        ski = z.new_zeros(t, t)
        for k in range(4):
            for l in range(4):  # noqa: E741
                lag = (index[j, :, k, None] - index[j, :, l]).to(z.dtype) * h[j]
                ski += weight[j, :, k, None] * weight[j, :, l] * torch.exp(-0.5 * lag**2)
        both = inside[j, :, None] & inside[j]
        cov += coef[j] * torch.where(both, ski, term)
    return cov


@dataclass
class SKIPosterior:
    """Posterior of a :class:`SKIProjectedGPModel`.

    Attributes
    ----------
    kernel : ScaleKernel
    u0, h : torch.Tensor of shape (J,)
        Training grids (origin, spacing).
    mean_cache : torch.Tensor of shape (J, m, 1)
        :math:`c_j W_j^\\top \\alpha` on the training grids.
    root_cache : torch.Tensor of shape (J, m, r)
        :math:`\\sqrt{c_j} E_j \\Lambda_j^{-1/2}` (kept eigenpairs of :math:`T_j`, zero columns
        after the :math:`r_j` kept ones); :math:`T_j` applied to it is the grid root
        :math:`\\sqrt{c_j} G_j = \\sqrt{c_j} E_j\\Lambda_j^{1/2}`, and on an extended grid its Nyström
        extension.
    L_A : torch.Tensor of shape (R, R)
        Cholesky factor of :math:`\\sigma^2 I + \\Phi^\\top \\Phi`, :math:`R = \\sum_j r_j`.
    constant, noise : torch.Tensor
    columns : torch.Tensor of shape (J, r), bool, or None
        Which columns of ``root_cache`` are kept (the first :math:`r_j` of row ``j``), in the order
        of ``L_A``; None (model files before format 2.2): all :math:`J r`.

    Notes
    -----
    :math:`T_j` is applied at prediction time on a grid extended (same spacing)
    to cover the test projections, so test points outside the training range are
    neither clipped nor extrapolated from the grid's edge.
    """

    kernel: ScaleKernel
    u0: torch.Tensor
    h: torch.Tensor
    mean_cache: torch.Tensor
    root_cache: torch.Tensor
    L_A: torch.Tensor
    constant: torch.Tensor
    noise: torch.Tensor
    columns: torch.Tensor | None = None
    #: Factor on every returned variance (see :class:`hdgp.inference._posterior.GaussianPosterior`).
    variance_scale = 1.0

    @torch.no_grad()
    def predict(self, Xs: torch.Tensor, *, latent: bool = False, full_cov: bool = False):
        """Predictive mean and variance (or covariance) at ``Xs``.

        .. math::

            \\mu_* = c + \\sum_j c_j w_{*j}^\\top T_j W_j^\\top \\alpha,\\qquad
            \\sigma_*^2 = k^{\\mathrm{SKI}}(x_*, x_*) - \\lVert\\phi_*\\rVert^2
                + \\sigma_n^2 \\lVert L_A^{-1}\\phi_*\\rVert^2

        with :math:`\\phi_* = [\\sqrt{c_j} w_{*j}^\\top G_j]_j` and the SKI model's own prior variance
        :math:`k^{\\mathrm{SKI}}(x_*, x_*)` (:func:`_ski_prior_variance`); the last two terms equal
        :math:`k_{*X}(\\Phi\\Phi^\\top + \\sigma_n^2 I)^{-1}k_{X*}` for the truncated kernel
        (push-through identity).

        Without ``full_cov`` the test points are handled in blocks of
        :data:`_PREDICT_BLOCK_FLOATS` / (J (1 + r)) (each block holds a few (J, block, 1 + r) tensors).

        Returns
        -------
        mean : torch.Tensor of shape (t,)
        var : torch.Tensor of shape (t,) or (t, t) when ``full_cov``
            Times ``variance_scale``.
        """
        J, m, width = self.root_cache.shape
        block = max(64, _PREDICT_BLOCK_FLOATS // (J * (1 + width)))
        if not full_cov and Xs.shape[0] > block:
            return in_row_blocks(lambda xb: self.predict(xb, latent=latent), Xs, block)
        z = self.kernel.base_kernel.project(Xs).T  # (J, t)
        reach = torch.ceil(_CUTOFF / self.h)  # grid points within the cut-off, per projection
        s = (z - self.u0[:, None]) / self.h[:, None]
        inside = (s > -reach[:, None]) & (s < m - 1 + reach[:, None])
        s_in = torch.where(inside, s, torch.zeros_like(s))
        lo = int(torch.clamp(2 - torch.floor(s_in.min()), min=0))
        hi = int(torch.clamp(torch.floor(s_in.max()) + 3 - m, min=0))
        cache = torch.nn.functional.pad(torch.cat([self.mean_cache, self.root_cache], -1), (0, 0, lo, hi))
        grid_values = _toeplitz_matmul(_grid_columns(self.h, m + lo + hi), cache)  # (J, m', 1 + r)
        index, weight = cubic_interpolation(z, self.u0 - lo * self.h, self.h)
        weight = torch.where(inside[..., None], weight, torch.zeros_like(weight))  # NaN · 0 would stay NaN
        index = torch.where(inside[..., None], index, torch.zeros_like(index))
        values = _interp_each(index, weight, grid_values)  # (J, t, 1 + r)
        mean = self.constant + values[..., 0].sum(0)
        phi = values[..., 1:].permute(1, 0, 2)  # (t, J, r)
        phi = phi.reshape(z.shape[1], -1) if self.columns is None else phi[:, self.columns]  # (t, R)
        V = torch.linalg.solve_triangular(self.L_A, phi.T, upper=False)  # (R, t)
        coef = self.kernel.base_kernel.weights.to(z) * self.kernel.outputscale
        if full_cov:
            cov = _ski_prior_covariance(z, index, weight, inside, self.h, coef) - phi @ phi.T + self.noise * V.T @ V
            if not latent:
                cov.diagonal().add_(self.noise)
            return mean, cov * self.variance_scale
        var = _ski_prior_variance(weight, inside, self.h, coef) - phi.square().sum(-1) \
            + self.noise * V.square().sum(0)
        var = var.clamp_min(0.0)
        return mean, (var if latent else var + self.noise) * self.variance_scale
