"""The fused constrained-SE sum walked by several threads (``se_additive_sum``'s groups of row blocks)
against the same walk on one thread: the same values to the last bit (each row is summed by one
thread), the same gradients up to the order of the per-group sums."""

import pytest
import torch

from hdgp.kernels.functions import se_additive_sum
from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel, OrthogonalAdditiveKernel
from hdgp.measures import gaussian_measure

pytestmark = pytest.mark.usefixtures("float64_default")


def _kernel(d=4, order=3):
    kernel = OrthogonalAdditiveKernel(ConstrainedSEKernel(gaussian_measure([0.1 * j for j in range(d)],
                                                                           [1.0 + 0.2 * j for j in range(d)])),
                                      num_dims=d, max_order=order)
    kernel.base_kernel.lengthscale = torch.tensor([0.5, 1.1, 3.0, 0.8][:d])
    kernel.order_variances = torch.tensor([0.3, 1.0, 0.5, 0.2][: order + 1])
    return kernel


def _walk(kernel, x1, x2, weight, threads):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = kernel.forward(x1, x2)
        params = [p for p in kernel.parameters() if p.requires_grad]
        return (out.detach(), *torch.autograd.grad((out * weight).sum(), params))
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("missing", [False, True])
def test_threads_give_the_serial_values_and_gradients(monkeypatch, threads, cross, missing):
    gen = torch.Generator().manual_seed(7)
    kernel = _kernel()
    x1 = torch.randn(300, 4, generator=gen)
    x2 = torch.randn(170, 4, generator=gen) if cross else x1
    if missing:
        x1[torch.rand(x1.shape, generator=gen) < 0.1] = float("nan")
    weight = torch.randn(x1.shape[0], x2.shape[0], generator=gen)
    monkeypatch.setattr(se_additive_sum, "_CROSS_BLOCK_BYTES", 4 * 8 * 9 * x2.shape[0])  # blocks of 9 rows
    monkeypatch.setattr(se_additive_sum, "PARALLEL_MIN_ENTRIES", 1)
    groups = []
    real = se_additive_sum._groups
    monkeypatch.setattr(se_additive_sum, "_groups", lambda *a: groups.append(real(*a)) or groups[-1])
    serial = _walk(kernel, x1, x2, weight, 1)
    assert all(len(g) == 1 for g in groups)
    groups.clear()
    parallel = _walk(kernel, x1, x2, weight, threads)
    assert groups and all(len(g) == threads for g in groups)  # forward and backward both split
    torch.testing.assert_close(parallel[0], serial[0], rtol=0, atol=0)
    for a, b in zip(parallel[1:], serial[1:]):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-14)


def test_an_error_in_a_worker_thread_reaches_the_caller():
    def walk(group):
        if group == ["second"]:
            raise ValueError("from the second group")
        return group

    with pytest.raises(ValueError, match="second group"):
        se_additive_sum._each_group([["first"], ["second"]], walk)
    assert se_additive_sum._each_group([["a"], ["b"], ["c"]], lambda g: g[0]) == ["a", "b", "c"]
