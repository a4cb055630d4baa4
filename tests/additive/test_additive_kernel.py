"""AdditiveKernel: recurrence vs brute-force subset sums, gradients, limits."""

import itertools
import math

import pytest
import torch
from gpytorch.kernels import RBFKernel

import hdgp.kernels._compiled as compiled_module
from hdgp.exceptions import CostWarning
from hdgp.kernels import SEKernel
from hdgp.kernels.additive_kernel import (_SYMMETRIC_MIN_N, AdditiveKernel, additive_sum, elementary_symmetric,
                                         symmetric_additive_sum)


pytestmark = pytest.mark.usefixtures("float64_default")


@pytest.fixture(autouse=True, params=[True, False], ids=["compiled", "tensor"])
def sum_path(request, monkeypatch):
    """Every test on both implementations of the sums: compiled (CPU) and tensor tiles (other devices)."""
    monkeypatch.setattr(compiled_module, "ENABLED", request.param)
    return request.param


def brute_force_sum(base, variances):
    """Σ_r σ_r² Σ_{|u|=r} Π_{i∈u} k_i by explicit enumeration of the subsets."""
    out = variances[0] * torch.ones_like(base[0])
    for r in range(1, variances.numel()):
        for u in itertools.combinations(range(base.shape[0]), r):
            out = out + variances[r] * torch.prod(base[list(u)], dim=0)
    return out


@pytest.mark.parametrize("n_dims", [1, 2, 3, 4, 5, 6])
def test_matches_brute_force_all_orders(n_dims):
    gen = torch.Generator().manual_seed(n_dims)
    # arbitrary real values, including negative and > 1, as constrained kernels produce
    base = 2.0 * torch.randn(n_dims, 7, 5, generator=gen)
    for max_order in range(0, n_dims + 1):
        variances = torch.rand(max_order + 1, generator=gen) + 0.1
        fast = additive_sum(base, variances)
        torch.testing.assert_close(fast, brute_force_sum(base, variances), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", [(5,), (5, 1), (5, 7, 6), (5, 2, 3, 4), (5, 0, 3)])
def test_compiled_and_tensor_sums_agree(monkeypatch, dtype, shape):
    gen = torch.Generator().manual_seed(len(shape))
    base = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    variances = (torch.rand(4, generator=gen, dtype=torch.float64) + 0.1).to(dtype)
    weight = torch.randn(shape[1:], generator=gen, dtype=torch.float64).to(dtype)
    results = []
    for compiled in (True, False):
        monkeypatch.setattr(compiled_module, "ENABLED", compiled)
        b, v = base.clone().requires_grad_(True), variances.clone().requires_grad_(True)
        out = additive_sum(b, v)
        (out * weight).sum().backward()
        results.append((out.detach(), b.grad, v.grad))
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-13, "atol": 1e-13}
    for a, b in zip(*results):
        assert a.dtype == dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, **tol)


def test_order_zero_only_is_the_constant_and_empty_variances_are_refused():
    base = torch.rand(3, 5, 5).requires_grad_(True)
    variances = torch.tensor([0.7]).requires_grad_(True)
    for total in (additive_sum, symmetric_additive_sum):
        out = total(base, variances)
        torch.testing.assert_close(out, torch.full((5, 5), 0.7))
        out.sum().backward()
        assert base.grad is None and variances.grad.item() == pytest.approx(25.0)
        variances.grad = None
        with pytest.raises(ValueError, match=r"order_variances must have shape \(R \+ 1,\)"):
            total(base, torch.empty(0))
    assert additive_sum(torch.rand(2), torch.tensor([0.5])).shape == ()


def test_float32_variance_gradient_keeps_its_digits_over_many_entries():
    """Each entry's share of ∂L/∂σ² summed in float64: a float32 running total of 10^6 terms drifts."""
    gen = torch.Generator().manual_seed(8)
    base = 0.9 + 0.1 * torch.rand(4, 1000, 1000, generator=gen, dtype=torch.float64)
    grads = []
    for dtype in (torch.float64, torch.float32):
        variances = torch.tensor([0.1, 0.4, 0.3, 0.2, 0.1], dtype=dtype, requires_grad=True)
        additive_sum(base.to(dtype), variances).sum().backward()
        grads.append(variances.grad.double())
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-6, atol=0)


