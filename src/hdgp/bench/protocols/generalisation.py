"""The generalisation protocol: every family's default preset on tables nobody tuned for.

Issue #41: the paper tables are the data sets every default was tuned on. This protocol
runs each family's default preset on every shared UCI set with up to ~8,000 training
rows and on the tables bundled with scikit-learn, beside scikit-learn's
histogram gradient boosting (the peer a practitioner would otherwise use). Its report
ranks the families per data set (see :mod:`hdgp.bench.ranking`).
"""

from __future__ import annotations

from ._common import _UCI_SMALL_TO_GAS
from ._specs import DatasetSpec, ModelSpec, Protocol

#: Shared UCI sets with at most ~8,000 training rows (pumadyn32nm: 7,373), smallest first.
UCI_SETS = _UCI_SMALL_TO_GAS + ("pumadyn32nm",)
#: scikit-learn's bundled regression table (through :func:`hdgp.data.load`).
SKLEARN_REGRESSION = ("diabetes",)
#: scikit-learn's bundled classification tables (``sklearn.datasets.load_<name>``).
SKLEARN_CLASSIFICATION = ("breast_cancer", "wine", "iris")
#: The regression families' default presets.
REGRESSION_FAMILIES = ("OAK", "Additive", "GAM", "RBF-ARD", "DPA-GP-ARD", "SIGP")
#: The classifier presets.
CLASSIFICATION_FAMILIES = ("OAK-classifier", "GP-classifier", "SIGP-classifier", "Additive-classifier")
#: Labels of the peers (scikit-learn's defaults; random_state is the task's seed).
PEER_REGRESSOR, PEER_CLASSIFIER = "HGB", "HGB-classifier"
#: Labels of ``hdgp fit --model auto`` (:class:`hdgp.bench.peers.AutoTableModel`).
AUTO_REGRESSOR, AUTO_CLASSIFIER = "auto", "auto-classifier"

GENERALISATION = Protocol(
    name="generalisation",
    description=("Every family's default preset on every shared UCI set up to ~8,000 training rows and the tables "
                 "bundled with scikit-learn, beside scikit-learn's HistGradientBoosting (issue #41)."),
    datasets=(*(DatasetSpec(n) for n in UCI_SETS + SKLEARN_REGRESSION),
              *(DatasetSpec(n, source="sklearn", task="classification") for n in SKLEARN_CLASSIFICATION)),
    models=(*(ModelSpec(n, n) for n in REGRESSION_FAMILIES),
            ModelSpec(PEER_REGRESSOR, "HistGradientBoostingRegressor", source="peer"),
            ModelSpec(AUTO_REGRESSOR, "hdgp-auto-regressor", source="peer"),
            *(ModelSpec(n, n, task="classification") for n in CLASSIFICATION_FAMILIES),
            ModelSpec(PEER_CLASSIFIER, "HistGradientBoostingClassifier", task="classification", source="peer"),
            ModelSpec(AUTO_CLASSIFIER, "hdgp-auto-classifier", task="classification", source="peer")),
    splits=(0, 1, 2),
    metrics=("rmse", "nlpd", "coverage95", "log_loss", "auc", "accuracy", "ece"),
    normalisation="zscore",
    notes=("Library defaults, seed 0, the first 3 fixed splits of each UCI set (~90/10); diabetes and the "
           "scikit-learn classification tables use 3 seeded random 90/10 splits. Inputs and the regression "
           "target are z-scored with training statistics, so RMSE and NLPD are on the standardised target "
           "(an RMSE of 1 is the training mean's). HGB is scikit-learn's HistGradientBoostingRegressor / "
           "Classifier with default settings: it has no predictive standard deviation, so its NLPD and coverage "
           "are left empty. Classification: log-loss, AUC (one-vs-rest macro average with more than two "
           "classes), accuracy and the expected calibration error of the top class (10 equal bins). digits "
           "(1,797 x 64, 10 classes) is bundled too but left out for cost (the classifier presets took 6-80 s "
           "per fit on wine's 160 x 13). "
           "auto / auto-classifier is `hdgp fit --model auto` (hdgp.workflow.fit_table with test_size=0: the "
           "workflow's own validation split chooses the preset, which is refitted on all training rows; the "
           "inputs reach it already z-scored, as columns x0, x1, ...)."),
    plots=("rmse", "ranking"),
)

#: This module's protocols.
PROTOCOLS = (GENERALISATION,)
