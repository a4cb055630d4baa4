"""Matplotlib figures for additive models: components with uncertainty, Sobol/accuracy curves.

Figures are drawn with the non-interactive Agg backend unless another backend is
already active, and every function returns the matplotlib ``Figure``.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

from ._input_summary import input_summary

__all__ = ["plot_components", "plot_truncation_curve"]


def _pyplot():
    import matplotlib  # deferred: matplotlib loads when a plot is first drawn, not with hdgp

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def plot_components(est, terms=None, *, n_grid: int = 60, ncols: int = 3, figsize_per=(4.0, 3.2),
                    level_labels=None, target_name: str | None = None, class_label=None):
    """Plot fitted components of an :class:`~hdgp.estimators.oak.OAKRegressor` or of
    the latent function of an :class:`~hdgp.estimators.oak_classifier.OAKClassifier`.

    One-dimensional continuous components: posterior mean with a ±2σ band and the
    feature's histogram (OAK Fig. 1); categorical/binary: bars with ±2σ error bars;
    two continuous features: contours of the posterior mean; a continuous (or
    discrete) feature by a discrete one: one curve per level. Axes are in the
    original units of the features (the flow is inverted); titles carry the
    normalised Sobol index :math:`\\tilde R_u` (Lu et al. 2022, Fig. 1).

    Parameters
    ----------
    est : OAKRegressor or OAKClassifier
        A fitted estimator.
    terms : list of tuples of int or str, optional
        Components to draw (default: the first- and second-order terms of ``est.components_``,
        at most 12; for a classifier those of the latent function of ``class_label``; if
        ``components_`` has none, the top-ranked first- and second-order terms).
    n_grid : int, default=60
        Grid points per continuous axis (half as many, at least 20, for 2-D terms).
    ncols : int, default=3
        Panels per row.
    figsize_per : (float, float), default=(4.0, 3.2)
        Size of one panel in inches.
    level_labels : callable, optional
        ``level_labels(feature_name, levels) -> list of str`` names the levels of a
        discrete feature; default: the DataFrame categories, else the numbers.
    target_name : str, optional
        Names the target on the y axis ("effect on <target_name>"); for a classifier
        the default names the latent function of the class.
    class_label : optional
        Classifiers only: whose latent function to plot (see
        :meth:`OAKClassifier.predict_component`).
    """
    plt = _pyplot()
    if hasattr(est, "posteriors_"):
        est = _LatentView(est, class_label)
        target_name = target_name or f"latent f of class {est.class_label}"
    elif class_label is not None:
        raise ValueError("class_label is for classifiers; a regressor has one latent function.")
    summary = input_summary(est)
    terms = _default_terms(est) if terms is None else [est._term(t) for t in terms]
    if any(len(u) > 2 for u in terms):
        raise ValueError("Only first- and second-order components can be plotted.")
    names = est._feature_names()
    shares = {tuple(sorted(names.index(n) for n in k)): v for k, v in est.sobol_indices_.items()}
    nrows = max(1, math.ceil(len(terms) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(figsize_per[0] * ncols, figsize_per[1] * nrows), squeeze=False)
    for ax, u in zip(axes.ravel(), terms):
        label = " × ".join(names[j] for j in u)
        title = f"{label}  (Sobol {shares.get(tuple(u), float('nan')):.3f})"
        # long feature names wrap instead of running into the neighbouring panels' titles
        ax.set_title("\n".join(textwrap.wrap(title, _title_width(figsize_per[0]))), fontsize=9)
        _draw_component(fig, ax, est, summary, u, names, n_grid, level_labels)
        if ax.get_ylabel() == "":  # every panel but a 2-D contour plots the effect on the target
            ax.set_ylabel(f"effect on {target_name}" if target_name else "effect")
    for ax in axes.ravel()[len(terms):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _default_terms(est) -> list:
    """The terms :func:`plot_components` draws by default: the first- and second-order terms of
    ``components_`` (at most :data:`MAX_DEFAULT_PANELS`; a third-order term there cannot be drawn), or
    the top-ranked first- and second-order terms when ``components_`` holds only higher orders."""
    terms = [u for u in est.components_ if len(u) <= 2]
    if not terms:
        terms = [u for u in est.sobol_.terms if len(u) <= 2]
    return list(terms[:MAX_DEFAULT_PANELS])


#: Most panels :func:`plot_components` draws without ``terms``.
MAX_DEFAULT_PANELS = 12


def _title_width(panel_width: float) -> int:
    """Characters of a 9-point panel title that fit in a panel ``panel_width`` inches wide."""
    return max(20, int(panel_width * 11))


def _compact_numbers(ax, axis: str) -> None:
    """Tick labels of a numeric ``axis`` (``"x"``, ``"y"`` or ``"both"``) with at most 4 digits before an
    offset (``×1e5``): incomes such as 175000 ran into each other at the default 6."""
    ax.ticklabel_format(axis=axis, style="sci", scilimits=(-3, 4), useOffset=False)


def _histogram_in_original_units(counts, edges, n_bins):
    """``counts`` over ``edges`` (original units, unequal widths after the inverse flow) moved onto
    ``n_bins`` equal-width bins of the same range, each source bin's rows spread evenly over its width.

    A point mass (a count feature's many zeros) sits in a source bin that the flow made narrow
    (1e-4 of the range on the heart data's ``vessels``): its density drowned every other bar.
    Returns counts and edges; the counts add up to those given.
    """
    edges = np.asarray(edges, dtype=float)
    counts = np.asarray(counts, dtype=float)
    if not np.all(np.isfinite(edges)) or not edges[-1] > edges[0]:
        return counts, edges
    new = np.linspace(edges[0], edges[-1], n_bins + 1)
    lo = np.maximum(edges[:-1, None], new[None, :-1])
    hi = np.minimum(edges[1:, None], new[None, 1:])
    width = np.diff(edges)[:, None]
    share = np.clip(hi - lo, 0.0, None) / np.where(width > 0, width, 1.0)
    flat = width[:, 0] <= 0  # a bin of no width: its rows go to the bin holding its edge
    share[flat] = 0.0
    share[flat, np.clip(np.searchsorted(new, edges[:-1][flat], side="right") - 1, 0, n_bins - 1)] = 1.0
    share /= share.sum(axis=1, keepdims=True)
    return counts @ share, new


def _level_ticks(ax, positions, labels) -> None:
    """Level names under bars or points: slanted beyond 4 levels, upright (and smaller) beyond 8 or
    with long names, every k-th beyond 30, so that many levels do not print over each other."""
    labels = list(labels)
    step = max(1, math.ceil(len(labels) / 30))
    shown = [label if i % step == 0 else "" for i, label in enumerate(labels)]
    longest = max((len(label) for label in labels), default=0)
    if len(labels) > 8 or (len(labels) > 2 and longest > 12):
        ax.set_xticks(positions, shown, rotation=90, fontsize=7 if len(labels) > 12 else 8)
    elif len(labels) > 4 or longest > 12:
        ax.set_xticks(positions, shown, rotation=30, ha="right", rotation_mode="anchor")
    else:
        ax.set_xticks(positions, shown)


#: Most curves named in the legend of a two-feature panel with a discrete feature (one per level).
_LEGEND_LEVELS = 6


def _draw_component(fig, ax, est, summary, u, names, n_grid, level_labels):
    """Posterior mean (±2σ) of component ``u`` on ``ax``, in the features' original units."""
    from .explain import component_posterior

    grid, mesh = _grid_inputs(est, summary, u, n_grid if len(u) == 1 else max(20, n_grid // 2))
    mean, var = component_posterior(est.posterior_, u, est.posterior_.alpha.new_tensor(grid))
    mean = mean.cpu().numpy().reshape(mesh[0].shape) * est.y_scale_
    sd = np.sqrt(var.cpu().numpy()).reshape(mesh[0].shape) * abs(est.y_scale_)

    def labels(j):
        levels = _level_labels(est, j) if level_labels is None else level_labels(names[j], _discrete_values(est, j))
        return [f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v) for v in levels]

    discrete = [_discrete_values(est, j) is not None for j in u]
    xlabel = names[u[0]]
    if len(u) == 1 and discrete[0]:
        position = np.arange(len(mean))
        ax.bar(position, mean, yerr=2 * sd, color="tab:blue", alpha=0.7, capsize=3 if len(position) <= 12 else 1)
        _level_ticks(ax, position, labels(u[0]))
        _compact_numbers(ax, "y")
    elif len(u) == 1:
        x = _original_units(est, u[0], mesh[0].ravel())
        ax.plot(x, mean, color="k")
        ax.fill_between(x, mean - 2 * sd, mean + 2 * sd, color="tab:blue", alpha=0.3)
        _compact_numbers(ax, "both")
        hist = ax.twinx()  # the training inputs' histogram, in the bottom third, behind the curve
        # the bins are equal in the model's (flow-warped) units, so in original units they differ in
        # width (a point mass sits in a very narrow one): moved onto equal-width bins in original units
        # and drawn as densities (count per unit width), so that areas count the rows
        counts, edges = _histogram_in_original_units(summary["counts"][u[0]],
                                                     _original_units(est, u[0], summary["edges"][u[0]]),
                                                     len(summary["counts"][u[0]]))
        density = counts / np.maximum(np.diff(edges), np.finfo(float).tiny)
        hist.stairs(density, edges, fill=True, color="grey", alpha=0.3)
        hist.set_ylim(0, 3 * density.max())
        hist.set_yticks([])
        hist.set_zorder(ax.get_zorder() - 1)
        ax.patch.set_visible(False)
    elif any(discrete):  # one curve per level of the (first) discrete feature
        k = discrete.index(True)
        by_level = mean if k == 0 else mean.T
        other = u[1 - k]
        if discrete[1 - k]:
            x = np.arange(by_level.shape[1])
            _level_ticks(ax, x, labels(other))
            _compact_numbers(ax, "y")
        else:
            x = _original_units(est, other, mesh[1 - k].ravel()).reshape(mesh[0].shape)
            x = x[0] if k == 0 else x[:, 0]
            _compact_numbers(ax, "both")
        style = "o-" if discrete[1 - k] else "-"
        # many levels: the _LEGEND_LEVELS - 1 whose curves vary most in colour and named, the rest thin and
        # grey under one legend entry (a legend of every level covered the panel, and beside it the figure)
        named = set(range(len(by_level)) if len(by_level) <= _LEGEND_LEVELS
                    else np.argsort(-np.ptp(by_level, axis=1), kind="stable")[:_LEGEND_LEVELS - 1].tolist())
        others = [i for i in range(len(by_level)) if i not in named]
        for n_drawn, i in enumerate(others):
            ax.plot(x, by_level[i], style, ms=2, lw=0.8, color="0.65", zorder=1,
                    label=f"{len(others)} other levels of {names[u[k]]}" if n_drawn == 0 else "_nolegend_")
        level_names = labels(u[k])
        for i in sorted(named):
            ax.plot(x, by_level[i], style, ms=3, zorder=2, label=f"{names[u[k]]}={level_names[i]}")
        ax.legend(fontsize=7)
        xlabel = names[other]
    else:
        x = _original_units(est, u[0], mesh[0].ravel()).reshape(mesh[0].shape)
        y = _original_units(est, u[1], mesh[1].ravel()).reshape(mesh[1].shape)
        _compact_numbers(ax, "both")
        cs = ax.contourf(x, y, mean, levels=15, cmap="RdBu_r")
        fig.colorbar(cs, ax=ax)
        ax.set_ylabel(names[u[1]])
    ax.set_xlabel(xlabel)


def plot_truncation_curve(curve: dict, *, metric: str | None = None, ax=None):
    """Test metric and cumulative normalised Sobol index vs number of terms (OAK Fig. 5).

    Parameters
    ----------
    curve : dict
        Output of :meth:`OAKRegressor.truncation_curve` or :meth:`OAKClassifier.truncation_curve`.
    metric : str, optional
        The key of ``curve`` drawn in red (``"rmse"``; ``"auc"``, ``"accuracy"`` or ``"log_loss"``
        for a classifier). Default: ``"rmse"`` for a regressor's curve, ``"auc"`` for a classifier's.
    """
    plt = _pyplot()
    if metric is None:
        metric = "rmse" if "rmse" in curve or "auc" not in curve else "auc"
    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3.5))
    else:
        fig = ax.figure
    if metric not in curve:
        raise ValueError(f"The curve has no {metric!r}; it has {sorted(k for k in curve if k != 'n_terms')}.")
    label = "test " + metric.replace("_", " ").upper()
    ax.plot(curve["n_terms"], curve[metric], "r-", label=label)
    ax.set_xlabel("number of terms (ranked by Sobol index)")
    ax.set_ylabel(label, color="r")
    twin = ax.twinx()
    twin.plot(curve["n_terms"], curve["cumulative_sobol"], "g--", label="cumulative Sobol")
    twin.set_ylabel("cumulative normalised Sobol", color="g")
    twin.set_ylim(0, 1.05)
    fig.tight_layout()
    return fig
