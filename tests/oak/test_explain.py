"""Sobol indices and component posteriors of OAK models vs brute force / Monte-Carlo."""

import itertools
import warnings

import numpy as np
import pytest
import torch

from hdgp.explain import (
    SobolResult,
    component_mean,
    component_means,
    component_posterior,
    compute_sobol,
    order_sobol,
    select_terms,
    sobol_matrices,
    term_sobol,
    truncated_mean,
)
from hdgp.exceptions import NumericalWarning
from hdgp.kernels import _compiled as compiled_module
from hdgp.inference.exact import ExactGPModel
from hdgp.kernels.additive_kernel import AdditiveKernel, elementary_symmetric
from hdgp.kernels.feature_stack import FeatureStackKernel
from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel
from hdgp.measures import gaussian_measure


pytestmark = pytest.mark.usefixtures("float64_default")


def gaussian_oak_posterior(n=40, D=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, D, generator=gen)
    y = X[:, 0] ** 2 + X[:, 0] * X[:, 1] + 0.1 * torch.randn(n, generator=gen)
    base = ConstrainedSEKernel(gaussian_measure(np.zeros(D), np.ones(D)))
    base.lengthscale = torch.linspace(0.8, 1.6, D).reshape(D, 1, 1)
    kern = AdditiveKernel(base, num_dims=D, max_order=D)
    kern.order_variances = torch.tensor([0.5, 1.3, 0.4, 0.2][: D + 1])
    model = ExactGPModel(kern, noise_lower_bound=1e-4)
    model.likelihood.noise = 0.05
    model.mean.constant.data.fill_(0.3)
    return model.posterior(X, y), X, base


def all_terms(D, R):
    return [u for r in range(1, R + 1) for u in itertools.combinations(range(D), r)]


def test_components_sum_to_full_posterior_mean():
    post, X, _ = gaussian_oak_posterior()
    Xs = torch.randn(15, 3, generator=torch.Generator().manual_seed(9))
    full = post.predict(Xs, latent=True)[0]
    parts = post.constant + component_mean(post, (), Xs) + sum(component_mean(post, u, Xs) for u in all_terms(3, 3))
    torch.testing.assert_close(parts, full)
    torch.testing.assert_close(truncated_mean(post, all_terms(3, 3), Xs), full)


@pytest.mark.parametrize("block_rows", [None, 4])
def test_component_means_share_base_evaluations_and_equal_component_mean(monkeypatch, block_rows):
    import hdgp.explain as explain_module

    post, X, _ = gaussian_oak_posterior()
    Xs = torch.randn(15, 3, generator=torch.Generator().manual_seed(9))
    terms = [(), *all_terms(3, 3), (2, 0)]
    if block_rows is not None:  # base matrices of 4 test rows at a time: 4 evaluations
        monkeypatch.setattr(explain_module, "_MEANS_BLOCK_BYTES", block_rows * 3 * X.shape[0] * 8)
    calls = []
    base_matrices = post.kernel.base_matrices
    post.kernel.base_matrices = lambda *a, **k: calls.append(1) or base_matrices(*a, **k)
    try:
        means = component_means(post, terms, Xs)
    finally:
        del post.kernel.base_matrices
    assert len(calls) == (1 if block_rows is None else 4)
    for u, mean in zip(terms, means):
        assert torch.equal(mean, component_mean(post, u, Xs))
    assert component_means(post, [], Xs).shape == (0, 15)
    with pytest.raises(ValueError, match="not a component"):
        component_means(post, [(0,), (5,)], Xs)


def test_term_sobol_equals_variance_of_component_mean_monte_carlo():
    post, X, base = gaussian_oak_posterior()
    L = sobol_matrices(post.kernel, X)
    terms, values = term_sobol(post.kernel, L, post.alpha)
    assert sorted(terms) == sorted(all_terms(3, 3))
    xs = base.measure.sample(50_000, torch.Generator().manual_seed(1))
    for u, v in zip(terms, values):
        m = component_mean(post, u, xs)
        assert abs(m.mean()) < 0.01 * m.std() + 1e-3  # orthogonality: zero mean under the measure
        assert v.item() == pytest.approx(m.var().item(), rel=0.03, abs=1e-6)


