"""Missing inputs in OAK: the expected kernel, exact against enumeration and Monte-Carlo.

A missing :math:`x_j` is marginalised under its input measure :math:`p_j`
(:mod:`hdgp.kernels.orthogonal_kernel`). What holds exactly, and is checked here:

- kernel: :math:`k(X, X)` with NaN cells equals :math:`\\mathbb E[k(X_{\\text{filled}}, X_{\\text{filled}})]`
  over independent fill-ins of every missing cell (enumerated for empirical measures);
- mean: the prediction at a row missing :math:`x_j` is :math:`\\mathbb E_{x_j \\sim p_j}[\\mu(x)]`;
- variance: it is :math:`\\mathbb E[k(x, x)] - \\bar k^\\top K_y^{-1} \\bar k` with
  :math:`\\bar k = \\mathbb E[k(X, x)]`, i.e. the average observed-case variance
  :math:`\\mathbb E[\\sigma^2(x)]` plus :math:`\\mathbb E[k^\\top K_y^{-1} k] - \\bar k^\\top K_y^{-1} \\bar k \\ge 0`;
  equivalently the posterior variance of the terms without :math:`j` plus the prior
  variance of the terms with :math:`j`.
"""

import itertools

import numpy as np
import pytest
import torch

from hdgp import GPRegressor, OAKRegressor
from hdgp.estimators.additive import AdditiveGPRegressor
from hdgp.kernels.feature_stack import FeatureStackKernel
from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel, OrthogonalAdditiveKernel
from hdgp.measures import empirical_measure, gaussian_measure, gaussian_mixture_measure

pytestmark = pytest.mark.usefixtures("float64_default")


def _se(measure, lengthscales):
    k = ConstrainedSEKernel(measure)
    k.lengthscale = torch.tensor(lengthscales).reshape(-1, 1, 1)
    return k


@pytest.mark.parametrize("kind", ["gaussian", "mixture", "empirical"])
def test_expected_diagonal_matches_monte_carlo(kind):
    rng = np.random.default_rng(1)
    measure = {
        "gaussian": gaussian_measure([0.3, -1.0], [0.8, 1.5]),
        "mixture": gaussian_mixture_measure([rng.normal(size=200), rng.exponential(size=200)], 3, random_state=0),
        "empirical": empirical_measure([rng.normal(size=30).round(1), rng.exponential(size=20)]),
    }[kind]
    k = _se(measure, [0.7, 1.3])
    n = 200_000
    x = measure.sample(n, torch.Generator().manual_seed(0)).T.unsqueeze(-1)  # (D, n, 1)
    values = k.forward(x, x, diag=True)  # (D, n)
    mc, se = values.mean(-1), values.std(-1) / n**0.5
    closed = k.expected_diagonal().reshape(-1)
    assert torch.all((closed - mc).abs() < 5 * se + 1e-12), (closed, mc, se)
    # a NaN cell gets exactly that value on its diagonal and zero covariance with every point
    nan = torch.full((2, 1, 1), float("nan"))
    torch.testing.assert_close(k.forward(nan, nan, diag=True).reshape(-1), closed)
    others = torch.cat([x[:, :5], nan], dim=1)
    assert torch.equal(k.forward(nan, others), torch.zeros(2, 1, 6))


def test_categorical_missing_level_is_marginalised():
    k = ConstrainedCategoricalKernel([0.2, 0.5, 0.3], rank=1)
    B = k.constrained_matrix()
    x = torch.tensor([[0.0], [float("nan")], [2.0]]).unsqueeze(0)  # (1, 3, 1)
    expected = (k.level_weights * B.diagonal()).sum()
    torch.testing.assert_close(k.forward(x, x, diag=True)[0, 1], expected)
    K = k.forward(x, x)[0]
    assert torch.equal(K[1], torch.zeros(3)) and torch.equal(K[:, 1], torch.zeros(3))
    assert torch.equal(k.sobol_integral(x, x)[0, 1], torch.zeros(3))