def test_elementary_symmetric_no_cancellation_near_one():
    # kernel values near 1 and large order: Newton–Girard loses digits here, the
    # recurrence must stay exact (compare against exact binomial values).
    n_dims = 20
    base = torch.full((n_dims, 1), 1.0 - 1e-9)
    e = elementary_symmetric(base, n_dims)
    expected = torch.tensor([math.comb(n_dims, r) * (1 - 1e-9) ** r for r in range(n_dims + 1)])
    torch.testing.assert_close(e[:, 0], expected, rtol=1e-13, atol=0)


@pytest.mark.parametrize("chunk", [3, None])
def test_gradcheck(chunk):
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(4, 3, 5, generator=gen).requires_grad_(True)
    variances = (torch.rand(4, generator=gen) + 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda b, v: additive_sum(b, v, chunk), (base, variances))


def test_gradient_matches_autograd_of_brute_force():
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(5, 6, 6, generator=gen, requires_grad=True)
    variances = torch.rand(4, generator=gen, requires_grad=True)
    weight = torch.randn(6, 6, generator=gen)
    g_fast = torch.autograd.grad((additive_sum(base, variances, chunk=7) * weight).sum(), (base, variances))
    g_ref = torch.autograd.grad((brute_force_sum(base, variances) * weight).sum(), (base, variances))
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n, chunk", [(1, 4), (9, 1), (9, 20), (40, 300), (40, None)])
def test_lower_triangle_sum_equals_the_full_sum_with_its_gradients(n, chunk):
    # chunk 1: one row per block; 20 and 300: blocks of several rows, the first square
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(4, n, generator=gen)
    base = torch.exp(-0.5 * (x[:, :, None] - x[:, None, :]) ** 2) - 0.3  # symmetric, of either sign
    variances = torch.rand(4, generator=gen) + 0.1
    weight = torch.randn(n, n, generator=gen)  # not symmetric: both triangles' weights must arrive
    full_b, full_v = base.clone().requires_grad_(True), variances.clone().requires_grad_(True)
    tri_b, tri_v = base.clone().requires_grad_(True), variances.clone().requires_grad_(True)
    full, tri = additive_sum(full_b, full_v), symmetric_additive_sum(tri_b, tri_v, chunk)
    torch.testing.assert_close(tri, full, rtol=1e-13, atol=1e-13)
    (full * weight).sum().backward()
    (tri * weight).sum().backward()
    torch.testing.assert_close(tri_v.grad, full_v.grad, rtol=1e-12, atol=1e-12)
    # a base entry and its mirror are one value: only their summed gradient is defined
    mirror_sum = lambda g: g + g.transpose(1, 2)  # noqa: E731
    torch.testing.assert_close(mirror_sum(tri_b.grad), mirror_sum(full_b.grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 30, None])
def test_lower_triangle_sum_of_row_blocks_equals_the_whole(chunk):
    # the base as k(X[R0:R1], X[:R1]) blocks, as AdditiveKernel evaluates it for k(X)
    gen = torch.Generator().manual_seed(7)
    n, bounds = 40, [0, 7, 20, 21, 40]
    x = torch.randn(3, n, generator=gen)
    base = torch.exp(-0.5 * (x[:, :, None] - x[:, None, :]) ** 2) - 0.2
    variances = torch.rand(4, generator=gen) + 0.1
    weight = torch.randn(n, n, generator=gen)
    whole = base.clone().requires_grad_(True)
    blocks = [base[:, r0:r1, :r1].clone().requires_grad_(True) for r0, r1 in zip(bounds, bounds[1:])]
    K_whole = symmetric_additive_sum(whole, variances, chunk)
    K_blocks = symmetric_additive_sum(blocks, variances, chunk)
    torch.testing.assert_close(K_blocks, K_whole, rtol=1e-13, atol=1e-13)
    (K_whole * weight).sum().backward()
    (K_blocks * weight).sum().backward()
    assembled = torch.zeros_like(base)
    for (r0, r1), block in zip(zip(bounds, bounds[1:]), blocks):
        assembled[:, r0:r1, :r1] = block.grad
    mirror_sum = lambda g: g + g.transpose(1, 2)  # noqa: E731
    torch.testing.assert_close(mirror_sum(assembled), mirror_sum(whole.grad), rtol=1e-12, atol=1e-12)


