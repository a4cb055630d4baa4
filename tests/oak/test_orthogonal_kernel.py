"""Constrained SE / categorical kernels: zero mean under the measure, closed forms vs Monte-Carlo."""

import numpy as np
import pytest
import torch

from hdgp.kernels.feature_stack import FeatureStackKernel
from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel
from hdgp.measures import MixtureMeasure, empirical_measure, gaussian_measure, gaussian_mixture_measure


pytestmark = pytest.mark.usefixtures("float64_default")
N_MC = 400_000


def measures():
    rng = np.random.default_rng(0)
    return {
        "gaussian": gaussian_measure([0.3, -1.0], [0.8, 1.5]),
        "mixture": MixtureMeasure([[-1.0, 1.5, 0.0], [0.5, 0.0, 2.0]], [[0.4, 0.7, 1.0], [1.0, 0.3, 0.2]], [[0.3, 0.5, 0.2], [0.6, 0.3, 0.1]]),
        "empirical": empirical_measure([rng.normal(size=40).round(1), rng.exponential(size=25)]),
    }


def make_kernel(measure):
    k = ConstrainedSEKernel(measure)
    k.lengthscale = torch.tensor([0.7, 1.3]).reshape(2, 1, 1)
    return k


def col(x):
    """(n, D) -> feature-stacked (D, n, 1)."""
    return x.T.unsqueeze(-1)


def test_gaussian_matches_paper_eq10():
    mu, delta, ls = 0.3, 0.8, 0.7
    k = make_kernel(gaussian_measure([mu, 0.0], [delta, 1.0]))
    a, b = torch.linspace(-2, 2, 5), torch.linspace(-1, 3, 4)
    x1 = torch.stack([a, a], 1)
    x2 = torch.stack([b, b], 1)
    got = k.forward(col(x1), col(x2))[0]
    se = torch.exp(-((a[:, None] - b[None, :]) ** 2) / (2 * ls**2))
    corr = ls * np.sqrt(ls**2 + 2 * delta**2) / (ls**2 + delta**2) * torch.exp(
        -((a[:, None] - mu) ** 2 + (b[None, :] - mu) ** 2) / (2 * (ls**2 + delta**2))
    )
    torch.testing.assert_close(got, se - corr)


@pytest.mark.parametrize("name", ["gaussian", "mixture", "empirical"])
def test_mean_embedding_and_total_variance_vs_monte_carlo(name):
    measure = measures()[name]
    k = make_kernel(measure)
    gen = torch.Generator().manual_seed(1)
    s, s2 = measure.sample(N_MC, gen), measure.sample(N_MC, gen)
    l2 = k.lengthscale**2
    a = torch.tensor([[-1.0, 0.5], [0.2, 2.0], [1.5, -0.3]])
    se = lambda u, v: torch.exp(-((u - v) ** 2) / (2 * l2.reshape(-1)))
    mc_m = torch.stack([se(s, a[j]).mean(0) for j in range(3)])  # (3, D)
    torch.testing.assert_close(k._mean_embedding(col(a), l2).T, mc_m, atol=4e-3, rtol=0)
    mc_c = se(s, s2).mean(0)
    torch.testing.assert_close(k._total_variance(l2).reshape(-1), mc_c, atol=4e-3, rtol=0)


@pytest.mark.parametrize("name", ["gaussian", "mixture", "empirical"])
def test_constrained_kernel_integrates_to_zero(name):
    measure = measures()[name]
    k = make_kernel(measure)
    a = col(torch.tensor([[-1.0, 0.5], [0.2, 2.0], [1.5, -0.3]]))
    if measure.is_discrete:
        # exact: Σ_j w_j k̃(x_j, a) = 0
        at_loc = measure.locations.T.unsqueeze(-1).transpose(0, 1).reshape(2, -1, 1)
        vals = (measure.weights.unsqueeze(-1) * k.forward(at_loc, a)).sum(1)
        torch.testing.assert_close(vals, torch.zeros_like(vals), atol=1e-12, rtol=0)
        return
    gen = torch.Generator().manual_seed(2)
    s = measure.sample(N_MC, gen)
    vals = k.forward(col(s), a).mean(1)  # (D, 3)
    assert vals.abs().max() < 4e-3
    # the unconstrained kernel does not integrate to zero (the test has teeth)
    se = torch.exp(-((col(s) - a.transpose(-1, -2)) ** 2) / (2 * k.lengthscale**2)).mean(1)
    assert se.abs().max() > 0.1


