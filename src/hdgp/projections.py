"""Projection directions for projected-additive kernels.

Two families from Delbridge, Bindel & Wilson (2020), "Randomly Projected
Additive Gaussian Processes for Regression":

* **random** (RPA-GP, Sec. 4, eq. 4): the rows of the projection matrix
  :math:`P^{(j)} \\in \\mathbb{R}^{D_j \\times d}` of a degree-:math:`D_j`
  sub-kernel have i.i.d. entries :math:`\\mathcal N(0, 1/D_j)`;
* **diverse** (DPA-GP, Sec. 4.2): unit directions :math:`\\eta_1..\\eta_J`
  minimising the redundancy loss of eq. (7),

  .. math:: \\ell(\\eta_1, \\dots, \\eta_J) = \\sum_{j \\ne j'} (\\eta_j^\\top \\eta_{j'})^4,

  which are exactly orthonormal (QR of a Gaussian matrix) when :math:`J \\le d`.

All directions of all sub-kernels are stacked row-wise into one matrix of shape
``(sum(degrees), d)``; ``degrees`` says how many consecutive rows belong to each
sub-kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.utils import check_random_state

__all__ = [
    "expand_degrees",
    "random_directions",
    "diverse_directions",
    "redundancy_loss",
    "min_pairwise_angle",
]


def expand_degrees(degree, n_projections: int) -> tuple[int, ...]:
    """Turn a degree specification into one degree per sub-kernel.

    Parameters
    ----------
    degree : int or sequence of (count, degree) pairs
        ``3`` means ``n_projections`` sub-kernels of degree 3; ``[(4, 1), (4, 2)]``
        means four 1-D and four 2-D sub-kernels (then ``n_projections`` must
        equal the total count or be ``None``).
    n_projections : int or None
        Number of sub-kernels :math:`J`.

    Returns
    -------
    tuple of int
        :math:`(D_1, \\dots, D_J)`.
    """
    if isinstance(degree, (int, np.integer)) and not isinstance(degree, bool):
        if not isinstance(n_projections, (int, np.integer)) or isinstance(n_projections, bool) or n_projections < 1:
            raise ValueError(f"n_projections must be an integer >= 1, got {n_projections!r}.")
        if int(degree) < 1:
            raise ValueError(f"degree must be >= 1, got {degree!r}.")
        return (int(degree),) * int(n_projections)
    try:
        pairs = [(int(c), int(D)) for c, D in degree]
    except (TypeError, ValueError):
        raise ValueError(
            "degree must be an int or a sequence of (count, degree) pairs such as "
            f"[(4, 1), (4, 2), (4, 3)]; got {degree!r}."
        ) from None
    if not pairs or any(c < 1 or D < 1 for c, D in pairs):
        raise ValueError(f"every (count, degree) pair needs count >= 1 and degree >= 1; got {degree!r}.")
    degrees = tuple(D for c, D in pairs for _ in range(c))
    if n_projections is not None and int(n_projections) != len(degrees):
        raise ValueError(
            f"n_projections={n_projections} disagrees with the degree groups {degree!r}, "
            f"which define {len(degrees)} sub-kernels; pass n_projections=None or {len(degrees)}."
        )
    return degrees


def _check_features(n_features: int) -> None:
    if int(n_features) < 1:
        raise ValueError(f"n_features must be >= 1, got {n_features!r}.")


def random_directions(
    n_features: int,
    degrees: Sequence[int],
    random_state=None,
    *,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> torch.Tensor:
    """Gaussian random projections of RPA-GP (eq. 4).

    Parameters
    ----------
    n_features : int
        Input dimension :math:`d`.
    degrees : sequence of int
        Degree :math:`D_j` of every sub-kernel (see :func:`expand_degrees`).
    random_state : int, RandomState or None
        Seed; the same seed gives the same directions.
    dtype, device
        Of the returned tensor.

    Returns
    -------
    torch.Tensor of shape (sum(degrees), d)
        Rows of :math:`P^{(j)}` stacked; entries of block :math:`j` are drawn
        from :math:`\\mathcal N(0, 1/D_j)`.
    """
    degrees = tuple(int(D) for D in degrees)
    _check_features(n_features)
    rng = check_random_state(random_state)
    scale = np.repeat([1.0 / math.sqrt(D) for D in degrees], degrees)
    P = rng.standard_normal((sum(degrees), n_features)) * scale[:, None]
    return torch.as_tensor(P, dtype=dtype, device=device)


def redundancy_loss(directions: torch.Tensor) -> torch.Tensor:
    """Eq. (7): :math:`\\sum_{j \\ne j'} (\\eta_j^\\top \\eta_{j'})^4` of row-normalised directions."""
    eta = directions / directions.norm(dim=-1, keepdim=True)
    G = eta @ eta.T
    return (G**4).sum() - (torch.diagonal(G) ** 4).sum()


def diverse_directions(
    n_features: int,
    n_directions: int,
    random_state=None,
    *,
    max_iter: int = 500,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> torch.Tensor:
    """Diverse unit directions of DPA-GP (Sec. 4.2).

    For :math:`J \\le d` the directions are orthonormal (Q factor of a Gaussian
    :math:`d \\times J` matrix), which minimises eq. (7) exactly (loss 0). For
    :math:`J > d` eq. (7) is minimised over the sphere, parameterising
    :math:`\\eta_j = v_j / \\lVert v_j \\rVert` and running L-BFGS from Gaussian
    starting points. In the plane (:math:`d = 2`, :math:`J \\ge 3`) lines :math:`\\pi/J`
    apart reach the lower bound :math:`3J^2/8 - J` of eq. (7) (:math:`\\cos^4` averages 3/8
    over them) with the widest possible smallest angle, where L-BFGS stops at other minimisers
    with nearly coinciding lines; they are used instead.

    Parameters
    ----------
    n_features : int
        Input dimension :math:`d`.
    n_directions : int
        Number of directions :math:`J`.
    random_state : int, RandomState or None
        Seed of the starting point.
    max_iter : int
        L-BFGS iterations for :math:`J > d`.

    Returns
    -------
    torch.Tensor of shape (n_directions, n_features)
        Unit-norm rows.
    """
    if int(n_directions) < 1:
        raise ValueError(f"n_directions must be >= 1, got {n_directions!r}.")
    _check_features(n_features)
    rng = check_random_state(random_state)
    V = torch.as_tensor(rng.standard_normal((n_features, n_directions)), dtype=torch.float64)
    if n_directions <= n_features:
        Q, R = torch.linalg.qr(V)
        Q = Q * torch.sign(torch.diagonal(R))  # unique, sign-fixed Q factor
        return Q.T.contiguous().to(dtype=dtype, device=device)
    if n_features == 2:  # lines pi/J apart (random offset): a minimiser with the widest smallest angle
        offset = math.atan2(V[1, 0].item(), V[0, 0].item())
        angle = offset + math.pi * torch.arange(n_directions, dtype=torch.float64) / n_directions
        return torch.stack([torch.cos(angle), torch.sin(angle)], dim=1).to(dtype=dtype, device=device)
    v = V.T.contiguous().requires_grad_(True)
    opt = torch.optim.LBFGS([v], max_iter=max_iter, line_search_fn="strong_wolfe", tolerance_grad=1e-12)

    def closure():
        opt.zero_grad()
        loss = redundancy_loss(v)
        loss.backward()
        return loss

    opt.step(closure)
    eta = v.detach() / v.detach().norm(dim=-1, keepdim=True)
    return eta.to(dtype=dtype, device=device)


def min_pairwise_angle(directions: torch.Tensor) -> float:
    """Antipodal separation :math:`\\delta = \\min_{j \\ne j'} \\arccos |\\eta_j^\\top \\eta_{j'}|` (Sec. 4.2).

    Parameters
    ----------
    directions : torch.Tensor of shape (J, d)
        Directions (normalised internally).

    Returns
    -------
    float
        Minimum angle in radians, in :math:`[0, \\pi/2]`; :math:`\\pi/2` when
        :math:`J = 1` (no pair to compare).
    """
    if directions.shape[0] < 2:
        return math.pi / 2
    eta = directions / directions.norm(dim=-1, keepdim=True)
    C = (eta @ eta.T).abs()
    C.fill_diagonal_(0.0)
    return float(torch.arccos(C.max().clamp(max=1.0)))
