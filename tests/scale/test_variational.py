"""SVGP: exact limit, ELBO bound, minibatch training, bad input, estimator integration."""

import warnings

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from hdgp import GPRegressor
from hdgp.exceptions import ConvergenceWarning, NumericalWarning
from hdgp.inference import ENGINES, ExactGPModel, SVGPModel, fit_svgp


def _data(n=60, d=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)
    return X, y


def _kernel():
    k = ScaleKernel(RBFKernel(ard_num_dims=3)).double()
    k.base_kernel.lengthscale = torch.tensor([0.9, 1.3, 1.7], dtype=torch.float64)
    k.outputscale = 1.3
    return k


def _fixed_hyper_svgp(Z, **kw):
    model = SVGPModel(_kernel(), inducing_points=Z, learn_inducing=False, **kw)
    model.likelihood.noise = 0.05
    model.mean.constant.data.fill_(0.2)
    for p in model.hyperparameters():
        p.requires_grad_(False)
    return model


def _exact():
    model = ExactGPModel(_kernel(), profile_constant=False).double()  # the same constant as the SVGP
    model.likelihood.noise = 0.05
    model.mean.constant.data.fill_(0.2)
    return model


def test_registered_as_variational_engine():
    assert ENGINES["variational"] is SVGPModel
    assert SVGPModel.uses_inducing_points


