"""Screened SIGP cross-validation (``cross_validate(screen=K)``) against the full grid search."""

import numpy as np
import pytest
import torch
from sklearn.model_selection import KFold

import hdgp.sigp.cv as cv_module
from hdgp.sigp.cv import cross_validate
from hdgp.sigp.subspace import kernel_response_features

CV_OPTIONS = dict(mean="constant", kernel_tol=1e-6, max_kernel_rank=1000, max_iter=50, tol=1e-6)
GRID = dict(lengthscales=[0.5, 1.0, 2.0, 4.0, 8.0], etas=[1e-6, 1e-4, 1e-2, 1e-1], ranks=[1, 2, 3],
            mean_penalties=[None])


def _data(n=80, p=4):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = torch.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, ((y - y.mean()) / y.std()).unsqueeze(1)


def _responses(Yf):
    return [(0.5, kernel_response_features(Yf[:, 0], 0.5), 1e-4)]


def _neg_mse(Y, mean):
    return -float(((Y - mean) ** 2).mean())


def test_screening_scores_survivors_exactly_as_the_full_search_and_keeps_its_choice(monkeypatch):
    X, Y = _data()
    folds = list(KFold(5).split(X.numpy()))
    full_best, full, full_ratio = cross_validate(X, Y, folds, _responses, _neg_mse, **GRID, **CV_OPTIONS)
    calls = []
    real = cv_module.fit_grid
    monkeypatch.setattr(cv_module, "fit_grid",
                        lambda *a, **k: (calls.append((len(k["lengthscales"]), len(k["etas"]))), real(*a, **k))[1])
    best, scores, ratio = cross_validate(X, Y, folds, _responses, _neg_mse, screen=3, **GRID, **CV_OPTIONS)
    # the survivors are scored on all 5 folds with the very numbers of the full search
    assert 0 < len(scores) < len(full)
    for key, value in scores.items():
        assert value == pytest.approx(full[key], rel=1e-12)
    settings = {(dict(k)["lengthscale"], dict(k)["eta"]) for k in scores}
    assert len(settings) == 3
    # the three settings are the best three of the first two folds, the choice the full search's
    assert best == full_best and ratio == pytest.approx(full_ratio, rel=1e-12)
    # (length-scale, eta) solves: 5 x 4 on each of the first two folds, 3 on each of the other three
    solves = sum(n_ell * n_eta for n_ell, n_eta in calls)
    assert solves == 2 * 20 + 3 * 3


def test_no_screening_with_few_folds_or_a_small_grid():
    X, Y = _data(n=40)
    folds = list(KFold(2).split(X.numpy()))
    full = cross_validate(X, Y, folds, _responses, _neg_mse, **GRID, **CV_OPTIONS)[1]
    screened = cross_validate(X, Y, folds, _responses, _neg_mse, screen=2, **GRID, **CV_OPTIONS)[1]
    assert screened == full  # 2 folds: nothing left to screen for
    folds = list(KFold(4).split(X.numpy()))
    full = cross_validate(X, Y, folds, _responses, _neg_mse, **GRID, **CV_OPTIONS)[1]
    assert cross_validate(X, Y, folds, _responses, _neg_mse, screen=20, **GRID, **CV_OPTIONS)[1] == full
