"""Subspace step of SIGP: eqs. (6)-(7), Lemma 1 and Theorem 1 of Tan & Mukherjee."""

import numpy as np
import pytest
import scipy.linalg
import torch

from hdgp.sigp.lowrank import pivoted_cholesky, rbf_kernel
from hdgp.sigp.subspace import (
    class_features,
    kernel_response_features,
    reduced_pencil,
    sdr_subspace,
    slice_features,
    subspace_log_likelihood,
)


def _data(n=80, p=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def _dense_pencil(K, labels):
    """Eq. (7) literally: A = K[I - diag(1 1^T / n_h)]K, C = K(I - 1 1^T/n)K."""
    n = K.shape[0]
    D = torch.zeros(n, n, dtype=K.dtype)
    for h in labels.unique():
        idx = torch.nonzero(labels == h).squeeze(1)
        D[idx[:, None], idx[None, :]] = 1.0 / idx.numel()
    eye = torch.eye(n, dtype=K.dtype)
    A = K @ (eye - D) @ K
    C = K @ (eye - torch.ones(n, n, dtype=K.dtype) / n) @ K
    return A, C


def test_pivoted_cholesky_matches_kernel_and_extends_to_new_points():
    X, _ = _data()
    f = pivoted_cholesky(X, 1.5, tol=1e-12)
    K = rbf_kernel(X, X, 1.5)
    K_hat = f.U @ torch.diag(f.eigenvalues) @ f.U.T
    assert torch.allclose(K_hat, K, atol=1e-8)
    X_new = torch.randn(7, X.shape[1], dtype=torch.float64)
    assert torch.allclose(f.cross_times_U(X_new, X), rbf_kernel(X_new, X, 1.5) @ f.U, atol=1e-7)


def test_low_rank_stops_at_tolerance():
    X, _ = _data(n=300, p=2)
    f = pivoted_cholesky(X, 3.0, tol=1e-6)
    assert f.rank < 100 and f.residual <= 1e-6


def test_slicing_pencil_equals_eq7_and_top_eigvecs_match_dense():
    X, y = _data()
    f = pivoted_cholesky(X, 1.5, tol=1e-14)
    Psi = slice_features(y, 5)
    C_r, A_r = reduced_pencil(f.U, f.eigenvalues, Psi)
    K = f.U @ torch.diag(f.eigenvalues) @ f.U.T
    A, C = _dense_pencil(K, Psi.argmax(1))
    assert torch.allclose(f.U @ A_r @ f.U.T, A, atol=1e-8 * float(C.abs().max()))
    assert torch.allclose(f.U @ C_r @ f.U.T, C, atol=1e-8 * float(C.abs().max()))
    res = sdr_subspace(C_r, A_r, rank=3, eta=1e-3)
    W = f.U @ res.coef
    # Lemma 1: leading eigenvectors of the dense pencil (A + eta I)^-1 C span the same space
    evals, evecs = scipy.linalg.eigh(C.numpy(), (A + res.eta_abs * torch.eye(len(y), dtype=A.dtype)).numpy())
    W_dense = torch.as_tensor(evecs[:, -3:])
    Q1, _ = torch.linalg.qr(W)
    Q2, _ = torch.linalg.qr(W_dense)
    cosines = torch.linalg.svdvals(Q1.T @ Q2)
    assert cosines.min() > 1 - 1e-6
    assert np.allclose(res.eigenvalues.numpy(), evals[::-1][:3], rtol=1e-6)
    # and they maximise g_H: any other subspace scores lower
    g_star = subspace_log_likelihood(W, A, C, res.eta_abs, len(y))
    for seed in range(5):
        W_rand = torch.randn(len(y), 3, generator=torch.Generator().manual_seed(seed), dtype=A.dtype)
        assert subspace_log_likelihood(W_rand, A, C, res.eta_abs, len(y)) < g_star


def test_g_h_is_invariant_to_change_of_basis():
    X, y = _data()
    f = pivoted_cholesky(X, 1.5)
    C_r, A_r = reduced_pencil(f.U, f.eigenvalues, kernel_response_features(y, 0.5), 1e-3)
    res = sdr_subspace(C_r, A_r, rank=3, eta=1e-2)
    T = torch.tensor([[2.0, 0.3, -1.0], [0.0, 1.0, 0.5], [1.0, -2.0, 3.0]], dtype=torch.float64)
    g1 = subspace_log_likelihood(res.coef, A_r, C_r, res.eta_abs, len(y))
    g2 = subspace_log_likelihood(res.coef @ T, A_r, C_r, res.eta_abs, len(y))
    assert torch.isclose(g1, g2, rtol=1e-9)


def test_sir_consistency_single_index_model():
    """Theorem 1: with the linear kernel the maximiser of g_H is the SIR direction b."""
    g = torch.Generator().manual_seed(3)
    n, p = 3000, 6
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    b = torch.tensor([1.0, -2.0, 0.0, 0.5, 0.0, 1.0], dtype=torch.float64)
    b = b / b.norm()
    t = X @ b
    y = t + 0.3 * t**3 + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)
    # linear kernel K = X X^T = U S^2 U^T; an RKHS direction W maps to X^T W in R^p
    U, S, Vh = torch.linalg.svd(X, full_matrices=False)
    C_r, A_r = reduced_pencil(U, S**2, slice_features(y, 10))
    res = sdr_subspace(C_r, A_r, rank=1, eta=1e-8)
    direction = X.T @ (U @ res.coef[:, 0])
    cos = abs(float(direction @ b)) / float(direction.norm())
    assert cos > 0.99


@pytest.mark.parametrize("n_slices", [3, 7])
def test_slices_are_balanced_and_keep_ties(n_slices):
    y = torch.tensor([0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], dtype=torch.float64)
    Psi = slice_features(y, n_slices)
    labels = Psi.argmax(1)
    for v in y.unique():
        assert labels[y == v].unique().numel() == 1
    assert torch.all(labels[1:] >= labels[:-1])  # y is sorted, slices follow its order


def test_bad_inputs():
    y = torch.tensor([1.0, 1.0, 2.0, 2.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="distinct values"):
        slice_features(y, 3)
    with pytest.raises(ValueError, match="bandwidth"):
        kernel_response_features(y, 0.0)
    C = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="rank"):
        sdr_subspace(C, C, rank=4, eta=1e-3)
    with pytest.raises(ValueError, match="rank"):
        sdr_subspace(C, C, rank=0, eta=1e-3)
    with pytest.raises(ValueError, match="eta"):
        sdr_subspace(C, C, rank=1, eta=0.0)


def test_class_features_one_hot():
    Psi = class_features(torch.tensor([0, 2, 1, 2]))
    assert Psi.shape == (4, 3) and torch.equal(Psi.sum(1), torch.ones(4, dtype=Psi.dtype))
