"""The ``hdgp demo`` showcase: every registered model family on built-in data."""

from __future__ import annotations

import difflib
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import is_classifier
from tqdm.auto import tqdm

from . import data, metrics
from .presets import preset, presets

__all__ = ["DEMO_MODELS", "run_demo"]

#: Models the demo tries, in order; those not registered (family not installed) are skipped.
DEMO_MODELS = ("Linear", "RBF-ARD", "IMQ-ARD", "GAM", "Additive", "OAK", "DPA-GP-ARD", "SIGP")

#: Per-model settings that keep the demo quick. SIGP's default cross-validates a
#: 270-point hyper-parameter grid (minutes); the demo searches a 6-point grid.
DEMO_OVERRIDES = {"SIGP": dict(rank=[2, 5], eta=[1e-3], mean_penalty=[1.0], y_bandwidth=[0.5], cv=3)}


def run_demo(dataset: str = "diabetes", split: int = 0, models=DEMO_MODELS, output_dir="hdgp-demo-output",
             random_state: int = 0, progress: bool = True) -> list[dict]:
    """Fit each model on one split, return a row of metrics per model and save a plot.

    Metrics are on the standardised target (training statistics), as in the papers:
    test RMSE (1.0 ≈ predicting the mean) and NLPD (lower is better).
    """
    chosen = _demo_models(models)
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"The output folder {str(out)!r} is an existing file; choose another with -o.")
    ds = data.load(dataset, split=split, standardize=True)
    rows, predictions = [], {}
    # disable=None: tqdm draws the bar on a terminal only (a log file would get every redraw)
    for name in tqdm(chosen, desc=f"fitting on {dataset}", disable=None if progress else True):
        est = preset(name, random_state=random_state, **DEMO_OVERRIDES.get(name, {}))
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(ds.X_train, ds.y_train)
        fit_seconds = time.perf_counter() - start
        mean, std = est.predict(ds.X_test, return_std=True)
        predictions[name] = (mean, std)
        rows.append({"model": name, "rmse": metrics.rmse(ds.y_test, mean),
                     "nlpd": metrics.nlpd(ds.y_test, mean, std),
                     "coverage95": metrics.interval_coverage(ds.y_test, mean, std, 0.95),
                     "fit_seconds": fit_seconds})
    out.mkdir(parents=True, exist_ok=True)
    _plot(ds, predictions, out / "predictions.png")
    return rows


def _demo_models(models) -> list[str]:
    """The registered regression presets named in ``models`` (any case), in order.

    The default :data:`DEMO_MODELS` may name families that are not installed: those are
    skipped. A name the user gave that is unknown, or a classifier, is an error.
    """
    available = {name.lower(): name for name in presets()}
    if tuple(models) == DEMO_MODELS:
        return [available[m.lower()] for m in models if m.lower() in available]
    regressors = [name for name in available.values() if not is_classifier(preset(name))]
    chosen = []
    for m in models:
        name = available.get(str(m).lower())
        if name is None or name not in regressors:
            close = difflib.get_close_matches(str(m), regressors, n=1)
            what = "is a classifier; the demo data sets are regression problems" if name else "is not a preset"
            raise ValueError(f"{m!r} {what}." + (f" Did you mean {close[0]!r}?" if close else "")
                             + f" Regression presets: {', '.join(regressors)}.")
        chosen.append(name)
    if not chosen:
        raise ValueError("No models to fit; name presets with --models.")
    return chosen


def _plot(ds, predictions: dict, path: Path) -> None:
    # deferred: matplotlib loads, and takes the Agg backend, only when the demo draws (not on import)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: imported after the backend is chosen

    k = len(predictions)
    cols = min(4, k)
    rows = int(np.ceil(k / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.6 * rows), squeeze=False, sharey=True)
    order = np.argsort(ds.y_test)
    x = np.arange(len(order))
    for ax, (name, (mean, std)) in zip(axes.flat, predictions.items()):
        ax.fill_between(x, (mean - 2 * std)[order], (mean + 2 * std)[order], alpha=0.3, label="±2σ predictive")
        ax.plot(x, mean[order], ".", ms=4, label="predicted mean")
        ax.plot(x, ds.y_test[order], "k-", lw=1, label="observed")
        ax.set_title(f"{name}: RMSE {metrics.rmse(ds.y_test, mean):.3f}")
        ax.set_xlabel("test points (sorted by observed y)")
    for ax in list(axes.flat)[k:]:
        ax.axis("off")
    axes[0, 0].set_ylabel("standardised y")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"hdgp demo — {ds.name}, split {ds.split}: test predictions with uncertainty")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
