"""Peer estimators: the models of other libraries a practitioner would otherwise use.

A :class:`~hdgp.bench.protocols.ModelSpec` with ``source="peer"`` names one of
:data:`PEERS` instead of an hdgp preset. The runner builds, seeds (``random_state``),
fits and scores it through the same scikit-learn interface as a preset, and the store
records it like any task. A peer regressor without a predictive standard deviation
(``predict(X, return_std=True)`` unsupported) gets no NLPD or interval coverage.
"""

from __future__ import annotations

import difflib

import numpy as np
import pandas as pd

from .. import workflow

__all__ = ["PEERS", "AutoTableModel", "make_peer", "peer_names"]


def _hist_gradient_boosting_regressor(**params):
    # deferred: sklearn.ensemble is slow to import and only this peer needs it; `hdgp bench` starts without it
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(**params)


def _hist_gradient_boosting_classifier(**params):
    # deferred: sklearn.ensemble is slow to import and only this peer needs it; `hdgp bench` starts without it
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(**params)


class AutoTableModel:
    """``hdgp fit --model auto`` as an estimator: :func:`hdgp.workflow.fit_table` with ``model="auto"``.

    ``fit(X, y)`` puts ``X`` (columns ``x0, x1, ...``) and ``y`` into a table and lets the
    workflow choose and fit the model as the CLI does (candidates scored on its own validation
    split, the winner refitted on every given row: ``test_size=0``). ``predict`` gives the
    table model's mean (and ``std`` with ``return_std=True``, in the target's units);
    ``predict_proba`` its class probabilities in the order of ``classes_``.

    Parameters
    ----------
    task : {"regression", "classification"}
    random_state : int, default=0
    """

    _TARGET = "target"

    def __init__(self, task: str = "regression", random_state: int = 0):
        self.task = task
        self.random_state = random_state

    def get_params(self, deep: bool = True) -> dict:
        return {"task": self.task, "random_state": self.random_state}

    def set_params(self, **params):
        for key, value in params.items():
            if key not in self.get_params():
                raise ValueError(f"AutoTableModel has no parameter {key!r}; valid: task, random_state.")
            setattr(self, key, value)
        return self

    def _frame(self, X):
        X = np.asarray(X, float)
        return pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])

    def fit(self, X, y):
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {self.task!r}.")
        frame = self._frame(X)
        y = np.asarray(y).ravel()
        frame[self._TARGET] = y
        self.model_ = workflow.fit_table(frame, self._TARGET, task=self.task, model="auto", test_size=0.0,
                                         random_state=self.random_state)
        self.chosen_ = str(self.model_.metadata.get("model", type(self.model_.estimator).__name__))
        if self.task == "classification":
            self.classes_ = np.unique(y)
        return self

    def predict(self, X, return_std: bool = False):
        if self.task == "classification":
            if return_std:
                raise TypeError("a classifier has no predictive standard deviation")
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        out = self.model_.predict(self._frame(X))
        mean = out["mean"].to_numpy()
        return (mean, out["std"].to_numpy()) if return_std else mean

    def predict_proba(self, X):
        out = self.model_.predict_proba(self._frame(X))
        by_label = {str(c): f"proba_{c}" for c in self.model_.schema.classes}
        columns = []
        for c in self.classes_:  # the table's labels as text: match 1.0 with "1.0" or "1"
            key = next((k for k in (str(c), str(int(c)) if float(c).is_integer() else None) if k in by_label), None)
            if key is None:
                raise ValueError(f"class {c!r} not among the table model's {list(by_label)}")
            columns.append(by_label[key])
        return np.asarray(out[columns].to_numpy(), float)


#: Peer name -> (constructor taking the estimator's keyword arguments, task it solves).
PEERS = {
    "HistGradientBoostingRegressor": (_hist_gradient_boosting_regressor, "regression"),
    "HistGradientBoostingClassifier": (_hist_gradient_boosting_classifier, "classification"),
    "hdgp-auto-regressor": (lambda **p: AutoTableModel(task="regression", **p), "regression"),
    "hdgp-auto-classifier": (lambda **p: AutoTableModel(task="classification", **p), "classification"),
}


def peer_names() -> list[str]:
    """Names of the registered peer estimators."""
    return list(PEERS)


def make_peer(name: str, **params):
    """A new, unfitted peer estimator ``name`` with ``params``.

    Raises
    ------
    ValueError
        ``name`` is not a registered peer (the message lists them), or ``params`` names a
        parameter the estimator lacks.
    """
    if name not in PEERS:
        close = difflib.get_close_matches(name, list(PEERS), n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown peer estimator {name!r}.{hint} Registered peers: {', '.join(PEERS)}.")
    try:
        return PEERS[name][0](**params)
    except TypeError as exc:
        raise ValueError(f"Peer estimator {name!r}: {exc}") from None
