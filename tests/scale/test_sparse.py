"""SGPR (Titsias bound): bound <= exact evidence, equality at Z = X, posterior limits, k-means init."""

import math

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from hdgp.inference import ENGINES, ExactGPModel, SGPRModel
from hdgp.inference.inducing import discrete_columns, kmeans_inducing_points
from hdgp.training import fit_hyperparameters


def _data(n=120, d=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)
    return X, y


def _kernel(d, lengthscale=(0.9, 1.3, 1.7), outputscale=1.3):
    k = ScaleKernel(RBFKernel(ard_num_dims=d)).double()
    k.base_kernel.lengthscale = torch.tensor(lengthscale[:d], dtype=torch.float64)
    k.outputscale = outputscale
    return k


def _set_common(model, noise=0.05, constant=0.2):
    """Fixed noise and constant (the models built for it do not profile the constant)."""
    model.likelihood.noise = noise
    model.mean.constant.data.fill_(constant)
    return model.double()


def test_registered_as_sparse_engine():
    assert ENGINES["sparse"] is SGPRModel
    assert SGPRModel.uses_inducing_points


@pytest.mark.parametrize("m", [5, 20, 60])
def test_bound_below_exact_log_marginal_likelihood(m):
    X, y = _data()
    exact = _set_common(ExactGPModel(_kernel(3), profile_constant=False))
    sparse = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=m, random_state=0, profile_constant=False))
    with torch.no_grad():
        lml = -exact.neg_log_marginal_likelihood(X, y).item()
        bound = -sparse.neg_log_marginal_likelihood(X, y).item()
    assert bound <= lml + 1e-8
    assert math.isfinite(bound)


def test_bound_increases_with_nested_inducing_sets():
    # Adding inducing points can only tighten the collapsed bound (Titsias 2009, Sec. 3).
    X, y = _data()
    bounds = []
    for m in (4, 16, 64):
        Z = X[:m]
        model = _set_common(SGPRModel(_kernel(3), inducing_points=Z, jitter=1e-10, profile_constant=False))
        with torch.no_grad():
            bounds.append(-model.neg_log_marginal_likelihood(X, y).item())
    assert bounds[0] <= bounds[1] + 1e-8 <= bounds[2] + 2e-8


def test_bound_equals_exact_when_inducing_points_are_training_points():
    X, y = _data(n=60)
    exact = _set_common(ExactGPModel(_kernel(3), profile_constant=False))
    sparse = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=60, jitter=1e-10, profile_constant=False))
    torch.testing.assert_close(sparse.inducing_points.detach(), X)
    with torch.no_grad():
        lml = -exact.neg_log_marginal_likelihood(X, y).item()
        bound = -sparse.neg_log_marginal_likelihood(X, y).item()
    assert bound == pytest.approx(lml, rel=1e-6, abs=1e-6)


