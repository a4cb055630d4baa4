"""EM of SIGP (Algorithm 1, eqs. 9-14): monotone, equal to the dense formulas, basis invariant."""

import math

import pytest
import torch

from hdgp.sigp.em import fit_em, initial_sigma_beta
from hdgp.sigp.lowrank import pivoted_cholesky
from hdgp.sigp.subspace import kernel_response_features, reduced_pencil, sdr_subspace


def _problem(n=120, m=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    f = pivoted_cholesky(X, 1.0)
    C_r, A_r = reduced_pencil(f.U, f.eigenvalues, kernel_response_features(y, 0.5), 1e-3)
    coef = sdr_subspace(C_r, A_r, m, 1e-3).coef
    P = f.U @ (f.eigenvalues[:, None] * coef)
    H_proj = coef.T @ (f.eigenvalues[:, None] * coef)  # W^T K W
    return X, y, P, H_proj


def _dense_em(P, y, Z, H, lam, n_iter):
    """Algorithm 1 with explicit n x n inverses, the textbook form of eqs. (9)-(14)."""
    n, m = P.shape
    D = torch.cat([torch.ones(n, 1, dtype=P.dtype), Z], 1)
    Omega = torch.zeros(D.shape[1], D.shape[1], dtype=P.dtype)
    Omega[1:, 1:] = lam * H
    var_y = float(y.var(unbiased=False))
    Sigma = initial_sigma_beta(P.T @ P, 0.5 * var_y * n / m)
    s2 = 0.5 * var_y
    for _ in range(n_iter):
        G = P @ Sigma @ P.T + s2 * torch.eye(n, dtype=P.dtype)
        Gi = torch.linalg.inv(G)
        theta = torch.linalg.solve(D.T @ Gi @ D + Omega, D.T @ Gi @ y)
        r = y - D @ theta
        J = -0.5 * (n * math.log(2 * math.pi) + torch.logdet(G) + r @ Gi @ r) - 0.5 * theta @ Omega @ theta
        beta = Sigma @ P.T @ Gi @ r  # eq. (9)
        S = Sigma - Sigma @ P.T @ Gi @ P @ Sigma
        Sigma = Sigma + torch.outer(beta, beta) - Sigma @ P.T @ Gi @ P @ Sigma  # eq. (11)
        s2 = s2 + (torch.sum((r - P @ beta) ** 2) - s2**2 * torch.trace(Gi)) / n  # eq. (12)
    return Sigma, float(s2), float(J)


@pytest.mark.parametrize("mean", ["linear", "projected", "none"])
def test_objective_is_non_decreasing(mean):
    X, y, P, H_proj = _problem()
    Z, H = {"linear": (X, torch.eye(3, dtype=X.dtype)), "projected": (P, H_proj), "none": (X[:, :0], torch.zeros(0, 0, dtype=X.dtype))}[mean]
    res = fit_em(P, y, Z, H, lam=1.0, max_iter=200, warn=False)
    J = torch.tensor(res.objective)
    assert len(J) > 5
    assert torch.all(J[1:] - J[:-1] >= -1e-9 * len(y))


def test_woodbury_path_equals_dense_formulas():
    X, y, P, _ = _problem(n=60)
    Z, H = X, torch.eye(3, dtype=X.dtype)
    for n_iter in (1, 4):
        res = fit_em(P, y, Z, H, lam=0.5, max_iter=n_iter, tol=-math.inf, warn=False)
        Sigma, s2, J = _dense_em(P, y, Z, H, 0.5, n_iter)
        assert torch.allclose(res.sigma_beta, Sigma, rtol=1e-7, atol=1e-10)
        assert math.isclose(res.noise, s2, rel_tol=1e-9)
        assert math.isclose(res.objective[n_iter - 1], J, rel_tol=1e-9)


def test_em_path_invariant_to_change_of_basis():
    """P -> P T (W -> W T) gives the same fitted mean and covariance."""
    X, y, P, H_proj = _problem()
    T = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 1.0], [0.0, 0.3, 2.0]], dtype=torch.float64)
    Z = X
    H = torch.eye(3, dtype=X.dtype)
    a = fit_em(P, y, Z, H, 1.0, max_iter=50, tol=-math.inf, warn=False)
    b = fit_em(P @ T, y, Z, H, 1.0, max_iter=50, tol=-math.inf, warn=False)
    assert torch.allclose(P @ a.beta, P @ T @ b.beta, atol=1e-8)
    assert torch.allclose(P @ a.sigma_beta @ P.T, P @ T @ b.sigma_beta @ T.T @ P.T, atol=1e-8)
    assert math.isclose(a.noise, b.noise, rel_tol=1e-9)
    assert math.isclose(a.objective[-1], b.objective[-1], rel_tol=1e-10)


def test_zero_mean_penalty_collapses_random_part_but_default_keeps_it():
    """The known trap: Z spanning the random part with lambda = 0 drives beta to 0."""
    X, y, P, H_proj = _problem()
    collapsed = fit_em(P, y, P, H_proj, lam=0.0, max_iter=300, warn=False)
    assert float((P @ collapsed.beta).var()) < 1e-6 * float(y.var())
    # linear mean (the estimators' default) leaves the nonlinear signal to beta
    alive = fit_em(P, y, X, torch.eye(3, dtype=X.dtype), lam=1.0, max_iter=300, warn=False)
    assert float((P @ alive.beta).var()) > 0.1 * float(y.var())