@pytest.mark.parametrize("name", ["gaussian", "mixture", "empirical"])
def test_prior_samples_have_zero_mean_under_measure(name):
    measure = measures()[name]
    k = make_kernel(measure)
    gen = torch.Generator().manual_seed(3)
    s = col(measure.sample(3000, gen))
    K = k.forward(s, s)
    # Var_f[mean_j f(s_j)] = 1ᵀK̃1/N² → 0 (vs c > 0 for the unconstrained kernel)
    var_mean = K.sum((-1, -2)) / s.shape[1] ** 2
    assert var_mean.abs().max() < 2e-3
    # draw actual prior samples too
    L = torch.linalg.cholesky(K[:, :400, :400] + 1e-8 * torch.eye(400))
    f = L @ torch.randn(2, 400, 200, generator=gen)
    assert f.mean(1).std() < 0.1 * f.std()


@pytest.mark.parametrize("name", ["gaussian", "mixture", "empirical"])
def test_sobol_integral_vs_monte_carlo(name):
    measure = measures()[name]
    k = make_kernel(measure)
    a = col(torch.tensor([[-1.0, 0.5], [0.2, 2.0], [1.5, -0.3]]))
    b = col(torch.tensor([[0.1, -0.5], [2.0, 1.0]]))
    L = k.sobol_integral(a, b)
    assert L.shape == (2, 3, 2)
    gen = torch.Generator().manual_seed(4)
    s = col(measure.sample(N_MC, gen))
    ka, kb = k.forward(s, a), k.forward(s, b)  # (D, N, 3), (D, N, 2)
    mc = ka.transpose(-1, -2) @ kb / N_MC
    torch.testing.assert_close(L, mc, atol=5e-3, rtol=0)
    # symmetric and PSD on a common set
    Laa = k.sobol_integral(a, a)
    torch.testing.assert_close(Laa, Laa.transpose(-1, -2))
    assert torch.linalg.eigvalsh(Laa).min() > -1e-10


def test_gaussian_sobol_matches_paper_appendix_g1():
    # G.1.1–G.1.4 with unit variance (σ⁴ = σ² = 1 so G.1.4's missing square is moot here)
    mu, d2, ls = 0.3, 0.64, 0.7
    l2 = ls**2
    k = make_kernel(gaussian_measure([mu, 0.0], [np.sqrt(d2), 1.0]))
    a, b = 0.9, -0.4
    x1 = col(torch.tensor([[a, 0.0]]))
    x2 = col(torch.tensor([[b, 0.0]]))
    got = k.sobol_integral(x1, x2)[0, 0, 0].item()

    t44 = ls / np.sqrt(2 * d2 + l2) * np.exp(-((a - b) ** 2) / (4 * l2)) * np.exp(-((mu - (a + b) / 2) ** 2) / (2 * d2 + l2))

    def t45(a, b):
        M = 1 / l2 + 1 / (l2 + d2)
        c = (mu / (l2 + d2) + a / l2) / M
        C = a**2 / l2 + mu**2 / (l2 + d2) - c**2 * M
        return (
            ls * np.sqrt(l2 + 2 * d2) * np.exp(-C / 2) / ((l2 + d2) * np.sqrt(d2 * M + 1))
            * np.exp(-((b - mu) ** 2) / (2 * (l2 + d2)))
            * np.exp(-((c - mu) ** 2) / (2 * (d2 + 1 / M)))
        )

    t47 = (
        l2 * (l2 + 2 * d2) * np.sqrt(l2 + d2) / ((l2 + d2) ** 2 * np.sqrt(l2 + 3 * d2))
        * np.exp(-((a - mu) ** 2 + (b - mu) ** 2) / (2 * (l2 + d2)))
    )
    assert got == pytest.approx(t44 - t45(a, b) - t45(b, a) + t47, rel=1e-10)