def test_posterior_equals_exact_when_inducing_points_are_training_points():
    X, y = _data(n=60)
    Xs = torch.randn(25, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    exact = _set_common(ExactGPModel(_kernel(3), profile_constant=False)).posterior(X, y)
    sparse = _set_common(SGPRModel(_kernel(3), inducing_points=X, jitter=1e-10, profile_constant=False)).posterior(X, y)
    for latent in (True, False):
        m0, v0 = exact.predict(Xs, latent=latent)
        m1, v1 = sparse.predict(Xs, latent=latent)
        torch.testing.assert_close(m1, m0, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(v1, v0, rtol=1e-4, atol=1e-6)
    _, c0 = exact.predict(Xs, latent=True, full_cov=True)
    _, c1 = sparse.predict(Xs, latent=True, full_cov=True)
    torch.testing.assert_close(c1, c0, rtol=1e-4, atol=1e-6)


def test_posterior_mean_is_kernel_times_alpha_and_variance_matches_full_cov():
    X, y = _data()
    model = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=15, random_state=1))
    post = model.posterior(X, y)
    Xs = torch.randn(10, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    mean, var = post.predict(Xs, latent=True)
    torch.testing.assert_close(mean, post.constant + model.kernel(Xs, post.X).to_dense() @ post.alpha)
    _, cov = post.predict(Xs, latent=True, full_cov=True)
    torch.testing.assert_close(cov.diagonal(), var)
    assert torch.all(var >= 0)
    # sparse latent variance is never below the exact posterior variance at the same hyperparameters
    _, v_exact = _set_common(ExactGPModel(_kernel(3), profile_constant=False)).posterior(X, y).predict(Xs, latent=True)
    assert torch.all(var >= v_exact - 1e-8)


def test_gradients_match_finite_differences():
    X, y = _data(n=50)
    model = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=10, random_state=0, learn_inducing=True,
                                  profile_constant=False))
    params = [p for p in model.parameters() if p.requires_grad]
    loss = model.neg_log_marginal_likelihood(X, y)
    grads = torch.autograd.grad(loss, params)
    eps = 1e-6
    for p, g in zip(params, grads):
        flat = p.data.view(-1)
        for i in range(min(flat.numel(), 3)):
            old = flat[i].item()
            flat[i] = old + eps
            up = model.neg_log_marginal_likelihood(X, y).item()
            flat[i] = old - eps
            down = model.neg_log_marginal_likelihood(X, y).item()
            flat[i] = old
            assert g.view(-1)[i].item() == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-5)


def test_row_blocked_bound_equals_single_block(monkeypatch):
    # above CROSS_BLOCK entries of K_uf the bound and its gradient are built in
    # row blocks (here 7 rows each, the last one shorter): same value, gradient and posterior
    from hdgp.inference import sparse

    X, y = _data(n=50)
    Xs = X[:6] + 0.1

    def evaluate():
        model = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=10, random_state=0, learn_inducing=True,
                                       profile_constant=False))
        params = [p for p in model.parameters() if p.requires_grad]
        loss = model.neg_log_marginal_likelihood(X, y)
        return loss.detach(), torch.autograd.grad(loss, params), model.posterior(X, y).predict(Xs), len(params)

    whole = evaluate()
    monkeypatch.setattr(sparse, "CROSS_BLOCK", 70)
    blocked = evaluate()
    assert whole[3] == blocked[3] == 5  # lengthscale, outputscale, noise, constant, inducing inputs
    torch.testing.assert_close(blocked[0], whole[0], rtol=1e-12, atol=1e-10)
    for a, b in zip(whole[1], blocked[1]):
        torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-10)
    for a, b in zip(whole[2], blocked[2]):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")
def test_training_raises_bound_and_learned_inducing_points_move():
    X, y = _data(n=150)
    model = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=12, random_state=0, learn_inducing=True,
                                  profile_constant=False))
    Z0 = model.inducing_points.detach().clone()
    with torch.no_grad():
        before = -model.neg_log_marginal_likelihood(X, y).item()
    fit_hyperparameters(model, X, y, max_iter=60)
    with torch.no_grad():
        after = -model.neg_log_marginal_likelihood(X, y).item()
    assert after > before
    assert not torch.allclose(model.inducing_points.detach(), Z0)


