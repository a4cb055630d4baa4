"""Additive structured kernel interpolation (SKI) for 1-D projected-additive kernels.

Each 1-D projection :math:`z_j = \\eta_j^\\top A x` gets its own regular grid
:math:`U_j` of :math:`m` points, local cubic (Keys) interpolation weights
:math:`W_j` (4 non-zeros per row) and a Toeplitz grid covariance
:math:`T_j = k(U_j, U_j)`:

.. math::

    K \\approx K^{\\mathrm{SKI}} = s \\sum_{j=1}^{J} \\alpha_j W_j T_j W_j^\\top

(Wilson & Nickisch 2015; Delbridge, Bindel & Wilson 2020, Sec. 2.2 and 4.4).
A matrix-vector product costs :math:`O(J(n + m \\log m))` (sparse interpolation
plus an FFT circulant embedding of every :math:`T_j`). Solves use linear
conjugate gradients and the log-determinant stochastic Lanczos quadrature,
both from ``linear_operator`` (its ``inv_quad_logdet``); predictive variances use
a Lanczos factorisation cached on the grids (LOVE, Pleiss et al. 2018), so a
test point costs :math:`O(J k)` for a rank-:math:`k` cache.

The grids follow the projected training data: :math:`h_j = \\max(\\mathrm{range}_j, 1)/(m-5)`
with two spare points at each end, and depend differentiably on the
hyperparameters. At prediction time a grid is extended (same spacing) to cover
test projections up to :data:`_CUTOFF` unit length-scales beyond it; farther
out the RBF sub-kernel is below :math:`e^{-40}` and the test point's
cross-covariance through that projection is exactly zero.
"""

from __future__ import annotations

import math
import numbers
import warnings
from contextlib import ExitStack
from dataclasses import dataclass

import gpytorch
import linear_operator
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import (
    AddedDiagLinearOperator,
    DiagLinearOperator,
    LinearOperator,
    LowRankRootAddedDiagLinearOperator,
    LowRankRootLinearOperator,
)
from linear_operator.utils.warnings import NumericalWarning as LinearOperatorNumericalWarning

from .._blocks import in_row_blocks
from ..exceptions import ConvergenceWarning, NotPositiveDefiniteError, NumericalWarning, warn_caller
from ._gaussian import GaussianNoiseModel
from .exact import _NegLogMarginalLikelihood
from ..kernels.projected_kernel import ProjectedAdditiveKernel

__all__ = ["ProjectedSKIOperator", "SKIProjectedGPModel", "SKIPosterior", "cubic_interpolation",
           "symmetric_toeplitz_eigh"]

#: Relative residual ‖K̂α − r‖/‖r‖ of the posterior solve above which a ConvergenceWarning is issued.
_POSTERIOR_MAX_RESIDUAL = 1e-3
#: ... and the rms residual, as a fraction of the noise standard deviation: the residual is about
#: the error of the posterior mean at the training points, which must be small against the noise
#: even when a large constant mean c makes ‖r‖ = ‖y − c‖ large.
_POSTERIOR_MAX_RMS_PER_NOISE_STD = 0.1
#: Extra solves for the residual (iterative refinement) before that warning.
_POSTERIOR_REFINEMENTS = 3

#: Floats of a (J, block, 1 + r) tensor of grid values at test points: prediction goes in blocks of rows.
_PREDICT_BLOCK_FLOATS = 1 << 23

#: Unit length-scales beyond which an RBF sub-kernel is treated as exactly zero (exp(-40.5)).
_CUTOFF = 9.0

#: Smallest eigenvalue, as a fraction of the noise variance, that the Nyström preconditioner keeps.
_PRECONDITIONER_TOL = 1e-2
#: Most columns of the preconditioner's root Φ over all projections at large n (n x 512 floats;
#: O(n · 512²) per evaluation for Φ^T Φ) ...
_PRECONDITIONER_MAX_COLUMNS = 512
#: ... and the flop budget n · R² of Φ^T Φ that sets the cap below that size (512 columns at
#: n = 20,000; 1619 at n = 2,000), see :func:`_preconditioner_column_cap`.
_PRECONDITIONER_GRAM_FLOPS = 20_000 * 512**2

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


def _keys(x: torch.Tensor) -> torch.Tensor:
    """Keys (1981) cubic convolution kernel with :math:`a = -1/2`, for :math:`|x| < 2`."""
    x = x.abs()
    inner = (1.5 * x - 2.5) * x * x + 1.0
    outer = ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
    return torch.where(x <= 1.0, inner, outer)


