"""Worked example of ARCHITECTURE.md, "How to add a kernel family": a new family is one estimator
subclass (its kernel) plus one preset registration, and then fits, predicts, explains itself in
its repr, is built by name and chooses an inference engine like the built-in families. In a real addition the class lives in ``src/hdgp/estimators/<family>.py``
and the registration in ``src/hdgp/presets.py``; here both sit in this one file."""

import sys

import numpy as np
import pytest
import torch
from gpytorch.kernels import MaternKernel, ScaleKernel

import hdgp
from hdgp.estimators import BaseGPRegressor
from hdgp.kernels import log_positive


class MaternARDRegressor(BaseGPRegressor):
    """GP regression with a Matérn-ν ARD kernel (Rasmussen & Williams 2006, eq. 4.14)."""

    def __init__(self, nu=2.5, *, inference="auto", n_inducing=512, batch_size=None, noise_lower_bound=1e-4,
                 noise_prior=None, optimizer="lbfgs", max_iter=None, n_restarts=0, warm_start=False,
                 random_state=None, device=None, dtype="float64", verbose=False):
        self.nu = nu
        self.inference = inference
        self.n_inducing = n_inducing
        self.batch_size = batch_size
        self.noise_lower_bound = noise_lower_bound
        self.noise_prior = noise_prior
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.n_restarts = n_restarts
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.verbose = verbose

    def _validate_params_extra(self) -> None:
        if self.nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"nu must be 0.5, 1.5 or 2.5, got {self.nu!r}.")

    def _make_kernel(self, X: torch.Tensor):
        base = MaternKernel(nu=self.nu, ard_num_dims=X.shape[1], lengthscale_constraint=log_positive())
        return ScaleKernel(base, outputscale_constraint=log_positive())


@pytest.fixture
def family():
    name = "Matern-ARD-example"
    hdgp.register_preset(name, lambda: MaternARDRegressor(nu=2.5), "Example family: GP with a Matérn-5/2 ARD kernel.")
    yield name
    sys.modules["hdgp.presets"]._REGISTRY.pop(name.lower())  # leave the registry as the other tests expect it


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.standard_normal(n)


def test_a_new_family_is_built_by_name_and_fits_and_predicts(family):
    assert family in hdgp.presets()
    est = hdgp.preset(family, random_state=0, max_iter=60)
    assert isinstance(est, MaternARDRegressor) and est.nu == 2.5
    X, y = _data(80)
    Xt, yt = _data(200, seed=1)
    est.fit(X, y)
    assert est.inference_ == "exact"  # the engine registry's "auto" rule, as for every family
    mean, std = est.predict(Xt, return_std=True)
    # the learned length-scales find the irrelevant third feature, and the fit explains the target
    lengthscales = est.kernel_.base_kernel.lengthscale.detach().view(-1).cpu().numpy()
    assert lengthscales[2] > 3 * max(lengthscales[0], lengthscales[1])
    assert 1 - np.mean((mean - yt) ** 2) / np.var(yt) > 0.95
    assert np.all(std > 0)
    assert "length-scales" in repr(est)  # the summaries read any family's fitted kernel
    # hdgp.save stores only classes of the hdgp package (a model file names its class): a family
    # added under src/hdgp/estimators/ is rebuilt from its class and _make_kernel like GPRegressor


def test_a_new_family_gets_the_shared_parameter_checks(family):
    X, y = _data(30)
    with pytest.raises(ValueError, match=r"MaternARDRegressor supports inference in \('auto', 'exact', 'sparse', "
                                         r"'variational'\), got 'ski'"):
        hdgp.preset(family, inference="ski").fit(X, y)
    with pytest.raises(ValueError, match="nu must be"):
        hdgp.preset(family, nu=2.0).fit(X, y)
    sparse = hdgp.preset(family, inference="sparse", n_inducing=10, max_iter=5, random_state=0).fit(X, y)
    assert sparse.model_.inducing_points.shape == (10, 3)
