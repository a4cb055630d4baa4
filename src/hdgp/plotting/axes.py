"""Axes of the component figures: the pyplot module (Agg backend), tick labels, flow-warped log scales."""

from __future__ import annotations

import math

import numpy as np


def _pyplot():
    """``matplotlib.pyplot``, switched to the Agg backend unless Agg or the notebook's inline backend is active."""
    import matplotlib  # deferred: matplotlib loads when a plot is first drawn, not with hdgp

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: imported after the backend is chosen

    return plt


def _title_width(panel_width: float) -> int:
    """Characters of a 9-point panel title that fit in a panel ``panel_width`` inches wide."""
    return max(20, int(panel_width * 11))


def _compact_numbers(ax, axis: str) -> None:
    """Tick labels of a numeric ``axis`` (``"x"``, ``"y"`` or ``"both"``) with at most 4 digits before an
    offset (``×1e5``): incomes such as 175000 ran into each other at the default 6."""
    ax.ticklabel_format(axis=axis, style="sci", scilimits=(-3, 4), useOffset=False)


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
    from matplotlib.ticker import Locator  # deferred: matplotlib loads when a figure is drawn, not with hdgp

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
