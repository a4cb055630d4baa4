"""Every torch-based family on a CUDA GPU (``device="cuda"``).

A model fitted on the GPU must (1) keep its tensors there, (2) predict what the
CPU computes from the same fitted model (saved, then loaded with
``device="cpu"``), and (3) be as accurate as the same estimator fitted on the
CPU: the GPU changes where the arithmetic runs, not the model. Skipped where no
GPU is present (CI has none); run on a GPU machine with ``pytest tests/test_cuda.py``.
"""

import warnings

import numpy as np
import pytest
import torch

import hdgp
from hdgp.estimators import (AdditiveGPRegressor, GPClassifier, GPRegressor, OAKClassifier, OAKRegressor,
                             ProjectedAdditiveGPRegressor)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(700, 5))
F = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] * X[:, 3]
Y = F + 0.1 * RNG.normal(size=len(F))
TRAIN, TEST = slice(0, 600), slice(600, None)

REGRESSORS = {
    "exact RBF-ARD": lambda **kw: GPRegressor(**kw),
    "SGPR": lambda **kw: GPRegressor(inference="sparse", n_inducing=64, **kw),
    "SVGP": lambda **kw: GPRegressor(inference="variational", n_inducing=64, max_iter=300, **kw),
    "additive": lambda **kw: AdditiveGPRegressor(max_order=3, **kw),
    "OAK exact": lambda **kw: OAKRegressor(max_order=2, **kw),
    "OAK sparse": lambda **kw: OAKRegressor(max_order=2, inference="sparse", n_inducing=64, **kw),
    "DPA-GP-ARD exact": lambda **kw: ProjectedAdditiveGPRegressor(n_projections=10, **kw),
    "DPA-GP-ARD SKI": lambda **kw: ProjectedAdditiveGPRegressor(n_projections=10, inference="ski",
                                                                grid_size=256, **kw),
}
#: SKI solves with conjugate gradients and estimates log-determinants by stochastic Lanczos:
#: its predictions agree across devices to the solver's tolerance, not to rounding.
PREDICT_RTOL = {"DPA-GP-ARD SKI": 1e-3}


def _fit(factory, device, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of the short SVGP run
        return factory(device=device, random_state=0).fit(X, y)


def _rmse(est):
    return float(np.sqrt(np.mean((est.predict(X[TEST]) - F[TEST]) ** 2)))


@pytest.mark.parametrize("name", REGRESSORS)
def test_regressor_fitted_on_gpu(name, tmp_path):
    gpu = _fit(REGRESSORS[name], "cuda", X[TRAIN], Y[TRAIN])
    assert all(p.is_cuda for p in gpu.model_.parameters())
    mean, std = gpu.predict(X[TEST], return_std=True)
    assert isinstance(mean, np.ndarray) and np.isfinite(mean).all() and (std > 0).all()

    cpu_copy = hdgp.load(hdgp.save(gpu, tmp_path / "gpu.hdgp"), device="cpu")
    assert not any(p.is_cuda for p in cpu_copy.model_.parameters())
    rtol = PREDICT_RTOL.get(name, 1e-7)
    np.testing.assert_allclose(cpu_copy.predict(X[TEST]), mean, rtol=rtol, atol=rtol)

    cpu = _fit(REGRESSORS[name], None, X[TRAIN], Y[TRAIN])
    assert _rmse(gpu) <= 1.1 * _rmse(cpu) + 0.01


def test_oak_sobol_indices_agree_across_devices():
    gpu = _fit(REGRESSORS["OAK exact"], "cuda", X[TRAIN], Y[TRAIN])
    cpu = _fit(REGRESSORS["OAK exact"], None, X[TRAIN], Y[TRAIN])
    for term, share in cpu.sobol_indices_.items():
        assert gpu.sobol_indices_[term] == pytest.approx(share, abs=0.01)


@pytest.mark.parametrize("factory", [
    lambda **kw: GPClassifier(n_inducing=32, **kw),
    lambda **kw: OAKClassifier(max_order=2, n_inducing=32, **kw),
], ids=["GP", "OAK"])
def test_classifier_fitted_on_gpu(factory, tmp_path):
    labels = (F > np.median(F)).astype(int)
    gpu = _fit(factory, "cuda", X[TRAIN], labels[TRAIN])
    proba = gpu.predict_proba(X[TEST])
    assert np.isfinite(proba).all() and np.allclose(proba.sum(1), 1)
    cpu_copy = hdgp.load(hdgp.save(gpu, tmp_path / "gpu.hdgp"), device="cpu")
    np.testing.assert_allclose(cpu_copy.predict_proba(X[TEST]), proba, rtol=1e-7, atol=1e-9)
    cpu = _fit(factory, None, X[TRAIN], labels[TRAIN])
    accuracy = {name: (est.predict(X[TEST]) == labels[TEST]).mean() for name, est in (("gpu", gpu), ("cpu", cpu))}
    assert accuracy["gpu"] >= accuracy["cpu"] - 0.03
