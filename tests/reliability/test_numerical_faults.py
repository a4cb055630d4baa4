"""Injected numerical faults are survived (issue 9, part 2).

Each fault is injected with ``monkeypatch`` at the exact place it would occur:
non-PD kernel matrices, a Cholesky failure in the middle of an optimisation, NaN
gradients, conjugate gradients that stop early under SKI, and an EM iteration of
SIGP that diverges. The library must warn (``hdgp.exceptions``), back off and keep
the last good state, or raise a clear ``NotPositiveDefiniteError`` — never return
NaN.
"""

from __future__ import annotations

import math
import warnings

import linear_operator
import numpy as np
import pytest
import torch
from _reliability_helpers import cheap_preset, predictions_are_finite

import hdgp
import hdgp.inference.exact as exact_module
import hdgp.linalg as linalg_module
import hdgp.sigp.em as em_module
import hdgp.training as training_module
from hdgp.exceptions import ConvergenceWarning, NotPositiveDefiniteError, NumericalWarning
from hdgp.linalg import _RELATIVE_JITTERS, robust_cholesky

RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 3))
Y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * RNG.normal(size=30)


# ------------------------------------------------------------------ non-PD matrices
def test_rank_deficient_matrix_gets_jitter_with_a_warning():
    v = torch.randn(6, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    K = v @ v.T  # rank one: singular, Cholesky fails without jitter
    with pytest.warns(NumericalWarning, match="jitter"):
        L, jitter = robust_cholesky(K)
    assert jitter > 0
    assert jitter <= _RELATIVE_JITTERS[-1] * K.diagonal().mean().item()  # the cap
    torch.testing.assert_close(L @ L.T, K + jitter * torch.eye(6, dtype=K.dtype))


def test_jitter_at_an_optimisers_trial_point_is_silent_the_fitted_models_is_reported(monkeypatch):
    """During training every factorisation that needs jitter is an optimiser's trial point, most
    of them left behind; only the fitted model's own factorisation (the posterior) warns."""
    real, calls = linalg_module._cholesky_ex, {"n": 0}

    def fail_every_first_try(A):  # every matrix needs jitter
        calls["n"] += 1
        L, info = real(A)
        return (L, 1) if calls["n"] % 2 == 1 else (L, info)

    monkeypatch.setattr(linalg_module, "_cholesky_ex", fail_every_first_try)
    est = cheap_preset("RBF-ARD", max_iter=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, Y)
    jitter = [w for w in caught if issubclass(w.category, NumericalWarning) and "jitter" in str(w.message)]
    assert len(jitter) == 1 and est.posterior_.jitter > 0 and calls["n"] > 4


def test_indefinite_matrix_beyond_the_jitter_cap_raises_a_clear_error():
    K = torch.diag(torch.tensor([1.0, 1.0, -0.5], dtype=torch.float64))
    with pytest.raises(NotPositiveDefiniteError, match="not positive definite even with jitter"):
        robust_cholesky(K, warn=False)
    assert issubclass(NotPositiveDefiniteError, ValueError)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_matrix_is_reported_as_such(bad):
    K = torch.eye(3, dtype=torch.float64)
    K[0, 1] = K[1, 0] = bad
    with pytest.raises(NotPositiveDefiniteError, match="NaN or inf"):
        robust_cholesky(K, warn=False)


def test_non_pd_kernel_at_prediction_time_is_jittered_not_nan(monkeypatch):
    """The posterior's first Cholesky attempt fails (as on a numerically singular Gram matrix):
    it adds jitter, warns, and predicts exactly what the jittered dense solve gives."""
    est = cheap_preset("RBF-ARD", max_iter=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, Y)
    model, Xtr = est.model_, est.X_train_
    yt = torch.as_tensor(Y, dtype=Xtr.dtype)
    real, calls = linalg_module._cholesky_ex, {"n": 0}

    def fail_first(A):
        calls["n"] += 1
        L, info = real(A)
        return (L, 1) if calls["n"] == 1 else (L, info)

    monkeypatch.setattr(linalg_module, "_cholesky_ex", fail_first)
    with pytest.warns(NumericalWarning, match="jitter"):
        post = model.posterior(Xtr, yt)
    monkeypatch.undo()
    assert post.jitter > 0 and calls["n"] == 2
    Xs = Xtr[:5] + 0.1
    mean, var = post.predict(Xs)
    with torch.no_grad():
        Ky = model.kernel(Xtr).to_dense() + (model.noise + post.jitter) * torch.eye(len(Xtr), dtype=Xtr.dtype)
        expected = model.constant + model.kernel(Xs, Xtr).to_dense() @ torch.linalg.solve(Ky, yt - model.constant)
    torch.testing.assert_close(mean, expected)
    assert torch.isfinite(var).all() and (var > 0).all()


# ------------------------------------------------------- Cholesky failure mid-fit
def _spy_objective(monkeypatch, fail_calls=(), nan_grad_calls=()):
    """Wrap the training objective: record (params, loss) of good calls, inject faults in others."""
    calls = {"n": 0, "good": []}
    real = training_module._objective

    class _NaNGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * math.nan

    def objective(model, X, y):
        calls["n"] += 1
        k = calls["n"]
        flat = training_module._FlatParameters(model).get()
        seen = any(np.array_equal(flat, good) for good, _ in calls["good"])  # deterministic at known points
        if k in fail_calls and not seen:
            raise NotPositiveDefiniteError("injected Cholesky failure")
        loss = real(model, X, y)
        if k in nan_grad_calls and not seen:
            return _NaNGrad.apply(loss)
        calls["good"].append((flat.copy(), float(loss)))
        return loss

    monkeypatch.setattr(training_module, "_objective", objective)
    return calls


class _FailingBowl(torch.nn.Module):
    """Objective n·Σ w_i (x_i − x*_i)² whose evaluations 3–8 fail (non-PD) except at points already seen."""

    def __init__(self):
        super().__init__()
        self.x = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
        self.calls, self.seen = 0, []

    def neg_log_marginal_likelihood(self, X, y):
        self.calls += 1
        here = self.x.detach().numpy().copy()
        if 3 <= self.calls <= 8 and not any(np.array_equal(here, p) for p in self.seen):
            raise NotPositiveDefiniteError("injected Cholesky failure")
        self.seen.append(here)
        target = torch.tensor([3.0, -1.0], dtype=torch.float64)
        weights = torch.tensor([1.0, 10.0], dtype=torch.float64)
        return (weights * (self.x - target) ** 2).sum() * y.shape[0]


def test_lbfgs_restarts_after_failures_even_when_scipy_reports_convergence():
    """Pushed back onto the best point by the back-off bowl, L-BFGS-B sees zero reduction and
    reports convergence (status 0), not an abnormal line search: the fit must still go on
    (it stopped at loss 7.38, x = (0.29, -0.96), before the restart covered this status)."""
    model = _FailingBowl()
    X, y = torch.zeros(5, 1, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    result = training_module.fit_hyperparameters(model, X, y, max_iter=50)
    assert result.converged and result.loss < 1e-10
    np.testing.assert_allclose(model.x.detach().numpy(), [3.0, -1.0], atol=1e-5)


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_cholesky_failure_mid_optimisation_backs_off_and_keeps_best(monkeypatch, optimizer):
    calls = _spy_objective(monkeypatch, fail_calls=set(range(3, 9)))
    est = cheap_preset("RBF-ARD", max_iter=25, optimizer=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, Y)
    assert calls["n"] > 9, "the optimiser must continue after the failures"
    best_params, best_loss = min(calls["good"], key=lambda t: t[1])
    final = training_module._FlatParameters(est.model_).get() if any(
        p.requires_grad for p in est.model_.parameters()) else None
    np.testing.assert_allclose(est.fit_result_.loss, best_loss, rtol=0, atol=0)
    if final is not None:
        np.testing.assert_array_equal(final, best_params)
    predictions_are_finite(est, X)


def test_every_evaluation_failing_raises_a_clear_error(monkeypatch):
    _spy_objective(monkeypatch, fail_calls=set(range(1, 10_000)))
    with pytest.raises(NotPositiveDefiniteError, match="noise_lower_bound"):
        cheap_preset("RBF-ARD", max_iter=5).fit(X, Y)


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_nan_gradients_are_survived(monkeypatch, optimizer):
    calls = _spy_objective(monkeypatch, nan_grad_calls={2, 3, 5})
    est = cheap_preset("GAM", max_iter=15, optimizer=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, Y)
    best_params, best_loss = min(calls["good"], key=lambda t: t[1])
    assert math.isfinite(est.fit_result_.loss)
    assert est.fit_result_.loss <= calls["good"][0][1]  # never worse than the start
    assert all(torch.isfinite(p).all() for p in est.model_.parameters())
    predictions_are_finite(est, X)


def test_posterior_factorisation_failure_after_training_is_a_clear_error(monkeypatch):
    """If even the final conditioning fails, fit raises NotPositiveDefiniteError (no NaN model)."""
    real = exact_module.robust_cholesky
    state = {"training": True}

    def flaky(K, **kw):
        if not state["training"]:
            raise NotPositiveDefiniteError("injected: not PD even with jitter; raise noise_lower_bound")
        return real(K, **kw)

    monkeypatch.setattr(exact_module, "robust_cholesky", flaky)
    real_fit = training_module.fit_hyperparameters

    def fit_then_break(*a, **kw):
        out = real_fit(*a, **kw)
        state["training"] = False
        return out

    monkeypatch.setattr("hdgp.estimators._base.fit_hyperparameters", fit_then_break)
    with pytest.raises(NotPositiveDefiniteError):
        cheap_preset("RBF-ARD", max_iter=3).fit(X, Y)


# -------------------------------------------------------------- CG under SKI
def test_ski_cg_non_convergence_is_reported_with_the_residual():
    rng = np.random.default_rng(1)
    Xs = rng.normal(size=(120, 3))
    ys = np.sin(Xs[:, 0]) + 0.01 * rng.normal(size=120)
    est = hdgp.preset("DPA-GP-ARD-SKI", max_iter=5, n_projections=3, grid_size=32, random_state=0,
                      noise_lower_bound=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xs, ys)
    model = est.model_
    model.max_cg_iterations = 2  # injected: CG must stop long before its tolerance ...
    model.preconditioner_rank = 0  # ... which an exact preconditioner (3 projections, n = 120) would reach
    yt = torch.as_tensor((ys - est.y_mean_) / est.y_scale_)
    with linear_operator.settings.max_cholesky_size(0), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        post = model.posterior(est.X_train_, yt)
    ours = [w for w in record if issubclass(w.category, ConvergenceWarning)]
    assert ours, [str(w.message) for w in record]
    assert "residual" in str(ours[0].message)
    mean, var = post.predict(est.X_train_)
    assert torch.isfinite(mean).all() and torch.isfinite(var).all()


# ---------------------------------------------------------------- SIGP EM divergence
# (calibrate_variance=False: the faults are counted from the first EM call, which must be
# the final fit's, not a cross-validation fold's)
@pytest.mark.parametrize("fault", ["nan", "inf", "decrease"])
def test_sigp_em_divergence_stops_with_last_good_state(monkeypatch, fault):
    real = em_module._mean_and_e_step
    calls = {"n": 0, "values": []}

    def diverging(grams, sigma_beta, noise, n):
        calls["n"] += 1
        theta, beta, post_sqrt, value = real(grams, sigma_beta, noise, n)
        if calls["n"] >= 4:
            if fault == "nan":
                return theta * math.nan, beta * math.nan, post_sqrt * math.nan, math.nan
            if fault == "inf":
                return theta, beta, post_sqrt, -math.inf
            value = calls["values"][-1] - 1e3  # a large fall of the objective EM must increase
        calls["values"].append(value)
        return theta, beta, post_sqrt, value

    monkeypatch.setattr(em_module, "_mean_and_e_step", diverging)
    est = cheap_preset("SIGP", mean="linear", max_iter=50, tol=1e-12, calibrate_variance=False)
    with pytest.warns(ConvergenceWarning, match="diverge"):
        est.fit(X, Y)
    assert all(np.isfinite(f.objective).all() for f in est.model_.fits)
    predictions_are_finite(est, X)


def test_sigp_em_m_step_breakdown_keeps_last_good_state(monkeypatch):
    """A NaN covariance from the M-step makes the next E-step's factorisation fail: caught, not raised."""
    real = em_module._psd_sqrt
    calls = {"n": 0}

    def breaking(S):
        calls["n"] += 1
        if calls["n"] >= 5:
            S = S * math.nan
        return real(S) if calls["n"] < 5 else np.linalg.cholesky(S)  # LinAlgError on NaN input

    monkeypatch.setattr(em_module, "_psd_sqrt", breaking)
    est = cheap_preset("SIGP", mean="linear", max_iter=50, tol=1e-12, calibrate_variance=False)
    with pytest.warns(ConvergenceWarning, match="diverge"):
        est.fit(X, Y)
    predictions_are_finite(est, X)


@pytest.mark.parametrize("name", ["SVGP", "GP-classifier"])
def test_variational_training_survives_a_non_finite_elbo(monkeypatch, name):
    """The ELBO turns NaN mid-training (minibatch SVGP): stop, keep the last finite state, warn."""
    import gpytorch

    if name not in hdgp.presets():
        pytest.skip(f"{name} is not registered")
    real = gpytorch.mlls.VariationalELBO.forward
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        value = real(self, *args, **kwargs)
        return value * math.nan if calls["n"] >= 25 else value

    monkeypatch.setattr(gpytorch.mlls.VariationalELBO, "forward", flaky)
    y = (Y > np.median(Y)).astype(int) if name == "GP-classifier" else Y
    extra = {"optimizer": "adam"} if name == "GP-classifier" else {}
    est = cheap_preset(name, max_iter=200, n_inducing=8, **extra)
    with pytest.warns(NumericalWarning, match="non-finite"):
        est.fit(X, y)
    assert calls["n"] >= 25, "the fault was never reached"
    predictions_are_finite(est, X)


def test_full_batch_classifier_training_survives_a_non_finite_elbo(monkeypatch):
    """The full-data ELBO turns NaN mid-L-BFGS: back off to the best point, keep finite parameters."""
    from hdgp.inference.variational import SVGPModel

    real = SVGPModel.neg_log_marginal_likelihood  # full-batch L-BFGS's objective: the negative ELBO
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        value = real(self, *args, **kwargs)
        return value * math.nan if calls["n"] >= 6 else value

    monkeypatch.setattr(SVGPModel, "neg_log_marginal_likelihood", flaky)
    est = cheap_preset("GP-classifier", max_iter=50, n_inducing=8, optimizer="lbfgs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, (Y > np.median(Y)).astype(int))
    assert calls["n"] >= 6, "the fault was never reached"
    assert all(torch.isfinite(p).all() for p in est.models_[0].parameters())
    predictions_are_finite(est, X)
