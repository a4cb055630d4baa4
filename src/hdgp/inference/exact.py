r"""Exact (Cholesky) Gaussian-process inference with a Gaussian likelihood.

The model is :math:`y = c + f(x) + \varepsilon`, :math:`f \sim GP(0, k)`,
:math:`\varepsilon \sim N(0, \sigma_n^2)` (Rasmussen & Williams 2006, ch. 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from gpytorch.kernels import Kernel, ScaleKernel
from gpytorch.priors import Prior

from ..kernels import log_greater_than
from ..linalg import folded_inverse, robust_cholesky
from ._gaussian import GaussianNoiseModel
from ._posterior import GaussianPosterior

__all__ = ["ExactGPModel", "ExactPosterior"]


class ExactGPModel(GaussianNoiseModel):
    r"""Constant mean + kernel + Gaussian noise, with the exact marginal likelihood.

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
        Covariance function of the latent :math:`f` (including any output scale).
    noise_lower_bound : float, default=1e-4
        Lower bound on the noise variance :math:`\sigma_n^2`.
    noise_prior : gpytorch.priors.Prior, optional
        Prior on the noise variance, e.g. the papers' smoothed-box prior
        (:func:`hdgp.priors.smoothed_box_noise_prior`); adds a MAP term to training.
    profile_constant : bool, default=True
        Profile the constant mean out of the likelihood instead of learning it: for
        given kernel and noise the best constant has the closed form (generalised
        least squares)

        .. math::

            \hat c = \frac{\mathbf 1^\top K_y^{-1} y}{\mathbf 1^\top K_y^{-1} \mathbf 1},

        so :meth:`neg_log_marginal_likelihood` returns
        :math:`\min_c -\log p(y \mid X, \theta, c)` and stores :math:`\hat c` in
        ``mean``. The minima over the other hyper-parameters are those of the joint
        problem, but the optimiser does not creep along the flat ridge where a large
        output scale trades off against the constant (``benchmarks/projected_speed.py``
        counts the evaluations).
        ``mean.raw_constant`` is then not trainable.
    """

    def __init__(self, kernel: Kernel, *, noise_lower_bound: float = 1e-4,
                 noise_prior: Prior | None = None, profile_constant: bool = True):
        super().__init__(kernel, log_greater_than(noise_lower_bound), noise_prior)
        self.profile_constant = bool(profile_constant)
        self.mean.raw_constant.requires_grad_(not self.profile_constant)

    def neg_log_marginal_likelihood(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r"""Exact :math:`-\log p(y \mid X, \theta)` with a cheap analytic gradient.

        .. math::

            -\log p(y) = \tfrac12 r^\top K_y^{-1} r + \tfrac12 \log|K_y| + \tfrac n2 \log 2\pi,
            \quad r = y - c,\ K_y = K + \sigma_n^2 I

        (Rasmussen & Williams 2006, eq. 2.30). The gradient uses the trace formula
        (R&W eq. 5.9, see :class:`_NegLogMarginalLikelihood`): autograd never
        differentiates through the Cholesky factorisation, so one factorisation
        plus one inverse from it is the whole cubic cost. With
        ``profile_constant`` the value is minimised over :math:`c` in closed form and
        :math:`\hat c` is written to ``mean`` (a side effect of every call).

        Raises
        ------
        hdgp.exceptions.NotPositiveDefiniteError
            If :math:`K_y` is not PD even after jitter escalation.
        """
        K, scale = self._scaled_kernel(X)
        if not self.profile_constant:
            return _NegLogMarginalLikelihood.apply(K, scale, self.noise, y - self.constant, False)[0]
        value, constant = _NegLogMarginalLikelihood.apply(K, scale, self.noise, y, True)
        with torch.no_grad():
            self.mean.constant.copy_(constant)
        return value

    def _scaled_kernel(self, X: torch.Tensor):
        """``(K, s)`` with the kernel matrix :math:`s K`; for a plain ``ScaleKernel`` the base matrix
        and the output scale, so that :class:`_NegLogMarginalLikelihood` applies the scale
        while it forms :math:`K_y` (``s = None``: ``K`` is the whole matrix)."""
        k = self.kernel
        if type(k) is ScaleKernel and k.active_dims is None and k.outputscale.dim() == 0:  # not a subclass's forward
            return k.base_kernel(X).to_dense(), k.outputscale
        return k(X).to_dense(), None

    @torch.no_grad()
    def posterior(self, X: torch.Tensor, y: torch.Tensor) -> "ExactPosterior":
        """Condition on training data; the result predicts at new inputs."""
        L, jitter = robust_cholesky(_noisy_matrix(*self._scaled_kernel(X), self.noise))
        alpha = torch.cholesky_solve((y - self.constant).unsqueeze(-1), L).squeeze(-1)
        return ExactPosterior(self.kernel, X, L, alpha, self.constant.clone(), self.noise.clone(), jitter)


def _noisy_matrix(K: torch.Tensor, scale, noise: torch.Tensor) -> torch.Tensor:
    """:math:`K_y = sK + \\sigma_n^2 I` as a new (detached) tensor; ``scale`` None means :math:`s = 1`."""
    Ky = K.detach().clone() if scale is None else K.detach() * scale.detach()
    Ky.diagonal().add_(noise.detach())
    return Ky


class _NegLogMarginalLikelihood(torch.autograd.Function):
    r"""``(L, ĉ)``: L = -log N(r - ĉ | 0, sK + σ²I) from one Cholesky factorisation, with the analytic backward

    .. math::

        W = \tfrac12 (K_y^{-1} - \alpha\alpha^\top),\quad
        \frac{\partial L}{\partial K} = s W,\quad
        \frac{\partial L}{\partial s} = \langle W, K\rangle,\quad
        \frac{\partial L}{\partial \sigma^2} = \operatorname{tr} W,\quad
        \frac{\partial L}{\partial r} = \alpha

    (R&W eq. 5.9; ``scale`` :math:`s` is ``None`` for :math:`s = 1`). Passing ∂L/∂K
    straight to the kernel's backward avoids autograd through the factorisation, and
    taking the output scale here saves two of the n × n products that a ``ScaleKernel``
    and a separate ``W * grad`` make forward and backward.

    Since :math:`K` is symmetric, any :math:`\tilde W` with
    :math:`\tilde W + \tilde W^\top = 2W` gives the same gradients (each is an inner
    product with a symmetric matrix); :math:`K_y^{-1}` comes as such a folded matrix from
    :func:`~hdgp.linalg.folded_inverse` (one triangle on the CPU, so less work than the
    full inverse).

    With ``profile`` the shift :math:`\hat c = \mathbf 1^\top K_y^{-1} r / \mathbf 1^\top K_y^{-1}\mathbf 1`
    minimises L (else :math:`\hat c = 0`) and :math:`\alpha = K_y^{-1}(r - \hat c)`;
    since :math:`\partial L / \partial c = 0` there, the same formulas give the gradient
    of the profiled value (envelope theorem). :math:`\hat c` is not differentiable.
    """

    @staticmethod
    def forward(ctx, K, scale, noise, r, profile: bool):
        n = r.shape[0]
        # jitter at an optimiser's trial point is no news for the user (most are left behind);
        # the fitted model's own factorisation (posterior) warns when it needs jitter
        L, _ = robust_cholesky(_noisy_matrix(K, scale, noise), warn=False)
        r = r.detach()
        if profile:  # one solve with two right-hand sides: K_y^{-1} r and K_y^{-1} 1
            a, b = torch.cholesky_solve(torch.stack([r, torch.ones_like(r)], dim=-1), L).unbind(-1)
            shift = a.sum() / b.sum()
            alpha, r = a.sub_(b, alpha=shift), r - shift
        else:
            shift = r.new_zeros(())
            alpha = torch.cholesky_solve(r.unsqueeze(-1), L).squeeze(-1)
        value = 0.5 * r.dot(alpha) + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)
        if any(ctx.needs_input_grad):
            W2 = folded_inverse(L).addr_(alpha, alpha, alpha=-1.0)  # 2W folded: the ½ joins the backward's factor
            ctx.save_for_backward(W2, alpha, K if scale is not None and ctx.needs_input_grad[1] else None, scale)
        ctx.mark_non_differentiable(shift)
        return value, shift

    @staticmethod
    def backward(ctx, grad, _):
        W2, alpha, K, scale = ctx.saved_tensors
        half = 0.5 * grad
        factor = half if scale is None else half * scale
        g_K = W2 * factor if ctx.needs_input_grad[0] else None
        # (a cascade sum, not a BLAS dot: a float32 dot over n^2 terms loses digits)
        g_scale = half * (W2 * K.detach()).sum() if K is not None else None
        g_noise = W2.diagonal().sum() * half if ctx.needs_input_grad[2] else None
        return g_K, g_scale, g_noise, alpha * grad, None


@dataclass
class ExactPosterior(GaussianPosterior):
    r"""Posterior of an :class:`ExactGPModel` given training data.

    Attributes
    ----------
    kernel : Kernel
    X : torch.Tensor of shape (n, d)
        Training inputs.
    L : torch.Tensor of shape (n, n)
        Cholesky factor of :math:`K + \sigma_n^2 I` (+ jitter).
    alpha : torch.Tensor of shape (n,)
        :math:`(K + \sigma_n^2 I)^{-1}(y - c)`.
    constant, noise : torch.Tensor
        Constant mean :math:`c` and noise variance :math:`\sigma_n^2`.
    jitter : float
        Jitter that was added to the diagonal.
    """

    kernel: Kernel
    X: torch.Tensor
    L: torch.Tensor
    alpha: torch.Tensor
    constant: torch.Tensor
    noise: torch.Tensor
    jitter: float = 0.0

    @torch.no_grad()
    def summand(self, cross: torch.Tensor, prior: torch.Tensor, *, full_cov: bool = False):
        r"""Posterior of a summand :math:`g` of :math:`f = g + h` (:math:`g, h` independent a priori).

        With :math:`C = k_g(X_*, X)` (``cross``) and :math:`V = L^{-1}C^\top`,

        .. math::

            \mu_g = C\alpha,\qquad \Sigma_g = k_g(X_*, X_*) - V^\top V
                = k_g(X_*, X_*) - C (K + \sigma_n^2 I)^{-1} C^\top,

        the Gaussian conditional of :math:`g(X_*)` given :math:`y`; with :math:`g = f`
        this is R&W Alg. 2.1, lines 4–6.

        Parameters
        ----------
        cross : torch.Tensor of shape (t, n)
            :math:`k_g(X_*, X)`.
        prior : torch.Tensor of shape (t,), or (t, t) when ``full_cov``
            Prior variances :math:`k_g(x_*, x_*)` (covariance :math:`k_g(X_*, X_*)`).

        Returns
        -------
        mean : torch.Tensor of shape (t,)
            Without the constant mean.
        var : torch.Tensor of shape (t,) (clamped at 0), or (t, t) when ``full_cov``
            Times ``variance_scale``.
        """
        V = torch.linalg.solve_triangular(self.L, cross.T, upper=False)
        if full_cov:
            return cross @ self.alpha, (prior - V.T @ V) * self.variance_scale
        return cross @ self.alpha, (prior - V.square().sum(0)).clamp_min(0.0) * self.variance_scale
