"""SIGPRegressor / SIGPClassifier: prediction formulas, CV, bad inputs, p >> n."""

import pickle
import warnings

import numpy as np
import pytest
import torch

import hdgp
from hdgp.estimators import SIGPClassifier, SIGPRegressor
from hdgp.exceptions import NumericalWarning
from hdgp.sigp.cv import cross_validate
from hdgp.sigp.subspace import kernel_response_features
from hdgp.sigp.lowrank import rbf_kernel

FIXED = dict(rank=3, lengthscale=1.5, eta=1e-4, mean_penalty=1.0)


def _regression(n=100, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = 3.0 + 2.0 * np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("mean", ["constant", "linear"])
def test_predictive_mean_and_variance_match_dense_gp_formulas(mean):
    """Sec. 5: mean mu + M G^-1 r and diag(M_tt + s2 I - M_tX G^-1 M_Xt), with dense G.

    The projections are centred by the training mean embedding k_bar = K 1 / n:
    P = H K W on the training data, P_t = (K(X_t, X) - 1 k_bar^T) W at new points.
    """
    X, y = _regression()
    model = SIGPRegressor(y_bandwidth=0.5, kernel_tol=1e-13, mean=mean, **FIXED).fit(X, y)
    X_new = np.random.default_rng(1).normal(size=(15, 3))
    mean_pred, std = model.predict(X_new, return_std=True)
    # dense reference in standardised units, exact kernel, W = Phi (Phi^T Phi)^-1 v (K W = Phi v)
    m = model.model_
    fit = m.fits[0]
    Xs = model._standardise(X, fit=False)
    Xt = model._standardise(X_new, fit=False)
    Phi = m.features(Xs)  # the training features, from the pivots (the model keeps no (n, r) copy)
    W = Phi @ torch.linalg.solve(Phi.T @ Phi, m.coef)
    K = rbf_kernel(Xs, Xs, m.factor.lengthscale)
    k_bar = K.mean(0)
    P = (K - k_bar) @ W
    Pt = (rbf_kernel(Xt, Xs, m.factor.lengthscale) - k_bar) @ W
    n = len(y)
    G = P @ fit.sigma_beta @ P.T + fit.noise * torch.eye(n, dtype=P.dtype)
    ys = torch.as_tensor((y - model.y_mean_) / model.y_scale_)
    Z, Zt = Xs @ m.mean_basis, Xt @ m.mean_basis
    r = ys - fit.theta[0] - Z @ fit.theta[1:]
    M_tX = Pt @ fit.sigma_beta @ P.T
    mean_ref = fit.theta[0] + Zt @ fit.theta[1:] + M_tX @ torch.linalg.solve(G, r)
    var_ref = (
        torch.diagonal(Pt @ fit.sigma_beta @ Pt.T)
        + fit.noise
        - torch.diagonal(M_tX @ torch.linalg.solve(G, M_tX.T))
    )
    np.testing.assert_allclose(mean_pred, mean_ref.numpy() * model.y_scale_ + model.y_mean_, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(std, np.sqrt(var_ref.numpy() * model.variance_scale_) * model.y_scale_, rtol=1e-6)
    # the full covariance, of y and of the latent f (without the noise)
    latent_ref = Pt @ fit.sigma_beta @ Pt.T - M_tX @ torch.linalg.solve(G, M_tX.T)
    unit = model.variance_scale_ * model.y_scale_**2
    for latent, noise in ((False, fit.noise), (True, 0.0)):
        _, cov = model.predict(X_new, return_cov=True, latent=latent)
        ref = (latent_ref + noise * torch.eye(len(X_new), dtype=P.dtype)).numpy() * unit
        np.testing.assert_allclose(cov, ref, rtol=1e-6, atol=1e-9 * unit)
    assert model.sample_y(X_new, 4).shape == (15, 4)


def test_fits_nonlinear_function_and_random_part_carries_signal():
    X, y = _regression(n=200)
    model = SIGPRegressor(y_bandwidth=0.5, **FIXED).fit(X[:150], y[:150])
    assert model.score(X[150:], y[150:]) > 0.85
    fit = model.model_.fits[0]
    P = model.model_.projected(model._standardise(X[:150], fit=False))
    assert float((P @ fit.beta).var()) > 0.8  # standardised units: beta carries the signal
    _, std = model.predict(X[150:], return_std=True)
    # var(y_t) = (noise + |P_t S^1/2|^2) * variance_scale_
    assert np.all(std >= np.sqrt(model.noise_ * model.variance_scale_) * (1 - 1e-12))


def test_cross_validated_variance_scale_calibrates_the_predictive_std():
    """The in-sample ML variance is optimistic (the subspace saw y); the CV scale corrects it.

    Mean predictions do not change, the std changes by exactly sqrt(variance_scale_), and
    on held-out data the squared standardised errors average closer to 1.
    """
    X, y = _regression(n=400)
    train, test = slice(0, 200), slice(200, None)
    plain = SIGPRegressor(y_bandwidth=0.5, calibrate_variance=False, **FIXED).fit(X[train], y[train])
    calibrated = SIGPRegressor(y_bandwidth=0.5, **FIXED).fit(X[train], y[train])
    assert plain.variance_scale_ == 1.0 and calibrated.variance_scale_ > 1.0
    mean0, std0 = plain.predict(X[test], return_std=True)
    mean1, std1 = calibrated.predict(X[test], return_std=True)
    np.testing.assert_array_equal(mean0, mean1)
    np.testing.assert_allclose(std1, std0 * np.sqrt(calibrated.variance_scale_), rtol=1e-12)
    z2 = {name: np.mean(((y[test] - mean) / std) ** 2) for name, mean, std in (("plain", mean0, std0),
                                                                               ("calibrated", mean1, std1))}
    assert abs(np.log(z2["calibrated"])) < abs(np.log(z2["plain"]))


def test_rank_too_large_for_the_folds_warns_and_stays_uncalibrated():
    X, y = _regression(n=12)
    with pytest.warns(NumericalWarning, match="not calibrated"):
        model = SIGPRegressor(**{**FIXED, "rank": 10}).fit(X, y)
    assert model.variance_scale_ == 1.0 and model.best_params_["rank"] == 10


def test_linear_mean_starves_the_random_part_on_a_nearly_linear_kernel():
    """Why the default mean is constant: with a long length-scale the SDR projections are
    nearly linear in x, and a penalised linear mean absorbs them (beta -> 0, eq. 14)."""
    X, y = _regression(n=200)
    y = y + 2.0 * X[:, 2]
    kw = dict(rank=2, lengthscale=30.0, eta=1e-4, mean_penalty=1.0, y_bandwidth=0.5, input_scaling=None)  # the isotropic kernel
    signal = {}
    for mean in ("constant", "linear"):
        model = SIGPRegressor(mean=mean, **kw).fit(X, y)
        P = model.model_.projected(model._standardise(X, fit=False))
        signal[mean] = float((P @ model.model_.fits[0].beta).var())
    assert signal["constant"] > 0.5 and signal["linear"] < 0.1 * signal["constant"]


@pytest.mark.parametrize("subspace", ["kernel", "slicing"])
def test_cross_validation_chooses_from_grid(subspace):
    X, y = _regression(n=80)
    model = SIGPRegressor(
        rank=[1, 3], lengthscale=[0.5, 2.0], eta=1e-3, mean_penalty=1.0,
        subspace=subspace, cv=3,
    ).fit(X, y)
    assert model.best_params_["rank"] in (1, 3)
    assert model.best_params_["lengthscale"] in (0.5, 2.0)
    assert len(model.cv_scores_) == 4  # y_bandwidth is fixed by default
    assert max(model.cv_scores_.values()) == model.best_score_ == pytest.approx(
        model.cv_scores_[tuple(sorted(model.best_params_.items()))]
    )
    again = SIGPRegressor(**model.get_params()).fit(X, y)
    assert again.best_params_ == model.best_params_


def test_integer_cv_means_unshuffled_folds():
    """cv=3 is scikit-learn's KFold(3) (as in GridSearchCV), random_state shuffles it; a
    splitter object is used as given."""
    from sklearn.model_selection import KFold

    X, y = _regression(n=60)
    kw = dict(rank=2, lengthscale=[1.0, 3.0], eta=[1e-4, 1e-2])
    a = SIGPRegressor(cv=3, **kw).fit(X, y)
    b = SIGPRegressor(cv=KFold(3), **kw).fit(X, y)
    c = SIGPRegressor(cv=KFold(3, shuffle=True, random_state=1), **kw).fit(X, y)
    d = SIGPRegressor(cv=3, random_state=1, **kw).fit(X, y)
    assert a.cv_scores_ == b.cv_scores_ and c.cv_scores_ == d.cv_scores_ and a.cv_scores_ != c.cv_scores_
    for cv in (1, "5", True):  # a string has a .split method, but is no splitter
        with pytest.raises(ValueError, match="cv must be an integer >= 2"):
            SIGPRegressor(cv=cv, **kw).fit(X, y)


def test_p_much_larger_than_n_never_forms_p_by_p():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5000))
    y = np.where(X[:, :50].sum(1) > 0, 1, -1)
    clf = SIGPClassifier(rank=1, lengthscale=100.0, eta=1e-3, mean_penalty=1.0).fit(X, y)
    assert clf.model_.mean_basis.shape[0] == 5000 and clf.model_.mean_basis.shape[1] <= 40
    assert clf.score(X, y) > 0.9


