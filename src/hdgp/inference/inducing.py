r"""Inducing points: k-means initialisation and the shared inducing-point posterior.

Both sparse engines (SGPR, :mod:`hdgp.inference.sparse`; SVGP,
:mod:`hdgp.inference.variational`) end with a Gaussian posterior over the
*whitened* inducing values :math:`v = L_{uu}^{-1} u`, where
:math:`L_{uu} L_{uu}^\top = K_{uu} + jI`:

.. math::

    q(v) = N(\tilde m, \tilde S), \qquad \tilde S = M^\top M,

so that the latent posterior at test inputs is (Titsias 2009, eq. 6;
Hensman et al. 2015, eq. 7)

.. math::

    \mu_* = c + K_{*u}\alpha_u,\quad \alpha_u = L_{uu}^{-\top}\tilde m, \qquad
    \Sigma_* = K_{**} - T^\top T + (M T)^\top (M T),\quad T = L_{uu}^{-1} K_{u*}.

:class:`InducingPosterior` stores exactly these pieces. Because the mean has the
same form as the exact posterior's (:math:`K_{*X}\alpha`) with the inducing
points in place of the training inputs, explanation code that only needs the
mean weights — :func:`hdgp.explain.compute_sobol` and
:func:`hdgp.explain.component_mean` — works unchanged on ``posterior.X`` (the
inducing points) and ``posterior.alpha`` (:math:`\alpha_u`); this is the
"similar formula for sparse GP" of the OAK paper (Lu et al. 2022, Sec. 4, eq. 14).
Component variances need the whole :math:`q(u)`: :meth:`InducingPosterior.summand`
(used by :func:`hdgp.explain.component_posterior`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from gpytorch.kernels import Kernel
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

from ._posterior import GaussianPosterior

__all__ = ["InducingPosterior", "discrete_columns", "kmeans_inducing_points"]

#: A column with at most this many distinct values is treated as discrete by k-means init.
MAX_DISCRETE_LEVELS = 10
#: k-means runs on at most max(this, 20 m) randomly chosen rows.
_KMEANS_MAX_ROWS = 20_000


def discrete_columns(X: np.ndarray, max_levels: int = MAX_DISCRETE_LEVELS) -> list[int]:
    """Indices of the columns of ``X`` with at most ``max_levels`` distinct values."""
    return [j for j in range(X.shape[1]) if np.unique(X[:, j]).size <= max_levels]


def _cluster_modes(values: np.ndarray, labels: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Most frequent value of ``values`` within each cluster (nearest level if a cluster is empty)."""
    levels, codes = np.unique(values, return_inverse=True)
    counts = np.zeros((len(centres), len(levels)))
    np.add.at(counts, (labels, codes), 1.0)
    modes = levels[counts.argmax(axis=1)]
    empty = counts.sum(axis=1) == 0
    if empty.any():
        modes[empty] = levels[np.abs(centres[empty, None] - levels[None, :]).argmin(axis=1)]
    return modes


def kmeans_inducing_points(X, n_inducing: int, random_state=None,
                           max_levels: int = MAX_DISCRETE_LEVELS, discrete=()) -> np.ndarray:
    r"""Inducing inputs from k-means on the training inputs, with discrete columns kept discrete.

    Continuous columns take the cluster centroids. A column with at most
    ``max_levels`` distinct values (binary, categorical codes, small integer
    scores), or listed in ``discrete``, takes the most frequent observed value
    among the cluster's members, so a binary feature stays binary: averaging
    would put inducing points at values (e.g. 0.37) that no input ever takes —
    the reference OAK code's k-means init collapses binary inducing values this way.

    Parameters
    ----------
    X : array-like of shape (n, d)
        (Transformed) training inputs.
    n_inducing : int
        Number of inducing points :math:`m`, ``1 <= m <= n``. With ``m == n`` the
        training inputs themselves are returned (the exact-GP limit).
    random_state : int, numpy Generator/RandomState or None
        Seed of the row subsample and of k-means.
    max_levels : int
        Columns with at most this many distinct values are treated as discrete.
    discrete : sequence of int, default=()
        Columns treated as discrete whatever their number of levels (e.g. the
        categorical level codes of an OAK model, which its kernel only accepts as
        observed integer codes).

    Returns
    -------
    Z : ndarray of shape (n_inducing, d)

    Raises
    ------
    ValueError
        If ``n_inducing`` is not in ``[1, n]``.
    """
    X = np.asarray(X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else X, dtype=np.float64)
    n = X.shape[0]
    if not (1 <= n_inducing <= n):
        raise ValueError(
            f"n_inducing must be between 1 and the number of training rows ({n}); got {n_inducing}. "
            "Lower `n_inducing` or use exact inference for small data."
        )
    if n_inducing == n:
        return X.copy()
    seed = int(np.random.default_rng(random_state if not isinstance(random_state, np.random.RandomState)
                                     else random_state.randint(2**31)).integers(2**31 - 1))
    rng = np.random.default_rng(seed)
    max_rows = max(_KMEANS_MAX_ROWS, 20 * n_inducing)
    sample = X[rng.choice(n, max_rows, replace=False)] if n > max_rows else X
    with warnings.catch_warnings():
        # duplicated rows can leave fewer distinct clusters than m; the jitter in K_uu copes
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        km = KMeans(n_clusters=n_inducing, n_init=1, max_iter=100, random_state=seed).fit(sample)
    Z = km.cluster_centers_.copy()
    for j in sorted(set(discrete_columns(sample, max_levels)) | {int(j) for j in discrete}):
        Z[:, j] = _cluster_modes(sample[:, j], km.labels_, Z[:, j])
    return Z


