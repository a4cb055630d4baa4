r"""Sufficient-dimension-reduction subspace of the RKHS (Tan & Mukherjee, Sec. 3).

The SIGP covariance lives on the span of the functions
:math:`\sum_i W_{ij}\phi(x_i)`, :math:`j = 1..m`. The coefficient matrix
:math:`W \in \mathbb{R}^{n\times m}` maximises the SDR log-likelihood (eq. 6)

.. math::
    g_H(W) = -\frac n2 \log
    \frac{\det[W^\top (A + \eta I) W]}{\det(W^\top C W)},
    \quad C = K H K, \quad A = K H (I - S) H K,

with the centring matrix :math:`H = I - \mathbf 1\mathbf 1^\top/n` and a response
smoother :math:`S`. Slicing (eq. 7) takes :math:`S` = the projection onto the
centred slice (or class) indicators, for which :math:`H(I-S)H = I -
\operatorname{diag}(\mathbf 1_{n_h}\mathbf 1_{n_h}^\top/n_h)`, exactly the matrix
of eq. (7). The *kernel* estimate replaces the indicators by features
:math:`\Psi` of an RBF kernel on :math:`y` and the projection by the ridge
smoother :math:`S = \Psi_c(\Psi_c^\top\Psi_c + n\varepsilon I)^{-1}\Psi_c^\top`
(:math:`\Psi_c = H\Psi`): :math:`\phi H (I - S) H \phi^\top/n` is then the
empirical conditional covariance operator :math:`\Sigma_{XX} -
\Sigma_{XY}(\Sigma_{YY}+\varepsilon I)^{-1}\Sigma_{YX}` (Fukumizu et al.), a kernel
estimate of :math:`E\,\mathrm{var}(\phi(x)\mid y)`.

By Lemma 1 the maximiser is spanned by the :math:`m` leading eigenvectors of
:math:`(A + \eta I)^{-1} C`. With :math:`K \approx U\Lambda U^\top` (rank
:math:`r`, :mod:`hdgp.sigp.lowrank`) every eigenvector with a positive eigenvalue
lies in :math:`\operatorname{span}(U)`, so the problem reduces exactly to the
symmetric-definite :math:`r\times r` pencil

.. math:: \Lambda U^\top H U \Lambda\, z = \lambda\,
          (\Lambda U^\top H (I - S) H U \Lambda + \eta I)\, z, \qquad W = U z,

solved by one Cholesky and one symmetric eigendecomposition in
:math:`O(n r^2 + r^3)`: no :math:`n\times n` or :math:`p\times p` matrix is formed.
:math:`\eta` is relative: the absolute ridge is :math:`\eta\,\lVert C\rVert_2`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .lowrank import rbf_kernel

__all__ = [
    "slice_features",
    "class_features",
    "kernel_response_features",
    "reduced_pencil",
    "sdr_subspace",
    "subspace_log_likelihood",
    "SubspaceResult",
]


def slice_features(y: torch.Tensor, n_slices: int) -> torch.Tensor:
    """Indicators of ``n_slices`` slices of the sorted response (SIR, Li 1991).

    Slices hold (nearly) equal numbers of points; tied responses go to one slice.

    Raises
    ------
    ValueError
        If ``y`` has fewer distinct values than ``n_slices``.
    """
    y_np = y.detach().cpu().numpy()
    distinct = np.unique(y_np)
    if n_slices < 2:
        raise ValueError(f"n_slices must be at least 2, got {n_slices}.")
    if distinct.size < n_slices:
        raise ValueError(
            f"The target has {distinct.size} distinct values, fewer than n_slices="
            f"{n_slices}; lower n_slices or use subspace='kernel'."
        )
    order = np.argsort(y_np, kind="stable")
    labels = np.empty(y_np.size, dtype=np.int64)
    for h, chunk in enumerate(np.array_split(order, n_slices)):
        labels[chunk] = h
    # tied responses join the lowest slice any of them fell in
    _, value_index = np.unique(y_np, return_inverse=True)
    first = np.full(distinct.size, n_slices, dtype=np.int64)
    np.minimum.at(first, value_index, labels)
    _, labels = np.unique(first[value_index], return_inverse=True)
    return class_features(torch.as_tensor(labels, device=y.device), dtype=y.dtype)


def class_features(codes: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """One-hot indicators of integer class codes ``0..H-1`` (the slices of classification)."""
    n_classes = int(codes.max()) + 1
    return torch.nn.functional.one_hot(codes.long(), n_classes).to(dtype)


def kernel_response_features(
    y: torch.Tensor, bandwidth: float, n_landmarks: int = 50
) -> torch.Tensor:
    r"""Nyström features :math:`\Psi` of an RBF kernel on the standardised response.

    Landmarks are ``n_landmarks`` quantiles of :math:`y`; :math:`\Psi =
    k(y, L)\,k(L, L)^{-1/2}` so that :math:`\Psi\Psi^\top \approx k(y, y)`.

    Parameters
    ----------
    y : torch.Tensor of shape (n,)
    bandwidth : float
        Length-scale of the response kernel in units of the standard deviation of y.
    n_landmarks : int, default=50
    """
    if not bandwidth > 0:
        raise ValueError(f"The response-kernel bandwidth must be positive, got {bandwidth}.")
    z = (y - y.mean()) / y.std().clamp_min(torch.finfo(y.dtype).tiny)
    q = torch.linspace(0.0, 1.0, min(n_landmarks, y.shape[0]), dtype=y.dtype, device=y.device)
    landmarks = torch.unique(torch.quantile(z, q)).unsqueeze(1)
    K_LL = rbf_kernel(landmarks, landmarks, bandwidth)
    evals, evecs = torch.linalg.eigh(K_LL)
    keep = evals > evals.max() * 1e-10
    inv_sqrt = evecs[:, keep] / evals[keep].sqrt()
    return rbf_kernel(z.unsqueeze(1), landmarks, bandwidth) @ inv_sqrt


def reduced_pencil(
    U: torch.Tensor,
    eigenvalues: torch.Tensor,
    response_features: torch.Tensor,
    response_ridge: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The matrices :math:`C_r = U^\top C U` and :math:`A_r = U^\top A U` of eq. (7).

    Parameters
    ----------
    U : torch.Tensor of shape (n, r)
        Orthonormal eigenvectors of :math:`K \approx U\Lambda U^\top`
        (:class:`~hdgp.sigp.lowrank.KernelFactor`).
    eigenvalues : torch.Tensor of shape (r,)
        :math:`\Lambda`.
    response_features : torch.Tensor of shape (n, q)
        Slice/class indicators or kernel features :math:`\Psi` of the response.
    response_ridge : float, default=0
        :math:`\varepsilon` of the kernel smoother (0 for slicing: a projection).

    Returns
    -------
    C_r, A_r : torch.Tensor of shape (r, r)
    """
    n = U.shape[0]
    V = U - U.mean(0, keepdim=True)  # H U
    Psi = response_features - response_features.mean(0, keepdim=True)  # H Psi
    gram = Psi.T @ Psi + n * response_ridge * torch.eye(
        Psi.shape[1], dtype=Psi.dtype, device=Psi.device
    )
    evals, evecs = torch.linalg.eigh(gram)
    keep = evals > evals.max() * 1e-10
    half = (V.T @ Psi) @ (evecs[:, keep] / evals[keep].sqrt())  # U^T H Psi gram^{-1/2}
    lam = eigenvalues
    UHU = V.T @ V
    C_r = lam[:, None] * UHU * lam[None, :]
    A_r = lam[:, None] * (UHU - half @ half.T) * lam[None, :]
    return 0.5 * (C_r + C_r.T), 0.5 * (A_r + A_r.T)