def test_constant_features_are_dropped():
    X, y = _regression()
    X = np.hstack([X, np.full((len(y), 1), 7.0)])
    model = SIGPRegressor(y_bandwidth=0.5, **FIXED).fit(X, y)
    assert model.feature_mask_.tolist() == [True, True, True, False]
    assert f"rank {model.kernel_rank_}" in model.subspace_solver_
    assert np.isfinite(model.predict(X)).all()


@pytest.mark.parametrize(
    "kwargs, X_y, match",
    [
        (dict(rank=100), "reg", "rank"),
        (dict(rank=0), "reg", "rank"),
        (dict(rank=-2), "reg", "rank must be 'auto', a positive number"),
        (dict(rank=1.5), "reg", "rank"),
        (dict(rank=2, subspace="slicing", n_slices=10), "few", "distinct values"),
        (dict(rank=2, subspace="pca"), "reg", "subspace"),
        (dict(rank=2, mean="kernel"), "reg", "mean"),
        (dict(rank=2, lengthscale=-1.0), "reg", "lengthscale"),
        (dict(rank=2, eta="big"), "reg", "eta"),
        (dict(rank=2), "constant_X", "constant"),
        (dict(rank=2), "constant_y", "constant"),
    ],
)
def test_regressor_bad_inputs(kwargs, X_y, match):
    X, y = _regression()
    if X_y == "few":
        y = np.round(y) % 3
    elif X_y == "constant_X":
        X = np.ones_like(X)
    elif X_y == "constant_y":
        y = np.full_like(y, 2.0)
    with pytest.raises(ValueError, match=match):
        SIGPRegressor(**kwargs).fit(X, y)