def test_too_many_inducing_points_raise():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="n_inducing"):
        SGPRModel(_kernel(3), X=X, n_inducing=31)
    model = SGPRModel(_kernel(3), inducing_points=torch.randn(40, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="inducing points"):
        model.neg_log_marginal_likelihood(X, y)


@pytest.mark.parametrize("name", ["SGPR-RBF-ARD", "SVGP"])
def test_estimators_use_at_most_one_inducing_point_per_row(name):
    """As the classifiers do: the default 512 inducing points on 30 rows used to be an error."""
    import warnings

    import hdgp

    X, y = _data(n=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = hdgp.preset(name, max_iter=5, random_state=0).fit(X.numpy(), y.numpy())
    assert est.model_.inducing_points.shape == (30, 3) and np.isfinite(est.predict(X.numpy())).all()


def test_kmeans_keeps_binary_and_categorical_columns_on_observed_values():
    rng = np.random.default_rng(0)
    n = 2000
    X = np.column_stack([
        rng.standard_normal(n),
        rng.binomial(1, 0.3, n).astype(float),         # binary, unbalanced
        rng.integers(0, 4, n).astype(float) * 2.5,    # categorical codes
        rng.standard_normal(n),
    ])
    assert discrete_columns(X) == [1, 2]
    Z = kmeans_inducing_points(X, 40, random_state=0)
    assert Z.shape == (40, 4)
    assert set(np.unique(Z[:, 1])) <= {0.0, 1.0}
    assert set(np.unique(Z[:, 2])) <= {0.0, 2.5, 5.0, 7.5}
    assert len(np.unique(Z[:, 1])) == 2  # both levels represented, not collapsed to one value
    assert len(np.unique(Z[:, 0])) > 10  # continuous columns keep the centroids
    # same seed, same inducing points
    np.testing.assert_array_equal(Z, kmeans_inducing_points(X, 40, random_state=0))
    # a column with more levels than `max_levels` is discrete only when named
    codes = rng.integers(0, 15, n).astype(float)
    X15 = np.column_stack([X[:, 0], codes])
    assert discrete_columns(X15) == []
    assert not np.all(np.isin(kmeans_inducing_points(X15, 40, random_state=0)[:, 1], codes))
    Z15 = kmeans_inducing_points(X15, 40, random_state=0, discrete=[1])
    assert set(np.unique(Z15[:, 1])) <= set(codes.tolist())
    assert len(np.unique(Z15[:, 0])) > 10


def test_sparse_sobol_close_to_exact_sobol_for_oak_kernel():
    from hdgp.explain import compute_sobol
    from hdgp.kernels.additive_kernel import AdditiveKernel
    from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel
    from hdgp.measures import gaussian_measure

    n, D = 1000, 3
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, D, generator=gen, dtype=torch.float64)
    y = torch.sin(1.5 * X[:, 0]) + 0.6 * X[:, 1] + 0.5 * X[:, 0] * X[:, 2] \
        + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)

    def oak():
        base = ConstrainedSEKernel(gaussian_measure(np.zeros(D), np.ones(D)))
        base.lengthscale = torch.tensor([1.0, 2.0, 1.5], dtype=torch.float64).reshape(D, 1, 1)
        k = AdditiveKernel(base, num_dims=D, max_order=2)
        k.order_variances = torch.tensor([0.1, 1.0, 0.3], dtype=torch.float64)
        return k.double()

    exact = _set_common(ExactGPModel(oak(), profile_constant=False), noise=0.01).posterior(X, y)
    sparse = _set_common(SGPRModel(oak(), X=X, n_inducing=150, random_state=0), noise=0.01).posterior(X, y)
    s_exact = compute_sobol(exact.kernel, exact.X, exact.alpha)
    s_sparse = compute_sobol(sparse.kernel, sparse.X, sparse.alpha)
    torch.testing.assert_close(s_sparse.by_order, s_exact.by_order, rtol=0, atol=0.01)
    exact_terms = dict(zip(s_exact.terms, s_exact.values.tolist()))
    for term, value in zip(s_sparse.terms, s_sparse.values.tolist()):
        assert value == pytest.approx(exact_terms[term], abs=0.01)
    assert s_sparse.total == pytest.approx(s_exact.total, rel=0.02)


@pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")
def test_subset_start_whose_noise_ends_on_its_lower_bound(monkeypatch):
    """The exact subset fit may leave its noise exactly on the open lower bound (gas, split 2);
    the sparse model then starts just above it instead of failing to invert its constraint."""
    import hdgp
    import hdgp.estimators._base as base

    real_fit = base.fit_hyperparameters
    sparse_starts = []

    def fit_to_the_bound(model, *args, **kwargs):
        if not isinstance(model, ExactGPModel):
            sparse_starts.append(model.likelihood.noise.item())
        result = real_fit(model, *args, **kwargs)
        if isinstance(model, ExactGPModel):
            with torch.no_grad():
                model.likelihood.noise_covar.raw_noise.fill_(-1e3)  # noise == bound in float64
            bound = model.likelihood.noise_covar.raw_noise_constraint.lower_bound
            assert model.likelihood.noise.item() == bound.item()
        return result

    monkeypatch.setattr(base, "SUBSET_INIT_ROWS", 60)
    monkeypatch.setattr(base, "fit_hyperparameters", fit_to_the_bound)
    X, y = _data(n=200)
    est = hdgp.preset("SGPR-RBF-ARD", n_inducing=15, max_iter=20, random_state=0).fit(X.numpy(), y.numpy())
    assert est.init_result_ is not None
    assert sparse_starts[0] == pytest.approx(est.noise_lower_bound * (1 + 1e-6), rel=1e-9)  # the subset start
    assert np.isfinite(est.predict(X[:5].numpy())).all()


@pytest.mark.filterwarnings("ignore::hdgp.exceptions.ConvergenceWarning")
def test_sparse_fit_starts_from_an_exact_subset_fit(monkeypatch):
    """Above SUBSET_INIT_ROWS rows a sparse estimator first fits an exact GP on a random subset."""
    import hdgp
    import hdgp.estimators._base as base

    monkeypatch.setattr(base, "SUBSET_INIT_ROWS", 60)
    X, y = _data(n=200)
    est = hdgp.preset("SGPR-RBF-ARD", n_inducing=15, random_state=0).fit(X.numpy(), y.numpy())
    assert est.init_result_ is not None and est.init_result_.n_evaluations > 0
    # SGPR is optimised from the subset start and the generic one; the better bound is kept
    losses = est.fit_result_.restart_losses
    assert len(losses) == 2 and est.fit_result_.loss == min(losses)
    assert est.start_ == ("subset", "generic")[int(np.argmin(losses))]
    assert est.log_marginal_likelihood_value_ == pytest.approx(-est.fit_result_.loss * 200, rel=1e-6)
    svgp = hdgp.preset("RBF-ARD", inference="variational", n_inducing=15, max_iter=30, random_state=0)
    svgp.fit(X.numpy(), y.numpy())
    assert svgp.start_ == "subset" and len(svgp.fit_result_.restart_losses) == 1
    small = hdgp.preset("SGPR-RBF-ARD", n_inducing=15, random_state=0).fit(X[:50].numpy(), y[:50].numpy())
    assert small.init_result_ is None
    exact = hdgp.preset("RBF-ARD", random_state=0).fit(X.numpy(), y.numpy())
    assert exact.init_result_ is None


def test_sgpr_does_not_collapse_to_noise_on_pumadyn32nm(data_dir):
    """pumadyn32nm (d = 32, 4 relevant inputs), m = 100: from the generic start alone the
    collapsed bound's trace penalty drove the signal variance to zero (test RMSE 1.003, the
    target's own spread); with the exact-subset start 0.23 (an exact GP on 2000 rows: 0.21)."""
    import hdgp
    from hdgp.data.uci import load_uci

    X, y, Xt, yt, _ = load_uci("pumadyn32nm", 0, data_dir=data_dir)
    est = hdgp.preset("SGPR-RBF-ARD", n_inducing=100, random_state=0).fit(X, y)
    assert np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)) / np.std(y) < 0.3