def _mixed_kernel(max_order=3):
    """Two continuous features (empirical measures) and one categorical, all orders up to 3."""
    measure = empirical_measure([np.array([-1.0, 0.2, 0.9, 1.5]), np.array([0.0, 1.0, 2.5])])
    cont = _se(measure, [0.8, 1.1])
    cat = ConstrainedCategoricalKernel([0.5, 0.3, 0.2], rank=1)
    kernel = OrthogonalAdditiveKernel(FeatureStackKernel([cont, cat], [[0, 1], [2]]), num_dims=3, max_order=max_order)
    kernel.order_variances = torch.tensor([0.3, 1.0, 0.7, 0.4])
    supports = [(measure.locations[0], measure.weights[0]), (measure.locations[1, :3], measure.weights[1, :3]),
                (torch.arange(3.0), cat.level_weights)]
    return kernel, supports


def test_expected_kernel_equals_enumerated_fill_ins():
    """k(X, X) with missing cells = E over independent fill-ins of every missing cell (exact sum)."""
    kernel, supports = _mixed_kernel()
    X = torch.tensor([[0.3, 1.0, 1.0], [float("nan"), 2.0, 0.0], [1.0, float("nan"), float("nan")],
                      [float("nan"), 0.5, 2.0], [-0.5, 0.1, 1.0]])
    cells = [tuple(c) for c in torch.isnan(X).nonzero().tolist()]
    expected = torch.zeros(5, 5)
    for choice in itertools.product(*[range(len(supports[j][0])) for _, j in cells]):
        filled, weight = X.clone(), 1.0
        for (i, j), c in zip(cells, choice):
            filled[i, j] = supports[j][0][c]
            weight = weight * supports[j][1][c]
        expected += weight * kernel(filled, filled).to_dense()
    with torch.no_grad():
        torch.testing.assert_close(kernel(X, X).to_dense(), expected)
        torch.testing.assert_close(kernel(X, diag=True), expected.diagonal())
        # the same rows as another tensor: still one table's rows
        torch.testing.assert_close(kernel(X, X.clone()).to_dense(), expected)
        # against other (observed) points: the mean over fill-ins, no own diagonal
        Z = torch.tensor([[0.2, 1.0, 2.0], [1.5, 0.0, 0.0]])
        cross = sum(w * kernel(f, Z).to_dense() for f, w in _fill_ins(X, cells, supports))
        torch.testing.assert_close(kernel(X, Z).to_dense(), cross)


def _fill_ins(X, cells, supports):
    for choice in itertools.product(*[range(len(supports[j][0])) for _, j in cells]):
        filled, weight = X.clone(), 1.0
        for (i, j), c in zip(cells, choice):
            filled[i, j] = supports[j][0][c]
            weight = weight * supports[j][1][c]
        yield filled, weight


@pytest.mark.parametrize("n", [12, 140])  # 140: the symmetric block path of AdditiveKernel
def test_gradients_finite_and_match_finite_differences(n):
    kernel, _ = _mixed_kernel()
    gen = torch.Generator().manual_seed(3)
    X = torch.cat([torch.randn(n, 2, generator=gen), torch.randint(0, 3, (n, 1), generator=gen).double()], 1)
    X[torch.rand(n, 3, generator=gen) < 0.25] = float("nan")
    y = torch.randn(n, generator=gen)

    def loss():
        K = kernel(X, X).to_dense() + 0.1 * torch.eye(n)
        L = torch.linalg.cholesky(K)
        return 0.5 * y @ torch.cholesky_solve(y[:, None], L)[:, 0] + torch.log(L.diagonal()).sum()

    params = [p for p in kernel.parameters() if p.requires_grad]
    value = loss()
    grads = torch.autograd.grad(value, params)
    assert all(torch.isfinite(g).all() for g in grads)
    eps = 1e-6
    for p, g in zip(params, grads):
        for idx in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[idx] += eps
                up = loss()
                p.view(-1)[idx] -= 2 * eps
                down = loss()
                p.view(-1)[idx] += eps
            fd = (up - down) / (2 * eps)
            assert abs(float(g.view(-1)[idx]) - float(fd)) < 1e-5 * max(1.0, abs(float(fd))), (p.shape, idx)


def _fit(X, y, measure="empirical", **kw):
    return OAKRegressor(max_order=2, measure=measure, flow=False, random_state=0, **kw).fit(X, y)