def test_classifier_single_class_and_nan():
    X, _ = _regression(n=30)
    with pytest.raises(ValueError, match="1 class"):
        SIGPClassifier(**FIXED).fit(X, np.zeros(30))
    X[0, 0] = np.nan
    with pytest.raises(ValueError):
        SIGPClassifier(**FIXED).fit(X, np.arange(30) % 2)


def test_multiclass_probabilities_calibrated_link_and_pickle():
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [3, 0], [0, 3], [3, 3]])
    X = np.vstack([c + 0.6 * rng.normal(size=(40, 2)) for c in centers])
    y = np.repeat(["a", "b", "c", "d"], 40)
    clf = SIGPClassifier(**FIXED).fit(X, y)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba, rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(1)], clf.predict(X))
    assert clf.score(X, y) > 0.9 and clf.temperature_ > 0
    # calibration on the training data: mean confidence close to accuracy
    assert abs(proba.max(1).mean() - clf.score(X, y)) < 0.1
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(clone.predict_proba(X), proba)


def test_probabilities_from_small_data_are_calibrated_on_held_out_folds():
    """The link's temperature is fitted to out-of-fold scores. Leave-one-out means of the full fit
    reuse each row's label through the subspace (at n = 20 they equal the labels nearly exactly),
    which gave temperatures near the upper bound and probabilities of 0.999 for points that were
    wrong 14 % of the time (test log-loss 4.2 on 20 rows of concrete, 0.60 now)."""
    n, rng = 20, np.random.default_rng(3)
    X = rng.normal(size=(n + 2000, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.7 * rng.normal(size=len(X)) > 0).astype(int)
    clf = SIGPClassifier(random_state=0).fit(X[:n], y[:n])
    assert clf.temperature_source_ == "cross-validation"
    p = clf.predict_proba(X[n:])[np.arange(2000), y[n:]]
    wrong_and_sure = (p < 0.02).mean()
    # here leave-one-out calibration gave log-loss 0.55 with 1.5 % of points wrong at p < 0.02
    assert -np.log(p).mean() < 0.5 and wrong_and_sure < 0.005


def test_presets_registered():
    assert isinstance(hdgp.preset("SIGP", rank=2), SIGPRegressor)
    assert isinstance(hdgp.preset("SIGP-classifier"), SIGPClassifier)


def test_non_finite_variance_ratio_warns_and_stays_uncalibrated(monkeypatch):
    import hdgp.estimators._sigp_base as sigp_estimators

    real = sigp_estimators.cross_validate
    monkeypatch.setattr(sigp_estimators, "cross_validate", lambda *a, **k: (*real(*a, **k)[:2], float("nan")))
    X, y = _regression()
    with pytest.warns(NumericalWarning, match="not calibrated"):
        model = SIGPRegressor(y_bandwidth=0.5, **FIXED).fit(X, y)
    assert model.variance_scale_ == 1.0
    assert np.isfinite(model.predict(X, return_std=True)[1]).all()


def test_training_folds_too_small_for_the_rank_leave_the_variance_uncalibrated():
    """Folds with fewer than rank + 6 rows nearly interpolate; their variance ratio is noise.

    (n = 8, rank 3, cv = 3 trains on 5-6 rows, 1-2 residual degrees of freedom:
    variance_scale_ was about 1e4; with 2-row folds it reached 1e9.)
    """
    X, y = _regression(n=8)
    for rank, cv in ((3, 3), (1, 4)):
        with pytest.warns(NumericalWarning, match=rf"not calibrated.*rank-{rank} fit needs at least rank \+ 6"):
            model = SIGPRegressor(**{**FIXED, "rank": rank}, cv=cv).fit(X, y)
        assert model.variance_scale_ == 1.0
    with pytest.warns(NumericalWarning, match="not calibrated"):  # rank chosen by CV, then checked
        model = SIGPRegressor(**{**FIXED, "rank": [1, 2]}, cv=3).fit(X, y)
    assert model.variance_scale_ == 1.0
    X, y = _regression(n=30)
    model = SIGPRegressor(**FIXED, cv=3).fit(X, y)  # folds of 20 rows: calibrated
    assert model.variance_scale_ != 1.0


def test_cross_validation_with_a_one_row_training_fold_is_a_clear_error():
    """n = 3 with cv = 2 trains one fold on a single row (it was a raw RuntimeError from torch)."""
    X, y = _regression(n=3)
    with pytest.raises(ValueError, match=r"cv=2 on n_samples = 3 trains on a fold of 1 row.*at least 2"):
        SIGPRegressor(rank=1, cv=2).fit(X, y)
    with pytest.warns(NumericalWarning, match="not calibrated"):  # nothing to choose: no CV needed
        model = SIGPRegressor(**{**FIXED, "rank": 1}, cv=2).fit(X, y)
    assert np.isfinite(model.predict(X)).all()


def test_classifier_with_fixed_hyper_parameters_needs_no_cv_sized_classes():
    """Nothing to cross-validate, so a class with one sample is fine (it used to be refused)."""
    X, _ = _regression(n=10)
    y = np.array([0] * 5 + [1] * 4 + [2])
    clf = SIGPClassifier(rank=1, lengthscale=2.0, eta=1e-3).fit(X, y)
    assert clf.cv_scores_ == {} and clf.predict(X).shape == (10,)
    assert clf.temperature_source_ == "leave-one-out"  # no stratified folds with a one-row class
    np.testing.assert_allclose(clf.predict_proba(X).sum(1), 1.0)
    with pytest.raises(ValueError, match="at least 2 samples of every class; class 2 has 1"):
        SIGPClassifier(rank=1, eta=1e-3).fit(X, y)  # lengthscale="auto" is cross-validated


def test_fitted_model_keeps_no_training_features_and_predicts_in_blocks(monkeypatch):
    """The fitted model holds neither the (n, r) kernel features (a 20,000-row model file was
    158 MB) nor the (n, p) training rows: prediction reads the r pivot rows only, so its pickle
    does not grow with n. Prediction in row blocks gives the one-pass result."""
    import hdgp.sigp.model as sigp_model

    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=2000)
    est = SIGPRegressor(rank=2, lengthscale=3.0, eta=1e-3, input_scaling=None).fit(X, y)  # the paper's isotropic kernel: a kernel rank that would grow with n
    assert est.model_.factor.features is None and est.kernel_rank_ == est.model_.factor.L_pp.shape[0]
    assert est.model_.factor.pivot_inputs.shape == (est.kernel_rank_, 3)
    parts = [est.model_, est.model_.factor, *est.model_.fits]
    shapes = [tuple(v.shape) for part in parts for v in vars(part).values() if isinstance(v, torch.Tensor)]
    assert X.shape[0] not in {size for shape in shapes for size in shape}, shapes
    assert len(pickle.dumps(est)) < 8 * (est.kernel_rank_ + 10) ** 2  # L_pp and coefficients, not n rows
    X_new = rng.normal(size=(1000, 3))
    one = est.predict(X_new, return_std=True)
    monkeypatch.setattr(sigp_model, "_PREDICT_BLOCK_FLOATS", 300 * est.kernel_rank_)  # blocks of 300 rows
    blocked = est.predict(X_new, return_std=True)
    assert np.allclose(one[0], blocked[0], atol=1e-12) and np.allclose(one[1], blocked[1], atol=1e-12)


