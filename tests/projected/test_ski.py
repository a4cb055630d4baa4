"""Additive SKI for projected kernels against dense, exact computations."""

import math
import warnings

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from hdgp.exceptions import NotPositiveDefiniteError
from hdgp.exceptions import ConvergenceWarning, NumericalWarning
from hdgp.inference.ski import ProjectedSKIOperator, SKIProjectedGPModel, cubic_interpolation, symmetric_toeplitz_eigh
from hdgp.inference.ski.model import _DENSE_MAX_N, _EIGEN_FLOOR
from hdgp.inference.ski.preconditioner import (
    _PRECONDITIONER_GRAM_FLOPS,
    _PRECONDITIONER_MAX_COLUMNS,
    _PRECONDITIONER_TOL,
    _dct_basis,
    _nystrom_grid_root,
    _preconditioner_column_cap,
    _preconditioner_ranks,
)
from hdgp.inference.ski.toeplitz import _grid_columns, _toeplitz_matmul
from hdgp.kernels.projected_kernel import ProjectedAdditiveKernel
from hdgp.projections import diverse_directions, random_directions

DT = torch.float64
N = 1600  # "n about 2000" while keeping the dense reference cheap
SEEDS = 3  # probe seeds of the stochastic-gradient test


def _kernel(d=5, J=12, lengthscale=0.7):
    k = ScaleKernel(ProjectedAdditiveKernel(diverse_directions(d, J, random_state=0))).to(DT)
    k.base_kernel.input_lengthscale = torch.full((d,), lengthscale, dtype=DT)
    k.outputscale = 1.3
    return k


def _data(n, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=DT)
    y = torch.sin(X).sum(1) + 0.1 * torch.randn(n, generator=g, dtype=DT)
    return X, (y - y.mean()) / y.std()


def _dense_nll(Ky: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """-log N(r; 0, Ky) by Cholesky: the dense reference (differentiable)."""
    L = torch.linalg.cholesky(Ky)
    return 0.5 * (r * torch.cholesky_solve(r[:, None], L)[:, 0]).sum() + L.diagonal().log().sum() \
        + r.shape[0] / 2 * math.log(2 * math.pi)


def test_cubic_interpolation_reproduces_quadratics_and_sums_to_one():
    u0, h = torch.tensor([-3.0], dtype=DT), torch.tensor([0.25], dtype=DT)
    grid = u0 + h * torch.arange(40, dtype=DT)
    z = torch.linspace(-2.5, 5.5, 57, dtype=DT)[None]
    index, weight = cubic_interpolation(z, u0, h)
    f = lambda u: 0.3 - 1.2 * u + 0.7 * u**2  # noqa: E731  Keys (a = -1/2) is exact up to degree 2
    assert torch.allclose(weight.sum(-1), torch.ones_like(z))
    assert torch.allclose((weight * f(grid)[index]).sum(-1), f(z), atol=1e-12)


def test_toeplitz_matmul_matches_dense():
    col = torch.exp(-0.5 * (0.3 * torch.arange(9, dtype=DT)) ** 2)[None]
    T = col[0][(torch.arange(9)[:, None] - torch.arange(9)).abs()]
    U = torch.randn(1, 9, 3, dtype=DT)
    assert torch.allclose(_toeplitz_matmul(col, U)[0], T @ U[0], atol=1e-13)


def test_ski_mvm_matches_exact_kernel_within_interpolation_error():
    X, _ = _data(400)
    k = _kernel()
    v = torch.randn(400, 2, dtype=DT)
    exact = k(X).to_dense() @ v
    errors = {}
    for m in (32, 128, 512):
        op, _ = SKIProjectedGPModel(k, grid_size=m).operator(X)
        errors[m] = ((op.matmul(v) - exact).norm() / exact.norm()).item()
    # local cubic interpolation: error O(h^3), so x4 the grid -> ~64x smaller
    assert errors[512] < 1e-6
    assert errors[128] < errors[32] / 20 and errors[512] < errors[128] / 20
    op, _ = SKIProjectedGPModel(k, grid_size=64).operator(X[:50])
    assert torch.allclose(op._diagonal(), op.to_dense().diagonal(), atol=1e-12)


@pytest.fixture(scope="module")
def problem():
    X, y = _data(N)
    k = _kernel()
    noise = 0.05
    Ky = k(X).to_dense() + noise * torch.eye(N, dtype=DT)
    L = torch.linalg.cholesky(Ky)
    return X, y, k, noise, Ky, L


def test_ski_marginal_likelihood_and_gradient_close_to_exact(problem):
    """Above _DENSE_MAX_N rows the value and gradient are estimated with ``num_probes`` random probes
    (stochastic Lanczos quadrature / Hutchinson). The value is compared with the exact GP's; the
    gradient component by component (output scale, each input length-scale, noise) with the dense
    SKI matrix's, whose gradient the estimator targets without bias.

    Tolerance: the Hutchinson estimate with p probes is a mean of p i.i.d. terms, so its error is
    ~N(0, s_i^2) per component with s_i = sd(term_i)/sqrt(p). s_i is measured as the spread of the
    estimate over SEEDS probe seeds at the model's p, and every seed's error must be within 6 s_i.
    A norm hides a wrong small component: flipping the noise gradient's sign moves it by 1210 against
    s = 0.002 (it is the largest here, but the output-scale component, 11, is 0.2 % of the norm)."""
    X, y, k, noise, _, L = problem
    ski = SKIProjectedGPModel(k).to(DT)
    ski.likelihood.noise = noise
    assert N > _DENSE_MAX_N  # the stochastic path
    params = [k.raw_outputscale, k.base_kernel.raw_input_lengthscale, ski.likelihood.raw_noise]
    names = ["outputscale"] + [f"lengthscale[{i}]" for i in range(k.base_kernel.raw_input_lengthscale.numel())] \
        + ["noise"]
    op, _ = ski.operator(X)
    dense = _dense_nll(op.to_dense() + ski.noise * torch.eye(N, dtype=DT), y - ski.constant)
    g_dense = torch.cat([g.reshape(-1) for g in torch.autograd.grad(dense, params)])
    estimates = []
    for seed in range(SEEDS):
        ski.probe_seed = seed
        value = ski.neg_log_marginal_likelihood(X, y)
        estimates.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(value, params)]))
        if seed == 0:  # stochastic Lanczos quadrature, 10 preconditioned probes, against the exact GP
            r = (y - ski.constant).detach()
            exact = 0.5 * (r @ torch.cholesky_solve(r[:, None], L)[:, 0]) + L.diagonal().log().sum() \
                + N / 2 * math.log(2 * math.pi)
            assert abs(value.item() - exact.item()) < 0.5
    errors = torch.stack(estimates) - g_dense
    spread = errors.std(0)  # s_i of the p-probe estimate
    assert ski.num_probes == 10 and torch.all(spread > 0)
    for i, name in enumerate(names):
        worst = errors[:, i].abs().max().item()
        assert worst <= 6 * spread[i].item(), (name, worst, spread[i].item(), g_dense[i].item())


