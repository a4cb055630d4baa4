"""Subspace step of SIGP: eqs. (6)-(7), Lemma 1 and Theorem 1 of Tan & Mukherjee."""

import numpy as np
import pytest
import scipy.linalg
import torch

from hdgp.sigp.lowrank import pivoted_cholesky, rbf_kernel
from hdgp.sigp.subspace import (
    PencilSolver,
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


def _smoother(Psi, ridge):
    """Dense S = Psi_c (Psi_c^T Psi_c + n ridge I)^+ Psi_c^T (the projection for ridge = 0).

    Centred slice indicators are rank-deficient by one; the pseudo-inverse needs an explicit
    cutoff, since pinv's default (max(m, n) * eps) can keep the round-off eigenvalue
    (~1e-15 relative) and invert it.
    """
    n = Psi.shape[0]
    Pc = Psi - Psi.mean(0)
    gram = Pc.T @ Pc + n * ridge * torch.eye(Psi.shape[1], dtype=Psi.dtype)
    return Pc @ torch.linalg.pinv(gram, rtol=1e-10, hermitian=True) @ Pc.T


def _span_cosines(P1, P2):
    Q1, _ = torch.linalg.qr(P1)
    Q2, _ = torch.linalg.qr(P2)
    return torch.linalg.svdvals(Q1.T @ Q2)


def test_pivoted_cholesky_matches_kernel_and_extends_to_new_points():
    X, _ = _data()
    f = pivoted_cholesky(X, 1.5, tol=1e-12)
    K = rbf_kernel(X, X, 1.5)
    assert torch.allclose(f.features @ f.features.T, K, atol=1e-8)
    # Nystrom extension: phi(x_i) is the factor's own row, and k(x, X) = phi(x)^T Phi^T
    assert torch.allclose(f.features_at(X), f.features, atol=1e-10)
    X_new = torch.randn(7, X.shape[1], dtype=torch.float64)
    assert torch.allclose(f.features_at(X_new) @ f.features.T, rbf_kernel(X_new, X, 1.5), atol=1e-7)


def test_low_rank_stops_at_tolerance():
    X, _ = _data(n=300, p=2)
    f = pivoted_cholesky(X, 3.0, tol=1e-6)
    assert f.rank < 100 and f.residual <= 1e-6
    K = rbf_kernel(X, X, 3.0)
    assert float(torch.trace(K - f.features @ f.features.T)) == pytest.approx(f.residual * 300, rel=1e-6)


def test_zero_tolerance_stops_at_round_off_and_keeps_the_extension_finite():
    """tol=0 asks for the exact factor: pivots stop where the residual diagonal is rounding
    noise (a smooth kernel on 2-D inputs is numerically low rank), never at an exact zero."""
    X, _ = _data(n=200, p=2)
    f = pivoted_cholesky(X, 10.0, tol=0.0)
    assert f.rank < 200 and float(torch.diagonal(f.L_pp).min()) > 0
    assert torch.isfinite(f.features_at(X)).all()
    assert torch.allclose(f.features @ f.features.T, rbf_kernel(X, X, 10.0), atol=1e-10)


@pytest.mark.parametrize("response", ["slices", "kernel"])
def test_pencil_matches_the_dense_operator_form(response):
    """The authors' dense pencil HK w = lam ((H - S)K + n eta I) w (eqs. 6-7, operator ridge).

    Multiplying by K gives K H K w = lam (K (H - S) K + n eta K) w: eq. (7) with the
    ridge on the covariance operator. Its eigenvalues and projections H K W must
    equal the reduced r x r solution.
    """
    X, y = _data()
    n, eta, m = len(y), 1e-3, 3
    f = pivoted_cholesky(X, 1.5, tol=1e-14)
    Psi, ridge = (slice_features(y, 5), 0.0) if response == "slices" else (kernel_response_features(y, 0.5), 1e-3)
    C_v, A_v = reduced_pencil(f.features, Psi, ridge)
    sub = sdr_subspace(C_v, A_v, m, eta, n)
    K = rbf_kernel(X, X, 1.5)
    H = torch.eye(n, dtype=K.dtype) - 1.0 / n
    S = _smoother(Psi, ridge)
    evals, evecs = scipy.linalg.eig((H @ K).numpy(), ((H - S) @ K + n * eta * torch.eye(n, dtype=K.dtype)).numpy())
    order = np.argsort(-evals.real)[:m]
    assert np.allclose(evals[order].imag, 0.0, atol=1e-8)
    np.testing.assert_allclose(sub.eigenvalues.numpy(), evals[order].real, rtol=1e-6)
    P_dense = H @ K @ torch.as_tensor(evecs[:, order].real)
    P_ours = (f.features - f.features.mean(0)) @ sub.coef
    assert _span_cosines(P_ours, P_dense).min() > 1 - 1e-7
    # eq. (7) literally for the slicing case: A = K [I - diag(1 1^T / n_h)] K
    if response == "slices":
        labels = Psi.argmax(1)
        D = (labels[:, None] == labels[None, :]).to(K.dtype) / torch.bincount(labels)[labels][None, :]
        A = K @ (torch.eye(n, dtype=K.dtype) - D) @ K
        C = K @ H @ K
        # same functions: v = Phi^T W for W = Phi (Phi^T Phi)^-1 v
        Phi = f.features
        W = Phi @ torch.linalg.solve(Phi.T @ Phi, sub.coef)
        g_dense = subspace_log_likelihood(W, A, C, n * eta * K, n)
        g_reduced = subspace_log_likelihood(sub.coef, A_v, C_v, n * eta * torch.eye(f.rank, dtype=K.dtype), n)
        assert torch.isclose(g_dense, g_reduced, rtol=1e-6)


def test_leading_eigenvectors_maximise_g_h():
    """Lemma 1: no other subspace scores higher under the SDR log-likelihood (6)."""
    X, y = _data()
    n, eta = len(y), 1e-3
    f = pivoted_cholesky(X, 1.5)
    C_v, A_v = reduced_pencil(f.features, kernel_response_features(y, 0.5), 1e-3)
    sub = sdr_subspace(C_v, A_v, 3, eta, n)
    R = n * eta * torch.eye(f.rank, dtype=C_v.dtype)
    g_star = subspace_log_likelihood(sub.coef, A_v, C_v, R, n)
    for seed in range(5):
        V = torch.randn(f.rank, 3, generator=torch.Generator().manual_seed(seed), dtype=C_v.dtype)
        assert subspace_log_likelihood(V, A_v, C_v, R, n) < g_star
        # a small rotation out of the optimum also scores lower
        assert subspace_log_likelihood(sub.coef + 1e-3 * V, A_v, C_v, R, n) < g_star


def test_g_h_depends_only_on_the_functions():
    """g_H(B) is a function of B = phi W: invariant to W -> W T and to W -> W + N with K N = 0.

    A linear kernel K = X X^T with n > p has a null space. The ridge of eq. (6) printed
    as W^T (A + eta I) W (coefficient space) changes under W + N; the operator ridge
    W^T (A + n eta K) W does not.
    """
    g = torch.Generator().manual_seed(1)
    n, p, eta = 40, 3, 1e-2
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = X[:, 0] + 0.3 * X[:, 1] ** 2
    K = X @ X.T
    H = torch.eye(n, dtype=X.dtype) - 1.0 / n
    S = _smoother(slice_features(y, 4), 0.0)
    A, C = K @ (H - S) @ K, K @ H @ K
    W = torch.randn(n, 2, generator=g, dtype=X.dtype)
    N = (torch.eye(n, dtype=X.dtype) - X @ torch.linalg.pinv(X)) @ torch.randn(n, 2, generator=g, dtype=X.dtype)
    assert float((K @ N).abs().max()) < 1e-10
    T = torch.tensor([[2.0, 0.3], [-1.0, 1.0]], dtype=X.dtype)
    g0 = subspace_log_likelihood(W, A, C, n * eta * K, n)
    assert torch.isclose(subspace_log_likelihood(W @ T, A, C, n * eta * K, n), g0, rtol=1e-9)
    assert torch.isclose(subspace_log_likelihood(W + N, A, C, n * eta * K, n), g0, rtol=1e-9)
    coefficient_ridge = n * eta * torch.eye(n, dtype=X.dtype)
    g_coef = subspace_log_likelihood(W, A, C, coefficient_ridge, n)
    assert not torch.isclose(subspace_log_likelihood(W + N, A, C, coefficient_ridge, n), g_coef, rtol=1e-3)


def test_linear_kernel_is_ridge_regularised_sir():
    """With phi(x) = x the pencil is SIR with the ridge on the covariance operator.

    var(x) b = lam (E var(x | y) + eta I) b in R^p (Li 1991, Theorem 1 of the paper),
    with the sample (1/n) covariances.
    """
    g = torch.Generator().manual_seed(2)
    n, p, eta = 300, 5, 0.05
    X = torch.randn(n, p, generator=g, dtype=torch.float64) * torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0])
    y = X[:, 0] - X[:, 1] + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)
    Psi = slice_features(y, 6)
    C_v, A_v = reduced_pencil(X, Psi)
    sub = sdr_subspace(C_v, A_v, 2, eta, n)
    Xc = X - X.mean(0)
    cov = Xc.T @ Xc / n
    labels = Psi.argmax(1)
    within = sum(
        float((labels == h).sum()) / n * torch.cov((X[labels == h]).T, correction=0) for h in labels.unique()
    )
    evals, evecs = scipy.linalg.eigh(cov.numpy(), (within + eta * torch.eye(p, dtype=X.dtype)).numpy())
    np.testing.assert_allclose(sub.eigenvalues.numpy(), evals[::-1][:2], rtol=1e-8)
    assert _span_cosines(sub.coef, torch.as_tensor(evecs[:, ::-1][:, :2].copy())).min() > 1 - 1e-10


