"""What component plots need of the training inputs, without keeping the rows.

Classifiers, and regressors fitted with sparse or variational inference, need no
training inputs to predict (their posterior lives on the inducing points), yet
component plots draw each feature over its training range, hold the other
features at a typical value and show the feature's histogram.
:func:`summarize_inputs` keeps exactly that, O(d) numbers per fit, where the rows
themselves (``X_train_``) would make a 10⁵ × 128 model file ~100 MB. The
classifiers store it at fit time; :mod:`hdgp.io.compact` writes it in place of
the rows of an inducing-point regressor.
"""

from __future__ import annotations

import numpy as np
import torch

from ._arrays import as_float64

__all__ = ["HISTOGRAM_BINS", "input_summary", "summarize_inputs"]

#: Equal-width bins of each column's histogram (over its training range, transformed units).
HISTOGRAM_BINS = 30


def summarize_inputs(Xt: torch.Tensor, level_columns=()) -> dict:
    """Per-column summary of transformed training inputs ``Xt`` of shape (n, d).

    Returns
    -------
    dict
        ``n_rows``; ``low``, ``high`` (d,): the training range; ``centre`` (d,): the
        mean, or for the columns in ``level_columns`` (integer level codes) the most
        frequent code; ``counts`` (d, :data:`HISTOGRAM_BINS`) and ``edges``
        (d, :data:`HISTOGRAM_BINS` + 1): equal-width histograms over ``[low, high]``
        (a constant column gets one unit-wide range around its value).
    """
    X = as_float64(Xt)
    observed = [X[~np.isnan(X[:, j]), j] for j in range(X.shape[1])]  # missing cells (OAK) are left out
    low, high = np.array([c.min() for c in observed]), np.array([c.max() for c in observed])
    centre = np.array([c.mean() for c in observed])
    for j in level_columns:
        centre[j] = np.bincount(observed[j].astype(np.int64)).argmax()
    flat = high <= low
    edges = np.linspace(np.where(flat, low - 0.5, low), np.where(flat, high + 0.5, high), HISTOGRAM_BINS + 1, axis=1)
    counts = np.stack([np.histogram(observed[j], bins=edges[j])[0] for j in range(X.shape[1])])
    return {"n_rows": int(X.shape[0]), "low": low, "high": high, "centre": centre, "counts": counts, "edges": edges}


def input_summary(est) -> dict:
    """``est.input_summary_``, or the summary of ``est.X_train_`` for an estimator that keeps its rows.

    Raises
    ------
    ValueError
        Neither is there (a classifier saved by an hdgp version that kept no training inputs).
    """
    summary = getattr(est, "input_summary_", None)
    if summary is not None:
        return summary
    X = getattr(est, "X_train_", None)
    if X is None:
        raise ValueError("This model was saved by an hdgp version that kept no summary of its training inputs, "
                         "which the component plots need for their ranges; refit it to plot components.")
    return summarize_inputs(X, getattr(est, "levels_", {}))
