r"""SVGP: stochastic variational GP with minibatches (regression and binary classification).

With whitened inducing values :math:`v = L_{uu}^{-1}u \sim q(v) = N(\tilde m, \tilde S)` the evidence lower
bound is (Hensman, Matthews & Ghahramani 2015, eq. 17; Hensman, Fusi & Lawrence 2013, eq. 4)

.. math::

    \mathcal L = \sum_{i=1}^n \mathbb E_{q(f_i)}[\log p(y_i \mid f_i)] - \mathrm{KL}[q(v)\,\|\,N(0, I)]
    \le \log p(y),

where :math:`q(f_i)` is Gaussian with the mean and variance of
:class:`~hdgp.inference.inducing.InducingPosterior`. The sum over data is estimated without bias from
minibatches (scaled by :math:`n/b`), so one step costs :math:`O(bm^2 + m^3)` and only the current minibatch is
ever moved to the model's device. The likelihood is Gaussian (regression; the expectation is closed-form) or
Bernoulli with probit link :math:`p(y=1\mid f) = \Phi(f)` (binary classification; 1-D Gauss–Hermite
quadrature).

Training (:func:`fit_svgp`) takes natural-gradient steps on :math:`q(v)` (Salimbeni, Eleftheriadis & Hensman
2018) and Adam steps on the kernel hyperparameters, the inducing inputs, the constant mean and the noise. When
the whole data set is one batch the ELBO is a deterministic function (the Bernoulli expectation uses fixed
quadrature nodes), and :func:`fit_svgp` can instead run L-BFGS on the profiled bound
:math:`\max_{q(v)}\mathcal L(\theta, q)`, a function of the kernel hyperparameters, the constant mean and the
inducing inputs :math:`\theta` alone: each evaluation solves for the optimal Gaussian :math:`q(v)` in
closed-form steps (:meth:`SVGPModel._optimal_q`, a natural-gradient fixed point; Opper & Archambeau 2009) and
differentiates the ELBO in :math:`\theta` at it (:meth:`SVGPModel._profiled_neg_elbo`), so the quasi-Newton
state holds the few hyperparameters and inducing inputs, not the :math:`m(m+3)/2` entries of :math:`q(v)`. The
GPyTorch machinery does the work: :class:`~gpytorch.variational.VariationalStrategy`,
:class:`~gpytorch.variational.NaturalVariationalDistribution`, :class:`~gpytorch.mlls.VariationalELBO` and
:class:`~gpytorch.optim.NGD`.
"""

from __future__ import annotations

import math
import warnings

import gpytorch
import numpy as np
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import BernoulliLikelihood, GaussianLikelihood
from gpytorch.means import ConstantMean
from gpytorch.priors import Prior
from gpytorch.utils.cholesky import psd_safe_cholesky
from gpytorch.variational import (
    CholeskyVariationalDistribution,
    NaturalVariationalDistribution,
    VariationalStrategy,
)
from tqdm.auto import tqdm

from ..exceptions import ConvergenceWarning, NotPositiveDefiniteError, NumericalWarning
from ..linalg import min_norm_lstsq, robust_cholesky
from ..training import FitResult, fit_hyperparameters
from ._gaussian import ConstantMeanPriors
from .inducing import InducingPosterior, kmeans_inducing_points

__all__ = ["SVGPModel", "fit_svgp"]

#: Gauss–Hermite nodes of the Bernoulli expectation (GPyTorch's default, so both ELBOs agree).
_GH_NODES = 20

#: Minibatch size :func:`fit_svgp` uses when none is given (``min(DEFAULT_BATCH_SIZE, n)``).
DEFAULT_BATCH_SIZE = 1024

#: Rows per chunk when the full-data ELBO is evaluated for reporting.
_ELBO_CHUNK = 4096

#: Inside a profiled L-BFGS evaluation the q(v) solve stops once a step gains less than this per row, and
#: L-BFGS's relative tolerance on the per-row objective is raised to ``objective_resolution``: an evaluation
#: is exact only to its inner solve, so L-BFGS stops at changes well above that resolution (as for SKI).
_PROFILED_Q_TOL, _PROFILED_FTOL = 1e-7, 1e-5


