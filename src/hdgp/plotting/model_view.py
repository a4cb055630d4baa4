"""What the figures read of a fitted OAK model: discrete levels, grids over the inputs, the user's units
(the flow inverted), training quantiles, and the posterior of one component on a grid."""

from __future__ import annotations

import numpy as np

from ..explain import component_posterior


def _discrete_values(est, j):
    """Values of a discrete column in the user's units, else None.

    Categorical and binary columns take their levels (coded 0..M-1 inside); an
    auto-detected two-point column its two training values (scaled to 0 and 1 inside).
    """
    if j in est.levels_:
        return est.levels_[j]
    two_point = est._two_point()
    return np.array(two_point[j][:2]) if j in two_point else None


def _grid_inputs(est, summary, cols, n_grid):
    """Grid over the training range of ``cols`` (transformed space); discrete columns take every level.

    Other columns sit at their training mean, or their most frequent level code if
    categorical (level codes must stay integers; the component ignores them anyway);
    all read from ``summary`` (:func:`~hdgp._input_summary.input_summary`).
    """
    axes = []
    for j in cols:
        values = _discrete_values(est, j)
        axes.append(np.arange(len(values), dtype=float) if values is not None
                    else np.linspace(summary["low"][j], summary["high"][j], n_grid))
    mesh = np.meshgrid(*axes, indexing="ij")
    grid = np.tile(summary["centre"], (mesh[0].size, 1))
    for j, m in zip(cols, mesh):
        grid[:, j] = m.ravel()
    return grid, mesh


def _level_labels(est, j):
    """The levels of discrete column ``j`` as the user gave them (DataFrame categories or numbers)."""
    values = _discrete_values(est, j)
    frame_levels = getattr(est, "frame_levels_", {})
    columns = est._frame_labels()
    if j in est.levels_ and j < len(columns) and columns[j] in frame_levels:
        return [frame_levels[columns[j]][int(code)] for code in values]
    return list(values)


def _labels(est, j, names, level_labels):
    levels = _level_labels(est, j) if level_labels is None else level_labels(names[j], _discrete_values(est, j))
    return [f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v) for v in levels]


def _original_units(est, j, values):
    """Map transformed values of column ``j`` back to the user's units (flow inverse or levels)."""
    if j in est.levels_:
        return est.levels_[j][values.astype(int)]
    two_point = est._two_point()
    if j in two_point:
        low, high, _ = two_point[j]
        return low + values * (high - low)
    cont = est.continuous_features_
    k = cont.index(j)
    Z = np.zeros((len(values), len(cont)))
    Z[:, k] = values
    if est.flow_ is not None:
        return est.flow_.inverse_transform(Z)[:, k]
    return values * est.x_scale_[k] + est.x_mean_[k]


class _LatentView:
    """One latent function of a fitted :class:`~hdgp.estimators.oak_classifier.OAKClassifier`,
    seen the way the plots see an :class:`~hdgp.estimators.oak.OAKRegressor`.

    Its posterior, training inputs and Sobol ranking come from the classifier (the
    latent function of ``class_label``, :meth:`OAKClassifier._problem`); the input
    handling (levels, flow, two-point columns) from the classifier's ``encoder_``.
    ``y_scale_``, the regressor's target scale, is the latent function's sign (−1 for
    the first of two classes).
    """

    def __init__(self, clf, class_label):
        self._clf = clf  # first: __getattr__ reads it
        k, self.y_scale_ = clf._problem(class_label)
        self.class_label = clf.classes_[1] if class_label is None else class_label
        self.posterior_ = clf.posteriors_[k]
        # what the plots read of the training inputs (clf.X_train_: files saved 2026-11-24)
        self.input_summary_ = getattr(clf, "input_summary_", None)
        self.X_train_ = getattr(clf, "X_train_", None)
        self.sobol_indices_ = clf.sobol_indices_[k] if isinstance(clf.sobol_indices_, list) else clf.sobol_indices_
        # this latent function's selected terms (``components_``, ``sobol_threshold``), as for a regressor
        self.components_ = clf._terms_by_problem(None)[k]
        self.sobol_ = clf.sobol_[k]

    def __getattr__(self, name):  # levels_, flow_, continuous_features_, _two_point, ...
        return getattr(self._clf.encoder_, name)

    def _term(self, term):
        return self._clf._term(term)

    def _feature_names(self):
        return self._clf._feature_names()


def _training_inputs(est):
    """The training rows in the model's units (n, d), or None where the model keeps none (a classifier)."""
    X = getattr(est, "X_train_", None)
    if X is None:
        return None
    return X.detach().cpu().numpy() if hasattr(X, "detach") else np.asarray(X, dtype=float)


def _quantiles(est, summary, j, q):
    """Training quantiles ``q`` of column ``j`` in the model's units (from the rows, else from the histogram)."""
    X = _training_inputs(est)
    if X is not None:
        return np.quantile(X[:, j], q)
    counts, edges = np.asarray(summary["counts"][j], float), np.asarray(summary["edges"][j], float)
    cumulative = np.concatenate([[0.0], np.cumsum(counts)]) / max(counts.sum(), 1.0)
    return np.interp(q, cumulative, edges)


def _posterior_on(est, u, grid, shape):
    """Posterior mean and standard deviation of component ``u`` at ``grid`` (model units), shaped ``shape``."""
    mean, var = component_posterior(est.posterior_, u, est.posterior_.alpha.new_tensor(grid))
    mean = mean.cpu().numpy().reshape(shape) * est.y_scale_
    sd = np.sqrt(np.clip(var.cpu().numpy(), 0.0, None)).reshape(shape) * abs(est.y_scale_)
    return mean, sd
