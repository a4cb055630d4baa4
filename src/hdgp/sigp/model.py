r"""A fitted SIGP and the grid of fits that shares work between hyper-parameters.

Prediction (Tan & Mukherjee, Sec. 5) at test inputs :math:`X_t`, with the
centred projections :math:`P_t = (K(X_t, X) - \mathbf 1\bar k^\top) W`
(:math:`\bar k = K\mathbf 1/n`, the training mean embedding, the same centring
as :math:`P = HKW`) and the posterior :math:`N(\hat\beta, \hat S)` of
:math:`\bar\beta` (eqs. 9-10):

.. math::
    E(y_t) = \mu(X_t) + P_t\hat\beta, \qquad
    \operatorname{diag}\operatorname{var}(y_t)_i =
    \lVert [P_t \hat S^{1/2}]_{i:}\rVert^2 + \sigma^2,

which is the paper's diagonal formula
:math:`\lVert [P_{X_t}(\sigma^{-2}P_X^\top P_X + I)^{-1/2}]_{i:}\rVert^2 + \sigma^2`
with :math:`P_Z = K(Z, X) W\Sigma_\beta^{1/2}`, since
:math:`\hat S = \Sigma_\beta^{1/2}(I + \sigma^{-2}\Sigma_\beta^{1/2}P^\top P
\Sigma_\beta^{1/2})^{-1}\Sigma_\beta^{1/2}`. With the features of
:mod:`hdgp.sigp.lowrank`, :math:`K(X_t, X)W = \phi(X_t)v`, so the cost is
:math:`O(t\,r\,(p + m))`.

Centring the projections changes nothing for a flat prior on the intercept
:math:`c` (:math:`c\mathbf 1 + KW\bar\beta` and :math:`c'\mathbf 1 + HKW\bar\beta`
describe the same functions); it makes :math:`c` orthogonal to the random part,
so that its maximum-likelihood value is :math:`\bar y` whatever the variance
parameters. It is estimated, not integrated out: restricted maximum likelihood, which
integrates it out, would give slightly larger variance estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import torch

from .._blocks import in_row_blocks
from .em import EMResult, fit_constant_mean, fit_em
from .lowrank import KernelFactor, pivoted_cholesky
from .subspace import PencilSolver, reduced_pencil

__all__ = ["SIGPModel", "linear_mean_basis", "fit_grid", "fit_one"]

#: Floats of a (block, r) feature matrix: prediction goes in blocks of rows.
_PREDICT_BLOCK_FLOATS = 1 << 22


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
    r"""SIGP fitted to one or more targets that share the subspace :math:`KW = \Phi v`.

    Attributes
    ----------
    factor : KernelFactor
    coef : torch.Tensor of shape (r, m)
        Feature coordinates :math:`v` of the basis functions.
    feature_mean : torch.Tensor of shape (r,)
        Mean training feature :math:`\Phi^\top\mathbf 1/n` (centring of the projections).
    fits : list of EMResult, one per target column
    mean_basis : torch.Tensor of shape (p, q) (q = 0: constant mean)
    """

    factor: KernelFactor
    coef: torch.Tensor
    feature_mean: torch.Tensor
    fits: list[EMResult]
    mean_basis: torch.Tensor

    def features(self, X_new: torch.Tensor) -> torch.Tensor:
        r""":math:`\phi(X_t)`, shape (t, r); reusable across models sharing the factor."""
        return self.factor.features_at(X_new)

    def projected(self, X_new: torch.Tensor) -> torch.Tensor:
        """Centred projections :math:`P_t`, shape (t, m)."""
        return (self.features(X_new) - self.feature_mean) @ self.coef

    def predict_from(
        self, features_new: torch.Tensor, X_new: torch.Tensor, *, latent: bool = False, full_cov: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Mean (t, k) and variance (t, k), or covariance (t, t, k), given the precomputed :math:`\phi(X_t)`.

        With :math:`B B^\top = \hat S` the posterior covariance of :math:`\beta`,
        :math:`\operatorname{cov}(f_t) = P_t \hat S P_t^\top` (its diagonal is the paper's
        formula, Sec. 5), plus :math:`\sigma^2 I` for new observations unless ``latent``.
        """
        P_t = (features_new - self.feature_mean) @ self.coef
        Z_t = X_new @ self.mean_basis
        means, variances = [], []
        for fit in self.fits:
            means.append(fit.theta[0] + Z_t @ fit.theta[1:] + P_t @ fit.beta)
            PB = P_t @ fit.post_cov_sqrt
            noise = 0.0 if latent else fit.noise
            if full_cov:
                cov = PB @ PB.T
                cov.diagonal().add_(noise)
                variances.append(cov)
            else:
                variances.append(PB.pow(2).sum(1) + noise)
        return torch.stack(means, 1), torch.stack(variances, -1)

    def predict(self, X_new: torch.Tensor, *, latent: bool = False,
                full_cov: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictive mean and variance (or covariance) of y (Sec. 5), or of f when ``latent``.

        Without ``full_cov`` the rows are handled in blocks of :data:`_PREDICT_BLOCK_FLOATS` / r
        (each block's kernel columns and features are (block, r)), so memory does not grow with
        the number of rows.
        """
        if full_cov:
            return self.predict_from(self.features(X_new), X_new, latent=latent, full_cov=True)
        return in_row_blocks(lambda xb: self.predict_from(self.features(xb), xb, latent=latent), X_new,
                             max(256, _PREDICT_BLOCK_FLOATS // self.factor.rank))

    def loo_mean(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        r"""Leave-one-out predictive means :math:`y_i - [G^{-1}r]_i / [G^{-1}]_{ii}` (n, k)
        on the training data ``X``, ``Y`` the model was fitted to.

        The mean parameters are held at their full-data values; :math:`G^{-1}` in
        Woodbury form (eq. 13), :math:`O(n m^2)`.
        """
        features = self.factor.features if self.factor.features is not None else self.features(X)
        P = (features - self.feature_mean) @ self.coef
        Z = X @ self.mean_basis
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

    The kernel features are computed once per length-scale, the pencil (eq. 7)
    once per response estimate, the eigenvectors once per ``eta`` (the leading
    ``m`` are nested, so all ranks come from one solve), then the covariance
    parameters per rank: in closed form for the constant mean
    (:func:`~hdgp.sigp.em.fit_constant_mean`), by EM (Alg. 1) per
    ``(rank, mean_penalty)`` for the linear mean.

    Parameters
    ----------
    X : torch.Tensor of shape (n, p)
        Standardised inputs.
    Y : torch.Tensor of shape (n, k)
        Targets (standardised responses or ±1 class codes).
    responses : list of (key, features, ridge)
        Response features :math:`\\Psi` for the pencil, labelled by ``key``.
    mean : {"constant", "linear"}
        The intercept only, or a linear mean with penalty :math:`H = pI` in eq. (14)
        (``mean_penalties`` is ignored for the constant mean).

    Yields
    ------
    params : dict
        ``lengthscale, response, eta, rank`` (and ``mean_penalty`` for the linear mean).
    model : SIGPModel
        Ranks above the numerical rank of the kernel factor are skipped.
    """
    n = X.shape[0]
    basis = linear_mean_basis(X) if mean == "linear" else X.new_zeros(X.shape[1], 0)
    Z = X @ basis
    # H = p I: prior alpha ~ N(0, I / (lam p)) gives the linear mean a per-point prior
    # variance 1/lam on standardised inputs whatever p is (p >> n would otherwise let
    # a weakly penalised linear mean interpolate y and starve the random part)
    H = X.shape[1] * torch.eye(Z.shape[1], dtype=X.dtype, device=X.device)
    penalties = mean_penalties if mean == "linear" else [None]
    for ell in lengthscales:
        factor = pivoted_cholesky(X, ell, tol=kernel_tol, max_rank=max_kernel_rank)
        usable = [m for m in ranks if m <= factor.rank]
        if not usable:
            continue
        feature_mean = factor.features.mean(0)
        centred = factor.features - feature_mean
        for key, Psi, ridge in responses:
            solver = PencilSolver(*reduced_pencil(factor.features, Psi, ridge), n)
            for eta in etas:
                sub = solver.solve(max(usable), eta)
                for m, lam in product(usable, penalties):
                    coef = sub.coef[:, :m]
                    P = centred @ coef
                    if lam is None:
                        fits = [fit_constant_mean(P, Y[:, k]) for k in range(Y.shape[1])]
                    else:
                        fits = [
                            fit_em(P, Y[:, k], Z, H, lam, max_iter=max_iter, tol=tol, warn=False)
                            for k in range(Y.shape[1])
                        ]
                    params = dict(lengthscale=ell, response=key, eta=eta, rank=m)
                    if lam is not None:
                        params["mean_penalty"] = lam
                    yield params, SIGPModel(factor, coef, feature_mean, fits, basis)


def fit_one(X: torch.Tensor, Y: torch.Tensor, responses: list, params: dict, **options) -> SIGPModel | None:
    """SIGP at one hyper-parameter setting ``params`` (as :func:`fit_grid` yields them, with
    ``response`` the key of one of ``responses``); None when its rank exceeds the numerical
    rank of the kernel factor. ``options``: the fitting options of :func:`fit_grid`."""
    chosen = [r for r in responses if r[0] == params["response"]]
    fits = fit_grid(X, Y, chosen, lengthscales=[params["lengthscale"]], etas=[params["eta"]], ranks=[params["rank"]],
                    mean_penalties=[params.get("mean_penalty")], **options)
    return next(fits, (None, None))[1]
