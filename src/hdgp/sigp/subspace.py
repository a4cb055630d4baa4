r"""Sufficient-dimension-reduction subspace of the RKHS (Tan & Mukherjee, Sec. 3).

The SIGP covariance lives on the span of the functions
:math:`b_j = \sum_i W_{ij}\phi(x_i)`, :math:`j = 1..m`, the maximiser of the SDR
log-likelihood (eq. 6)

.. math::
    g_H(B) = -\frac n2 \log
    \frac{\det[B^\top (\hat E\,\mathrm{var}(\phi(x)\mid y) + \eta I_{\mathcal H}) B]}
         {\det[B^\top \widehat{\mathrm{var}}(\phi(x)) B]}
    = -\frac n2 \log \frac{\det[W^\top (A + n\eta K) W]}{\det(W^\top C W)},

.. math::
    C = K H K, \qquad A = K H (I - S) H K \qquad\text{(eq. 7)},

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

Regularisation. The ridge :math:`\eta` regularises the covariance *operator*
(:math:`\hat E\,\mathrm{var}(\phi\mid y) + \eta I_{\mathcal H}`, as in kernel SIR,
Wu et al. 2013), which in the coefficients is :math:`W^\top(A/n + \eta K)W`
because :math:`B^\top B = W^\top K W`. Eq. (6) as printed adds :math:`\eta I` to
:math:`A` in the coefficients :math:`W` instead; that penalises
:math:`\lVert W\rVert^2`, which is not a function of the subspace :math:`B`
(:math:`W` and :math:`W + N` with :math:`KN = 0` give the same functions), and its
scale depends on :math:`\lVert K\rVert^2`. The authors' demo code solves
``eigs(HK, (H - S)K + n*eta*I)``, i.e. :math:`KHK w = \lambda(K(H-S)K + n\eta K)w`:
the operator form used here. :math:`\eta` is in units of the kernel variance
(:math:`k(x, x) = 1`, so :math:`\operatorname{tr}\widehat{\mathrm{var}}(\phi) \le 1`).

Computation. With the features :math:`K \approx \Phi\Phi^\top` of
:mod:`hdgp.sigp.lowrank`, write :math:`v = \Phi^\top W` (the coordinates of the
:math:`b_j`). Then :math:`W^\top C W = v^\top \Phi^\top H\Phi v`,
:math:`W^\top A W = v^\top \Phi^\top H(I-S)H\Phi v` and :math:`W^\top K W = v^\top v`,
so by Lemma 1 the maximiser is spanned by the :math:`m` leading eigenvectors of the
symmetric-definite :math:`r\times r` pencil

.. math:: \Phi^\top H \Phi\, v = \lambda\,(\Phi^\top H (I - S) H \Phi + n\eta I)\, v,

solved in :math:`O(n r^2 + r^3)` (:class:`PencilSolver`, which shares one
eigendecomposition of :math:`A_v` between all :math:`\eta`): no :math:`n\times n`
or :math:`p\times p` matrix is formed.
The projections used by the GP are :math:`P = H K W = H\Phi v`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from .lowrank import rbf_kernel

__all__ = [
    "slice_features",
    "class_features",
    "kernel_response_features",
    "reduced_pencil",
    "sdr_subspace",
    "PencilSolver",
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
    features: torch.Tensor,
    response_features: torch.Tensor,
    response_ridge: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The pencil :math:`C_v = \Phi^\top H\Phi` and :math:`A_v = \Phi^\top H(I - S)H\Phi` (eq. 7).

    :math:`C_v/n` and :math:`A_v/n` are :math:`\widehat{\mathrm{var}}(\phi(x))` and
    :math:`\hat E\,\mathrm{var}(\phi(x)\mid y)` in the feature coordinates.

    Parameters
    ----------
    features : torch.Tensor of shape (n, r)
        :math:`\Phi` with :math:`K \approx \Phi\Phi^\top`
        (:class:`~hdgp.sigp.lowrank.KernelFactor`).
    response_features : torch.Tensor of shape (n, q)
        Slice/class indicators or kernel features :math:`\Psi` of the response.
    response_ridge : float, default=0
        :math:`\varepsilon` of the kernel smoother (0 for slicing: a projection).

    Returns
    -------
    C_v, A_v : torch.Tensor of shape (r, r)
    """
    n = features.shape[0]
    V = features - features.mean(0, keepdim=True)  # H Phi
    Psi = response_features - response_features.mean(0, keepdim=True)  # H Psi
    gram = Psi.T @ Psi + n * response_ridge * torch.eye(
        Psi.shape[1], dtype=Psi.dtype, device=Psi.device
    )
    evals, evecs = torch.linalg.eigh(gram)
    keep = evals > evals.max() * 1e-10
    half = (V.T @ Psi) @ (evecs[:, keep] / evals[keep].sqrt())  # Phi^T H Psi gram^{-1/2}
    C_v = V.T @ V
    A_v = C_v - half @ half.T
    return 0.5 * (C_v + C_v.T), 0.5 * (A_v + A_v.T)


