"""``plot_truncation_curve``: test accuracy and cumulative Sobol share against the number of terms."""

from __future__ import annotations

from .axes import _pyplot

__all__ = ["plot_truncation_curve"]


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
