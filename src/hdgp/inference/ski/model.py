"""The SKI Gaussian-process model: constant mean, projected-additive kernel, Gaussian noise; its
marginal likelihood (dense below :data:`_DENSE_MAX_N` rows, CG + stochastic Lanczos quadrature
above) and its conditioning on the training data."""

from __future__ import annotations

import math
import numbers
import warnings

import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import AddedDiagLinearOperator, DiagLinearOperator
from linear_operator.utils.warnings import NumericalWarning as LinearOperatorNumericalWarning

from ...exceptions import ConvergenceWarning, NotPositiveDefiniteError, NumericalWarning, warn_caller
from ...kernels.projected_kernel import ProjectedAdditiveKernel
from .._gaussian import GaussianNoiseModel
from ..exact import _NegLogMarginalLikelihood
from .interpolation import _interp_t, _interpolation_error, cubic_interpolation
from .operator import ProjectedSKIOperator, _dense_ski_matrix
from .posterior import SKIPosterior
from .preconditioner import (
    _dct_basis,
    _feature_gram,
    _nystrom_grid_root,
    _preconditioner_column_cap,
    _preconditioner_ranks,
    _spectral_ranks,
    _woodbury_preconditioner,
)
from .solver import _cg_solve, _settings
from .toeplitz import _grid_columns, symmetric_toeplitz_eigh


#: Relative residual ‖K̂α − r‖/‖r‖ of the posterior solve above which a ConvergenceWarning is issued.
_POSTERIOR_MAX_RESIDUAL = 1e-3
#: ... and the rms residual, as a fraction of the noise standard deviation: the residual is about
#: the error of the posterior mean at the training points, which must be small against the noise
#: even when a large constant mean c makes ‖r‖ = ‖y − c‖ large.
_POSTERIOR_MAX_RMS_PER_NOISE_STD = 0.1
#: Extra solves for the residual (iterative refinement) before that warning.
_POSTERIOR_REFINEMENTS = 3


#: Training sets up to this size get the SKI likelihood from the dense SKI matrix (Cholesky), as
#: GPyTorch does below its default ``max_cholesky_size``: exact where stochastic estimates are noisiest.
_DENSE_MAX_N = 800

#: Eigenpairs of :math:`c_j T_j` with eigenvalue at most this fraction of the noise variance are
#: left out of the variance cache (:meth:`SKIProjectedGPModel.posterior`): the prior variance they
#: carry at any point is below ``J`` times this fraction of the noise variance.
_VARIANCE_MODE_TOL = 1e-8
#: ... and so are eigenvalues below this fraction of the largest of :math:`T_j` (the cache holds
#: :math:`\Lambda_j^{-1/2}`).
_EIGEN_FLOOR = 1e-10


def _split_kernel(kernel):
    if not (isinstance(kernel, ScaleKernel) and isinstance(kernel.base_kernel, ProjectedAdditiveKernel)):
        raise ValueError("SKI inference needs ScaleKernel(ProjectedAdditiveKernel(...)) as the kernel.")
    pk = kernel.base_kernel
    if pk.base_kernel is not None or any(D != 1 for D in pk.degrees):
        got = (f"the sub-kernel {type(pk.base_kernel).__name__}" if pk.base_kernel is not None
               else f"projection degrees {sorted(set(pk.degrees))}")
        raise ValueError(
            f"SKI inference supports only 1-D projections with the default RBF sub-kernel (got {got}); "
            "use inference='exact'."
        )
    return pk, kernel.outputscale


