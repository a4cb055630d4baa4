"""hdgp's kernels inside a plain GPyTorch ``ExactGP`` (what the README promises researchers).

At the same hyper-parameters GPyTorch's marginal likelihood, its autograd gradients (through
GPyTorch's Cholesky solves, where hdgp's engine uses one ``cholesky_inverse`` and the trace
formula) and its predictive mean and variance (cross-covariance and ``diag=True`` paths of
the kernel) equal hdgp's, for every kernel family."""

import warnings

import gpytorch
import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

import hdgp
from hdgp.kernels import AdditiveRBFKernel, SEKernel
from hdgp.kernels.additive_kernel import AdditiveKernel
from hdgp.kernels.gam_kernel import _AdditiveRBF
from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel
from hdgp.measures import gaussian_measure


class _PlainGP(gpytorch.models.ExactGP):
    """What a GPyTorch user writes around an hdgp kernel."""

    def __init__(self, X, y, kernel, likelihood, mean):
        super().__init__(X, y, likelihood)
        self.mean_module, self.covar_module = mean, kernel

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


@pytest.mark.parametrize("name", ["RBF-ARD", "IMQ-ARD", "GAM", "Additive", "OAK", "DPA-GP-ARD", "DPA-GP", "RPA-GP-2"])
def test_gpytorch_marginal_likelihood_and_gradients_match_the_hdgp_engine(name):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = hdgp.preset(name, max_iter=15, random_state=0).fit(X, y)
    engine, Xt = est.model_, est.X_train_
    yt = torch.as_tensor((y - est.y_mean_) / est.y_scale_, dtype=Xt.dtype)
    params = [p for p in engine.parameters()]
    for p in params:
        p.requires_grad_(True)
    ours = engine.neg_log_marginal_likelihood(Xt, yt) - engine.log_prior()
    g_ours = torch.autograd.grad(ours, params, allow_unused=True)

    gp = _PlainGP(Xt, yt, engine.kernel, engine.likelihood, engine.mean).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(engine.likelihood, gp)
    with gpytorch.settings.max_cholesky_size(10**6):
        theirs = -mll(gp(Xt), yt) * len(yt)  # GPyTorch divides by n and adds the same log priors
        g_theirs = torch.autograd.grad(theirs, params, allow_unused=True)
    torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-9)
    for p, a, b in zip(params, g_ours, g_theirs):
        a = torch.zeros_like(p) if a is None else a
        b = torch.zeros_like(p) if b is None else b
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-8 * (1 + b.abs().max().item()))

    Xs = torch.as_tensor(rng.normal(size=(7, 3)), dtype=Xt.dtype)
    gp.eval()
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**6), gpytorch.settings.fast_pred_var(False):
        pred = engine.likelihood(gp(Xs))
        mean, var = engine.posterior(Xt, yt).predict(Xs)
    torch.testing.assert_close(pred.mean, mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(pred.variance, var, rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------ composition and batches
DT = torch.float64


def _additive(kind):
    base = SEKernel(3) if kind == "se" else ConstrainedSEKernel(gaussian_measure(np.zeros(3), np.ones(3)))
    return AdditiveKernel(base, num_dims=3, max_order=2).to(DT)


@pytest.mark.parametrize("kind", ["se", "oak"])
def test_additive_kernels_compose_like_any_gpytorch_kernel(kind):
    """The feature dimension of the base kernels is no batch: ScaleKernel(k) has one output scale,
    and sums with other kernels give (n, m) matrices equal to the sum of the parts."""
    X = torch.rand(6, 3, dtype=DT, generator=torch.Generator().manual_seed(0))
    k = _additive(kind)
    scaled = ScaleKernel(k).to(DT)
    scaled.outputscale = 2.5
    assert scaled.batch_shape == torch.Size([]) and scaled.outputscale.shape == torch.Size([])
    torch.testing.assert_close(scaled(X).to_dense(), 2.5 * k(X).to_dense())
    rbf = RBFKernel().to(DT)
    torch.testing.assert_close((k + rbf)(X).to_dense(), k(X).to_dense() + rbf(X).to_dense())
    torch.testing.assert_close((k * rbf)(X).to_dense(), k(X).to_dense() * rbf(X).to_dense())


def test_feature_kernel_diag_matches_the_full_matrix_for_batched_inputs():
    k = _additive("se")
    for shape in [(2, 5, 3), (1, 5, 3), (3, 2, 5, 3)]:
        X = torch.rand(*shape, dtype=DT)
        torch.testing.assert_close(k(X, diag=True), k(X).to_dense().diagonal(dim1=-2, dim2=-1))


def test_additive_rbf_kernel_batch_members_have_their_own_lengthscales_and_gradients():
    k = AdditiveRBFKernel(3, batch_shape=torch.Size([2])).to(DT)
    ls = torch.tensor([[[0.3, 0.5, 0.7]], [[2.0, 3.0, 4.0]]], dtype=DT)
    k.lengthscale = ls
    X = torch.rand(2, 5, 3, dtype=DT)
    K = k(X).to_dense()
    for b in range(2):
        expected = sum(torch.exp(-0.5 * ((X[b, :, i, None] - X[b, None, :, i]) / ls[b, 0, i]) ** 2) for i in range(3))
        torch.testing.assert_close(K[b], expected)
    K[1].sum().backward()
    assert k.raw_lengthscale.grad[1].abs().min() > 0 and k.raw_lengthscale.grad[0].abs().max() == 0
    # inputs of different batch shapes: each gradient has its argument's shape (finite differences)
    args = (torch.rand(4, 1, 3, 3, dtype=DT, requires_grad=True), torch.rand(2, 3, dtype=DT, requires_grad=True),
            ls.clone().requires_grad_())
    assert torch.autograd.gradcheck(_AdditiveRBF.apply, args)


def test_unsupported_uses_are_clear_errors_not_silent_results():
    k = _additive("se")
    X = torch.rand(5, 3, dtype=DT)
    # second derivatives of the hand-written backward pass: refused, not silently zero
    K = k(X).to_dense()
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad((K @ K).trace(), k.base_kernel.raw_lengthscale, create_graph=True)
    with pytest.raises(ValueError, match="no batch of independent kernels"):
        AdditiveKernel(SEKernel(3), num_dims=3, batch_shape=torch.Size([2]))
    with pytest.raises(ValueError, match="holds 4 feature kernels, but num_dims=3"):
        AdditiveKernel(SEKernel(4), num_dims=3)
    with pytest.raises(ValueError, match=r"inputs of shape \(\.\.\., 3, n, 1\)"):
        SEKernel(3)(X).to_dense()
    k.order_variances = 0.5  # a scalar is broadcast to every order, as GPyTorch does for length-scales
    torch.testing.assert_close(k.order_variances.detach(), torch.full((3,), 0.5, dtype=DT))
