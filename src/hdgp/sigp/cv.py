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
    screen: int | None = None,
    screen_folds: int = 2,
    **grid,
) -> tuple[dict, dict, float]:
    """Score the grid points on the folds and return the best.

    Without ``screen`` every grid point is scored on every fold. With ``screen = K``
    and more folds than ``screen_folds``, the grid is screened first (successive
    halving in its simplest form): every point is scored on the first ``screen_folds``
    folds, and only the ``K`` settings of (length-scale, response, eta) whose best
    point (over ranks and mean penalties) has the highest mean score there are scored
    on the remaining folds. The eigen-solves scale with those settings and the kernel
    factorisations with the length-scales among them, while the choice is still made
    on every fold among the survivors.

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
    screen : int or None
        Settings of (length-scale, response, eta) kept after the screening folds (None: no screening).
    screen_folds : int, default=2
        Folds every grid point is scored on when screening.
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
    survivors = None  # {lengthscale: (set of response keys, list of etas)} after screening
    for i, (train, val) in enumerate(folds):
        Xtr, Xva, Ytr, Yva = X[train], X[val], Y[train], Y[val]
        responses = make_responses(Ytr)
        if survivors is None:
            runs = [(grid, responses)]
        else:
            runs = [(dict(grid, lengthscales=[ell], etas=etas), [r for r in responses if r[0] in keys])
                    for ell, (keys, etas) in survivors.items()]
        for sub_grid, sub_responses in runs:
            factor, features = None, None
            for params, model in fit_grid(Xtr, Ytr, sub_responses, **sub_grid):
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
        if screen is not None and survivors is None and i + 1 == screen_folds < len(folds):
            survivors = _screen(per_fold, order, i + 1, screen)
            for _, etas in survivors.values():
                etas.sort(key=list(grid["etas"]).index)
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


def _screen(per_fold: dict, order: list, n_folds: int, keep: int) -> dict:
    """The ``keep`` best (length-scale, response, eta) settings after ``n_folds`` folds, grouped by
    length-scale as ``{lengthscale: (response keys, etas)}`` (grid order on ties)."""
    best: dict[tuple, float] = {}
    for key in order:
        scores = per_fold[key]
        if len(scores) < n_folds:
            continue
        params = dict(key)
        setting = (params["lengthscale"], params["response"], params["eta"])
        value = float(np.mean(scores))
        if setting not in best or value > best[setting]:
            best[setting] = value
    ranked = sorted(best, key=lambda s: -best[s])[:keep]  # stable: grid order on ties
    survivors: dict = {}
    for ell, response, eta in ranked:
        keys, etas = survivors.setdefault(ell, (set(), []))
        keys.add(response)
        if eta not in etas:
            etas.append(eta)
    return survivors


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