@pytest.mark.parametrize("name", ["gaussian", "mixture", "empirical"])
def test_lengthscale_gradient_matches_finite_differences(name, float64_default):
    """d/d raw length-scale of a weighted sum of the constrained kernel's entries, against central
    differences (each feature's length-scale moves only its own slice)."""
    k = make_kernel(measures()[name])
    g = torch.Generator().manual_seed(5)
    x, z = col(torch.randn(5, 2, generator=g)), col(torch.randn(4, 2, generator=g))
    weights = torch.randn(2, 5, 4, generator=g)

    def value():
        return (weights * k.forward(x, z)).sum()

    value().backward()
    analytic = k.raw_lengthscale.grad.clone()
    numeric = torch.zeros_like(analytic)
    with torch.no_grad():
        for i in range(analytic.numel()):
            step = torch.zeros_like(analytic).view(-1)
            step[i] = 1e-6
            k.raw_lengthscale += step.view_as(analytic)
            up = value()
            k.raw_lengthscale -= 2 * step.view_as(analytic)
            down = value()
            k.raw_lengthscale += step.view_as(analytic)
            numeric.view(-1)[i] = (up - down) / 2e-6
    assert analytic.abs().min() > 1e-3
    torch.testing.assert_close(analytic, numeric, rtol=1e-6, atol=1e-9)


def test_zero_variance_feature_is_finite():
    k = make_kernel(gaussian_measure([1.0, 0.0], [0.0, 1.0]))
    x = col(torch.tensor([[1.0, 0.2], [1.0, -0.3]]))
    K = k.forward(x, x)
    assert torch.isfinite(K).all()
    torch.testing.assert_close(K[0], torch.zeros(2, 2), atol=1e-14, rtol=0)


def test_gmm_measure_fits_bimodal_data():
    rng = np.random.default_rng(0)
    data = np.concatenate([rng.normal(-3, 0.5, 500), rng.normal(2, 1.0, 500)])
    m = gaussian_mixture_measure([data], n_components=2, random_state=0)
    assert sorted(np.round(m.locations.numpy()[0], 0)) == [-3.0, 2.0]


# ---------------------------------------------------------------- categorical


def cat_kernel(weights, rank=1):
    k = ConstrainedCategoricalKernel(weights, rank=rank)
    k.raw_covar_factor.data = torch.arange(len(weights) * rank, dtype=torch.float64).reshape(len(weights), rank) * 0.3 - 0.4
    k.initialize(raw_kappa=torch.linspace(-1.0, 1.0, len(weights)))
    return k


@pytest.mark.parametrize("weights", [[0.2, 0.5, 0.3], [0.7, 0.3]])
def test_categorical_zero_mean_and_psd(weights):
    k = cat_kernel(weights, rank=1)
    B = k.constrained_matrix()
    w = torch.tensor(weights)
    torch.testing.assert_close(B @ w, torch.zeros(len(weights)), atol=1e-14, rtol=0)
    assert torch.linalg.eigvalsh(B).min() > -1e-12
    codes = torch.arange(len(weights), dtype=torch.float64).reshape(1, -1, 1)
    torch.testing.assert_close(k.forward(codes, codes)[0], B)
    torch.testing.assert_close(k.forward(codes, codes, diag=True)[0], B.diagonal())