@dataclass
class SubspaceResult:
    r"""Solution of the reduced pencil.

    Attributes
    ----------
    coef : torch.Tensor of shape (r, m)
        :math:`v`, the feature coordinates of the basis functions
        (:math:`KW = \Phi v`; with the thin SVD :math:`\Phi = U\Lambda^{1/2}V^\top`
        the minimum-norm coefficients are :math:`W = U\Lambda^{-1/2}V^\top v`).
    eigenvalues : torch.Tensor of shape (m,)
        Leading generalised eigenvalues of :math:`(A_v + n\eta I)^{-1} C_v`, descending.
    ridge : float
        :math:`n\eta` added to :math:`A_v`.
    """

    coef: torch.Tensor
    eigenvalues: torch.Tensor
    ridge: float


class PencilSolver:
    r"""Leading eigenvectors of :math:`(A_v + n\eta I)^{-1} C_v` for many :math:`\eta` (Lemma 1, eq. 6).

    :math:`A_v = QDQ^\top` is diagonalised once; for each :math:`\eta`, with
    :math:`s = (D + n\eta)^{-1/2}`, the pencil is equivalent to the symmetric
    problem :math:`\operatorname{diag}(s)\,Q^\top C_v Q\,\operatorname{diag}(s)\,w =
    \lambda w`, :math:`v = Q\operatorname{diag}(s)\,w`, of which only the
    :math:`m` leading pairs are computed (LAPACK ``syevr`` on a subset): one
    :math:`O(r^3)` decomposition per pencil plus a cheaper partial one per
    :math:`\eta`, instead of a Cholesky, two triangular solves and a full
    eigendecomposition per :math:`\eta`.

    Parameters
    ----------
    C_v, A_v : torch.Tensor of shape (r, r)
        From :func:`reduced_pencil`.
    n : int
        Number of observations.
    """

    def __init__(self, C_v: torch.Tensor, A_v: torch.Tensor, n: int):
        self.n = int(n)
        self.dtype, self.device = C_v.dtype, C_v.device
        A = A_v.detach().cpu().numpy()
        D, self._Q = np.linalg.eigh(0.5 * (A + A.T))
        self._D = np.clip(D, 0.0, None)  # A_v is positive semi-definite: clip round-off
        C = C_v.detach().cpu().numpy()
        self._C = self._Q.T @ (0.5 * (C + C.T)) @ self._Q
        self.rank = C.shape[0]

    def solve(self, rank: int, eta: float) -> SubspaceResult:
        """The ``rank`` leading generalised eigenpairs for the ridge ``eta``.

        Raises
        ------
        ValueError
            If ``rank`` exceeds the rank of the kernel factor or ``eta`` is not positive.
        """
        r = self.rank
        if not 1 <= rank <= r:
            raise ValueError(
                f"rank={rank} must be between 1 and the numerical rank {r} of the kernel "
                "matrix; lower `rank` or decrease the kernel length-scale."
            )
        if not eta > 0:
            raise ValueError(f"eta must be positive, got {eta}.")
        ridge = self.n * eta
        s = 1.0 / np.sqrt(self._D + ridge)
        M = s[:, None] * self._C * s[None, :]
        evals, w = scipy.linalg.eigh(M, subset_by_index=[r - rank, r - 1], driver="evr")
        coef = self._Q @ (s[:, None] * w[:, ::-1])
        return SubspaceResult(
            coef=torch.as_tensor(coef.copy(), dtype=self.dtype, device=self.device),
            eigenvalues=torch.as_tensor(evals[::-1].copy(), dtype=self.dtype, device=self.device),
            ridge=ridge,
        )


def sdr_subspace(C_v: torch.Tensor, A_v: torch.Tensor, rank: int, eta: float, n: int) -> SubspaceResult:
    r"""Leading :math:`m` eigenvectors of :math:`(A_v + n\eta I)^{-1} C_v` (Lemma 1, eq. 6).

    One-off form of :class:`PencilSolver`.

    Parameters
    ----------
    C_v, A_v : torch.Tensor of shape (r, r)
        From :func:`reduced_pencil`.
    rank : int
        :math:`m`.
    eta : float
        Ridge :math:`\eta > 0` of the conditional covariance operator.
    n : int
        Number of observations.

    Raises
    ------
    ValueError
        If ``rank`` exceeds the rank of the kernel factor or ``eta`` is not positive.
    """
    return PencilSolver(C_v, A_v, n).solve(rank, eta)


def subspace_log_likelihood(
    W: torch.Tensor, A: torch.Tensor, C: torch.Tensor, R: torch.Tensor, n: int
) -> torch.Tensor:
    r"""SDR log-likelihood :math:`g_H = -\frac n2 \log\det[W^\top(A + R)W]/\det(W^\top C W)` (eq. 6).

    With the :math:`n\times n` matrices of eq. (7) pass :math:`R = n\eta K` and ``W``
    of shape (n, m); with the pencil of :func:`reduced_pencil` pass
    :math:`R = n\eta I` and ``W = v``. Both give the same value for the same
    functions (:math:`v = \Phi^\top W`).
    """
    num = torch.linalg.slogdet(W.T @ (A + R) @ W)[1]
    den = torch.linalg.slogdet(W.T @ C @ W)[1]
    return -0.5 * n * (num - den)