def _brute_force_term(kernel, L, alpha, u):
    H = torch.outer(alpha, alpha)
    for i in u:
        H = H * L[i]
    return kernel.order_variances.detach()[len(u)] ** 2 * H.sum()


@pytest.fixture(params=[True, False], ids=["compiled", "tensor"])
def sum_path(request, monkeypatch):
    """Run a test on the compiled CPU term sums and on the tensor code other devices run."""
    monkeypatch.setattr(compiled_module, "ENABLED", request.param)


@pytest.mark.usefixtures("sum_path")
@pytest.mark.parametrize("max_terms", [100_000, 20])  # every order, or truncated after order 2
def test_term_sobol_equals_brute_force_hadamard_products(max_terms):
    gen = torch.Generator().manual_seed(3)
    n, D, R = 12, 5, 4
    L = torch.rand(D, n, n, generator=gen)
    L = L + L.transpose(1, 2)
    alpha = torch.randn(n, generator=gen)
    kernel = AdditiveKernel(ConstrainedSEKernel(gaussian_measure(np.zeros(D), np.ones(D))), num_dims=D, max_order=R)
    kernel.order_variances = torch.tensor([1.0, 0.7, 1.9, 0.4, 2.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        terms, values = term_sobol(kernel, L, alpha, max_terms=max_terms)
    depth = R if max_terms > 100 else 2
    assert sorted(terms) == sorted(all_terms(D, depth))
    for u, v in zip(terms, values):
        torch.testing.assert_close(v, _brute_force_term(kernel, L, alpha, u))


def test_compiled_term_sums_pass_over_zero_products_and_keep_nan():
    """The compiled sums walk the entries in blocks and skip a subtree where its running product
    is zero on a block: a feature with a zero Sobol matrix (switched off), one that is zero on only
    some blocks, and a NaN (which must reach every term containing it) over several blocks."""
    gen = torch.Generator().manual_seed(5)
    n, D, R = 70, 6, 4  # 2485 lower-triangle entries: three blocks
    L = torch.rand(D, n, n, generator=gen)
    L = L + L.transpose(1, 2)
    L[1] = 0.0  # switched off
    L[3, :40, :40] = 0.0  # zero on the first blocks only
    L[4, 65, 2] = L[4, 2, 65] = float("nan")
    alpha = torch.randn(n, generator=gen)
    kernel = AdditiveKernel(ConstrainedSEKernel(gaussian_measure(np.zeros(D), np.ones(D))), num_dims=D, max_order=R)
    kernel.order_variances = torch.tensor([1.0, 0.7, 1.9, 0.4, 2.5])
    terms, values = term_sobol(kernel, L, alpha)
    assert sorted(terms) == sorted(all_terms(D, R))
    for u, v in zip(terms, values):
        if 1 in u:  # exactly zero, also beside the NaN (a product with a zero factor; compute_sobol warns)
            assert v == 0, u
        elif 4 in u:
            assert torch.isnan(v), u
        else:
            torch.testing.assert_close(v, _brute_force_term(kernel, L, alpha, u))


@pytest.mark.usefixtures("sum_path")
def test_order_sobol_equals_quadratic_forms_of_elementary_symmetric_polynomials():
    """Both paths (compiled: the lower triangle, off-diagonal entries twice) give alpha' e_r(L) alpha."""
    gen = torch.Generator().manual_seed(4)
    n, D, R = 53, 6, 4  # R < D: the recurrence is cut at R
    L = torch.rand(D, n, n, generator=gen)
    L = L + L.transpose(1, 2)
    alpha = torch.randn(n, generator=gen)
    kernel = AdditiveKernel(ConstrainedSEKernel(gaussian_measure(np.zeros(D), np.ones(D))), num_dims=D, max_order=R)
    kernel.order_variances = torch.tensor([1.0, 0.7, 1.9, 0.4, 2.5])
    e = elementary_symmetric(L, R)
    expected = kernel.order_variances.detach()[1:] ** 2 * torch.stack([alpha @ e[r] @ alpha for r in range(1, R + 1)])
    torch.testing.assert_close(order_sobol(kernel, L, alpha), expected)


def test_order_totals_match_sum_over_terms_and_normalise():
    post, X, _ = gaussian_oak_posterior(D=3)
    L = sobol_matrices(post.kernel, X)
    per_order = order_sobol(post.kernel, L, post.alpha)
    terms, values = term_sobol(post.kernel, L, post.alpha)
    for r in range(1, 4):
        expected = sum(v for u, v in zip(terms, values) if len(u) == r)
        torch.testing.assert_close(per_order[r - 1], expected)
    res = compute_sobol(post.kernel, X, post.alpha)
    assert res.values.sum().item() == pytest.approx(1.0)
    assert (res.values[:-1] >= res.values[1:]).all()
    # y depends on x0 (main effect) and x0·x1: those two terms must dominate
    assert set(res.terms[:2]) == {(0,), (0, 1)}
    assert len(select_terms(res, 0.5)) <= len(select_terms(res, 0.99)) <= len(res.terms)


def test_component_posterior_matches_explicit_conditioning():
    post, X, _ = gaussian_oak_posterior(n=20)
    kern = post.kernel
    Xs = torch.randn(6, 3, generator=torch.Generator().manual_seed(2))
    u = (0, 2)
    s2 = kern.order_variances[2]
    ku = lambda A, B: s2 * kern.base_matrices(A, B)[list(u)].prod(0)
    Ky = kern(X).to_dense() + post.noise * torch.eye(20)
    Ksx = ku(Xs, X)
    resid = post.L @ post.L.T @ post.alpha  # y - c
    mean_ref = Ksx @ torch.linalg.solve(Ky, resid)
    cov_ref = ku(Xs, Xs) - Ksx @ torch.linalg.solve(Ky, Ksx.T)
    mean, cov = component_posterior(post, u, Xs, full_cov=True)
    torch.testing.assert_close(mean, mean_ref)
    torch.testing.assert_close(cov, cov_ref)
    torch.testing.assert_close(component_posterior(post, u, Xs)[1], cov_ref.diagonal())
    with pytest.raises(ValueError, match="not a component"):
        component_posterior(post, (0, 5), Xs)


def test_discrete_features_sobol_vs_enumeration_with_order_variances():
    # binary (weights .3/.7) and 3-level categorical feature; exact enumeration over
    # the 6 level combinations of Var_x[m_u(x)], with order variances != 1.
    gen = torch.Generator().manual_seed(3)
    n = 30
    x_bin = (torch.rand(n, generator=gen) < 0.7).double()
    x_cat = torch.multinomial(torch.tensor([0.2, 0.5, 0.3]), n, replacement=True, generator=gen).double()
    X = torch.stack([x_bin, x_cat], 1)
    y = 1.5 * x_bin - (x_cat == 2).double() + 0.8 * x_bin * (x_cat == 1).double() + 0.1 * torch.randn(n, generator=gen)
    w_bin = torch.tensor([(x_bin == 0).double().mean(), (x_bin == 1).double().mean()])
    w_cat = torch.stack([(x_cat == c).double().mean() for c in range(3)])
    kb = ConstrainedCategoricalKernel(w_bin, rank=0)
    kc = ConstrainedCategoricalKernel(w_cat, rank=1)
    kc.initialize(raw_kappa=torch.tensor([0.3, -0.2, 1.1]))
    base = FeatureStackKernel([kb, kc], [[0], [1]])
    kern = AdditiveKernel(base, num_dims=2, max_order=2)
    kern.order_variances = torch.tensor([0.7, 2.5, 0.4])
    model = ExactGPModel(kern)
    model.likelihood.noise = 0.02
    post = model.posterior(X, y)
    res = compute_sobol(kern, X, post.alpha)
    grid = torch.tensor([[b, c] for b in range(2) for c in range(3)], dtype=torch.float64)
    p = torch.tensor([w_bin[b] * w_cat[c] for b in range(2) for c in range(3)])
    for u, v in zip(res.terms, res.values):
        m = component_mean(post, u, grid)
        var = (p * m**2).sum() - (p * m).sum() ** 2
        torch.testing.assert_close(v * res.total, var)


def test_sparse_component_posterior_matches_brute_force_titsias_posterior():
    # SGPR with Z a strict subset of X: q(u) = N(m, S) from Titsias (2009, eq. 10) written out
    # with plain solves, m = s^-2 K_uu P K_uf r, S = K_uu P K_uu, P = (K_uu + s^-2 K_uf K_fu)^-1;
    # component f_u: mean K_u(x,Z) K_uu^-1 m, covariance
    # k_u(x,x') - K_u(x,Z) K_uu^-1 K_u(Z,x') + K_u(x,Z) K_uu^-1 S K_uu^-1 K_u(Z,x')
    from hdgp.inference import SGPRModel

    exact, X, _ = gaussian_oak_posterior(n=40)
    kern = exact.kernel
    Z = X[::4]
    model = SGPRModel(kern, inducing_points=Z, jitter=1e-10)
    model.likelihood.noise = exact.noise
    model.mean.constant.data.fill_(float(exact.constant))
    r = exact.L @ exact.L.T @ exact.alpha  # y - c
    post = model.posterior(X, r + exact.constant)
    s2n = exact.noise
    Kuu, Kuf = kern(Z).to_dense(), kern(Z, X).to_dense()
    P = torch.linalg.inv(Kuu + Kuf @ Kuf.T / s2n)
    m = Kuu @ P @ Kuf @ r / s2n
    S = Kuu @ P @ Kuu
    Xs = torch.randn(7, 3, generator=torch.Generator().manual_seed(4))
    for u in [(), (1,), (0, 2), (0, 1, 2)]:
        s2 = kern.order_variances[len(u)]
        ku = lambda A, B: s2 * (kern.base_matrices(A, B)[list(u)].prod(0) if u else torch.ones(len(A), len(B)))
        C = ku(Xs, Z)
        mean_ref = C @ torch.linalg.solve(Kuu, m)
        W = torch.linalg.solve(Kuu, C.T)  # K_uu^-1 K_u(Z, X*)
        cov_ref = ku(Xs, Xs) - C @ W + W.T @ S @ W
        mean, cov = component_posterior(post, u, Xs, full_cov=True)
        torch.testing.assert_close(mean, mean_ref, rtol=1e-6, atol=1e-8)
        torch.testing.assert_close(cov, cov_ref, rtol=1e-6, atol=1e-8)
        torch.testing.assert_close(component_posterior(post, u, Xs)[1], cov_ref.diagonal().clamp_min(0),
                                   rtol=1e-6, atol=1e-8)
        torch.testing.assert_close(component_mean(post, u, Xs), mean_ref, rtol=1e-6, atol=1e-8)
    # the component means (constant term included) add up to the predictive mean
    full = post.predict(Xs, latent=True, full_cov=True)
    parts = post.constant + sum(component_mean(post, u, Xs) for u in [()] + all_terms(3, 3))
    torch.testing.assert_close(parts, full[0])


def test_select_terms_takes_the_smallest_prefix_reaching_the_threshold():
    res = SobolResult(terms=[(0,), (1,), (0, 1)], values=torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64),
                      by_order=torch.tensor([0.9, 0.1], dtype=torch.float64), total=2.0)
    assert select_terms(res, 0.5) == [(0,)]
    assert select_terms(res, 0.6) == [(0,)]
    assert select_terms(res, 0.9) == [(0,), (1,)]
    assert select_terms(res, 0.95) == [(0,), (1,), (0, 1)]
    assert select_terms(res, 1.0) == [(0,), (1,), (0, 1)]


def test_non_finite_sobol_integrals_are_reported_not_returned_silently(monkeypatch):
    post, X, base = gaussian_oak_posterior()
    real = base.sobol_integral

    def broken(x1, x2):
        L = real(x1, x2).clone()
        L[1] = float("nan")
        return L

    monkeypatch.setattr(base, "sobol_integral", broken)
    with pytest.warns(NumericalWarning, match=r"feature\(s\) \[1\] are not finite") as caught:
        result = compute_sobol(post.kernel, X, post.alpha)
    assert caught[0].filename == __file__ and torch.isnan(result.by_order).all()
