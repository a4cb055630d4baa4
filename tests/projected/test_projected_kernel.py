"""Projected-additive kernel: limits of Sec. 4.1, GAM identity, fused path vs brute force."""

import math

import gpytorch
import pytest
import torch

from hdgp.kernels.projected_kernel import ProjectedAdditiveKernel, _ProjectedRBFSum
from hdgp.projections import diverse_directions, random_directions

DT = torch.float64


def _pairs(d, n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    X1 = torch.randn(n, d, generator=g, dtype=DT) * 0.7
    X2 = torch.randn(n, d, generator=g, dtype=DT) * 0.7
    r2 = ((X1[:, None, :] - X2[None, :, :]) ** 2).sum(-1)
    return X1, X2, r2


def _normalised_mc_errors(k_limit, var_phi, base_kernel, J, n_seeds=40, d=4):
    """(average kernel - limit) / sqrt(var/J): should be ~N(0, 1) by the CLT behind Prop. 2."""
    X1, X2, r2 = _pairs(d)
    z = []
    for s in range(n_seeds):
        k = ProjectedAdditiveKernel(random_directions(d, (1,) * J, random_state=s), ard=True, base_kernel=base_kernel)
        k.input_lengthscale = torch.ones(d, dtype=DT)
        with torch.no_grad():
            K = k(X1, X2).to_dense()
        z.append((K - k_limit(r2)) / torch.sqrt(var_phi(r2) / J))
    return torch.stack(z)


@pytest.mark.parametrize("J", [10, 1000])
def test_corollary1_rbf_average_tends_to_imq_at_rate_sqrt_J(J):
    # phi(x) = exp(-x^2/2), eta ~ N(0, I):  E phi = (1 + r^2)^(-1/2)      (eq. 5)
    # var phi = E exp(-eta^2 r^2) - (E phi)^2 = (1 + 2 r^2)^(-1/2) - (1 + r^2)^(-1)
    z = _normalised_mc_errors(
        lambda r2: (1 + r2) ** -0.5, lambda r2: (1 + 2 * r2) ** -0.5 - 1 / (1 + r2), None, J
    )
    # standardised errors have unit second moment at every J: the error is O(J^(-1/2))
    assert 0.75 < z.pow(2).mean().sqrt().item() < 1.25
    assert abs(z.mean().item()) < 0.2


def test_corollary2_cosine_average_tends_to_rbf():
    # phi(x) = cos x, eta ~ N(0, I):  E phi = exp(-r^2/2)                   (eq. 6)
    # var phi = (1 + exp(-2 r^2)) / 2 - exp(-r^2)
    cos = gpytorch.kernels.CosineKernel()
    cos.period_length = math.pi  # gpytorch: cos(pi |x - x'| / p)
    cos.raw_period_length.requires_grad_(False)
    z = _normalised_mc_errors(
        lambda r2: torch.exp(-r2 / 2), lambda r2: (1 + torch.exp(-2 * r2)) / 2 - torch.exp(-r2), cos, 100,
        n_seeds=25,
    )
    assert 0.75 < z.pow(2).mean().sqrt().item() < 1.25
    assert abs(z.mean().item()) < 0.2


def test_J_equal_d_orthonormal_is_a_gam_on_rotated_inputs():
    d = 5
    P = diverse_directions(d, d, random_state=2)
    k = ProjectedAdditiveKernel(P, ard=False)
    lam = torch.linspace(0.5, 2.0, d, dtype=DT)
    k.projection_lengthscale = lam
    k.initialize(raw_weights=torch.linspace(-1, 1, d, dtype=DT))
    X1, X2, _ = _pairs(d, n=9)
    gam = gpytorch.kernels.AdditiveKernel(
        *[gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(active_dims=[j])) for j in range(d)]
    ).to(DT)
    for j, sk in enumerate(gam.kernels):
        sk.outputscale = k.weights[j].detach()
        sk.base_kernel.lengthscale = lam[j]
    expected = gam(X1 @ P.T, X2 @ P.T).to_dense()
    assert torch.allclose(k(X1, X2).to_dense(), expected, atol=1e-12)


