"""Hyper-parameters of SIGP by K-fold cross-validation on the training data.

Tan & Mukherjee (Sec. 6) choose the RBF bandwidth and the other SIGP settings
"by cross-validation on the training data". Each candidate combination of
length-scale, response estimate (e.g. the y-kernel bandwidth), ``eta``, rank
and mean penalty is scored on held-out folds; the work shared between
candidates is reused by :func:`hdgp.sigp.model.fit_grid`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

import numpy as np
import torch

from .model import fit_grid, fit_one

__all__ = ["cross_validate", "out_of_fold_means"]


def _key(params: dict) -> tuple:
    return tuple(sorted(params.items(), key=lambda kv: kv[0]))


def cross_validate(
    X: torch.Tensor,
    Y: torch.Tensor,
    folds: list[tuple[np.ndarray, np.ndarray]],
    make_responses: Callable[[torch.Tensor], list],
    score: Callable[[torch.Tensor, torch.Tensor], float],
    *,
    on_fold: Callable[[], None] | None = None,
    **grid,
) -> tuple[dict, dict, float]:
    """Score every grid point on every fold and return the best.

    Parameters
    ----------
    X : torch.Tensor of shape (n, p)
    Y : torch.Tensor of shape (n, k)
    folds : list of (train_index, validation_index)
    make_responses : callable
        ``make_responses(Y_train)`` returns the ``responses`` list of
        :func:`~hdgp.sigp.model.fit_grid` for a training fold.
    score : callable
        ``score(Y_val, mean_val)``, higher is better.
    on_fold : callable or None
        Called after each fold (progress reporting).
    **grid
        Keyword arguments of :func:`~hdgp.sigp.model.fit_grid` (lists of candidates
        and fitting options).

    Returns
    -------
    best : dict
        Hyper-parameters with the highest mean validation score among those
        evaluated on every fold (the first such in grid order on ties).
    scores : dict
        Mean validation score of every candidate, keyed by its sorted items.
    variance_ratio : float
        Mean squared standardised validation residual :math:`(y - \\mu)^2 / v` of
        ``best`` over every held-out value (1 when its predictive variances
        :math:`v` are calibrated).

    Raises
    ------
    ValueError
        If no candidate could be fitted on every fold.
    """
    per_fold: dict[tuple, list[float]] = defaultdict(list)
    sq_residuals: dict[tuple, float] = defaultdict(float)
    order: list[tuple] = []
    for train, val in folds:
        Xtr, Xva, Ytr, Yva = X[train], X[val], Y[train], Y[val]
        factor, features = None, None
        for params, model in fit_grid(Xtr, Ytr, make_responses(Ytr), **grid):
            if model.factor is not factor:  # one phi(X_val) per length-scale
                factor = model.factor
                features = model.features(Xva)
            mean, var = model.predict_from(features, Xva)
            key = _key(params)
            if key not in per_fold:
                order.append(key)
            per_fold[key].append(float(score(Yva, mean)))
            sq_residuals[key] += float(((Yva - mean) ** 2 / var).sum())
        if on_fold is not None:
            on_fold()
    complete = {k: float(np.mean(v)) for k, v in per_fold.items() if len(v) == len(folds)}
    if not complete:
        raise ValueError(
            "No SIGP hyper-parameter candidate could be fitted on every cross-validation "
            "fold (the rank exceeds the numerical rank of the kernel matrix); give a "
            "smaller `rank` or fewer `cv` folds."
        )
    best_key = max((k for k in order if k in complete), key=lambda k: complete[k])
    n_held_out = sum(len(val) for _, val in folds) * Y.shape[1]
    return dict(best_key), complete, sq_residuals[best_key] / n_held_out


def out_of_fold_means(X: torch.Tensor, Y: torch.Tensor, folds, make_responses, params: dict, *,
                      on_fold: Callable[[], None] | None = None, **options) -> torch.Tensor | None:
    """Predictive means of hyper-parameters ``params`` for every row, each from the fit on the
    folds that held it out, (n, k); rows in no validation fold are NaN.

    Unlike leave-one-out means of the full-data fit, they owe nothing to the row's own label
    through the subspace (estimated from every label) or the mean function. None when
    ``params``' rank cannot be fitted on some training fold. ``on_fold`` and ``options``: as
    :func:`cross_validate`.
    """
    out = torch.full_like(Y, float("nan"))
    for train, val in folds:
        model = fit_one(X[train], Y[train], make_responses(Y[train]), params, **options)
        if model is None:
            return None
        out[val] = model.predict_from(model.features(X[val]), X[val])[0]
        if on_fold is not None:
            on_fold()
    return out