def _toy(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.sin(1.5 * X[:, 0]) + 0.7 * X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=n)
    return X, y


def _posterior_pieces(model, Xt):
    """Exact prior diagonal, cross-covariance and K_y of a fitted exact model (transformed inputs)."""
    kernel, Xtr = model.kernel_, model.posterior_.X
    with torch.no_grad():
        Ky = kernel(Xtr, Xtr).to_dense() + (model.posterior_.noise + model.posterior_.jitter) * torch.eye(len(Xtr))
        return kernel(Xt, diag=True), kernel(Xt, Xtr).to_dense(), Ky


def test_prediction_with_missing_feature_is_the_exact_average_over_its_measure():
    """Empirical measure: E over x_j ~ p_j is a finite weighted sum, so mean and variance are exact."""
    X, y = _toy()
    model = _fit(X, y)
    row = X[:1].copy()
    j = 0
    row_nan = row.copy()
    row_nan[0, j] = np.nan
    xt = model._prepare_predict_inputs(row_nan)
    measure = model.kernel_.base_kernel.measure
    locs, w = measure.locations[j], measure.weights[j]
    filled = xt.repeat(len(locs), 1)
    filled[:, j] = locs
    with torch.no_grad():
        mu_s, var_s = model.posterior_.predict(filled, latent=True)
        mu_nan, var_nan = model.posterior_.predict(xt, latent=True)
    torch.testing.assert_close(mu_nan[0], (w * mu_s).sum())
    # variance: E[k(x,x)] - kbar' Ky^-1 kbar with kbar the average cross-covariance over the fill-ins
    prior_s, cross_s, Ky = _posterior_pieces(model, filled)
    kbar = (w[:, None] * cross_s).sum(0)
    exact = (w * prior_s).sum() - kbar @ torch.linalg.solve(Ky, kbar)
    torch.testing.assert_close(var_nan[0], exact, rtol=1e-6, atol=1e-10)
    # = average observed-case variance + the spread of the cross-covariance (>= 0)
    quad = torch.einsum("sn,sn->s", cross_s, torch.linalg.solve(Ky, cross_s.T).T)
    spread = (w * quad).sum() - kbar @ torch.linalg.solve(Ky, kbar)
    torch.testing.assert_close(var_nan[0], (w * var_s).sum() + spread, rtol=1e-6, atol=1e-10)
    assert spread >= -1e-12
    # public predict in the target's units
    mean, std = model.predict(row_nan, return_std=True, latent=True)
    np.testing.assert_allclose(mean[0], float(mu_nan[0]) * model.y_scale_ + model.y_mean_)  # mu includes c
    np.testing.assert_allclose(std[0], float(var_nan[0]) ** 0.5 * model.y_scale_)


def test_prediction_with_missing_feature_matches_monte_carlo_gaussian_measure():
    X, y = _toy()
    model = _fit(X, y, measure="gaussian")
    j = 1
    rows = X[:4].copy()
    rows[:, j] = np.nan
    xt = model._prepare_predict_inputs(rows)
    measure = model.kernel_.base_kernel.measure
    n_mc = 20_000
    draws = measure.sample(n_mc, torch.Generator().manual_seed(0))[:, j]
    Xtr = model.posterior_.X
    with torch.no_grad():
        mu_nan, var_nan = model.posterior_.predict(xt, latent=True)
        for r in range(len(rows)):
            filled = xt[r:r + 1].repeat(n_mc, 1)
            filled[:, j] = draws
            mu_s, var_s = model.posterior_.predict(filled, latent=True)
            se = mu_s.std() / n_mc**0.5
            assert abs(mu_nan[r] - mu_s.mean()) < 4 * se + 1e-9
            prior_s, cross_s, Ky = _posterior_pieces(model, filled)
            kbar = cross_s.mean(0)
            mc_var = prior_s.mean() - kbar @ torch.linalg.solve(Ky, kbar)
            se_var = prior_s.std() / n_mc**0.5 + 2 * cross_s.std(0).norm() * torch.linalg.solve(Ky, kbar).norm() / n_mc**0.5
            assert abs(var_nan[r] - mc_var) < 4 * se_var + 1e-9, (var_nan[r], mc_var, se_var)
            assert var_nan[r] >= var_s.mean() - 4 * var_s.std() / n_mc**0.5
    assert Xtr is model.posterior_.X