@pytest.mark.parametrize("W, kappa, rank", [
    ([[1.835], [-6.115], [5.759]], [9.3e-13, 3.2e-13, 7.9e-14], 1),  # reached by a MAP fit: W nearly orthogonal to w
    ([[0.3, -1.2], [0.8, 0.4], [-0.5, 0.9]], [0.5, 1.5, 0.2], 2),
    (np.zeros((3, 0)), [0.5, 1.5, 0.2], 0),
])
def test_categorical_matrix_matches_60_digit_arithmetic(W, kappa, rank):
    """B = A - (Aw)(Aw)^T / w^T A w (eq. 20) against mpmath at 60 digits: the literal float64 form
    lost 2 of 16 digits per unit of log10(|A| / w^T A w) (relative error 1e-2 in the first case)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    weights = np.array([46, 43, 31]) / 120
    k = ConstrainedCategoricalKernel(weights, rank=rank)
    with torch.no_grad():
        k.raw_covar_factor.copy_(torch.tensor(W, dtype=torch.float64).reshape(3, rank))
        k.raw_kappa.copy_(torch.log(torch.tensor(kappa, dtype=torch.float64)))
    B = k.constrained_matrix().detach().numpy()
    Wm = mp.matrix(3, rank) if rank else None
    for i in range(3):
        for j in range(rank):
            Wm[i, j] = mp.mpf(float(np.asarray(W)[i, j]))
    kap = [mp.mpf(float(c)) for c in torch.exp(k.raw_kappa).tolist()]  # the kappa the kernel holds
    A = (Wm * Wm.T if rank else mp.zeros(3, 3)) + mp.diag(kap)
    w = mp.matrix([mp.mpf(float(v)) for v in k.level_weights.tolist()])
    Aw = A * w
    exact = np.array((A - Aw * Aw.T / (w.T * Aw)[0]).tolist(), dtype=float)
    assert np.abs(B - exact).max() <= 1e-11 * np.abs(exact).max()


def test_categorical_sobol_integral_vs_enumeration():
    weights = [0.2, 0.5, 0.3]
    k = cat_kernel(weights, rank=2)
    B = k.constrained_matrix().detach()
    a = torch.tensor([0.0, 2.0, 1.0, 2.0]).reshape(1, -1, 1)
    L = k.sobol_integral(a, a)[0]
    idx = a.reshape(-1).long()
    expected = sum(weights[c] * torch.outer(B[c, idx], B[c, idx]) for c in range(3))
    torch.testing.assert_close(L, expected)


def test_unknown_level_code_has_a_zero_row_column_and_sobol_integral():
    k = cat_kernel([0.2, 0.5, 0.3], rank=2)
    B = k.constrained_matrix().detach()
    codes = torch.tensor([0.0, -1.0, 2.0, -1.0]).reshape(1, -1, 1)
    K = k.forward(codes, codes).detach()[0]
    known = [0, 2]
    torch.testing.assert_close(K[[0, 2]][:, [0, 2]], B[known][:, known])
    assert torch.all(K[[1, 3]] == 0) and torch.all(K[:, [1, 3]] == 0)
    assert torch.all(k.forward(codes, codes, diag=True).detach()[0, [1, 3]] == 0)
    L = k.sobol_integral(codes, codes).detach()[0]
    assert torch.all(L[[1, 3]] == 0) and torch.all(L[:, [1, 3]] == 0)
    torch.testing.assert_close(L[0, 2], sum(w * B[c, 0] * B[c, 2] for c, w in enumerate([0.2, 0.5, 0.3])))


@pytest.mark.parametrize("bad", [3.0, -2.0, 0.5, float("inf")])  # NaN: a missing level (test_missing.py)
def test_categorical_rejects_bad_codes(bad):
    k = cat_kernel([0.2, 0.5, 0.3])
    x = torch.tensor([0.0, bad]).reshape(1, -1, 1)
    with pytest.raises(ValueError, match="level codes"):
        k.forward(x, x)


def test_feature_stack_reorders_groups():
    gauss = make_kernel(gaussian_measure([0.0, 0.0], [1.0, 1.0]))
    cat = cat_kernel([0.4, 0.6], rank=0)
    stack = FeatureStackKernel([gauss, cat], [[0, 2], [1]])
    x = torch.tensor([[0.1, 1.0, -0.5], [0.7, 0.0, 0.3], [-1.2, 1.0, 0.9]])
    out = stack.forward(col(x), col(x))
    torch.testing.assert_close(out[[0, 2]], gauss.forward(col(x[:, [0, 2]]), col(x[:, [0, 2]])))
    torch.testing.assert_close(out[1], cat.forward(col(x[:, [1]]), col(x[:, [1]]))[0])
    L = stack.sobol_integral(col(x), col(x))
    torch.testing.assert_close(L[1], cat.sobol_integral(col(x[:, [1]]), col(x[:, [1]]))[0])
    with pytest.raises(ValueError, match="partition"):
        FeatureStackKernel([gauss, cat], [[0, 2], [2]])


@pytest.fixture(params=[True, False], ids=["compiled", "tensor"])
def se_backward_path(request, monkeypatch):
    """The SE kernels' backward on both paths: compiled (CPU) and tensor operations (other devices)."""
    import hdgp.kernels._compiled as compiled

    monkeypatch.setattr(compiled, "ENABLED", request.param)
    return request.param


@pytest.mark.parametrize("batch", [(), (2,)])
def test_fused_constrained_se_gradients_match_finite_differences(batch, se_backward_path):
    """The hand-written backward of exp(-(a - b)²/2ℓ²) - u vᵀ (all five inputs, batched)."""
    from hdgp.kernels.se_kernel import se_minus_outer

    g = torch.Generator().manual_seed(1)
    D, n, m = 3, 5, 4
    args = (torch.randn(*batch, D, n, 1, generator=g), torch.randn(*batch, D, m, 1, generator=g),
            torch.rand(D, 1, 1, generator=g) + 0.5, torch.randn(*batch, D, n, generator=g),
            torch.randn(*batch, D, m, generator=g))
    args = tuple(t.requires_grad_() for t in args)
    assert torch.autograd.gradcheck(se_minus_outer, args)