def test_lower_triangle_sum_refuses_blocks_that_do_not_tile_the_rows():
    base = torch.rand(2, 10, 10)
    with pytest.raises(ValueError, match="consecutive rows"):
        symmetric_additive_sum([base[:, :4, :4], base[:, 5:, :]], torch.ones(3))
    with pytest.raises(ValueError, match="consecutive rows"):
        symmetric_additive_sum([base[:, :4, :4], base[:, 4:, :9]], torch.ones(3))


def test_lower_triangle_sum_with_fixed_base_matrices_differentiates_the_variances_only():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 30, generator=gen)
    base = torch.exp(-0.5 * (x[:, :, None] - x[:, None, :]) ** 2)  # fixed length-scales: no gradient
    weight = torch.randn(30, 30, generator=gen)
    grads = []
    for total in (additive_sum, lambda b, v: symmetric_additive_sum(b, v, 50)):
        variances = torch.tensor([0.3, 1.0, 0.5, 0.2], requires_grad=True)
        grads.append(torch.autograd.grad((total(base, variances) * weight).sum(), variances)[0])
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=1e-12)


def test_kernel_on_one_input_gives_the_full_kernels_values_and_parameter_gradients():
    # OAK's mixed base (constrained SE + categorical) through k(X), which takes the triangle,
    # against k(X, copy of X), which takes the whole matrix
    from hdgp.kernels.feature_stack import FeatureStackKernel
    from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel
    from hdgp.measures import gaussian_measure

    n = _SYMMETRIC_MIN_N + 5
    gen = torch.Generator().manual_seed(3)
    X = torch.cat([torch.randn(n, 3, generator=gen), torch.randint(0, 4, (n, 1), generator=gen).double()], 1)
    weight = torch.randn(n, n, generator=gen)
    grads = []
    for second in (X, X.clone()):
        torch.manual_seed(0)
        cont = ConstrainedSEKernel(gaussian_measure(torch.zeros(3).numpy(), torch.ones(3).numpy()))
        cont.lengthscale = torch.tensor([0.7, 1.3, 2.0]).reshape(3, 1, 1)
        cat = ConstrainedCategoricalKernel(torch.tensor([0.1, 0.2, 0.3, 0.4]).numpy(), rank=1)
        kern = AdditiveKernel(FeatureStackKernel([cont, cat], [[0, 1, 2], [3]]), num_dims=4, max_order=3)
        kern.order_variances = torch.tensor([0.5, 1.0, 0.7, 0.3])
        K = kern(X, second).to_dense()
        grads.append((K.detach(), torch.autograd.grad((K * weight).sum(), list(kern.parameters()))))
    (K_tri, g_tri), (K_full, g_full) = grads
    torch.testing.assert_close(K_tri, K_full, rtol=1e-13, atol=1e-13)
    for a, b in zip(g_tri, g_full):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_input_gradient_of_k_of_x_is_the_full_sums(monkeypatch):
    # learned inducing inputs: K_uu = k(Z) with Z requiring a gradient, which reaches Z both as
    # the first and as the second argument of every base kernel
    import hdgp.kernels.additive_kernel as module

    from hdgp.kernels import SEKernel

    gen = torch.Generator().manual_seed(5)
    Z = torch.randn(40, 3, generator=gen)
    weight = torch.randn(40, 40, generator=gen)
    kern = AdditiveKernel(SEKernel(3), num_dims=3, max_order=2)
    grads = []
    # lower triangle in one base block, then in blocks of about 100 entries; then the full sum
    for threshold, block in ((1, None), (1, 100), (10**9, None)):
        monkeypatch.setattr(module, "_SYMMETRIC_MIN_N", threshold)
        if block is not None:
            monkeypatch.setattr(module, "_base_block", lambda n, calls: block)
        z = Z.clone().requires_grad_(True)
        grads.append(torch.autograd.grad((kern(z).to_dense() * weight).sum(), z)[0])
    for g in grads[:2]:
        torch.testing.assert_close(g, grads[2], rtol=1e-12, atol=1e-12)


