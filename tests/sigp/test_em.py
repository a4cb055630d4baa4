"""EM of SIGP (Algorithm 1, eqs. 9-14): monotone, equal to the dense formulas, basis invariant;
the closed-form maximiser of the constant-mean model is its limit."""

import math

import pytest
import torch

from hdgp.sigp.em import fit_constant_mean, fit_em, initial_sigma_beta
from hdgp.sigp.lowrank import pivoted_cholesky
from hdgp.sigp.subspace import kernel_response_features, reduced_pencil, sdr_subspace


def _problem(n=120, m=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    f = pivoted_cholesky(X, 1.0)
    coef = sdr_subspace(*reduced_pencil(f.features, kernel_response_features(y, 0.5), 1e-3), m, 1e-3, n).coef
    P = (f.features - f.features.mean(0)) @ coef  # H K W
    H_proj = coef.T @ coef  # W^T K W
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


def _log_lik(P, y, Sigma, s2):
    """Dense log N(y; mean(y) 1, P Sigma P^T + s2 I)."""
    n = len(y)
    G = P @ Sigma @ P.T + s2 * torch.eye(n, dtype=P.dtype)
    r = y - y.mean()
    return float(-0.5 * (n * math.log(2 * math.pi) + torch.logdet(G) + r @ torch.linalg.solve(G, r)))


def test_closed_form_is_the_maximiser():
    _, y, P, _ = _problem()
    res = fit_constant_mean(P, y)
    assert res.n_iter == 1 and res.converged
    assert math.isclose(res.objective[0], _log_lik(P, y, res.sigma_beta, res.noise), rel_tol=1e-10)
    # the maximiser has rank-one P Sigma P^T along the least-squares fit
    assert torch.linalg.matrix_rank(res.sigma_beta, rtol=1e-8) == 1
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        B = torch.randn(3, 3, generator=g, dtype=P.dtype) * 0.3
        Sigma = res.sigma_beta + B @ B.T * float(res.sigma_beta.diagonal().mean())
        s2 = res.noise * math.exp(0.3 * float(torch.randn(1, generator=g)))
        assert _log_lik(P, y, Sigma, s2) < res.objective[0]
    # posterior mean of P beta = least-squares fit shrunk by 1 - s2 / ||z||^2
    r = y - y.mean()
    fitted = P @ torch.linalg.lstsq(P, r).solution
    shrink = 1 - res.noise / float(fitted @ fitted)
    assert torch.allclose(P @ res.beta, shrink * fitted, atol=1e-10)
    # the Gaussian posterior of beta (eqs. 9-10) at the maximiser, by the dense formulas
    G = P @ res.sigma_beta @ P.T + res.noise * torch.eye(len(y), dtype=P.dtype)
    gain = res.sigma_beta @ P.T @ torch.linalg.inv(G)
    torch.testing.assert_close(res.beta, gain @ r, rtol=1e-9, atol=1e-12)
    cov = res.sigma_beta - gain @ P @ res.sigma_beta
    torch.testing.assert_close(res.post_cov_sqrt @ res.post_cov_sqrt.T, cov, rtol=1e-8, atol=1e-12)


def test_closed_form_noise_is_accurate_when_the_noise_is_small():
    """Noise sd 2e-5 on a unit-scale signal in span P (just above the noise floor, 1e-10 of var y):
    the residual energy e^2 is formed from the residual itself; as ||r||^2 - ||z||^2 it lost up to
    6e-6 of its value to cancellation over these seeds (now 3e-12)."""
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        n = 200
        P = torch.randn(n, 3, generator=g, dtype=torch.float64)
        P = P - P.mean(0)
        noise = 2e-5 * torch.randn(n, generator=g, dtype=torch.float64)
        y = P @ torch.tensor([1.0, -0.5, 0.3], dtype=torch.float64) + 2.0 + noise
        r = y - y.mean()
        e2 = float((r - P @ torch.linalg.lstsq(P, r).solution).square().sum())
        assert math.isclose(fit_constant_mean(P, y).noise, e2 / (n - 1), rel_tol=1e-9)


def test_em_climbs_to_the_closed_form():
    """Algorithm 1 with the constant mean converges (like 1/k, the optimum is on the boundary) to it."""
    X, y, P, _ = _problem()
    best = fit_constant_mean(P, y)
    em = fit_em(P, y, X[:, :0], torch.zeros(0, 0, dtype=X.dtype), 0.0, max_iter=1000, tol=-math.inf, warn=False)
    J = torch.tensor(em.objective)
    assert torch.all(J[1:] - J[:-1] >= -1e-9 * len(y))
    gap = best.objective[0] - em.objective[-1]
    assert 0 <= gap < 2e-3
    assert math.isclose(em.noise, best.noise, rel_tol=1e-4)
    assert torch.allclose(P @ em.beta, P @ best.beta, atol=1e-6)
    assert math.isclose(float(em.theta[0]), float(best.theta[0]), abs_tol=1e-12)


def test_closed_form_without_signal_and_bad_input():
    g = torch.Generator().manual_seed(0)
    n = 50
    P = torch.randn(n, 2, generator=g, dtype=torch.float64)
    P = P - P.mean(0)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    y = y - P @ torch.linalg.lstsq(P, y - y.mean()).solution + 3.0  # orthogonal to span P
    res = fit_constant_mean(P, y)
    assert torch.count_nonzero(res.sigma_beta) == 0 and torch.count_nonzero(res.beta) == 0
    assert math.isclose(res.noise, float(((y - y.mean()) ** 2).mean()), rel_tol=1e-12)
    assert math.isclose(res.objective[0], _log_lik(P, y, res.sigma_beta, res.noise), rel_tol=1e-10)
    with pytest.raises(ValueError, match="centred"):
        fit_constant_mean(P + 1.0, y)


@pytest.mark.parametrize("excess", [-0.5, 0.5])
def test_closed_form_either_side_of_the_boundary_is_the_dense_likelihood_maximum(excess):
    """r = a q1 + b q_perp with q1 in the span of P: the random part is switched on exactly when
    (n - 1)||z||^2 > e^2. Just inside (b^2 = (n - 1.5) a^2) S is rank one; just outside
    (b^2 = (n - 0.5) a^2) S = 0 and sigma^2 = ||r||^2 / n. Either way the objective is the dense
    Gaussian log-density of y under N(c, P Sigma_beta P^T + sigma^2 I)."""
    from scipy.stats import multivariate_normal

    n, m, a = 40, 3, 2.0
    g = torch.Generator().manual_seed(5)
    P = torch.randn(n, m, generator=g, dtype=torch.float64)
    P = P - P.mean(0)
    basis, _ = torch.linalg.qr(torch.cat([torch.ones(n, 1, dtype=torch.float64), P], 1))
    q1 = basis[:, 1]  # in span(P), orthogonal to the constant
    q_perp = torch.linalg.qr(torch.cat([basis, torch.randn(n, 1, generator=g, dtype=torch.float64)], 1))[0][:, -1]
    b = a * math.sqrt(n - 1 + excess)
    y = 3.0 + a * q1 + b * q_perp
    res = fit_constant_mean(P, y, min_noise=0.0)
    cov = P @ res.sigma_beta @ P.T + res.noise * torch.eye(n, dtype=torch.float64)
    dense = multivariate_normal(mean=torch.full((n,), float(res.theta[0])).numpy(), cov=cov.numpy()).logpdf(y.numpy())
    assert res.objective[-1] == pytest.approx(dense, rel=1e-12)
    assert torch.linalg.eigvalsh(res.sigma_beta).min() >= -1e-12  # never a negative "covariance"
    if excess > 0:
        assert torch.count_nonzero(res.sigma_beta) == 0 and torch.count_nonzero(res.beta) == 0
        assert res.noise == pytest.approx(float((y - y.mean()).square().sum()) / n, rel=1e-12)
    else:
        assert torch.linalg.matrix_rank(res.sigma_beta) == 1
        assert res.noise == pytest.approx(b**2 / (n - 1), rel=1e-10)