def test_interpolation_matrices_are_built_once_per_evaluation_and_only_for_their_own_data(problem, monkeypatch):
    """linear_operator rebuilds the operator in inv_quad_logdet's forward and backward; the copies share
    the CSR matrices (2 per build: W and Wt), and a copy on other tensors builds its own."""
    X, y, k, noise, _, _ = problem
    builds = []
    csr = torch.sparse_csr_tensor
    monkeypatch.setattr(torch, "sparse_csr_tensor", lambda *a, **kw: builds.append(1) or csr(*a, **kw))
    ski = SKIProjectedGPModel(k).to(DT)
    ski.likelihood.noise = noise
    value = ski.neg_log_marginal_likelihood(X, y)
    grads = torch.autograd.grad(value, [k.raw_outputscale, ski.likelihood.raw_noise])
    assert len(builds) == 2
    op, _ = ski.operator(X)
    v = torch.randn(N, 2, dtype=DT, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        op._matmul(v)  # builds and caches
        other = ProjectedSKIOperator(op.weight.flip(1), op.index.flip(1), op.col, op.coef,
                                     sparse_cache=op._sparse_cache)  # same cache dict, rows reversed
        torch.testing.assert_close(other._matmul(v), (op.to_dense() @ v.flip(0)).flip(0), rtol=1e-10, atol=1e-10)
    monkeypatch.setattr(ProjectedSKIOperator, "_sparse_key", lambda self: object())  # never a cache hit
    again = SKIProjectedGPModel(k).to(DT)
    again.likelihood.noise = noise
    value2 = again.neg_log_marginal_likelihood(X, y)
    assert value2.item() == value.item()
    for a, b in zip(grads, torch.autograd.grad(value2, [k.raw_outputscale, again.likelihood.raw_noise])):
        assert torch.equal(a, b)


def test_ski_predictions_close_to_exact_including_far_test_points(problem):
    X, y, k, noise, Ky, L = problem
    ski = SKIProjectedGPModel(k).to(DT)
    ski.likelihood.noise = noise
    Xs = 1.5 * torch.randn(200, 5, dtype=DT)
    Xs[0], Xs[1], Xs[2] = 4.0, 100.0, 1e308  # beyond the training grid; far beyond it; projections overflow
    posterior = ski.posterior(X, y)
    mean, var = posterior.predict(Xs, latent=True)
    Ks = k(Xs, X).to_dense()
    exact_mean = ski.constant + Ks @ torch.cholesky_solve((y - ski.constant).unsqueeze(-1), L).squeeze(-1)
    V = torch.linalg.solve_triangular(L, Ks.T, upper=False)
    exact_var = k(Xs, diag=True) - V.square().sum(0)
    ok = torch.arange(len(Xs)) != 2  # row 2: the exact formula gives NaN (inf - inf in K_*X)
    assert torch.allclose(mean[ok], exact_mean[ok].detach(), atol=1e-4)
    assert torch.allclose(var[ok], exact_var[ok].detach(), atol=1e-5)
    # prior far away (the SKI prior variance: within interpolation error of the exact one where a
    # projection of the point still lies on its extended grid)
    assert var[1].item() == pytest.approx(k.outputscale.item(), rel=1e-8)
    assert mean[2].item() == pytest.approx(ski.constant.item()) and var[2].item() == pytest.approx(k.outputscale.item())
    _, var_y = posterior.predict(Xs[:3], latent=False)
    assert torch.allclose(var_y - var[:3], torch.full((3,), noise, dtype=DT))


def test_ski_rejects_what_it_cannot_do():
    k2 = ScaleKernel(ProjectedAdditiveKernel(random_directions(3, (1, 2), random_state=0), (1, 2)))
    with pytest.raises(ValueError, match="1-D projections"):
        SKIProjectedGPModel(k2)
    with pytest.raises(ValueError, match="grid_size"):
        SKIProjectedGPModel(_kernel(), grid_size=8)
    for bad in (-1, 2.5, "full"):
        with pytest.raises(ValueError, match="preconditioner_rank"):
            SKIProjectedGPModel(_kernel(), preconditioner_rank=bad)


def test_nystrom_root_columns_are_nested():
    """The first k columns of the rank-r root are the rank-k root: the auto ranks truncate one batch."""
    col = _grid_columns(torch.tensor([0.05, 0.2], dtype=DT), 64)
    full = _nystrom_grid_root(col, _dct_basis(64, 12, col))
    assert torch.allclose(full[..., :5], _nystrom_grid_root(col, _dct_basis(64, 5, col)), atol=1e-10)


def test_preconditioner_ranks_follow_the_spectrum():
    """A rank bound from the spectrum itself (not the rule's own formula): with n rows spread over a
    grid of m points, the SKI matrix c W T W^T has about the eigenvalues (n/m) c eig(T) of the grid's
    Toeplitz matrix T. The Nystrom preconditioner P = Phi Phi^T + noise I keeps r modes, so the
    preconditioned condition number is about 1 + lambda_(r+1) / noise. The ranks must (a) keep every
    mode above 2 x noise (condition number <= 3) and (b) keep none below _PRECONDITIONER_TOL x noise,
    the documented cut: #(lambda > 2 noise) <= r <= #(lambda > tol x noise). Shorter length-scales (wider
    grids) and smaller noise need more."""
    m, n = 512, 1000
    h = torch.tensor([0.002, 0.01, 0.05], dtype=DT)  # grids 1, 5 and 25 length-scales wide
    coef, noise = torch.full((3,), 0.1, dtype=DT), torch.tensor(0.01, dtype=DT)
    ranks = _preconditioner_ranks(h, coef, noise, n, m)
    lag = torch.arange(m, dtype=DT)
    for level in (noise, noise / 100):
        for j, r in enumerate(_preconditioner_ranks(h, coef, level, n, m).tolist()):
            T = torch.exp(-0.5 * ((lag[:, None] - lag) * h[j]) ** 2)  # unit RBF on the grid, step h[j]
            spectrum = n / m * coef[j] * torch.linalg.eigvalsh(T)
            assert int((spectrum > 2 * level).sum()) <= r <= int((spectrum > _PRECONDITIONER_TOL * level).sum()), \
                (h[j].item(), level.item(), r)
    assert (ranks < _preconditioner_ranks(h, coef, noise / 100, n, m)).all()
    many = _preconditioner_ranks(torch.full((40,), 0.1, dtype=DT), torch.full((40,), 0.1, dtype=DT), noise, n, m)
    assert many.sum() <= _preconditioner_column_cap(n) and (many >= 1).all()


def test_preconditioner_column_cap_keeps_the_gram_cost_within_budget():
    """The cap is 512 up to n = 512, then n, then sqrt(budget / n), and 512 again from n = 20,000 on."""
    assert _preconditioner_column_cap(300) == _PRECONDITIONER_MAX_COLUMNS and _preconditioner_column_cap(1000) == 1000
    for n in (2_000, 5_000, 12_000):
        cap = _preconditioner_column_cap(n)
        assert _PRECONDITIONER_MAX_COLUMNS < cap < n and n * cap**2 <= _PRECONDITIONER_GRAM_FLOPS < n * (cap + 1) ** 2
    assert _preconditioner_column_cap(20_000) == _preconditioner_column_cap(10**6) == _PRECONDITIONER_MAX_COLUMNS


def test_capped_preconditioner_biases_the_log_det_and_the_n_dependent_cap_does_not(monkeypatch):
    """n = 1200, length-scale 0.15, noise 1e-3: the spectrum wants 879 columns. With 512 (the former
    fixed cap) the estimate against the dense SKI value is off by up to 0.009 nats per row over probe
    seeds; with the cap from n (1200) every seed is within 1e-3."""
    from hdgp.inference.ski import preconditioner as ski_module

    n = 1200
    X, y = _data(n)
    ski = SKIProjectedGPModel(_kernel(lengthscale=0.15)).to(DT)
    ski.likelihood.noise = 1e-3
    with torch.no_grad():
        op, (_, h) = ski.operator(X)
        assert _PRECONDITIONER_MAX_COLUMNS < int(ski_module._spectral_ranks(h, op.coef, ski.noise, n, 512).sum()) < n
        exact = _dense_nll(op.to_dense() + ski.noise * torch.eye(n, dtype=DT), y - ski.constant)

        def errors():
            out = []
            for seed in range(4):
                ski.probe_seed = seed
                out.append(abs(ski.neg_log_marginal_likelihood(X, y) - exact).item() / n)
            return out

        from_n = errors()
        monkeypatch.setattr(ski_module, "_preconditioner_column_cap", lambda n: _PRECONDITIONER_MAX_COLUMNS)
        fixed = errors()
    assert max(from_n) < 1e-3 and max(fixed) > 3 * max(from_n)


def test_conditioning_warns_when_the_preconditioner_cap_binds():
    X, y = _data(900)
    ski = SKIProjectedGPModel(_kernel(lengthscale=0.1)).to(DT)
    ski.likelihood.noise = 1e-3
    with pytest.warns(ConvergenceWarning, match="preconditioner needed .* columns and kept 900"):
        ski.posterior(X, y)


def test_small_data_get_the_exact_ski_likelihood_and_gradient_from_the_dense_matrix():
    """Up to _DENSE_MAX_N rows: the value and gradient of the SKI model (not of the exact kernel) to
    rounding, whatever the probe seed, at a length-scale and noise where probes would be off."""
    from hdgp.inference.ski.model import _DENSE_MAX_N

    n = 400
    assert n <= _DENSE_MAX_N
    X, y = _data(n)
    k = _kernel(lengthscale=0.1)
    ski = SKIProjectedGPModel(k).to(DT)
    ski.likelihood.noise = 1e-3
    params = [k.raw_outputscale, k.base_kernel.raw_input_lengthscale, ski.likelihood.raw_noise]
    op, _ = ski.operator(X)
    Ky = op.to_dense() + ski.noise * torch.eye(n, dtype=DT)  # SKI matrix by products with I (other code path)
    dense = _dense_nll(Ky, y - ski.constant)
    g_dense = torch.cat([g.reshape(-1) for g in torch.autograd.grad(dense, params)])
    for seed in (0, 1):
        ski.probe_seed = seed
        value = ski.neg_log_marginal_likelihood(X, y)
        g = torch.cat([g.reshape(-1) for g in torch.autograd.grad(value, params)])
        assert abs(value.item() - dense.item()) < 1e-8 * abs(dense.item())
        assert ((g - g_dense).norm() / g_dense.norm()).item() < 1e-8


def test_auto_preconditioner_keeps_the_log_det_estimate_accurate_at_short_length_scales():
    """Length-scale 0.15 and noise 0.01: the SKI marginal likelihood estimate (10 probes) against the
    dense SKI matrix, over probe seeds. A fixed 16 modes per projection was off by up to 0.014 nats
    per row, enough to stall L-BFGS far from the optimum; the spectrum-based ranks stay within 0.005.
    (n above _DENSE_MAX_N, where the likelihood is estimated, not computed from the dense matrix.)"""
    n = 1000
    X, y = _data(n)
    ski = SKIProjectedGPModel(_kernel(lengthscale=0.15)).to(DT)
    ski.likelihood.noise = 0.01
    with torch.no_grad():
        op, _ = ski.operator(X)
        exact = _dense_nll(op.to_dense() + ski.noise * torch.eye(n, dtype=DT), y - ski.constant)
        errors = {}
        for rank in (16, "auto"):
            ski.preconditioner_rank, errors[rank] = rank, []
            for seed in range(4):
                ski.probe_seed = seed
                errors[rank].append(abs(ski.neg_log_marginal_likelihood(X, y) - exact).item() / n)
    assert max(errors["auto"]) < 0.005
    assert max(errors[16]) > 2 * max(errors["auto"])


def test_analytic_bilinear_derivative_matches_autograd():
    from linear_operator.operators import LinearOperator

    from hdgp.inference.ski import ProjectedSKIOperator

    g = torch.Generator().manual_seed(3)
    J, n, m = 3, 60, 32
    z = torch.randn(J, n, generator=g, dtype=DT)
    h = (z.max(1).values - z.min(1).values) / (m - 5)
    index, weight = cubic_interpolation(z, z.min(1).values - 2 * h, h)
    args = [weight.detach().requires_grad_(True), index, _grid_columns(h, m).requires_grad_(True),
            torch.rand(J, generator=g, dtype=DT).requires_grad_(True)]
    op = ProjectedSKIOperator(*args)
    L, R = torch.randn(n, 4, generator=g, dtype=DT), torch.randn(n, 4, generator=g, dtype=DT)
    ours, reference = op._bilinear_derivative(L, R), LinearOperator._bilinear_derivative(op, L, R)
    assert ours[1] is None
    for a, b in zip(ours[::2] + ours[3:], reference[::2] + reference[3:]):
        assert torch.allclose(a, b, atol=1e-12)


def test_ski_posterior_mean_is_accurate_with_tiny_noise_and_a_large_constant_mean():
    """Noise 1e-4 and a fitted constant mean of ~170: CG alone stalled at rms residual 0.04,
    30 predictive standard deviations off, behind a relative residual (2.5e-4) that looked fine.
    Iterative refinement brings SKI to the exact model's accuracy."""
    import warnings

    import numpy as np

    import hdgp

    rng = np.random.default_rng(16)
    X = rng.uniform(-1, 1, (400, 2))
    f = lambda Z: np.sin(Z[:, 0]) + Z[:, 1] ** 2  # noqa: E731
    y = f(X) + 1e-4 * rng.standard_normal(400)
    Xt = rng.uniform(-1, 1, (300, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", hdgp.exceptions.ConvergenceWarning)
        ski = hdgp.ProjectedAdditiveGPRegressor(6, inference="ski", random_state=0).fit(X, y)
        mean, std = ski.predict(Xt, return_std=True, latent=True)
    assert np.sqrt(np.mean((mean - f(Xt)) ** 2)) < 2 * np.median(std)


@pytest.mark.parametrize("extreme", ["outputscale", "lengthscale"])
def test_extreme_hyperparameters_are_a_failed_evaluation_not_a_crash(extreme):
    """An L-BFGS line search can try an output scale of 1e172 or an overflowed length-scale
    (found on breastcancer and stock): the objective raises NotPositiveDefiniteError, which the
    optimiser backs off from, not a LinAlgError or an arange error that ends the fit."""
    X, y = _data(200)
    k = _kernel()
    model = SKIProjectedGPModel(k, grid_size=64).to(DT)
    model.likelihood.noise = 1e-4
    if extreme == "outputscale":
        k.outputscale = 1.29e172
    else:
        k.base_kernel.input_lengthscale = torch.full((5,), 1e-320, dtype=DT)  # subnormal: 1/ℓ overflows
    with pytest.raises(NotPositiveDefiniteError):
        model.neg_log_marginal_likelihood(X, y)


def _mixed_posterior(n=500, m=128, noise=0.05):
    """A SKI posterior whose projections need very different numbers of eigenpairs: per-projection
    length-scales from 0.03 to 10 make grids from one to a few hundred length-scales wide."""
    X, y = _data(n, seed=1)
    k = ScaleKernel(ProjectedAdditiveKernel(diverse_directions(5, 6, random_state=0), ard=False)).to(DT)
    k.base_kernel.projection_lengthscale = torch.tensor([0.03, 0.1, 0.3, 1.0, 3.0, 10.0], dtype=DT)
    ski = SKIProjectedGPModel(k, grid_size=m).to(DT)
    ski.likelihood.noise = noise
    with warnings.catch_warnings():  # the grid of length-scale 0.03 is coarse on purpose (small m)
        warnings.simplefilter("ignore", NumericalWarning)
        return X, y, ski, ski.posterior(X, y)


def test_feature_gram_on_the_grids_equals_phi_transpose_phi():
    """Phi^T Phi from the interpolation Gram blocks W_j^T W_j' equals the product of the explicit
    features, column-masked; chunked accumulation (tiny max_entries) changes nothing."""
    from hdgp.inference.ski import preconditioner as ski_module

    X, _, ski, _ = _mixed_posterior(n=300, m=64)
    op, _ = ski.operator(X)
    g = torch.Generator().manual_seed(0)
    root = torch.randn(6, 64, 9, generator=g, dtype=DT)
    ranks = torch.tensor([9, 1, 4, 0, 7, 2])
    columns = torch.arange(9) < ranks[:, None]
    Phi = torch.cat([sum(op.weight[j, :, k, None] * root[j, :, : ranks[j]][op.index[j, :, k]] for k in range(4))
                     for j in range(6)], 1)
    assert torch.allclose(ski_module._feature_gram(op, root, columns), Phi.T @ Phi, atol=1e-10)
    block = ski_module._interpolation_gram(op.index, op.weight, 2, 64, max_entries=100)
    Wd = op._sparse()[0].to_dense().view(300, 6, 64)  # W = [W_1 ... W_J], dense
    assert torch.allclose(block, torch.einsum("na,njb->ajb", Wd[:, 2], Wd), atol=1e-12)


def test_ski_variances_keep_only_the_eigenpairs_that_matter_and_match_dense_ski():
    """The variance cache keeps, per projection, the eigenpairs of c_j T_j above 1e-8 noise
    variances: far fewer than J times the largest count, and the latent variances still equal the
    dense SKI posterior's within the stated bound J 1e-8 sigma^2 (plus round-off)."""
    X, y, ski, post = _mixed_posterior()
    ranks = post.columns.sum(-1)
    assert ranks.max() > 4 * ranks.min() and post.L_A.shape[0] == int(ranks.sum()) < 0.6 * post.columns.numel()
    Xs = torch.cat([X[:50], 0.5 * (X[50:150] + X[150:250])])  # projections inside the training grids
    mean, var = post.predict(Xs, latent=True)
    with torch.no_grad():  # dense SKI: the same grids and interpolation, no truncation
        op, (u0, h) = ski.operator(X)
        m = op.col.shape[-1]
        T = op.col[:, (torch.arange(m)[:, None] - torch.arange(m)).abs()]
        # the kept counts: eigenvalues of the dense T_j (LAPACK, not the Toeplitz solver) with
        # c_j lambda above 1e-8 noise variances and lambda above the relative floor
        evals = torch.linalg.eigvalsh(T)
        wanted = (evals > _EIGEN_FLOOR * evals[:, -1:]) & (op.coef[:, None] * evals > 1e-8 * ski.noise)
        assert torch.equal(ranks, wanted.sum(-1))

        def dense_w(Z):
            index, weight = cubic_interpolation(ski.kernel.base_kernel.project(Z).T, u0, h)
            return torch.zeros(*index.shape[:2], m, dtype=DT).scatter_add_(-1, index, weight)  # (J, n, m)

        W, Ws = dense_w(X), dense_w(Xs)
        Kxx = torch.einsum("j,jam,jmk,jbk->ab", op.coef, W, T, W)
        Ksx = torch.einsum("j,jam,jmk,jbk->ab", op.coef, Ws, T, W)
        kss = torch.einsum("j,jam,jmk,jak->a", op.coef, Ws, T, Ws)  # the SKI model's own prior variance
        L = torch.linalg.cholesky(Kxx + ski.noise * torch.eye(len(X), dtype=DT))
        dense_var = kss - torch.linalg.solve_triangular(L, Ksx.T, upper=False).square().sum(0)
    assert torch.allclose(var, dense_var, atol=6 * 1e-8 * ski.noise.item() + 1e-9)


def test_ski_variances_start_from_the_ski_prior_not_the_exact_one():
    """The posterior variance subtracts SKI covariances, so it must start from the SKI prior
    variance. From the exact k(x, x) the interpolation error of the diagonal (~1e-5 of the signal
    variance at 0.1 length-scales per grid step, a grid fine enough for the noise: no warning)
    stayed in it: 6x the latent variance of densely sampled 1-D data (median; 13x at most)."""
    X, y = _data(600, d=1)
    k = _kernel(d=1, J=3, lengthscale=0.5)
    ski = SKIProjectedGPModel(k, grid_size=128).to(DT)
    ski.likelihood.noise = 1e-4
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        post = ski.posterior(X, y)
    Xs = torch.cat([X[:50], X[:50] + 0.01])
    _, var = post.predict(Xs, latent=True)
    _, cov = post.predict(Xs, latent=True, full_cov=True)
    with torch.no_grad():  # dense SKI posterior: the same grids, prior from the same interpolation
        op, (u0, h) = ski.operator(X)
        m = op.col.shape[-1]
        T = op.col[:, (torch.arange(m)[:, None] - torch.arange(m)).abs()]

        def dense_w(Z):
            index, weight = cubic_interpolation(k.base_kernel.project(Z).T, u0, h)
            return torch.zeros(*index.shape[:2], m, dtype=DT).scatter_add_(-1, index, weight)

        W, Ws = dense_w(X), dense_w(Xs)
        Kxx = torch.einsum("j,jam,jmk,jbk->ab", op.coef, W, T, W)
        Ksx = torch.einsum("j,jam,jmk,jbk->ab", op.coef, Ws, T, W)
        Kss = torch.einsum("j,jam,jmk,jbk->ab", op.coef, Ws, T, Ws)
        L = torch.linalg.cholesky(Kxx + ski.noise * torch.eye(len(X), dtype=DT))
        V = torch.linalg.solve_triangular(L, Ksx.T, upper=False)
        dense_cov = Kss - V.T @ V
    assert torch.allclose(var, dense_cov.diagonal(), rtol=0.05, atol=1e-9)
    assert torch.allclose(cov, dense_cov, rtol=0.05, atol=1e-9)


def test_conditioning_warns_when_the_grids_are_coarse_for_the_length_scales():
    """A grid step of a few length-scales makes the SKI kernel another kernel (test RMSE 40x the
    exact GP's at 3.9 length-scales per step): conditioning says so and names a grid that is fine
    enough; a fine grid, or an error below the noise variance, stays silent."""
    X, y = _data(300, d=3)
    k = _kernel(d=3, J=4, lengthscale=0.1)
    with pytest.warns(NumericalWarning, match="grid_size >= "):
        coarse = SKIProjectedGPModel(k, grid_size=16).to(DT)
        coarse.likelihood.noise = 0.01
        coarse.posterior(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        fine = SKIProjectedGPModel(k, grid_size=512).to(DT)
        fine.likelihood.noise = 0.01
        fine.posterior(X, y)


def _ski_rbf_error(h: float, points: int = 400) -> float:
    """Largest |k_SKI(x, x') - k(x, x')| of the unit RBF over pairs of points spread over max(3, 8h)
    length-scales, with k_SKI = w(x)^T T w(x') built densely from cubic_interpolation's weights."""
    x = torch.linspace(0, max(3.0, 8 * h), points, dtype=DT)
    u0, step = torch.tensor([-2 * h - 1e-9], dtype=DT), torch.tensor([h], dtype=DT)
    index, weight = cubic_interpolation(x[None], u0, step)
    grid = u0 + h * torch.arange(int(index.max()) + 1, dtype=DT)
    W = torch.zeros(points, grid.numel(), dtype=DT).scatter_add_(1, index[0], weight[0])
    exact = torch.exp(-0.5 * (x[:, None] - x) ** 2)
    return (W @ torch.exp(-0.5 * (grid[:, None] - grid) ** 2) @ W.T - exact).abs().max().item()


def test_interpolation_error_follows_the_cubic_order_and_its_estimate_bounds_it():
    """Keys' cubic convolution interpolates a smooth function with error O(h^3) (Keys 1981): halving the
    grid step divides the SKI kernel's largest error by about 2^3. The observed order on the unit RBF
    (measured here, densely) must be 3 +- 0.3 for h <= 0.2, and _interpolation_error (which decides the
    coarse-grid warning) must neither miss the measured error by more than 10 % nor exceed it 2-fold,
    from the cubic regime (h = 0.025) to a grid step of a length-scale, and must itself fall as h^3."""
    from hdgp.inference.ski.interpolation import _interpolation_error

    steps = [0.025, 0.05, 0.1, 0.2, 0.5, 1.0]
    measured = torch.tensor([_ski_rbf_error(h) for h in steps], dtype=DT)
    estimate = _interpolation_error(torch.tensor(steps, dtype=DT))
    order = torch.log2(measured[1:4] / measured[:3])  # h -> 2h for h = 0.025, 0.05, 0.1
    assert torch.all((order - 3).abs() < 0.3), order
    assert torch.all(estimate >= 0.9 * measured) and torch.all(estimate <= 2 * measured), (estimate, measured)
    assert torch.all((torch.log2(estimate[1:4] / estimate[:3]) - 3).abs() < 0.3)


def test_a_posterior_without_columns_reads_as_every_column_kept():
    """Model files before format 2.2 store a cache with the same number of columns per projection
    and no ``columns``: padding the compact cache that way predicts the same variances."""
    import dataclasses

    X, _, _, post = _mixed_posterior(n=300, m=64)
    J, m, r = post.root_cache.shape
    # the padded factor: sigma^2 on the diagonal of every dropped column, the compact one elsewhere
    A = post.L_A @ post.L_A.T
    full = post.noise * torch.eye(J * r, dtype=DT)
    kept = post.columns.reshape(-1).nonzero().squeeze(-1)
    full[kept[:, None], kept] = A
    old = dataclasses.replace(post, L_A=torch.linalg.cholesky(full), columns=None)
    Xs = torch.randn(40, 5, dtype=DT)
    assert torch.allclose(old.predict(Xs)[1], post.predict(Xs)[1], atol=1e-12)


def test_ski_prediction_in_blocks_equals_one_pass(monkeypatch):
    """Test points are predicted in blocks (bounded memory); the blocks' grids extend differently
    but the predictions agree with one pass over all points."""
    from hdgp.inference.ski import posterior as ski_module

    X, _, _, post = _mixed_posterior(n=300, m=64)
    Xs = 2.0 * torch.randn(700, 5, dtype=DT, generator=torch.Generator().manual_seed(5))
    one = post.predict(Xs, full_cov=True)
    J, _, width = post.root_cache.shape
    monkeypatch.setattr(ski_module, "_PREDICT_BLOCK_FLOATS", 100 * J * (1 + width))  # blocks of 100 rows
    blocked = post.predict(Xs)
    assert torch.allclose(blocked[0], one[0], atol=1e-10) and torch.allclose(blocked[1], one[1].diagonal(), atol=1e-10)


def test_model_file_node_without_columns_decodes_to_none():
    """A SKI posterior written before format 2.2 has no ``columns`` entry: it decodes with the
    field's default (None, every column kept) instead of failing as a damaged file."""
    from hdgp.io.codec import StateDecoder, StateEncoder

    _, _, _, post = _mixed_posterior(n=100, m=32)
    encoder = StateEncoder(modules={id(post.kernel): "kernel"})
    node = encoder.encode(post)
    entries = node["state"]["$dict"]  # [[key, value], ...]
    node["state"]["$dict"] = [kv for kv in entries if kv[0] != "columns"]
    assert len(node["state"]["$dict"]) == len(entries) - 1
    decoded = StateDecoder(encoder.tensors, modules={"kernel": post.kernel}).decode(node)
    assert decoded.columns is None and torch.equal(decoded.L_A, post.L_A)
    node["state"]["$dict"] = [kv for kv in entries if kv[0] != "L_A"]
    with pytest.raises(ValueError, match="missing fields"):  # a field without a default is still required
        StateDecoder(encoder.tensors, modules={"kernel": post.kernel}).decode(node)


def test_posterior_solve_reaches_its_tolerance_in_few_iterations(monkeypatch):
    """With noise 0.5 and a weak preconditioner (rank 2 per projection), linear_operator's default
    CG floor (eps = 1e-10) zeroed every step once the relative residual reached ~1e-5, and the
    1e-6 posterior solve ran all 1000 iterations; now it converges in about 60, to the tolerance."""
    from hdgp.inference.ski import ProjectedSKIOperator

    X, y = _data(2000, seed=3)
    ski = SKIProjectedGPModel(_kernel(lengthscale=0.5), grid_size=128, preconditioner_rank=2).to(DT)
    ski.likelihood.noise = 0.5
    calls = []
    original = ProjectedSKIOperator._matmul
    monkeypatch.setattr(ProjectedSKIOperator, "_matmul", lambda self, rhs: calls.append(1) or original(self, rhs))
    post = ski.posterior(X, y)
    assert len(calls) < 150
    with torch.no_grad():
        op, _ = ski.operator(X)
        r = y - ski.constant
        mean_train = ski.constant + op.matmul(torch.linalg.solve(op.to_dense() + 0.5 * torch.eye(2000, dtype=DT), r))
    assert torch.allclose(post.predict(X, latent=True)[0], mean_train, atol=1e-5)


def test_preconditioner_solve_through_the_grids_is_the_dense_inverse():
    """P^-1 v taken through the grids (sparse W^T v, per-grid roots, Woodbury) equals
    (Phi Phi^T + sigma^2 I)^-1 v with the explicit features, for unequal ranks per projection;
    log|P| is the dense log-determinant."""
    from hdgp.inference.ski.preconditioner import _features, _woodbury_preconditioner

    X, _, ski, _ = _mixed_posterior(n=300, m=64)
    op, (_, h) = ski.operator(X)
    ranks = _preconditioner_ranks(h, op.coef, ski.noise, 300, 64)
    assert len(set(ranks.tolist())) > 2
    G = _nystrom_grid_root(op.col, _dct_basis(64, int(ranks.max()), op.col))
    solve, _, logdet = _woodbury_preconditioner(op, G, ranks, ski.noise)(None)
    Phi = _features(op, G, ranks)
    P = Phi @ Phi.T + ski.noise * torch.eye(300, dtype=DT)
    v = torch.randn(300, 3, dtype=DT, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(solve(v), torch.linalg.solve(P, v), rtol=1e-8, atol=1e-10)
    assert torch.allclose(logdet, torch.logdet(P), rtol=1e-10)


@pytest.mark.parametrize("m", [16, 17, 64, 101])
def test_symmetric_toeplitz_eigh_matches_dense_eigh(m):
    """The centrosymmetric split (two half-size problems) gives the spectrum of the dense matrix
    and orthonormal eigenvectors, for even and odd m, an RBF column and an indefinite one."""
    rbf = torch.exp(-0.5 * (0.05 * torch.arange(m, dtype=torch.float64) / 0.3) ** 2)
    indefinite = torch.randn(m, dtype=torch.float64, generator=torch.Generator().manual_seed(m))
    for col in (rbf, indefinite):
        T = col[(torch.arange(m)[:, None] - torch.arange(m)).abs()]
        values, vectors = symmetric_toeplitz_eigh(col)
        assert torch.all(values[:-1] >= values[1:])
        torch.testing.assert_close(values, torch.linalg.eigvalsh(T).flip(0), rtol=0, atol=1e-12)
        torch.testing.assert_close(T @ vectors, vectors * values, rtol=0, atol=1e-12)
        torch.testing.assert_close(vectors.T @ vectors, torch.eye(m, dtype=torch.float64), rtol=0, atol=1e-12)


def test_float32_preconditioner_failure_suggests_float64():
    """noise 1e-4 against an output scale of 20 is beyond float32's Cholesky of the preconditioner."""
    X, y = _data(1000)
    k = _kernel().float()
    k.outputscale = 20.0
    ski = SKIProjectedGPModel(k).float()
    ski.likelihood.noise = 1e-4
    with pytest.raises(NotPositiveDefiniteError, match="use dtype='float64'"):
        ski.posterior(X.float(), y.float())


def test_float32_nystrom_root_exists_wherever_float64_does():
    """E^T T_j E of the kept DCT modes has eigenvalues down to ~exp(-pi^2 k^2 / 2) of the largest: in
    float32 that matrix was numerically indefinite for some grid spacings (10 of these 300 cases; one
    of them the spacing of an RPA-GP fit on the paper's Fig. 5 table, at a noise / output-scale ratio
    of 0.23), so float32 SKI refused ordinary models. The float32 root must exist everywhere and give
    the float64 root's G G^T within float32's accuracy: its jitter (10 eps of float32, 1.2e-6 of the
    largest entry of T = 1) and the rounding of T's column (6e-8), amplified by triangular solves with
    pivots down to sqrt(jitter); measured up to 8e-5 here, bound 1e-3 (a preconditioner needs less;
    a wrong root, e.g. a dropped or swapped column, is off by O(1))."""
    m = 512
    h = torch.logspace(-3, 0, 60, dtype=torch.float32)
    col = _grid_columns(h, m)
    for r in (4, 8, 16, 34, 64):
        G32 = _nystrom_grid_root(col, _dct_basis(m, r, col))
        G64 = _nystrom_grid_root(col.double(), _dct_basis(m, r, col.double()))
        assert G32.dtype == torch.float32 and torch.isfinite(G32).all()
        G32 = G32.double()
        assert (G32 @ G32.mT - G64 @ G64.mT).abs().max().item() < 1e-3
