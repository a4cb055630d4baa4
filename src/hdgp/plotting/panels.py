"""One component on its panels: a curve over the inputs' histogram, bars of a discrete feature, a pair
as contours or one curve per level, a three-feature component as slices."""

from __future__ import annotations

import numpy as np

from .axes import _compact_numbers, _level_ticks, _log_axis
from .model_view import (_discrete_values, _grid_inputs, _labels, _original_units, _posterior_on, _quantiles,
                         _training_inputs)


#: Training quantiles of the third feature at which a three-feature component is sliced.
_SLICE_QUANTILES = (0.1, 0.5, 0.9)


#: Most curves named in the legend of a two-feature panel with a discrete feature (one per level).
_LEGEND_LEVELS = 6


#: Most training rows drawn as dots on one two-feature panel (a random subset beyond).
_MAX_DOTS = 500


def _dots(X):
    """At most :data:`_MAX_DOTS` rows of ``X``, the same subset on every call."""
    if X is None or len(X) <= _MAX_DOTS:
        return X
    return X[np.sort(np.random.default_rng(0).choice(len(X), _MAX_DOTS, replace=False))]


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
