r"""Uncertainty of the Sobol indices of a fitted OAK model: credible intervals and ranking stability.

The reported index of term :math:`u` (:mod:`hdgp.explain`, OAK eq. 14) is the variance of the
*posterior mean* component, :math:`R_u = \int m_u(x)^2\,dp(x)`. The posterior of :math:`f` also
induces a distribution over the variance of the component itself,

.. math::

    S_u = \int f_u(x)^2\, dp(x), \qquad \tilde S_u = S_u \Big/ \sum_v S_v ,

(OAK Sec. 4, eq. 12: every :math:`f_u` integrates to zero in each of its variables under the
product measure :math:`p`, so the components of *every* sample path are orthogonal in
:math:`L^2(p)` and the total variance of a sample is :math:`\sum_v S_v`). With
:math:`f_u = m_u + e_u`, :math:`e_u \sim \mathcal{GP}(0, C_u)` under the posterior,

.. math::

    S_u = R_u + 2\int m_u e_u\,dp + \int e_u^2\,dp, \qquad
    \mathbb E[S_u \mid y] = R_u + \int C_u(x, x)\,dp(x).

For an exact posterior :math:`C_u(x, x) = \sigma_{|u|}^2 k_u(x, x) - \sigma_{|u|}^4 k_u(x, X) A^{-1} k_u(X, x)`,
:math:`A = K + \sigma_n^2 I`, so
:math:`\mathbb E[S_u \mid y] = R_u + \sigma_{|u|}^2 \prod_{i\in u}\int \tilde k_i(x,x)\,dp_i
- \sigma_{|u|}^4 \operatorname{tr}(A^{-1} \odot_{i\in u} L_i)` (the closed form the tests compare with).

``method="posterior"`` draws joint posterior samples of the reported components and of the sum of
all other components (``rest``) at :math:`M` scrambled-Sobol points :math:`x_m` of :math:`p`
(:meth:`~hdgp.inference.exact.ExactPosterior.summand` with the stacked cross-covariances
:math:`\sigma_{|u|}^2 k_u(x_m, X)` and the block-diagonal prior), and evaluates each sample's
:math:`S_u = R_u + \frac1M\sum_m (2 m_u(x_m) e_u(x_m) + e_u(x_m)^2)`: the posterior-mean part is
exact and only the sample's deviation is integrated by quadrature. This holds the hyper-parameters
at their fitted values. ``method="bootstrap"`` adds their uncertainty: it refits the model on
resampled rows (warm-started from the fitted hyper-parameters) and pools the posterior samples of
every refit; the flow, the input measure and the hyper-parameters are refitted each time.

The two estimate different things. The posterior intervals are for the model's own indices, under the
input measure fitted to the training rows; the bootstrap's for the shares under the distribution the rows
were drawn from, which a new sample of rows would estimate differently. The posterior method is the
default: it needs no training data (a saved model suffices) and costs one Cholesky factor instead of
``n_boot`` fits. Coverage of both: ``benchmarks/results/sobol-intervals``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.utils import _safe_indexing

from .kernels.additive_kernel import AdditiveKernel
from .kernels.feature_stack import FeatureStackKernel
from .kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel
from .linalg import robust_cholesky

__all__ = ["SobolIntervals", "sobol_intervals", "sobol_samples", "measure_points", "important_terms", "sobol_index_dict"]

_METHODS = ("posterior", "bootstrap")


@dataclass
class SobolIntervals:
    """Credible intervals of normalised Sobol indices and the stability of their ranking.

    Attributes
    ----------
    terms : list of tuple of int
        The terms, ranked by their point estimate (feature indices).
    names : list of tuple of str
        The same terms by feature name.
    estimate : ndarray
        Point estimates (``sobol_indices_``: variance share of the posterior mean).
    mean, lower, upper : ndarray
        Posterior mean of each share and its equal-tailed ``level`` interval.
    level : float
    top_k : int
        Number of leading terms whose ranking is checked.
    rank_stable : float
        Share of samples in which the ``top_k`` leading terms hold the same ranks ``1..top_k``
        (among the reported terms) as their point estimates.
    keeps_rank : ndarray
        Per term, the share of samples in which it holds its rank.
    in_top_k : ndarray
        Per term, the share of samples in which it is among the ``top_k`` largest.
    method : str
    samples : ndarray of shape (n_samples, len(terms))
        The sampled shares.
    """

    terms: list
    names: list
    estimate: np.ndarray
    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    top_k: int
    rank_stable: float
    keeps_rank: np.ndarray
    in_top_k: np.ndarray
    method: str
    samples: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        """JSON-ready summary (no samples)."""
        return {
            "method": self.method, "level": self.level, "top_k": self.top_k, "n_samples": int(len(self.samples)),
            "rank_stable": float(self.rank_stable),
            "terms": [{"term": list(name), "sobol": float(e), "mean": float(m), "lower": float(lo),
                       "upper": float(hi), "keeps_rank": float(k), "in_top_k": float(t)}
                      for name, e, m, lo, hi, k, t in zip(self.names, self.estimate, self.mean, self.lower,
                                                          self.upper, self.keeps_rank, self.in_top_k)],
        }


def important_terms(result, threshold: float = 0.99) -> list:
    """Terms that matter in a :class:`hdgp.explain.SobolResult`: the shortest ranked prefix reaching
    ``threshold`` of the variance, plus every
    enumerated first-order term (their order in ``result`` kept). The full list is ``result.terms``."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}.")
    cum = torch.cumsum(result.values, 0)
    reached = torch.nonzero(cum >= threshold - 1e-12)
    k = int(reached[0]) + 1 if len(reached) else len(result.terms)
    return [u for i, u in enumerate(result.terms) if i < k or len(u) == 1]