def test_linear_mean_that_can_interpolate_warns_and_is_not_calibrated():
    """With p >= n - 1 features the linear mean fits y exactly: eq. (14)'s penalised likelihood
    has no maximum, and on the CV folds the noise estimate collapsed (a variance ratio of 1e9
    before the calibration counted the mean's degrees of freedom). Both warnings point at the caller."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 60))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SIGPRegressor(mean="linear", rank=2, lengthscale=60.0, eta=1e-4, mean_penalty=1.0).fit(X, y)
    messages = {str(w.message): w.filename for w in caught if issubclass(w.category, NumericalWarning)}
    interpolate = [m for m in messages if "can fit the target exactly" in m]
    uncalibrated = [m for m in messages if "linear mean on 60 features needs at least rank + 60 + 6" in m]
    assert interpolate and uncalibrated
    assert {messages[interpolate[0]], messages[uncalibrated[0]]} == {__file__}
    assert model.variance_scale_ == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)  # the constant mean is well posed on the same data
        SIGPRegressor(rank=2, lengthscale=60.0, eta=1e-4).fit(X, y)


def test_verbose_shows_one_step_per_fold_and_the_final_fit(capsys):
    X, y = _regression(n=60)
    SIGPRegressor(rank=[1, 2], lengthscale=2.0, eta=1e-3, cv=3, verbose=True).fit(X, y)
    err = capsys.readouterr().err
    assert "SIGP 3-fold cross-validation" in err and "SIGP fit on all rows" in err and "/4 [" in err
    SIGPClassifier(rank=1, lengthscale=2.0, eta=1e-3, cv=3, verbose=True).fit(X, y > np.median(y))
    assert "SIGP out-of-fold means" in capsys.readouterr().err  # the temperature's held-out fits
    SIGPRegressor(**FIXED).fit(X, y)
    assert capsys.readouterr().err == ""


def test_regressor_has_the_predictive_density_and_draws_of_the_other_regressors():
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    est = SIGPRegressor(rank=1, lengthscale=2.0, eta=1e-3).fit(X, y)
    mean, std = est.predict(X[:10], return_std=True)
    np.testing.assert_allclose(est.log_predictive_density(X[:10], y[:10]), norm.logpdf(y[:10], mean, std), rtol=1e-10)
    draws = est.sample_y(X[:5], n_samples=4000, random_state=1)
    assert (np.abs(draws.mean(1) - mean[:5]) < 5 * std[:5] / np.sqrt(4000)).all()  # 5 standard errors


CV_OPTIONS = dict(mean="constant", kernel_tol=1e-6, max_kernel_rank=1000, max_iter=50, tol=1e-6)


def _cv_data(n=40, p=3):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, ((y - y.mean()) / y.std()).unsqueeze(1)


def _cv_responses(Yf):
    return [(0.5, kernel_response_features(Yf[:, 0], 0.5), 1e-3)]


def _neg_mse(Y, mean):
    return -float(((Y - mean) ** 2).mean())


def test_variance_ratio_is_a_mean_over_every_held_out_value_not_per_row():
    """Two identical target columns give the same fits per column, hence the same mean squared
    standardised residual as one column (a per-row normalisation would double it)."""
    X, Y = _cv_data()
    folds = [(np.arange(20, 40), np.arange(20)), (np.arange(20), np.arange(20, 40))]
    grid = dict(lengthscales=[1.5], etas=[1e-3], ranks=[2], mean_penalties=[None])
    _, _, r1 = cross_validate(X, Y, folds, _cv_responses, _neg_mse, **grid, **CV_OPTIONS)
    _, _, r2 = cross_validate(X, torch.cat([Y, Y], 1), folds, _cv_responses, _neg_mse, **grid, **CV_OPTIONS)
    assert np.isfinite(r1) and r1 > 0
    assert r2 == pytest.approx(r1, rel=1e-9)


def test_candidates_missing_a_fold_are_not_scored():
    """A rank above one training fold's kernel rank is fitted on the other folds only; it must not
    enter the scores (its mean would be over fewer, different folds)."""
    X, Y = _cv_data()
    folds = [(np.arange(6), np.arange(6, 40)), (np.arange(6, 40), np.arange(6))]  # 6 and 34 training rows
    grid = dict(lengthscales=[1.5], etas=[1e-3], ranks=[2, 10], mean_penalties=[None])
    best, scores, _ = cross_validate(X, Y, folds, _cv_responses, _neg_mse, **grid, **CV_OPTIONS)
    assert [dict(k)["rank"] for k in scores] == [2]
    assert best["rank"] == 2


def test_cv_accepts_an_iterable_of_train_test_splits():
    """As scikit-learn's ``check_cv``: a list (or generator) of (train, test) index arrays is a valid cv
    (it was refused: "cv must be an integer >= 2 or a scikit-learn cross-validation splitter")."""
    from sklearn.model_selection import KFold, StratifiedKFold

    X, y = _regression(n=60)
    kw = dict(rank=2, lengthscale=[1.0, 3.0], eta=[1e-4, 1e-2])
    ref = SIGPRegressor(cv=KFold(3), **kw).fit(X, y)
    as_list = SIGPRegressor(cv=list(KFold(3).split(X)), **kw).fit(X, y)
    as_generator = SIGPRegressor(cv=KFold(3).split(X), **kw).fit(X, y)
    assert as_list.cv_scores_ == ref.cv_scores_ == as_generator.cv_scores_
    labels = (y > np.median(y)).astype(int)
    clf = SIGPClassifier(cv=list(StratifiedKFold(3).split(X, labels)), **kw).fit(X, labels)
    assert clf.temperature_source_ == "cross-validation"
    with pytest.raises(ValueError, match=r"cv=\[\] gave no cross-validation folds"):
        SIGPRegressor(cv=[], **kw).fit(X, y)


def test_fixed_hyper_parameters_fit_fewer_rows_than_cv_folds_uncalibrated():
    """Fixed hyper-parameters need no CV; with ``calibrate_variance`` (the default) and fewer rows than
    ``cv`` the fit stopped ("5-fold cross-validation needs at least 5 samples") where 5 rows only warned."""
    X, y = _regression(n=4)
    with pytest.warns(NumericalWarning, match=r"not calibrated.*no cross-validation folds.*needs at least 5"):
        model = SIGPRegressor(**{**FIXED, "rank": 1}).fit(X, y)
    assert model.variance_scale_ == 1.0 and np.isfinite(model.predict(X, return_std=True)[1]).all()


def test_sliced_cross_validation_folds_with_fewer_values_than_slices():
    """A training fold holding fewer distinct targets than n_slices (7 of 10 on sorted data) stopped the
    fit with "The target has 7 distinct values" (the target has 10), or with fixed hyper-parameters left
    the variance uncalibrated with a warning blaming the rank."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.normal(size=(90, 2)), axis=0)
    y = np.repeat(np.arange(10.0), 9)
    kw = dict(subspace="slicing", n_slices=10, cv=3)
    model = SIGPRegressor(rank=[1, 2], lengthscale=1.0, eta=1e-3, **kw).fit(X, y)
    assert model.best_params_["response"] == "slices" and len(model.cv_scores_) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        model = SIGPRegressor(rank=2, lengthscale=1.0, eta=1e-3, **kw).fit(X, y)
    assert model.variance_scale_ != 1.0