def test_row_missing_every_feature_predicts_the_order_zero_posterior():
    X, y = _toy()
    model = _fit(X, y)
    rows = np.full((2, 3), np.nan)
    mean, std = model.predict(rows, return_std=True, latent=True)
    constant = model.predict_component(rows, ()) + float(model.posterior_.constant) * model.y_scale_ + model.y_mean_
    np.testing.assert_allclose(mean, constant)
    _, observed_std = model.predict(X[:10], return_std=True, latent=True)
    assert np.all(std > observed_std.max())
    np.testing.assert_allclose(std[0], std[1])


def test_fit_with_missing_cells_recovers_fanova_shares():
    """f = x0 + 0.8 x1 x2 with independent x_j ~ N(0, 1): Sobol shares 1/1.64 for x0 and 0.64/1.64
    for x1·x2, recovered within 0.05 with 20 % of the cells missing. The inputs are a Latin
    hypercube on normal quantiles, so that the sample's own moments match the truth (random
    normal draws of 250 rows move the shares by about 0.06 with complete data as well)."""
    from scipy.stats import norm

    rng = np.random.default_rng(8)
    n = 250
    X = norm.ppf((np.argsort(rng.random((n, 3)), axis=0) + 0.5) / n)
    y = X[:, 0] + 0.8 * X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=n)
    cells = rng.permutation(X.size)[: X.size // 5]
    X.flat[cells] = np.nan
    assert np.isnan(X).mean() == 0.2
    model = OAKRegressor(max_order=2, random_state=0).fit(X, y)
    shares = model.sobol_indices_
    assert abs(shares.get(("x0",), 0.0) - 1 / 1.64) < 0.05, shares
    assert abs(shares.get(("x1", "x2"), 0.0) - 0.64 / 1.64) < 0.05, shares
    rest = sum(v for k, v in shares.items() if k not in {("x0",), ("x1", "x2")})
    assert rest < 0.05, shares


def test_sparse_inference_with_missing_cells():
    """Inducing inputs have no missing cells; the sparse fit gives finite predictions for NaN rows."""
    X, y = _toy(n=120, seed=2)
    X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    model = OAKRegressor(max_order=2, inference="sparse", n_inducing=20, max_iter=50, random_state=0).fit(X, y)
    assert not torch.isnan(model.posterior_.X).any()
    mean, std = model.predict(X[:10], return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    assert np.isfinite(list(model.sobol_indices_.values())).all()


@pytest.mark.parametrize("cls", [GPRegressor, AdditiveGPRegressor])
def test_other_families_refuse_missing_values_naming_oak_and_every_column(cls):
    X, y = _toy(n=20)
    X[[1, 4], 0] = np.nan
    X[7, 2] = np.nan
    with pytest.raises(ValueError, match="OAKRegressor") as err:
        cls(max_iter=5).fit(X, y)
    assert "column 0: 2 cell(s), rows 1, 4" in str(err.value) and "column 2: 1 cell(s), rows 7" in str(err.value)


def test_column_with_no_observed_value_is_refused():
    X, y = _toy(n=20)
    X[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"'x1' have no observed value"):
        _fit(X, y)


def test_oak_classifier_fits_and_predicts_with_missing_cells():
    from hdgp import OAKClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    X[rng.random(X.shape) < 0.2] = np.nan
    clf = OAKClassifier(max_order=2, n_inducing=20, max_iter=40, random_state=0).fit(X, y)
    assert not any(torch.isnan(p.X).any() for p in clf.posteriors_)
    proba = clf.predict_proba(np.array([[1.5, np.nan, np.nan], [np.nan, np.nan, np.nan], [-1.5, 0.0, 0.0]]))
    assert np.isfinite(proba).all()
    assert proba[0, 1] > 0.5 > proba[2, 1]
    assert np.isfinite(clf.input_summary_["centre"]).all()