def test_sgpr_gradient_includes_the_relative_jitter_and_matches_finite_differences():
    """K_uu gets jitter 1e-6·mean(diag K_uu), which moves with the output scale; with an
    ill-conditioned K_uu the bound is sensitive to it. Its gradient was left out: the
    output-scale derivative was off 7x, L-BFGS stalled, and fits of y and y + 1000 differed."""
    import warnings

    import hdgp
    from hdgp.training import _FlatParameters, _objective

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = hdgp.GPRegressor(inference="sparse", n_inducing=60, random_state=0).fit(X, y)
        b = hdgp.GPRegressor(inference="sparse", n_inducing=60, random_state=0).fit(X, y + 1000.0)
    assert a.fit_result_.loss == pytest.approx(b.fit_result_.loss, abs=1e-6)
    np.testing.assert_allclose(b.predict(X[:20]) - 1000.0, a.predict(X[:20]), atol=1e-4)
    model, yt = a.model_, torch.as_tensor((y - a.y_mean_) / a.y_scale_)
    for p in model.parameters():
        p.requires_grad_(True)
    flat = _FlatParameters(model)
    x0 = flat.get()

    def value_and_grad(x):
        flat.set(x)
        model.zero_grad()
        loss = _objective(model, a.X_train_, yt)
        loss.backward()
        return loss.item(), flat.grad()

    _, grad = value_and_grad(x0)
    h = 1e-5  # at 1e-6 the loss's round-off (~1e-12) already moves the differences by ~1e-6
    for i in range(len(x0)):
        step = np.zeros_like(x0)
        step[i] = h
        fd = (value_and_grad(x0 + step)[0] - value_and_grad(x0 - step)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-3, abs=2e-6), i


def test_float32_sgpr_reaches_the_float64_optimum():
    """The bound's gradient coefficients cancel heavily; in float32 they were wrong by O(1) and the
    fit stopped 48 nats short (loss -0.337 vs -0.458 per row, RMSE 0.078 vs 0.046). They are now
    computed in float64 whatever the kernel dtype."""
    import warnings

    import hdgp

    rng = np.random.default_rng(32)
    X, Xt = rng.normal(size=(400, 3)), rng.normal(size=(100, 3))
    f = lambda Z: np.sin(2 * Z[:, 0]) + 0.5 * Z[:, 1] * Z[:, 2]  # noqa: E731
    y = f(X) + 0.1 * rng.standard_normal(400)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in ("float64", "float32"):
            fits[dtype] = hdgp.GPRegressor(inference="sparse", n_inducing=60, random_state=0, dtype=dtype).fit(X, y)
    assert fits["float32"].fit_result_.loss == pytest.approx(fits["float64"].fit_result_.loss, abs=5e-3)
    rmse = {k: np.sqrt(np.mean((est.predict(Xt) - f(Xt)) ** 2)) for k, est in fits.items()}
    assert rmse["float32"] < 1.1 * rmse["float64"]


def test_profiled_constant_maximises_the_bound():
    """ĉ = 1ᵀQ_y⁻¹y / 1ᵀQ_y⁻¹1 through the Woodbury factors: the profiled bound is the fixed-c
    bound at ĉ, larger than at ĉ ± 1e-3, and with Z = X it is the profiled exact likelihood."""
    X, y = _data(n=60)
    y = y + 3.0
    Z = X[:15]
    profiled = _set_common(SGPRModel(_kernel(3), inducing_points=Z))
    with torch.no_grad():
        value = profiled.neg_log_marginal_likelihood(X, y).item()
    c_hat = profiled.constant.item()
    assert not profiled.mean.raw_constant.requires_grad

    def fixed_value(c):
        model = _set_common(SGPRModel(_kernel(3), inducing_points=Z, profile_constant=False), constant=c)
        with torch.no_grad():
            return model.neg_log_marginal_likelihood(X, y).item()

    assert value == pytest.approx(fixed_value(c_hat), rel=1e-12)
    assert fixed_value(c_hat - 1e-3) > value and fixed_value(c_hat + 1e-3) > value
    full = _set_common(SGPRModel(_kernel(3), inducing_points=X, jitter=1e-10))
    exact = _set_common(ExactGPModel(_kernel(3)))
    with torch.no_grad():
        assert full.neg_log_marginal_likelihood(X, y).item() == pytest.approx(
            exact.neg_log_marginal_likelihood(X, y).item(), rel=1e-6)
    assert full.constant.item() == pytest.approx(exact.constant.item(), rel=1e-5)