@dataclass
class InducingPosterior(GaussianPosterior):
    r"""Gaussian posterior of an inducing-point GP (SGPR or SVGP); see the module docstring.

    Attributes
    ----------
    kernel : Kernel
    inducing_points : torch.Tensor of shape (m, d)
        Inducing inputs :math:`Z`.
    L_uu : torch.Tensor of shape (m, m)
        Lower Cholesky factor of :math:`K_{uu} + jI`.
    alpha : torch.Tensor of shape (m,)
        Mean weights :math:`\alpha_u = L_{uu}^{-\top}\tilde m`: the latent posterior mean is
        :math:`c + K_{*u}\alpha_u`. Sobol indices of an OAK model follow from
        ``hdgp.explain.compute_sobol(kernel, posterior.X, posterior.alpha)``.
    var_factor : torch.Tensor of shape (m, m)
        :math:`M` with whitened posterior covariance :math:`\tilde S = M^\top M`.
    constant, noise : torch.Tensor
        Constant mean :math:`c` and Gaussian noise variance :math:`\sigma_n^2`
        (``None`` for a non-Gaussian likelihood: then ``latent=False`` is refused).
    jitter : float
        Absolute jitter :math:`j` added to the diagonal of :math:`K_{uu}`.
    """

    kernel: Kernel
    inducing_points: torch.Tensor
    L_uu: torch.Tensor
    alpha: torch.Tensor
    var_factor: torch.Tensor
    constant: torch.Tensor
    noise: torch.Tensor | None
    jitter: float = 0.0

    def __post_init__(self):
        # Row-major storage: LAPACK factors come back column-major and a model file
        # restores them row-major, and the two layouts take different BLAS paths whose
        # results differ in the last bit; one layout keeps saved models bit-identical.
        for name in ("inducing_points", "L_uu", "alpha", "var_factor"):
            setattr(self, name, getattr(self, name).contiguous())

    @property
    def X(self) -> torch.Tensor:
        """The points that :attr:`alpha` weights (the inducing inputs), as in ``ExactPosterior.X``."""
        return self.inducing_points

    @torch.no_grad()
    def summand(self, cross: torch.Tensor, prior: torch.Tensor, *, full_cov: bool = False):
        r"""Posterior of a summand :math:`g` of :math:`f = g + h` (:math:`g, h` independent a priori).

        The inducing values :math:`u = f(Z)` have :math:`\operatorname{Cov}(g(x_*), u) = k_g(x_*, Z)`,
        so :math:`g(x_*) \mid u \sim N(k_g(x_*, Z)K_{uu}^{-1}u,\ k_g(x_*, x_*) - k_g(x_*, Z)K_{uu}^{-1}k_g(Z, x_*))`.
        The approximate posterior keeps this conditional and replaces :math:`p(u \mid y)` by
        :math:`q(u) = N(m, S)`, :math:`m = L_{uu}\tilde m`, :math:`S = L_{uu}\tilde S L_{uu}^\top`
        (the SGPR and SVGP families :math:`q(f, u) = p(f \mid u)q(u)` extend to all summands
        jointly, with the same bound, since the likelihood sees only :math:`f`).
        Marginalising :math:`u`, with :math:`C = k_g(X_*, Z)` (``cross``) and :math:`T = L_{uu}^{-1}C^\top`:

        .. math::

            \mu_g = C\alpha_u,\qquad
            \Sigma_g = k_g(X_*, X_*) - C K_{uu}^{-1} C^\top + C K_{uu}^{-1} S K_{uu}^{-1} C^\top
                     = k_g(X_*, X_*) - T^\top T + (MT)^\top (MT).

        With :math:`g = f` this is the module docstring's predictive posterior; for SGPR
        with :math:`Z = X` it equals the exact :meth:`ExactPosterior.summand
        <hdgp.inference.exact.ExactPosterior.summand>` (then
        :math:`K^{-1} - K^{-1}SK^{-1} = (K + \sigma_n^2 I)^{-1}`).

        Parameters and returns as in :meth:`ExactPosterior.summand
        <hdgp.inference.exact.ExactPosterior.summand>`, with ``cross`` the (t, m) matrix
        :math:`k_g(X_*, Z)` against the inducing inputs.
        """
        T = torch.linalg.solve_triangular(self.L_uu, cross.T, upper=False)
        MT = self.var_factor @ T
        if full_cov:
            return cross @ self.alpha, (prior - T.T @ T + MT.T @ MT) * self.variance_scale
        return cross @ self.alpha, (prior - T.square().sum(0) + MT.square().sum(0)).clamp_min(0.0) * self.variance_scale
