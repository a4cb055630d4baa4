"""Exact engine: marginal likelihood, gradients and predictions against dense formulas."""

import math
import warnings

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from scipy.stats import multivariate_normal

from hdgp.exceptions import NotPositiveDefiniteError, NumericalWarning
from hdgp.inference import ExactGPModel
from hdgp.linalg import robust_cholesky
from hdgp.training import fit_hyperparameters


pytestmark = pytest.mark.usefixtures("float64_default")


def _model(d=3, seed=0, scaled=True, profile_constant=False):
    """A fixed constant 0.3 unless ``profile_constant``."""
    torch.manual_seed(seed)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d)) if scaled else RBFKernel(ard_num_dims=d)
    (kernel.base_kernel if scaled else kernel).lengthscale = torch.tensor([0.7, 1.3, 2.0][:d])
    if scaled:
        kernel.outputscale = 1.7
    model = ExactGPModel(kernel, noise_lower_bound=1e-6, profile_constant=profile_constant).double()
    model.likelihood.noise = 0.05
    model.mean.constant.data.fill_(0.3)
    return model


def _data(n=25, d=3, seed=1):
    rng = np.random.default_rng(seed)
    X = torch.tensor(rng.standard_normal((n, d)))
    y = torch.tensor(np.sin(X.numpy()).sum(1) + 0.1 * rng.standard_normal(n))
    return X, y


def test_nll_matches_dense_gaussian_density():
    model, (X, y) = _model(), _data()
    K = model.kernel(X).to_dense().detach().numpy() + 0.05 * np.eye(len(y))
    expected = -multivariate_normal(mean=np.full(len(y), 0.3), cov=K).logpdf(y.numpy())
    assert model.neg_log_marginal_likelihood(X, y).item() == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("scaled", [True, False])
def test_trace_formula_gradient_matches_autograd_through_cholesky(scaled):
    """Also with a ScaleKernel, whose output scale the likelihood applies itself."""
    model, (X, y) = _model(scaled=scaled), _data()
    model.neg_log_marginal_likelihood(X, y).backward()
    fast = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    K = model.kernel(X).to_dense() + model.noise * torch.eye(len(y))
    r = y - model.constant
    L = torch.linalg.cholesky(K)
    direct = 0.5 * r @ torch.cholesky_solve(r[:, None], L).squeeze() + L.diagonal().log().sum()
    direct.backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(fast[name], p.grad, rtol=1e-8, atol=1e-10, msg=name)


@pytest.mark.parametrize("profile_constant", [False, True])
def test_gradient_matches_finite_differences(profile_constant):
    """With a profiled constant, of min_c NLL: the fixed-c gradient at ĉ (envelope theorem)."""
    model, (X, y) = _model(profile_constant=profile_constant), _data()
    params = [p for p in model.parameters() if p.requires_grad]
    model.neg_log_marginal_likelihood(X, y).backward()
    analytic = torch.cat([p.grad.reshape(-1) for p in params])
    numeric = []
    eps = 1e-6
    for p in params:
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += eps
                up = model.neg_log_marginal_likelihood(X, y).item()
                p.view(-1)[i] -= 2 * eps
                down = model.neg_log_marginal_likelihood(X, y).item()
                p.view(-1)[i] += eps
            numeric.append((up - down) / (2 * eps))
    np.testing.assert_allclose(analytic.numpy(), numeric, rtol=1e-5, atol=1e-7)


def _dense_nll(model, X, y, c):
    K = model.kernel(X).to_dense().detach().numpy() + model.noise.item() * np.eye(len(y))
    return -multivariate_normal(mean=np.full(len(y), c), cov=K).logpdf(y.numpy())


def test_profiled_constant_is_the_minimiser_of_the_dense_nll():
    """ĉ = 1ᵀK_y⁻¹y / 1ᵀK_y⁻¹1, the value min_c of the dense -log density, and ĉ lands in ``mean``."""
    model, (X, y) = _model(profile_constant=True), _data()
    y = y + 4.0  # far from the stored 0.3, so a stale constant would show
    value = model.neg_log_marginal_likelihood(X, y).item()
    K = model.kernel(X).to_dense().detach().numpy() + 0.05 * np.eye(len(y))
    Kinv_1, Kinv_y = np.linalg.solve(K, np.ones(len(y))), np.linalg.solve(K, y.numpy())
    c_hat = Kinv_y.sum() / Kinv_1.sum()
    assert model.constant.item() == pytest.approx(c_hat, rel=1e-10)
    assert value == pytest.approx(_dense_nll(model, X, y, c_hat), rel=1e-10)
    for c in (c_hat - 1e-3, c_hat + 1e-3):
        assert _dense_nll(model, X, y, c) > value
    assert not model.mean.raw_constant.requires_grad


