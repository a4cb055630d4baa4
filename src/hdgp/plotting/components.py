"""``plot_components``: the fitted components of an OAK model, laid out on a grid of panels."""

from __future__ import annotations

import math
import textwrap

from .._input_summary import input_summary
from .axes import _pyplot, _title_width
from .model_view import _LatentView
from .panels import _SLICE_QUANTILES, _draw_component, _draw_three_way

__all__ = ["MAX_DEFAULT_PANELS", "MAX_PLOT_ORDER", "plot_components"]


#: Highest order of a component :func:`plot_components` draws (three features: as slices).
MAX_PLOT_ORDER = 3


#: Most panels :func:`plot_components` draws without ``terms``.
MAX_DEFAULT_PANELS = 12


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