def test_rank_above_max_kernel_rank_names_the_cap():
    """It was blamed on the kernel's numerical rank ("lower `rank` or the length-scale")."""
    X, y = _regression(n=40)
    with pytest.raises(ValueError, match="rank=5 exceeds max_kernel_rank=3"):
        SIGPRegressor(rank=5, lengthscale=2.0, eta=1e-3, max_kernel_rank=3).fit(X, y)


def test_decision_function_agrees_with_predict_under_class_weight():
    """scikit-learn's convention: predict is classes_[decision_function > 0] (binary) or its arg-max.
    With class_weight="balanced" the unshifted latent means disagreed with predict on 10 % of the rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    X_new = rng.normal(size=(2000, 2))
    binary = (X[:, 0] + 0.5 * rng.normal(size=200) > 1.0).astype(int)  # 14 % positive
    three = np.digitize(X[:, 0] + 0.3 * rng.normal(size=200), [0.0, 1.2])
    for y in (binary, three):
        for weight in (None, "balanced"):
            clf = SIGPClassifier(rank=2, lengthscale=1.0, eta=1e-3, class_weight=weight).fit(X, y)
            scores = clf.decision_function(X_new)
            winner = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(1)
            np.testing.assert_array_equal(clf.classes_[winner], clf.predict(X_new))
            a = clf.temperature_
            logits = np.c_[-a * scores, a * scores] if scores.ndim == 1 else a * scores
            proba = np.exp(logits - logits.max(1, keepdims=True))
            np.testing.assert_allclose(proba / proba.sum(1, keepdims=True), clf.predict_proba(X_new), atol=1e-12)


def test_scoring_of_the_regressor_sees_held_out_means_in_the_target_units():
    """scikit-learn's neg_mean_squared_error on the raw target is the default score (minus the MSE of
    the standardised target) times y_scale_**2, candidate by candidate."""
    X, y = _regression(n=80)
    kw = dict(rank=[1, 3], lengthscale=[0.5, 2.0], eta=1e-3, cv=3)
    default = SIGPRegressor(**kw).fit(X, y)
    raw = SIGPRegressor(scoring="neg_mean_squared_error", **kw).fit(X, y)
    assert raw.cv_scores_.keys() == default.cv_scores_.keys()
    for key, value in default.cv_scores_.items():
        assert raw.cv_scores_[key] == pytest.approx(value * default.y_scale_**2, rel=1e-10)
    assert raw.best_params_ == default.best_params_


@pytest.mark.parametrize("n_classes", [2, 3])
def test_scoring_of_the_classifier_sees_latent_scores_and_original_labels(n_classes):
    """A user scorer of the decision function that computes the default's squared error of the ±1 codes
    reproduces the default scores exactly, so the held-out decisions, their columns and the labels all
    reach the scorer as scikit-learn's would; predict is their sign / arg-max."""
    from sklearn.metrics import accuracy_score, make_scorer
    from sklearn.model_selection import StratifiedKFold

    X, y = _regression(n=90)
    labels = np.array(["low", "mid", "top"])[:n_classes]
    y = labels[np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))]
    kw = dict(rank=[1, 2], lengthscale=[0.5, 2.0], eta=1e-3, cv=3)

    def neg_code_error(truth, scores):
        codes = 2.0 * (truth[:, None] == labels[None, :]) - 1.0
        return -np.mean((codes[:, 1:] - scores[:, None]) ** 2) if scores.ndim == 1 else -np.mean((codes - scores) ** 2)

    default = SIGPClassifier(**kw).fit(X, y)
    mirrored = SIGPClassifier(scoring=make_scorer(neg_code_error, response_method="decision_function"), **kw)
    mirrored.fit(X, y)
    assert mirrored.cv_scores_.keys() == default.cv_scores_.keys()
    for key, value in default.cv_scores_.items():
        assert mirrored.cv_scores_[key] == pytest.approx(value, rel=1e-10)

    seen = []

    def accuracy_from_scores(estimator, X_val, truth):
        scores = estimator.decision_function(X_val)
        winner = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(1)
        np.testing.assert_array_equal(estimator.predict(X_val), labels[winner])
        seen.append(truth)
        return accuracy_score(truth, estimator.predict(X_val))

    by_hand = SIGPClassifier(scoring=accuracy_from_scores, **kw).fit(X, y)
    by_name = SIGPClassifier(scoring="accuracy", **kw).fit(X, y)
    assert by_hand.cv_scores_ == by_name.cv_scores_
    assert all(0.0 <= v <= 1.0 for v in by_name.cv_scores_.values())
    folds = [val for _, val in StratifiedKFold(3).split(X, y)]
    for i, truth in enumerate(seen):  # grid points in the inner loop, folds in the outer
        np.testing.assert_array_equal(truth, y[folds[i // len(default.cv_scores_)]])


def test_scoring_that_needs_probabilities_is_a_clear_error():
    X, y = _regression(n=60)
    labels = (y > np.median(y)).astype(int)
    with pytest.raises(ValueError, match="needs predicted probabilities"):
        SIGPClassifier(rank=1, lengthscale=[1.0, 2.0], eta=1e-3, scoring="neg_log_loss").fit(X, labels)
    kw = dict(rank=1, lengthscale=[1.0, 2.0], eta=1e-3)
    with pytest.raises(ValueError, match="scoring='no such scorer' is not a scikit-learn scorer"):
        SIGPRegressor(scoring="no such scorer", **kw).fit(X, y)
    with pytest.raises(ValueError, match="scoring='accuracy' failed on the held-out predictions .* of SIGPRegressor"):
        SIGPRegressor(scoring="accuracy", **kw).fit(X, y)  # a classification metric of a regressor
    with pytest.raises(ValueError, match="gave nan on a cross-validation fold"):
        SIGPRegressor(scoring=lambda estimator, X_val, y_val: float("nan"), **kw).fit(X, y)


def test_temperature_of_separable_held_out_scores_is_platts_closed_form():
    """With Platt's targets (n_k + 1)/(n_k + 2) the fitted link of held-out scores +-s that separate two
    classes of n rows each solves sigmoid(2 a s) = (n + 1)/(n + 2): a = log(n + 1)/(2 s). With 0/1 targets
    the maximum-likelihood a is infinite (it ran to the search bound, e^6)."""
    n, s = 20, 0.8
    codes = np.repeat([0, 1], n)
    scores = SIGPClassifier._scores_matrix(torch.as_tensor(np.where(codes == 1, s, -s), dtype=torch.float64)[:, None])
    assert SIGPClassifier._fit_temperature(scores, codes) == pytest.approx(np.log(n + 1) / (2 * s), rel=1e-4)


@pytest.mark.parametrize("seed", [0, 3])
def test_probabilities_on_separable_data_are_not_certain_on_the_wrong_side(seed):
    """40 rows split by x > 0: every held-out score was on the right side, the temperature went to 103-140
    and test points a little beyond the fitted boundary got the wrong class with probability 1 (test
    log-loss 1.20 and 0.40 for seeds 0 and 3; an exact GP classifier gets 0.07)."""
    rng = np.random.default_rng(seed)
    X, X_test = rng.normal(size=(40, 1)), rng.normal(size=(400, 1))
    y, y_test = (X[:, 0] > 0).astype(int), (X_test[:, 0] > 0).astype(int)
    clf = SIGPClassifier(random_state=0).fit(X, y)
    p = clf.predict_proba(X_test)[np.arange(400), y_test]
    assert clf.temperature_ < 5 and -np.log(p).mean() < 0.2 and p.min() > 0.1
