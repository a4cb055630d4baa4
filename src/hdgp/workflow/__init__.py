"""The user workflow: fit a model to your own table, predict, explain, summarise.

- :func:`fit_table` → :class:`TabularModel` (also ``hdgp fit``)
- :meth:`TabularModel.predict` (``hdgp predict``), :func:`write_report` (``hdgp explain``)
- :func:`summarize` / :func:`learned_quantities` for any fitted estimator
- classification targets: :func:`classification_metrics`, :func:`classifier_candidates`
"""

from .classification import classification_metrics, classifier_candidates
from .fitting import evaluate, fit_table, make_estimator
from .select import candidate_models, select_model
from .summary import learned_quantities, summarize
from .tabular import TabularModel, predict_frame

__all__ = ["TabularModel", "candidate_models", "classification_metrics", "classifier_candidates", "evaluate",
           "fit_table", "learned_quantities", "make_estimator", "predict_frame", "select_model", "summarize"]