def test_values_without_a_graph_equal_the_graph_paths(monkeypatch):
    # posteriors and predictions (no autograd graph) fill k(X) and k(X1, X2) one row block at a time,
    # freeing each block's base matrices: the sums are elementwise, so the values are the same to the bit
    import hdgp.kernels.additive_kernel as module
    from hdgp.kernels.feature_stack import FeatureStackKernel
    from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel
    from hdgp.measures import gaussian_measure

    n = _SYMMETRIC_MIN_N + 37
    gen = torch.Generator().manual_seed(8)
    X = torch.cat([torch.randn(n, 3, generator=gen), torch.randint(0, 4, (n, 1), generator=gen).double()], 1)
    X2 = X[:50] + 0.1 * (torch.arange(4) < 3)
    cont = ConstrainedSEKernel(gaussian_measure(torch.zeros(3).numpy(), torch.ones(3).numpy()))
    cont.lengthscale = torch.tensor([0.7, 1.3, 2.0]).reshape(3, 1, 1)
    cat = ConstrainedCategoricalKernel(torch.tensor([0.1, 0.2, 0.3, 0.4]).numpy(), rank=1)
    kern = AdditiveKernel(FeatureStackKernel([cont, cat], [[0, 1, 2], [3]]), num_dims=4, max_order=3)
    kern.order_variances = torch.tensor([0.5, 1.0, 0.7, 0.3])
    monkeypatch.setattr(module, "_base_block", lambda n, calls: 700)  # several row blocks of k(X)
    graph = [kern(X).to_dense(), kern(X2, X).to_dense(), kern(X, X2).to_dense()]
    assert all(K.requires_grad for K in graph)
    monkeypatch.setattr(module, "_NO_GRAD_BLOCK_BYTES", 4 * 8 * 3 * n)  # 3 rows of k(X2, X) per block
    with torch.no_grad():
        values = [kern(X).to_dense(), kern(X2, X).to_dense(), kern(X, X2).to_dense()]
    for K, V in zip(graph, values):
        assert torch.equal(V, K.detach())


def make_kernel(n_dims, max_order):
    kern = AdditiveKernel(RBFKernel(batch_shape=torch.Size([n_dims])), num_dims=n_dims, max_order=max_order)
    kern.base_kernel.lengthscale = torch.linspace(0.5, 2.0, n_dims).reshape(n_dims, 1, 1)
    return kern


