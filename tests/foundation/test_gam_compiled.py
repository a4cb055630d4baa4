"""The GAM kernel's compiled sum (OAK's SE walk, first order, no constraint term) against its per-feature
loop (``_AdditiveRBF``): values and length-scale gradients, for k(X, X) and cross-covariances."""

import pytest
import torch

from hdgp.kernels import gam_kernel
from hdgp.kernels.gam_kernel import AdditiveRBFKernel, _AdditiveRBF

pytestmark = pytest.mark.usefixtures("float64_default")


@pytest.mark.parametrize("shape", [(260, None), (150, 90), (40, 300)])
@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_sum_equals_the_feature_loop(monkeypatch, shape, threads):
    gen = torch.Generator().manual_seed(5)
    d = 7
    kernel = AdditiveRBFKernel(ard_num_dims=d)
    kernel.lengthscale = torch.rand(1, d, generator=gen) + 0.2
    x1 = torch.randn(shape[0], d, generator=gen)
    x2 = x1 if shape[1] is None else torch.randn(shape[1], d, generator=gen) * 2
    weight = torch.randn(x1.shape[0], x2.shape[0], generator=gen)
    assert kernel._compiled(x1, x2)
    calls = []
    compiled = gam_kernel.AdditiveRBFKernel._compiled_sum
    monkeypatch.setattr(gam_kernel.AdditiveRBFKernel, "_compiled_sum",
                        lambda self, a, b: calls.append(a is b) or compiled(self, a, b))
    monkeypatch.setattr(gam_kernel, "_BLOCK_BYTES", 8 * d * 1500)  # several row blocks
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = kernel.forward(x1, x2)
        (grad,) = torch.autograd.grad((out * weight).sum(), [kernel.raw_lengthscale])
    finally:
        torch.set_num_threads(previous)
    assert calls == [shape[1] is None]
    reference = _AdditiveRBF.apply(x1, x2, kernel.lengthscale)
    (ref_grad,) = torch.autograd.grad((reference * weight).sum(), [kernel.raw_lengthscale])
    torch.testing.assert_close(out, reference, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-12)


def test_inputs_with_a_gradient_or_a_batch_take_the_feature_loop():
    kernel = AdditiveRBFKernel(ard_num_dims=3)
    x = torch.randn(20, 3, requires_grad=True)
    assert not kernel._compiled(x, x)
    assert not kernel._compiled(torch.randn(2, 20, 3), torch.randn(2, 20, 3))
    out = kernel.forward(x, x)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