def test_plain_se_kernel_matches_gpytorch_rbf_and_its_gradients(se_backward_path):
    """SEKernel (no outer term) = GPyTorch's RBFKernel(batch_shape=(D,)) in the additive layout."""
    from gpytorch.kernels import RBFKernel

    from hdgp.kernels.se_kernel import SEKernel, se_minus_outer

    g = torch.Generator().manual_seed(3)
    D, n, m = 3, 6, 4
    a = torch.randn(D, n, 1, generator=g, dtype=torch.float64)
    b = torch.randn(D, m, 1, generator=g, dtype=torch.float64)
    ours, ref = SEKernel(D).double(), RBFKernel(batch_shape=torch.Size([D])).double()
    ours.lengthscale = ref.lengthscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64).reshape(D, 1, 1)
    K, K_ref = ours.forward(a, b), ref.forward(a, b)
    torch.testing.assert_close(K, K_ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours.forward(a, a, diag=True), ref.forward(a, a, diag=True))
    G = torch.randn(D, n, m, generator=g, dtype=torch.float64)
    g_ours = torch.autograd.grad((K * G).sum(), ours.raw_lengthscale)[0]
    g_ref = torch.autograd.grad((K_ref * G).sum(), ref.raw_lengthscale)[0]
    # same length-scales, different raw parametrisations: compare d/d(lengthscale)
    chain_ours = torch.autograd.grad(ours.lengthscale.sum(), ours.raw_lengthscale)[0]
    chain_ref = torch.autograd.grad(ref.lengthscale.sum(), ref.raw_lengthscale)[0]
    torch.testing.assert_close(g_ours / chain_ours, g_ref / chain_ref, rtol=1e-9, atol=1e-12)
    args = (a.clone().requires_grad_(), b.clone().requires_grad_(), (ours.lengthscale**2).detach().requires_grad_())
    assert torch.autograd.gradcheck(se_minus_outer, args)


def test_fused_constrained_se_matches_autograd_far_from_origin(se_backward_path):
    """Inputs near 1e6: the backward's expanded sum of squares must not cancel."""
    from hdgp.kernels.se_kernel import se_minus_outer

    g = torch.Generator().manual_seed(2)
    a = torch.randn(2, 6, 1, generator=g) + 1e6
    b = a[:, :4] + 0.3 * torch.randn(2, 4, 1, generator=g)
    l2 = torch.tensor([0.5, 2.0]).reshape(2, 1, 1)
    u, v = torch.randn(2, 6, generator=g), torch.randn(2, 4, generator=g)
    G = torch.randn(2, 6, 4, generator=g)
    inputs = [t.clone().requires_grad_() for t in (a, b, l2, u, v)]
    fused = torch.autograd.grad((se_minus_outer(*inputs) * G).sum(), inputs)
    a_, b_, l2_, u_, v_ = inputs
    plain = torch.exp(-((a_ - b_.transpose(-1, -2)) ** 2) / (2 * l2_)) - u_.unsqueeze(-1) * v_.unsqueeze(-2)
    for x, y in zip(fused, torch.autograd.grad((plain * G).sum(), inputs)):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("outer", [True, False])
def test_se_backward_compiled_and_tensor_paths_agree(monkeypatch, dtype, outer):
    """Batched, broadcast (u, v shared by the batch) and expanded gradient inputs, both precisions."""
    import hdgp.kernels._compiled as compiled
    from hdgp.kernels.se_kernel import se_minus_outer

    g = torch.Generator().manual_seed(4)
    D, n, m = 3, 7, 5
    a, b = torch.randn(2, D, n, 1, generator=g), torch.randn(D, m, 1, generator=g)
    l2 = torch.rand(D, 1, 1, generator=g) + 0.5
    u, v = (torch.randn(D, n, generator=g), torch.randn(D, m, generator=g)) if outer else (None, None)
    G = torch.randn(D, n, m, generator=g).expand(2, D, n, m)  # a broadcast gradient (stride 0)
    results = []
    for enabled in (True, False):
        monkeypatch.setattr(compiled, "ENABLED", enabled)
        inputs = [t.to(dtype).clone().requires_grad_() for t in (a, b, l2, u, v) if t is not None]
        K = se_minus_outer(*inputs[:3], *(inputs[3:] or (None, None)))
        results.append(torch.autograd.grad((K * G.to(dtype)).sum(), inputs))
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for x, y in zip(*results):
        assert x.dtype == dtype and x.shape == y.shape
        torch.testing.assert_close(x, y, **tol)


