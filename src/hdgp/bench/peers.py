"""Peer estimators: the models of other libraries a practitioner would otherwise use.

A :class:`~hdgp.bench.protocols.ModelSpec` with ``source="peer"`` names one of
:data:`PEERS` instead of an hdgp preset. The runner builds, seeds (``random_state``),
fits and scores it through the same scikit-learn interface as a preset, and the store
records it like any task. A peer regressor without a predictive standard deviation
(``predict(X, return_std=True)`` unsupported) gets no NLPD or interval coverage.
"""

from __future__ import annotations

import difflib

__all__ = ["PEERS", "make_peer", "peer_names"]


def _hist_gradient_boosting_regressor(**params):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(**params)


def _hist_gradient_boosting_classifier(**params):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(**params)


#: Peer name -> (constructor taking the estimator's keyword arguments, task it solves).
PEERS = {
    "HistGradientBoostingRegressor": (_hist_gradient_boosting_regressor, "regression"),
    "HistGradientBoostingClassifier": (_hist_gradient_boosting_classifier, "classification"),
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
