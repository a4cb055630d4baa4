"""Local cubic (Keys) interpolation onto regular grids: the sparse matrices :math:`W_j` of SKI.

Every point has 4 non-zero weights per grid (Keys 1981, :math:`a = -1/2`); the products
:math:`W_j^\\top v` and :math:`W_j V_j` are scatters and gathers over those 4 entries.
"""

from __future__ import annotations

import warnings

import torch


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


def _interpolation_csr(index: torch.Tensor, weight: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:math:`W_j` (n, m) and :math:`W_j^\\top` (m, n) of one projection as CSR matrices."""
    n = index.shape[0]
    rows = torch.arange(n, device=index.device).repeat_interleave(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        coo = torch.sparse_coo_tensor(torch.stack([rows, index.reshape(-1)]), weight.reshape(-1), (n, m)).coalesce()
        return coo.to_sparse_csr(), coo.t().coalesce().to_sparse_csr()


def _interpolation_error(h: torch.Tensor) -> torch.Tensor:
    """Largest error of the cubic SKI approximation of the unit RBF on a grid of step ``h`` (in
    length-scales), per grid: :math:`0.045 h^3` (a fit of the largest error over pairs of points
    for h from 0.05 to 0.3) or the error of the variance midway between grid points (Keys weights
    :math:`(-1, 9, 9, -1)/16`), whichever is larger (the latter from about h = 0.5); at most 1."""
    lag = torch.arange(4, device=h.device, dtype=h.dtype)
    w = torch.tensor([-1.0, 9.0, 9.0, -1.0], device=h.device, dtype=h.dtype) / 16  # Keys weights at t = 1/2
    C = torch.exp(-0.5 * ((lag[:, None] - lag) * h[:, None, None]) ** 2)
    midpoint = (1 - w @ C @ w).abs()
    return torch.maximum(0.045 * h**3, midpoint).clamp_max(1.0)