def test_single_level_categorical_is_the_zero_kernel_and_oak_fits_around_it():
    """A constant categorical column: its only zero-mean function is 0 (B = 0), so OAK ignores it."""
    import pandas as pd

    from hdgp import OAKRegressor

    k = ConstrainedCategoricalKernel([1.0])
    torch.testing.assert_close(k.constrained_matrix().detach(), torch.zeros(1, 1, dtype=torch.float64),
                               atol=1e-15, rtol=0)
    with pytest.raises(ValueError, match="non-negative finite"):
        ConstrainedCategoricalKernel([])
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=40), "k": pd.Categorical(["same"] * 40)})
    y = np.sin(frame["x"].to_numpy())
    est = OAKRegressor(max_order=2, max_iter=20, random_state=0).fit(frame, y)
    assert est.sobol_indices_[("x",)] == pytest.approx(1.0, abs=1e-6)
    assert est.sobol_indices_.get(("k",), 0.0) < 1e-8


def _moments(m):
    w, mu, sd = (t.numpy()[0] for t in (m.weights, m.locations, m.scales))
    mean = (w * mu).sum()
    return mean, (w * (sd**2 + mu**2)).sum() - mean**2


def test_empirical_measure_weights_repeated_values_by_their_counts():
    """The empirical measure is (1/n) sum_j delta_{x_j}: the mean embedding of a column with
    repeated values equals the plain average over its rows (kills counts -> 1)."""
    x = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 2.5, 2.5])
    k = ConstrainedSEKernel(empirical_measure([x])).double()
    k.lengthscale = torch.tensor([[[0.8]]], dtype=torch.float64)
    a = torch.tensor([-0.5, 0.7, 3.0], dtype=torch.float64)
    got = k._mean_embedding(a.reshape(1, -1, 1), k.lengthscale**2)[0]
    want = torch.exp(-((torch.as_tensor(x)[:, None] - a) ** 2) / (2 * 0.8**2)).mean(0)
    torch.testing.assert_close(got, want, atol=1e-14, rtol=0)


def test_gmm_measure_matches_the_data_mean_and_variance():
    """At an EM fixed point a diagonal Gaussian mixture reproduces the sample mean and variance
    (up to sklearn's reg_covar and tolerance): catches scales stored as variances and dropped
    mixture weights."""
    rng = np.random.default_rng(1)
    data = np.concatenate([rng.normal(-3, 0.5, 300), rng.normal(2, 1.5, 700)])
    m = gaussian_mixture_measure([data], n_components=2, random_state=0)
    mean, var = _moments(m)
    assert mean == pytest.approx(data.mean(), abs=1e-3)
    assert var == pytest.approx(data.var(), rel=1e-3)


