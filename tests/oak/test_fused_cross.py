"""The OAK kernel's fused cross-covariance sum k(X1, X2) (no base block kept) against the base-block
path (constrained SE matrices summed by additive_sum), against finite differences, and SGPR's bound
with K_uf from it against the row-blocked bound."""

import numpy as np
import pytest
import torch

from hdgp.inference import SGPRModel
from hdgp.kernels.feature_stack import FeatureStackKernel
from hdgp.kernels.functions import se_additive_sum
from hdgp.kernels.orthogonal_kernel import (ConstrainedCategoricalKernel, ConstrainedSEKernel,
                                            OrthogonalAdditiveKernel)
from hdgp.measures import MixtureMeasure, gaussian_measure, gaussian_mixture_measure

pytestmark = pytest.mark.usefixtures("float64_default")


def _oak(d=3, order=3, measure="mixture"):
    if measure == "mixture":
        m = gaussian_mixture_measure([np.random.default_rng(j).normal(size=80) for j in range(d)], 2, random_state=0)
    else:
        m = gaussian_measure([0.1 * j for j in range(d)], [1.0 + 0.2 * j for j in range(d)])
    kernel = OrthogonalAdditiveKernel(ConstrainedSEKernel(m), num_dims=d, max_order=order)
    kernel.base_kernel.lengthscale = torch.tensor([0.5, 1.1, 3.0, 0.8][:d])
    kernel.order_variances = torch.tensor([0.3, 1.0, 0.5, 0.2][: order + 1])
    return kernel


def _stack():
    """Four features: three continuous (Gaussian measures) and one two-point feature, both constrained SE."""
    continuous = ConstrainedSEKernel(gaussian_measure([0.0, 0.3, -0.2], [1.0, 0.7, 1.4]))
    continuous.lengthscale = torch.tensor([0.6, 1.2, 2.0])
    ends = np.array([[0.0, 1.0]])
    two_point = ConstrainedSEKernel(MixtureMeasure(ends, np.zeros_like(ends), np.array([[0.3, 0.7]])))
    two_point.lengthscale = torch.tensor([0.9])
    kernel = OrthogonalAdditiveKernel(FeatureStackKernel([continuous, two_point], [[0, 1, 3], [2]]), num_dims=4,
                                      max_order=3)
    kernel.order_variances = torch.tensor([0.2, 1.0, 0.4, 0.3])
    return kernel


def _points(n, d, gen, missing=False, binary_column=None):
    x = torch.randn(n, d, generator=gen)
    if binary_column is not None:
        x[:, binary_column] = (torch.rand(n, generator=gen) < 0.6).double()
    if missing:
        x[torch.rand(n, d, generator=gen) < 0.1] = float("nan")
    return x


def _params(kernel):
    return [p for p in kernel.parameters() if p.requires_grad]


def _value_and_grads(kernel, x1, x2, weight):
    out = kernel.forward(x1, x2)
    return (out.detach(), *torch.autograd.grad((out * weight).sum(), _params(kernel)))


def _compare(fused, blocks, rtol=1e-12, atol=1e-12):
    for a, b in zip(fused, blocks):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("shape", [(70, 200), (200, 70), (1, 90)])
@pytest.mark.parametrize("measure", ["mixture", "gaussian"])
def test_fused_cross_sum_equals_base_block_path(monkeypatch, missing, shape, measure):
    """Values and the gradients of the length-scales and order variances, with missing cells, with the
    longer input first or second (the transposed walk), over many small row blocks."""
    gen = torch.Generator().manual_seed(3)
    kernel = _oak(measure=measure)
    x1, x2 = _points(shape[0], 3, gen, missing), _points(shape[1], 3, gen, missing)
    weight = torch.randn(*shape, generator=gen)
    assert kernel.memory_light_cross(x1, x2)
    monkeypatch.setattr(se_additive_sum, "_CROSS_BLOCK_BYTES", 3 * 8 * 7 * max(shape))  # blocks of 7 rows
    fused = _value_and_grads(kernel, x1, x2, weight)
    monkeypatch.setattr(ConstrainedSEKernel, "cross_additive_sum", None)
    assert not kernel.memory_light_cross(x1, x2)
    _compare(fused, _value_and_grads(kernel, x1, x2, weight), rtol=1e-11, atol=1e-12)


def test_fused_cross_values_are_bitwise_those_of_the_base_blocks_without_a_graph(monkeypatch):
    """Predictions (no graph) keep their values to the last bit, in both walk orientations."""
    gen = torch.Generator().manual_seed(4)
    kernel = _oak()
    for shape in ((150, 40), (40, 150)):
        x1, x2 = _points(shape[0], 3, gen), _points(shape[1], 3, gen)
        with torch.no_grad():
            fused = kernel.forward(x1, x2)
            with monkeypatch.context() as patch:
                patch.setattr(ConstrainedSEKernel, "cross_additive_sum", None)
                reference = kernel.forward(x1, x2)
        torch.testing.assert_close(fused, reference, rtol=0, atol=0)


