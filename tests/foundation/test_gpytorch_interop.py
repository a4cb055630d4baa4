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

import hdgp


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
