"""``--model auto``: fit candidate families suited to the data size and stack the best.

Rule (documented in ``hdgp fit --help``):

1. Candidates by training-set size n (:func:`candidate_models`):
   n ≤ 3000: OAK, DPA-GP-ARD, RBF-ARD, SIGP (exact inference, all affordable);
   3000 < n ≤ 20000: DPA-GP-ARD, SGPR-RBF-ARD, SIGP;
   n > 20000: DPA-GP-ARD (SKI, linear in n), SGPR-RBF-ARD.
2. The training rows are split once more (80 / 20, seeded): every candidate is scored
   by its mean log predictive density on the 20 %
   (:math:`\\frac1m\\sum \\log p(y_i \\mid x_i)`, i.e. minus the validation NLPD)
   after one calibration factor on its predictive variances: :math:`r`, the mean of
   :math:`z_i^2 = (y_i - \\mu_i)^2 / \\sigma_i^2` there, the factor that maximises that
   density (it rises by :math:`(r - 1 - \\log r)/2`). The score rewards accurate means
   and well-shaped uncertainty and, unlike the training marginal likelihood, is
   comparable across families (SIGP has none). Without the factor an accurate but
   over-confident fit loses to an uninformative one (table ``wide-200`` of
   ``benchmarks/results/auto/auto_selection.md``).

   The fits follow successive halving (Jamieson & Talwalkar 2016) on nested subsets of the
   80 %: rung j fits the surviving candidates on :math:`n_{fit}/3^{J-j}` rows (the first at
   least :data:`MIN_RUNG_ROWS`, the last all of them) and scores them on the same validation
   rows. After a rung a candidate stops when it is outside the best third (:math:`\\lceil c / 3\\rceil`
   of the :math:`c` scored, 3 = :data:`RUNG_GROWTH`) *and* its paired
   per-row score difference to the leader, :math:`\\bar d`, is below :math:`-2` standard
   errors (:func:`survivors`): a candidate within validation noise goes on, whatever its
   cost. A rung's fits use the inference engine of the last rung (e.g. SKI or sparse above 5000
   rows, not exact inference on a 4000-row rung). The choice is the best score at the last
   rung (all fitting rows, the same validation rows as a single comparison), or the lone
   survivor of an earlier rung (its validation factor from that rung). Up to
   :data:`CV_MAX_ROWS` training rows (one rung) the fits are cheap and one split is noisy:
   the score is then pooled over a 5-fold cross-validation whose first fold is that split
   (every training row validated once, one calibration factor over all of them).
3. The candidates that reach the last rung are **stacked** (:mod:`hdgp.workflow.stacking`): mixture
   weights that maximise the mean log of the mixture's validation density
   :math:`\\sum_k w_k p_k(y_i \\mid x_i)` over the same pooled validation rows (Bayesian stacking,
   Yao et al. 2018); the candidates with weight ≥ :data:`~hdgp.workflow.stacking.MIN_WEIGHT` are the
   members (at most :data:`~hdgp.workflow.stacking.MAX_MEMBERS`, or :data:`MAX_MEMBERS_LARGE` above
   :data:`CV_MAX_ROWS` training rows), their weights solved again among them. The mixture is kept
   only when its mean validation log density beats the best candidate's by more than
   :math:`(K - 1) / 2m` for K members and m validation rows: fitted on the same rows, K − 1 free
   weights raise it by about half a nat each (Akaike's correction), so a smaller gain is no evidence
   of a better model; the best candidate alone is then the choice, as it is when it takes all the
   weight. Several members predict as their mixture.
4. Each member is refitted on all training rows. Up to :data:`CV_MAX_ROWS` training rows, from
   its generic start and (hdgp's GP regressors) from its validated fit (``warm_start``),
   keeping the better training objective; beyond, hdgp's GP regressors from the validated fit
   only, with a short L-BFGS polish (:data:`hdgp.workflow.fitting.REFIT_MAX_ITER` iterations):
   that fit is an optimum of the same objective on a subset of the rows. Its predictive
   variances are multiplied by its validation factor (``scale_variance``). The held-out test
   rows are never used for the choice.

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
from .classification import classifier_candidates, evaluate_classifier, predict_proba_codes
from .estimation import evaluate, keep_levels_in_training, make_estimator, timed_fit
from .stacking import MAX_MEMBERS, mixture_evidence, stack_members

__all__ = ["candidate_models", "select_model", "rung_sizes", "survivors", "VALIDATION_FRACTION", "MIN_AUTO_ROWS",
           "MIN_RUNG_ROWS", "RUNG_GROWTH", "NOISE_Z"]

VALIDATION_FRACTION = 0.2
#: Fewest rows the first successive-halving rung fits a candidate on.
MIN_RUNG_ROWS = 200
#: Each rung fits on this many times the rows of the one before, up to every fitting row.
RUNG_GROWTH = 3
#: Up to this many training rows, ``auto`` validates by K-fold cross-validation (every training
#: row scored once) instead of one 80 / 20 split: fits are cheap there and one split is noisy.
CV_MAX_ROWS = 600
#: A candidate within this many standard errors of the leader's validation score is kept.
NOISE_Z = 2.0
#: ``auto`` needs at least this many training rows (so the validation split has ≥ 5).
MIN_AUTO_ROWS = 25
#: Most members of the mixture above :data:`CV_MAX_ROWS` training rows (each costs a refit on all of them).
MAX_MEMBERS_LARGE = 2


def candidate_models(n: int) -> list[str]:
    """Preset names tried by ``--model auto`` for ``n`` training rows."""
    if n <= 3000:
        return ["OAK", "DPA-GP-ARD", "RBF-ARD", "SIGP"]
    if n <= 20000:
        return ["DPA-GP-ARD", "SGPR-RBF-ARD", "SIGP"]
    return ["DPA-GP-ARD", "SGPR-RBF-ARD"]


def _score(est, X, y, schema) -> dict:
    """Validation scores of a fitted candidate; ``score`` is maximised, ``per_row`` holds its terms
    (each row's calibrated log density, or minus its log-loss), whose mean is ``score``."""
    if schema.task == "classification":
        scores, proba = evaluate_classifier(est, X, y, len(schema.classes))
        per_row = np.log(np.clip(np.asarray(proba)[np.arange(len(y)), np.asarray(y)], 1e-15, 1.0))
        return {"score": -scores["log_loss"], "per_row": per_row, "val_log_loss": scores["log_loss"],
                "val_accuracy": scores["accuracy"]}
    scores, mean, std = evaluate(est, X, y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z2 = ((np.asarray(y, float) - mean) / std) ** 2
        ratio = float(np.mean(z2))
        calibrated = float(-scores["nlpd"] + 0.5 * (ratio - 1.0 - np.log(ratio)))
        per_row = -0.5 * np.log(2 * np.pi * ratio * np.asarray(std, float) ** 2) - 0.5 * z2 / ratio
    return {"score": calibrated, "per_row": per_row, "val_log_density": -scores["nlpd"],
            "val_log_density_calibrated": calibrated, "val_variance_ratio": ratio, "val_rmse": scores["rmse"]}


def rung_sizes(n_fit: int) -> list[int]:
    """Rows each successive-halving rung fits on: ``n_fit / RUNG_GROWTH**j`` for j = J, ..., 0, the
    smallest at least :data:`MIN_RUNG_ROWS` (one rung, all ``n_fit`` rows, below twice that)."""
    sizes = [n_fit]
    while sizes[0] / RUNG_GROWTH >= MIN_RUNG_ROWS:
        sizes.insert(0, math.ceil(sizes[0] / RUNG_GROWTH))
    return sizes


def survivors(scores: dict, *, z: float = None) -> list[str]:
    """Candidates kept after a rung: the best :math:`\\lceil c/\\eta \\rceil` of the :math:`c` by score
    (:math:`\\eta` = :data:`RUNG_GROWTH`: each rung triples the rows and keeps a third, the budget of
    successive halving), and any other whose validation rows do not show it worse than the leader
    beyond noise.

    ``scores`` maps a name to its per-row validation terms (the same rows for every name). A
    candidate c is dropped when it is outside that top share and the paired mean difference
    :math:`\\bar d = \\frac1m\\sum_i (s_{c,i} - s_{\\ast,i})` to the leader :math:`\\ast` is below
    :math:`-z\\,\\mathrm{sd}(d)/\\sqrt m` (default :data:`NOISE_Z` standard errors).
    """
    z = NOISE_Z if z is None else z
    ranked = sorted(scores, key=lambda k: -float(np.mean(scores[k])))
    leader, half = ranked[0], math.ceil(len(ranked) / RUNG_GROWTH)
    keep = []
    for rank, name in enumerate(ranked):
        d = np.asarray(scores[name]) - np.asarray(scores[leader])
        se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.inf
        if rank < half or float(np.mean(d)) >= -z * se:
            keep.append(name)
    return keep


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
        return (f"validation log-loss {row['val_log_loss']:.4g}, accuracy {row['val_accuracy']:.3f} "
                f"({row['fit_seconds']:.1f} s)")
    return (f"validation log density {row['val_log_density']:.4g} (calibrated "
            f"{row['val_log_density_calibrated']:.4g}, variance × {row['val_variance_ratio']:.3g}), "
            f"RMSE {row['val_rmse']:.4g} ({row['fit_seconds']:.1f} s)")


def _rejected_parameter(exc: Exception, params, accepted) -> str | None:
    """The user-set parameter whose value ``exc`` rejects, else None.

    hdgp estimators validate their constructor arguments in ``fit`` and name the
    argument first: their own checks (``"n_projections must be an integer >= 1, got 0."``)
    and scikit-learn's ``_parameter_constraints`` (``"The 'noise_lower_bound' parameter of
    GPRegressor must be ..."``). So a ``ValueError``/``TypeError`` that opens with ``"<name> "``
    or ``"The '<name>' parameter "`` for an overridden parameter the candidate has is taken to
    be about that value.
    """
    if not isinstance(exc, (ValueError, TypeError)):
        return None
    message = str(exc)
    return next((p for p in (params or {}) if p in accepted
                 and (message.startswith(f"{p} ") or message.startswith(f"The {p!r} parameter "))), None)


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
        The winning preset (the heaviest member of the mixture).
    comparison : list of dict
        Per candidate: ``model``, ``val_log_density`` (mean, higher is better),
        ``val_log_density_calibrated`` (the score: the same after the variance factor
        ``val_variance_ratio``) and ``val_rmse`` (classification: ``val_log_loss``, lower
        is better, and ``val_accuracy``), ``fit_seconds``, ``error`` (why a candidate
        failed, else None), ``selected`` (the heaviest member) and ``weight`` (its stacking weight in
        the mixture: 0 for a candidate left out, None for one stopped or failed).

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


def select(X, y, schema, *, params, random_state, progress, candidates, verbose=False):
    """:func:`select_model`, also returning the members of the mixture (name → its fit on the validation
    split's fitting rows, heaviest first; one name when a single candidate takes the weight)."""
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
    order = _nested_order(schema, X, y if classify else None, fit_idx, random_state)
    sizes = rung_sizes(len(fit_idx))
    cv = len(sizes) == 1 and n <= CV_MAX_ROWS
    rows = {name: {"model": name, **dict.fromkeys(keys), "fit_seconds": None, "rung_rows": None, "error": None}
            for name in candidates}
    alive, fitted, per_row, total = list(candidates), {}, {}, len(candidates)
    for r, size in enumerate(sizes):
        last = r == len(sizes) - 1
        if len(alive) == 1 and r > 0:  # a lone survivor is the choice: its last rung scored it
            progress(f"[auto] {alive[0]} is the only candidate left after rung {r} of {len(sizes)}: the "
                     "remaining rungs are skipped")
            break
        if cv:  # cheap: every training row validated once, the 80 / 20 split its first fold
            folds = [(fit_idx, val_idx)] + _more_folds(schema, X, n, fit_idx, y if classify else None, random_state)
        else:
            folds = [(fit_idx if last else _with_every_level(schema, X, order, size), val_idx)]
        tag = (f"[auto rung {r + 1}/{len(sizes)}]" if len(sizes) > 1 else
               f"[auto, {len(folds)}-fold]" if cv else "[auto]")
        scores = {}
        for i, name in enumerate(alive, 1):
            progress(f"{tag} fitting {name} ({i}/{len(alive)}) on {len(folds[0][0])} rows, validating on "
                     f"{len(folds[0][1])}" + (f", {len(folds)} times" if cv else ""))
            row = rows[name]
            try:
                est, seconds, result = _validate(name, folds, X, y, schema, params, random_state, verbose,
                                                 n_final=len(fit_idx))
                row["fit_seconds"] = (row["fit_seconds"] or 0.0) + seconds
                score, terms = result.pop("score"), result.pop("per_row")
                if not math.isfinite(score):
                    raise _NonFinite("non-finite validation score")
                row.update(result, rung_rows=len(folds[0][0]))
                fitted[name], scores[name] = est, terms
            except Exception as exc:  # a family that cannot handle this table must not stop the others
                bad = _rejected_parameter(exc, params, _parameters(name))
                if bad is not None:  # ... but a value the user chose is the user's error, not the family's
                    raise ValueError(f"-p {bad}={params[bad]!r} is not valid for candidate {name}: {exc}") from exc
                row["error"] = str(exc) if isinstance(exc, _NonFinite) else f"{type(exc).__name__}: {exc}"
                row.update(dict.fromkeys(keys), rung_rows=None)
                fitted.pop(name, None)
            progress(f"{tag} {name}: {_message(row)}")
        alive = [name for name in alive if name in scores]
        per_row = scores
        if not alive:
            break
        if not last:
            kept = survivors(scores)
            dropped = [name for name in alive if name not in kept]
            if dropped:
                progress(f"{tag} stopped {', '.join(dropped)}: outside the best {math.ceil(len(alive) / RUNG_GROWTH)} "
                         f"and worse than "
                         f"{kept[0]} beyond validation noise; {len(kept)} of {total} go on")
            alive = kept
    if not alive:
        raise RuntimeError("Every candidate model failed on this table: "
                           + "; ".join(f"{r['model']}: {r['error']}" for r in rows.values()))
    weights = stack_members({name: per_row[name] for name in alive},
                            max_members=MAX_MEMBERS if n <= CV_MAX_ROWS else MAX_MEMBERS_LARGE)
    if len(weights) > 1:
        gain, penalty = mixture_evidence({name: per_row[name] for name in alive}, weights)
        progress("[auto] stacking weights (validation log density of the mixture): "
                 + ", ".join(f"{name} {w:.3f}" for name, w in weights.items())
                 + f"; the mixture gains {gain:.4g} per row over the best candidate (needed: {penalty:.2g})")
        if gain <= penalty:
            single = max(alive, key=lambda name: float(np.mean(per_row[name])))
            progress(f"[auto] that gain is within what {len(weights) - 1} fitted weight(s) give by themselves: "
                     f"{single} alone")
            weights = {single: 1.0}
    best = next(iter(weights))  # the heaviest member
    out = list(rows.values())
    for row in out:
        row["selected"] = row["model"] == best
        row["weight"] = weights.get(row["model"], 0.0 if row["model"] in alive else None)
    return best, out, {name: fitted[name] for name in weights}


class _NonFinite(FloatingPointError):
    """A candidate's validation score is not finite."""


class _Pooled:
    """Predictions of several folds' fits, pooled in the order of their validation rows, so that
    :func:`_score` scores them as one model (one calibration factor over all the rows)."""

    def __init__(self, mean=None, std=None, proba=None, classes=None):
        self.mean, self.std, self.proba, self.classes_ = mean, std, proba, classes

    def predict(self, X, return_std=False):
        return (self.mean, self.std) if return_std else self.mean

    def predict_proba(self, X):
        return self.proba


def _same_engine(est, params, n_final: int) -> None:
    """Give a rung's candidate the inference engine its fit on all ``n_final`` fitting rows resolves
    to (``inference="auto"`` picks exact inference on a small rung, sparse or SKI on a large table):
    the screen then compares the models that the last rung fits, at their cost."""
    if "inference" in (params or {}) or "inference" not in est.get_params() or not hasattr(est, "_resolve_inference"):
        return
    if est.get_params()["inference"] == "auto":
        est.set_params(inference=est._resolve_inference(n_final))


def _validate(name, folds, X, y, schema, params, random_state, verbose=False, n_final=None):
    """Fit ``name`` on each fold's fitting rows; return the first fold's fit, the seconds and
    :func:`_score` of the pooled validation predictions."""
    classify = schema.task == "classification"
    first, seconds, parts, targets = None, 0.0, [], []
    for fit_rows, val_rows in folds:
        est = make_estimator(name, schema, params=params, random_state=random_state, strict=False, verbose=verbose)
        if n_final is not None and len(fit_rows) < n_final:
            _same_engine(est, params, n_final)
        spent, _ = timed_fit(est, schema.encode(X.iloc[fit_rows]), y[fit_rows], schema.classes if classify else ())
        seconds += spent
        X_val = schema.encode(X.iloc[val_rows])  # after make_estimator: the encoding follows the estimator
        if classify:
            parts.append(predict_proba_codes(est, X_val, len(schema.classes)))
        else:
            parts.append(est.predict(X_val, return_std=True))
        targets.append(y[val_rows])
        first = est if first is None else first
    if len(folds) == 1:
        return first, seconds, _score(first, schema.encode(X.iloc[folds[0][1]]), targets[0], schema)
    if classify:
        pooled = _Pooled(proba=np.concatenate(parts), classes=np.arange(len(schema.classes)))
    else:
        pooled = _Pooled(mean=np.concatenate([m for m, _ in parts]), std=np.concatenate([s for _, s in parts]))
    return first, seconds, _score(pooled, None, np.concatenate(targets), schema)


def _more_folds(schema, X, n, fit_idx, codes, random_state) -> list:
    """Folds 2..K of a K-fold split (K = ``round(1 / VALIDATION_FRACTION)``) that completes the first
    80 / 20 split: its fitting rows ``fit_idx``, dealt into K − 1 validation parts (by class when
    ``codes`` are given)."""
    k = round(1 / VALIDATION_FRACTION) - 1
    rng = np.random.default_rng(random_state if isinstance(random_state, (int, np.integer)) else 0)
    rest = rng.permutation(fit_idx)
    if codes is not None:  # deal each class round the parts
        rest = rest[np.argsort(codes[rest], kind="stable")]
    parts = [rest[j::k] for j in range(k)]
    out = []
    for part in parts:
        train = np.setdiff1d(np.arange(n), part)
        train, part, _ = keep_levels_in_training(schema, X, train, part)
        if len(part):
            out.append((train, part))
    return out


def _nested_order(schema, X, codes, fit_idx, random_state) -> np.ndarray:
    """``fit_idx`` in a seeded random order whose every prefix is a rung's subset; with class codes,
    interleaved so each prefix keeps the classes' shares (stratified nested subsets)."""
    rng = np.random.default_rng(random_state if isinstance(random_state, (int, np.integer)) else 0)
    order = rng.permutation(fit_idx)
    if codes is None:
        return order
    position = np.empty(len(order))
    for k in np.unique(codes[order]):
        members = np.flatnonzero(codes[order] == k)
        position[members] = (np.arange(len(members)) + 0.5) / len(members)
    return order[np.argsort(position, kind="stable")]


def _with_every_level(schema, X, order, size) -> np.ndarray:
    """The first ``size`` rows of ``order`` plus, for a categorical level they miss, its first row in
    ``order`` (a rung's model has to know every level the validation rows hold)."""
    head = list(order[:size])
    for c in schema.features:
        if schema.kinds[c] == "categorical":
            values = X[c].iloc[order].to_numpy()
            seen = set(values[:size])
            for j in range(size, len(order)):
                if values[j] not in seen:
                    seen.add(values[j])
                    head.append(order[j])
    return np.asarray(list(dict.fromkeys(head)))
