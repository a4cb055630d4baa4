"""Shared helpers of the reliability suite (issue 9), imported by its test modules.

Every public model is reached through the presets registry, so a family added
later is exercised without editing these tests. ``cheap_preset`` shrinks each
preset to its cheapest sensible configuration (a few optimiser iterations, tiny
grids, fixed SIGP hyper-parameters) so the whole suite stays within its time
budget on a 2-core machine.
"""

from __future__ import annotations

import inspect

import numpy as np
from hypothesis import HealthCheck, settings
from sklearn.base import is_classifier

import hdgp
from hdgp.exceptions import HDGPWarning

#: Hypothesis profile of this suite: few, reproducible examples, no deadline (fits vary in time).
settings.register_profile(
    "hdgp-reliability", max_examples=4, deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RELIABILITY = settings.get_profile("hdgp-reliability")

#: Every named model (regressors and classifiers alike).
PRESETS = sorted(hdgp.presets())


def cheap_preset(name: str, *, random_state=0, **extra):
    """The preset ``name`` with its cheapest settings (only parameters the estimator has)."""
    est = hdgp.preset(name)
    have = est.get_params()
    kw = {}
    if "max_iter" in have:
        kw["max_iter"] = 20 if "rank" in have else 5
    if "grid_size" in have:
        kw["grid_size"] = 32
    if isinstance(have.get("n_projections"), int) and have["n_projections"] > 4:
        kw["n_projections"] = 4
    if "n_inducing" in have:
        kw["n_inducing"] = 2
    if "rank" in have:  # SIGP: fixed hyper-parameters, so no cross-validation grid
        kw.update(rank=1, lengthscale=1.0, eta=1e-3, mean_penalty=1.0, cv_max_iter=5)
    if "y_bandwidth" in have:
        kw["y_bandwidth"] = 1.0
    if "max_order" in have:
        kw["max_order"] = 2
    if "random_state" in have:
        kw["random_state"] = random_state
    kw.update({k: v for k, v in extra.items() if k in have})
    return est.set_params(**kw)


def min_features(name: str) -> int:
    """Fewest features the preset accepts: its largest projection degree (RPA-GP-3 projects to 6-D)."""
    degree = hdgp.preset(name).get_params().get("degree") or 1
    return max(D for _, D in degree) if isinstance(degree, (list, tuple)) else int(degree)


def is_classifier_preset(name: str) -> bool:
    return is_classifier(hdgp.preset(name))


def target_for(name: str, X: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """A target suited to the preset: two balanced labels for classifiers, a smooth function otherwise."""
    n = X.shape[0]
    if is_classifier_preset(name):
        return np.arange(n) % 2
    Xf = np.asarray(X, dtype=np.float64)
    col = Xf[:, 0]
    spread = np.abs(col).max()
    z = col / spread if spread > 0 else col
    return scale * (np.sin(3 * z) + 0.1 * np.cos(np.arange(n)))


def predictions_are_finite(est, X) -> None:
    """Predict and assert every output (mean, std or probabilities) is finite and sane."""
    if is_classifier(est):
        proba = np.asarray(est.predict_proba(X), dtype=np.float64)
        assert np.all(np.isfinite(proba)), proba
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
        assert np.all(proba >= -1e-12)
        labels = est.predict(X)
        assert set(np.unique(labels)) <= set(est.classes_)
        return
    mean, std = est.predict(X, return_std=True)
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    assert mean.shape == (len(X),) and std.shape == (len(X),)
    assert np.all(np.isfinite(mean)), mean
    assert np.all(np.isfinite(std)), std
    assert np.all(std >= 0), std
    if "return_cov" in inspect.signature(est.predict).parameters and len(X) <= 50:
        mean_c, cov = est.predict(X, return_cov=True)
        cov = np.asarray(cov, dtype=np.float64)
        scale = max(float(np.abs(cov).max()), np.finfo(float).tiny)
        assert np.all(np.isfinite(cov)), cov
        np.testing.assert_allclose(cov, cov.T, rtol=0, atol=1e-9 * scale)
        assert np.all(np.diag(cov) >= -1e-9 * scale)
        np.testing.assert_allclose(np.sqrt(np.clip(np.diag(cov), 0, None)), std, rtol=1e-4,
                                   atol=1e-6 * max(float(std.max()), np.finfo(float).tiny))
        np.testing.assert_allclose(mean_c, mean, rtol=1e-9, atol=1e-12 * max(1.0, float(np.abs(mean).max())))


def foreign_warnings(record) -> list:
    """Warnings that are neither hdgp's own nor deprecation notices from dependencies."""
    allowed = (HDGPWarning, DeprecationWarning, PendingDeprecationWarning, FutureWarning)
    return [w for w in record if not issubclass(w.category, allowed)]

