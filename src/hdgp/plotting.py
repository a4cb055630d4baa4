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
    r"""Plot fitted components of an :class:`~hdgp.estimators.oak.OAKRegressor` or of
    the latent function of an :class:`~hdgp.estimators.oak_classifier.OAKClassifier`.

    One-dimensional continuous components: posterior mean with a ±2σ band and the
    feature's histogram (OAK Fig. 1); categorical/binary: bars with ±2σ error bars;
    two continuous features: filled contours of the posterior mean, dashed contours of
    its posterior standard deviation and the training rows as dots; a continuous (or
    discrete) feature by a discrete one: one curve per level with its ±2σ band. A
    three-feature component :math:`f_{ijk}` is drawn as a row of such two-feature
    panels, slices :math:`f_{ijk}(x_i, x_j, x_k = q)` at the 10, 50 and 90 %
    training quantiles :math:`q` of one feature (a discrete one if there is one, then
    at its levels), on one colour scale; each slice shows the training rows of its
    third of the data. Axes are in the original units of the features (the flow is
    inverted) and logarithmic where the flow took the feature's log (a started log
    :math:`\log(x - x_{\min} + c)` gets that scale); titles carry the normalised Sobol
    index :math:`\tilde R_u` (Lu et al. 2022, Fig. 1). Components of order four and
    more cannot be drawn: the default selection names those it leaves out (and any
    beyond :data:`MAX_DEFAULT_PANELS`) in a note under the panels.

    Parameters
    ----------
    est : OAKRegressor or OAKClassifier
        A fitted estimator.
    terms : list of tuples of int or str, optional
        Components to draw, each of order at most 3 (default: the terms of ``est.components_`` up
        to order 3, at most :data:`MAX_DEFAULT_PANELS`; for a classifier those of the latent
        function of ``class_label``; if ``components_`` has none, the top-ranked such terms).
    n_grid : int, default=60
        Grid points per continuous axis (half as many, at least 20, for 2-D and 3-D terms).
    ncols : int, default=3
        Panels per row (a three-feature term starts a new row when its slices do not fit
        beside the panels before it).
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

    Raises
    ------
    ValueError
        A term of ``terms`` has order above 3.
    """
    plt = _pyplot()
    if hasattr(est, "posteriors_"):
        est = _LatentView(est, class_label)
        target_name = target_name or f"latent f of class {est.class_label}"
    elif class_label is not None:
        raise ValueError("class_label is for classifiers; a regressor has one latent function.")
    summary = input_summary(est)
    names = est._feature_names()
    if terms is None:
        terms, left_out = _default_terms(est)
    else:
        terms, left_out = [est._term(t) for t in terms], []
        high = [" × ".join(names[j] for j in u) for u in terms if len(u) > MAX_PLOT_ORDER]
        if high:
            raise ValueError(f"Only components of order up to {MAX_PLOT_ORDER} can be plotted (a three-feature "
                             f"term as slices); {', '.join(high)} has a higher order.")
        model_order = getattr(getattr(est.posterior_, "kernel", None), "max_order", None)
        absent = [" × ".join(names[j] for j in u) for u in terms if model_order is not None and len(u) > model_order]
        if absent:
            raise ValueError(f"This model has interaction terms up to order {model_order} (max_order), so it has no "
                             f"component {', '.join(absent)}.")
    shares = _shares(est, names)
    slots, n_slots = _layout([len(_SLICE_QUANTILES) if len(u) == 3 else 1 for u in terms], ncols)
    nrows = max(1, math.ceil(n_slots / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(figsize_per[0] * ncols, figsize_per[1] * nrows), squeeze=False)
    flat = axes.ravel()
    width = _title_width(figsize_per[0])
    for u, where in zip(terms, slots):
        panels = [flat[i] for i in where]
        label = " × ".join(names[j] for j in u)
        title = f"{label}  (Sobol {shares.get(tuple(u), float('nan')):.3f})"
        if len(u) == 3:
            subtitles = _draw_three_way(fig, panels, est, summary, u, names, n_grid, level_labels)
        else:
            _draw_component(fig, panels[0], est, summary, u, names, n_grid, level_labels)
            subtitles = [""]
        for ax, sub in zip(panels, subtitles):
            # long feature names wrap instead of running into the neighbouring panels' titles
            ax.set_title("\n".join(textwrap.wrap(title, width) + ([sub] if sub else [])), fontsize=9)
            if ax.get_ylabel() == "":  # every panel but a 2-D contour plots the effect on the target
                ax.set_ylabel(f"effect on {target_name}" if target_name else "effect")
    used = {i for where in slots for i in where}
    for i, ax in enumerate(flat):
        ax.set_visible(i in used)
    note = _left_out_note(left_out, names)
    if note:
        lines = textwrap.wrap(note, int(_title_width(figsize_per[0]) * ncols * 1.2))
        fig.text(0.01, 0.005, "\n".join(lines), fontsize=8, va="bottom", ha="left", color="0.25")
        fig.tight_layout(rect=(0, min(0.5, (0.16 * len(lines) + 0.05) / fig.get_figheight()), 1, 1))
    else:
        fig.tight_layout()
    return fig


def _shares(est, names) -> dict:
    """Normalised Sobol index of each ranked term (feature indices): ``sobol_.terms`` and values, with
    ``sobol_indices_`` (feature names) for any term not there."""
    shares = {tuple(sorted(names.index(n) for n in k)): v for k, v in est.sobol_indices_.items()}
    result = getattr(est, "sobol_", None)
    if result is not None and hasattr(result, "terms"):
        values = result.values.tolist() if hasattr(result.values, "tolist") else list(result.values)
        shares.update({tuple(int(j) for j in u): float(v) for u, v in zip(result.terms, values)})
    return shares


#: Highest order of a component :func:`plot_components` draws (three features: as slices).
MAX_PLOT_ORDER = 3
#: Training quantiles of the third feature at which a three-feature component is sliced.
_SLICE_QUANTILES = (0.1, 0.5, 0.9)


def _layout(widths, ncols):
    """Panel indices of each term in a grid of ``ncols`` columns (a term of ``w`` > 1 panels starts a new row
    when it does not fit in the current one and would fit in an empty one), and the number of slots used."""
    slots, position = [], 0
    for w in widths:
        if w > 1 and position % ncols and position % ncols + w > ncols and w <= ncols:
            position += ncols - position % ncols
        slots.append(list(range(position, position + w)))
        position += w
    return slots, position


def _default_terms(est) -> tuple[list, list]:
    """The terms :func:`plot_components` draws by default and those it leaves out, with the reason.

    Drawn: the terms of ``components_`` up to order :data:`MAX_PLOT_ORDER`, at most
    :data:`MAX_DEFAULT_PANELS`; if ``components_`` holds only higher orders, the top-ranked terms up to
    that order. Left out: the other terms of ``components_``, as ``(term, reason)``.
    """
    selected = list(est.components_)
    drawable = [u for u in selected if len(u) <= MAX_PLOT_ORDER]
    if not drawable:
        drawable = [u for u in est.sobol_.terms if len(u) <= MAX_PLOT_ORDER]
    terms = list(drawable[:MAX_DEFAULT_PANELS])
    left_out = [(u, f"order {len(u)}: components are drawn up to order {MAX_PLOT_ORDER}")
                for u in selected if len(u) > MAX_PLOT_ORDER]
    left_out += [(u, f"beyond the {MAX_DEFAULT_PANELS} components drawn by default")
                 for u in selected if len(u) <= MAX_PLOT_ORDER and u not in terms]
    return terms, left_out


def _left_out_note(left_out, names) -> str:
    """One sentence naming the ranked terms a figure leaves out, grouped by reason ('' if none)."""
    by_reason = {}
    for u, reason in left_out:
        by_reason.setdefault(reason, []).append(" × ".join(names[j] for j in u))
    return " ".join(f"Not drawn ({reason}): {', '.join(terms)}." for reason, terms in by_reason.items())


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


def _log_start(est, j):
    r"""``(x_min, c)`` of the flow's log pre-transform :math:`t = \log(x - x_{\min} + c)` of continuous
    column ``j`` (:class:`~hdgp.flows.SinhArcsinhFlow`; :math:`c = x_{\min}` is the plain log), else None."""
    flow = getattr(est, "flow_", None)
    if flow is None or j not in est.continuous_features_:
        return None
    k = est.continuous_features_.index(j)
    if getattr(flow, "shift_", None) is not None:  # the OAK authors' shifted log of every feature
        return float(flow.shift_[k]), 1.0
    if not flow.use_log_[k]:
        return None
    origin = float(getattr(flow, "log_min_", np.full(k + 1, np.nan))[k])
    start = float(getattr(flow, "log_start_", np.full(k + 1, origin))[k])
    if not np.isfinite(origin):  # flows saved before the tangent continuation: log x
        return 0.0, 0.0
    return origin, start if np.isfinite(start) else origin


def _log_axis(ax, axis: str, est, j) -> None:
    r"""Put ``axis`` (``"x"`` or ``"y"``) of ``ax`` on the flow's log scale of column ``j``, if it takes one: a
    log axis for :math:`\log x`, else the scale :math:`\log(x - x_{\min} + c)` with ticks evenly spaced on it."""
    start = _log_start(est, j)
    if start is None:
        return
    origin, c = start
    setter = ax.set_xscale if axis == "x" else ax.set_yscale
    if c == origin and origin >= 0:  # t = log x (c = x_min); the old flows' log x too
        setter("log")
        return
    from matplotlib.ticker import Locator

    def forward(x):
        d = np.asarray(x, dtype=float) - origin
        return np.where(d >= 0, np.log1p(np.maximum(d, 0.0) / c), d / c)  # tangent below x_min, as the flow

    def inverse(t):
        t = np.asarray(t, dtype=float)
        return origin + np.where(t >= 0, c * np.expm1(np.maximum(t, 0.0)), c * t)

    class _EvenOnScale(Locator):
        """Ticks at round values evenly spaced on the log scale (a linear locator crowded them at the bottom)."""

        def __call__(self):
            low, high = sorted(self.axis.get_view_interval())
            ticks = inverse(np.linspace(forward(low), forward(high), 6))
            digits = np.floor(np.log10(np.maximum(np.abs(ticks), 1e-300)))
            rounded = np.array([round(v, int(1 - d)) for v, d in zip(ticks, digits)])
            return np.unique(rounded[(rounded >= low) & (rounded <= high)])

    setter("function", functions=(forward, inverse))
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(_EvenOnScale())


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


#: Most training rows drawn as dots on one two-feature panel (a random subset beyond).
_MAX_DOTS = 500


def _dots(X):
    """At most :data:`_MAX_DOTS` rows of ``X``, the same subset on every call."""
    if X is None or len(X) <= _MAX_DOTS:
        return X
    return X[np.sort(np.random.default_rng(0).choice(len(X), _MAX_DOTS, replace=False))]


def _posterior_on(est, u, grid, shape):
    """Posterior mean and standard deviation of component ``u`` at ``grid`` (model units), shaped ``shape``."""
    from .explain import component_posterior

    mean, var = component_posterior(est.posterior_, u, est.posterior_.alpha.new_tensor(grid))
    mean = mean.cpu().numpy().reshape(shape) * est.y_scale_
    sd = np.sqrt(np.clip(var.cpu().numpy(), 0.0, None)).reshape(shape) * abs(est.y_scale_)
    return mean, sd


def _draw_component(fig, ax, est, summary, u, names, n_grid, level_labels):
    """Posterior mean (±2σ) of component ``u`` (one or two features) on ``ax``, in the features' original units."""
    grid, mesh = _grid_inputs(est, summary, u, n_grid if len(u) == 1 else max(20, n_grid // 2))
    mean, sd = _posterior_on(est, u, grid, mesh[0].shape)
    discrete = [_discrete_values(est, j) is not None for j in u]
    if len(u) == 1 and discrete[0]:
        position = np.arange(len(mean))
        ax.bar(position, mean, yerr=2 * sd, color="tab:blue", alpha=0.7, capsize=3 if len(position) <= 12 else 1)
        _level_ticks(ax, position, _labels(est, u[0], names, level_labels))
        _compact_numbers(ax, "y")
        ax.set_xlabel(names[u[0]])
    elif len(u) == 1:
        _draw_curve(ax, est, summary, u[0], mesh[0].ravel(), mean, sd)
        ax.set_xlabel(names[u[0]])
    else:
        X = _training_inputs(est)
        _draw_pair(fig, ax, est, u, mesh, mean, sd, names, level_labels, None if X is None else X[:, list(u)])


def _labels(est, j, names, level_labels):
    levels = _level_labels(est, j) if level_labels is None else level_labels(names[j], _discrete_values(est, j))
    return [f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v) for v in levels]


def _draw_curve(ax, est, summary, j, grid, mean, sd):
    """One continuous feature: the mean with a ±2σ band over the training inputs' histogram."""
    x = _original_units(est, j, grid)
    ax.plot(x, mean, color="k")
    ax.fill_between(x, mean - 2 * sd, mean + 2 * sd, color="tab:blue", alpha=0.3)
    _compact_numbers(ax, "both")
    _log_axis(ax, "x", est, j)
    hist = ax.twinx()  # the training inputs' histogram, in the bottom third, behind the curve
    # the bins are equal in the model's (flow-warped) units, so in original units they differ in width (a
    # point mass sits in a very narrow one): moved onto bins of equal width on the axis (in original units,
    # or on the log scale of a log axis) and drawn as densities per unit of the axis, so that areas count rows
    scale = ax.xaxis.get_transform()
    counts, edges = summary["counts"][j], _original_units(est, j, summary["edges"][j])
    on_axis = scale.transform(edges)
    counts, on_axis = _histogram_in_original_units(counts, on_axis, len(counts))
    density = counts / np.maximum(np.diff(on_axis), np.finfo(float).tiny)
    hist.stairs(density, scale.inverted().transform(on_axis), fill=True, color="grey", alpha=0.3)
    hist.set_ylim(0, 3 * density.max())
    hist.set_yticks([])
    hist.set_zorder(ax.get_zorder() - 1)
    ax.patch.set_visible(False)


def _draw_pair(fig, ax, est, u, mesh, mean, sd, names, level_labels, points, levels=15):
    """Two features on ``ax``: with a discrete one, a curve (±2σ band or error bars) per level and a rug of the
    training values; else filled contours of the mean (on ``levels``), dashed contours of the posterior std
    and ``points`` (training rows, model units, columns ``u``) as dots."""
    if points is not None:  # training rows with the pair's feature missing (OAK takes them) have no place here
        points = points[~np.isnan(points).any(axis=1)]
    discrete = [_discrete_values(est, j) is not None for j in u]
    if any(discrete):  # one curve per level of the (first) discrete feature
        k = discrete.index(True)
        by_level, sd_level = (mean, sd) if k == 0 else (mean.T, sd.T)
        other = u[1 - k]
        if discrete[1 - k]:
            x = np.arange(by_level.shape[1])
            _level_ticks(ax, x, _labels(est, other, names, level_labels))
            _compact_numbers(ax, "y")
        else:
            x = _original_units(est, other, mesh[1 - k].ravel()).reshape(mesh[0].shape)
            x = x[0] if k == 0 else x[:, 0]
            _compact_numbers(ax, "both")
            _log_axis(ax, "x", est, other)
        style = "o-" if discrete[1 - k] else "-"
        # many levels: the _LEGEND_LEVELS - 1 whose curves vary most in colour and named, the rest thin and
        # grey under one legend entry (a legend of every level covered the panel, and beside it the figure)
        named = set(range(len(by_level)) if len(by_level) <= _LEGEND_LEVELS
                    else np.argsort(-np.ptp(by_level, axis=1), kind="stable")[:_LEGEND_LEVELS - 1].tolist())
        others = [i for i in range(len(by_level)) if i not in named]
        for n_drawn, i in enumerate(others):
            ax.plot(x, by_level[i], style, ms=2, lw=0.8, color="0.65", zorder=1,
                    label=f"{len(others)} other levels of {names[u[k]]}" if n_drawn == 0 else "_nolegend_")
        level_names = _labels(est, u[k], names, level_labels)
        for i in sorted(named):
            (line,) = ax.plot(x, by_level[i], style, ms=3, zorder=2, label=f"{names[u[k]]}={level_names[i]}")
            low, high = by_level[i] - 2 * sd_level[i], by_level[i] + 2 * sd_level[i]
            if discrete[1 - k]:
                ax.errorbar(x, by_level[i], yerr=2 * sd_level[i], fmt="none", ecolor=line.get_color(), alpha=0.5,
                            capsize=2, zorder=2)
            else:
                ax.fill_between(x, low, high, color=line.get_color(), alpha=0.12, lw=0, zorder=0)
        if points is not None and not discrete[1 - k]:  # the training values of the continuous feature
            ax.plot(_original_units(est, other, points[:, 1 - k]), np.zeros(len(points)), "|", ms=6, color="k",
                    alpha=0.3, transform=ax.get_xaxis_transform(), label="_nolegend_")
        ax.legend(fontsize=7)
        ax.set_xlabel(names[other])
        return None
    x = _original_units(est, u[0], mesh[0].ravel()).reshape(mesh[0].shape)
    y = _original_units(est, u[1], mesh[1].ravel()).reshape(mesh[1].shape)
    _compact_numbers(ax, "both")
    cs = ax.contourf(x, y, mean, levels=levels, cmap="RdBu_r")
    fig.colorbar(cs, ax=ax)
    if np.ptp(sd) > 1e-12 * max(1.0, float(np.abs(sd).max())):  # the posterior std, dashed and labelled
        lines = ax.contour(x, y, sd, levels=4, colors="k", linewidths=0.7, linestyles="dashed", alpha=0.7)
        ax.clabel(lines, fontsize=6, fmt=lambda v: f"sd {v:.2g}")
    if points is not None and len(points):
        shown = _dots(points)
        ax.scatter(_original_units(est, u[0], shown[:, 0]), _original_units(est, u[1], shown[:, 1]), s=5, c="k",
                   alpha=0.35, linewidths=0, label="training rows")
    _log_axis(ax, "x", est, u[0])
    _log_axis(ax, "y", est, u[1])
    ax.set_xlabel(names[u[0]])
    ax.set_ylabel(names[u[1]])
    return cs


def _draw_three_way(fig, panels, est, summary, u, names, n_grid, level_labels) -> list[str]:
    """Slices of the three-feature component ``u`` on ``panels``, one per value of its slicing feature;
    returns each slice's subtitle ("at x2 = 0.53 (10 % quantile)")."""
    discrete = [_discrete_values(est, j) is not None for j in u]
    k = discrete.index(True) if any(discrete) else 2  # slice along a discrete feature when there is one
    s, pair = u[k], tuple(j for j in u if j != u[k])
    X = _training_inputs(est)
    if discrete[k]:
        codes = np.arange(len(_discrete_values(est, s)), dtype=float)
        if len(codes) > len(_SLICE_QUANTILES):  # many levels: those at the quantiles of the training rows
            codes = np.unique(np.round(_quantiles(est, summary, s, _SLICE_QUANTILES)))
        values, level_names = codes, _labels(est, s, names, level_labels)
        of = f" (of {len(level_names)} levels)" if len(level_names) > len(values) else ""
        subtitles = [f"at {names[s]} = {level_names[int(v)]}{of}" for v in values]
        bands = [None if X is None else X[:, s] == v for v in values]
    else:
        values = _quantiles(est, summary, s, _SLICE_QUANTILES)
        shown = _original_units(est, s, np.asarray(values))
        subtitles = [f"at {names[s]} = {v:.3g} ({round(100 * q)} % quantile)" for v, q in zip(shown, _SLICE_QUANTILES)]
        # each slice shows the training rows of its third of the data (cut halfway between the quantiles)
        cuts = _quantiles(est, summary, s, (np.array(_SLICE_QUANTILES[:-1]) + np.array(_SLICE_QUANTILES[1:])) / 2)
        edges = np.concatenate([[-np.inf], cuts, [np.inf]])
        bands = [None if X is None else (X[:, s] >= lo) & (X[:, s] <= hi) for lo, hi in zip(edges[:-1], edges[1:])]
    grid, mesh = _grid_inputs(est, summary, pair, max(20, n_grid // 2))
    slices = []
    for v in values:
        full = np.array(grid)
        full[:, s] = v
        slices.append(_posterior_on(est, u, full, mesh[0].shape))
    means = np.stack([m for m, _ in slices])
    # one colour scale for every slice, so that they compare at a glance
    levels = np.linspace(means.min(), means.max(), 16) if np.ptp(means) > 0 else 15
    for ax, (mean, sd), band in zip(panels, slices, bands):
        points = None if band is None else X[band][:, list(pair)]
        _draw_pair(fig, ax, est, pair, mesh, mean, sd, names, level_labels, points, levels=levels)
    for ax in panels[len(values):]:  # a discrete feature with fewer distinct quantile levels than panels
        ax.set_axis_off()
    return subtitles + [""] * (len(panels) - len(values))


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
