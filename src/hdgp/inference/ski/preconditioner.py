"""Nyström–Woodbury preconditioner :math:`P = \\Phi\\Phi^\\top + \\sigma^2 I` of SKI's conjugate
gradients, with features :math:`\\Phi = [\\sqrt{c_j} W_j G_j]_j` built from low-frequency DCT bases on
the grids, and the Gram matrix :math:`\\Phi^\\top\\Phi` formed on the grids."""

from __future__ import annotations

import math

import torch
from linear_operator.operators import (
    DiagLinearOperator,
    LowRankRootAddedDiagLinearOperator,
    LowRankRootLinearOperator,
)

from ...exceptions import NotPositiveDefiniteError
from .operator import ProjectedSKIOperator
from .toeplitz import _toeplitz_matmul


#: Smallest eigenvalue, as a fraction of the noise variance, that the Nyström preconditioner keeps.
_PRECONDITIONER_TOL = 1e-2
#: Most columns of the preconditioner's root Φ over all projections at large n (n x 512 floats;
#: O(n · 512²) per evaluation for Φ^T Φ) ...
_PRECONDITIONER_MAX_COLUMNS = 512
#: ... and the flop budget n · R² of Φ^T Φ that sets the cap below that size (512 columns at
#: n = 20,000; 1619 at n = 2,000), see :func:`_preconditioner_column_cap`.
_PRECONDITIONER_GRAM_FLOPS = 20_000 * 512**2


def _dct_basis(m: int, r: int, like: torch.Tensor) -> torch.Tensor:
    """First ``r`` orthonormal DCT-II vectors on ``m`` points, (m, r): smooth, near-top eigenvectors of a
    stationary Toeplitz matrix."""
    a = torch.arange(m, dtype=like.dtype, device=like.device)[:, None]
    i = torch.arange(r, dtype=like.dtype, device=like.device)[None, :]
    E = torch.cos(math.pi * i * (a + 0.5) / m) * math.sqrt(2.0 / m)
    E[:, 0] = 1.0 / math.sqrt(m)
    return E


def _nystrom_grid_root(col: torch.Tensor, E: torch.Tensor, jitter: float = 1e-8) -> torch.Tensor:
    """Nyström root :math:`G_j = T_j E_j L_j^{-\\top}`, :math:`L_j L_j^\\top = E_j^\\top T_j E_j`, (J, m, r).

    :math:`G_j G_j^\\top = T_j E_j (E_j^\\top T_j E_j)^{-1} E_j^\\top T_j \\preceq T_j` for a fixed
    basis ``E`` (m, r); differentiable in ``col``. :math:`L_j^{-\\top}` is upper triangular, so the
    first :math:`k` columns of :math:`G_j` are the root for the first :math:`k` basis vectors alone.

    Computed in float64 whatever the dtype of ``col`` (J m r operations, small beside a CG solve),
    with the jitter at least 10 units of roundoff of that dtype (the error of ``col`` itself): the
    DCT modes kept for a long length-scale have eigenvalues of :math:`T_j` down to about
    :math:`e^{-\\pi^2 k^2 / 2}` times the largest, below float32's resolution after two or three
    modes, so that :math:`E_j^\\top T_j E_j` formed in float32 is not positive definite even at
    ordinary hyper-parameters. The jitter only shrinks :math:`G_j G_j^\\top` further below
    :math:`T_j`. The root is returned in the dtype of ``col``.
    """
    dtype = col.dtype
    jitter = max(jitter, 10 * torch.finfo(dtype).eps)
    col, E = col.double(), E.double()
    E = E.expand(col.shape[0], *E.shape[-2:])
    TE = _toeplitz_matmul(col, E)
    C = E.transpose(-1, -2) @ TE
    C = C + jitter * C.diagonal(dim1=-2, dim2=-1).amax(-1)[:, None, None] * torch.eye(C.shape[-1]).to(C)
    L = _preconditioner_cholesky(C)
    return torch.linalg.solve_triangular(L, TE.transpose(-1, -2), upper=False).transpose(-1, -2).to(dtype)


def _preconditioner_column_cap(n: int) -> int:
    """Most preconditioner columns :math:`R` for ``n`` rows: the :math:`n R^2` cost of
    :math:`\\Phi^\\top\\Phi` within :data:`_PRECONDITIONER_GRAM_FLOPS` and :math:`R \\le n` (more
    columns than rows gain nothing), but never fewer than :data:`_PRECONDITIONER_MAX_COLUMNS`.

    A cap that binds leaves large eigenvalues of :math:`P^{-1}\\hat K`, and the log-determinant
    estimate and its gradient then go wrong together (biased, not only noisier), so below the flop
    budget the cap grows with n.
    """
    return max(_PRECONDITIONER_MAX_COLUMNS, min(int(n), int(math.sqrt(_PRECONDITIONER_GRAM_FLOPS / max(n, 1)))))


