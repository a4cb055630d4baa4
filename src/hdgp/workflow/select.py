"""``--model auto``: fit candidate families suited to the data size and keep the best.

Rule (documented in ``hdgp fit --help``):

1. Candidates by training-set size n (:func:`candidate_models`):
   n ≤ 3000: OAK, DPA-GP-ARD, RBF-ARD, SIGP (exact inference, all affordable);
   3000 < n ≤ 20000: DPA-GP-ARD, SGPR-RBF-ARD, SIGP;
   n > 20000: DPA-GP-ARD (SKI, linear in n), SGPR-RBF-ARD.
2. The training rows are split once more (80 / 20, seeded): every candidate is fitted
   on the 80 % and scored by its mean log predictive density on the 20 %
   (:math:`\\frac1m\\sum \\log p(y_i \\mid x_i)`, i.e. minus the validation NLPD)
   after one calibration factor on its predictive variances: :math:`r`, the mean of
   :math:`z_i^2 = (y_i - \\mu_i)^2 / \\sigma_i^2` there, the factor that maximises that
   density (it rises by :math:`(r - 1 - \\log r)/2`). The score rewards accurate means
   and well-shaped uncertainty and, unlike the training marginal likelihood, is
   comparable across families (SIGP has none). Without the factor an accurate but
   over-confident fit loses to an uninformative one (table ``wide-200`` of
   ``benchmarks/results/auto/auto_selection.md``).
3. The winner is refitted on all training rows, from its generic start and (hdgp's GP
   regressors) from its validated fit (``warm_start``), keeping the better training
   objective; its predictive variances are multiplied by its validation factor
   (``scale_variance``). The held-out test rows are never used for the choice.

Classification targets (``schema.task == "classification"``) follow the same rule
with the candidates of :func:`hdgp.workflow.classification.classifier_candidates`
(OAK-classifier, GP-classifier, SIGP-classifier), a validation split
stratified by class, and the validation log-loss
(:math:`-\\frac1m\\sum \\log p(y_i \\mid x_i)`, lower is better) as the score.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.model_selection import train_test_split

from ..io.table import TableError
from ..presets import preset
from .classification import classifier_candidates, evaluate_classifier
from .estimation import evaluate, keep_levels_in_training, make_estimator, timed_fit

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


def _score(est, X, y, schema) -> dict:
    """Validation scores of a fitted candidate; ``score`` is maximised."""
    if schema.task == "classification":
        scores, _ = evaluate_classifier(est, X, y, len(schema.classes))
        return {"score": -scores["log_loss"], "val_log_loss": scores["log_loss"], "val_accuracy": scores["accuracy"]}
    scores, mean, std = evaluate(est, X, y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = float(np.mean(((np.asarray(y, float) - mean) / std) ** 2))
        calibrated = float(-scores["nlpd"] + 0.5 * (ratio - 1.0 - np.log(ratio)))
    return {"score": calibrated, "val_log_density": -scores["nlpd"],
            "val_log_density_calibrated": calibrated, "val_variance_ratio": ratio, "val_rmse": scores["rmse"]}


def _parameters(name: str) -> set:
    """Parameter names of preset ``name`` (none for an unknown name, whose fit then fails with its error)."""
    try:
        return set(preset(name).get_params(deep=False))
    except ValueError:
        return set()


def _message(row: dict) -> str:
    if row["error"] is not None:
        return f"failed ({row['error']})"
    if "val_log_loss" in row:
        return f"validation log-loss {row['val_log_loss']:.4g}, accuracy {row['val_accuracy']:.3f}"
    return (f"validation log density {row['val_log_density']:.4g} (calibrated {row['val_log_density_calibrated']:.4g}, "
            f"variance × {row['val_variance_ratio']:.3g}), RMSE {row['val_rmse']:.4g}")


def _rejected_parameter(exc: Exception, params, accepted) -> str | None:
    """The user-set parameter whose value ``exc`` rejects, else None.

    hdgp estimators validate their constructor arguments in ``fit`` and name the
    argument first (``"n_projections must be an integer >= 1, got 0."``), so a
    ``ValueError``/``TypeError`` that opens with ``"<name> "`` for an overridden
    parameter the candidate has is taken to be about that value.
    """
    if not isinstance(exc, (ValueError, TypeError)):
        return None
    message = str(exc)
    return next((p for p in (params or {}) if p in accepted and message.startswith(f"{p} ")), None)


def select_model(X, y, schema, *, params=None, random_state=0, progress=None, candidates=None):
    """Choose a model for ``(X, y)`` by calibrated validation log predictive density (classification: log-loss).

    Parameters
    ----------
    X : DataFrame of raw feature columns
    y : ndarray
        Target values, or class codes when ``schema.task == "classification"``.
    schema : hdgp.io.TableSchema
    params : dict, optional
        Parameter overrides, applied to the candidates that have them.
    candidates : list of str, optional
        Preset names (default :func:`candidate_models`, or
        :func:`~hdgp.workflow.classification.classifier_candidates` for a class target).

    Returns
    -------
    name : str
        The winning preset.
    comparison : list of dict
        Per candidate: ``model``, ``val_log_density`` (mean, higher is better),
        ``val_log_density_calibrated`` (the score: the same after the variance factor
        ``val_variance_ratio``) and ``val_rmse`` (classification: ``val_log_loss``, lower
        is better, and ``val_accuracy``), ``fit_seconds``, ``error`` (why a candidate
        failed, else None) and ``selected``.

    Raises
    ------
    ValueError
        A parameter in ``params`` that no candidate has, or a value of one that a
        candidate rejects (a candidate that fails for any other reason is reported in
        ``comparison`` and the others go on).
    """
    name, rows, _ = select(X, y, schema, params=params, random_state=random_state, progress=progress,
                            candidates=candidates)
    return name, rows


def select(X, y, schema, *, params, random_state, progress, candidates):
    """:func:`select_model`, also returning the winner as fitted on the validation split's other rows."""
    progress = progress or (lambda message: None)
    n = len(y)
    if n < MIN_AUTO_ROWS:
        example = "gp-classifier" if schema.task == "classification" else "rbf-ard"
        raise TableError(f"--model auto needs at least {MIN_AUTO_ROWS} training rows to compare models on a "
                         f"validation split; there are {n} (after the held-out rows). Choose a model, e.g. "
                         f"--model {example}.")
    classify = schema.task == "classification"
    if candidates is None:
        candidates = classifier_candidates(n, len(schema.classes)) if classify else candidate_models(n)
    candidates = list(candidates)
    accepted = set().union(*map(_parameters, candidates))
    unknown = sorted(set(params or {}) - accepted)
    if unknown:  # a typo would otherwise be dropped by every candidate in silence
        raise ValueError(f"No candidate model ({', '.join(candidates)}) has the parameter(s) "
                         f"{', '.join(map(repr, unknown))}. Their parameters: {', '.join(sorted(accepted))}.")
    for key in params or {}:
        takers = [name for name in candidates if key in _parameters(name)]
        if len(takers) < len(candidates):
            progress(f"-p {key} applies to {', '.join(takers)} only (the other candidates have no such parameter)")
    n_val, n_classes = math.ceil(VALIDATION_FRACTION * n), len(schema.classes)
    stratify = y if classify and np.bincount(y).min() >= 2 and min(n_val, n - n_val) >= n_classes else None
    fit_idx, val_idx = train_test_split(np.arange(n), test_size=VALIDATION_FRACTION, random_state=random_state,
                                        stratify=stratify)
    fit_idx, val_idx, _ = keep_levels_in_training(schema, X, fit_idx, val_idx)
    keys = (("val_log_loss", "val_accuracy") if classify else
            ("val_log_density", "val_log_density_calibrated", "val_variance_ratio", "val_rmse"))
    rows, fitted = [], {}
    for i, name in enumerate(candidates, 1):
        progress(f"[auto {i}/{len(candidates)}] fitting {name} on {len(fit_idx)} rows, validating on {len(val_idx)}")
        row = {"model": name, **dict.fromkeys(keys), "fit_seconds": None, "error": None}
        score = None
        try:
            est = make_estimator(name, schema, params=params, random_state=random_state, strict=False)
            row["fit_seconds"], _ = timed_fit(est, schema.encode(X.iloc[fit_idx]), y[fit_idx],
                                         schema.classes if classify else ())
            scores = _score(est, schema.encode(X.iloc[val_idx]), y[val_idx], schema)
            score = scores.pop("score")
            row.update(scores)
            fitted[name] = est
        except Exception as exc:  # a family that cannot handle this table must not stop the others
            bad = _rejected_parameter(exc, params, _parameters(name))
            if bad is not None:  # ... but a value the user chose is the user's error, not the family's
                raise ValueError(f"-p {bad}={params[bad]!r} is not valid for candidate {name}: {exc}") from exc
            row["error"] = f"{type(exc).__name__}: {exc}"
        if row["error"] is None and not math.isfinite(score):
            row["error"], score = "non-finite validation score", None
            row.update(dict.fromkeys(keys))
        row["_score"] = score
        rows.append(row)
        progress(f"[auto {i}/{len(candidates)}] {name}: {_message(row)}")
    scored = [r for r in rows if r["_score"] is not None]
    if not scored:
        raise RuntimeError("Every candidate model failed on this table: "
                           + "; ".join(f"{r['model']}: {r['error']}" for r in rows))
    best = max(scored, key=lambda r: r["_score"])
    for r in rows:
        r["selected"] = r is best
    for r in rows:
        del r["_score"]
    return best["model"], rows, fitted[best["model"]]