class SVGPModel(ConstantMeanPriors, gpytorch.models.ApproximateGP):
    r"""Sparse variational GP, registered as ``ENGINES["variational"]`` (Gaussian likelihood).

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
        Covariance function of the latent :math:`f`.
    noise_lower_bound : float, default=1e-4
        Lower bound on the Gaussian noise variance (regression only).
    noise_prior : gpytorch.priors.Prior, optional
        Prior on the noise variance (regression only; enters the ELBO as a MAP term).
    n_inducing, random_state, X, discrete, inducing_points
        The inducing inputs and their k-means initialisation, as in
        :class:`~hdgp.inference.sparse.SGPRModel` (``X`` may also be an ndarray).
    likelihood : {"gaussian", "bernoulli"}, default="gaussian"
        Observation model; ``"bernoulli"`` expects labels in {0, 1}.
    learn_inducing : bool, default=True
        Optimise the inducing inputs with Adam.
    natural_gradient : bool, default=True
        Parametrise :math:`q(v)` by natural parameters and train it with NGD;
        otherwise a Cholesky parametrisation trained by Adam.
    batch_size : int or None, default=None
        Default minibatch size of :meth:`fit_model` (None: ``min(1024, n)``).
    lr, ngd_lr : float
        Default Adam and natural-gradient learning rates of :meth:`fit_model`.

    References
    ----------
    Hensman, Fusi & Lawrence (2013), *Gaussian processes for big data*, UAI.
    Hensman, Matthews & Ghahramani (2015), *Scalable variational GP classification*, AISTATS.
    Salimbeni, Eleftheriadis & Hensman (2018), *Natural gradients in practice*, AISTATS.
    """

    uses_inducing_points = True

    def __init__(self, kernel: Kernel, *, noise_lower_bound: float = 1e-4, noise_prior: Prior | None = None,
                 n_inducing: int = 512, random_state=None, X=None, discrete=(), inducing_points: torch.Tensor | None = None,
                 likelihood: str = "gaussian", learn_inducing: bool = True, natural_gradient: bool = True,
                 batch_size: int | None = None, lr: float = 0.01, ngd_lr: float = 0.1):
        if inducing_points is None:
            if X is None:
                raise ValueError("SVGPModel needs either the training inputs `X` or explicit `inducing_points`.")
            ref = X if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X, dtype=np.float64))
            inducing_points = torch.as_tensor(
                kmeans_inducing_points(X, n_inducing, random_state, discrete=discrete), dtype=ref.dtype, device=ref.device
            )
        if inducing_points.dim() != 2:
            raise ValueError(f"inducing_points must have shape (m, d), got {tuple(inducing_points.shape)}.")
        if likelihood not in ("gaussian", "bernoulli"):
            raise ValueError(f"likelihood must be 'gaussian' or 'bernoulli', got {likelihood!r}.")
        m = inducing_points.shape[0]
        dist_cls = NaturalVariationalDistribution if natural_gradient else CholeskyVariationalDistribution
        # q(v) starts at the prior N(0, I) exactly (no random mean jitter: same seed, same fit)
        strategy = VariationalStrategy(self, inducing_points.clone(), dist_cls(m, mean_init_std=0.0),
                                       learn_inducing_locations=learn_inducing)
        super().__init__(strategy)
        self.kernel = kernel
        self.mean = ConstantMean()
        if likelihood == "gaussian":
            self.likelihood = GaussianLikelihood(noise_constraint=GreaterThan(noise_lower_bound),
                                                 noise_prior=noise_prior)
        else:
            self.likelihood = BernoulliLikelihood()
        self.likelihood_name = likelihood
        self.natural_gradient = natural_gradient
        self.batch_size = batch_size
        self.lr = lr
        self.ngd_lr = ngd_lr
        self.to(dtype=inducing_points.dtype, device=inducing_points.device)

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """Prior :math:`N(c, K)` at ``x`` (used by the variational strategy)."""
        return MultivariateNormal(self.mean(x), self.kernel(x))

    @property
    def inducing_points(self) -> torch.Tensor:
        """Inducing inputs :math:`Z` (m, d)."""
        return self.variational_strategy.inducing_points

    @property
    def noise(self) -> torch.Tensor | None:
        """Gaussian noise variance :math:`\\sigma_n^2` (None for the Bernoulli likelihood)."""
        return self.likelihood.noise.reshape(()) if self.likelihood_name == "gaussian" else None

    def elbo(self, X, y) -> torch.Tensor:
        r"""Full-data ELBO :math:`\mathcal L` (module docstring), summed over chunks of rows (differentiable;
        wrap in :func:`torch.no_grad` when only the value is needed)."""
        was_training = self.training
        self.train()  # the variational strategy's training path gives the marginals q(f_i)
        ref = self.constant
        n = len(y)
        total = ref.new_zeros(())
        for start in range(0, n, _ELBO_CHUNK):
            rows = slice(start, start + _ELBO_CHUNK)
            total += self.likelihood.expected_log_prob(_rows(y, rows, ref), self(_rows(X, rows, ref))).sum()
        total -= self.variational_strategy.kl_divergence().sum()
        self.train(was_training)
        return total

    def neg_log_marginal_likelihood(self, X, y) -> torch.Tensor:
        r""":math:`-\mathcal L`, an upper bound on :math:`-\log p(y)` (full-batch L-BFGS minimises it, profiled
        over :math:`q(v)`; minibatch training uses unbiased estimates of it, :func:`fit_svgp`)."""
        if getattr(self, "_profile_q", False):
            return self._profiled_neg_elbo(X, y)
        return -self.elbo(X, y)

    # ------------------------------------------------- closed-form whitened ELBO
    def _expected_log_lik(self, mu: torch.Tensor, var: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r""":math:`\mathbb E_{N(f_i \mid \mu_i, v_i)}[\log p(y_i \mid f_i)]` per row.

        Gaussian: :math:`-\tfrac12\log(2\pi\sigma_n^2) - ((y_i-\mu_i)^2 + v_i)/(2\sigma_n^2)`;
        Bernoulli (probit): Gauss–Hermite quadrature with GPyTorch's nodes,
        :math:`\sum_k w_k \log\Phi\big((2y_i-1)(\mu_i + \sqrt{2v_i}\,t_k)\big)/\sqrt\pi`.
        """
        if self.likelihood_name == "gaussian":
            noise = self.likelihood.noise.reshape(())
            return -0.5 * torch.log(2 * math.pi * noise) - ((y - mu) ** 2 + var) / (2 * noise)
        t, w = _gauss_hermite(mu)
        f = mu.unsqueeze(-1) + torch.sqrt(2.0 * var).unsqueeze(-1) * t
        return (torch.special.log_ndtr((2.0 * y - 1.0).unsqueeze(-1) * f) * w).sum(-1)

    def _expected_log_lik_grads(self, mu: torch.Tensor, var: torch.Tensor, y: torch.Tensor):
        r""":math:`\sum_i\mathbb E_i` of :meth:`_expected_log_lik` and its derivatives in :math:`\mu_i` and :math:`v_i`.

        Gaussian: :math:`(y_i-\mu_i)/\sigma_n^2` and :math:`-1/(2\sigma_n^2)`. Bernoulli, differentiating
        the quadrature with :math:`z_{ik} = s_i(\mu_i + \sqrt{2v_i}\,t_k)`, :math:`s_i = 2y_i-1` and
        :math:`r = \phi/\Phi`: :math:`\sum_k w_k s_i r(z_{ik})/\sqrt\pi` and
        :math:`\sum_k w_k s_i r(z_{ik})\,t_k/(\sqrt{2v_i}\sqrt\pi)`.
        """
        if self.likelihood_name == "gaussian":
            noise = self.likelihood.noise.reshape(()).detach()
            expected = self._expected_log_lik(mu, var, y).sum().detach()
            return expected, (y - mu) / noise, torch.full_like(var, -0.5) / noise
        t, w = _gauss_hermite(mu)
        sign = (2.0 * y - 1.0).unsqueeze(-1)
        root = torch.sqrt(2.0 * var).unsqueeze(-1)
        z = sign * (mu.unsqueeze(-1) + root * t)
        log_cdf = torch.special.log_ndtr(z)
        ratio = torch.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - log_cdf) * w * sign  # w_k s phi/Phi
        return (log_cdf * w).sum(), ratio.sum(-1), (ratio * t).sum(-1) / root.squeeze(-1)

    def _whitened_terms(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r""":math:`A = L_{uu}^{-1}K_{uf}` (m, n), :math:`k_{ii} + j - \lVert a_i\rVert^2` and the
        constant mean :math:`c`, with the variational strategy's jitter :math:`j` and Cholesky, so that
        :math:`q(f_i) = N(c + a_i^\top\tilde m,\; k_{ii} + j - \lVert a_i\rVert^2 + a_i^\top\tilde S a_i)`
        matches :meth:`elbo`'s (differentiable in the hyperparameters and inducing inputs)."""
        Z = self.inducing_points
        jitter = float(self.variational_strategy.jitter_val)
        Kuu = self.kernel(Z).to_dense()
        L = psd_safe_cholesky(Kuu + jitter * torch.eye(Z.shape[0], dtype=Z.dtype, device=Z.device))
        A = torch.linalg.solve_triangular(L, self.kernel(Z, X).to_dense(), upper=False)
        kdiag = self.kernel(X, diag=True)
        return A, kdiag + jitter - (A * A).sum(0), self.mean.constant.reshape(())

    # ------------------------------------------------ q(v) at its optimum, given the rest
    def _elbo_at(self, A: torch.Tensor, base_var: torch.Tensor, c: torch.Tensor, y: torch.Tensor,
                 m_white: torch.Tensor, LP: torch.Tensor):
        r"""ELBO of :math:`q(v) = N(\tilde m, P^{-1})`, :math:`P = L_PL_P^\top`, and the gradients
        :math:`g_{\mu,i} = \partial\,\mathbb E_i/\partial\mu_i`, :math:`g_{v,i} = \partial\,\mathbb E_i/\partial v_i`
        of the expected log-likelihoods (no autograd graph is kept)."""
        B = torch.linalg.solve_triangular(LP, A, upper=False)  # a_i^T S a_i = |L_P^{-1} a_i|^2
        mu = c + A.T @ m_white
        var = base_var + (B * B).sum(0)
        expected, g_mu, g_var = self._expected_log_lik_grads(mu, var, y)
        return expected.detach() - self._kl_of(m_white, LP), g_mu, g_var

    @staticmethod
    def _kl_of(m_white: torch.Tensor, LP: torch.Tensor) -> torch.Tensor:
        r""":math:`\mathrm{KL}[N(\tilde m, S)\,\|\,N(0, I)] = \tfrac12(\operatorname{tr}S + \tilde m^\top\tilde m - m - \log\lvert S\rvert)`
        with :math:`S^{-1} = L_PL_P^\top`: :math:`\operatorname{tr}S = \lVert L_P^{-1}\rVert_F^2`,
        :math:`\log\lvert S\rvert = -2\sum_j\log (L_P)_{jj}`."""
        eye = torch.eye(LP.shape[0], dtype=LP.dtype, device=LP.device)
        Linv = torch.linalg.solve_triangular(LP, eye, upper=False)
        return 0.5 * ((Linv * Linv).sum() + m_white @ m_white - LP.shape[0] + 2 * torch.log(torch.diagonal(LP)).sum())

    @torch.no_grad()
    def _optimal_q(self, A: torch.Tensor, base_var: torch.Tensor, c: torch.Tensor, y: torch.Tensor, *,
                   max_steps: int = 100, tol: float = 1e-8, depth: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The Gaussian :math:`q(v)` maximising the ELBO for fixed kernel, mean and inducing inputs.

        The optimum has the form :math:`S^{-1} = P = I + A\Lambda A^\top`,
        :math:`S^{-1}\tilde m = A\nu` with one site :math:`(\lambda_i, \nu_i)` per row
        (Opper & Archambeau 2009, eq. 8), at the fixed point

        .. math::

            \lambda_i = -2\,g_{v,i},\qquad \nu_i = g_{\mu,i} + \lambda_i\,a_i^\top\tilde m,

        of the derivatives of :math:`\mathbb E_i` (:meth:`_expected_log_lik_grads`) at the current
        :math:`q`. One application of the map is a natural-gradient step of length 1
        (Salimbeni et al. 2018, eq. 10; exact at once for the conjugate Gaussian likelihood);
        :math:`\lambda_i \ge 0` for log-concave likelihoods (probit, Gaussian), so :math:`P` stays
        positive definite. The iterates are Anderson-accelerated (type II over the last ``depth``
        iterates with mixing :math:`\beta`, Walker & Ni 2011: :math:`x \leftarrow \bar x + \beta \bar f`,
        :math:`\bar x`, :math:`\bar f` the least-residual combinations of the iterates and of :math:`G(x) - x`).
        A step that does not raise the ELBO is retried without the history (the plain step
        :math:`(1-\beta)x + \beta G(x)`), then with :math:`\beta` halved (down to 1/64); :math:`\beta` grows by half
        after each accepted step, up to 1, so the damping that far from the optimum stops the map's
        overshoot (a wide prior turning into a narrow posterior and back) is not reset each step. The steps stop
        when the ELBO rises by less than ``tol`` per row. The previous call's sites are the
        start (``_q_start``): unlike :math:`\tilde m` and :math:`S`, they stay meaningful when the
        kernel and :math:`A` change.
        """
        M, n = A.shape
        eye = torch.eye(M, dtype=A.dtype, device=A.device)

        def q_of(x):  # q(v) of the sites x = (lam, nu): P = I + A diag(lam) A^T, h = A nu
            LP, info = torch.linalg.cholesky_ex(eye + (A * x[:n]) @ A.T)
            if info.item() != 0:
                return None
            return torch.cholesky_solve((A @ x[n:]).unsqueeze(-1), LP).squeeze(-1), LP

        def evaluate(x):  # (ELBO, q, fixed-point map G(x)), or None where P is not positive definite
            q = q_of(x)
            if q is None:
                return None
            value, g_mu, g_var = self._elbo_at(A, base_var, c, y, *q)
            if not torch.isfinite(value):
                return None
            lam_star = (-2.0 * g_var).clamp_min(0.0)
            return value, q, torch.cat([lam_star, g_mu + lam_star * (A.T @ q[0])])

        start = getattr(self, "_q_start", None)
        first = None if start is None else evaluate(start)
        x = start if first is not None else A.new_zeros(2 * n)
        first = first if first is not None else evaluate(x)  # the prior q(v) = N(0, I)
        if first is None:
            raise NotPositiveDefiniteError("The variational ELBO is not finite at the prior q(v) = N(0, I); "
                                           "the kernel or mean produced non-finite values.")
        value, q, gx = first
        xs, fs, beta = [], [], 1.0
        for _ in range(max_steps):
            f = gx - x
            xs, fs = (xs + [x])[-depth:], (fs + [f])[-depth:]
            x_bar, f_bar = x, f
            if len(fs) > 1:  # Anderson (type II): the combination of the last iterates with least residual
                dF = torch.stack([b - a for a, b in zip(fs, fs[1:])], 1)
                dX = torch.stack([b - a for a, b in zip(xs, xs[1:])], 1)
                gamma = min_norm_lstsq(dF, f)
                x_bar, f_bar = x - dX @ gamma, f - dF @ gamma
            while True:  # safeguard: the step must raise the ELBO
                trial = x_bar + beta * f_bar
                trial[:n].clamp_(min=0.0)
                new = evaluate(trial)
                if new is not None and new[0] >= value:
                    break
                if len(xs) > 1:  # first without the history (a plain step of length beta), then shorter
                    xs, fs, x_bar, f_bar = [x], [f], x, f
                elif (beta := 0.5 * beta) < 1.0 / 64:
                    break
            if new is None or new[0] < value:
                break
            beta = min(1.0, 1.5 * beta)
            gain = (new[0] - value).item()
            x, (value, q, gx) = trial, new
            if gain <= tol * n:
                break
        self._q_start = x
        m_white, LP = q
        return m_white, LP

    def _profiled_neg_elbo(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r""":math:`-\max_{q(v)}\mathcal L`, a function of the kernel hyperparameters, the constant mean
        and the inducing inputs only (:meth:`_optimal_q` inside). Its gradient is the ELBO's partial
        gradient at the optimal :math:`q` (the envelope theorem: :math:`\partial\mathcal L/\partial q = 0`
        there), so :math:`q` enters the backward pass as a constant."""
        A, base_var, c = self._whitened_terms(X)
        m_white, LP = self._optimal_q(A.detach(), base_var.detach(), c.detach(), y, tol=_PROFILED_Q_TOL)
        B = torch.linalg.solve_triangular(LP, A, upper=False)
        mu = c + A.T @ m_white
        var = base_var + (B * B).sum(0)
        return -(self._expected_log_lik(mu, var, y).sum() - self._kl_of(m_white, LP))

    @torch.no_grad()
    def _set_q(self, m_white: torch.Tensor, LP: torch.Tensor) -> None:
        r"""Write :math:`q(v) = N(\tilde m, (L_PL_P^\top)^{-1})` into the Cholesky variational parameters."""
        S = torch.cholesky_inverse(LP)
        R, _ = robust_cholesky(0.5 * (S + S.T))
        q = self.variational_strategy._variational_distribution
        q.variational_mean.copy_(m_white)
        q.chol_variational_covar.copy_(R)

    def fit_model(self, X, y, *, max_iter: int | None = None, random_state=None, verbose: bool = False,
                  batch_size: int | None = None) -> FitResult:
        """Train with :func:`fit_svgp` and this model's default batch size and learning rates."""
        return fit_svgp(self, X, y, batch_size=batch_size if batch_size is not None else self.batch_size,
                        max_iter=max_iter, lr=self.lr, ngd_lr=self.ngd_lr, random_state=random_state,
                        verbose=verbose)

    @torch.no_grad()
    def posterior(self, X=None, y=None) -> InducingPosterior:
        r"""The trained :math:`q(v)` as an :class:`InducingPosterior` (``X``, ``y`` are not needed).

        :math:`\alpha_u = L_{uu}^{-\top}\tilde m` and :math:`M = R^\top` with
        :math:`RR^\top = \tilde S`, where :math:`L_{uu}L_{uu}^\top = K_{uu} + jI` uses the
        strategy's jitter :math:`j`.
        """
        Z = self.inducing_points.detach().clone()
        q = self.variational_strategy.variational_distribution
        m_white = q.mean.detach()
        S = q.covariance_matrix.detach()
        S = 0.5 * (S + S.T)
        jitter = float(self.variational_strategy.jitter_val)
        Kuu = self.kernel(Z).to_dense()
        L, extra = robust_cholesky(Kuu + jitter * torch.eye(Z.shape[0], dtype=Z.dtype, device=Z.device))
        alpha = torch.linalg.solve_triangular(L.T, m_white.unsqueeze(-1), upper=True).squeeze(-1)
        R, _ = robust_cholesky(S)
        noise = self.noise.clone() if self.noise is not None else None
        return InducingPosterior(self.kernel, Z, L, alpha, R.T.contiguous(), self.constant.clone(), noise,
                                 jitter + extra)


_GH_T, _GH_W = np.polynomial.hermite.hermgauss(_GH_NODES)  # once per process (NumPy solves an eigenproblem)


def _gauss_hermite(ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Gauss–Hermite nodes :math:`t_k` and weights :math:`w_k/\sqrt\pi` (:math:`\mathbb E_{N(0,1)}[g] \approx
    \sum_k w_k g(\sqrt2 t_k)/\sqrt\pi`), :data:`_GH_NODES` of them, in ``ref``'s dtype and device."""
    return torch.as_tensor(_GH_T, dtype=ref.dtype, device=ref.device), torch.as_tensor(
        _GH_W / math.sqrt(math.pi), dtype=ref.dtype, device=ref.device)


def _rows(A, index, ref: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` of a NumPy array or tensor, as a tensor on ``ref``'s device/dtype (copies only those rows)."""
    if isinstance(A, torch.Tensor):
        return A[index].to(device=ref.device, dtype=ref.dtype)
    return torch.as_tensor(np.asarray(A[index]), dtype=ref.dtype, device=ref.device)


def _snapshot(model: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _fit_full_batch_lbfgs(model: SVGPModel, X, y, *, batch_size, max_iter, verbose) -> FitResult:
    """L-BFGS on the exact full-data ELBO (see :func:`fit_svgp`); X, y already validated."""
    n = len(y)
    if model.natural_gradient:
        raise ValueError("L-BFGS needs the Cholesky parametrisation of q(v): build the SVGPModel with "
                         "natural_gradient=False.")
    if batch_size is not None and batch_size < n:
        raise ValueError(f"L-BFGS maximises the full-data ELBO; batch_size={batch_size} < n={n} asks for "
                         "minibatches (use optimizer='adam').")
    ref = model.constant.detach()
    Xt, yt = _rows(X, slice(None), ref), _rows(y, slice(None), ref)
    model.train()
    strategy = model.variational_strategy
    if not strategy.variational_params_initialized.item():  # what GPyTorch's first training call does:
        with torch.no_grad():  # q(v) = the prior N(0, I); marked, so that no later call resets it
            strategy._variational_distribution.initialize_variational_distribution(strategy.prior_distribution)
            strategy.variational_params_initialized.fill_(1)
    variational = list(model.variational_parameters())
    trainable = [p.requires_grad for p in variational]
    for p in variational:  # q(v) is profiled out: set to its optimum inside each evaluation
        p.requires_grad_(False)
    model._profile_q, model._q_start, model.objective_resolution = True, None, _PROFILED_FTOL
    try:
        result = fit_hyperparameters(model, Xt, yt, optimizer="lbfgs",
                                     max_iter=1000 if max_iter is None else max_iter, verbose=verbose)
        with torch.no_grad():  # q(v) at the returned parameters (L-BFGS's last evaluation may be elsewhere),
            A, base_var, c = model._whitened_terms(Xt)  # to the default tolerance
            model._set_q(*model._optimal_q(A, base_var, c, yt))
    finally:
        del model._profile_q, model._q_start, model.objective_resolution
        for p, flag in zip(variational, trainable):
            p.requires_grad_(flag)
    model.eval()
    return result


def fit_svgp(model: SVGPModel, X, y, *, batch_size: int | None = None, max_iter: int | None = None,
             lr: float = 0.01, ngd_lr: float = 0.1, tol: float = 1e-4, random_state=None,
             verbose: bool = False, optimizer: str = "adam") -> FitResult:
    r"""Maximise the ELBO of an :class:`SVGPModel` in place.

    With ``optimizer="lbfgs"`` the full-data ELBO (no minibatches) is maximised
    by L-BFGS (:func:`~hdgp.training.fit_hyperparameters`: ``max_iter`` iterations at
    most, default 1000) over the kernel hyperparameters, the constant mean, the noise
    and the inducing inputs, with :math:`q(v)` set to its optimum for each of their values
    (:meth:`SVGPModel._optimal_q`) and stored at the end in the Cholesky
    parametrisation, which the model must use (``natural_gradient=False``). Otherwise (``"adam"``) each step draws the next minibatch of a seeded random permutation (a new one
    every epoch), converts only those rows to tensors on the model's device and
    takes one natural-gradient step on :math:`q(v)` (when the model uses natural
    parameters) and one Adam step on everything else. Every ``window`` steps
    (one epoch, at least 20 steps) the mean per-datum negative ELBO of the window
    is compared with the previous window; training stops when it improves by less
    than ``tol`` twice in a row, or after ``max_iter`` steps.

    Parameters
    ----------
    model : SVGPModel
    X : ndarray or torch.Tensor of shape (n, d)
        Training inputs; NumPy arrays are streamed batch by batch (never copied whole).
    y : ndarray or torch.Tensor of shape (n,)
        Targets (regression) or labels in {0, 1} (Bernoulli likelihood).
    batch_size : int or None
        Minibatch size :math:`b` (None: ``min(1024, n)``; must not exceed ``n``).
    max_iter : int or None
        Maximum number of steps (None: ``max(1000, 20 epochs)``).
    lr, ngd_lr : float
        Adam and natural-gradient learning rates.
    tol : float
        Stopping tolerance on the per-datum negative ELBO.
    random_state : int or None
        Seed of the minibatch order.
    verbose : bool
        Show a tqdm progress bar with the running ELBO per datum.
    optimizer : {"adam", "lbfgs"}, default="adam"
        Minibatch natural-gradient/Adam steps, or full-batch L-BFGS.

    Returns
    -------
    hdgp.training.FitResult
        ``loss`` is the last window's mean negative ELBO per datum (L-BFGS: the final
        negative ELBO minus log prior, per datum).

    Raises
    ------
    ValueError
        For a batch size outside ``[1, n]``, mismatched lengths, labels outside
        {0, 1} with a Bernoulli likelihood, an unknown optimizer, or L-BFGS with
        natural parameters or with a batch smaller than the data.

    Warns
    -----
    hdgp.exceptions.NumericalWarning
        When a step gives a non-finite ELBO: training stops and the model keeps the
        last parameters with a finite ELBO (never NaN).
    hdgp.exceptions.ConvergenceWarning
        When ``max_iter`` steps end before the stopping rule is met.
    """
    n = len(y)
    if len(X) != n:
        raise ValueError(f"X has {len(X)} rows but y has {n} entries.")
    if batch_size is None:
        batch_size = min(DEFAULT_BATCH_SIZE, n)
    if not (1 <= int(batch_size) <= n):
        raise ValueError(f"batch_size must be between 1 and the number of training rows ({n}); got {batch_size}.")
    if model.inducing_points.shape[0] > n:
        raise ValueError(
            f"The model has {model.inducing_points.shape[0]} inducing points but only {n} training rows; "
            "use at most n inducing points."
        )
    if model.likelihood_name == "bernoulli":
        labels = np.unique(y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y))
        if not set(labels.tolist()) <= {0.0, 1.0}:
            raise ValueError(f"Bernoulli SVGP needs labels in {{0, 1}}; got values {labels[:5].tolist()}.")
    if optimizer == "lbfgs":
        return _fit_full_batch_lbfgs(model, X, y, batch_size=batch_size, max_iter=max_iter, verbose=verbose)
    if optimizer != "adam":
        raise ValueError(f"optimizer must be 'adam' or 'lbfgs', got {optimizer!r}.")
    n_batches = math.ceil(n / batch_size)
    if max_iter is None:
        max_iter = max(1000, 20 * n_batches)
    window = max(20, n_batches)
    ref = model.constant.detach()
    rng = np.random.default_rng(random_state)
    mll = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=n)
    if model.natural_gradient:
        ngd = gpytorch.optim.NGD(model.variational_parameters(), num_data=n, lr=ngd_lr)
        adam_params = [p for p in model.hyperparameters() if p.requires_grad]
    else:
        ngd = None
        adam_params = [p for p in model.parameters() if p.requires_grad]
    adam = torch.optim.Adam(adam_params, lr=lr) if adam_params else None
    model.train()
    good_state, window_losses, prev, stalls = _snapshot(model), [], math.inf, 0
    converged, diverged, step, loss_avg = False, False, 0, math.inf
    perm, pos = rng.permutation(n), 0
    with tqdm(total=max_iter, disable=not verbose, desc="SVGP", leave=False) as bar:
        for step in range(1, max_iter + 1):
            if pos >= n:
                perm, pos = rng.permutation(n), 0
            idx = np.sort(perm[pos:pos + batch_size])
            pos += batch_size
            xb, yb = _rows(X, idx, ref), _rows(y, idx, ref)
            if ngd is not None:
                ngd.zero_grad()
            if adam is not None:
                adam.zero_grad()
            try:
                loss = -mll(model(xb), yb)
            except (RuntimeError, ValueError):  # Cholesky failure inside GPyTorch, NaN-checked distributions
                loss = torch.tensor(math.nan)
            if not torch.isfinite(loss):
                diverged = True
                break
            loss.backward()
            if ngd is not None:
                ngd.step()
            if adam is not None:
                adam.step()
            window_losses.append(loss.item())
            if len(window_losses) == window:
                loss_avg = sum(window_losses) / window
                window_losses = []
                if not all(torch.isfinite(p).all() for p in model.parameters()):
                    diverged = True
                    break
                good_state = _snapshot(model)
                stalls = stalls + 1 if prev - loss_avg < tol else 0
                prev = loss_avg
                if stalls >= 2:
                    converged = True
                    break
            bar.set_postfix(elbo=f"{-loss.item():.4f}", refresh=False)
            bar.update(1)
    if diverged:
        model.load_state_dict(good_state)
        warnings.warn(
            f"The ELBO became non-finite at step {step}; training stopped and the model keeps the last "
            "parameters with a finite ELBO. Lower the learning rates (lr, ngd_lr) or raise noise_lower_bound.",
            NumericalWarning, stacklevel=2,
        )
    elif not converged:
        if window_losses:
            loss_avg = sum(window_losses) / len(window_losses)
        warnings.warn(
            f"SVGP training stopped at max_iter={max_iter} steps before the ELBO levelled off; "
            "raise `max_iter` to continue.", ConvergenceWarning, stacklevel=2,
        )
    model.eval()
    return FitResult(float(loss_avg), step, [float(loss_avg)], converged)
