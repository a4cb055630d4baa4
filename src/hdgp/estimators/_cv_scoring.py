"""``scoring`` of SIGP's cross-validation: scikit-learn scorers on held-out latent means.

:func:`hdgp.sigp.cv.cross_validate` scores a candidate by ``score(Y_val, mean_val)`` on the
standardised target (regression) or the ±1 class codes (classification). With
``scoring=None`` that score is minus the mean squared error. Any other ``scoring`` is what
scikit-learn's ``GridSearchCV`` accepts: a scorer name (``"r2"``, ``"accuracy"``,
``"roc_auc"``, ...) or a callable ``scorer(estimator, X, y)``. A scorer needs an
estimator to call, so each fold's predictions are wrapped in a frozen one
(:class:`_HeldOutRegressor`, :class:`_HeldOutClassifier`) whose ``predict`` and
``decision_function`` return them, in the target's units and with the original class
labels; the ``X`` a scorer gets is a placeholder with one row per held-out sample and no
columns. Every candidate's fold model is fitted once whatever the scorer: the scorer only
reads its predictions.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.metrics import check_scoring

__all__ = ["held_out_score"]

Score = Callable[[torch.Tensor, torch.Tensor], float]


def _neg_mse(Y_true: torch.Tensor, mean: torch.Tensor) -> float:
    """Minus the mean squared error (standardised targets or ±1 codes)."""
    return -float(((Y_true - mean) ** 2).mean())


class _HeldOut(BaseEstimator):
    """Predictions of one fold, frozen; ``X`` only fixes how many rows are asked for."""

    def __init__(self, values: np.ndarray):
        self.values = values

    def _rows(self, X) -> np.ndarray:
        if len(X) != len(self.values):
            raise ValueError(f"held-out predictions are for {len(self.values)} rows; got {len(X)}.")
        return self.values


class _HeldOutRegressor(RegressorMixin, _HeldOut):
    def predict(self, X):
        return self._rows(X)


class _HeldOutClassifier(ClassifierMixin, _HeldOut):
    """Latent scores (t,) for two classes, (t, K) otherwise; ``predict`` is their sign / arg-max."""

    def __init__(self, values: np.ndarray, classes: np.ndarray):
        super().__init__(values)
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    def decision_function(self, X):
        return self._rows(X)

    def predict(self, X):
        s = self._rows(X)
        return self.classes[(s > 0).astype(int) if s.ndim == 1 else s.argmax(1)]


def held_out_score(scoring, estimator, *, y_mean: float = 0.0, y_scale: float = 1.0,
                   classes: np.ndarray | None = None) -> Score:
    """The ``score(Y_val, mean_val)`` of :func:`~hdgp.sigp.cv.cross_validate` for ``scoring``.

    Parameters
    ----------
    scoring : None, str or callable
        None: minus the mean squared error of the standardised target or ±1 codes.
        Otherwise a scikit-learn scorer name or ``scorer(estimator, X, y)``, higher is better.
    estimator : BaseEstimator
        The estimator being fitted (for validating ``scoring`` against its kind).
    y_mean, y_scale : float
        Regression: the held-out target and means are ``Y * y_scale + y_mean``.
    classes : ndarray or None
        Classification: the estimator's ``classes_``, one ±1 code column each (two classes: one
        column, +1 for ``classes[1]``).

    Raises
    ------
    ValueError
        For a scorer name scikit-learn does not know; when scoring, for a scorer that needs
        ``predict_proba`` (the probabilities' link is fitted after cross-validation), fails on
        the held-out predictions (e.g. a classification metric of a regressor) or returns a
        value that is not a finite number.
    """
    if scoring is None:
        return _neg_mse
    try:
        scorer = check_scoring(estimator, scoring=scoring)
    except ValueError as exc:
        raise ValueError(f"scoring={scoring!r} is not a scikit-learn scorer: give None, a name from "
                         "sklearn.metrics.get_scorer_names() or a callable scorer(estimator, X, y).") from exc

    def score(Y_val: torch.Tensor, mean: torch.Tensor) -> float:
        Y_val, mean = Y_val.numpy(), mean.numpy()
        if classes is None:
            truth = Y_val[:, 0] * y_scale + y_mean
            held_out = _HeldOutRegressor(mean[:, 0] * y_scale + y_mean)
        else:
            binary = Y_val.shape[1] == 1
            truth = classes[(Y_val[:, 0] > 0).astype(int) if binary else Y_val.argmax(1)]
            held_out = _HeldOutClassifier(mean[:, 0] if binary else mean, classes)
        try:
            value = float(scorer(held_out, np.empty((len(truth), 0)), truth))
        except AttributeError as exc:
            if "predict_proba" not in str(exc):
                raise
            raise ValueError(
                f"scoring={scoring!r} needs predicted probabilities, which SIGP's cross-validation does "
                "not have (its probability link is fitted after the hyper-parameters are chosen); use a "
                "scorer of decisions or latent scores, e.g. 'accuracy', 'f1', 'roc_auc' (two classes) "
                "or 'balanced_accuracy'."
            ) from exc
        except (ValueError, TypeError) as exc:
            raise ValueError(f"scoring={scoring!r} failed on the held-out predictions of a cross-validation "
                             f"fold of {type(estimator).__name__}: {exc}") from exc
        if not np.isfinite(value):
            raise ValueError(f"scoring={scoring!r} gave {value} on a cross-validation fold; the score must "
                             "be a finite number (higher is better).")
        return value

    return score