def test_profiled_bound_gradient_matches_finite_differences():
    X, y = _data(n=50)
    model = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=10, random_state=0, learn_inducing=True))
    params = [p for p in model.parameters() if p.requires_grad]
    assert len(params) == 4  # lengthscale, outputscale, noise, inducing inputs: the constant is profiled
    model.neg_log_marginal_likelihood(X, y + 2.0).backward()
    eps = 1e-6
    for p in params:
        for i in range(0, p.numel(), 3):
            with torch.no_grad():
                p.view(-1)[i] += eps
                up = model.neg_log_marginal_likelihood(X, y + 2.0).item()
                p.view(-1)[i] -= 2 * eps
                down = model.neg_log_marginal_likelihood(X, y + 2.0).item()
                p.view(-1)[i] += eps
            assert p.grad.view(-1)[i].item() == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-5)


def test_verbose_sparse_fit_names_each_stage(capsys):
    """A sparse fit trains three times (exact subset start, from that start, from the generic
    start); with verbose=True each progress bar says which stage it is."""
    import numpy as np

    import hdgp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    hdgp.GPRegressor(inference="sparse", n_inducing=20, max_iter=3, verbose=True).fit(X, np.sin(X[:, 0]))
    err = capsys.readouterr().err
    for label in ("start: exact fit on 500 rows", "fit from the subset start", "fit from the generic start"):
        assert label in err


def test_summary_calls_a_sparse_objective_a_lower_bound():
    import numpy as np

    import hdgp

    X = np.random.default_rng(0).normal(size=(80, 2))
    text = hdgp.summary(hdgp.GPRegressor(inference="sparse", n_inducing=10, max_iter=3).fit(X, X[:, 0]))
    assert "evidence lower bound (standardised y)" in text and "log marginal likelihood" not in text


def test_sparse_fit_runs_kmeans_once_for_both_starts(monkeypatch):
    """The subset and the generic start build the model on the same rows with the same seed: k-means
    runs once per fit and both models start from its inducing inputs (those the engine would choose)."""
    import hdgp
    import hdgp.estimators._base as base

    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return kmeans_inducing_points(*args, **kwargs)

    monkeypatch.setattr(base, "SUBSET_INIT_ROWS", 60)
    monkeypatch.setattr(base, "kmeans_inducing_points", counting)
    built = []
    real_build = base.BaseGPRegressor._build_model
    monkeypatch.setattr(base.BaseGPRegressor, "_build_model",
                        lambda self, Xt: built.append(real_build(self, Xt)) or built[-1])
    X, y = _data(n=200)
    est = hdgp.preset("SGPR-RBF-ARD", n_inducing=15, max_iter=5, random_state=0).fit(X.numpy(), y.numpy())
    assert len(built) == 2 and len(calls) == 1 and not hasattr(est, "_kmeans_cache")
    own = SGPRModel(_kernel(3), X=est.X_train_, n_inducing=15, random_state=est._fit_seed_)
    for model in built:  # (not learned: SGPR keeps its k-means start)
        assert torch.equal(model.inducing_points, own.inducing_points)
    assert built[0].inducing_points.data_ptr() != built[1].inducing_points.data_ptr()  # copies, not one tensor
    est.fit(X.numpy(), y.numpy())  # a refit computes it afresh (new rows may share the old buffer's address)
    assert len(calls) == 2


# --- independent oracle: Titsias (2009) eq. (9) written out densely in NumPy -------------------------------