def _brute_force(k, X1, X2):
    z1, z2 = k.project(X1), k.project(X2)
    terms = [torch.exp(-0.5 * ((z1[:, None, sl] - z2[None, :, sl]) ** 2).sum(-1)) for sl in k._slices]
    return (torch.stack(terms) * k.weights[:, None, None]).sum(0)


@pytest.mark.parametrize("ard, degrees", [(True, (1, 1, 2, 3)), (False, (1, 1, 2, 3)), (False, (1, 5, 6))])
def test_fused_kernel_matches_brute_force_values_and_gradients(ard, degrees):
    d = 4  # degrees 5 and 6 > d: the RPA-GP-3 sub-kernels of the paper's 4-feature sets
    k = ProjectedAdditiveKernel(random_directions(d, degrees, random_state=0), degrees, ard=ard)
    for p in k.parameters():
        p.data.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(1))
    X1, X2, _ = _pairs(d, n=7)
    G = torch.randn(7, 7, dtype=DT)
    for A, B in ((X1, X2), (X1, X1)):
        fast = k(A, B).to_dense()
        slow = _brute_force(k, A, B)
        assert torch.allclose(fast, slow, atol=1e-13)
        g_fast = torch.autograd.grad((fast * G).sum(), list(k.parameters()))
        g_slow = torch.autograd.grad((slow * G).sum(), list(k.parameters()))
        for a, b in zip(g_fast, g_slow):
            assert torch.allclose(a, b, atol=1e-12)
    assert torch.allclose(k(X1, X2, diag=True), torch.diagonal(_brute_force(k, X1, X2)), atol=1e-13)


def test_fused_function_gradcheck():
    g = torch.Generator().manual_seed(0)
    Z1 = torch.randn(6, 4, generator=g, dtype=DT, requires_grad=True)
    Z2 = torch.randn(5, 4, generator=g, dtype=DT, requires_grad=True)
    w = torch.rand(3, generator=g, dtype=DT, requires_grad=True)
    sl = (slice(0, 1), slice(1, 3), slice(3, 4))
    assert torch.autograd.gradcheck(lambda a, b, c: _ProjectedRBFSum.apply(a, b, c, sl), (Z1, Z2, w))
    assert torch.autograd.gradcheck(lambda a, c: _ProjectedRBFSum.apply(a, a, c, sl), (Z1, w))


def test_custom_sub_kernel_path_matches_fused_rbf():
    d, J = 3, 6
    P = diverse_directions(d, J, random_state=0)
    fused = ProjectedAdditiveKernel(P, ard=True)
    rbf = gpytorch.kernels.RBFKernel().to(DT)
    rbf.lengthscale = 1.0
    rbf.raw_lengthscale.requires_grad_(False)
    generic = ProjectedAdditiveKernel(P, ard=True, base_kernel=rbf)
    for k in (fused, generic):
        k.input_lengthscale = torch.tensor([0.5, 1.0, 2.0], dtype=DT)
    X1, X2, _ = _pairs(d, n=8)
    Kf, Kg = fused(X1, X2).to_dense(), generic(X1, X2).to_dense()
    assert torch.allclose(Kf, Kg, atol=1e-12)
    (gf,) = torch.autograd.grad(Kf.sum(), [fused.raw_input_lengthscale])
    (gg,) = torch.autograd.grad(Kg.sum(), [generic.raw_input_lengthscale])
    assert torch.allclose(gf, gg, atol=1e-12)


@pytest.mark.parametrize("J", [2, 40])
def test_memory_saved_for_backward_does_not_grow_with_J(J):
    n, d = 150, 6
    k = ProjectedAdditiveKernel(random_directions(d, (1,) * J, random_state=0), ard=False)
    X = torch.randn(n, d, dtype=DT)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        K = k(X, X).to_dense()
    assert K.shape == (n, n)
    assert sum(saved) < n * n  # only n x J projections and parameters are kept, never J x n x n


def test_bad_inputs():
    with pytest.raises(ValueError, match="features"):
        ProjectedAdditiveKernel(torch.ones(2, 3, dtype=DT))(torch.ones(4, 2, dtype=DT)).to_dense()
    with pytest.raises(ValueError, match="degrees"):
        ProjectedAdditiveKernel(torch.ones(3, 3, dtype=DT), degrees=(1, 1))


