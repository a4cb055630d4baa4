"""Classification in the user workflow: which presets fit a class target, and held-out metrics.

The estimators see integer class codes ``0..K-1``; :class:`~hdgp.io.TableSchema`
keeps the table's labels (``schema.classes``) and maps them back on output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from ..io.table import TableError, _level_label

__all__ = ["CLASSIFIERS", "CLASSIFIER_ALIASES", "classifier_candidates", "classifier_for", "classification_metrics",
           "evaluate_classifier", "predict_proba_codes", "proba_frame", "reliability_bins", "N_RELIABILITY_BINS"]

#: Classifier presets usable by ``hdgp fit``; each handles any number of classes (OAK-classifier
#: beyond two with one latent function per class against the rest, each explained by the report).
CLASSIFIERS = ("OAK-classifier", "GP-classifier", "SIGP-classifier", "Additive-classifier")
#: Regression preset names that mean a classifier on a classification target.
CLASSIFIER_ALIASES = {"OAK": "OAK-classifier", "RBF-ARD": "GP-classifier", "SIGP": "SIGP-classifier",
                      "Additive": "Additive-classifier"}
#: Equal-width confidence bins of the reliability summary.
N_RELIABILITY_BINS = 10
_EPS = 1e-15  # probabilities are clipped to [eps, 1] inside the log-loss


def _valid_list() -> str:
    alias = {v: k.lower() for k, v in CLASSIFIER_ALIASES.items()}
    return ", ".join(f"{c.lower()} (or {alias[c]})" if c in alias else c.lower() for c in CLASSIFIERS)


def classifier_for(name: str, *, is_classifier: bool) -> str:
    """The classifier preset to fit for the preset ``name`` on a classification target.

    ``oak``, ``rbf-ard``, ``sigp`` and ``additive`` mean their classifier counterparts; classifier
    presets stand for themselves.

    Raises
    ------
    ValueError
        ``name`` is a regression-only model; the message lists the valid models.
    """
    chosen = name if is_classifier else CLASSIFIER_ALIASES.get(name)
    if chosen is None:
        raise ValueError(f"Model {name} fits regression only, but this is a classification target. Use --model auto "
                         f"or one of: {_valid_list()}; or --task regression to fit the target as numbers.")
    return chosen


def classifier_candidates(n: int, n_classes: int) -> list[str]:
    """Presets tried by ``--model auto`` on a classification target with ``n`` training rows.

    OAK-classifier while :math:`n` times its number of latent functions (1 for two classes, one
    per class beyond) is at most 3000; GP-classifier always; SIGP-classifier up to 20000 rows
    (beyond, GP-classifier alone: SVGP in minibatches).
    """
    latent_functions = 1 if n_classes <= 2 else n_classes
    names = ["OAK-classifier"] if n * latent_functions <= 3000 else []
    return names + ["GP-classifier"] + (["SIGP-classifier"] if n <= 20000 else [])


def predict_proba_codes(est, X, n_classes: int) -> np.ndarray:
    """``(n, n_classes)`` probabilities by class code (a class missing from the fit gets 0)."""
    proba = np.asarray(est.predict_proba(X), dtype=np.float64)
    out = np.zeros((proba.shape[0], n_classes))
    out[:, np.asarray(est.classes_, dtype=np.int64)] = proba
    if not np.all(np.isfinite(out)):
        raise FloatingPointError("The model produced non-finite probabilities; refit it (see `hdgp fit --help`).")
    return out


def _roc_auc(positive: np.ndarray, score: np.ndarray) -> float | None:
    """Area under the ROC curve (Mann–Whitney U with mid-ranks for ties); None with one class."""
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def reliability_bins(codes, proba, n_bins: int = N_RELIABILITY_BINS) -> list[dict]:
    """Top-label reliability table: per confidence bin, the rows, mean confidence and accuracy.

    The confidence of a row is its largest class probability; a well calibrated
    model is right in a fraction ``confidence`` of the rows of each bin.

    Returns
    -------
    list of dict
        One per non-empty bin: ``lower``, ``upper``, ``count``, ``confidence``, ``accuracy``.
    """
    codes, proba = np.asarray(codes, dtype=np.int64), np.asarray(proba, dtype=np.float64)
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == codes
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    return [{"lower": float(edges[b]), "upper": float(edges[b + 1]), "count": int((which == b).sum()),
             "confidence": float(confidence[which == b].mean()), "accuracy": float(correct[which == b].mean())}
            for b in range(n_bins) if np.any(which == b)]


def classification_metrics(codes, proba) -> dict:
    r"""Held-out accuracy, balanced accuracy, log-loss, Brier score, ROC AUC and calibration error.

    Parameters
    ----------
    codes : array-like of int, shape (n,)
        True class codes.
    proba : array-like, shape (n, K)
        Predicted class probabilities (rows sum to one).

    Returns
    -------
    dict
        ``accuracy``; ``balanced_accuracy`` (mean recall over the classes present);
        ``log_loss`` :math:`-\frac1n\sum_i \log p_{i,y_i}` (probabilities clipped at 1e-15);
        ``brier``: :math:`\frac1n\sum_i (p_{i,1} - [y_i = 1])^2` for two classes, else
        :math:`\frac1n\sum_i\sum_k (p_{ik} - [y_i = k])^2`; ``roc_auc`` of class 1 vs 0
        (two classes with both present, else None); ``ece``, the expected calibration
        error :math:`\sum_b \frac{n_b}{n}|\mathrm{acc}_b - \mathrm{conf}_b|` over
        :func:`reliability_bins`.

    Examples
    --------
    >>> m = classification_metrics([0, 1, 1], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    >>> round(m["accuracy"], 3), m["roc_auc"]
    (0.667, 1.0)
    """
    codes, proba = np.asarray(codes, dtype=np.int64), np.asarray(proba, dtype=np.float64)
    n, k = proba.shape
    predicted = proba.argmax(axis=1)
    onehot = np.eye(k)[codes]
    recalls = [float(np.mean(predicted[codes == c] == c)) for c in np.unique(codes)]
    brier = np.mean((proba[:, 1] - onehot[:, 1]) ** 2) if k == 2 else np.mean(np.sum((proba - onehot) ** 2, axis=1))
    bins = reliability_bins(codes, proba)
    return {
        "accuracy": float(np.mean(predicted == codes)),
        "balanced_accuracy": float(np.mean(recalls)),
        "log_loss": float(-np.mean(np.log(np.clip(proba[np.arange(n), codes], _EPS, 1.0)))),
        "brier": float(brier),
        "roc_auc": _roc_auc(codes == 1, proba[:, 1]) if k == 2 else None,
        "ece": float(sum(b["count"] * abs(b["accuracy"] - b["confidence"]) for b in bins) / n),
    }


def evaluate_classifier(est, X, codes, n_classes: int) -> tuple[dict, np.ndarray]:
    """Held-out :func:`classification_metrics` of a fitted classifier and its probabilities."""
    proba = predict_proba_codes(est, X, n_classes)
    return classification_metrics(codes, proba), proba


def proba_frame(schema, proba: np.ndarray, index=None) -> pd.DataFrame:
    """Predicted label and one ``proba_<label>`` column per class, labels as in the training table."""
    label, *columns = proba_columns(schema)
    out = pd.DataFrame({label: schema.class_labels(np.argmax(proba, axis=1))}, index=index)
    for k, column in enumerate(columns):
        out[column] = proba[:, k]
    return out


def proba_columns(schema) -> list[str]:
    """The columns of :func:`proba_frame`: ``label`` and ``proba_<label>`` per class."""
    if not schema.classes:
        raise TableError("This model was not fitted to a classification target.")
    return ["label", *(f"proba_{_level_label(label)}" for label in schema.classes)]
