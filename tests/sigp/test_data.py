"""Loaders of the SIGP paper's data files (skipped without the shared data folder)."""

import numpy as np
import pytest

from hdgp.data import find_data_dir
from hdgp.data.sigp import load_sigp, load_sigp_split

pytestmark = [pytest.mark.data, pytest.mark.skipif(
    find_data_dir() is None or not (find_data_dir() / "sigp").is_dir(),
    reason="shared benchmark data not found (set HDGP_DATA_DIR)",
)]


@pytest.mark.parametrize(
    "name, shape, labels",
    [("heart", (270, 13), {1, 2}), ("german", (1000, 24), {1, 2}), ("cancer", (699, 9), {2, 4})],
)
def test_classification_sets(name, shape, labels):
    X, y = load_sigp(name)
    assert X.shape == shape and set(np.unique(y)) == labels and np.isfinite(X).all()


def test_fixed_splits():
    X_tr, y_tr, X_te, y_te = load_sigp_split("housing")
    assert X_tr.shape == (400, 13) and X_te.shape == (106, 13)
    assert y_tr[0] == pytest.approx(24.0)  # MEDV of the first row, raw units
    with pytest.raises(ValueError, match="fixed split"):
        load_sigp_split("madelon")
    with pytest.raises(ValueError, match="Unknown"):
        load_sigp("temp")


@pytest.mark.parametrize("name, n_test", [("heart", 100), ("german", 300), ("cancer", 200)])
def test_reconstructed_splits_hold_out_the_last_rows(name, n_test):
    X, y = load_sigp(name)
    X_tr, y_tr, X_te, y_te = load_sigp_split(name)
    assert len(y_te) == n_test and len(y_tr) == len(y) - n_test
    np.testing.assert_array_equal(np.vstack([X_tr, X_te]), X)
    np.testing.assert_array_equal(np.concatenate([y_tr, y_te]), y)


def test_reconstructed_splits_reproduce_the_papers_baselines():
    """The evidence for the reconstruction: standard baselines on training-standardised
    inputs give the paper's Table 2 F1 to four digits (Laplace on heart, SVM on cancer)."""
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.metrics import f1_score
    from sklearn.svm import SVC

    def scaled(name):
        X_tr, y_tr, X_te, y_te = load_sigp_split(name)
        mean, std = X_tr.mean(0), X_tr.std(0)
        return (X_tr - mean) / std, y_tr, (X_te - mean) / std, y_te

    X_tr, y_tr, X_te, y_te = scaled("heart")
    laplace = GaussianProcessClassifier(ConstantKernel() * RBF(np.sqrt(13.0)), random_state=0).fit(X_tr, y_tr)
    assert f1_score(y_te, laplace.predict(X_te), pos_label=2) == pytest.approx(0.8409, abs=5e-5)
    X_tr, y_tr, X_te, y_te = scaled("cancer")
    assert f1_score(y_te, SVC().fit(X_tr, y_tr).predict(X_te), pos_label=4) == pytest.approx(0.9888, abs=5e-5)


def test_authors_arcene_demo_is_reproduced():
    """The authors' demo (README: F1 = 0.85714): rank 1, RBF exp(-|x - x'|^2 / 340.1^2),
    eta = 7.5899e-7 on the covariance operator, inputs standardised with the statistics
    of train and valid together, as their script does; class-sliced subspace."""
    import torch
    from sklearn.metrics import f1_score

    from hdgp.sigp.em import fit_constant_mean
    from hdgp.sigp.lowrank import pivoted_cholesky
    from hdgp.sigp.model import SIGPModel
    from hdgp.sigp.subspace import class_features, reduced_pencil, sdr_subspace

    X_tr, y_tr, X_te, y_te = load_sigp_split("arcene")
    X = np.vstack([X_tr, X_te])
    X = torch.as_tensor((X - X.mean(0)) / np.maximum(X.std(0, ddof=1), 1e-12))
    y = torch.as_tensor(y_tr)
    Xtr, Xte = X[:100], X[100:]
    factor = pivoted_cholesky(Xtr, 340.1 / np.sqrt(2), tol=1e-12)
    sub = sdr_subspace(*reduced_pencil(factor.features, class_features((y > 0).long())), 1, 7.5899e-7, 100)
    centre = factor.features.mean(0)
    fit = fit_constant_mean((factor.features - centre) @ sub.coef, y)
    model = SIGPModel(factor, sub.coef, centre, [fit], Xtr.new_zeros(Xtr.shape[1], 0))
    pred = np.sign(model.predict(Xte)[0][:, 0].numpy())
    assert f1_score(y_te, pred) == pytest.approx(0.85714, abs=1e-5)
