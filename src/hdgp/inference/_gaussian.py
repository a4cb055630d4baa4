"""What every Gaussian-likelihood engine shares: constant mean, noise, priors."""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.means import ConstantMean
from gpytorch.priors import Prior

__all__ = ["ConstantMeanPriors", "GaussianNoiseModel"]


class ConstantMeanPriors:
    """Mixin of every engine (exact and sparse ones through :class:`GaussianNoiseModel`, and the
    variational one): the constant mean :math:`c` of its ``mean`` module, and the log prior density
    that MAP training adds to the objective."""

    @property
    def constant(self) -> torch.Tensor:
        """Constant mean :math:`c` (scalar tensor)."""
        return self.mean.constant.reshape(())

    def log_prior(self) -> torch.Tensor:
        """Sum of the log densities of every registered GPyTorch prior (0 if none)."""
        total = self.constant.new_zeros(())
        for _, module, prior, closure, _ in self.named_priors():
            total = total + prior.log_prob(closure(module)).sum()
        return total


class GaussianNoiseModel(ConstantMeanPriors, gpytorch.Module):
    r"""Base of the regression engines: :math:`y = c + f(x) + \varepsilon`, :math:`\varepsilon \sim N(0, \sigma_n^2)`.

    Holds the kernel, the constant mean :math:`c` (``mean``) and the Gaussian
    likelihood (``likelihood``, noise constrained by ``noise_constraint``, optional
    prior); subclasses add their own objective and posterior.
    """

    def __init__(self, kernel: Kernel, noise_constraint: Interval, noise_prior: Prior | None = None):
        super().__init__()
        self.kernel = kernel
        self.likelihood = GaussianLikelihood(noise_constraint=noise_constraint, noise_prior=noise_prior)
        self.mean = ConstantMean()

    @property
    def noise(self) -> torch.Tensor:
        """Noise variance :math:`\\sigma_n^2` (scalar tensor)."""
        return self.likelihood.noise.reshape(())