def cubic_interpolation(z: torch.Tensor, u0: torch.Tensor, h: torch.Tensor):
    """Local cubic interpolation of points ``z`` onto regular grids.

    Parameters
    ----------
    z : torch.Tensor of shape (J, n)
        Points, one row per grid.
    u0, h : torch.Tensor of shape (J,)
        First grid point and spacing of every grid (grid point ``i`` is ``u0 + i h``).

    Returns
    -------
    index : LongTensor of shape (J, n, 4)
        Grid indices ``floor(s) - 1 .. floor(s) + 2`` with ``s = (z - u0)/h``.
    weight : torch.Tensor of shape (J, n, 4)
        Keys weights, differentiable in ``z``, ``u0`` and ``h``; they sum to one.
    """
    s = (z - u0[:, None]) / h[:, None]
    base = torch.floor(s.detach())
    t = s - base
    offsets = torch.arange(-1, 3, device=z.device, dtype=z.dtype)
    weight = _keys(t[..., None] - offsets)
    index = base.long()[..., None] + offsets.long()
    return index, weight


def _toeplitz_matmul(col: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """Symmetric Toeplitz products ``T_j U_j`` for ``col`` (J, m), ``U`` (J, m, t) by circulant embedding."""
    m = col.shape[-1]
    circ = torch.cat([col, col.new_zeros(col.shape[:-1] + (1,)), col[..., 1:].flip(-1)], dim=-1)
    f = torch.fft.rfft(circ, dim=-1)
    FU = torch.fft.rfft(U.transpose(-1, -2), n=2 * m, dim=-1)  # FFT along the last axis is ~2x faster
    return torch.fft.irfft(f[:, None, :] * FU, n=2 * m, dim=-1)[..., :m].transpose(-1, -2)


def symmetric_toeplitz_eigh(col: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Eigenvalues (descending) and orthonormal eigenvectors of the symmetric Toeplitz matrix
    :math:`T_{ab} = t_{|a-b|}` with first column ``col`` (m,).

    :math:`T` is centrosymmetric (:math:`JTJ = T`, :math:`J` the exchange matrix), so with
    :math:`k = \lfloor m/2\rfloor`, :math:`A_{ab} = t_{|a-b|}` and :math:`(BJ)_{ab} = t_{m-1-a-b}`
    (:math:`a, b < k`) the orthogonal :math:`Q = \tfrac{1}{\sqrt 2}\begin{bmatrix} I & I \\ J & -J
    \end{bmatrix}` (with a middle row :math:`[0\;\sqrt 2\;0]` for odd m) gives
    :math:`Q^\top T Q = \operatorname{diag}(A + BJ, A - BJ)`, bordered for odd m by
    :math:`\sqrt 2\,t_{k-a}` and :math:`t_0` in the symmetric block: eigenvectors are
    :math:`[u; Ju]/\sqrt 2` or :math:`[u; -Ju]/\sqrt 2`. Two half-size problems cost a quarter of
    the flops and half the memory of one dense ``eigh`` (*ad hoc*, one thread, m = 2048:
    1.68 s dense, 0.51 s split).
    """
    m = col.shape[0]
    k = m // 2
    a = torch.arange(k, device=col.device)
    near, far = col[(a[:, None] - a).abs()], col[m - 1 - a[:, None] - a]
    sym, skew = near + far, near - far
    if m % 2:  # border of the symmetric block: the middle row and column of T
        middle = math.sqrt(2.0) * col[k - a]
        sym = torch.cat([torch.cat([sym, middle[:, None]], 1), torch.cat([middle, col[:1]])[None]], 0)
    val_s, vec_s = torch.linalg.eigh(sym)
    val_k, vec_k = torch.linalg.eigh(skew)
    half = 1.0 / math.sqrt(2.0)
    top_s, top_k = vec_s[:k] * half, vec_k * half
    mid_s = vec_s[k:] if m % 2 else vec_s.new_zeros(0, k + m % 2)
    mid_k = vec_k.new_zeros(m % 2, k)
    vectors = torch.cat([torch.cat([top_s, mid_s, top_s.flip(0)]),
                         torch.cat([top_k, mid_k, -top_k.flip(0)])], 1)
    values = torch.cat([val_s, val_k])
    order = values.argsort(descending=True)
    return values[order], vectors[:, order]


def _interp_t(index, weight, rhs, n_grid):
    """:math:`W_j^\\top\\,\\mathrm{rhs}` for every grid: (J, n, 4) x (n, t) -> (J, n_grid, t)."""
    J, n, _ = index.shape
    flat = index + n_grid * torch.arange(J, device=index.device)[:, None, None]
    U = rhs.new_zeros(J * n_grid, rhs.shape[-1])
    for k in range(4):
        U = U.index_add(0, flat[..., k].reshape(-1), (weight[..., k, None] * rhs).reshape(J * n, -1))
    return U.view(J, n_grid, -1)


def _interp_each(index, weight, V):
    """:math:`W_j V_j` for every grid: (J, n, 4) x (J, n_grid, t) -> (J, n, t)."""
    J, n_grid, t = V.shape
    flat = index + n_grid * torch.arange(J, device=index.device)[:, None, None]
    Vf = V.reshape(J * n_grid, t)
    out = 0.0
    for k in range(4):
        out = out + weight[..., k, None] * Vf[flat[..., k]]
    return out


def _interp(index, weight, V):
    """:math:`\\sum_j W_j V_j`: (J, n, 4) x (J, n_grid, t) -> (n, t)."""
    return _interp_each(index, weight, V).sum(0)


def _grid_columns(h: torch.Tensor, m: int) -> torch.Tensor:
    """First column of every unit-RBF Toeplitz :math:`T_j`: :math:`\\exp(-\\tfrac12 (i h_j)^2)`, (J, m)."""
    i = torch.arange(m, device=h.device, dtype=h.dtype)
    return torch.exp(-0.5 * (i * h[:, None]) ** 2)


class _DenseSKIMatrix(torch.autograd.Function):
    """:math:`K^{\\mathrm{SKI}} = \\sum_j c_j W_j T_j W_j^\\top` as a dense (n, n) matrix, for small n.

    Forward, per projection: :math:`W_j T_j` (sparse times dense, :math:`4nm`) and its product with
    :math:`W_j^\\top` (:math:`4n^2`). Backward, for an upstream gradient :math:`G` (symmetrised to
    :math:`S`), with :math:`P_j = W_j^\\top S` (m, n) and :math:`B_j = P_j W_j` (m, m):

    .. math::

        \\frac{\\partial}{\\partial c_j} = \\langle B_j, T_j\\rangle,\\qquad
        \\frac{\\partial}{\\partial\\,\\mathrm{col}_j[l]} = c_j \\sum_{|g - g'| = l} (B_j)_{gg'},\\qquad
        \\frac{\\partial}{\\partial w_{ik}} = 2 c_j\\,(P_j^\\top T_j)_{i,\\,\\mathrm{index}_{ik}},

    all sparse products and gathers: no (n, n, ·) intermediate and no scatter into an (n, m) array
    (autograd through gathers took 0.88 s per evaluation at n = 800, J = 20, m = 512, against
    0.24 s; *ad hoc*).
    """

    @staticmethod
    def forward(ctx, weight, col, coef, index):
        J, n, _ = index.shape
        m = col.shape[-1]
        lag = (torch.arange(m, device=col.device)[:, None] - torch.arange(m, device=col.device)).abs()
        maps = [_interpolation_csr(index[j], weight[j].detach(), m) for j in range(J)]
        K = torch.zeros(n, n, dtype=col.dtype, device=col.device)
        for j, (W, _) in enumerate(maps):
            K += coef[j] * (W @ (W @ col[j][lag]).T)  # c_j W_j (W_j T_j)^T
        ctx.save_for_backward(weight, col, coef, index)
        ctx.maps, ctx.lag = maps, lag
        return K

    @staticmethod
    def backward(ctx, grad):
        weight, col, coef, index = ctx.saved_tensors
        S = 0.5 * (grad + grad.T)
        m = col.shape[-1]
        g_weight, g_col, g_coef = torch.zeros_like(weight), torch.zeros_like(col), torch.zeros_like(coef)
        grid = torch.arange(m, device=col.device)
        for j, (_, Wt) in enumerate(ctx.maps):
            P = Wt @ S  # W_j^T S, (m, n)
            B = Wt @ P.T  # W_j^T S W_j, (m, m)
            sums = torch.bincount(ctx.lag.reshape(-1), weights=B.reshape(-1), minlength=m)
            g_coef[j] = (sums * col[j]).sum()
            g_col[j] = coef[j] * sums
            at = col[j][(index[j][:, :, None] - grid).abs()]  # T_j at the 4 grid columns of every row, (n, 4, m)
            g_weight[j] = 2 * coef[j] * torch.einsum("nkg,gn->nk", at, P)
        return g_weight, g_col, g_coef, None


def _interpolation_csr(index: torch.Tensor, weight: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:math:`W_j` (n, m) and :math:`W_j^\\top` (m, n) of one projection as CSR matrices."""
    n = index.shape[0]
    rows = torch.arange(n, device=index.device).repeat_interleave(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        coo = torch.sparse_coo_tensor(torch.stack([rows, index.reshape(-1)]), weight.reshape(-1), (n, m)).coalesce()
        return coo.to_sparse_csr(), coo.t().coalesce().to_sparse_csr()


def _dense_ski_matrix(op: "ProjectedSKIOperator") -> torch.Tensor:
    """:math:`K^{\\mathrm{SKI}}` of ``op`` as a dense matrix with the analytic gradient of :class:`_DenseSKIMatrix`."""
    return _DenseSKIMatrix.apply(op.weight, op.col, op.coef, op.index)


class ProjectedSKIOperator(LinearOperator):
    """:math:`\\sum_j c_j W_j T_j W_j^\\top` as a ``linear_operator`` (symmetric, n x n).

    Parameters
    ----------
    weight, index : tensors of shape (J, n, 4)
        Output of :func:`cubic_interpolation`.
    col : torch.Tensor of shape (J, m)
        First columns of the Toeplitz grid covariances.
    coef : torch.Tensor of shape (J,)
        Weights :math:`c_j` (sub-kernel weight times output scale).
    """

    def __init__(self, weight, index, col, coef, sparse_cache=None):
        # linear_operator rebuilds the operator from its tensors (inside inv_quad_logdet's forward and
        # backward, and for dtype / device / batch changes) and hands non-tensor keywords to the rebuilt
        # copy: the copies share this dict, and reuse its CSR matrices while their index and weight are
        # the very tensors they were built from (_sparse_key); one evaluation built them three times
        sparse_cache = {} if sparse_cache is None else sparse_cache
        super().__init__(weight, index, col, coef, sparse_cache=sparse_cache)  # a floating tensor first: dtype
        self.index, self.weight, self.col, self.coef = index, weight, col, coef
        self._sparse_cache = sparse_cache
        self._csr = None

    def _sparse_key(self) -> tuple:
        """Identity of the interpolation data: storage, offset, shape, stride and version of ``index`` and
        ``weight`` (a detached alias shares storage and version counter with its source), and the grid size."""
        return tuple((t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()),
                      t._version, t.dtype, t.device) for t in (self.index, self.weight)) + (self.col.shape[-1],)

    def _sparse(self):
        """Constant copies of :math:`W = [W_1 \\cdots W_J]` (n x Jm) and :math:`W^\\top` as CSR matrices.

        Used for products that need no gradient (every CG / Lanczos iteration):
        one sparse product replaces 4 gathers or scatters of (J, n, t) temporaries.
        """
        if self._csr is None:
            key = self._sparse_key()
            if self._sparse_cache.get("key") == key:
                self._csr, self._w_order = self._sparse_cache["csr"], self._sparse_cache["order"]
                return self._csr
            J, n, _ = self.index.shape
            m = self.col.shape[-1]
            flat = (self.index + m * torch.arange(J, device=self.index.device)[:, None, None]).reshape(-1)
            values = self.weight.detach().reshape(-1)
            rows = torch.arange(n, device=flat.device).repeat_interleave(4).repeat(J)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                # row-major order of W: within a row, (j, k) already sorts the columns j m + index
                order = torch.arange(J * n * 4, device=flat.device).view(J, n, 4).transpose(0, 1).reshape(-1)
                crow = torch.arange(0, 4 * J * n + 1, 4 * J, device=flat.device)
                W = torch.sparse_csr_tensor(crow, flat[order], values[order], size=(n, J * m))
                self._w_order = order
                order = torch.argsort(flat, stable=True)  # grid-major: CSR of W^T
                crow_t = torch.zeros(J * m + 1, dtype=torch.long, device=flat.device)
                crow_t[1:] = torch.bincount(flat, minlength=J * m).cumsum(0)
                Wt = torch.sparse_csr_tensor(crow_t, rows[order], values[order], size=(J * m, n))
            self._csr = (W, Wt)
            # the entry keeps index and weight alive, so no other tensor can take their storage (in the key)
            self._sparse_cache.update(key=key, csr=self._csr, order=self._w_order, data=(self.index, self.weight))
        return self._csr

    def _matmul(self, rhs: torch.Tensor) -> torch.Tensor:
        vector = rhs.dim() == 1
        rhs = rhs.unsqueeze(-1) if vector else rhs
        J, m = self.col.shape
        if torch.is_grad_enabled() and any(a.requires_grad for a in (self.weight, self.col, self.coef)):
            U = _interp_t(self.index, self.weight, rhs, m)  # differentiable in the weights
            V = _toeplitz_matmul(self.col, U) * self.coef[:, None, None]
            out = _interp(self.index, self.weight, V)
        else:
            W, Wt = self._sparse()
            V = _toeplitz_matmul(self.col, (Wt @ rhs).view(J, m, -1)) * self.coef[:, None, None]
            out = W @ V.reshape(J * m, -1)
        return out.squeeze(-1) if vector else out

    def _bilinear_derivative(self, left_vecs: torch.Tensor, right_vecs: torch.Tensor):
        """Analytic gradient of :math:`\\sum_t l_t^\\top K r_t` w.r.t. ``(weight, index, col, coef)``.

        With :math:`U^L_j = W_j^\\top L`, :math:`U^R_j = W_j^\\top R`:
        :math:`\\partial/\\partial c_j = \\langle U^L_j, T_j U^R_j\\rangle`;
        :math:`\\partial/\\partial\\,\\mathrm{col}_j[l] = c_j \\sum_{|a-b|=l} (U^L_j U^{R\\top}_j)_{ab}`
        (a cross-correlation, by FFT); and for the interpolation weight of row
        :math:`i` at grid point :math:`g`,
        :math:`c_j \\sum_t (L_{it} (T_j U^R_j)_{gt} + R_{it} (T_j U^L_j)_{gt})`, evaluated only on the
        sparsity pattern of :math:`W` (``sampled_addmm``).
        """
        L = left_vecs.unsqueeze(-1) if left_vecs.dim() == 1 else left_vecs
        R = right_vecs.unsqueeze(-1) if right_vecs.dim() == 1 else right_vecs
        J, m = self.col.shape
        W, Wt = self._sparse()
        UL, UR = (Wt @ L).view(J, m, -1), (Wt @ R).view(J, m, -1)
        TL, TR = _toeplitz_matmul(self.col, UL), _toeplitz_matmul(self.col, UR)
        coef = self.coef.detach()
        g_coef = (UL * TR).sum((1, 2))
        FL = torch.fft.rfft(UL.transpose(-1, -2), n=2 * m, dim=-1)
        FR = torch.fft.rfft(UR.transpose(-1, -2), n=2 * m, dim=-1)
        xc = torch.fft.irfft((FL.conj() * FR).sum(-2), n=2 * m, dim=-1)  # xc[:, l] = sum_a UL[a] UR[a + l]
        # (negative lags wrap around to 2m - l)
        g_col = xc[:, :m].clone()
        g_col[:, 1:] += xc[:, m + 1:].flip(-1)
        g_col = g_col * coef[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sampled = torch.sparse.sampled_addmm(W, L, (TR * coef[:, None, None]).reshape(J * m, -1).T, beta=0.0)
            sampled = torch.sparse.sampled_addmm(sampled, R, (TL * coef[:, None, None]).reshape(J * m, -1).T)
        g_weight = torch.empty_like(self.weight).reshape(-1)
        g_weight[self._w_order] = sampled.values()
        grads = (g_weight.view_as(self.weight), None, g_col, g_coef)
        return tuple(g if a.requires_grad else None for g, a in zip(grads, (self.weight, self.index, self.col,
                                                                            self.coef)))

    def _diagonal(self) -> torch.Tensor:
        # indices of one row are consecutive, so (W T W^T)_ii = sum_{k,l} w_k w_l col[|k - l|]
        lag = (torch.arange(4)[:, None] - torch.arange(4)[None, :]).abs().to(self.col.device)
        C = self.col[:, lag]  # (J, 4, 4)
        return torch.einsum("jnk,jkl,jnl,j->n", self.weight, C, self.weight, self.coef)

    def _size(self) -> torch.Size:
        n = self.index.shape[1]
        return torch.Size([n, n])

    def _transpose_nonbatch(self) -> "ProjectedSKIOperator":
        return self

    def _expand_batch(self, batch_shape):  # pragma: no cover - non-batched operator
        raise ValueError("ProjectedSKIOperator does not support batch shapes.")


def _interpolation_error(h: torch.Tensor) -> torch.Tensor:
    """Largest error of the cubic SKI approximation of the unit RBF on a grid of step ``h`` (in
    length-scales), per grid: :math:`0.045 h^3` (fitted to the measured maximum over pairs of
    points for h from 0.05 to 0.3) or the error of the variance midway between grid points,
    whichever is larger (the latter from h = 0.5: 0.0078 at 0.5, 0.080 at 1); at most 1."""
    lag = torch.arange(4, device=h.device, dtype=h.dtype)
    w = torch.tensor([-1.0, 9.0, 9.0, -1.0], device=h.device, dtype=h.dtype) / 16  # Keys weights at t = 1/2
    C = torch.exp(-0.5 * ((lag[:, None] - lag) * h[:, None, None]) ** 2)
    midpoint = (1 - w @ C @ w).abs()
    return torch.maximum(0.045 * h**3, midpoint).clamp_max(1.0)


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
    """
    E = E.expand(col.shape[0], *E.shape[-2:])
    TE = _toeplitz_matmul(col, E)
    C = E.transpose(-1, -2) @ TE
    C = C + jitter * C.diagonal(dim1=-2, dim2=-1).amax(-1)[:, None, None] * torch.eye(C.shape[-1]).to(C)
    L = _preconditioner_cholesky(C)
    return torch.linalg.solve_triangular(L, TE.transpose(-1, -2), upper=False).transpose(-1, -2)


def _preconditioner_column_cap(n: int) -> int:
    """Most preconditioner columns :math:`R` for ``n`` rows: the :math:`n R^2` cost of
    :math:`\\Phi^\\top\\Phi` within :data:`_PRECONDITIONER_GRAM_FLOPS` and :math:`R \\le n` (more
    columns than rows gain nothing), but never fewer than :data:`_PRECONDITIONER_MAX_COLUMNS`.

    A cap that binds leaves large eigenvalues of :math:`P^{-1}\\hat K`, and the log-determinant
    estimate and its gradient then go wrong together: at n = 2,000, length-scale 0.15 and noise
    1e-3 (1586 columns wanted), 512 columns put the estimate 20-30 nats off the dense value with
    gradients off by 2-5 %, where 1586 columns are exact to 0.003 nats (*ad hoc*, 1.9x the time per
    evaluation).
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
    modes (a fixed 16 per projection left the preconditioned log-determinant estimate so noisy at
    :math:`\\ell \\approx 0.1` that L-BFGS stalled at +0.10 nats per row, against -0.49 reachable);
    a long one needs a few. At most :func:`_preconditioner_column_cap` in total, shared in
    proportion (:func:`_spectral_ranks` are the ranks before the cap). Chosen from
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


def _features(op: "ProjectedSKIOperator", G: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    """:math:`\\Phi = [\\sqrt{c_j} W_j G_j]_j` with the first ``ranks[j]`` columns of every ``G_j``,
    (n, :math:`\\sum_j r_j`), so that :math:`\\Phi\\Phi^\\top \\preceq K^{\\mathrm{SKI}}`.

    Built one projection at a time: a padded (J, n, max r_j) intermediate is J times larger
    when one projection needs many columns (17 GB at n = 36,000 with one short length-scale).
    """
    scale = op.coef.clamp_min(0).sqrt()
    blocks = []
    for j, r in enumerate(ranks.tolist()):
        # one gather of the 4 grid rows of every training row, (n, 4, r_j), contracted with the weights
        # (4 separate products kept 4 temporaries: 25 % more memory and time at n = 64,000)
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


def _feature_gram(op: "ProjectedSKIOperator", root: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """:math:`\\Phi^\\top\\Phi` for :math:`\\Phi = [W_j\\,\\mathrm{root}_j]_j` restricted to the ``columns``
    mask (J, r), without forming :math:`\\Phi`.

    Block :math:`(j, j')` is :math:`\\mathrm{root}_j^\\top (W_j^\\top W_{j'})\\,\\mathrm{root}_{j'}`
    (:func:`_interpolation_gram`): :math:`O(16 J^2 n + J^2 m^2 r)` operations and
    :math:`O(J m^2 + R^2)` memory for :math:`R = \\sum_j r_j` columns, against
    :math:`O(n R^2)` and :math:`O(n R)` for :math:`\\Phi^\\top\\Phi` from :math:`\\Phi` (R reaches
    a few thousand on real data; at n = 10,000 that was a 9040-column, 720 MB :math:`\\Phi`).
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


def _woodbury_preconditioner(op: "ProjectedSKIOperator", G: torch.Tensor, ranks: torch.Tensor, noise: torch.Tensor):
    """Preconditioner :math:`P = \\Phi\\Phi^\\top + \\sigma^2 I` for ``AddedDiagLinearOperator``,
    :math:`\\Phi = [\\sqrt{c_j} W_j G_j]_j` (:func:`_features`, the first ``ranks[j]`` columns of each
    grid root ``G_j``).

    Returns the ``(solve, P, log|P|)`` triple linear_operator expects;
    :math:`\\log|P| = (n - R)\\log\\sigma^2 + \\log|C|`, :math:`C = \\sigma^2 I_R + \\Phi^\\top\\Phi`
    (differentiable, so linear_operator's control variate for the log-det gradient applies).
    The solve, run at every CG iteration, is Woodbury's
    :math:`P^{-1} v = (v - \\Phi C^{-1}\\Phi^\\top v)/\\sigma^2` with :math:`\\Phi^\\top v` and
    :math:`\\Phi u` taken through the grids (sparse :math:`W^\\top v`, then :math:`G_j^\\top` per grid):
    :math:`O(J n + m R)` per column instead of :math:`O(n R)` (10,000 protein rows, R = 512:
    25 -> 6 ms per call, the largest cost of an evaluation before).
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
    #: estimate (CG to a 1e-3 residual, SLQ with 10 fixed probes), and smaller steps chase its error:
    #: DPA-GP-ARD on 5120 rows of a 10-feature table took 71 evaluations (112 s) with 1e-6 and 45
    #: (42 s) with 1e-5, to the same objective to five digits; on concrete, airfoil, energy and housing
    #: (splits 0-1, DPA-GP-ARD-SKI) 425 -> 373 evaluations, test RMSEs within ±0.0015.
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
        weights) above the noise variance makes the SKI model another model than the exact one (at
        0.43 length-scales per grid step and noise 0.005, test RMSE 2x the exact GP's; at 3.9, 40x)."""
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
    def posterior(self, X: torch.Tensor, y: torch.Tensor) -> "SKIPosterior":
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
            # mean), but a fresh solve for the residual recovers the lost digits (rms 0.04 -> 2e-7
            # in two steps on a noise-1e-4 example)
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


def _ski_prior_variance(weight, inside, h, coef) -> torch.Tensor:
    """Prior variance of the SKI model at test points, (t,): :math:`\\sum_j c_j w_{*j}^\\top T_j w_{*j}`.

    ``weight`` (J, t, 4) are the test points' interpolation weights on the (extended) grids;
    a point outside projection ``j``'s reach (``inside`` False) has no cross-covariance through it,
    and its exact prior variance :math:`c_j` there. The posterior variance must start from this
    prior, not from the exact :math:`k(x_*, x_*)`: it subtracts the SKI covariances
    :math:`\\lVert\\phi_*\\rVert^2`, and the interpolation error of the diagonal
    (:math:`5 \\cdot 10^{-5}` of the signal variance at 0.17 length-scales per grid step) would stay
    in the result, many times the posterior variance when the noise is small.
    """
    lag = torch.arange(4, device=h.device, dtype=h.dtype)
    C = torch.exp(-0.5 * ((lag[:, None] - lag) * h[:, None, None]) ** 2)  # (J, 4, 4): a row's 4 indices are consecutive
    ski = torch.einsum("jtk,jkl,jtl->jt", weight, C, weight)
    return (coef[:, None] * torch.where(inside, ski, torch.ones_like(ski))).sum(0)


def _ski_prior_covariance(z, index, weight, inside, h, coef) -> torch.Tensor:
    """Prior covariance of the SKI model at test points, (t, t): :math:`\\sum_j c_j W_{*j} T_j W_{*j}^\\top`
    where both points are within projection ``j``'s reach, the exact sub-kernel elsewhere (there the
    cross-covariance with the training data is zero); see :func:`_ski_prior_variance`."""
    J, t, _ = weight.shape
    cov = z.new_zeros(t, t)
    for j in range(J):
        diff = z[j, :, None] - z[j]
        diff = torch.where(diff.isnan(), torch.zeros_like(diff), diff)  # a point beyond float range: inf - inf
        term = torch.exp(-0.5 * diff**2)
        ski = z.new_zeros(t, t)
        for k in range(4):
            for l in range(4):  # noqa: E741
                lag = (index[j, :, k, None] - index[j, :, l]).to(z.dtype) * h[j]
                ski += weight[j, :, k, None] * weight[j, :, l] * torch.exp(-0.5 * lag**2)
        both = inside[j, :, None] & inside[j]
        cov += coef[j] * torch.where(both, ski, term)
    return cov


def _cg_solve(Ky: AddedDiagLinearOperator, rhs: torch.Tensor) -> torch.Tensor:
    """:math:`\\hat K^{-1}\\,\\mathrm{rhs}` by preconditioned CG (tolerance and iterations from the active settings).

    Calls ``linear_cg`` itself rather than ``Ky.solve``, which passes no ``eps``: its default
    1e-10 floor on :math:`p^\\top \\hat K p` and :math:`r^\\top P^{-1} r` (of unit-norm right-hand
    sides) zeroes every step once the relative residual is about :math:`10^{-5}\\sigma_n`, so a
    tolerance of 1e-6 ran all iterations (10,000 protein rows: 1000 iterations and 6.5 s, stuck
    at 5.9e-6; with ``eps`` at the smallest normal number, 34 iterations and 0.2 s to 7e-7).
    The floor only has to keep an exact zero from being divided by.
    """
    preconditioner = Ky._preconditioner()[0]
    return linear_operator.utils.linear_cg(
        Ky._matmul, rhs, tolerance=linear_operator.settings.cg_tolerance.value(),
        eps=torch.finfo(rhs.dtype).tiny, max_iter=linear_operator.settings.max_cg_iterations.value(),
        preconditioner=preconditioner,
    )


def _settings(num_probes: int, max_cg: int, tol: float) -> ExitStack:
    """CG / Lanczos settings of linear_operator for one SKI computation (a context manager)."""
    stack = ExitStack()
    for ctx in (
        linear_operator.settings.num_trace_samples(num_probes),
        linear_operator.settings.max_cg_iterations(max_cg),
        linear_operator.settings.cg_tolerance(tol),
        gpytorch.settings.eval_cg_tolerance(tol),
        linear_operator.settings.max_lanczos_quadrature_iterations(min(max_cg, 20)),
        linear_operator.settings.min_preconditioning_size(1),
        linear_operator.settings.max_preconditioner_size(0),  # never the generic pivoted Cholesky
        linear_operator.settings.max_cholesky_size(0),  # iterative at every n (no dense SKI matrix)
    ):
        stack.enter_context(ctx)
    return stack


@dataclass
class SKIPosterior:
    """Posterior of a :class:`SKIProjectedGPModel`.

    Attributes
    ----------
    kernel : ScaleKernel
    u0, h : torch.Tensor of shape (J,)
        Training grids (origin, spacing).
    mean_cache : torch.Tensor of shape (J, m, 1)
        :math:`c_j W_j^\\top \\alpha` on the training grids.
    root_cache : torch.Tensor of shape (J, m, r)
        :math:`\\sqrt{c_j} E_j \\Lambda_j^{-1/2}` (kept eigenpairs of :math:`T_j`, zero columns
        after the :math:`r_j` kept ones); :math:`T_j` applied to it is the grid root
        :math:`\\sqrt{c_j} G_j = \\sqrt{c_j} E_j\\Lambda_j^{1/2}`, and on an extended grid its Nyström
        extension.
    L_A : torch.Tensor of shape (R, R)
        Cholesky factor of :math:`\\sigma^2 I + \\Phi^\\top \\Phi`, :math:`R = \\sum_j r_j`.
    constant, noise : torch.Tensor
    columns : torch.Tensor of shape (J, r), bool, or None
        Which columns of ``root_cache`` are kept (the first :math:`r_j` of row ``j``), in the order
        of ``L_A``; None (model files before format 2.2): all :math:`J r`.

    Notes
    -----
    :math:`T_j` is applied at prediction time on a grid extended (same spacing)
    to cover the test projections, so test points outside the training range are
    neither clipped nor extrapolated from the grid's edge.
    """

    kernel: ScaleKernel
    u0: torch.Tensor
    h: torch.Tensor
    mean_cache: torch.Tensor
    root_cache: torch.Tensor
    L_A: torch.Tensor
    constant: torch.Tensor
    noise: torch.Tensor
    columns: torch.Tensor | None = None
    #: Factor on every returned variance (see :class:`hdgp.inference._posterior.GaussianPosterior`).
    variance_scale = 1.0

    @torch.no_grad()
    def predict(self, Xs: torch.Tensor, *, latent: bool = False, full_cov: bool = False):
        """Predictive mean and variance (or covariance) at ``Xs``.

        .. math::

            \\mu_* = c + \\sum_j c_j w_{*j}^\\top T_j W_j^\\top \\alpha,\\qquad
            \\sigma_*^2 = k^{\\mathrm{SKI}}(x_*, x_*) - \\lVert\\phi_*\\rVert^2
                + \\sigma_n^2 \\lVert L_A^{-1}\\phi_*\\rVert^2

        with :math:`\\phi_* = [\\sqrt{c_j} w_{*j}^\\top G_j]_j` and the SKI model's own prior variance
        :math:`k^{\\mathrm{SKI}}(x_*, x_*)` (:func:`_ski_prior_variance`); the last two terms equal
        :math:`k_{*X}(\\Phi\\Phi^\\top + \\sigma_n^2 I)^{-1}k_{X*}` for the truncated kernel
        (push-through identity).

        Without ``full_cov`` the test points are handled in blocks of
        :data:`_PREDICT_BLOCK_FLOATS` / (J (1 + r)) (each block holds a few (J, block, 1 + r) tensors).

        Returns
        -------
        mean : torch.Tensor of shape (t,)
        var : torch.Tensor of shape (t,) or (t, t) when ``full_cov``
            Times ``variance_scale``.
        """
        J, m, width = self.root_cache.shape
        block = max(64, _PREDICT_BLOCK_FLOATS // (J * (1 + width)))
        if not full_cov and Xs.shape[0] > block:
            return in_row_blocks(lambda xb: self.predict(xb, latent=latent), Xs, block)
        z = self.kernel.base_kernel.project(Xs).T  # (J, t)
        reach = torch.ceil(_CUTOFF / self.h)  # grid points within the cut-off, per projection
        s = (z - self.u0[:, None]) / self.h[:, None]
        inside = (s > -reach[:, None]) & (s < m - 1 + reach[:, None])
        s_in = torch.where(inside, s, torch.zeros_like(s))
        lo = int(torch.clamp(2 - torch.floor(s_in.min()), min=0))
        hi = int(torch.clamp(torch.floor(s_in.max()) + 3 - m, min=0))
        cache = torch.nn.functional.pad(torch.cat([self.mean_cache, self.root_cache], -1), (0, 0, lo, hi))
        grid_values = _toeplitz_matmul(_grid_columns(self.h, m + lo + hi), cache)  # (J, m', 1 + r)
        index, weight = cubic_interpolation(z, self.u0 - lo * self.h, self.h)
        weight = torch.where(inside[..., None], weight, torch.zeros_like(weight))  # NaN · 0 would stay NaN
        index = torch.where(inside[..., None], index, torch.zeros_like(index))
        values = _interp_each(index, weight, grid_values)  # (J, t, 1 + r)
        mean = self.constant + values[..., 0].sum(0)
        phi = values[..., 1:].permute(1, 0, 2)  # (t, J, r)
        phi = phi.reshape(z.shape[1], -1) if self.columns is None else phi[:, self.columns]  # (t, R)
        V = torch.linalg.solve_triangular(self.L_A, phi.T, upper=False)  # (R, t)
        coef = self.kernel.base_kernel.weights.to(z) * self.kernel.outputscale
        if full_cov:
            cov = _ski_prior_covariance(z, index, weight, inside, self.h, coef) - phi @ phi.T + self.noise * V.T @ V
            if not latent:
                cov.diagonal().add_(self.noise)
            return mean, cov * self.variance_scale
        var = _ski_prior_variance(weight, inside, self.h, coef) - phi.square().sum(-1) \
            + self.noise * V.square().sum(0)
        var = var.clamp_min(0.0)
        return mean, (var if latent else var + self.noise) * self.variance_scale