def sobol_index_dict(result, names, threshold: float = 0.99, *, full: bool = False) -> dict:
    """``{(feature name, ...): normalised Sobol index}`` in ranked order: the :func:`important_terms`, or every
    enumerated term with ``full=True`` (the form of an OAK model's ``sobol_indices_``)."""
    kept = set(result.terms if full else important_terms(result, threshold))
    return {tuple(names[i] for i in u): float(v) for u, v in zip(result.terms, result.values.tolist()) if u in kept}


# ------------------------------------------------------------------ quadrature points of p
def _level_codes(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse CDF of a discrete distribution: index of the first cumulative weight above ``u``."""
    cdf = torch.cumsum(weights, 0)
    return torch.searchsorted(cdf / cdf[-1], u.contiguous(), right=True).clamp_max(len(weights) - 1)


def _feature_points(kernel, uniforms: torch.Tensor) -> torch.Tensor:
    """Points of the measures of ``kernel``'s features from two uniforms each, shape (M, D)."""
    if isinstance(kernel, FeatureStackKernel):
        out = uniforms.new_empty(uniforms.shape[0], uniforms.shape[1] // 2)
        for k, cols in zip(kernel.kernels, kernel.columns):
            pick = torch.tensor([2 * c + j for c in cols for j in (0, 1)])
            out[:, cols] = _feature_points(k, uniforms[:, pick])
        return out
    if isinstance(kernel, ConstrainedSEKernel):
        m = kernel.measure
        out = uniforms.new_empty(uniforms.shape[0], m.num_dims)
        for i in range(m.num_dims):  # component by the first uniform, then its Gaussian's quantile
            comp = _level_codes(m.weights[i].to(uniforms), uniforms[:, 2 * i])
            z = torch.special.ndtri(uniforms[:, 2 * i + 1].clamp(1e-12, 1 - 1e-12))
            out[:, i] = m.locations[i].to(uniforms)[comp] + m.scales[i].to(uniforms)[comp] * z
        return out
    if isinstance(kernel, ConstrainedCategoricalKernel):
        return _level_codes(kernel.level_weights.to(uniforms), uniforms[:, 0]).to(uniforms).unsqueeze(-1)
    raise TypeError(f"No input measure known for the base kernel {type(kernel).__name__}; Sobol intervals need "
                    "the constrained kernels of an OAK model.")


def measure_points(kernel: AdditiveKernel, n_points: int, seed: int = 0) -> torch.Tensor:
    r"""``n_points`` scrambled-Sobol points of the product input measure :math:`p = \prod_i p_i` of an
    OAK kernel (transformed inputs), shape (n_points, D): per feature, one coordinate picks the mixture
    component (or level) by its inverse CDF and one gives the component's Gaussian quantile."""
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}.")
    engine = torch.quasirandom.SobolEngine(2 * kernel.num_dims, scramble=True, seed=int(seed))
    uniforms = engine.draw(int(n_points), dtype=torch.float64)
    return _feature_points(kernel.base_kernel, uniforms)


# ------------------------------------------------------------------ posterior samples
@torch.no_grad()
def sobol_samples(posterior, result, terms, *, n_samples: int = 1000, n_points: int = 128,
                  seed: int = 0, normalise: bool = True) -> torch.Tensor:
    r"""Posterior samples of the normalised Sobol indices of ``terms``, shape (n_samples, len(terms)).

    With ``normalise=False``: the unnormalised :math:`S_u` of ``terms`` and, last, :math:`S_\text{rest}`,
    shape (n_samples, len(terms) + 1).

    Each sample is :math:`\tilde S_u = S_u / (\sum_{v \in \text{terms}} S_v + S_\text{rest})` with
    :math:`S_u = R_u + \frac1M\sum_m (2 m_u e_u + e_u^2)(x_m)` (module docstring), :math:`R_u` from
    ``result``, :math:`R_\text{rest}` = total minus the terms' :math:`R_u`, and the :math:`M` =
    ``n_points`` points of :func:`measure_points`. The posterior covariance of the stacked component values has
    :math:`(|\text{terms}| + 1) M` rows, so its Cholesky factor costs
    :math:`O(((|\text{terms}| + 1) M)^3)`.
    """
    kernel = posterior.kernel
    if not isinstance(kernel, AdditiveKernel):
        raise TypeError("Sobol samples need a posterior whose kernel is an OAK AdditiveKernel.")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}.")
    terms = [tuple(sorted(int(i) for i in u)) for u in terms]
    if not terms:
        raise ValueError("terms must name at least one term.")
    if len(set(terms)) < len(terms):
        raise ValueError(f"terms must not repeat a term, got {terms}.")
    position = {u: i for i, u in enumerate(result.terms)}
    missing = [u for u in terms if u not in position]
    if missing:
        raise ValueError(f"term(s) {missing} have no Sobol index in this model (not enumerated).")
    X = posterior.X
    dtype = torch.float64
    if X.dtype != dtype:  # a float32 model is explained in float64, as compute_sobol does
        scale = posterior.variance_scale  # an attribute, not a dataclass field: replace() would drop it
        posterior = dataclasses.replace(posterior, kernel=copy.deepcopy(kernel).double(), **{
            f.name: getattr(posterior, f.name).to(dtype) for f in dataclasses.fields(posterior)
            if isinstance(getattr(posterior, f.name), torch.Tensor)})
        posterior.variance_scale = scale
        kernel, X = posterior.kernel, posterior.X
    Q = measure_points(kernel, n_points, seed).to(X)
    var = kernel.order_variances.to(X)
    base_qx, base_qq = kernel.base_matrices(Q, X), kernel.base_matrices(Q, Q)
    crosses = [var[len(u)] * base_qx[list(u)].prod(0) for u in terms]
    priors = [var[len(u)] * base_qq[list(u)].prod(0) for u in terms]
    # the rest: every other non-constant component, its kernel the full one less the terms and sigma_0^2
    crosses.append(kernel(Q, X).to_dense() - var[0] - sum(crosses))
    priors.append(kernel(Q, Q).to_dense() - var[0] - sum(priors))
    mean, cov = posterior.summand(torch.cat(crosses), torch.block_diag(*priors), full_cov=True)
    cov = 0.5 * (cov + cov.T)
    chol, _ = robust_cholesky(cov, warn=False)
    gen = torch.Generator().manual_seed(int(seed))
    eps = torch.randn(cov.shape[0], int(n_samples), generator=gen, dtype=dtype).to(X)
    dev = (chol @ eps).reshape(len(terms) + 1, int(n_points), int(n_samples))  # e_u(x_m) per sample
    m = mean.reshape(len(terms) + 1, int(n_points), 1)
    total = float(result.total)
    R = torch.tensor([float(result.values[position[u]]) * total for u in terms], dtype=dtype).to(X)
    R = torch.cat([R, (total - R.sum()).clamp_min(0.0).reshape(1)])
    S = (R.unsqueeze(-1) + (2 * m * dev + dev.square()).mean(1)).clamp_min(0.0)  # (T + 1, n_samples)
    if not normalise:
        return S.T.cpu()
    return (S[:-1] / S.sum(0).clamp_min(torch.finfo(dtype).tiny)).T.cpu()