def _preconditioner_ranks(h: torch.Tensor, coef: torch.Tensor, noise: torch.Tensor, n: int, m: int) -> torch.Tensor:
    """Nyström rank :math:`r_j` per projection: the DCT modes whose eigenvalue in :math:`K` is not
    small against the noise, (J,) integers.

    On a grid of width :math:`L_j = (m-1) h_j` unit length-scales, DCT mode :math:`k` has frequency
    :math:`\\omega_k = \\pi k / L_j`, and the RBF sub-kernel's spectral density gives it an eigenvalue
    of about :math:`c_j \\sqrt{2\\pi}\\, (n / L_j)\\, e^{-\\omega_k^2/2}` in :math:`c_j W_j T_j W_j^\\top`
    (``n / L_j`` rows per unit length; :math:`L_j` at least 1). Modes down to
    :data:`_PRECONDITIONER_TOL` times the noise variance are kept. A short length-scale needs many
    modes (a fixed few per projection leave the preconditioned log-determinant estimate too noisy
    for L-BFGS at short length-scales); a long one needs a few. At most
    :func:`_preconditioner_column_cap` in total, shared in proportion (:func:`_spectral_ranks`
    are the ranks before the cap). Chosen from
    detached values, so the ranks are piecewise constant in the hyperparameters.
    """
    ranks = _spectral_ranks(h, coef, noise, n, m)
    total, cap = float(ranks.sum()), _preconditioner_column_cap(n)
    if total > cap:
        ranks = torch.floor(ranks * (cap / total)).clamp_min(1)
    return ranks.long()


def _spectral_ranks(h: torch.Tensor, coef: torch.Tensor, noise: torch.Tensor, n: int, m: int) -> torch.Tensor:
    """The ranks of :func:`_preconditioner_ranks` before the cap on their total (float, (J,))."""
    width = (m - 1) * h.detach()
    peak = coef.detach().clamp_min(0) * math.sqrt(2 * math.pi) * n / (width.clamp_min(1.0) * noise.detach())
    omega = torch.sqrt(2 * torch.log((peak / _PRECONDITIONER_TOL).clamp_min(1.0)))
    return (1 + torch.ceil(omega * width / math.pi)).clamp(1, m)