def _titsias_bound_numpy(X, y, Z, lengthscale, outputscale, noise, constant, jitter):
    r"""Titsias (2009), eq. (9), from its definition with dense n × n matrices (no shared code with
    ``inference/sparse.py``: no Cholesky updates, no :math:`A`, :math:`B`, :math:`c_B`):

    .. math::

        \mathcal F = \log N(y - c \mid 0, Q_{nn} + \sigma^2 I) - \frac{1}{2\sigma^2}\operatorname{tr}(K_{nn} - Q_{nn}),
        \qquad Q_{nn} = K_{nm} K_{mm}^{-1} K_{mn}.

    The RBF-ARD kernel is :math:`s\exp(-\tfrac12\sum_d (x_d - x'_d)^2/\ell_d^2)`, and :math:`K_{mm}`
    carries the model's documented jitter :math:`j\,\overline{\operatorname{diag}K_{mm}}`.
    """
    def k(A, B):
        d2 = (((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1)
        return outputscale * np.exp(-0.5 * d2)

    Knn, Knm, Kmm = k(X, X), k(X, Z), k(Z, Z)
    Kmm = Kmm + jitter * Kmm.diagonal().mean() * np.eye(len(Z))
    Q = Knm @ np.linalg.solve(Kmm, Knm.T)
    C = Q + noise * np.eye(len(X))
    r = y - constant
    _, logdet = np.linalg.slogdet(C)
    log_normal = -0.5 * (r @ np.linalg.solve(C, r)) - 0.5 * logdet - 0.5 * len(X) * np.log(2 * np.pi)
    return log_normal - np.trace(Knn - Q) / (2 * noise)


def _numpy_bound_of(model, X, y):
    kernel = model.kernel
    return _titsias_bound_numpy(
        X.numpy(), y.numpy(), model.inducing_points.detach().numpy(),
        kernel.base_kernel.lengthscale.detach().numpy().reshape(-1), kernel.outputscale.item(),
        model.likelihood.noise.item(), model.mean.constant.item(), model.jitter,
    )


@pytest.mark.parametrize("m", [3, 12, 40])
def test_bound_matches_titsias_eq9_written_out_densely_at_m_below_n(m):
    """The engine's -F at m < n against eq. (9) in dense NumPy: value to 1e-8 relative (float64), and
    every coordinate of its gradient (raw length-scales, outputscale, noise, constant, inducing inputs)
    against central differences of the *independent* formula (step 1e-5: error O(1e-10) truncation,
    O(1e-11 |F| / 1e-5) rounding, so a 1e-5 relative / 1e-6 absolute tolerance). At m < n the trace term
    tr(K - Q)/(2σ²) is tens of nats here, so dropping or rescaling it is caught by the value and by the
    noise / length-scale components of the gradient."""
    X, y = _data(n=70)
    model = _set_common(SGPRModel(_kernel(3), X=X, n_inducing=m, random_state=0, learn_inducing=True,
                                  profile_constant=False))
    loss = model.neg_log_marginal_likelihood(X, y)
    reference = _numpy_bound_of(model, X, y)
    assert -loss.item() == pytest.approx(reference, rel=1e-8, abs=1e-8)

    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    assert len(named) == 5  # lengthscale, outputscale, noise, constant, inducing inputs
    grads = torch.autograd.grad(loss, [p for _, p in named])
    eps = 1e-5
    for (name, p), g in zip(named, grads):
        flat = p.data.view(-1)
        for i in range(min(flat.numel(), 6)):
            old = flat[i].item()
            flat[i] = old + eps
            up = _numpy_bound_of(model, X, y)
            flat[i] = old - eps
            down = _numpy_bound_of(model, X, y)
            flat[i] = old
            fd = -(up - down) / (2 * eps)  # gradient of -F
            assert g.view(-1)[i].item() == pytest.approx(fd, rel=1e-5, abs=1e-6), (name, i)
