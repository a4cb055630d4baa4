"""Sinh-arcsinh flow: invertibility, Jacobian, Gaussianisation, constant features."""

import numpy as np
import pytest
import scipy.stats

from hdgp.flows import _START_SAMPLE, SinhArcsinhFlow, _least_skewed_start


def data():
    rng = np.random.default_rng(0)
    return np.column_stack([rng.lognormal(size=800), rng.standard_t(3, size=800), rng.gamma(2.0, size=800) - 3])


def test_gaussianises_skewed_and_heavy_tailed_features():
    X = data()
    Z = SinhArcsinhFlow().fit(X).transform(X)
    for j in range(3):
        assert abs(Z[:, j].mean()) < 0.05 and abs(Z[:, j].std() - 1) < 0.05
        assert abs(scipy.stats.skew(Z[:, j])) < 0.2
        assert abs(scipy.stats.kurtosis(Z[:, j])) < 1.0
    # the raw data were clearly non-Gaussian
    assert scipy.stats.skew(X[:, 0]) > 2 and scipy.stats.kurtosis(X[:, 1]) > 2


def test_inverse_and_jacobian():
    X = data()
    flow = SinhArcsinhFlow().fit(X)
    Z = flow.transform(X)
    np.testing.assert_allclose(flow.inverse_transform(Z), X, rtol=1e-9, atol=1e-9)
    h = 1e-6
    fd = (flow.transform(X + h) - flow.transform(X - h)) / (2 * h)
    np.testing.assert_allclose(flow.log_abs_det_jacobian(X), np.log(fd), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("log_transform", ["auto", "shifted"])
def test_inverse_and_jacobian_outside_training_range(log_transform):
    """Points below/above the training range map back exactly; the Jacobian is the derivative."""
    X = data()
    flow = SinhArcsinhFlow(log_transform).fit(X)
    lo, hi = X.min(0), X.max(0)
    # below the minimum, including zero and negative values of the log-transformed feature
    Xq = np.vstack([lo / 2, lo - 2.0, np.zeros(3), hi + 3.0, (lo + hi) / 2])
    np.testing.assert_allclose(flow.inverse_transform(flow.transform(Xq)), Xq, rtol=1e-9, atol=1e-9)
    h = 1e-6
    fd = (flow.transform(Xq + h) - flow.transform(Xq - h)) / (2 * h)
    np.testing.assert_allclose(flow.log_abs_det_jacobian(Xq), np.log(fd), rtol=1e-5, atol=1e-6)


def test_shifted_log_matches_its_definition():
    """t = log(x - min + 1) on every feature: the flow of t-values equals the flow after that map."""
    X = data()
    flow = SinhArcsinhFlow("shifted").fit(X)
    T = np.log(X - X.min(0) + 1.0)
    plain = SinhArcsinhFlow(log_transform=False).fit(T)
    # two separate L-BFGS fits of the same objective (log1p vs log rounding): agree to its tolerance
    np.testing.assert_allclose(flow.transform(X), plain.transform(T), atol=2e-3)
    assert not flow.use_log_.any()
    # below the training minimum the pre-map is the tangent line t = x - min
    x0 = X.min(0) - 0.5
    np.testing.assert_allclose(flow.transform(x0[None]), plain.transform((x0 - X.min(0))[None]), atol=2e-3)


def test_log_is_continued_by_its_tangent_below_the_training_minimum():
    """t = log x above the training minimum m, t = log m + (x - m)/m below: a finite warp of a zero
    or negative value in a feature that was positive in training."""
    X = data()[:, :2]
    flow = SinhArcsinhFlow().fit(X)
    plain = SinhArcsinhFlow(log_transform=False)
    plain.__dict__.update({k: v for k, v in flow.__dict__.items() if k != "log_transform"})
    plain.use_log_ = np.zeros(2, dtype=bool)  # the same fitted flow without the log pre-map
    m = X[:, 0].min()
    x = np.array([m * 3, m, m / 2, 0.0, -1.0])
    t = np.where(x >= m, np.log(np.maximum(x, m)), np.log(m) + (x - m) / m)
    Xq = np.column_stack([x, np.zeros(5)])
    Tq = np.column_stack([t, np.zeros(5)])
    np.testing.assert_allclose(flow.transform(Xq), plain.transform(Tq), rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(flow.transform(Xq)[:, 0]) < 0)  # still strictly increasing


def test_flow_saved_before_the_continuation_keeps_refusing_nonpositive_values():
    X = data()[:, :2]  # a format-2.0 flow took logs of positive features only
    flow = SinhArcsinhFlow().fit(X)
    del flow.log_min_, flow.log_start_  # as rebuilt from a format-2.0 model file
    np.testing.assert_allclose(flow.transform(X), SinhArcsinhFlow().fit(X).transform(X), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="log-transformed.*refit"):
        flow.transform(np.array([[0.0, 0.0]]))


def test_auto_log_for_skewed_features_started_where_not_positive():
    """log x for the positive skewed feature, none for the symmetric one, and for the skewed one
    with negative values log(x - min + c), c the least skewed start on the grid."""
    X = data()
    flow = SinhArcsinhFlow().fit(X)
    assert flow.use_log_.tolist() == [True, False, True]
    assert flow.log_start_[0] == X[:, 0].min() and np.isnan(flow.log_start_[1])
    d = X[:, 2] - X[:, 2].min()
    c = flow.log_start_[2]
    skew = abs(scipy.stats.skew(np.log(d + c)))
    assert skew < 0.1 < scipy.stats.skew(X[:, 2])
    assert all(skew <= abs(scipy.stats.skew(np.log(d + c * f))) for f in (0.5, 2.0))  # a minimum in c
    # the warp is the plain flow of t = log(x - min + c)
    plain = SinhArcsinhFlow(log_transform=False).fit(np.log(d + c)[:, None])
    np.testing.assert_allclose(flow.transform(X)[:, 2], plain.transform(np.log(d + c)[:, None])[:, 0], atol=2e-3)
    assert not SinhArcsinhFlow(log_transform=False).fit(X).use_log_.any()
    two_valued = np.column_stack([np.where(np.arange(50) < 5, 10.0, 1.0)])  # skewed, but any warp is affine
    assert not SinhArcsinhFlow().fit(two_valued).use_log_.any()


def test_auto_log_does_not_depend_on_the_location_of_a_heavy_tail():
    """A Pareto(1) feature and a copy shifted by 1000 both warp to a symmetric feature: the shifted
    copy (positive, but log x leaves it skewed) gets a started log instead of log x. Round trips
    and Jacobians hold inside and below the training range."""
    x = np.random.default_rng(0).pareto(1.0, 300)
    X = np.column_stack([x, x + 1000.0])
    flow = SinhArcsinhFlow().fit(X)
    Z = flow.transform(X)
    assert flow.use_log_.all() and flow.log_start_[0] == x.min() and flow.log_start_[1] < 1.0
    for j in range(2):
        assert abs(scipy.stats.skew(Z[:, j])) < 0.05 < 5 < abs(scipy.stats.skew(X[:, j]))
    lo, hi, span = X.min(0), X.max(0), np.ptp(X, 0)
    Xq = np.vstack([lo - 0.5 * span, lo, np.median(X, 0), hi, hi + 0.5 * span])
    np.testing.assert_allclose(flow.inverse_transform(flow.transform(Xq)), Xq, rtol=1e-9, atol=1e-9)
    h = 1e-6 * (np.abs(Xq - flow.log_min_) + flow.log_start_)  # the log's local scale
    fd = (flow.transform(Xq + h) - flow.transform(Xq - h)) / (2 * h)
    np.testing.assert_allclose(flow.log_abs_det_jacobian(Xq), np.log(fd), rtol=1e-5, atol=1e-5)
    assert np.all(np.diff(flow.transform(Xq), axis=0) > 0)


def test_flow_fit_escapes_the_identity_starts_local_minimum():
    """For -Pareto(1) data without a log the objective has a local minimum near the identity
    start; the fit reaches the best of 60 random starts inside the same bounds."""
    import scipy.optimize

    from hdgp.flows import _BOUNDS

    x = -np.random.default_rng(0).pareto(1.0, (300, 1))
    flow = SinhArcsinhFlow(log_transform=False).fit(x)
    u = (x[:, 0] - flow.center_[0]) / flow.scale_[0]

    def loss(p):
        z, log_jac = SinhArcsinhFlow._forward(u, p)
        return 0.5 * np.mean(z**2) - np.mean(log_jac)

    rng = np.random.default_rng(1)
    starts = [np.array([rng.uniform(lo, hi) for lo, hi in _BOUNDS]) for _ in range(60)]
    best = min(scipy.optimize.minimize(loss, s0, method="L-BFGS-B", bounds=_BOUNDS).fun for s0 in starts)
    identity = scipy.optimize.minimize(loss, np.zeros(4), method="L-BFGS-B", bounds=_BOUNDS).fun
    assert identity > best + 1.0  # the trap is real
    assert loss(flow.params_[0]) == pytest.approx(best, abs=1e-6)


def test_flow_saved_before_started_logs_reads_as_log_x():
    """Files before format 2.4 have no log_start_: their use_log_ features were positive, log x."""
    X = np.abs(data()) + 0.1
    flow = SinhArcsinhFlow().fit(X)
    reference = flow.transform(X)
    del flow.log_start_
    np.testing.assert_allclose(flow.transform(X), reference, rtol=1e-14, atol=1e-14)


def test_constant_feature_is_finite():
    X = np.column_stack([np.full(50, 3.0), np.linspace(0, 1, 50)])
    flow = SinhArcsinhFlow().fit(X)
    Z = flow.transform(X)
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(Z[:, 0], 0.0)


def test_bad_input():
    with pytest.raises(ValueError, match="positive"):
        SinhArcsinhFlow(log_transform=True).fit(np.array([[1.0], [-1.0]]))
    flow = SinhArcsinhFlow().fit(data())
    with pytest.raises(ValueError, match="NaN"):
        flow.transform(np.array([[np.nan, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="log_transform"):
        SinhArcsinhFlow(log_transform="yes")


def test_heavily_skewed_standardised_feature_does_not_overflow():
    # a z-scored, strongly right-skewed column (no log x: negative values): the fit must stay finite
    rng = np.random.default_rng(5)
    x = rng.lognormal(sigma=1.5, size=(300, 1))
    x = (x - x.mean()) / x.std()
    with np.errstate(over="raise", invalid="raise"):
        flow = SinhArcsinhFlow().fit(x)
        z = flow.transform(x)
        no_log = SinhArcsinhFlow(log_transform=False).fit(x).transform(x)
    assert flow.use_log_.all()  # a started log
    assert np.isfinite(z).all() and abs(z.std() - 1) < 0.1
    # sinh-arcsinh alone cannot fully undo the bounded-below tail; with the started log it nearly does
    assert abs(scipy.stats.skew(no_log[:, 0])) < 0.15 * scipy.stats.skew(x[:, 0])
    assert abs(scipy.stats.skew(z[:, 0])) < 0.2 * abs(scipy.stats.skew(no_log[:, 0]))


def test_astronomical_inputs_warp_to_infinity_without_a_runtime_warning():
    import warnings

    flow = SinhArcsinhFlow().fit(data())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z = flow.transform(np.array([[1e300, 1e300, 1e300], [-1e300, -1e300, -1e300]]))
    # the plain feature warps to the edge of the line; the log-transformed ones stay ordered
    assert (np.abs(z[:, 1]) > 1e10).all() and np.isinf(z).any() and (np.sign(z[:, 1]) == [1, -1]).all()
    assert np.isfinite(z[0, [0, 2]]).all() and (z[1, [0, 2]] < z[0, [0, 2]]).all()


def test_start_of_a_large_column_does_not_depend_on_the_row_order():
    """Above _START_SAMPLE rows the started log's start is chosen on evenly spaced *order
    statistics*, so shuffling the rows changes nothing (a strided sample of the unsorted column
    would)."""
    rng = np.random.default_rng(0)
    n = 3 * _START_SAMPLE + 17
    x = np.concatenate([np.zeros(n // 10), rng.lognormal(0.0, 1.5, n - n // 10)])  # zeros: a started log
    starts = {_least_skewed_start(x[rng.permutation(n)]) for _ in range(3)} | {_least_skewed_start(np.sort(x))}
    assert len(starts) == 1


def test_skip_light_tails_keeps_uniform_like_features_affine_and_warps_the_others():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(-1, 1, 500), rng.lognormal(size=500), rng.normal(size=500) ** 3,
                         np.repeat(np.arange(10.0), 50)])  # uniform, skewed, heavy-tailed, an even grid
    flow = SinhArcsinhFlow(skip_light_tails=True).fit(X)
    assert flow.warped_.tolist() == [False, True, True, False]
    Z = flow.transform(X)
    for j in (0, 3):  # standardised only: z = (x - mean) / std
        np.testing.assert_allclose(Z[:, j], (X[:, j] - X[:, j].mean()) / X[:, j].std(), atol=1e-12)
    full = SinhArcsinhFlow().fit(X)
    assert full.warped_.all()
    np.testing.assert_allclose(Z[:, 1:3], full.transform(X)[:, 1:3], rtol=0, atol=0)
    with pytest.raises(ValueError, match="skip_light_tails must be True or False"):
        SinhArcsinhFlow(skip_light_tails="yes")


@pytest.mark.parametrize("seed", range(4))
def test_objective_gradient_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    u = rng.standard_t(3, size=300) + rng.normal() * 0.5
    p = rng.uniform([-1.0, -1.0, -1.5, -1.0], [1.0, 1.0, 1.5, 1.0])
    value, grad = SinhArcsinhFlow._objective(u, p)
    z, log_jac = SinhArcsinhFlow._forward(u, p)
    assert value == pytest.approx(0.5 * np.mean(z**2) - np.mean(log_jac), rel=1e-14)
    step = 1e-6
    numeric = [(SinhArcsinhFlow._objective(u, p + step * e)[0] - SinhArcsinhFlow._objective(u, p - step * e)[0])
               / (2 * step) for e in np.eye(4)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    # the fit passes the column's data-only terms in once: the very same value and gradient
    kept_value, kept_grad = SinhArcsinhFlow._objective(u, p, SinhArcsinhFlow._column_terms(u))
    assert kept_value == value and np.array_equal(kept_grad, grad)