def test_kernel_matches_explicit_subset_kernels():
    torch.manual_seed(0)
    x1, x2 = torch.randn(6, 4), torch.randn(5, 4)
    kern = make_kernel(4, 3)
    kern.order_variances = torch.tensor([0.3, 1.0, 0.5, 0.2])
    ls = kern.base_kernel.lengthscale.reshape(-1)
    base = torch.stack([torch.exp(-0.5 * (x1[:, i, None] - x2[None, :, i]) ** 2 / ls[i] ** 2) for i in range(4)])
    expected = brute_force_sum(base, kern.order_variances.detach())
    torch.testing.assert_close(kern(x1, x2).to_dense(), expected)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_matern_base_kernels_match_gpytorch_per_feature_with_gradients(nu):
    from gpytorch.kernels import MaternKernel

    from hdgp.kernels import MaternFeatureKernel

    torch.manual_seed(0)
    x1, x2 = torch.randn(6, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    x2[0] = x1[0]  # a zero distance: |d| has no derivative there, the kernel's gradient must stay finite
    ls = torch.tensor([0.4, 1.0, 2.5], dtype=torch.float64)
    kern = AdditiveKernel(MaternFeatureKernel(3, nu=nu), num_dims=3, max_order=3).double()
    kern.base_kernel.lengthscale = ls.reshape(3, 1, 1)
    kern.order_variances = torch.tensor([0.3, 1.0, 0.5, 0.2], dtype=torch.float64)
    refs = [MaternKernel(nu=nu).double() for _ in range(3)]
    for r, ell in zip(refs, ls):
        r.lengthscale = ell
    base = torch.stack([r(x1[:, [i]], x2[:, [i]]).to_dense() for i, r in enumerate(refs)])
    expected = brute_force_sum(base, kern.order_variances.detach())
    K = kern(x1, x2).to_dense()
    torch.testing.assert_close(K, expected, rtol=1e-10, atol=1e-12)
    raw = kern.base_kernel.raw_lengthscale
    g = torch.autograd.grad(K.sum(), raw)[0].reshape(-1)
    h, fd = 1e-6, []
    for k in range(3):
        step = torch.zeros_like(raw).reshape(-1)
        step[k] = h
        with torch.no_grad():
            raw += step.reshape(raw.shape)
            up = kern(x1, x2).to_dense().sum()
            raw -= 2 * step.reshape(raw.shape)
            down = kern(x1, x2).to_dense().sum()
            raw += step.reshape(raw.shape)
        fd.append((up - down) / (2 * h))
    torch.testing.assert_close(g, torch.stack(fd), rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="nu must be one of"):
        MaternFeatureKernel(3, nu=1.0)


def test_diag_matches_full():
    torch.manual_seed(1)
    x = torch.randn(8, 5)
    kern = make_kernel(5, 5)
    torch.testing.assert_close(kern(x, diag=True), kern(x).to_dense().diagonal())


def test_top_order_only_is_se_ard():
    # Duvenaud eq. (1.7): the D-th order term alone is the SE-ARD kernel
    torch.manual_seed(2)
    x1, x2 = torch.randn(6, 3), torch.randn(4, 3)
    kern = make_kernel(3, 3)
    kern.initialize(raw_order_variances=torch.tensor([-50.0, -50.0, -50.0, 0.0]))
    ard = RBFKernel(ard_num_dims=3)
    ard.lengthscale = kern.base_kernel.lengthscale.reshape(1, 3)
    scale = kern.order_variances[-1]
    torch.testing.assert_close(kern(x1, x2).to_dense(), scale * ard(x1, x2).to_dense(), atol=1e-15, rtol=1e-10)


def test_batched_inputs():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 3)
    kern = make_kernel(3, 2)
    out = kern(x).to_dense()
    for b in range(2):
        torch.testing.assert_close(out[b], kern(x[b]).to_dense())


def test_hyperparameter_gradients_finite_difference():
    torch.manual_seed(4)
    x = torch.randn(7, 3)
    kern = make_kernel(3, 3)
    params = [kern.base_kernel.raw_lengthscale, kern.raw_order_variances]

    def f(raw_ls, raw_var):
        kern.base_kernel.raw_lengthscale.data.copy_(raw_ls)
        kern.raw_order_variances.data.copy_(raw_var)
        return kern(x).to_dense().sum()

    loss = kern(x).to_dense().square().sum()
    grads = torch.autograd.grad(loss, params)
    eps = 1e-6
    for p, g in zip(params, grads):
        flat = p.data.view(-1)
        for j in range(flat.numel()):
            old = flat[j].item()
            flat[j] = old + eps
            up = kern(x).to_dense().square().sum().item()
            flat[j] = old - eps
            down = kern(x).to_dense().square().sum().item()
            flat[j] = old
            assert g.view(-1)[j].item() == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("max_order", [0, 4, 1.5])
