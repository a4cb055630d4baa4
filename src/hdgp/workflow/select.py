"""``--model auto``: fit candidate families suited to the data size and keep the best.

Rule (documented in ``hdgp fit --help``):

1. Candidates by training-set size n (:func:`candidate_models`):
   n ≤ 3000: OAK, DPA-GP-ARD, RBF-ARD, SIGP (exact inference, all affordable);
   3000 < n ≤ 20000: DPA-GP-ARD, SGPR-RBF-ARD, SIGP;
   n > 20000: DPA-GP-ARD (SKI, linear in n), SGPR-RBF-ARD.
2. The training rows are split once more (80 / 20, seeded): every candidate is fitted
   on the 80 % and scored by its mean log predictive density on the 20 %
   (:math:`\\frac1m\\sum \\log p(y_i \\mid x_i)`, i.e. minus the validation NLPD).
   This rewards accurate means *and* calibrated uncertainty and, unlike the
   training marginal likelihood, is comparable across families (SIGP has none).
3. The winner is refitted on all training rows; the held-out test rows are never
   used for the choice.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.model_selection import train_test_split

from ..io.table import TableError

__all__ = ["candidate_models", "select_model", "VALIDATION_FRACTION", "MIN_AUTO_ROWS"]

VALIDATION_FRACTION = 0.2
#: ``auto`` needs at least this many training rows (so the validation split has ≥ 5).
MIN_AUTO_ROWS = 25


def candidate_models(n: int) -> list[str]:
    """Preset names tried by ``--model auto`` for ``n`` training rows."""
    if n <= 3000:
        return ["OAK", "DPA-GP-ARD", "RBF-ARD", "SIGP"]
    if n <= 20000:
        return ["DPA-GP-ARD", "SGPR-RBF-ARD", "SIGP"]
    return ["DPA-GP-ARD", "SGPR-RBF-ARD"]


def select_model(X, y, schema, *, params=None, random_state=0, progress=None, candidates=None):
    """Choose a model for ``(X, y)`` by validation log predictive density.

    Parameters
    ----------
    X : DataFrame of raw feature columns
    y : ndarray
    schema : hdgp.io.TableSchema
    params : dict, optional
        Parameter overrides, applied to the candidates that have them.
    candidates : list of str, optional
        Preset names (default :func:`candidate_models`).

    Returns
    -------
    name : str
        The winning preset.
    comparison : list of dict
        Per candidate: ``model``, ``val_log_density`` (mean, higher is better),
        ``val_rmse``, ``fit_seconds`` and ``error`` (why a candidate failed, else None).
    """
    from .fitting import _fit, evaluate, make_estimator

    progress = progress or (lambda message: None)
    n = len(y)
    if n < MIN_AUTO_ROWS:
        raise TableError(f"--model auto needs at least {MIN_AUTO_ROWS} training rows to compare models on a "
                         f"validation split; this table has {n}. Choose a model, e.g. --model rbf-ard.")
    candidates = list(candidates or candidate_models(n))
    fit_idx, val_idx = train_test_split(np.arange(n), test_size=VALIDATION_FRACTION, random_state=random_state)
    rows = []
    for i, name in enumerate(candidates, 1):
        progress(f"[auto {i}/{len(candidates)}] fitting {name} on {len(fit_idx)} rows, validating on {len(val_idx)}")
        row = {"model": name, "val_log_density": None, "val_rmse": None, "fit_seconds": None, "error": None}
        try:
            est = make_estimator(name, schema, params=params, random_state=random_state, strict=False)
            row["fit_seconds"], _ = _fit(est, schema.encode(X.iloc[fit_idx]), y[fit_idx])
            scores, _, _ = evaluate(est, schema.encode(X.iloc[val_idx]), y[val_idx])
            row["val_log_density"], row["val_rmse"] = -scores["nlpd"], scores["rmse"]
        except Exception as exc:  # a family that cannot handle this table must not stop the others
            row["error"] = f"{type(exc).__name__}: {exc}"
        if row["val_log_density"] is not None and not math.isfinite(row["val_log_density"]):
            row["error"], row["val_log_density"] = "non-finite validation score", None
        rows.append(row)
        progress(f"[auto {i}/{len(candidates)}] {name}: " + (
            f"validation log density {row['val_log_density']:.4g}, RMSE {row['val_rmse']:.4g}"
            if row["error"] is None else f"failed ({row['error']})"))
    scored = [r for r in rows if r["val_log_density"] is not None]
    if not scored:
        raise RuntimeError("Every candidate model failed on this table: "
                           + "; ".join(f"{r['model']}: {r['error']}" for r in rows))
    best = max(scored, key=lambda r: r["val_log_density"])
    for r in rows:
        r["selected"] = r is best
    return best["model"], rows