# ------------------------------------------------------------------ the estimator-level function
def _fitted_parts(estimator, class_index: int):
    """``(posterior, SobolResult, feature names)`` of a fitted OAK regressor or classifier."""
    result = getattr(estimator, "sobol_", None)
    if result is None:
        raise TypeError(f"{type(estimator).__name__} has no Sobol indices (fit an OAKRegressor or OAKClassifier).")
    names = list(estimator._feature_names())
    if isinstance(result, list):  # OAKClassifier: one latent problem per entry
        if not 0 <= class_index < len(result):
            raise ValueError(f"class_index must be in 0..{len(result) - 1}, got {class_index!r}.")
        return estimator.posteriors_[class_index], result[class_index], names
    return estimator.posterior_, result, names


def _summarise(samples: np.ndarray, estimate: np.ndarray, level: float, top_k: int):
    alpha = (1 - level) / 2
    lower, upper = np.quantile(samples, [alpha, 1 - alpha], axis=0)
    ranks = np.argsort(np.argsort(-samples, axis=1), axis=1)  # 0 = largest, per sample
    point = np.argsort(np.argsort(-estimate))
    keeps = (ranks == point).mean(0)
    in_top = (ranks < top_k).mean(0)
    lead = np.argsort(-estimate)[:top_k]
    stable = float((ranks[:, lead] == point[lead]).all(1).mean())
    return samples.mean(0), lower, upper, keeps, in_top, stable


