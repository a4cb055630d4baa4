"""Baseline kernels against their formulas, gradients and PSD-ness."""

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from hdgp.kernels import AdditiveRBFKernel, IMQKernel, RBFARDKernel


pytestmark = pytest.mark.usefixtures("float64_default")


def _x(n, d, seed):
    return torch.tensor(np.random.default_rng(seed).standard_normal((n, d)))


def test_imq_matches_formula():
    k = IMQKernel(ard_num_dims=3)
    k.lengthscale = torch.tensor([0.5, 1.0, 2.0])
    k.outputscale = 1.0
    x1, x2 = _x(5, 3, 0), _x(4, 3, 1)
    tau = (x1[:, None, :] - x2[None, :, :]) / torch.tensor([0.5, 1.0, 2.0])
    expected = (1 + tau.square().sum(-1)) ** -0.5
    torch.testing.assert_close(k(x1, x2).to_dense(), expected)
    torch.testing.assert_close(k(x1, diag=True), torch.ones(5))


@pytest.mark.parametrize("ard", [True, False])
def test_fused_rbf_matches_gpytorch_scaled_rbf_values_and_input_gradients(ard):
    ls = torch.tensor([0.4, 1.3, 2.2]) if ard else torch.tensor([0.9])
    ours = RBFARDKernel(ard_num_dims=3 if ard else None)
    ref = ScaleKernel(RBFKernel(ard_num_dims=3 if ard else None))
    ours.lengthscale, ref.base_kernel.lengthscale = ls, ls
    ours.outputscale, ref.outputscale = 1.7, 1.7
    x1, x2 = _x(7, 3, 8), _x(5, 3, 9)
    G = torch.tensor(np.random.default_rng(10).standard_normal((7, 5)))
    results = []
    for k in (ours, ref):
        a, b = x1.clone().requires_grad_(), x2.clone().requires_grad_()
        K = k(a, b).to_dense()
        (K * G).sum().backward()
        results.append((K.detach(), a.grad, b.grad, k(x1, diag=True).detach()))
    for mine, theirs in zip(*results):
        torch.testing.assert_close(mine, theirs)


@pytest.mark.parametrize("kernel_cls", [RBFARDKernel, IMQKernel])
def test_fused_ard_backward_passes_gradcheck(kernel_cls):
    from hdgp.kernels.ard_kernel import _FusedScaledARD

    x1 = _x(4, 3, 11).requires_grad_()
    x2 = _x(5, 3, 12).requires_grad_()
    ls = torch.tensor([0.8, 1.5, 0.6], requires_grad=True)
    scale = torch.tensor(1.3, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b, l, s: _FusedScaledARD.apply(a, b, l, s, kernel_cls._profile), (x1, x2, ls, scale))


def test_additive_rbf_equals_sum_of_one_dimensional_kernels():
    ls = torch.tensor([0.3, 1.1, 2.5, 0.8])
    k = AdditiveRBFKernel(ard_num_dims=4)
    k.lengthscale = ls
    x1, x2 = _x(6, 4, 2), _x(5, 4, 3)
    expected = 0
    for i in range(4):
        ki = RBFKernel()
        ki.lengthscale = ls[i]
        expected = expected + ki(x1[:, i:i + 1], x2[:, i:i + 1]).to_dense()
    torch.testing.assert_close(k(x1, x2).to_dense(), expected)
    torch.testing.assert_close(k(x1, diag=True), torch.full((6,), 4.0))


def test_additive_rbf_custom_backward_passes_gradcheck():
    from hdgp.kernels.gam_kernel import _AdditiveRBF

    x1 = _x(4, 3, 4).requires_grad_()
    x2 = _x(3, 3, 5).requires_grad_()
    ls = torch.tensor([0.7, 1.2, 0.9], requires_grad=True)
    assert torch.autograd.gradcheck(_AdditiveRBF.apply, (x1, x2, ls))


@pytest.mark.parametrize("kernel", [IMQKernel(ard_num_dims=3), RBFARDKernel(ard_num_dims=3),
                                    AdditiveRBFKernel(ard_num_dims=3)])
def test_kernel_matrices_are_positive_semidefinite(kernel):
    K = kernel(_x(40, 3, 6)).to_dense().detach()
    assert torch.linalg.eigvalsh(K).min().item() > -1e-10
