"""Per-feature input measures for orthogonal (constrained) kernels.

Every continuous measure used by OAK is a mixture of Gaussians
:math:`p_i(x) = \\sum_k w_{ik}\\, \\mathcal N(x; \\mu_{ik}, \\delta_{ik}^2)`:
a single Gaussian is :math:`K=1`, the empirical measure (OAK appendix E) is the
limit :math:`\\delta_{ik} = 0` (point masses), and a fitted Gaussian mixture
(appendix D.2) is the general case. One class therefore covers all three, and the
constrained SE kernel needs only one set of formulas.
"""

from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np
import torch

__all__ = ["MixtureMeasure", "gaussian_measure", "empirical_measure", "gaussian_mixture_measure"]


class MixtureMeasure(torch.nn.Module):
    r"""A batch of :math:`D` one-dimensional Gaussian-mixture measures.

    .. math::

        p_i(x) = \sum_{k=1}^{K} w_{ik}\, \mathcal N(x;\, \mu_{ik}, \delta_{ik}^2),
        \qquad i = 1, \dots, D

    Components with :math:`\delta_{ik} = 0` are point masses at :math:`\mu_{ik}`.
    Features with fewer components are padded with zero-weight components.

    Parameters
    ----------
    locations : array-like of shape (D, K)
        Component means :math:`\mu_{ik}`.
    scales : array-like of shape (D, K)
        Component standard deviations :math:`\delta_{ik} \ge 0`.
    weights : array-like of shape (D, K)
        Non-negative weights; each row is normalised to sum to one.
    """

    def __init__(self, locations, scales, weights):
        super().__init__()
        loc = torch.as_tensor(locations, dtype=torch.float64)
        scale = torch.as_tensor(scales, dtype=torch.float64)
        w = torch.as_tensor(weights, dtype=torch.float64)
        if loc.ndim != 2 or scale.shape != loc.shape or w.shape != loc.shape:
            raise ValueError(
                "locations, scales and weights must all have shape (D, K); got "
                f"{tuple(loc.shape)}, {tuple(scale.shape)}, {tuple(w.shape)}."
            )
        if not (torch.isfinite(loc).all() and torch.isfinite(scale).all() and torch.isfinite(w).all()):
            raise ValueError("Measure locations, scales and weights must be finite.")
        if (scale < 0).any() or (w < 0).any():
            raise ValueError("Measure scales and weights must be non-negative.")
        totals = w.sum(-1, keepdim=True)
        if (totals <= 0).any():
            raise ValueError("Every feature's measure needs a positive total weight.")
        self.register_buffer("locations", loc)
        self.register_buffer("scales", scale)
        self.register_buffer("weights", w / totals)

    @property
    def num_dims(self) -> int:
        return self.locations.shape[0]

    @property
    def is_discrete(self) -> bool:
        """True when every component is a point mass (the empirical measure)."""
        return bool((self.scales == 0).all())

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``n`` independent samples of each feature, shape (n, D)."""
        comp = torch.multinomial(self.weights, n, replacement=True, generator=generator)  # (D, n)
        mu = torch.gather(self.locations, 1, comp)
        sd = torch.gather(self.scales, 1, comp)
        noise = torch.randn(mu.shape, generator=generator, dtype=mu.dtype)
        return (mu + sd * noise).T


def gaussian_measure(mean, std) -> MixtureMeasure:
    r"""Independent Gaussian measures :math:`\mathcal N(\mu_i, \delta_i^2)` (OAK Section 3.2).

    Parameters
    ----------
    mean, std : array-like of shape (D,)
        A zero ``std`` gives a point mass (a constant feature), never a division by zero.
    """
    mean = np.asarray(mean, dtype=float).reshape(-1, 1)
    std = np.asarray(std, dtype=float).reshape(-1, 1)
    return MixtureMeasure(mean, std, np.ones_like(mean))


def empirical_measure(columns: Sequence[np.ndarray]) -> MixtureMeasure:
    r"""Empirical measures :math:`p_i = \sum_j w_{ij} \delta_{x_{ij}}` (OAK appendix E).

    Parameters
    ----------
    columns : sequence of 1-D arrays
        The observed values of each feature; repeated values become one location
        whose weight is its relative frequency.
    """
    uniques = [np.unique(np.asarray(c, dtype=float), return_counts=True) for c in columns]
    width = max(len(u[0]) for u in uniques)
    loc = np.zeros((len(uniques), width))
    w = np.zeros((len(uniques), width))
    for i, (vals, counts) in enumerate(uniques):
        loc[i, : len(vals)] = vals
        loc[i, len(vals) :] = vals[0]
        w[i, : len(vals)] = counts
    return MixtureMeasure(loc, np.zeros_like(loc), w)


def gaussian_mixture_measure(
    columns: Sequence[np.ndarray], n_components: int = 3, random_state=None
) -> MixtureMeasure:
    r"""Gaussian-mixture measures fitted per feature with scikit-learn (OAK appendix D.2).

    Parameters
    ----------
    columns : sequence of 1-D arrays
        Observed values of each feature.
    n_components : int, default=3
        Mixture components :math:`K` per feature (capped by the number of distinct values).
    random_state : int, RandomState or None
        Seed of the EM initialisation.
    """
    from sklearn.mixture import GaussianMixture  # deferred: slow to import; every kernel imports this module

    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral) or n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}.")
    loc = np.zeros((len(columns), n_components))
    scale = np.zeros_like(loc)
    w = np.zeros_like(loc)
    for i, col in enumerate(columns):
        col = np.asarray(col, dtype=float).reshape(-1, 1)
        k = min(int(n_components), len(np.unique(col)))
        gm = GaussianMixture(k, covariance_type="diag", random_state=random_state).fit(col)
        loc[i, :k] = gm.means_[:, 0]
        loc[i, k:] = gm.means_[0, 0]
        scale[i, :k] = np.sqrt(gm.covariances_[:, 0])
        w[i, :k] = gm.weights_
    return MixtureMeasure(loc, scale, w)
