"""Credible intervals of Sobol indices (hdgp.sobol_intervals): the sampler against the closed-form posterior
expectation, the quadrature points against their measures, coverage on a table with a known FANOVA
decomposition, shrinking with n, the ranking summaries, bad input."""

import warnings

import numpy as np
import pytest
import torch

from hdgp import explain
from hdgp.estimators.oak import OAKRegressor
from hdgp.kernels.orthogonal_kernel import ConstrainedCategoricalKernel
from hdgp.measures import MixtureMeasure
from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel
from hdgp.kernels.additive_kernel import AdditiveKernel
from hdgp.kernels.feature_stack import FeatureStackKernel
from hdgp.sobol_intervals import important_terms, measure_points, sobol_index_dict, sobol_intervals, sobol_samples

A, B, C, NOISE = 1.0, 1.5, 0.8, 0.3
TERMS = [(0,), (1,), (0, 2)]


def _draw(n, rng):
    X = rng.standard_normal((n, 3))
    return X, A * X[:, 0] + B * np.sin(X[:, 1]) + C * X[:, 0] * X[:, 2] + NOISE * rng.standard_normal(n)


def _fit(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OAKRegressor(max_order=2, flow=False, **params).fit(X, y)


@pytest.fixture(scope="module")
def fitted():
    X, y = _draw(80, np.random.default_rng(5))
    return _fit(X, y), X, y


def _diag_integral(kernel, i, nodes=80):
    """int k~_i(x, x) dp_i(x) by Gauss-Hermite quadrature (the measure is one Gaussian here)."""
    t, w = np.polynomial.hermite_e.hermegauss(nodes)
    meas = kernel.base_kernel.measure
    X = torch.zeros(nodes, kernel.num_dims, dtype=torch.float64)
    X[:, i] = torch.as_tensor(meas.locations[i, 0].item() + meas.scales[i, 0].item() * t)
    return float((kernel.base_matrices(X, X, diag=True)[i].numpy() * w / w.sum()).sum())


def test_monte_carlo_mean_matches_closed_form_expectation(fitted):
    # E[S_u | y] = R_u + s2 prod_i int k~_i(x,x) dp_i - s2^2 tr(A^-1 (.)_i L_i)   (exact posterior)
    est = fitted[0]
    post, res, kernel = est.posterior_, est.sobol_, est.kernel_
    A_inv = torch.cholesky_inverse(post.L)
    L = explain.sobol_matrices(kernel, post.X)
    n_samples = 4000
    S = sobol_samples(post, res, TERMS, n_samples=n_samples, n_points=128, normalise=False, seed=3).numpy()
    for k, u in enumerate(TERMS):
        s2 = float(kernel.order_variances[len(u)])
        R_u = float(res.values[res.terms.index(u)]) * res.total
        expected = R_u + s2 * np.prod([_diag_integral(kernel, i) for i in u]) \
            - s2**2 * float((A_inv * L[list(u)].prod(0)).sum())
        assert expected > R_u  # the posterior's own spread adds variance
        se = S[:, k].std() / np.sqrt(n_samples)
        # Monte-Carlo error (4 standard errors) plus the quadrature's, which the M = 512 check bounds
        assert abs(S[:, k].mean() - expected) < 4 * se + 2e-3 * expected


def test_shares_are_normalised_and_rest_carries_the_remainder(fitted):
    est = fitted[0]
    S = sobol_samples(est.posterior_, est.sobol_, TERMS, n_samples=200, normalise=False).numpy()
    shares = sobol_samples(est.posterior_, est.sobol_, TERMS, n_samples=200).numpy()
    np.testing.assert_allclose(shares, S[:, :-1] / S.sum(1, keepdims=True), rtol=1e-10)
    assert (S >= 0).all() and (shares.sum(1) <= 1 + 1e-12).all()


def test_measure_points_follow_the_measures():
    gauss = MixtureMeasure([[1.0, -2.0], [0.5, 0.5]], [[0.5, 0.3], [2.0, 2.0]], [[0.3, 0.7], [1.0, 0.0]])
    cat = ConstrainedCategoricalKernel([0.2, 0.5, 0.3])
    kernel = AdditiveKernel(FeatureStackKernel([ConstrainedSEKernel(gauss), cat], [[0, 2], [1]]), num_dims=3)
    Q = measure_points(kernel, 4096, seed=1).numpy()
    # feature 0: mixture 0.3 N(1, .25) + 0.7 N(-2, .09); feature 2: N(0.5, 4); feature 1: levels 0.2/0.5/0.3
    mean0 = 0.3 * 1.0 + 0.7 * -2.0
    var0 = 0.3 * (0.25 + 1.0) + 0.7 * (0.09 + 4.0) - mean0**2
    assert Q[:, 0].mean() == pytest.approx(mean0, abs=0.02) and Q[:, 0].var() == pytest.approx(var0, rel=0.02)
    assert Q[:, 2].mean() == pytest.approx(0.5, abs=0.02) and Q[:, 2].std() == pytest.approx(2.0, rel=0.02)
    assert np.bincount(Q[:, 1].astype(int), minlength=3) / 4096 == pytest.approx([0.2, 0.5, 0.3], abs=0.01)


def test_ranking_summaries_are_consistent(fitted):
    r = sobol_intervals(fitted[0], max_terms=6, top_k=3, n_samples=500)
    assert r.in_top_k.sum() == pytest.approx(3)  # each sample has exactly three terms in its top three
    lead = np.argsort(-r.estimate)[:3]
    assert r.rank_stable <= r.keeps_rank[lead].min() + 1e-12
    assert ((r.lower <= r.mean) & (r.mean <= r.upper)).all()
    data = r.to_dict()
    assert [t["term"] for t in data["terms"]] == [list(n) for n in r.names] and data["level"] == 0.9
    assert r.names[0] == tuple(fitted[0].feature_names()[i] for i in r.terms[0])


def test_intervals_shrink_with_n():
    rng = np.random.default_rng(11)
    widths = []
    for n in (60, 400):
        X, y = _draw(n, rng)
        r = sobol_intervals(_fit(X, y), terms=TERMS, n_samples=500)
        widths.append(float(np.mean(r.upper - r.lower)))
    assert widths[1] < 0.6 * widths[0]


def _draw_bounded(n, rng):
    X = rng.standard_normal((n, 3))
    f = np.sin(X[:, 0]) + 2 * (np.cos(X[:, 1]) - np.exp(-0.5)) + 1.5 * np.sin(X[:, 0]) * np.sin(X[:, 2])
    return X, f + NOISE * rng.standard_normal(n)


def _bounded_shares_under_fitted_measure(X) -> dict:
    """Shares of the bounded f under N(mean(X), std(X)^2): with e_j = E sin x_j, sin x0 sin x2 =
    (e0 + d0)(e2 + d2) leaks 1.5 e2 d0 and 1.5 e0 d2 into the first-order terms."""
    m, s = X.mean(0), X.std(0)
    e = np.sin(m) * np.exp(-s**2 / 2)
    var_sin = (1 - np.cos(2 * m) * np.exp(-2 * s**2)) / 2 - e**2
    var_cos = (1 + np.cos(2 * m) * np.exp(-2 * s**2)) / 2 - (np.cos(m) * np.exp(-s**2 / 2)) ** 2
    v = {(0,): (1 + 1.5 * e[2]) ** 2 * var_sin[0], (1,): 4 * var_cos[1], (2,): (1.5 * e[0]) ** 2 * var_sin[2],
         (0, 2): 1.5**2 * var_sin[0] * var_sin[2]}
    total = sum(v.values())
    return {u: x / total for u, x in v.items()}


def test_coverage_of_the_known_decomposition_at_the_nominal_rate():
    # f = sin x0 + 2 (cos x1 - e^{-1/2}) + 1.5 sin x0 sin x2: 16 tables of 200 rows, warm-started fits; the 50 %
    # and 90 % posterior intervals of the three true terms against their shares under the model's own input
    # measure (what the posterior method estimates: it holds the measure and the hyper-parameters at their
    # fitted values). 48 intervals per level: binomial sd of the hit rate 0.072 at 50 %, 0.043 at 90 %; the
    # bounds are 3 sd. benchmarks/results/sobol-intervals records the coverage over 120 intervals, and the
    # undercoverage with an unbounded interaction (x0 x2) or against the shares under the true N(0, I).
    rng = np.random.default_rng(2024)
    est = OAKRegressor(max_order=2, flow=False, warm_start=True)
    hits = {0.5: [], 0.9: []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rep in range(16):
            X, y = _draw_bounded(200, rng)
            est.fit(X, y)
            r = sobol_intervals(est, terms=TERMS, n_samples=1000, random_state=rep)
            truth = np.array([_bounded_shares_under_fitted_measure(X)[u] for u in TERMS])
            for level in hits:
                lo, hi = np.quantile(r.samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
                hits[level] += list((lo <= truth) & (truth <= hi))
    for level, h in hits.items():
        sd = np.sqrt(level * (1 - level) / len(h))
        assert abs(np.mean(h) - level) <= 3 * sd, (level, np.mean(h))


def test_important_terms_hold_the_prefix_and_every_first_order_term(fitted):
    res = fitted[0].sobol_
    kept = important_terms(res, 0.9)
    prefix = explain.select_terms(res, 0.9)
    assert kept[:len(prefix)] == prefix or set(prefix) <= set(kept)
    assert {u for u in res.terms if len(u) == 1} <= set(kept)
    assert set(kept) <= set(res.terms) and len(kept) < len(res.terms)
    with pytest.raises(ValueError, match="threshold"):
        important_terms(res, 0.0)
    names = fitted[0].feature_names()
    full = sobol_index_dict(res, names, full=True)
    assert full == fitted[0].sobol_indices_  # the full list is today's sobol_indices_
    short = sobol_index_dict(res, names, 0.9)
    assert list(short) == [k for k in full if k in short] and len(short) == len(kept)
    assert sum(short.values()) >= 0.9 - 1e-12


def test_bad_input_is_refused(fitted):
    est, X, y = fitted
    with pytest.raises(ValueError, match="method"):
        sobol_intervals(est, method="laplace")
    with pytest.raises(ValueError, match="level"):
        sobol_intervals(est, level=1.0)
    with pytest.raises(ValueError, match="pass the training X and y"):
        sobol_intervals(est, method="bootstrap")
    with pytest.raises(ValueError, match="n_points"):
        sobol_intervals(est, n_points=1)
    with pytest.raises(ValueError, match="no Sobol index"):
        sobol_samples(est.posterior_, est.sobol_, [(0, 1, 2)])
    with pytest.raises(ValueError, match="repeat"):
        sobol_samples(est.posterior_, est.sobol_, [(0,), (0,)])
    with pytest.raises(TypeError, match="no Sobol indices"):
        sobol_intervals(object())


def test_inducing_posterior_matches_its_closed_form_expectation():
    # SGPR: E[S_u | y] = R_u + s2 prod int k~_i(x,x) dp_i - s2^2 tr(K_uu^-1 L_u) + s2^2 tr(K_uu^-1 S K_uu^-1 L_u),
    # K_uu^-1 S K_uu^-1 = L_uu^-T M^T M L_uu^-1 (hdgp.inference.inducing.InducingPosterior.summand)
    X, y = _draw(150, np.random.default_rng(8))
    est = _fit(X, y, inference="sparse", n_inducing=40)
    post, res, kernel = est.posterior_, est.sobol_, est.kernel_
    Luu = post.L_uu
    Kinv = torch.cholesky_inverse(Luu)
    W = torch.linalg.solve_triangular(Luu, torch.eye(len(Luu), dtype=Luu.dtype), upper=False)  # L_uu^-1
    middle = W.T @ post.var_factor.T @ post.var_factor @ W
    L = explain.sobol_matrices(kernel, post.X)
    S = sobol_samples(post, res, TERMS, n_samples=4000, n_points=128, normalise=False, seed=5).numpy()
    for k, u in enumerate(TERMS):
        s2 = float(kernel.order_variances[len(u)])
        Lu = L[list(u)].prod(0)
        R_u = float(res.values[res.terms.index(u)]) * res.total
        expected = R_u + s2 * np.prod([_diag_integral(kernel, i) for i in u]) \
            - s2**2 * float((Kinv * Lu).sum()) + s2**2 * float((middle * Lu).sum())
        se = S[:, k].std() / np.sqrt(4000)
        assert abs(S[:, k].mean() - expected) < 4 * se + 2e-3 * expected


def test_a_float32_model_is_explained_in_float64():
    X, y = _draw(80, np.random.default_rng(5))
    est32 = _fit(X, y, dtype="float32")
    r = sobol_intervals(est32, terms=TERMS, n_samples=300)
    assert r.samples.dtype == np.float64 and np.isfinite(r.samples).all()
    assert ((r.lower <= r.estimate + 0.02) & (r.estimate - 0.02 <= r.upper)).all()


def test_a_variance_scale_widens_the_intervals(fitted):
    import copy

    post = fitted[0].posterior_
    scaled = copy.copy(post)
    scaled.variance_scale = 4.0 * post.variance_scale
    width = [np.subtract(*np.quantile(sobol_samples(p, fitted[0].sobol_, TERMS, n_samples=2000, seed=1).numpy(),
                                      [0.95, 0.05], axis=0)) for p in (post, scaled)]
    assert (width[1] > 1.5 * width[0]).all()
    # the order of a term's features does not matter
    np.testing.assert_array_equal(sobol_samples(post, fitted[0].sobol_, [(2, 0)], n_samples=50).numpy(),
                                  sobol_samples(post, fitted[0].sobol_, [(0, 2)], n_samples=50).numpy())
