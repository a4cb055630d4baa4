"""Symmetric Toeplitz grid covariances :math:`T_j = k(U_j, U_j)` of SKI: products by FFT
circulant embedding and the eigendecomposition through centrosymmetry."""

from __future__ import annotations

import math

import torch


def _toeplitz_matmul(col: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """Symmetric Toeplitz products ``T_j U_j`` for ``col`` (J, m), ``U`` (J, m, t) by circulant embedding."""
    m = col.shape[-1]
    circ = torch.cat([col, col.new_zeros(col.shape[:-1] + (1,)), col[..., 1:].flip(-1)], dim=-1)
    f = torch.fft.rfft(circ, dim=-1)
    FU = torch.fft.rfft(U.transpose(-1, -2), n=2 * m, dim=-1)  # FFT along the contiguous last axis
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
    the flops and half the memory of one dense ``eigh``.
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


def _grid_columns(h: torch.Tensor, m: int) -> torch.Tensor:
    """First column of every unit-RBF Toeplitz :math:`T_j`: :math:`\\exp(-\\tfrac12 (i h_j)^2)`, (J, m)."""
    i = torch.arange(m, device=h.device, dtype=h.dtype)
    return torch.exp(-0.5 * (i * h[:, None]) ** 2)