def test_fused_function_blocked_upper_triangle_matches_dense(monkeypatch):
    """Several row blocks (and a ragged last one): the triangle-only symmetric pass equals dense autograd."""
    import hdgp.kernels.projected_kernel as pk

    monkeypatch.setattr(pk, "_CPU_BLOCK_ENTRIES", 4 * 3 * 11 * 2)  # 4 rows of J = 3 terms, 11 columns, degree <= 2
    g = torch.Generator().manual_seed(1)
    Z = torch.randn(11, 4, generator=g, dtype=DT, requires_grad=True)
    w = torch.rand(3, generator=g, dtype=DT, requires_grad=True)
    G = torch.randn(11, 11, generator=g, dtype=DT)
    sl = (slice(0, 1), slice(1, 3), slice(3, 4))
    dense = sum(w[j] * torch.exp(-0.5 * torch.cdist(Z[:, s], Z[:, s]) ** 2) for j, s in enumerate(sl))
    fused = _ProjectedRBFSum.apply(Z, Z, w, sl)
    assert torch.allclose(fused, dense, atol=1e-13)
    for a, b in zip(torch.autograd.grad((fused * G).sum(), (Z, w)), torch.autograd.grad((dense * G).sum(), (Z, w))):
        assert torch.allclose(a, b, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, c: _ProjectedRBFSum.apply(a, a, c, sl), (Z, w))
    Z2 = torch.randn(7, 4, generator=g, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, c: _ProjectedRBFSum.apply(a, b, c, sl), (Z, Z2, w))


@pytest.mark.parametrize("ard", [True, False])
def test_float32_inputs_with_float64_directions(ard):
    """The kernel works in the inputs' dtype (``diverse_directions`` returns float64; it used to
    fail with a dtype mismatch under ARD, and silently return float64 without)."""
    k = ProjectedAdditiveKernel(diverse_directions(3, 5, random_state=0), ard=ard)
    X = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    K32 = k(X).to_dense()
    assert K32.dtype == torch.float32
    torch.testing.assert_close(K32.double(), k(X.double()).to_dense(), rtol=0, atol=1e-6)
    K32.sum().backward()
    raw = k.raw_input_lengthscale if ard else k.raw_projection_lengthscale
    assert raw.grad is not None and raw.grad.dtype == torch.float64 and torch.isfinite(raw.grad).all()


def _dense_rbf_sum(Z1, Z2, w, slices):
    """Reference: Σ_j w_j exp(-½‖z1_j - z2_j‖²) from explicit pairwise differences (plain autograd)."""
    return sum(w[j] * torch.exp(-0.5 * ((Z1[..., :, None, s] - Z2[..., None, :, s]) ** 2).sum(-1))
               for j, s in enumerate(slices))