def test_bad_max_order(max_order):
    with pytest.raises(ValueError, match="max_order"):
        AdditiveKernel(RBFKernel(batch_shape=torch.Size([3])), num_dims=3, max_order=max_order)


def test_wrong_number_of_features():
    kern = make_kernel(3, 2)
    with pytest.raises(ValueError, match="3 features"):
        kern(torch.randn(4, 2)).to_dense()


def test_cost_warning_for_many_features_and_orders():
    with pytest.warns(CostWarning):
        AdditiveKernel(RBFKernel(batch_shape=torch.Size([40])), num_dims=40, max_order=30)


def test_default_max_order_and_init_variance():
    kern = AdditiveKernel(RBFKernel(batch_shape=torch.Size([12])), num_dims=12)
    assert kern.max_order == 10
    # every order starts with the same total prior variance at unit base values
    contrib = kern.order_variances.detach() * torch.tensor([math.comb(12, r) for r in range(11)])
    torch.testing.assert_close(contrib, torch.full((11,), 1 / 11))


def test_base_matrices_are_laid_out_feature_major():
    """Each feature's n×m matrix must be one contiguous block: the Newton–Girard passes walk
    one feature at a time, and a (n, m, D) memory order (what elementwise base kernels give
    on transposed input views) makes every pass stride across D."""
    from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel
    from hdgp.measures import gaussian_measure

    x1, x2 = torch.randn(9, 5), torch.randn(7, 5)
    for base_kernel in (RBFKernel(batch_shape=torch.Size([5])),
                        ConstrainedSEKernel(gaussian_measure(torch.zeros(5), torch.ones(5)))):
        kernel = AdditiveKernel(base_kernel, num_dims=5, max_order=3)
        base = kernel.base_matrices(x1, x2)
        assert base.shape == (5, 9, 7) and base.is_contiguous()


def test_order_variances_from_python_floats_keep_float64():
    """A list of Python floats is read in the kernel's dtype (through float32 it lost ~1e-8)."""
    kern = make_kernel(3, 2).double()
    kern.order_variances = [0.1, 0.3, 0.7]
    assert kern.order_variances.dtype == torch.float64
    torch.testing.assert_close(kern.order_variances.detach(), torch.tensor([0.1, 0.3, 0.7], dtype=torch.float64),
                               rtol=1e-14, atol=0)


@pytest.mark.parametrize("rows", [7, 256])
def test_triangle_copies_in_panels_equal_the_whole_matrix_forms(rows, monkeypatch):
    """k(X, X)'s upper triangle copied from the lower one, and the backward's G + Gᵀ on the strict
    lower triangle (G on the diagonal), panel by panel, equal the whole-matrix expressions."""
    from hdgp.kernels.functions import triangle as module

    monkeypatch.setattr(module, "_MIRROR_ROWS", rows)
    gen = torch.Generator().manual_seed(0)
    n = 40
    a = torch.randn(n, n, generator=gen, dtype=torch.float64)
    upper = torch.ones(n, n, dtype=torch.bool).triu_(1)
    assert torch.equal(module._mirror_lower(a.clone()), torch.where(upper, a.T, a))
    lower = torch.ones(n, n, dtype=torch.bool).tril_(-1)
    folded = module._fold_upper_onto_lower(a)
    assert torch.equal(torch.where(lower, folded, 0.0), torch.where(lower, a + a.T, 0.0))
    assert torch.equal(folded.diagonal(), a.diagonal())
    expanded = torch.ones(()).expand(n, n)  # a grad_out of .sum(): stride 0, read-only
    assert torch.equal(module._fold_upper_onto_lower(expanded), torch.full((n, n), 2.0).tril(-1) + torch.eye(n))