def test_sir_consistency_single_index_model():
    """Theorem 1: with the linear kernel the maximiser of g_H is the SIR direction b."""
    g = torch.Generator().manual_seed(3)
    n, p = 3000, 6
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    b = torch.tensor([1.0, -2.0, 0.0, 0.5, 0.0, 1.0], dtype=torch.float64)
    b = b / b.norm()
    t = X @ b
    y = t + 0.3 * t**3 + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)
    # linear kernel K = X X^T: the features are X itself and v is the direction in R^p
    C_v, A_v = reduced_pencil(X, slice_features(y, 10))
    direction = sdr_subspace(C_v, A_v, 1, 1e-8, n).coef[:, 0]
    assert abs(float(direction @ b)) / float(direction.norm()) > 0.99


def test_pencil_solver_shares_work_between_etas_and_ranks_are_nested():
    X, y = _data()
    n = len(y)
    f = pivoted_cholesky(X, 1.0)
    C_v, A_v = reduced_pencil(f.features, kernel_response_features(y, 0.5), 1e-3)
    solver = PencilSolver(C_v, A_v, n)
    for eta in (1e-6, 1e-3, 1e-1):
        # reference: Cholesky of A + n eta I and a full symmetric eigendecomposition
        evals, evecs = scipy.linalg.eigh(C_v.numpy(), (A_v + n * eta * torch.eye(f.rank, dtype=A_v.dtype)).numpy())
        five, two = solver.solve(5, eta), solver.solve(2, eta)
        np.testing.assert_allclose(five.eigenvalues.numpy(), evals[::-1][:5], rtol=1e-7)
        assert _span_cosines(five.coef[:, :2], two.coef).min() > 1 - 1e-8


