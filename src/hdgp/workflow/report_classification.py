"""Classifier parts of the ``hdgp explain`` report: accuracy/calibration table, reliability diagram, confusions.

Used by :mod:`hdgp.workflow.report` when ``tm.task == "classification"``.
"""

from __future__ import annotations

import numpy as np

from .classification import reliability_bins

__all__ = ["reliability_figure", "accuracy_section", "confusion_counts", "majority_class_rate"]


def reliability_figure(codes, proba, plt):
    """Reliability diagram (accuracy vs confidence per bin) and the histogram of confidences."""
    bins = reliability_bins(codes, proba)
    confidence = np.asarray(proba).max(axis=1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot([0, 1], [0, 1], "k:", label="perfect calibration")
    a.plot([r["confidence"] for r in bins], [r["accuracy"] for r in bins], "o-", label="held-out rows")
    for r in bins:
        a.annotate(str(r["count"]), (r["confidence"], r["accuracy"]), textcoords="offset points", xytext=(4, -10),
                   fontsize=7)
    a.set_xlim(0, 1.02)
    a.set_ylim(0, 1.02)
    a.set_xlabel("confidence (probability of the predicted class)")
    a.set_ylabel("fraction predicted correctly")
    a.set_title("Reliability diagram (rows per bin annotated)")
    a.legend(loc="upper left")
    b.hist(confidence, bins=np.linspace(0, 1, 11), color="tab:blue", alpha=0.7)
    b.set_xlabel("confidence")
    b.set_ylabel("held-out rows")
    b.set_title("How sure the model is")
    fig.tight_layout()
    return fig


def confusion_counts(codes, proba, n_classes: int) -> np.ndarray:
    """``C[i, j]``: held-out rows of class ``i`` predicted as class ``j``."""
    out = np.zeros((n_classes, n_classes), dtype=int)
    np.add.at(out, (np.asarray(codes, dtype=np.int64), np.asarray(proba).argmax(axis=1)), 1)
    return out


def majority_class_rate(tm) -> float | None:
    """Held-out accuracy of always predicting the training rows' most frequent class (:func:`_majority`)."""
    majority = _majority(tm)
    return None if majority is None else majority[1]


def _majority(tm) -> tuple | None:
    """The training rows' most frequent class code and the share of held-out rows in it.

    The class counts of all rows less those of the held-out rows give the training counts; ties go to the
    first class. None without held-out rows or when the rows were not split into training and held-out
    rows only. An accuracy not above this rate means the features have not helped.
    """
    data, holdout = tm.metadata.get("data") or {}, tm.metadata.get("holdout")
    counts = (data.get("target") or {}).get("counts")
    if holdout is None or not len(holdout["y"]) or counts is None:
        return None
    y = np.asarray(holdout["y"], dtype=np.int64)
    if data.get("n_rows") != data.get("n_train", 0) + len(y):
        return None
    code = int(np.argmax(np.asarray(counts) - np.bincount(y, minlength=len(counts))))
    return code, float(np.mean(y == code))


def accuracy_section(tm, images: dict, table, fmt, escape) -> list[str]:
    """HTML of the held-out accuracy and calibration section of a classifier.

    ``table``, ``fmt`` and ``escape`` are the report's HTML helpers.
    """
    metrics, holdout = tm.metadata.get("metrics"), tm.metadata.get("holdout")
    if not metrics:
        return ["<p class='note'>No rows were held out (test size 0), so accuracy and calibration could not be "
                "measured. Refit with --test-size 0.2.</p>"]
    auc = ("chance that a random held-out row of class {1} gets a higher probability of {1} than one of class "
           "{0}; 0.5 = guessing".format(*tm.schema.classes) if len(tm.schema.classes) == 2 else "two classes only")
    rows = [["accuracy", fmt(metrics["accuracy"]), "share of rows whose most probable class is right"]]
    majority = _majority(tm)
    if majority is not None:
        rows.append(["majority-class rate", fmt(majority[1]),
                     f"always predicting {tm.schema.classes[majority[0]]} (the commonest training class); "
                     "the accuracy to beat"])
    rows += [["balanced accuracy", fmt(metrics["balanced_accuracy"]), "mean of the per-class accuracies"],
             ["log-loss", fmt(metrics["log_loss"]),
              "minus the mean log probability of the true class; lower is better"],
             ["Brier score", fmt(metrics["brier"]), "mean squared error of the probabilities; lower is better"],
             ["ROC AUC", fmt(metrics["roc_auc"]), auc],
             ["expected calibration error", fmt(metrics["ece"]),
              "mean gap between confidence and accuracy over 10 bins; 0 = calibrated"]]
    parts = [table(["metric", "value", "meaning"], rows, "calibration", left=1)]
    parts.append(f"<figure class='reliability'><img alt='reliability diagram' src='{images['reliability.png']}'>"
                 "<figcaption>Held-out rows binned by the probability of the predicted class: a calibrated model "
                 "lies on the diagonal.</figcaption></figure>")
    classes = [str(c) for c in tm.schema.classes]
    counts = confusion_counts(holdout["y"], holdout["proba"], len(classes))
    rows = [[f"true {c}"] + [str(v) for v in counts[i]] for i, c in enumerate(classes)]
    parts.append("<p>Confusion counts (held-out rows):</p>")
    parts.append(table([""] + [f"predicted {c}" for c in classes], rows, "confusion", left=1))
    return parts