@dataclass
class SubspaceResult:
    r"""Solution of the reduced pencil.

    Attributes
    ----------
    coef : torch.Tensor of shape (r, m)
        :math:`z`; the SIGP coefficient matrix is :math:`W = U z`.
    eigenvalues : torch.Tensor of shape (m,)
        Leading generalised eigenvalues of :math:`(A + \eta I)^{-1} C`, descending.
    eta_abs : float
        Absolute ridge :math:`\eta\lVert C\rVert_2` added to :math:`A`.
    """

    coef: torch.Tensor
    eigenvalues: torch.Tensor
    eta_abs: float


def sdr_subspace(C_r: torch.Tensor, A_r: torch.Tensor, rank: int, eta: float) -> SubspaceResult:
    r"""Leading :math:`m` eigenvectors of :math:`(A_r + \eta I)^{-1} C_r` (Lemma 1, eq. 6).

    Symmetric formulation: with :math:`A_r + \eta I = LL^\top`, the eigenvectors
    of :math:`L^{-1} C_r L^{-\top}` mapped back by :math:`L^{-\top}`.

    Raises
    ------
    ValueError
        If ``rank`` exceeds the rank of the kernel factor or ``eta`` is not positive.
    """
    r = C_r.shape[0]
    if not 1 <= rank <= r:
        raise ValueError(
            f"rank={rank} must be between 1 and the numerical rank {r} of the kernel "
            "matrix; lower `rank` or decrease the kernel length-scale."
        )
    if not eta > 0:
        raise ValueError(f"eta must be positive, got {eta}.")
    eta_abs = eta * float(torch.linalg.eigvalsh(C_r)[-1].clamp_min(torch.finfo(C_r.dtype).tiny))
    eye = torch.eye(r, dtype=C_r.dtype, device=C_r.device)
    L = torch.linalg.cholesky(A_r + eta_abs * eye)
    tmp = torch.linalg.solve_triangular(L, C_r, upper=False)
    M = torch.linalg.solve_triangular(L, tmp.T, upper=False)
    evals, evecs = torch.linalg.eigh(0.5 * (M + M.T))
    top = torch.flip(evecs[:, -rank:], dims=[1])
    coef = torch.linalg.solve_triangular(L.T, top, upper=True)
    return SubspaceResult(coef=coef, eigenvalues=torch.flip(evals[-rank:], [0]), eta_abs=eta_abs)


def subspace_log_likelihood(
    W: torch.Tensor, A: torch.Tensor, C: torch.Tensor, eta_abs: float, n: int
) -> torch.Tensor:
    r"""SDR log-likelihood :math:`g_H(W)` of eq. (6) for any coefficient matrix ``W``.

    ``A`` and ``C`` may be the full :math:`n\times n` matrices of eq. (7) with
    ``W`` of shape (n, m), or their reduced versions with ``W = z``; ``n`` is the
    number of observations.
    """
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    num = torch.linalg.slogdet(W.T @ (A + eta_abs * eye) @ W)[1]
    den = torch.linalg.slogdet(W.T @ C @ W)[1]
    return -0.5 * n * (num - den)