@pytest.mark.parametrize(
    "batch1, batch2, n1, n2, degrees",
    [
        ((), (), 13, 13, (1, 1, 1, 1)),  # symmetric (same tensor) and plain cross case
        ((), (), 9, 17, (1, 2, 3)),  # mixed degrees, zero-padded
        ((2,), (2,), 11, 5, (2, 1)),  # batched
        ((2, 1), (3,), 7, 6, (1, 3)),  # broadcast batch shapes
    ],
)
@pytest.mark.parametrize("same", [True, False])
def test_fused_sum_matches_dense_autograd_across_shapes_and_blocks(monkeypatch, batch1, batch2, n1, n2, degrees,
                                                                   same):
    """Values and all three gradients against plain autograd, with blocks of 3 rows (ragged)."""
    import hdgp.kernels.projected_kernel as pk

    monkeypatch.setattr(pk, "_MIN_BLOCK_ROWS", 3)
    monkeypatch.setattr(pk, "_CPU_BLOCK_ENTRIES", 1)
    g = torch.Generator().manual_seed(n1 * 31 + n2)
    width = sum(degrees)
    ends = torch.tensor(degrees).cumsum(0).tolist()
    slices = tuple(slice(e - D, e) for e, D in zip(ends, degrees))
    Z1 = torch.randn(batch1 + (n1, width), generator=g, dtype=DT, requires_grad=True)
    Z2 = Z1 if same else torch.randn(batch2 + (n2, width), generator=g, dtype=DT, requires_grad=True)
    w = torch.rand(len(degrees), generator=g, dtype=DT, requires_grad=True)
    fused = _ProjectedRBFSum.apply(Z1, Z2, w, slices)
    dense = _dense_rbf_sum(Z1, Z2, w, slices)
    torch.testing.assert_close(fused, dense, rtol=0, atol=1e-14)
    G = torch.randn(dense.shape, generator=g, dtype=DT)
    inputs = (Z1, w) if same else (Z1, Z2, w)
    for a, b in zip(torch.autograd.grad((fused * G).sum(), inputs), torch.autograd.grad((dense * G).sum(), inputs)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("wrt", ["Z2", "Z1 Z2", "w"])
def test_fused_sum_interleaved_degrees_far_inputs_and_partial_gradients(monkeypatch, wrt):
    """Degrees out of order (2, 1, 3, 1), single rows, inputs 1e8 from the origin (the D > 1
    expansion is centred), and gradients for only some of the inputs: still plain autograd's."""
    import hdgp.kernels.projected_kernel as pk

    monkeypatch.setattr(pk, "_MIN_BLOCK_ROWS", 2)
    monkeypatch.setattr(pk, "_CPU_BLOCK_ENTRIES", 1)
    degrees = (2, 1, 3, 1)
    ends = torch.tensor(degrees).cumsum(0).tolist()
    slices = tuple(slice(e - D, e) for e, D in zip(ends, degrees))
    g = torch.Generator().manual_seed(7)
    for n1, n2, offset in ((9, 6, 1e8), (1, 5, 0.0), (1, 1, 0.0)):
        # u = z √½ rounds at ulp(1e8) ~ 1.5e-8: far from the origin only that much is exact
        atol = 1e-6 if offset else 1e-12
        Z1 = (torch.randn(n1, 7, generator=g, dtype=DT) + offset).requires_grad_("Z1" in wrt)
        Z2 = (torch.randn(n2, 7, generator=g, dtype=DT) + offset).requires_grad_("Z2" in wrt)
        w = torch.rand(4, generator=g, dtype=DT).requires_grad_(wrt == "w")
        fused = _ProjectedRBFSum.apply(Z1, Z2, w, slices)
        dense = _dense_rbf_sum(Z1, Z2, w, slices)
        torch.testing.assert_close(fused, dense, rtol=0, atol=atol / 10)
        G = torch.randn(dense.shape, generator=g, dtype=DT)
        inputs = [t for t in (Z1, Z2, w) if t.requires_grad]
        for a, b in zip(torch.autograd.grad((fused * G).sum(), inputs), torch.autograd.grad((dense * G).sum(), inputs)):
            torch.testing.assert_close(a, b, rtol=0, atol=atol)


def test_far_apart_points_give_the_underflowed_terms_to_rounding():
    """Length-scales short against the distances put most exponents below -708 (subnormal or zero
    terms, which the kernel clamps before the exponential): the clamped terms stay below 1e-306,
    every other entry keeps its value to rounding, and the gradients match the brute-force sum."""
    d = 3
    k = ProjectedAdditiveKernel(random_directions(d, (1,) * 6, random_state=2), (1,) * 6, ard=True)
    k.input_lengthscale = torch.full((d,), 0.005, dtype=DT)
    X = torch.randn(30, d, dtype=DT, generator=torch.Generator().manual_seed(3))
    X = torch.cat([X, X[:5] + 0.002])  # a few near pairs: terms of order 1
    fast, slow = k(X, X).to_dense(), _brute_force(k, X, X)
    under = slow == 0
    assert under.float().mean() > 0.3 and slow.max() > 0.1  # mostly underflowed, some large
    assert fast[under].max() < 1e-306
    kept = slow > 1e-290
    assert torch.allclose(fast[kept], slow[kept], rtol=1e-10, atol=1e-13)
    G = torch.randn(*fast.shape, dtype=DT, generator=torch.Generator().manual_seed(4))
    g_fast = torch.autograd.grad((fast * G).sum(), k.raw_input_lengthscale)[0]
    g_slow = torch.autograd.grad((slow * G).sum(), k.raw_input_lengthscale)[0]
    assert torch.allclose(g_fast, g_slow, rtol=1e-10, atol=1e-12)