@pytest.mark.parametrize("n_dims", [1, 2, 7])
def test_gradients_over_rows_of_many_runs_match_autograd_of_brute_force(n_dims):
    """Rows long enough for several runs of the compiled backward (and a partial last one), every
    order up to D: values, base and variance gradients equal autograd through the subset sums."""
    gen = torch.Generator().manual_seed(10 + n_dims)
    base = 1.5 * torch.randn(n_dims, 2, 1037, generator=gen)
    weight = torch.randn(2, 1037, generator=gen)
    for max_order in range(1, n_dims + 1):
        variances = torch.rand(max_order + 1, generator=gen) + 0.1
        b1, v1 = base.clone().requires_grad_(True), variances.clone().requires_grad_(True)
        b2, v2 = base.clone().requires_grad_(True), variances.clone().requires_grad_(True)
        fast, ref = additive_sum(b1, v1), brute_force_sum(b2, v2)
        torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12)
        (fast * weight).sum().backward()
        (ref * weight).sum().backward()
        torch.testing.assert_close(b1.grad, b2.grad, rtol=1e-10, atol=1e-11)
        torch.testing.assert_close(v1.grad, v2.grad, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("max_order", [1, 3, 12])
def test_compiled_lower_triangle_backward_matches_the_tensor_sweep_on_wide_rows(monkeypatch, max_order):
    """The compiled reverse sweep (its own prefix table and order limits) against the tensor code's
    sweep, on the lower triangle of a 700-row symmetric base with D = 12: runs of several lengths."""
    gen = torch.Generator().manual_seed(max_order)
    x = torch.randn(12, 700, generator=gen)
    base = torch.exp(-0.5 * (x[:, :, None] - x[:, None, :]) ** 2) - 0.4
    variances = torch.rand(max_order + 1, generator=gen) + 0.1
    weight = torch.randn(700, 700, generator=gen)
    results = []
    for compiled in (True, False):
        monkeypatch.setattr(compiled_module, "ENABLED", compiled)
        b, v = base.clone().requires_grad_(True), variances.clone().requires_grad_(True)
        out = symmetric_additive_sum(b, v)
        (out * weight).sum().backward()
        # a base entry and its mirror are one value: only their summed gradient is defined
        results.append((out.detach(), b.grad + b.grad.transpose(1, 2), v.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("shape", [(300, None), (200, 90)])
def test_se_base_sums_by_the_compiled_walk_as_by_base_blocks(monkeypatch, shape, sum_path):
    """Duvenaud's SE base kernel takes OAK's compiled SE walk with no constraint term (u = v = 0): the
    values of the base-block path to the last bit, its gradients to rounding."""
    if not sum_path:
        pytest.skip("the compiled walk is the CPU's compiled path")
    torch.manual_seed(8)
    d = 5
    kernel = AdditiveKernel(SEKernel(d), num_dims=d, max_order=4)
    kernel.base_kernel.lengthscale = torch.rand(d, 1, 1, dtype=torch.float64) + 0.3
    x1 = torch.randn(shape[0], d, dtype=torch.float64)
    x2 = x1 if shape[1] is None else torch.randn(shape[1], d, dtype=torch.float64)
    weight = torch.randn(x1.shape[0], x2.shape[0], dtype=torch.float64)
    params = [p for p in kernel.parameters() if p.requires_grad]

    def value_and_grads():
        out = kernel.forward(x1, x2)
        return (out.detach(), *torch.autograd.grad((out * weight).sum(), params))

    calls = []
    for name in ("lower_additive_sum", "cross_additive_sum"):
        real = getattr(SEKernel, name)
        monkeypatch.setattr(SEKernel, name, lambda self, *a, real=real, name=name: calls.append(name) or real(self, *a))
    fused = value_and_grads()
    assert calls == ["lower_additive_sum" if shape[1] is None else "cross_additive_sum"]
    monkeypatch.setattr(SEKernel, "lower_additive_sum", None)
    monkeypatch.setattr(SEKernel, "cross_additive_sum", None)
    blocks = value_and_grads()
    torch.testing.assert_close(fused[0], blocks[0], rtol=0, atol=0)
    for a, b in zip(fused[1:], blocks[1:]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)
