"""Default priors, in one place, each with its source."""

from __future__ import annotations

from gpytorch.priors import SmoothedBoxPrior

__all__ = ["smoothed_box_noise_prior"]


def smoothed_box_noise_prior(lower: float = 1e-4, upper: float = 1.0, sigma: float = 0.01) -> SmoothedBoxPrior:
    r"""Smoothed-box prior on the noise variance used by the projected-additive paper.

    A uniform density on ``[lower, upper]`` with Gaussian tails of width ``sigma``
    (GPyTorch's ``SmoothedBoxPrior``). Delbridge et al. (2020, sec. 5) place such a
    prior on the likelihood noise to stop it collapsing on small data sets.
    """
    return SmoothedBoxPrior(lower, upper, sigma=sigma)