def _features(op: ProjectedSKIOperator, G: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    """:math:`\\Phi = [\\sqrt{c_j} W_j G_j]_j` with the first ``ranks[j]`` columns of every ``G_j``,
    (n, :math:`\\sum_j r_j`), so that :math:`\\Phi\\Phi^\\top \\preceq K^{\\mathrm{SKI}}`.

    Built one projection at a time: a padded (J, n, max r_j) intermediate is J times larger
    when one projection needs many columns.
    """
    scale = op.coef.clamp_min(0).sqrt()
    blocks = []
    for j, r in enumerate(ranks.tolist()):
        # one gather of the 4 grid rows of every training row, (n, 4, r_j), contracted with the weights
        # (one temporary, where 4 separate products would keep 4)
        blocks.append(torch.einsum("nk,nkr->nr", op.weight[j], (G[j, :, :r] * scale[j])[op.index[j]]))
    return torch.cat(blocks, 1)


def _interpolation_gram(index: torch.Tensor, weight: torch.Tensor, j: int, m: int,
                        max_entries: int = 1 << 22) -> torch.Tensor:
    """Block row :math:`W_j^\\top W = [W_j^\\top W_1 \\cdots W_j^\\top W_J]` as a dense (m, J, m) tensor.

    :math:`W_j^\\top W_{j'} = \\sum_i w_{ij} w_{ij'}^\\top`: every training row adds the 16
    products of its 4 weights on grid ``j`` with its 4 on grid ``j'``, so the block row costs
    :math:`O(16 J n)` scatter-adds, accumulated over chunks of rows of at most ``max_entries``
    products (no n-sized dense intermediate).
    """
    J, n, _ = index.shape
    out = weight.new_zeros(m * J * m)
    cols = index + m * torch.arange(J, device=index.device)[:, None, None]  # column of W = [W_1 ... W_J]
    chunk = max(1, max_entries // (16 * J))
    for start in range(0, n, chunk):
        rows = slice(start, start + chunk)
        right = cols[:, rows].permute(1, 0, 2).reshape(-1, 4 * J)  # (c, 4J)
        right_w = weight[:, rows].permute(1, 0, 2).reshape(-1, 4 * J)
        key = index[j, rows, :, None] * (J * m) + right[:, None, :]  # (c, 4, 4J)
        out.index_add_(0, key.reshape(-1), (weight[j, rows, :, None] * right_w[:, None, :]).reshape(-1))
    return out.view(m, J, m)


def _feature_gram(op: ProjectedSKIOperator, root: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """:math:`\\Phi^\\top\\Phi` for :math:`\\Phi = [W_j\\,\\mathrm{root}_j]_j` restricted to the ``columns``
    mask (J, r), without forming :math:`\\Phi`.

    Block :math:`(j, j')` is :math:`\\mathrm{root}_j^\\top (W_j^\\top W_{j'})\\,\\mathrm{root}_{j'}`
    (:func:`_interpolation_gram`): :math:`O(16 J^2 n + J^2 m^2 r)` operations and
    :math:`O(J m^2 + R^2)` memory for :math:`R = \\sum_j r_j` columns, against
    :math:`O(n R^2)` and :math:`O(n R)` for :math:`\\Phi^\\top\\Phi` from :math:`\\Phi` (R reaches
    a few thousand on real data).
    """
    J, m, _ = root.shape
    ranks = columns.sum(-1).tolist()
    gram = root.new_zeros(sum(ranks), sum(ranks))
    start = 0
    for j, r in enumerate(ranks):
        if r == 0:
            continue
        left = root[j, :, :r].T @ _interpolation_gram(op.index, op.weight, j, m).reshape(m, J * m)  # (r, J m)
        gram[start:start + r] = torch.einsum("ajm,jmb->ajb", left.view(r, J, m), root)[:, columns]
        start += r
    return gram


class _LowRankPlusNoise(LowRankRootAddedDiagLinearOperator):
    """:math:`\\Phi\\Phi^\\top + \\sigma^2 I` whose samples are drawn directly as :math:`\\Phi g_1 + \\sigma g_2`."""

    def zero_mean_mvn_samples(self, num_samples: int) -> torch.Tensor:
        root = self._linear_op.root.to_dense()
        noise = self._diag_tensor.diagonal()
        g1 = torch.randn(root.shape[-1], num_samples, dtype=root.dtype, device=root.device)
        g2 = torch.randn(root.shape[-2], num_samples, dtype=root.dtype, device=root.device)
        return (root @ g1 + noise.sqrt()[:, None] * g2).T


def _woodbury_preconditioner(op: ProjectedSKIOperator, G: torch.Tensor, ranks: torch.Tensor, noise: torch.Tensor):
    """Preconditioner :math:`P = \\Phi\\Phi^\\top + \\sigma^2 I` for ``AddedDiagLinearOperator``,
    :math:`\\Phi = [\\sqrt{c_j} W_j G_j]_j` (:func:`_features`, the first ``ranks[j]`` columns of each
    grid root ``G_j``).

    Returns the ``(solve, P, log|P|)`` triple linear_operator expects;
    :math:`\\log|P| = (n - R)\\log\\sigma^2 + \\log|C|`, :math:`C = \\sigma^2 I_R + \\Phi^\\top\\Phi`
    (differentiable, so linear_operator's control variate for the log-det gradient applies).
    The solve, run at every CG iteration, is Woodbury's
    :math:`P^{-1} v = (v - \\Phi C^{-1}\\Phi^\\top v)/\\sigma^2` with :math:`\\Phi^\\top v` and
    :math:`\\Phi u` taken through the grids (sparse :math:`W^\\top v`, then :math:`G_j^\\top` per grid):
    :math:`O(J n + m R)` per column instead of :math:`O(n R)`.
    """
    Phi = _features(op, G, ranks)
    n, k = Phi.shape
    cap = noise * torch.eye(k, dtype=Phi.dtype, device=Phi.device) + Phi.T @ Phi
    L = _preconditioner_cholesky(cap)
    logdet = (n - k) * torch.log(noise) + 2 * L.diagonal().log().sum()
    L_d, noise_d = L.detach(), noise.detach()
    W, Wt = op._sparse()
    J, m = op.col.shape
    scale = op.coef.detach().clamp_min(0).sqrt()
    roots = [G[j, :, :r].detach() * scale[j] for j, r in enumerate(ranks.tolist())]  # sqrt(c_j) G_j, (m, r_j)

    def solve(rhs):
        grid = (Wt @ rhs).view(J, m, -1)  # W_j^T rhs
        u = torch.cholesky_solve(torch.cat([Gj.T @ grid[j] for j, Gj in enumerate(roots)]), L_d)  # C^-1 Phi^T rhs
        back = torch.cat([Gj @ uj for Gj, uj in zip(roots, u.split(ranks.tolist()))])  # (J m, t)
        return (rhs - W @ back) / noise_d

    P = _LowRankPlusNoise(LowRankRootLinearOperator(Phi), DiagLinearOperator(noise.expand(n)))
    return lambda _op: (solve, P, logdet)


def _preconditioner_cholesky(A: torch.Tensor) -> torch.Tensor:
    """Cholesky factor of a matrix of the preconditioner, PD in exact arithmetic.

    It fails in floating point only at extreme hyper-parameters (an output scale of 1e170 on a
    noise of 1e-4, as an L-BFGS line search may try); that is reported as
    :class:`~hdgp.exceptions.NotPositiveDefiniteError`, which the optimiser treats as a failed
    evaluation and backs off from, instead of stopping the fit.
    """
    L, info = torch.linalg.cholesky_ex(A)
    if info.any():
        hint = (" In float32 this happens already at a small noise against the output scale: use dtype='float64'."
                if A.dtype == torch.float32 else "")
        raise NotPositiveDefiniteError(
            "The SKI preconditioner is not numerically positive definite at these hyper-parameters "
            f"(an extreme output scale or noise).{hint}"
        )
    return L