@pytest.mark.parametrize("n_slices, counts", [(3, [4, 4, 4]), (7, [3, 1, 3, 1, 2, 1, 1])])
def test_slices_are_balanced_and_keep_ties(n_slices, counts):
    """Equal-count slices of the sorted y (sizes 2,2,2,2,2,1,1 for 12 points in 7), then ties
    move to the lowest slice any of them fell in: {0,0 | 0,1} -> {0,0,0 | 1}, {2,3 | 3,4} -> {2,3,3 | 4}."""
    y = torch.tensor([0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], dtype=torch.float64)
    Psi = slice_features(y, n_slices)
    assert torch.equal(Psi.sum(1), torch.ones(len(y), dtype=Psi.dtype))
    labels = Psi.argmax(1)
    for v in y.unique():
        assert labels[y == v].unique().numel() == 1
    assert torch.all(labels[1:] >= labels[:-1])  # y is sorted, slices follow its order
    assert torch.bincount(labels).tolist() == counts


def test_slices_without_ties_have_equal_counts_in_any_row_order():
    y = torch.randperm(23, generator=torch.Generator().manual_seed(0)).to(torch.float64)
    labels = slice_features(y, 5).argmax(1)
    assert torch.bincount(labels).tolist() == [5, 5, 5, 4, 4]
    order = torch.argsort(y)
    assert torch.all(labels[order][1:] >= labels[order][:-1])


def test_bad_inputs():
    y = torch.tensor([1.0, 1.0, 2.0, 2.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="distinct values"):
        slice_features(y, 3)
    with pytest.raises(ValueError, match="bandwidth"):
        kernel_response_features(y, 0.0)
    C = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="rank"):
        sdr_subspace(C, C, rank=4, eta=1e-3, n=10)
    with pytest.raises(ValueError, match="rank"):
        sdr_subspace(C, C, rank=0, eta=1e-3, n=10)
    with pytest.raises(ValueError, match="eta"):
        sdr_subspace(C, C, rank=1, eta=0.0, n=10)


def test_class_features_one_hot():
    codes = torch.tensor([0, 2, 1, 2])
    Psi = class_features(codes)
    assert Psi.dtype == torch.float64
    assert torch.equal(Psi, torch.eye(3, dtype=Psi.dtype)[codes])


def test_response_kernel_bandwidth_is_in_units_of_the_response_std():
    """The response is standardised first, so the features' Gram matrix does not depend on the
    units (scale or offset) of y."""
    y = torch.randn(60, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    Psi1 = kernel_response_features(y, 0.5)
    Psi2 = kernel_response_features(25.0 * y + 3.0, 0.5)
    torch.testing.assert_close(Psi1 @ Psi1.T, Psi2 @ Psi2.T, atol=1e-8, rtol=0)