def sobol_intervals(estimator, *, terms=None, max_terms: int = 10, level: float = 0.9, top_k: int = 3,
                    method: str = "posterior", n_samples: int = 1000, n_points: int = 128, X=None, y=None,
                    n_boot: int = 10, class_index: int = 0, random_state: int = 0) -> SobolIntervals:
    r"""Credible intervals of the normalised Sobol indices of a fitted OAK model and the ranking's stability.

    Parameters
    ----------
    estimator : OAKRegressor or OAKClassifier
        Fitted; reads ``posterior_`` (``posteriors_``), ``sobol_`` and the feature names.
    terms : list of tuple of int or str, optional
        Terms to report (default: the ``max_terms`` highest-ranked).
    max_terms : int, default=10
    level : float, default=0.9
        Mass of the equal-tailed interval.
    top_k : int, default=3
        Leading terms whose ranking is checked.
    method : {"posterior", "bootstrap"}, default="posterior"
        ``"posterior"``: the posterior of :math:`f` at the fitted hyper-parameters (module
        docstring). ``"bootstrap"``: also the hyper-parameters' uncertainty, from ``n_boot`` refits on
        rows resampled with replacement (warm-started from the fitted hyper-parameters), pooling
        ``n_samples / n_boot`` posterior samples of each; needs the training ``X`` and ``y`` and costs
        ``n_boot`` fits.
    n_samples : int, default=1000
    n_points : int, default=128
        Quadrature points :math:`M` of the input measure (:func:`measure_points`).
    X, y : array-like or DataFrame, optional
        The training data, for ``method="bootstrap"``.
    class_index : int, default=0
        Which latent problem of a one-vs-rest OAKClassifier.
    random_state : int, default=0

    Returns
    -------
    SobolIntervals
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}.")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}.")
    posterior, result, names = _fitted_parts(estimator, class_index)
    if terms is None:
        if isinstance(max_terms, bool) or not isinstance(max_terms, (int, np.integer)) or max_terms < 1:
            raise ValueError(f"max_terms must be a positive integer, got {max_terms!r}.")
        terms = list(result.terms[:max_terms])
    else:
        terms = estimator._terms(terms)
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}.")
    top_k = min(int(top_k), len(terms))
    position = {u: i for i, u in enumerate(result.terms)}
    estimate = np.array([float(result.values[position[u]]) if u in position else np.nan for u in terms])
    if method == "posterior":
        samples = sobol_samples(posterior, result, terms, n_samples=n_samples, n_points=n_points,
                                seed=random_state).numpy()
    else:
        samples = _bootstrap_samples(estimator, terms, X, y, n_samples, n_points, n_boot, class_index, random_state)
    mean, lower, upper, keeps, in_top, stable = _summarise(samples, estimate, level, top_k)
    return SobolIntervals(terms, [tuple(names[i] for i in u) for u in terms], estimate, mean, lower, upper,
                          float(level), top_k, stable, keeps, in_top, method, samples)


def _bootstrap_samples(estimator, terms, X, y, n_samples, n_points, n_boot, class_index, seed) -> np.ndarray:
    if X is None or y is None:
        raise ValueError('method="bootstrap" refits the model: pass the training X and y.')
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}.")
    n = len(y)
    rng = np.random.default_rng(seed)
    per_fit = max(2, math.ceil(n_samples / n_boot))
    pooled = []
    for b in range(int(n_boot)):
        rows = rng.integers(0, n, n)
        refit = copy.deepcopy(estimator)
        refit.set_params(warm_start=True)
        refit.fit(_safe_indexing(X, rows), _safe_indexing(y, rows))
        posterior, result, _ = _fitted_parts(refit, class_index)
        known = set(result.terms)
        if not all(u in known for u in terms):  # a refit that enumerated fewer orders
            raise ValueError("A bootstrap refit did not enumerate every requested term; pass fewer or lower-order terms.")
        pooled.append(sobol_samples(posterior, result, terms, n_samples=per_fit, n_points=n_points,
                                    seed=seed + b + 1).numpy())
    return np.concatenate(pooled)
