"""Explanations of fitted orthogonal additive GPs: Sobol indices, component posteriors, truncation.

With an OAK kernel :math:`k = \\sum_r \\sigma_r^2 \\sum_{|u| = r} \\prod_{i \\in u} \\tilde k_i`
and :math:`\\alpha = (K + \\sigma_n^2 I)^{-1}(y - c)`, the posterior mean of component
:math:`f_u` is :math:`m_u(x) = \\sigma_{|u|}^2 (\\odot_{i\\in u} \\tilde k_i(x_i, X_i))\\,\\alpha`
(OAK eq. 13) and its Sobol index is

.. math::

    R_u = \\mathbb V_x[m_u(x)] = \\sigma_{|u|}^4\\, \\alpha^\\top \\Big(\\odot_{i \\in u} L_i\\Big) \\alpha,
    \\qquad L_i[a, b] = \\int \\tilde k_i(x, X_{ai})\\, \\tilde k_i(x, X_{bi})\\, p_i(x)\\,dx

(eq. 14). Summing over all :math:`|u| = r` gives
:math:`\\sigma_r^4 \\alpha^\\top e_r(L_1, \\dots, L_D) \\alpha`, so per-order totals need
the same elementary-symmetric recurrence as the kernel, not an enumeration.

The posterior functions take the support points and weights from the posterior
(``posterior.X``, ``posterior.alpha``; pass the same two to :func:`compute_sobol`):
the training inputs and :math:`\\alpha` above for exact inference, the inducing
inputs :math:`Z` and :math:`\\alpha_u = K_{uu}^{-1}m` (latent mean
:math:`c + k(x, Z)\\alpha_u`) for the sparse (SGPR) and variational (SVGP)
posteriors of :mod:`hdgp.inference.inducing`, for which the same formulas hold
with :math:`X \\to Z` (OAK Sec. 4, "a similar formula for sparse GPs"). Only the
component *variances* differ by engine (:func:`component_posterior`).
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .exceptions import CostWarning, NumericalWarning, warn_caller
from .kernels._compiled import as_array, rows_backward, term_sums, use_compiled
from .kernels.additive_kernel import AdditiveKernel, elementary_symmetric

__all__ = [
    "SobolResult",
    "sobol_matrices",
    "order_sobol",
    "term_sobol",
    "compute_sobol",
    "component_mean",
    "component_means",
    "component_posterior",
    "select_terms",
    "truncated_mean",
]


def _check_kernel(kernel) -> AdditiveKernel:
    if not isinstance(kernel, AdditiveKernel) or not hasattr(kernel.base_kernel, "sobol_integral"):
        raise TypeError(
            "Sobol indices need an AdditiveKernel whose base kernel has constrained (orthogonal) "
            "features with a `sobol_integral` method, i.e. an OAK kernel."
        )
    return kernel


@torch.no_grad()
def sobol_matrices(kernel: AdditiveKernel, X: torch.Tensor) -> torch.Tensor:
    """The matrices :math:`L_i` (OAK eq. 14) for training inputs ``X`` (n, D); shape (D, n, n)."""
    kernel = _check_kernel(kernel)
    # contiguous (D, n, 1) columns: the elementwise base kernels lay their output out like their
    # inputs, so a transposed view of X gave an L with features innermost, which every pass of the
    # term enumeration read with stride D (many times slower) and which then had to be
    # copied; the result is made contiguous in any case (a base kernel may still return a view)
    cols = X.T.unsqueeze(-1).contiguous()
    return kernel.base_kernel.sobol_integral(cols, cols).contiguous()


@torch.no_grad()
def order_sobol(kernel: AdditiveKernel, L: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    r"""Sobol index of every interaction order, :math:`\sigma_r^4 \alpha^\top e_r(L)\alpha`.

    Returns
    -------
    torch.Tensor of shape (R,)
        Orders :math:`1..R` (the constant term has zero variance).
    """
    var = kernel.order_variances.to(L)
    if use_compiled(L):
        return var[1:] ** 2 * _order_sums_compiled(L, alpha, kernel.max_order)
    e = elementary_symmetric(L, kernel.max_order)[1:]  # (R, n, n)
    return var[1:] ** 2 * torch.einsum("a,rab,b->r", alpha, e, alpha)


def _order_sums_compiled(L: torch.Tensor, alpha: torch.Tensor, max_order: int) -> torch.Tensor:
    r""":math:`\alpha^\top e_r(L)\,\alpha` for :math:`r = 1..R` by the compiled reverse sweep of the additive sum
    (:func:`~hdgp.kernels._compiled.rows_backward`: its gradient in the order variances is
    :math:`\sum_{ab} G_{ab}\, e_r(L_{:ab})`), on the lower triangle with :math:`G = \alpha\alpha^\top`
    (off-diagonal entries weighted 2), as :func:`term_sobol` sums it.

    The tensor form held all :math:`e_r` at once, :math:`(R + 1) n^2` values (2.2 GB in float64 at
    n = 5000, R = 10), and its einsum took longer than the recurrence (concrete, n = 927, D = R = 8:
    90 ms in all, 9 ms here).
    """
    weights = torch.outer(alpha, alpha).mul_(2.0)
    weights.diagonal().mul_(0.5)
    sums = np.zeros(max_order + 1)
    block = as_array(L)
    # the variances only scale the adjoints, which need_base=False never forms
    rows_backward(block, 0, True, np.ones(max_order + 1, dtype=block.dtype), as_array(weights, L.dtype), False,
                  np.empty((1, 1, 1), dtype=block.dtype), sums)
    return torch.from_numpy(sums[1:]).to(L)


def _count_terms(n_dims: int, max_order: int) -> list[int]:
    return [math.comb(n_dims, r) for r in range(1, max_order + 1)]


@torch.no_grad()
def term_sobol(kernel: AdditiveKernel, L: torch.Tensor, alpha: torch.Tensor, max_terms: int = 100_000):
    r"""Sobol index :math:`R_u` of every term :math:`u` with :math:`|u| \le R`.

    Terms are enumerated depth-first with running Hadamard products
    :math:`H_u = \alpha\alpha^\top \odot L_{i_1} \odot \dots`, :math:`R_u \propto \sum H_u`.
    On the CPU the compiled :func:`~hdgp.kernels._compiled.term_sums` does it on the lower
    triangle (the matrices are symmetric) in cache-sized blocks of entries. Elsewhere, as tensor
    operations, the deepest order enumerated takes all its terms sharing a prefix in one
    matrix-vector product :math:`R_{u \cup \{j\}} \propto \langle H_u, L_j\rangle` over the
    remaining :math:`j` (one read of each :math:`L_j`, no per-term temporaries).

    Parameters
    ----------
    max_terms : int, default=100000
        If the number of terms exceeds this, only the orders whose cumulative count
        fits are enumerated and a :class:`~hdgp.exceptions.CostWarning` is issued
        (per-order totals from :func:`order_sobol` stay exact).

    Returns
    -------
    terms : list of tuple of int
    values : torch.Tensor of shape (len(terms),)
    """
    n_dims, max_order = L.shape[0], kernel.max_order
    counts = _count_terms(n_dims, max_order)
    depth = max_order
    while depth > 1 and sum(counts[:depth]) > max_terms:
        depth -= 1
    if depth < max_order:
        warnings.warn(
            f"{sum(counts)} interaction terms up to order {max_order}; enumerating only orders "
            f"<= {depth} ({sum(counts[:depth])} terms). Per-order totals remain exact.",
            CostWarning,
            stacklevel=2,
        )
    var2 = kernel.order_variances.to(L) ** 2
    if use_compiled(L):
        terms, raw = _term_sums_compiled(L, alpha, depth)
    else:
        terms, raw = _term_sums_tensor(L, alpha, depth, sum(counts[:depth]))
    orders = torch.tensor([len(u) for u in terms], device=raw.device)
    return terms, var2[orders] * raw


#: Lower-triangle entries gathered per call of the compiled term sums (bounds the copy to D x 2^18).
_TERM_CHUNK = 1 << 18


def _term_sums_compiled(L: torch.Tensor, alpha: torch.Tensor, depth: int):
    """The pre-order terms up to ``depth`` and their sums, by :func:`~hdgp.kernels._compiled.term_sums`
    over the lower triangle (off-diagonal entries weighted 2)."""
    n_dims, n = L.shape[0], L.shape[-1]
    terms = list(_preorder_terms(n_dims, depth))
    # subtree[j, level]: terms below the term of level + 1 features ending at feature j
    subtree = np.array([[sum(math.comb(n_dims - 1 - j, k) for k in range(1, depth - level))
                         for level in range(depth)] for j in range(n_dims)], dtype=np.int64)
    rows, cols = torch.tril_indices(n, n, device=L.device)
    out = np.zeros(len(terms))
    for start in range(0, rows.numel(), _TERM_CHUNK):
        a, b = rows[start:start + _TERM_CHUNK], cols[start:start + _TERM_CHUNK]
        h = alpha[a] * alpha[b] * torch.where(a == b, 1.0, 2.0).to(alpha)
        term_sums(as_array(L[:, a, b], torch.float64), as_array(h, torch.float64), depth, subtree, out)
    return terms, torch.from_numpy(out).to(L)


def _preorder_terms(n_dims: int, depth: int, prefix: tuple = ()):
    """Every term of at most ``depth`` features extending ``prefix``, in pre-order."""
    for j in range((prefix[-1] + 1) if prefix else 0, n_dims):
        yield prefix + (j,)
        if len(prefix) + 1 < depth:
            yield from _preorder_terms(n_dims, depth, prefix + (j,))


def _term_sums_tensor(L: torch.Tensor, alpha: torch.Tensor, depth: int, n_terms: int):
    """:func:`_term_sums_compiled` as tensor operations (GPUs), on the whole matrices."""
    n_dims = L.shape[0]
    flat_L = L.reshape(n_dims, -1)
    terms: list[tuple[int, ...]] = []
    # written in place into one vector: a version that kept one small result tensor per term
    # (interleaved with the n x n temporaries) grew the process RSS by GBs per call (D = R = 11)
    raw = alpha.new_empty(n_terms)

    def visit(prefix: tuple[int, ...], H: torch.Tensor) -> None:
        first = (prefix[-1] + 1) if prefix else 0
        if len(prefix) + 1 == depth:  # leaves: <H, L_j> for every remaining j at once
            pos = len(terms)
            terms.extend(prefix + (j,) for j in range(first, n_dims))
            torch.mv(flat_L[first:], H.reshape(-1), out=raw[pos:len(terms)])
            return
        for j in range(first, n_dims):
            Hj = H * L[j]
            raw[len(terms)] = Hj.sum()
            terms.append(prefix + (j,))
            visit(terms[-1], Hj)

    visit((), torch.outer(alpha, alpha))
    return terms, raw


@dataclass
class SobolResult:
    """Normalised Sobol indices of a fitted OAK model.

    Attributes
    ----------
    terms : list of tuple of int
        Terms sorted by decreasing Sobol index.
    values : torch.Tensor
        Normalised indices of ``terms`` (fractions of the total variance of the
        posterior mean, summing to 1 when every term was enumerated).
    by_order : torch.Tensor of shape (R,)
        Normalised totals per order 1..R.
    total : float
        :math:`\\mathbb V_x[m(x)] = \\sum_u R_u` (unnormalised).
    """

    terms: list
    values: torch.Tensor
    by_order: torch.Tensor
    total: float


@torch.no_grad()
def compute_sobol(kernel: AdditiveKernel, X: torch.Tensor, alpha: torch.Tensor, max_terms: int = 100_000) -> SobolResult:
    """Per-term and per-order normalised Sobol indices (OAK eqs. 12–14, 38), in float64.

    Each index is a quadratic form :math:`\alpha^\top L_u \alpha` whose terms cancel
    heavily (large :math:`\alpha`); in float32 that cancellation gave indices of -0.017
    where float64 gives +0.001, so a float32 model is explained through a float64 copy.
    Rounding below zero is clipped at 0.
    """
    if X.dtype != torch.float64:
        kernel, X, alpha = copy.deepcopy(kernel).double(), X.double(), alpha.double()
    L = sobol_matrices(kernel, X)
    per_order = order_sobol(kernel, L, alpha)
    # a non-finite entry of L that the sums read reaches the per-order sums (e_1 adds every feature, and
    # 0 * inf is NaN), so L itself is searched only then (a full scan took 3x as long as the sums)
    if not torch.isfinite(per_order).all() and not torch.isfinite(L).all():  # reported, not passed on as NaN
        bad = torch.nonzero(~torch.isfinite(L).flatten(1).all(1)).ravel().tolist()
        warn_caller(f"The Sobol integrals of feature(s) {bad} are not finite, so the Sobol indices are "
                    "NaN; please report this with the model's hyper-parameters.", NumericalWarning)
    per_order = per_order.clamp_min(0)
    total = per_order.sum().clamp_min(torch.finfo(per_order.dtype).tiny)
    terms, values = term_sobol(kernel, L, alpha, max_terms=max_terms)
    values = values.clamp_min(0)
    order = torch.argsort(values, descending=True)
    return SobolResult([terms[i] for i in order.tolist()], values[order] / total, per_order / total, float(total))


def _term_features(kernel: AdditiveKernel, term: Sequence[int]) -> list[int]:
    u = sorted(set(int(i) for i in term))
    if len(u) > kernel.max_order or any(not 0 <= i < kernel.num_dims for i in u):
        raise ValueError(
            f"term {tuple(term)} is not a component of this model (D={kernel.num_dims}, R={kernel.max_order})."
        )
    return u


def _term_cross(kernel: AdditiveKernel, term: Sequence[int], Xs: torch.Tensor, X: torch.Tensor, base=None):
    """``(u, σ²_|u|, k_u(Xs, X))``; ``base`` is ``kernel.base_matrices(Xs, X)`` when the caller already has it."""
    u = _term_features(kernel, term)
    if u:
        cross = (kernel.base_matrices(Xs, X) if base is None else base)[..., u, :, :].prod(-3)
    else:
        cross = Xs.new_ones(Xs.shape[0], X.shape[0])
    return u, kernel.order_variances[len(u)].to(Xs), cross


@torch.no_grad()
def component_mean(posterior, term: Sequence[int], Xs: torch.Tensor) -> torch.Tensor:
    r"""Posterior mean :math:`m_u(x) = \sigma_{|u|}^2 k_u(X_*, X)\alpha` of one component (OAK eq. 13).

    The empty term gives the order-0 component :math:`\sigma_0^2 \mathbf 1^\top\alpha`
    (the constant mean :math:`c` is not included).
    """
    return component_means(posterior, [term], Xs)[0]


#: Bytes of the base matrices of one row block in :func:`component_means`.
_MEANS_BLOCK_BYTES = 2**24


@torch.no_grad()
def component_means(posterior, terms: Sequence[Sequence[int]], Xs: torch.Tensor) -> torch.Tensor:
    """:func:`component_mean` of every term in ``terms`` at ``Xs``, shape (len(terms), t).

    The base matrices :math:`k_i(X_*, X)` of all features are evaluated once and shared by the
    terms: evaluating them per term (as :func:`component_mean` must) was nearly all the cost of a
    truncation curve. Same values as :func:`component_mean`.
    """
    kernel = _require_additive(posterior.kernel)
    features = [_term_features(kernel, u) for u in terms]  # every term checked before any work
    out = Xs.new_empty(len(features), Xs.shape[0])
    X = posterior.X
    # on the CPU, rows of Xs in blocks whose base matrices stay at _MEANS_BLOCK_BYTES (4000 test rows x 3000
    # support points x 8 features made 768 MB at once, and every term a gathered copy of its share); a GPU
    # takes all rows at once (each block is a round of kernel launches there)
    step = max(1, _MEANS_BLOCK_BYTES // (kernel.num_dims * max(X.shape[0], 1) * Xs.element_size()))
    step = step if Xs.device.type == "cpu" else max(Xs.shape[0], 1)
    for r0 in range(0, Xs.shape[0], step):
        xs = Xs[r0:r0 + step]
        base = kernel.base_matrices(xs, X) if any(features) else None
        for k, u in enumerate(features):
            _, s2, cross = _term_cross(kernel, u, xs, X, base)
            out[k, r0:r0 + step] = s2 * cross @ posterior.alpha
    return out


def _require_additive(kernel) -> AdditiveKernel:
    if not isinstance(kernel, AdditiveKernel):
        raise TypeError("Component posteriors need a posterior whose kernel is an AdditiveKernel.")
    return kernel


@torch.no_grad()
def component_posterior(posterior, term: Sequence[int], Xs: torch.Tensor, *, full_cov: bool = False):
    r"""Posterior mean and variance of one component :math:`f_u` at ``Xs``.

    :math:`f_u` is an a-priori independent summand of :math:`f` with covariance
    :math:`\sigma_{|u|}^2 k_u`, :math:`k_u = \prod_{i\in u} \tilde k_i`, so its
    cross-covariance with the posterior's support values :math:`f(X)` is
    :math:`\sigma_{|u|}^2 k_u(X_*, X)` and ``posterior.summand`` conditions on it.
    For an exact posterior (OAK eq. 13, with the Gaussian conditional variance)

    .. math::

        m_u = \sigma_{|u|}^2 k_u(X_*, X)\alpha, \qquad
        v_u = \sigma_{|u|}^2 k_u(X_*, X_*) - \sigma_{|u|}^4 k_u(X_*, X) (K + \sigma_n^2 I)^{-1} k_u(X, X_*);

    for an inducing-point posterior (SGPR / SVGP, :math:`q(f(Z)) = N(m, S)`)

    .. math::

        m_u = \sigma_{|u|}^2 k_u(X_*, Z)\alpha_u, \qquad
        v_u = \sigma_{|u|}^2 k_u(X_*, X_*) - \sigma_{|u|}^4 k_u(X_*, Z) K_{uu}^{-1} k_u(Z, X_*)
              + \sigma_{|u|}^4 k_u(X_*, Z) K_{uu}^{-1} S K_{uu}^{-1} k_u(Z, X_*)

    (:meth:`hdgp.inference.inducing.InducingPosterior.summand`).

    Parameters
    ----------
    posterior : ExactPosterior or InducingPosterior
        Posterior (:mod:`hdgp.inference`) whose kernel is an :class:`AdditiveKernel`.
    term : sequence of int
        Feature indices :math:`u` (empty: the order-0 constant component).
    Xs : torch.Tensor of shape (t, D)

    Returns
    -------
    mean : torch.Tensor of shape (t,)
    var : torch.Tensor of shape (t,), or (t, t) when ``full_cov``
    """
    kernel = _require_additive(posterior.kernel)
    u, s2, cross = _term_cross(kernel, term, Xs, posterior.X)
    if not u:
        prior = Xs.new_ones(Xs.shape[0], Xs.shape[0]) if full_cov else Xs.new_ones(Xs.shape[0])
    elif full_cov:
        prior = kernel.base_matrices(Xs, Xs)[u].prod(0)
    else:
        prior = kernel.base_matrices(Xs, Xs, diag=True)[u].prod(0)
    return posterior.summand(s2 * cross, s2 * prior, full_cov=full_cov)


def select_terms(result: SobolResult, threshold: float = 0.99) -> list:
    """Smallest prefix of the ranked terms whose cumulative normalised Sobol reaches ``threshold``.

    Where ``max_terms`` stopped the enumeration (:func:`term_sobol`) the enumerated terms can fall
    short of ``threshold``: all of them are returned, with a :class:`~hdgp.exceptions.CostWarning`
    giving the mass of the orders left out.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}.")
    enumerated = max(map(len, result.terms), default=0)
    missing = float(result.by_order[enumerated:].sum())
    if missing > 0 and float(result.values.sum()) < threshold:
        warn_caller(
            f"components_ holds the enumerated terms (orders <= {enumerated}), which carry "
            f"{float(result.values.sum()):.3f} of the variance, less than sobol_threshold={threshold}: orders "
            f"above {enumerated} carry {missing:.3f} (sobol_order_) but their terms were not enumerated, so "
            "predict_truncated leaves them out. Raise max_sobol_terms.",
            CostWarning,
        )
    cum = torch.cumsum(result.values, 0)
    reached = torch.nonzero(cum >= threshold - 1e-12)
    k = int(reached[0]) + 1 if len(reached) else len(result.terms)
    return result.terms[:k]


@torch.no_grad()
def truncated_mean(posterior, terms: Sequence[Sequence[int]], Xs: torch.Tensor) -> torch.Tensor:
    """Posterior mean using only the constant and the given components (OAK appendix H, step 5)."""
    means = component_means(posterior, [(), *terms], Xs)
    out = posterior.constant + means[0]
    for mean in means[1:]:
        out = out + mean
    return out