class SKIProjectedGPModel(GaussianNoiseModel):
    """Constant mean + projected-additive kernel + Gaussian noise, with SKI inference.

    Same interface as :class:`hdgp.inference.exact.ExactGPModel`, so
    :func:`hdgp.training.fit_hyperparameters` trains it unchanged.

    Parameters
    ----------
    kernel : gpytorch.kernels.ScaleKernel
        Wrapping a :class:`ProjectedAdditiveKernel` with 1-D projections and RBF sub-kernels.
    grid_size : int, default=512
        Grid points :math:`m` per projection (at least 16).
    noise_lower_bound : float
    noise_prior : gpytorch.priors.Prior, optional
    num_probes : int, default=10
        Probe vectors of stochastic Lanczos quadrature.
    probe_seed : int, default=0
        Seed of the probe vectors; they are redrawn identically at every call
        (without touching the global random state), so the objective is a
        deterministic function of the hyperparameters, as L-BFGS needs.
    preconditioner_rank : "auto" or int, default="auto"
        Rank per projection of the Nyström preconditioner
        :math:`P = \\Phi\\Phi^\\top + \\sigma^2 I` (low-frequency DCT basis on
        every grid). ``"auto"``: from each projection's grid width in length-scales,
        weight and the noise (:func:`_preconditioner_ranks`), re-chosen at every
        evaluation; an integer fixes it; 0 disables preconditioning.
    max_cg_iterations : int, default=1000
    cg_tolerance : float, default=1e-3
        Relative residual tolerance of conjugate gradients during training.
    """

    #: L-BFGS stops once a step lowers the objective by less than this fraction of it
    #: (:func:`hdgp.training.fit_hyperparameters`; exact objectives use 1e-6). The objective is an
    #: estimate (CG to a 1e-3 residual, SLQ with 10 fixed probes), and smaller steps chase its error
    #: instead of the optimum (evaluation counts: benchmarks/README.md, "Numbers behind choices in src/").
    objective_resolution = 1e-5

    def __init__(self, kernel, *, grid_size: int = 512, noise_lower_bound: float = 1e-4, noise_prior=None,
                 num_probes: int = 10, probe_seed: int = 0, preconditioner_rank: int | str = "auto",
                 max_cg_iterations: int = 1000, cg_tolerance: float = 1e-3):
        _split_kernel(kernel)
        if int(grid_size) < 16:
            raise ValueError(f"grid_size must be >= 16, got {grid_size!r}.")
        super().__init__(kernel, GreaterThan(noise_lower_bound), noise_prior)
        self.grid_size = int(grid_size)
        # Lanczos quadrature runs min(max_cg_iterations, 20) steps: fewer cannot estimate a log-determinant
        for name, value, least in (("num_probes", num_probes, 1), ("max_cg_iterations", max_cg_iterations, 20),
                                   ("probe_seed", probe_seed, 0)):
            if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least):
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}.")
        if not (isinstance(cg_tolerance, numbers.Real) and 0 < cg_tolerance < 1):
            raise ValueError(f"cg_tolerance must be in (0, 1), got {cg_tolerance!r}.")
        if preconditioner_rank != "auto" and not (isinstance(preconditioner_rank, numbers.Integral)
                                                  and preconditioner_rank >= 0):
            raise ValueError(f"preconditioner_rank must be 'auto' or an integer >= 0, got {preconditioner_rank!r}.")
        self.num_probes = int(num_probes)
        self.probe_seed = int(probe_seed)
        self.preconditioner_rank = (preconditioner_rank if preconditioner_rank == "auto"
                                    else min(int(preconditioner_rank), self.grid_size))
        self.max_cg_iterations = int(max_cg_iterations)
        self.cg_tolerance = float(cg_tolerance)

    def _grids(self, z: torch.Tensor):
        """Grid origin and spacing per projection from projected training data ``z`` (J, n)."""
        lo, hi = z.min(dim=1).values, z.max(dim=1).values
        h = torch.clamp(hi - lo, min=1.0) / (self.grid_size - 5)
        return lo - 2 * h, h

    def operator(self, X: torch.Tensor):
        """SKI approximation of :math:`K_{XX}` (a :class:`ProjectedSKIOperator`) and its grids ``(u0, h)``."""
        pk, scale = _split_kernel(self.kernel)
        z = pk.project(X).T  # (J, n)
        u0, h = self._grids(z)
        index, weight = cubic_interpolation(z, u0, h)
        col = _grid_columns(h, self.grid_size)
        coef = pk.weights.to(z) * scale
        if not (torch.isfinite(z).all() and torch.isfinite(coef).all()):  # e.g. an overflowed length-scale
            raise NotPositiveDefiniteError(
                "Non-finite projections or output scale at these hyper-parameters; the SKI operator is undefined."
            )
        return ProjectedSKIOperator(weight, index, col, coef), (u0, h)

    def _noisy(self, op, h):
        n = op.shape[-1]
        noise = self.noise.expand(n)
        override = None
        if self.preconditioner_rank != 0:
            ranks = (_preconditioner_ranks(h, op.coef, self.noise, n, self.grid_size)
                     if self.preconditioner_rank == "auto"
                     else torch.full_like(op.coef, self.preconditioner_rank, dtype=torch.long))
            G = _nystrom_grid_root(op.col, _dct_basis(self.grid_size, int(ranks.max()), op.col))
            override = _woodbury_preconditioner(op, G, ranks, self.noise)
        return AddedDiagLinearOperator(op, DiagLinearOperator(noise), preconditioner_override=override)

    def neg_log_marginal_likelihood(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """:math:`\\tfrac12 r^\\top \\hat K^{-1} r + \\tfrac12 \\log|\\hat K| + \\tfrac n2\\log 2\\pi`,
        :math:`\\hat K = K^{\\mathrm{SKI}} + \\sigma_n^2 I`, :math:`r = y - c`: preconditioned CG for
        the quadratic term, stochastic Lanczos quadrature for the log-determinant.

        Up to :data:`_DENSE_MAX_N` rows (GPyTorch's default ``max_cholesky_size``) the SKI matrix is
        formed (:func:`_dense_ski_matrix`) and factorised instead: the value and gradient of the same
        SKI model, exact, with no probe noise and no preconditioner that wants more columns than rows.
        """
        op, (_, h) = self.operator(X)
        n = y.shape[0]
        if n <= _DENSE_MAX_N:
            return _NegLogMarginalLikelihood.apply(_dense_ski_matrix(op), None, self.noise, y - self.constant, False)[0]
        Ky = self._noisy(op, h)
        with _settings(self.num_probes, self.max_cg_iterations, self.cg_tolerance), \
                torch.random.fork_rng(devices=[y.device] if y.is_cuda else []), warnings.catch_warnings():
            torch.manual_seed(self.probe_seed)  # same probes every call: a deterministic objective
            # CG stopping short at an optimiser's trial point (e.g. an output scale of 1e8) is no news;
            # the fitted model's posterior solve checks its own residual and warns (posterior)
            warnings.simplefilter("ignore", LinearOperatorNumericalWarning)
            quad, logdet = Ky.inv_quad_logdet(inv_quad_rhs=(y - self.constant).unsqueeze(-1), logdet=True)
        return 0.5 * (quad + logdet + n * math.log(2 * math.pi))

    def _warn_if_preconditioner_capped(self, op, h, n: int) -> None:
        """Warn when the fitted hyperparameters wanted more preconditioner columns than the cap allows:
        the training objective was then a biased, noisier estimate (see :func:`_preconditioner_column_cap`)."""
        if self.preconditioner_rank != "auto" or n <= _DENSE_MAX_N:
            return
        wanted = int(_spectral_ranks(h, op.coef, self.noise, n, self.grid_size).sum())
        cap = _preconditioner_column_cap(n)
        if wanted > cap:
            warnings.warn(
                f"At the fitted hyperparameters SKI's preconditioner needed {wanted} columns and kept {cap}, the "
                f"cap for n = {n} (short length-scales against small noise); the marginal likelihood and its "
                "gradient were then estimated with a bias, and the fit may have stopped short of the optimum. "
                "Use inference='exact' while n allows, or a larger noise_lower_bound.",
                ConvergenceWarning, stacklevel=4,
            )

    def _warn_if_grid_coarse(self, h: torch.Tensor, coef: torch.Tensor) -> None:
        """Warn when the grids are too coarse for the fitted length-scales: the SKI kernel's
        interpolation error (:func:`_interpolation_error`, summed over the projections with their
        weights) above the noise variance makes the SKI model another model than the exact one, whose
        predictions can be far from the exact GP's."""
        coef, noise = coef.detach().clamp_min(0), float(self.noise)

        def error(finer: float) -> float:  # the error on grids ``finer`` times as fine
            return float((coef * _interpolation_error(h.detach() / finer)).sum())

        if error(1.0) <= noise:
            return
        lo, hi = 1.0, 2.0  # bisection for the grid that brings the error down to the noise variance
        while hi < 1e6 and error(hi) > noise:
            lo, hi = hi, 2 * hi
        for _ in range(20):
            lo, hi = (0.5 * (lo + hi), hi) if error(0.5 * (lo + hi)) > noise else (lo, 0.5 * (lo + hi))
        warn_caller(
            f"SKI's grids are coarse for the fitted length-scales (up to {float(h.max()):.2g} length-scales per "
            f"grid step with grid_size={self.grid_size}): the interpolated kernel is off by up to about "
            f"{error(1.0):.2g}, more than the noise variance {noise:.2g}, so predictions can differ much from the "
            f"exact GP's. Use grid_size >= {math.ceil((self.grid_size - 5) * hi) + 5}, or inference='exact' "
            "while n allows.",
            NumericalWarning,
        )

    @torch.no_grad()
    def posterior(self, X: torch.Tensor, y: torch.Tensor) -> SKIPosterior:
        """Condition on training data.

        :math:`\\alpha = \\hat K^{-1}(y - c)` by preconditioned CG (relative tolerance 1e-6), refined
        by solving for the residual until it is small against the noise (at most 3 times).

        For variances every :math:`c_j T_j` is replaced by its eigen-truncation
        :math:`c_j E_j \\Lambda_j E_j^\\top`, keeping the :math:`r_j` eigenvalues above
        :data:`_VARIANCE_MODE_TOL` times the noise variance (and above :data:`_EIGEN_FLOOR` times
        the largest). This gives :math:`K^{\\mathrm{SKI}} \\approx \\Phi\\Phi^\\top` with
        :math:`R = \\sum_j r_j` columns, and :math:`A = \\sigma^2 I_R + \\Phi^\\top\\Phi` is formed
        on the grids (:func:`_feature_gram`) and factorised once. The modes left out carry prior
        variance :math:`\\sum_j c_j \\sum_{k > r_j} \\lambda_{jk} (w_{*j}^\\top e_{jk})^2 \\le
        J \\cdot 10^{-8} \\sigma^2` at any point (:math:`\\sum_k (w^\\top e_k)^2 = \\lVert w\\rVert^2 \\le 1`
        for interpolation weights), which bounds what conditioning on them would remove.
        """
        op, (u0, h) = self.operator(X)
        Ky = self._noisy(op, h)
        r = (y - self.constant).unsqueeze(-1)
        with _settings(self.num_probes, self.max_cg_iterations, 1e-6), warnings.catch_warnings():
            # linear_operator's own CG warning is replaced by the check of the true residual below
            warnings.simplefilter("ignore", LinearOperatorNumericalWarning)
            alpha = _cg_solve(Ky, r)
            # iterative refinement: CG stalls on ill-conditioned K̂ (small noise, a large constant
            # mean), but a fresh solve for the residual recovers the lost digits
            for _ in range(_POSTERIOR_REFINEMENTS + 1):
                rho = r - Ky.matmul(alpha)
                residual = float(rho.norm() / r.norm().clamp_min(torch.finfo(r.dtype).tiny))
                rms, noise_std = float(rho.norm()) / math.sqrt(r.shape[0]), float(self.noise.sqrt())
                solved = residual <= _POSTERIOR_MAX_RESIDUAL and rms <= _POSTERIOR_MAX_RMS_PER_NOISE_STD * noise_std
                if solved:
                    break
                alpha = alpha + _cg_solve(Ky, rho)
        if not solved:
            warnings.warn(
                f"SKI conjugate gradients stopped at relative residual {residual:.3g} (tolerance "
                f"{_POSTERIOR_MAX_RESIDUAL:g}), rms residual {rms:.3g} against a noise std of {noise_std:.3g} "
                f"(at most {self.max_cg_iterations} iterations); the predictive mean may be off by about the "
                "rms residual. Raise max_cg_iterations (an estimator's ski_options) or noise_lower_bound, or use "
                "inference='exact' for small data.",
                ConvergenceWarning, stacklevel=3,
            )
        self._warn_if_preconditioner_capped(op, h, r.shape[0])
        self._warn_if_grid_coarse(h, op.coef)
        coef = op.coef.clamp_min(0)
        modes = []  # one projection at a time: largest eigenvalues first, so the kept modes lead every row
        for j in range(op.col.shape[0]):
            evals, evecs = symmetric_toeplitz_eigh(op.col[j])
            keep = (evals > _EIGEN_FLOOR * evals[0]) & (coef[j] * evals > _VARIANCE_MODE_TOL * self.noise)
            modes.append((evals, evecs, keep))
        r = max(max(int(keep.sum()) for _, _, keep in modes), 1)
        E = torch.stack([evecs[:, :r] for _, evecs, _ in modes])
        lam = torch.stack([evals[:r] for evals, _, _ in modes])
        keep = torch.stack([keep[:r] for _, _, keep in modes])
        scale = coef.sqrt()[:, None, None]
        root = E * (lam.clamp_min(0).sqrt() * keep)[:, None, :] * scale  # sqrt(c_j) G_j, G_j G_j^T ~ T_j
        A = _feature_gram(op, root, keep)
        A.diagonal().add_(self.noise)
        L_A = torch.linalg.cholesky(A)
        mean_cache = _interp_t(op.index, op.weight, alpha, self.grid_size) * op.coef[:, None, None]
        root_cache = E * (keep / torch.where(keep, lam, torch.ones_like(lam)).sqrt())[:, None, :] * scale
        return SKIPosterior(self.kernel, u0, h, mean_cache, root_cache, L_A, self.constant.clone(),
                            self.noise.clone(), columns=keep)
