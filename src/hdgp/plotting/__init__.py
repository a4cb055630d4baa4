"""Matplotlib figures for additive models: components with uncertainty, Sobol/accuracy curves.

Figures are drawn with the non-interactive Agg backend unless another backend is
already active, and every function returns the matplotlib ``Figure``.

- :func:`plot_components` (:mod:`~hdgp.plotting.components`): the layout of the panels;
  :mod:`~hdgp.plotting.panels` draws one component on them, :mod:`~hdgp.plotting.model_view`
  reads what they show of the fitted model and :mod:`~hdgp.plotting.axes` formats their axes.
- :func:`plot_truncation_curve` (:mod:`~hdgp.plotting.truncation`): OAK Fig. 5.
"""

from __future__ import annotations

# _pyplot, _original_units and _LEGEND_LEVELS: read as hdgp.plotting.<name> by the HTML report and the tests
from .axes import _pyplot  # noqa: F401
from .components import MAX_DEFAULT_PANELS, MAX_PLOT_ORDER, plot_components
from .model_view import _original_units  # noqa: F401
from .panels import _LEGEND_LEVELS  # noqa: F401
from .truncation import plot_truncation_curve

__all__ = ["plot_components", "plot_truncation_curve"]