def test_profiled_fit_reaches_the_joint_optimum_and_keeps_its_constant():
    """Profiling c changes the path, not the optimum: the fitted loss, constant and
    hyper-parameters agree with learning c jointly, and after the fit the stored
    constant is ĉ for the returned parameters (not for the last point evaluated)."""
    X, y = _data(n=60)
    y = y + 2.0
    fits = {}
    for profile in (False, True):
        model = _model(profile_constant=profile)
        result = fit_hyperparameters(model, X, y)
        fits[profile] = model, result
    (joint, r_joint), (prof, r_prof) = fits[False], fits[True]
    assert r_prof.loss == pytest.approx(r_joint.loss, abs=1e-6)
    assert prof.constant.item() == pytest.approx(joint.constant.item(), abs=1e-3)
    torch.testing.assert_close(prof.noise, joint.noise, rtol=1e-2, atol=0)
    # with restarts the last point evaluated is the end of the last start, not the best
    fit_hyperparameters(prof, X, y, n_restarts=3, random_state=0)
    stored = prof.constant.clone()
    with torch.no_grad():
        prof.neg_log_marginal_likelihood(X, y)
    torch.testing.assert_close(prof.constant, stored, rtol=0, atol=1e-14)


def test_lbfgs_stops_at_the_objective_resolution_a_model_declares():
    """A model whose objective is an estimate (SKI) declares its resolution; L-BFGS stops
    there instead of at the exact engines' 1e-6, close to the same optimum."""
    X, y = _data(n=60)
    fine = fit_hyperparameters(_model(), X, y)
    coarse_model = _model()
    coarse_model.objective_resolution = 1e-2
    coarse = fit_hyperparameters(coarse_model, X, y)
    assert coarse.n_evaluations < fine.n_evaluations
    assert fine.loss <= coarse.loss < fine.loss + 0.05


def test_predictions_match_closed_form_posterior():
    model, (X, y) = _model(), _data()
    Xs = torch.linspace(-2, 2, 7)[:, None].repeat(1, 3)
    post = model.posterior(X, y)
    with torch.no_grad():
        K = model.kernel(X).to_dense() + 0.05 * torch.eye(len(y))
        Ks = model.kernel(Xs, X).to_dense()
        Kss = model.kernel(Xs).to_dense()
        mean = 0.3 + Ks @ torch.linalg.solve(K, y - 0.3)
        cov = Kss - Ks @ torch.linalg.solve(K, Ks.T)
    m, v = post.predict(Xs, latent=True)
    torch.testing.assert_close(m, mean)
    torch.testing.assert_close(v, cov.diagonal())
    m2, cov2 = post.predict(Xs, latent=False, full_cov=True)
    torch.testing.assert_close(cov2, cov + 0.05 * torch.eye(len(Xs)))
    _, vy = post.predict(Xs)
    torch.testing.assert_close(vy, cov.diagonal() + 0.05)


def test_noise_free_gp_interpolates_training_points():
    model, (X, y) = _model(), _data()
    model.likelihood.noise_covar.raw_noise_constraint.lower_bound.fill_(1e-10)
    model.likelihood.noise = 1e-9
    m, v = model.posterior(X, y).predict(X, latent=True)
    torch.testing.assert_close(m, y, atol=1e-5, rtol=0)
    assert v.max().item() < 1e-6


def test_jitter_escalation_warns_and_factorises_singular_matrix():
    x = torch.linspace(0, 1, 30)[:, None]
    K = RBFKernel()(torch.cat([x, x])).to_dense().detach()  # duplicated rows: rank-deficient
    with pytest.warns(NumericalWarning, match="jitter"):
        L, jitter = robust_cholesky(K)
    assert jitter > 0
    torch.testing.assert_close(L @ L.T, K + jitter * torch.eye(60))


def test_nonfinite_matrix_raises_clear_error():
    K = torch.eye(3)
    K[0, 1] = K[1, 0] = math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotPositiveDefiniteError, match="NaN"):
            robust_cholesky(K)


def test_indefinite_matrix_raises_after_max_jitter():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
            robust_cholesky(-torch.eye(4))


class _Rugged(torch.nn.Module):
    """An objective whose line searches backtrack: SciPy's L-BFGS-B alone spends 8 evaluations
    with maxiter=2, maxfun=4 from this start."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor([3.0, -2.0], dtype=torch.float64))

    def neg_log_marginal_likelihood(self, X, y):
        a = self.a
        return y.shape[0] * (0.01 * a.pow(2).sum() + a.abs().pow(0.3).sum() + 0.3 * torch.sin(40 * a).sum())


@pytest.mark.parametrize("max_iter", [1, 2, 3, 5])
def test_lbfgs_evaluation_budget_holds_inside_line_searches(max_iter):
    X, y = torch.zeros(4, 1, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    model = _Rugged()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit_hyperparameters(model, X, y, max_iter=max_iter)
    assert result.n_evaluations <= 2 * max_iter
    # the best point evaluated is kept, even when the budget ran out mid line search
    assert result.loss == pytest.approx(_objective_at(model, X, y)) and result.loss < _objective_at(_Rugged(), X, y)


def _objective_at(model, X, y):
    with torch.no_grad():
        return float(model.neg_log_marginal_likelihood(X, y)) / y.shape[0]
