r"""SGPR: sparse GP regression with Titsias' collapsed variational bound.

With inducing inputs :math:`Z` (:math:`m` of them), :math:`Q_{ff} = K_{fu}K_{uu}^{-1}K_{uf}`
and residual :math:`r = y - c`, the bound on the log marginal likelihood is
(Titsias 2009, eq. 9)

.. math::

    \log p(y) \ge \mathcal F = \log N(r \mid 0, Q_{ff} + \sigma_n^2 I)
        - \frac{1}{2\sigma_n^2}\operatorname{tr}(K_{ff} - Q_{ff}).

It is evaluated stably in :math:`O(nm^2)` time and :math:`O(nm)` memory with
:math:`L L^\top = K_{uu} + jI`, :math:`A = L^{-1}K_{uf}/\sigma_n`,
:math:`B = I + AA^\top = L_B L_B^\top` and :math:`c_B = L_B^{-1}Ar/\sigma_n`:

.. math::

    \mathcal F = -\tfrac n2\log 2\pi - \sum_i \log (L_B)_{ii} - \tfrac n2 \log\sigma_n^2
      - \tfrac{1}{2\sigma_n^2} r^\top r + \tfrac12 c_B^\top c_B
      - \tfrac{1}{2\sigma_n^2}\operatorname{tr}K_{ff} + \tfrac12\operatorname{tr}(AA^\top).

:math:`\mathcal F` equals the exact log marginal likelihood when :math:`Z = X`
(and :math:`j \to 0`), and is below it otherwise. The optimal :math:`q(u)`
(Titsias 2009, eq. 10) gives, for the whitened :math:`v = L^{-1}u`,
:math:`\tilde m = L_B^{-\top}c_B` and :math:`\tilde S = B^{-1}`, i.e.
:math:`\alpha_u = L^{-\top}L_B^{-\top}c_B` and :math:`M = L_B^{-1}` in
:class:`~hdgp.inference.inducing.InducingPosterior`.
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior

from ..linalg import robust_cholesky
from ._gaussian import GaussianNoiseModel
from .inducing import InducingPosterior, kmeans_inducing_points

__all__ = ["SGPRModel"]

#: Jitter always added to K_uu, relative to its mean diagonal (as GPflow's default 1e-6).
DEFAULT_JITTER = 1e-6
#: Entries of K_uf evaluated per kernel call. Above this (m·n), K_uf is assembled in row
#: blocks without an autograd graph and its gradient term is taken block by block:
#: the kernel's own intermediates (an additive kernel keeps D per-feature m × n factors
#: plus autograd buffers, about 12·D·m·n floats for OAK) then never exceed one block.
CROSS_BLOCK = 2**20
#: Entries of K_uf per row block once it is blocked (at most CROSS_BLOCK). An additive kernel's
#: temporaries hold D values per entry; blocks kept below glibc's 32 MB mmap threshold are reused
#: from the heap, where larger ones come fresh from the OS at every call and their page faults cost
#: more than the arithmetic (timings: benchmarks/README.md, "Numbers behind choices in src/").
BLOCK_ENTRIES = 2**17


class SGPRModel(GaussianNoiseModel):
    r"""Sparse GP regression (Titsias' collapsed bound), registered as ``ENGINES["sparse"]``.

    The model is :math:`y = c + f(x) + \varepsilon` as for
    :class:`~hdgp.inference.exact.ExactGPModel`; training maximises the bound
    :math:`\mathcal F` of the module docstring instead of :math:`\log p(y)`.

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
        Covariance function of the latent :math:`f`.
    noise_lower_bound : float, default=1e-4
        Lower bound on the noise variance :math:`\sigma_n^2`.
    noise_prior : gpytorch.priors.Prior, optional
        Prior on the noise variance (adds a MAP term to training).
    n_inducing : int, default=512
        Number of inducing points :math:`m` (``m > n`` raises a ValueError).
    random_state : int or None
        Seed of the k-means initialisation.
    X : torch.Tensor of shape (n, d), optional
        Training inputs for the k-means initialisation
        (:func:`~hdgp.inference.inducing.kmeans_inducing_points`).
    discrete : sequence of int, default=()
        Columns k-means keeps on observed values whatever their number of levels
        (e.g. categorical level codes).
    inducing_points : torch.Tensor of shape (m, d), optional
        Explicit inducing inputs (then ``X`` and ``n_inducing`` are ignored).
    learn_inducing : bool, default=False
        Optimise the inducing inputs together with the hyperparameters.
    jitter : float, default=1e-6
        Jitter added to :math:`K_{uu}`, relative to its mean diagonal.
    profile_constant : bool, default=True
        Profile the constant mean out of the bound, as
        :class:`~hdgp.inference.exact.ExactGPModel` does: :math:`\mathcal F` depends on
        :math:`c` only through :math:`\log N(y - c \mid 0, Q_{ff} + \sigma_n^2 I)`, so
        its maximiser is :math:`\hat c = \mathbf 1^\top Q_y^{-1} y / \mathbf 1^\top Q_y^{-1}\mathbf 1`
        (with :math:`Q_y^{-1} = (I - A^\top B^{-1} A)/\sigma_n^2`, :math:`O(nm)` given the
        factors), written to ``mean`` at every evaluation.

    References
    ----------
    Titsias (2009), *Variational learning of inducing variables in sparse Gaussian
    processes*, AISTATS, eqs. 9–10.
    """

    uses_inducing_points = True

    def __init__(self, kernel: Kernel, *, noise_lower_bound: float = 1e-4, noise_prior: Prior | None = None,
                 n_inducing: int = 512, random_state=None, X: torch.Tensor | None = None, discrete=(),
                 inducing_points: torch.Tensor | None = None, learn_inducing: bool = False,
                 jitter: float = DEFAULT_JITTER, profile_constant: bool = True):
        super().__init__(kernel, GreaterThan(noise_lower_bound), noise_prior)
        self.profile_constant = bool(profile_constant)
        self.mean.raw_constant.requires_grad_(not self.profile_constant)
        if inducing_points is None:
            if X is None:
                raise ValueError("SGPRModel needs either the training inputs `X` or explicit `inducing_points`.")
            inducing_points = torch.as_tensor(
                kmeans_inducing_points(X, n_inducing, random_state, discrete=discrete), dtype=X.dtype, device=X.device
            )
        if inducing_points.dim() != 2:
            raise ValueError(f"inducing_points must have shape (m, d), got {tuple(inducing_points.shape)}.")
        self.inducing_points = torch.nn.Parameter(inducing_points.clone(), requires_grad=learn_inducing)
        self.jitter = jitter

    def _check(self, X: torch.Tensor) -> None:
        m = self.inducing_points.shape[0]
        if m > X.shape[0]:
            raise ValueError(
                f"SGPR has {m} inducing points but only {X.shape[0]} training rows; use at most n "
                "inducing points (or exact inference)."
            )
        if X.shape[-1] != self.inducing_points.shape[-1]:
            raise ValueError(
                f"X has {X.shape[-1]} columns but the inducing points have {self.inducing_points.shape[-1]}."
            )

    def _chol_uu(self, Z: torch.Tensor) -> tuple[torch.Tensor, float]:
        Kuu = self.kernel(Z).to_dense()
        base = self.jitter * Kuu.detach().diagonal().mean().abs().item()
        Kuu = Kuu + base * torch.eye(Z.shape[0], dtype=Kuu.dtype, device=Kuu.device)
        L, extra = robust_cholesky(Kuu)
        return L, base + extra

    def _row_blocks(self, n: int) -> list[slice]:
        """All training rows while m·n is at most :data:`CROSS_BLOCK`, else blocks of
        min(:data:`CROSS_BLOCK`, :data:`BLOCK_ENTRIES`) / m rows."""
        m = self.inducing_points.shape[0]
        if n * m <= CROSS_BLOCK:
            return [slice(0, n)]
        step = max(1, min(CROSS_BLOCK, BLOCK_ENTRIES) // m)
        return [slice(start, start + step) for start in range(0, n, step)]

    def _light_cross(self, Z: torch.Tensor, X: torch.Tensor) -> bool:
        """Whether the kernel evaluates :math:`K_{uf}` with a graph in memory of the order of its own
        size (``memory_light_cross``, e.g. the OAK kernel's fused sum): then it is evaluated whole, once,
        whatever :data:`CROSS_BLOCK` says."""
        light = getattr(self.kernel, "memory_light_cross", None)
        return bool(light is not None and light(Z, X))

    @torch.no_grad()
    def _cross(self, Z: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """:math:`K_{uf}` (m, n), evaluated block by block without an autograd graph."""
        if self._light_cross(Z, X):
            return self.kernel(Z, X).to_dense()
        return torch.cat([self.kernel(Z, X[rows]).to_dense() for rows in self._row_blocks(X.shape[0])], dim=1)

    def _blockwise_cross_term(self, G: torch.Tensor, Z: torch.Tensor, X: torch.Tensor, blocks) -> torch.Tensor:
        r"""A term with the gradient of :math:`\sum_{ij} G_{ij} k(z_i, x_j)` (not its value) for a
        :math:`K_{uf}` built without a graph: each row block is evaluated once more, with one, and
        differentiated at once, so memory stays one block's (a checkpoint would evaluate every block
        twice more: once for the value, which the surrogate does not need, and once in the backward)."""
        inputs = [p for p in self.kernel.parameters() if p.requires_grad] + ([Z] if Z.requires_grad else [])
        if not inputs or not torch.is_grad_enabled():
            return G.new_zeros(())
        totals = [torch.zeros_like(p) for p in inputs]
        for rows in blocks:
            block = (G[:, rows] * self.kernel(Z, X[rows]).to_dense()).sum()
            for total, grad in zip(totals, torch.autograd.grad(block, inputs, allow_unused=True)):
                if grad is not None:
                    total.add_(grad)
        return sum((total * p).sum() for total, p in zip(totals, inputs))

    def _collapsed(self, X: torch.Tensor, y: torch.Tensor):
        """Shared pieces of the bound and the posterior (module docstring notation)."""
        self._check(X)
        Z = self.inducing_points
        sigma = self.noise.sqrt()
        L, jitter = self._chol_uu(Z)
        r = y - self.constant
        A, AAT, LB, cB = self._factor_b(L, self._cross(Z, X), sigma, r)
        return L, jitter, A, AAT, LB, r, cB

    @staticmethod
    def _factor_b(L: torch.Tensor, Kuf: torch.Tensor, sigma: torch.Tensor, r: torch.Tensor):
        r""":math:`A = L^{-1} K_{uf} / \sigma`, :math:`AA^\top`, :math:`L_B = \mathrm{chol}(I + AA^\top)`
        and :math:`c_B = L_B^{-1} A r / \sigma` (module docstring notation).

        B's eigenvalues are >= 1 in exact arithmetic, but at extreme hyperparameters
        (near-singular :math:`K_{uu}`, huge A) rounding or overflow can still break its
        factorisation; the optimiser must then see NotPositiveDefiniteError (it backs
        off), not a LinAlgError, hence :func:`robust_cholesky`.
        """
        A = torch.linalg.solve_triangular(L, Kuf, upper=False) / sigma
        AAT = A @ A.T
        LB, _ = robust_cholesky(AAT + torch.eye(AAT.shape[0], dtype=AAT.dtype, device=AAT.device), warn=False)
        cB = torch.linalg.solve_triangular(LB, (A @ r).unsqueeze(-1), upper=False).squeeze(-1) / sigma
        return A, AAT, LB, cB

    def neg_log_marginal_likelihood(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r"""Training objective :math:`-\mathcal F` (Titsias 2009, eq. 9), an upper bound on :math:`-\log p(y)`.

        The value is computed stably without autograd (module docstring). The
        gradient is that of a surrogate linear in :math:`K_{uf}, K_{uu}, \sigma_n^2, c`
        and :math:`\operatorname{diag}K_{ff}` whose coefficients are the partial
        derivatives of :math:`\mathcal F` (with :math:`\alpha_u` and
        :math:`\mu = K_{fu}\alpha_u` the posterior weights and training-point mean):

        .. math::

            \frac{\partial\mathcal F}{\partial K_{uf}} = \tfrac{1}{\sigma_n^2}\big[
                (L^{-\top}(I - B^{-1})L^{-1} - \alpha_u\alpha_u^\top) K_{uf} + \alpha_u r^\top\big],\qquad
            \frac{\partial\mathcal F}{\partial K_{uu}} = \tfrac12 L^{-\top}(I - B^{-1} - AA^\top)L^{-1}
                - \tfrac12\alpha_u\alpha_u^\top,

        .. math::

            \frac{\partial\mathcal F}{\partial \sigma_n^2} = \frac{\lVert r-\mu\rVert^2 + \operatorname{tr}K_{ff}}{2\sigma_n^4}
                - \frac{n}{2\sigma_n^2} + \frac{\operatorname{tr}(B^{-1}AA^\top) - \operatorname{tr}(AA^\top)}{2\sigma_n^2},\quad
            \frac{\partial\mathcal F}{\partial c} = \frac{\mathbf 1^\top(r-\mu)}{\sigma_n^2},\quad
            \frac{\partial\mathcal F}{\partial (K_{ff})_{ii}} = -\frac{1}{2\sigma_n^2}.

        :math:`K_{uu}` carries the jitter :math:`j = \epsilon\,\overline{\operatorname{diag}K_{uu}}`,
        which moves with the kernel, so the surrogate also has
        :math:`\operatorname{tr}(\partial\mathcal F/\partial K_{uu})\, j`.
        Autograd then only differentiates the kernel evaluations, so one
        evaluation costs about three :math:`m^2 n` products (the triangular solve,
        :math:`AA^\top` and :math:`GK_{uf}`) instead of about six. When
        :math:`mn` exceeds :data:`CROSS_BLOCK`, :math:`K_{uf}` is built in row blocks
        without a graph and the gradient of :math:`\sum G_{uf} \odot K_{uf}` is taken per
        block (one extra kernel evaluation, memory independent of :math:`n` beyond
        the dense :math:`m \times n` matrices), unless the kernel keeps no per-entry
        intermediates in its graph (``memory_light_cross``): then :math:`K_{uf}` is evaluated
        once, with its graph, and differentiated once.

        Parameters
        ----------
        X : torch.Tensor of shape (n, d)
        y : torch.Tensor of shape (n,)

        Returns
        -------
        torch.Tensor
            Scalar :math:`-\mathcal F`, differentiable in every hyperparameter (and in the
            inducing inputs when they are learned).
        """
        self._check(X)
        n = y.shape[0]
        Z = self.inducing_points
        blocks = self._row_blocks(n)
        whole = len(blocks) == 1 or self._light_cross(Z, X)
        Kuu = self.kernel(Z).to_dense()
        Kuf = self.kernel(Z, X).to_dense() if whole else self._cross(Z, X)
        kff = self.kernel(X, diag=True)
        noise = self.noise
        c = self.constant
        with torch.no_grad():
            # the coefficients cancel heavily (e.g. L^-T (I - B^-1) L^-1 - αα^T): they are computed in
            # float64 also for float32 kernels, whose gradients would otherwise be wrong by O(1)
            K_uu, K_uf = Kuu.detach().double(), Kuf.detach().double()
            s = noise.detach().double()
            sigma = s.sqrt()
            eye = torch.eye(K_uu.shape[0], dtype=K_uu.dtype, device=K_uu.device)
            jitter = self.jitter * K_uu.diagonal().mean().abs().item()
            L, _ = robust_cholesky(K_uu + jitter * eye)
            if self.profile_constant:  # c_B is linear in r = y - c: c_B(y) - ĉ c_B(1)
                r = y.detach().double()
                A, AAT, LB, cB = self._factor_b(L, K_uf, sigma, r)
                cB_1 = torch.linalg.solve_triangular(LB, A.sum(-1, keepdim=True), upper=False).squeeze(-1) / sigma
                c_hat = (r.sum() / s - cB_1.dot(cB)) / (n / s - cB_1.dot(cB_1))  # 1'Q_y^-1 y / 1'Q_y^-1 1
                r, cB = r - c_hat, cB - c_hat * cB_1
                self.mean.constant.copy_(c_hat)
            else:
                r = (y - c.detach()).double()
                A, AAT, LB, cB = self._factor_b(L, K_uf, sigma, r)
            kff_trace = kff.detach().double().sum()
            value = (
                0.5 * n * math.log(2 * math.pi) + LB.diagonal().log().sum() + 0.5 * n * s.log()
                + 0.5 * r.dot(r) / s - 0.5 * cB.dot(cB) + 0.5 * kff_trace / s - 0.5 * AAT.diagonal().sum()
            )
            # posterior weights alpha_u = L^-T L_B^-T c_B and training-point mean mu = K_fu alpha_u
            alpha = torch.linalg.solve_triangular(
                L.T, torch.linalg.solve_triangular(LB.T, cB.unsqueeze(-1), upper=True), upper=True
            ).squeeze(-1)
            resid = r - K_uf.T @ alpha
            Binv = torch.cholesky_inverse(LB)
            Linv = torch.linalg.solve_triangular(L, eye, upper=False)
            outer = torch.outer(alpha, alpha)
            G_uf = (Linv.T @ (eye - Binv) @ Linv - outer) @ K_uf
            G_uf.add_(torch.outer(alpha, r)).div_(s)
            G_uu = 0.5 * (Linv.T @ (eye - Binv - AAT) @ Linv - outer)
            tr_BinvAAT = (Binv * AAT).sum()
            g_s = (0.5 * (resid.dot(resid) + kff_trace) / s**2 - 0.5 * n / s
                   + 0.5 * (tr_BinvAAT - AAT.diagonal().sum()) / s)
            g_c = resid.sum() / s
            value, G_uf, G_uu, g_s, g_c = (t.to(Kuu.dtype) for t in (value, G_uf, G_uu, g_s, g_c))
        cross_term = (G_uf * Kuf).sum() if whole else self._blockwise_cross_term(G_uf, Z, X, blocks)
        # the jitter j = jitter·mean(diag K_uu) moves with the kernel too: ∂F/∂j = tr(G_uu)
        jitter_term = G_uu.trace() * self.jitter * Kuu.diagonal().mean()
        surrogate_F = cross_term + (G_uu * Kuu).sum() + jitter_term + g_s * noise + g_c * c - 0.5 * kff.sum() / noise.detach()
        return value - (surrogate_F - surrogate_F.detach())

    @torch.no_grad()
    def posterior(self, X: torch.Tensor, y: torch.Tensor) -> InducingPosterior:
        r"""Optimal :math:`q(u)` given the data (Titsias 2009, eq. 10), ready to predict.

        Returns
        -------
        InducingPosterior
            With :math:`\alpha_u = L^{-\top}L_B^{-\top}c_B` and :math:`M = L_B^{-1}`.
        """
        L, jitter, _, _, LB, _, cB = self._collapsed(X, y)
        eye = torch.eye(LB.shape[0], dtype=LB.dtype, device=LB.device)
        m_white = torch.linalg.solve_triangular(LB.T, cB.unsqueeze(-1), upper=True)
        alpha = torch.linalg.solve_triangular(L.T, m_white, upper=True).squeeze(-1)
        M = torch.linalg.solve_triangular(LB, eye, upper=False)
        return InducingPosterior(self.kernel, self.inducing_points.detach().clone(), L, alpha, M,
                                 self.constant.clone(), self.noise.clone(), jitter)
