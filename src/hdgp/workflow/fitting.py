"""Fit a model to a user's table: split, build the estimator, fit, score on held-out rows.

:func:`fit_table` is the Python form of ``hdgp fit``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from ..exceptions import HDGPWarning, warn_caller
from ..io.table import TASKS, TableError, TableSchema
from .classification import evaluate_classifier
from .estimation import (COVERAGE_LEVELS, evaluate, keep_levels_in_training, make_estimator,
                         resolve_model, timed_fit)
from .select import CV_MAX_ROWS, select
from .stacking import StackedClassifier, StackedRegressor
from .tabular import TabularModel

__all__ = ["fit_table", "make_estimator", "resolve_model", "evaluate", "COVERAGE_LEVELS", "MIN_TRAIN_ROWS"]

#: Fewest training rows ``fit_table`` accepts.
MIN_TRAIN_ROWS = 5
#: Iteration cap of L-BFGS when ``--model auto`` refits its winner from the validated fit on more than
#: :data:`~hdgp.workflow.select.CV_MAX_ROWS` training rows (unless ``params`` sets ``max_iter``).
REFIT_MAX_ITER = 50
#: A held-out R² at least this high, or a feature whose (rank) correlation with the target is at
#: least this in absolute value, gets a warning that the target may leak into the features.
LEAK_THRESHOLD = 0.999


def _correlations(schema: TableSchema, X_raw: pd.DataFrame, y: np.ndarray) -> dict:
    """Per numeric feature column: (|Pearson r|, |Spearman ρ|) with the target over ``X_raw``'s rows
    (a two-class target as its 0/1 code; none for more classes)."""
    if schema.task == "classification" and len(schema.classes) != 2:
        return {}
    target = pd.Series(np.asarray(y, float))
    if target.nunique() < 2:
        return {}
    out = {}
    for c in schema.features:
        if schema.kinds[c] == "categorical":
            continue
        x = pd.Series(np.asarray(schema.column_values(X_raw[c], c), float))
        if x.nunique() < 2:
            continue
        with np.errstate(all="ignore"):
            out[c] = (abs(float(x.corr(target))), abs(float(x.corr(target, method="spearman"))))
    return out


def leak_warnings(schema: TableSchema, X_raw: pd.DataFrame, y: np.ndarray, r2=None, *,
                  columns: bool = True) -> list[str]:
    r"""Plain-words warnings that the target may leak into the features.

    A feature column x is named when :math:`|r(x, y)| \ge` :data:`LEAK_THRESHOLD` (it nearly equals
    an affine function of the target) or :math:`|\rho(x, y)| \ge` :data:`LEAK_THRESHOLD` (Spearman:
    x is a monotone function of the target), over the training rows; a held-out ``r2`` at least
    :data:`LEAK_THRESHOLD` is named with the columns most correlated with the target. ``columns=False``:
    the R² warning only.
    """
    corr = _correlations(schema, X_raw, y)
    out = []
    for c, (pearson, spearman) in corr.items() if columns else ():
        if pearson >= LEAK_THRESHOLD or spearman >= LEAK_THRESHOLD:
            how = (f"correlation {pearson:.4f}" if pearson >= LEAK_THRESHOLD
                   else f"it rises or falls with the target in the same order, rank correlation {spearman:.4f}")
            out.append(f"Column {c!r} nearly equals the target {schema.target!r} ({how}). If it is computed from "
                       f"the target or recorded after it, drop it (--drop {c}); otherwise the model only copies it.")
    if r2 is not None and np.isfinite(r2) and r2 >= LEAK_THRESHOLD:
        top = sorted(corr, key=lambda c: -max(corr[c]))[:3]
        named = ", ".join(f"{c!r} ({max(corr[c]):.3f})" for c in top)
        out.append(f"The held-out R² is {r2:.4f}: predictions this close to the target usually mean a column "
                   f"gives the target away." + (f" Columns most correlated with it: {named}." if top else "")
                   + " Check that no column is computed from the target, and drop any that is (--drop).")
    return out


def _quiet(message: str) -> None:
    """Default progress sink: say nothing."""


def _target_summary(schema: TableSchema, y: np.ndarray) -> dict:
    if schema.task == "classification":
        counts = np.bincount(y, minlength=len(schema.classes))
        return {"name": schema.target, "task": "classification", "reason": schema.task_reason,
                "classes": list(schema.classes), "counts": [int(c) for c in counts]}
    return {"name": schema.target, "task": "regression", "reason": schema.task_reason, "min": float(y.min()),
            "max": float(y.max()), "mean": float(y.mean()), "std": float(y.std())}


def _data_summary(frame: pd.DataFrame, schema: TableSchema, y: np.ndarray, n_train: int, n_test: int) -> dict:
    features = []
    for c in schema.features:
        entry = {"name": c, "kind": schema.kinds[c], "dtype": schema.dtypes[c]}
        if schema.kinds[c] == "categorical":
            counts = frame[c].astype(str).value_counts()
            entry["levels"] = {str(k): int(v) for k, v in counts.items()}
        else:
            col = schema.column_values(frame[c], c)
            entry.update(min=float(col.min()), max=float(col.max()), mean=float(col.mean()), std=float(col.std()))
            if schema.kinds[c] == "datetime":
                dates = schema.dates(frame[c], c)
                first, last = dates.min(), dates.max()
                if (dates.dropna() == dates.dropna().dt.normalize()).all():  # dates without a time of day
                    first, last = first.date(), last.date()
                entry.update(first=str(first), last=str(last))
        features.append(entry)
    return {"n_rows": int(len(y)), "n_train": int(n_train), "n_test": int(n_test), "dropped": list(schema.dropped),
            "target": _target_summary(schema, y), "features": features}


def _rare_class_error(exc: ValueError, name: str, schema: TableSchema, y, y_train) -> ValueError:
    """``exc``, or for SIGP-classifier with a class of one training row (whose cross-validation then
    fails) a TableError that says what to do on the command line."""
    counts = np.bincount(y_train, minlength=len(schema.classes)) if schema.task == "classification" else None
    if name != "SIGP-classifier" or counts is None or counts.min() >= 2:
        return exc
    k = int(counts.argmin())
    held = int((y == k).sum()) - int(counts[k])
    return TableError(
        f"SIGP-classifier chooses its hyper-parameters by cross-validation, which needs 2 training rows of every "
        f"class; class {schema.classes[k]!r} has {counts[k]}" + (f" ({held} held out for testing)" if held else "")
        + ". Use --test-size 0 to train on every row, fix them with -p rank=2 -p lengthscale=... -p eta=1e-4, "
        "or choose another model (--model rbf-ard)."
    )


def takes_missing(model: str) -> bool:
    """Whether the preset ``model`` marginalises missing feature cells (OAK; its classifier too), so that
    :func:`fit_table` keeps rows with them; False for ``"auto"`` and names that are no preset."""
    if not isinstance(model, str) or model.lower() == "auto":
        return False
    from ..presets import preset  # (presets import the estimators: only when a name is given)

    try:
        return bool(getattr(preset(model), "_takes_missing", False))
    except (TypeError, ValueError):
        return False


def fit_table(frame: pd.DataFrame, target: str, *, task: str = "auto", model: str = "auto", categorical=(),
              drop=(), drop_missing: bool = False, test_size: float = 0.2, random_state: int = 0,
              params: dict | None = None, refit_all: bool = False, progress=None,
              verbose: bool = False) -> TabularModel:
    """Fit a GP to a table and score it on held-out rows.

    Parameters
    ----------
    frame : DataFrame
        The whole table (features, target and any ignored columns).
    target : str
        Column to predict.
    task : {"auto", "regression", "classification"}, default="auto"
        ``"auto"``: a text, categorical or boolean target, or a numeric one with
        exactly two distinct values, is classification; any other numeric target is
        regression (:func:`hdgp.io.table.infer_task`). Classification keeps the
        table's class labels (``schema.classes``) and holds out a stratified split.
    model : str, default="auto"
        A preset name (``hdgp presets``; e.g. ``"oak"``, ``"rbf-ard"``) or ``"auto"``:
        fit the candidates of :func:`hdgp.workflow.select.candidate_models` (regression)
        or :func:`hdgp.workflow.classification.classifier_candidates` by successive halving on
        growing subsets (5-fold cross-validation up to 600 training rows), stack the ones left
        by their calibrated validation log predictive density / log-loss
        (:func:`hdgp.workflow.select.select_model`, :mod:`hdgp.workflow.stacking`: one of them
        alone, or a mixture of up to three with weights), refit each member on all training rows
        (from its generic start and, for hdgp's GP regressors, also from its validated
        fit, keeping the better training objective; above 600 training rows a GP regressor
        from its validated fit only, see :func:`_refit_validated`) and give a regressor's predictive
        variances its validation calibration factor. On a classification target
        ``oak``, ``rbf-ard`` and ``sigp`` mean OAK-classifier, GP-classifier and
        SIGP-classifier; regression-only models are refused.
    categorical, drop, drop_missing
        See :meth:`hdgp.io.TableSchema.infer`. A model that takes missing feature cells (OAK) keeps
        the rows that have them (``keep_missing``), with a note saying how many, unless ``drop_missing``.
    test_size : float, default=0.2
        Fraction of rows held out to measure accuracy and calibration (0: none).
    random_state : int, default=0
        Seed of the split and of the model.
    params : dict, optional
        Estimator parameters to override.
    refit_all : bool, default=False
        After the held-out evaluation, refit the model on every row (held-out ones too) and
        return that: the metrics then describe the same model fitted without the held-out
        rows, started from its fitted hyper-parameters where the model has ``warm_start``.
        ``metadata["refit_all"]`` records the refit (rows, seconds, warnings).
    progress : callable, optional
        Called with short progress messages.
    verbose : bool
        Let the estimator show its own progress bar.

    Returns
    -------
    TabularModel
        ``metadata`` holds ``task``, ``model`` (a preset, or ``"stack of A (w) + B (w)"``), ``members``
        (``model`` and ``weight`` of each), ``metrics`` (held-out), ``data``, ``holdout``
        (held-out inputs, targets and predictions: ``mean``/``std`` for regression,
        ``proba`` for classification), ``selection``, ``fit_seconds`` and ``warnings``.
    """
    progress = progress or _quiet
    if not isinstance(model, str):
        raise ValueError(f"model must be a preset name or 'auto', got {model!r}.")
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"params must be a dict of estimator parameters, e.g. {{'max_iter': 50}}; got {params!r}.")
    categorical = [categorical] if isinstance(categorical, str) else categorical
    drop = [drop] if isinstance(drop, str) else drop
    if not 0 <= test_size < 1:
        raise ValueError(f"test_size must be in [0, 1) (a fraction of the rows), got {test_size!r}.")
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}.")
    schema, X_raw, y = TableSchema.infer(frame, target, task=task, categorical=categorical, drop=drop,
                                         drop_missing=drop_missing, keep_missing=takes_missing(model))
    if schema.categorical and "categorical_features" in (params or {}):
        raise ValueError("Declare categorical columns with --categorical (categorical=... in Python), not "
                         "-p categorical_features: the table's categorical columns are set from them.")
    progress(f"task: {schema.task} ({schema.task_reason})"
             + (f"; classes: {', '.join(map(repr, schema.classes))}" if schema.classes else ""))
    for note in schema.notes:
        progress(note)
    name = None if model.lower() == "auto" else resolve_model(model, schema)
    if name is not None and name.lower() != model.lower():
        progress(f"--model {model} on a classification target: fitting {name}")
    train_idx, test_idx = _split(schema, y, test_size, random_state)
    if test_size > 0 and not len(test_idx):
        progress(f"--test-size {test_size:g} of {len(y)} rows holds out fewer than 2: no held-out evaluation")
    train_idx, test_idx, moved = keep_levels_in_training(schema, X_raw, train_idx, test_idx)
    if moved:
        progress(f"{moved} held-out row(s) with a category absent from the training rows moved to training "
                 "(the model has to know every level)"
                 + ("; no held-out row is left, so the fit is not evaluated on held-out data" if not len(test_idx)
                    else ""))
    X_train, y_train = X_raw.iloc[train_idx], y[train_idx]
    guards = leak_warnings(schema, X_train, y_train)  # before the fit: it may take long
    for message in guards:
        warn_caller(message, HDGPWarning)
    selection = members = None
    if name is None:
        name, selection, members = select(X_train, y_train, schema, params=params, random_state=random_state,
                                          progress=progress, candidates=None, verbose=verbose)
    fits, seconds, caught = [], 0.0, []
    for member, validated in (members or {name: None}).items():
        est, spent, said = _fit_member(member, validated, schema, X_train, y, train_idx, params, random_state,
                                       verbose, progress, strict=selection is None)
        if selection is not None and schema.task != "classification":
            factor = _selected(selection, member)["val_variance_ratio"]
            own = getattr(est, "variance_scale_", 1.0)
            est.scale_variance(factor)
            progress(f"{member}: predictive variance × {factor:.3g} (its calibration on the validation rows)"
                     + (f", × {est.variance_scale_:.3g} with the model's own factor {own:.3g}" if own != 1.0 else ""))
        fits.append((member, est, schema.encoding, list(schema.encoded_names)))
        seconds, caught = seconds + spent, caught + [w for w in said if w not in caught]
    weights = [_selected(selection, m[0])["weight"] for m in fits] if selection else [1.0]
    est, label = _mixture(fits, weights, schema)
    missing = "keep" if getattr(est, "_takes_missing", False) else "error"  # OAK marginalises missing cells
    meta = {"task": schema.task, "model": label, "fit_seconds": seconds, "warnings": list(schema.notes) + caught,
            "selection": selection, "members": [{"model": m[0], "weight": float(w)} for m, w in zip(fits, weights)],
            "random_state": random_state, "test_size": test_size,
            "data": _data_summary(X_raw, schema, y, len(train_idx), len(test_idx)),
            "metrics": None, "holdout": None, "refit_all": None}
    if len(test_idx):
        X_test = schema.encode(X_raw.iloc[test_idx], missing=missing)
        meta["holdout"] = {"X": X_test.to_numpy(), "y": y[test_idx],
                           "rows": np.asarray(X_raw.index[test_idx]).astype(str)}
        if schema.task == "classification":
            meta["metrics"], meta["holdout"]["proba"] = evaluate_classifier(est, X_test, y[test_idx],
                                                                            len(schema.classes))
        else:
            meta["metrics"], meta["holdout"]["mean"], meta["holdout"]["std"] = evaluate(est, X_test, y[test_idx])
        progress("held-out " + ", ".join(f"{k} {v:.3f}" if k == "r2" else f"{k} {v:.3g}"
                                         for k, v in meta["metrics"].items() if v is not None))
        if refit_all:
            rows = np.concatenate([train_idx, test_idx])
            progress(f"refitting {label} on all {len(rows)} rows")
            seconds, caught = _refit_all(fits, selection, schema, X_raw.iloc[rows], y[rows], missing)
            meta["refit_all"] = {"n_rows": int(len(rows)), "fit_seconds": seconds, "warnings": caught}
            progress(f"refitted in {seconds:.1f} s")
    late = leak_warnings(schema, X_train, y_train, (meta["metrics"] or {}).get("r2"), columns=False)
    for message in late:
        warn_caller(message, HDGPWarning)
    meta["warnings"] += guards + late
    return TabularModel(est, schema, meta)


def _fit_member(name, validated, schema, X_train, y, train_idx, params, random_state, verbose, progress, *, strict):
    """Fit preset ``name`` on the training rows; with ``validated`` (its fit by ``--model auto`` on the
    validation split's fitting rows) as :func:`_refit_validated` / :func:`_refit_warm` say. Sets
    ``schema.encoding`` to the member's. Returns the estimator, the seconds and the warnings."""
    y_train = y[train_idx]
    est = make_estimator(name, schema, params=params, random_state=random_state, verbose=verbose, strict=strict)
    missing = "keep" if getattr(est, "_takes_missing", False) else "error"  # OAK marginalises missing cells
    X_fit = schema.encode(X_train, missing=missing)
    if _warm_refit_only(validated, len(train_idx)):
        progress(f"fitting {name} on {len(train_idx)} rows × {len(schema.encoded_names)} inputs, from its "
                 "validated fit")
        est, seconds, caught = _refit_validated(validated, X_fit, y_train, est.get_params()["verbose"], params)
    else:
        progress(f"fitting {name} on {len(train_idx)} rows × {len(schema.encoded_names)} inputs")
        try:
            seconds, caught = timed_fit(est, X_fit, y_train, schema.classes, progress=progress)
        except ValueError as exc:
            raise _rare_class_error(exc, name, schema, y, y_train) from exc
        if validated is not None and "warm_start" in validated.get_params():
            est, seconds, caught = _refit_warm(est, validated, X_fit, y_train, seconds, caught, progress)
    progress(f"fitted {name} in {seconds:.1f} s")
    return est, seconds, caught


def _selected(selection, name):
    """The row of candidate ``name`` in ``--model auto``'s comparison (:func:`hdgp.workflow.select.select_model`)."""
    return next(r for r in selection if r["model"] == name)


def _mixture(fits, weights, schema):
    """The estimator of ``fits`` (``(name, estimator, encoding, columns)``): the one member's, or their
    stacked mixture (inputs in the ``"codes"`` encoding), and its label for ``metadata["model"]``."""
    if len(fits) == 1:
        schema.encoding = fits[0][2]
        return fits[0][1], fits[0][0]
    levels = {c: len(schema.levels[c]) for c in schema.categorical}
    if schema.task == "classification":
        est = StackedClassifier.from_members(fits, weights, schema.features, levels, n_classes=len(schema.classes))
    else:
        est = StackedRegressor.from_members(fits, weights, schema.features, levels)
    schema.encoding = "codes"
    return est, "stack of " + " + ".join(f"{m[0]} ({w:.2f})" for m, w in zip(fits, weights))


def _refit_all(fits, selection, schema, X, y, missing):
    """Refit every member of ``fits`` on ``(X, y)`` from its fitted hyper-parameters (:func:`_fit_warm`),
    each with its validation variance factor again. Returns the seconds and the warnings."""
    seconds, caught, final = 0.0, [], schema.encoding
    try:
        for name, est, encoding, _ in fits:
            schema.encoding = encoding
            spent, said = _fit_warm(est, schema.encode(X, missing=missing if len(fits) == 1 else "error"), y)
            seconds, caught = seconds + spent, caught + [w for w in said if w not in caught]
            factor = _selected(selection, name)["val_variance_ratio"] if selection else None
            if factor is not None and factor != 1.0:  # a refit resets the variance calibration
                est.scale_variance(factor)
    finally:
        schema.encoding = final
    return seconds, caught


def _fit_warm(est, X, y):
    """:func:`_fit` of a fitted estimator on (other) rows, starting from its fitted hyper-parameters
    (``warm_start``) where it has that option (hdgp's GP regressors), else afresh."""
    warm = "warm_start" in est.get_params()
    if warm:
        est.set_params(warm_start=True)
    try:
        return timed_fit(est, X, y)
    finally:
        if warm:
            est.set_params(warm_start=False)


def _warm_refit_only(winner, n_train: int) -> bool:
    """Whether ``--model auto`` refits its winner from the validated fit alone (see :func:`_refit_validated`):
    for hdgp's GP regressors (``warm_start``) on more than :data:`~hdgp.workflow.select.CV_MAX_ROWS`
    training rows. Up to that many the refit is cheap and also runs from the generic start
    (:func:`_refit_warm`)."""
    return winner is not None and "warm_start" in winner.get_params() and n_train > CV_MAX_ROWS


def _refit_validated(winner, X, y, verbose: bool, params):
    """``winner`` (fitted on the validation split's fitting rows, or on an earlier rung's subset of
    them) refitted on all training rows ``(X, y)`` from its fitted hyper-parameters: one start
    (``warm_start``), the same candidate (direction set, start) and inference engine
    where the row count allows it. Without a ``max_iter`` of the user's, L-BFGS polishes for at
    most :data:`REFIT_MAX_ITER` iterations: the start is an optimum of the same objective on a
    subset of these rows, so the hyper-parameters move little. Where all rows resolve to another
    inference engine than the validated fit's, the estimator starts afresh, without that cap.

    Returns the estimator, the seconds and the warnings.
    """
    changes = {"verbose": verbose}
    # a fit on more rows can resolve inference="auto" to another engine (e.g. exact -> sparse): the
    # estimator then starts afresh, and that fit gets its full iteration budget
    same_engine = winner._resolve_inference(len(y)) == getattr(winner, "inference_", None)
    if same_engine and "max_iter" in winner.get_params() and "max_iter" not in (params or {}):
        changes["max_iter"] = REFIT_MAX_ITER
    before = {key: winner.get_params()[key] for key in changes}
    winner.set_params(**changes)
    try:
        seconds, caught = _fit_warm(winner, X, y)
    finally:
        winner.set_params(**{k: v for k, v in before.items() if k != "verbose"})
    return winner, seconds, caught


def _refit_warm(est, winner, X, y, seconds, caught, progress):
    """The better (by training objective) of ``est``, fitted from its generic start, and ``winner``
    refitted on the same rows from where its validated fit ended (``warm_start``).

    On more rows a fresh start can end in a worse optimum than the one that was validated
    (an example: benchmarks/README.md, "Measurements behind defaults"); both objectives are the
    penalised negative log marginal likelihood per row of the same data, so they compare.
    """
    winner.set_params(verbose=est.get_params()["verbose"])
    warm_seconds, warm_caught = _fit_warm(winner, X, y)
    fresh_loss, warm_loss = est.fit_result_.loss, winner.fit_result_.loss
    progress(f"refitted from the validated fit too: objective {warm_loss:.4g} per row (fresh start {fresh_loss:.4g})")
    if warm_loss < fresh_loss:
        est, caught = winner, warm_caught
    return est, seconds + warm_seconds, caught


def _split(schema: TableSchema, y: np.ndarray, test_size: float, random_state) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out row positions; stratified by class for classification."""
    n = len(y)
    n_test = int(round(test_size * n))
    stratify = None
    if schema.task == "classification" and n_test:
        n_test = max(n_test, len(schema.classes))  # a stratified split holds out every class
        stratify = y
    if n_test < 2:  # one held-out row measures nothing: none is held out
        n_test, stratify = 0, None
    if n - n_test < MIN_TRAIN_ROWS or (stratify is not None and n - n_test < len(schema.classes)):
        held = f" after holding out {n_test} for testing. Add rows or lower --test-size." if n_test else ". Add rows."
        raise TableError(f"The table has {n} usable rows; at least {MIN_TRAIN_ROWS} training rows are needed{held}")
    if n_test == 0:
        return np.arange(n), np.arange(0)
    train, test = train_test_split(np.arange(n), test_size=n_test, random_state=random_state, stratify=stratify)
    if stratify is not None:
        # the stratified split rounds a rare class's share down to no held-out row (2 of 60 rows at
        # 20 %: 0.4); hold out one of its rows too, so every class is measured (each has >= 2 rows)
        rng = np.random.default_rng(random_state if isinstance(random_state, (int, np.integer)) else None)
        moved = [rng.choice(train[y[train] == k]) for k in np.setdiff1d(np.unique(y), y[test])]
        train, test = np.setdiff1d(train, moved), np.concatenate([test, moved]).astype(test.dtype)
    return train, test