def test_one_full_batch_natural_gradient_step_reaches_exact_posterior():
    # Gaussian likelihood is conjugate: with Z = X and fixed hyperparameters a natural-gradient
    # step of length 1 on the full batch lands on the optimal q(u), i.e. the exact posterior,
    # and the ELBO then equals the exact log marginal likelihood.
    X, y = _data()
    model = _fixed_hyper_svgp(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_svgp(model, X, y, batch_size=len(y), max_iter=1, ngd_lr=1.0)
    Xs = torch.randn(20, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    exact = _exact()
    m0, v0 = exact.posterior(X, y).predict(Xs, latent=True)
    post = model.posterior()
    m1, v1 = post.predict(Xs, latent=True)
    torch.testing.assert_close(m1, m0, rtol=0, atol=1e-3)
    torch.testing.assert_close(v1, v0, rtol=0, atol=1e-4)
    lml = -exact.neg_log_marginal_likelihood(X, y).item()
    assert model.elbo(X, y).item() == pytest.approx(lml, abs=1e-2)
    # our posterior object agrees with GPyTorch's own prediction path
    model.eval()
    out = model(Xs)
    torch.testing.assert_close(out.mean.detach(), m1, rtol=0, atol=1e-8)
    torch.testing.assert_close(out.variance.detach(), v1, rtol=0, atol=1e-5)


def test_full_batch_lbfgs_reaches_exact_posterior_and_evidence():
    # Gaussian likelihood, Z = X, fixed hyperparameters: the optimal q(v) is the exact posterior,
    # where the ELBO equals the exact log marginal likelihood. L-BFGS on the Cholesky
    # parametrisation must get there (and never above it: the ELBO is a lower bound).
    X, y = _data(n=40)
    model = _fixed_hyper_svgp(X.clone(), natural_gradient=False)
    lml = -_exact().neg_log_marginal_likelihood(X, y).item()
    result = fit_svgp(model, X, y, optimizer="lbfgs")
    assert result.converged
    with torch.no_grad():
        elbo = model.elbo(X, y).item()
    assert elbo <= lml + 1e-8
    # the gap left: ~7e-4 from the strategy's jitter on K_uu (the exact NGD step has it too)
    # plus L-BFGS's stopping tolerance
    assert elbo == pytest.approx(lml, abs=2e-3)
    Xs = torch.randn(20, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    m0, v0 = _exact().posterior(X, y).predict(Xs, latent=True)
    m1, v1 = model.posterior().predict(Xs, latent=True)
    torch.testing.assert_close(m1, m0, rtol=0, atol=5e-3)  # ftol 1e-6 per datum leaves flat directions of q(v)
    torch.testing.assert_close(v1, v0, rtol=0, atol=1e-3)


def test_full_batch_lbfgs_gives_a_higher_bernoulli_elbo_than_the_same_budget_of_adam_steps():
    X, y = _data(n=120)
    labels = (y > 0).double()
    elbos = {}
    for optimizer in ("lbfgs", "adam"):
        model = SVGPModel(_kernel(), X=X, n_inducing=20, random_state=0, likelihood="bernoulli",
                          natural_gradient=optimizer == "adam")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit_svgp(model, X, labels, optimizer=optimizer, max_iter=100, lr=0.05, random_state=0)
        with torch.no_grad():
            elbos[optimizer] = model.elbo(X, labels).item()
    assert elbos["lbfgs"] > elbos["adam"]


def test_full_batch_lbfgs_bad_input():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="natural_gradient=False"):
        fit_svgp(SVGPModel(_kernel(), inducing_points=X[:5].clone()), X, y, optimizer="lbfgs")
    cholesky = SVGPModel(_kernel(), inducing_points=X[:5].clone(), natural_gradient=False)
    with pytest.raises(ValueError, match="minibatches"):
        fit_svgp(cholesky, X, y, optimizer="lbfgs", batch_size=10)
    with pytest.raises(ValueError, match="optimizer"):
        fit_svgp(cholesky, X, y, optimizer="sgd")


def test_minibatch_training_approaches_exact_posterior_and_elbo_stays_below_evidence():
    X, y = _data(n=80)
    model = _fixed_hyper_svgp(X)
    lml = -_exact().neg_log_marginal_likelihood(X, y).item()
    before = model.elbo(X, y).item()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_svgp(model, X, y, batch_size=16, max_iter=150, ngd_lr=0.2, random_state=0)
    after = model.elbo(X, y).item()
    assert before < after <= lml + 1e-6
    assert after == pytest.approx(lml, abs=0.5)
    Xs = torch.randn(20, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    m0, _ = _exact().posterior(X, y).predict(Xs, latent=True)
    m1, _ = model.posterior().predict(Xs, latent=True)
    assert (m1 - m0).abs().max() < 0.05


def test_streams_numpy_arrays_and_same_seed_same_result():
    X, y = _data(n=50)
    results = []
    for _ in range(2):
        model = _fixed_hyper_svgp(X[:10].clone())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit_svgp(model, X.numpy(), y.numpy(), batch_size=8, max_iter=20, random_state=3)
        results.append(model.posterior().alpha)
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)


def test_non_finite_elbo_stops_and_keeps_last_good_state(monkeypatch):
    X, y = _data(n=40)
    model = SVGPModel(_kernel(), inducing_points=X[:8].clone())
    calls = {"n": 0}
    original = model.likelihood.expected_log_prob

    def flaky(*args, **kwargs):
        calls["n"] += 1
        out = original(*args, **kwargs)
        return out * float("nan") if calls["n"] > 45 else out

    monkeypatch.setattr(model.likelihood, "expected_log_prob", flaky)
    with pytest.warns(NumericalWarning, match="non-finite"):
        result = fit_svgp(model, X, y, batch_size=40, max_iter=100)
    assert not result.converged
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert result.n_evaluations == 46


def test_bad_inputs_raise_clear_errors():
    X, y = _data(n=20)
    model = SVGPModel(_kernel(), inducing_points=X[:5].clone())
    with pytest.raises(ValueError, match="batch_size"):
        fit_svgp(model, X, y, batch_size=21)
    with pytest.raises(ValueError, match="n_inducing"):
        SVGPModel(_kernel(), X=X, n_inducing=21)
    clf = SVGPModel(_kernel(), inducing_points=X[:5].clone(), likelihood="bernoulli")
    with pytest.raises(ValueError, match=r"labels in \{0, 1\}"):
        fit_svgp(clf, X, torch.sign(y))
    with pytest.raises(ValueError, match="likelihood"):
        SVGPModel(_kernel(), inducing_points=X[:5].clone(), likelihood="poisson")


@pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")
def test_gp_regressor_with_variational_inference():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(120)
    est = GPRegressor(inference="variational", n_inducing=20, max_iter=150, random_state=0).fit(X, y)
    assert est.inference_ == "variational"
    assert est.n_iter_ <= 150
    Xs = rng.standard_normal((50, 2))
    mean, std = est.predict(Xs, return_std=True)
    truth = np.sin(2 * Xs[:, 0]) + 0.5 * Xs[:, 1]
    assert np.sqrt(np.mean((mean - truth) ** 2)) < 0.3
    assert np.all(std > 0)
    assert np.isfinite(est.log_marginal_likelihood_value_)


def test_regressors_pass_batch_size_to_the_minibatch_loop(monkeypatch):
    """batch_size reaches the SVGP loop, capped at n; None keeps the loop's default; bad values are refused."""
    from hdgp.inference import variational

    seen = []
    real = variational.fit_svgp

    def spy(model, X, y, *, batch_size=None, **kwargs):
        seen.append(batch_size)
        return real(model, X, y, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(variational, "fit_svgp", spy)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = X[:, 0] + 0.1 * rng.standard_normal(60)
    for given, expected in ((16, 16), (500, 60), (None, None)):
        GPRegressor(inference="variational", n_inducing=10, batch_size=given, max_iter=3, random_state=0).fit(X, y)
        assert seen[-1] == expected
    with pytest.raises(ValueError, match="'batch_size' parameter of .* must be an int in the range"):
        GPRegressor(inference="variational", batch_size=0).fit(X, y)


def _bernoulli_svgp(X, m=10):
    model = SVGPModel(_kernel(), X=X, n_inducing=m, random_state=0, likelihood="bernoulli", natural_gradient=False)
    model.mean.constant.data.fill_(0.1)
    return model


def _whitened_elbo(model, X, y):
    """The ELBO written out from the stored q(v) = N(m, R R^T) (R the Cholesky variational parameter):
    mu_i = c + a_i^T m, v_i = k_ii + j - |a_i|^2 + |R^T a_i|^2, KL = (|R|_F^2 + m^T m - M - log|R R^T|) / 2."""
    A, base_var, c = model._whitened_terms(X)
    q = model.variational_strategy._variational_distribution
    m, R = q.variational_mean, q.chol_variational_covar.tril()
    RA = R.T @ A
    kl = 0.5 * ((R * R).sum() + m @ m - R.shape[0] - 2 * torch.log(torch.diagonal(R).abs()).sum())
    return model._expected_log_lik(c + A.T @ m, base_var + (RA * RA).sum(0), y).sum() - kl


def test_optimal_q_is_a_stationary_point_of_the_elbo():
    # the inner solve of the profiled L-BFGS: at the q(v) it stores, the ELBO has zero gradient in
    # the variational mean and Cholesky factor (the exact quadrature ELBO; GPyTorch's Bernoulli
    # log-probability clips probabilities, which moves its value by ~3e-3 here)
    X, y = _data(n=80)
    labels = (y > 0).double()
    model = _bernoulli_svgp(X)
    with torch.no_grad():
        A, base_var, c = model._whitened_terms(X)
        model._set_q(*model._optimal_q(A, base_var, c, labels, tol=1e-12))
    q = model.variational_strategy._variational_distribution
    elbo = _whitened_elbo(model, X, labels)
    g_mean, g_chol = torch.autograd.grad(elbo, (q.variational_mean, q.chol_variational_covar))
    assert g_mean.abs().max() < 1e-5 and g_chol.tril().abs().max() < 1e-5
    # and fit_svgp with nothing left to fit but q(v) lands on the same ELBO, above the prior's
    joint = _bernoulli_svgp(X)
    for p in joint.hyperparameters():
        p.requires_grad_(False)
    with torch.no_grad():
        prior = _whitened_elbo(joint, X, labels).item()
    fit_svgp(joint, X, labels, optimizer="lbfgs")
    with torch.no_grad():
        assert _whitened_elbo(joint, X, labels).item() == pytest.approx(elbo.item(), abs=1e-6)
    assert elbo.item() > prior + 1.0


def test_profiled_elbo_gradient_matches_finite_differences():
    # envelope theorem: d/dtheta max_q ELBO(theta, q) = the partial derivative at the optimal q
    X, y = _data(n=60)
    labels = (y > 0).double()
    model = _bernoulli_svgp(X)
    raw = model.kernel.base_kernel.raw_lengthscale

    def profiled(value):
        with torch.no_grad():
            raw[0, 1] = value
        model._q_start = None
        return model._profiled_neg_elbo(X, labels)

    x0, h = raw[0, 1].item(), 1e-4
    loss = profiled(x0)
    (grad,) = torch.autograd.grad(loss, raw)
    fd = (profiled(x0 + h).item() - profiled(x0 - h).item()) / (2 * h)
    assert grad[0, 1].item() == pytest.approx(fd, rel=1e-4, abs=1e-6)


def test_anderson_least_squares_does_not_depend_on_leftover_heap_memory():
    # the Anderson step of the inner q(v) solve is a function of its inputs alone: the least-squares
    # coefficients are bitwise the same whatever small blocks were freed just before (LAPACK's gelsy,
    # torch.linalg.lstsq's default driver on the CPU, reads its pivot array as input, and PyTorch
    # allocates it uninitialised, so a pivoted solve would pick up whatever was left there)
    from hdgp.linalg import min_norm_lstsq

    gen = torch.Generator().manual_seed(0)
    dF = torch.randn(80, 2, generator=gen, dtype=torch.float64)
    dF[:, 1] += 3.0 * dF[:, 0]  # correlated columns, as successive residual differences are
    f = torch.randn(80, generator=gen, dtype=torch.float64)
    results = []
    previous = torch.are_deterministic_algorithms_enabled()
    try:
        for fill_empty in (False, True):  # True: PyTorch fills uninitialised integers with their maximum
            torch.use_deterministic_algorithms(fill_empty)
            for fill in range(-2, 3):
                for size in range(1, 17):
                    for count in (1, 2, 5):
                        junk = [torch.full((size,), fill, dtype=torch.int32) for _ in range(count)]
                        del junk  # freed blocks for the next small allocations
                        results.append(min_norm_lstsq(dF, f))
    finally:
        torch.use_deterministic_algorithms(previous)
    for r in results[1:]:
        assert torch.equal(r, results[0])
    # and they are the least-squares solution (the normal equations, well conditioned here)
    exact = torch.linalg.solve(dF.T @ dF, dF.T @ f)
    torch.testing.assert_close(results[0], exact, rtol=1e-10, atol=0)
