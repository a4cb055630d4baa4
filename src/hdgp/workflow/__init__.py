"""The user workflow: fit a model to your own table, predict, explain, summarise.

- :func:`fit_table` → :class:`TabularModel` (also ``hdgp fit``)
- :meth:`TabularModel.predict` (``hdgp predict``), :func:`write_report` (``hdgp explain``)
- :func:`summarize` / :func:`learned_quantities` for any fitted estimator
- classification targets: :func:`classification_metrics`, :func:`classifier_candidates`

The names load on first use (module ``__getattr__``), so that ``hdgp.workflow.cli`` can show
``hdgp predict --help`` without importing torch or scikit-learn.
"""

from __future__ import annotations

import importlib

#: Public name → the submodule that defines it (each imports torch / scikit-learn through the estimators).
_LAZY = {
    "classification_metrics": "classification", "classifier_candidates": "classification",
    "evaluate": "fitting", "fit_table": "fitting", "make_estimator": "fitting",
    "candidate_models": "select", "select_model": "select",
    "learned_quantities": "summary", "summarize": "summary",
    "TabularModel": "tabular", "predict_frame": "tabular",
}

__all__ = ["TabularModel", "candidate_models", "classification_metrics", "classifier_candidates", "evaluate",
           "fit_table", "learned_quantities", "make_estimator", "predict_frame", "select_model", "summarize"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