def test_gmm_measure_of_a_two_valued_feature_keeps_both_values():
    """Components are capped by the number of distinct values, not one below it: a 0/1 feature
    gets two near-point masses at 0 and 1 with the observed frequencies."""
    data = np.array([0.0] * 30 + [1.0] * 10)
    m = gaussian_mixture_measure([data], n_components=3, random_state=0)
    w = m.weights.numpy()[0]
    used = w > 0
    order = np.argsort(m.locations.numpy()[0][used])
    np.testing.assert_allclose(m.locations.numpy()[0][used][order], [0.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(w[used][order], [0.75, 0.25], atol=1e-6)
    assert m.scales.numpy()[0][used].max() < 1e-2


@pytest.mark.parametrize("n_components", [2.0, True, 0])
def test_gmm_measure_refuses_a_component_count_that_is_not_a_positive_integer(n_components):
    with pytest.raises(ValueError, match="n_components must be a positive integer"):
        gaussian_mixture_measure([np.random.default_rng(0).normal(size=50)], n_components=n_components)


@pytest.mark.parametrize("name", ["gaussian", "gmm"])
def test_a_feature_switched_off_by_a_huge_lengthscale_has_finite_zero_sobol_integrals(name):
    """A fit can drive an irrelevant feature's length-scale to 1e138 (sparse OAK on pumadyn32nm):
    the constrained kernel and its Sobol integral tend to 0, and must not overflow to NaN on the way."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 40, 1))
    if name == "gaussian":
        measure = gaussian_measure(np.array([0.1]), np.array([1.2]))
    else:
        measure = gaussian_mixture_measure([rng.normal(size=200)], 2, random_state=0)
    k = ConstrainedSEKernel(measure)
    x = torch.as_tensor(x)
    for ls in (1e3, 1e138):
        k.lengthscale = ls
        L = k.sobol_integral(x, x).detach()
        K = k.forward(x, x).detach()
        assert torch.isfinite(L).all() and torch.isfinite(K).all()
        assert L.abs().max() < (1e-5 if ls == 1e3 else 1e-12) and K.abs().max() < (1e-5 if ls == 1e3 else 1e-12)


def test_equal_length_scale_overlap_is_the_general_gaussian_overlap():
    """The Sobol integrals' (D, n, m) term: the two-buffer closed form for p = q = ℓ² equals the general one."""
    from hdgp.kernels.orthogonal_kernel import _gauss_overlap, _se_overlap_matrix

    g = torch.Generator().manual_seed(5)
    x1 = torch.randn(3, 6, 1, generator=g, dtype=torch.float64)
    x2 = torch.randn(3, 4, 1, generator=g, dtype=torch.float64)
    l2 = torch.rand(3, 1, 1, generator=g, dtype=torch.float64) + 0.2
    mu, var = torch.randn(3, 1, 1, generator=g, dtype=torch.float64), torch.tensor([0.0, 0.5, 3.0]).reshape(3, 1, 1)
    torch.testing.assert_close(_se_overlap_matrix(mu, var.double(), x1, x2, l2),
                               _gauss_overlap(mu, var.double(), x1, l2, x2.transpose(-1, -2), l2), rtol=1e-13, atol=0)


@pytest.mark.parametrize("missing", [False, True])
def test_lower_row_blocks_equal_per_block_calls_with_their_gradients(missing):
    """The lower triangle's row blocks with shared per-point terms: the values and length-scale gradients
    of one forward call per block (missing cells included)."""
    gen = torch.Generator().manual_seed(3)
    measure = gaussian_mixture_measure([np.random.default_rng(0).normal(size=50)] * 3, 2, random_state=0)
    kernel = ConstrainedSEKernel(measure)
    kernel.lengthscale = torch.tensor([0.5, 1.3, 2.0])
    x = torch.randn(3, 23, 1, generator=gen)
    if missing:
        x[0, 4, 0] = x[2, 17, 0] = float("nan")
    bounds = [(0, 5), (5, 6), (6, 17), (17, 23)]
    weights = [torch.randn(3, r1 - r0, r1, generator=gen) for r0, r1 in bounds]
    shared = kernel.lower_row_blocks(x, bounds)
    g_shared = torch.autograd.grad(sum((b * w).sum() for b, w in zip(shared, weights)), kernel.raw_lengthscale)[0]
    single = [kernel.forward(x[:, r0:r1], x[:, :r1]) for r0, r1 in bounds]
    g_single = torch.autograd.grad(sum((b * w).sum() for b, w in zip(single, weights)), kernel.raw_lengthscale)[0]
    for a, b in zip(shared, single):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
    assert torch.isfinite(g_shared).all()
    torch.testing.assert_close(g_shared, g_single, rtol=1e-12, atol=1e-12)


def _brute_force_oak(x, lengthscale, mu, sd, variances):
    """Σ_r σ_r² Σ_{|u|=r} Π_{i∈u} k̃_i on (n, D) inputs, from the closed form of the constrained SE kernel
    under N(μ, δ²) written out with plain tensor operations (DESIGN.md, OAK eq. 10)."""
    import itertools

    l2, d2 = lengthscale**2, sd**2
    diff = x[:, None, :] - x[None, :, :]
    outer = torch.exp(-((x[:, None, :] - mu) ** 2 + (x[None, :, :] - mu) ** 2) / (2 * (l2 + d2)))
    k = torch.exp(-diff**2 / (2 * l2)) - lengthscale * torch.sqrt(l2 + 2 * d2) / (l2 + d2) * outer  # (n, n, D)
    out = variances[0] * torch.ones_like(k[..., 0])
    for r in range(1, variances.numel()):
        for u in itertools.combinations(range(x.shape[1]), r):
            out = out + variances[r] * torch.prod(k[..., list(u)], dim=-1)
    return out


@pytest.mark.parametrize("max_order", [1, 2, 4])
def test_oak_kernel_of_x_matches_autograd_of_the_closed_form(max_order):
    """k(X, X) of the OAK kernel (the row-block sum that keeps no base matrix, n above the lower-triangle
    threshold): values and gradients of the length-scales and order variances equal autograd through
    the closed form and the explicit subset sums."""
    from hdgp.kernels.orthogonal_kernel import OrthogonalAdditiveKernel

    gen = torch.Generator().manual_seed(max_order)
    mu, sd = torch.tensor([0.3, -0.5, 0.0, 1.0]), torch.tensor([0.8, 1.5, 1.0, 0.6])
    kernel = OrthogonalAdditiveKernel(ConstrainedSEKernel(gaussian_measure(mu, sd)), num_dims=4, max_order=max_order)
    kernel.base_kernel.lengthscale = torch.tensor([0.7, 1.3, 0.4, 2.5])
    kernel.order_variances = torch.rand(max_order + 1, generator=gen) + 0.2
    x = torch.randn(150, 4, generator=gen)
    weight = torch.randn(150, 150, generator=gen)
    fast = kernel.forward(x, x)
    params = (kernel.base_kernel.raw_lengthscale, kernel.raw_order_variances)
    g_fast = torch.autograd.grad((fast * weight).sum(), params)
    ref = _brute_force_oak(x, kernel.base_kernel.lengthscale.reshape(-1), mu, sd, kernel.order_variances)
    g_ref = torch.autograd.grad((ref * weight).sum(), params)
    torch.testing.assert_close(fast, ref, rtol=1e-11, atol=1e-11)
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("missing", [False, True])
def test_oak_kernel_of_x_without_kept_blocks_equals_the_block_graph(monkeypatch, missing):
    """The row-block sum that keeps no base matrix against the base blocks summed by
    symmetric_additive_sum (the path for inputs with a gradient): values, gradients, missing cells."""
    from hdgp.kernels.orthogonal_kernel import OrthogonalAdditiveKernel

    gen = torch.Generator().manual_seed(5)
    measure = gaussian_mixture_measure([np.random.default_rng(1).normal(size=80)] * 3, 2, random_state=0)
    kernel = OrthogonalAdditiveKernel(ConstrainedSEKernel(measure), num_dims=3, max_order=3)
    kernel.base_kernel.lengthscale = torch.tensor([0.5, 1.1, 3.0])
    x = torch.randn(300, 3, generator=gen)
    if missing:
        x[torch.rand(300, 3, generator=gen) < 0.1] = float("nan")
    weight = torch.randn(300, 300, generator=gen)
    params = (kernel.base_kernel.raw_lengthscale, kernel.raw_order_variances)
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(ConstrainedSEKernel, "lower_additive_sum", None)
        out = kernel.forward(x, x)
        results.append((out.detach(), *torch.autograd.grad((out * weight).sum(), params)))
    for a, b in zip(*results):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    monkeypatch.undo()
    again = kernel.forward(x, x)
    again_grads = torch.autograd.grad((again * weight).sum(), params)
    for a, b in zip((again.detach(), *again_grads), results[0]):  # deterministic
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_oak_kernel_of_x_gradient_matches_finite_differences():
    """The gradient of a scalar of k(X, X) (the row-block sum that keeps no base matrix, with a missing
    cell) in the raw length-scales and order variances against central differences."""
    from hdgp.kernels.orthogonal_kernel import OrthogonalAdditiveKernel

    gen = torch.Generator().manual_seed(11)
    kernel = OrthogonalAdditiveKernel(ConstrainedSEKernel(gaussian_measure([0.0, 0.5, -0.2], [1.0, 0.7, 1.4])),
                                      num_dims=3, max_order=2)
    x = torch.randn(140, 3, generator=gen)
    x[7, 2] = float("nan")
    weight = torch.randn(140, 140, generator=gen)
    params = [kernel.base_kernel.raw_lengthscale, kernel.raw_order_variances]
    grads = torch.autograd.grad((kernel.forward(x, x) * weight).sum(), params)
    step = 1e-6
    for p, g in zip(params, grads):
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += step
                up = (kernel.forward(x, x) * weight).sum()
                p.view(-1)[i] -= 2 * step
                down = (kernel.forward(x, x) * weight).sum()
                p.view(-1)[i] += step
            fd = (up - down) / (2 * step)
            assert abs(fd - g.view(-1)[i]) <= 1e-6 * max(1.0, abs(fd)), (i, float(fd), float(g.view(-1)[i]))