def test_fused_cross_gradient_matches_finite_differences():
    gen = torch.Generator().manual_seed(11)
    kernel = _oak(order=2, measure="gaussian")
    x1, x2 = _points(60, 3, gen), _points(25, 3, gen)
    x1[7, 2] = float("nan")
    weight = torch.randn(60, 25, generator=gen)
    params = _params(kernel)
    grads = torch.autograd.grad((kernel.forward(x1, x2) * weight).sum(), params)
    step = 1e-6
    for p, g in zip(params, grads):
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += step
                up = (kernel.forward(x1, x2) * weight).sum()
                p.view(-1)[i] -= 2 * step
                down = (kernel.forward(x1, x2) * weight).sum()
                p.view(-1)[i] += step
            fd = (up - down) / (2 * step)
            assert g.view(-1)[i].item() == pytest.approx(fd.item(), rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("missing", [False, True])
def test_feature_stack_of_constrained_se_kernels_sums_without_blocks(monkeypatch, missing):
    """A stack of constrained SE groups (continuous + two-point) takes both fused sums, k(X, X)'s lower
    triangle and k(X1, X2), with the values and gradients of the stacked base blocks."""
    gen = torch.Generator().manual_seed(8)
    kernel = _stack()
    x = _points(200, 4, gen, missing, binary_column=2)
    z = _points(30, 4, gen, binary_column=2)
    assert kernel.memory_light_cross(z, x)
    weights = {"cross": torch.randn(30, 200, generator=gen), "lower": torch.randn(200, 200, generator=gen)}
    fused = {"cross": _value_and_grads(kernel, z, x, weights["cross"]),
             "lower": _value_and_grads(kernel, x, x, weights["lower"])}
    monkeypatch.setattr(FeatureStackKernel, "cross_additive_sum", None)
    monkeypatch.setattr(FeatureStackKernel, "lower_additive_sum", None)
    assert not kernel.memory_light_cross(z, x)
    _compare(fused["cross"], _value_and_grads(kernel, z, x, weights["cross"]), rtol=1e-11)
    _compare(fused["lower"], _value_and_grads(kernel, x, x, weights["lower"]), rtol=1e-11)


def test_stack_with_a_categorical_group_keeps_the_base_block_path():
    continuous = ConstrainedSEKernel(gaussian_measure([0.0, 0.0], [1.0, 1.0]))
    kernel = OrthogonalAdditiveKernel(FeatureStackKernel([continuous, ConstrainedCategoricalKernel([0.5, 0.5])],
                                                         [[0, 1], [2]]), num_dims=3, max_order=2)
    gen = torch.Generator().manual_seed(2)
    x = torch.cat([torch.randn(150, 2, generator=gen), torch.randint(0, 2, (150, 1), generator=gen).double()], 1)
    assert not kernel.memory_light_cross(x[:20], x)
    assert kernel.base_kernel.cross_additive_sum(x[:20].T.unsqueeze(-1), x.T.unsqueeze(-1),
                                                 kernel.order_variances) is None
    out = kernel.forward(x[:20], x)
    torch.testing.assert_close(out[:, :20], kernel.forward(x[:20], x[:20]), rtol=1e-12, atol=1e-12)


def test_learned_inducing_inputs_keep_the_base_block_path():
    kernel = _oak()
    z = torch.randn(10, 3, requires_grad=True)
    assert not kernel.memory_light_cross(z, torch.randn(40, 3))
    out = kernel(z, torch.randn(40, 3)).to_dense()
    (g,) = torch.autograd.grad(out.sum(), [z])
    assert torch.isfinite(g).all() and g.abs().sum() > 0


@pytest.mark.parametrize("stack", [False, True])
def test_sgpr_bound_with_whole_fused_cross_equals_the_row_blocked_bound(monkeypatch, stack):
    """SGPR's bound with K_uf evaluated whole through the fused sum (once, with its graph) against the
    row-blocked bound of the base-block path (value, every gradient, posterior)."""
    from hdgp.inference import sparse

    gen = torch.Generator().manual_seed(0)
    d = 4 if stack else 3
    X = _points(160, d, gen, binary_column=2 if stack else None)
    y = torch.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * torch.randn(160, generator=gen)
    Xs = X[:9] + 0.05

    def evaluate():
        kernel = _stack() if stack else _oak()
        model = SGPRModel(kernel, X=X, n_inducing=20, random_state=0).double()
        model.likelihood.noise = 0.05
        params = [p for p in model.parameters() if p.requires_grad]
        loss = model.neg_log_marginal_likelihood(X, y)
        return (loss.detach(), *torch.autograd.grad(loss, params), *model.posterior(X, y).predict(Xs))

    monkeypatch.setattr(sparse, "CROSS_BLOCK", 70)  # row blocks of 3 rows unless K_uf is light
    whole = evaluate()
    patched = FeatureStackKernel if stack else ConstrainedSEKernel
    monkeypatch.setattr(patched, "cross_additive_sum", None)
    blocked = evaluate()
    _compare(whole, blocked, rtol=1e-10, atol=1e-11)
