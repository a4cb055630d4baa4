"""Protocols of Lu, Boukouvalas & Hensman (2022), "Additive Gaussian processes revisited" (OAK):
Table 5/6 on the shared splits and on the paper's own splits, and Fig. 3."""

from __future__ import annotations

from ._common import _models
from ._specs import DatasetSpec, ModelSpec, Protocol, ReferenceSpec

#: The paper's yacht is the raw UCI file (Bayesian-benchmarks' ``Yacht``); the shared one is log-scaled.
_OAK_DATASETS = {"boston": "housing", "keggdirect": "keggdirected", "tamielectr": "tamielectric",
                 "yacht": "yacht-raw"}
#: The paper's OAK row is compared with both the single-start fit and the multi-start one.
_OAK_VARIANTS = {"OAK": ["OAK", "OAK-5-starts", "OAK-authors", "OAK-SGPR", "OAK-flow-auto"]}


def _oak_references(**aliases) -> tuple:
    """The OAK paper's Table 5 (test RMSE) and Table 6 (test log-likelihood, compared as NLPD), 10 runs each."""
    return tuple(ReferenceSpec(file, metric, value_column="mean", spread_column="std", spread="std", n_repeats=10,
                               sign=sign, **aliases)
                 for file, metric, sign in (("oak_table5_regression_rmse.csv", "rmse", 1),
                                            ("oak_table6_regression_loglik.csv", "nlpd", -1)))


#: The paper's recipe for N >= 1000 (appendix H: SGPR) on gas (D = 128), see the notes of oak-table5.
_OAK_SGPR_GAS = ModelSpec("OAK-SGPR", "OAK", {"max_order": 3, "inference": "sparse", "n_inducing": 200},
                          datasets=("gas",))

TABLE5 = Protocol(
    name="oak-table5",
    description="Lu, Boukouvalas & Hensman (2022), Tables 5-6: test RMSE and log-likelihood (regression subset).",
    datasets=(*(DatasetSpec(n) for n in ("housing", "energy", "yacht")),
              DatasetSpec("yacht-raw", loader_name="yacht", target_transform="exp"),
              *(DatasetSpec(n) for n in ("servo", "machine", "fertility", "stock", "forest", "airfoil", "gas",
                                         "elevators", "kin40k", "protein", "keggdirected", "autompg",
                                         "concrete"))),
    models=(*_models("OAK", "Linear"), ModelSpec("OAK-shifted-log", "OAK", {"log_transform": "shifted"}),
            ModelSpec("OAK-5-starts", "OAK", {"n_restarts": 4}),
            ModelSpec("OAK-authors", "OAK", {"log_transform": "shifted", "clip_inputs": True}), *_models("RBF-ARD"),
            ModelSpec("OAK-flow-auto", "OAK", {"flow": "auto"}),
            _OAK_SGPR_GAS),
    metrics=("rmse", "nlpd"),
    normalisation="y-only",
    references=_oak_references(dataset_aliases=_OAK_DATASETS, model_aliases=_OAK_VARIANTS),
    notes=("The paper used its own 10 random 90/10 splits (rebuilt in oak-table5-paper-splits); here the shared "
           "fixed UCI splits (also ~90/10). "
           "The paper's test log-likelihood is shown as NLPD (sign flipped). Data sets of Tables 5-6 that are "
           "not in the shared data (bike, naval, parkinsons, pendulum, pol, power, tamielectric, wine*) are "
           "left out; the other baselines (SVGP, SVM, KNN, GBM, AdaBoost, MLP) have no counterpart here. "
           "The paper's data came through the Bayesian benchmarks loaders (raw UCI files for some sets, e.g. "
           "Boston, Energy and Yacht, inputs and target standardised with full-data statistics before "
           "splitting); the shared files hold the same rows (housing's and energy's in another order, their "
           "targets shifted by a constant, which our training-statistics z-scoring removes; the paper's Boston "
           "inputs were misparsed, see oak-table5-paper-splits). yacht differs: the shared yacht is "
           "Wilson's, whose "
           "target is log(resistance) minus its mean, a different and for a linear model much easier problem "
           "(Linear: 0.16 here vs the paper's 0.61). yacht-raw exponentiates it back, which gives the raw "
           "target up to a constant factor that the z-scoring removes, and is the row compared with the "
           "paper's yacht; the log-target yacht row has no paper counterpart. "
           "OAK-SGPR is the paper's recipe for N >= 1000 (appendix H: SGPR) on gas (D = 128): interaction "
           "order truncated at 3 (Fig. 4: orders <= 3 carry the variance) and 200 inducing points (the "
           "paper's M for its classification sets; it gives none for regression). The OAK rows of elevators, "
           "kin40k and protein (more than 5,000 training rows) are sparse by the estimator's default: SGPR with "
           "512 inducing points and interactions up to min(d, 10). "
           "As in the authors' code, inputs reach the models unscaled (OAK warps them with its flow; the "
           "target is z-scored). OAK-shifted-log is OAK with the authors' pre-flow map log(x - min + 1) "
           "on every continuous feature. OAK-authors adds the other step of the authors' UCI script: test "
           "inputs clipped to the training range (clip_inputs=True) before the flow; it differs from their "
           "recipe only in the interaction depth (min(d, 10) instead of d, which matters for housing's 13 "
           "features only, whose orders above 3 carry no Sobol mass). OAK-5-starts keeps the best marginal "
           "likelihood of the default start and four perturbed ones (n_restarts=4): on some splits (yacht) the default start ends in a "
           "worse local optimum. OAK-flow-auto warps only skewed or heavy-tailed features (flow='auto'): "
           "light-tailed, roughly symmetric ones are standardised only. "
           "The paper fitted sets of N >= 1000 training rows with SGPR (appendix H), so "
           "its airfoil (1,353 rows) is sparse where ours is exact; and it used the empirical measure without "
           "a flow on concrete (Sec. 5.1), where ours keeps the default flow. "
           "RBF-ARD (exact GP, inputs standardised by the estimator) is a "
           "same-split GP baseline: the paper's splits differ from these, and the RBF-ARD row shows how hard "
           "these splits are beside the paper's SVGP row. The protocol oak-table5-paper-splits runs the "
           "sets that can be rebuilt on the paper's own splits."),
    plots=("rmse", "sobol-by-order", "cumulative-sobol"),
    extras=("truncation-curve",),
)

#: Sets of Table 5 with at most 1,000 training rows on the paper's splits (cheap enough for per-feature starts).
_OAK_SMALL_PAPER_SETS = ("boston", "energy", "servo", "machine", "fertility", "stock", "forest")
TABLE5_PAPER_SPLITS = Protocol(
    name="oak-table5-paper-splits",
    description="Lu, Boukouvalas & Hensman (2022), Tables 5-6 on the paper's own splits (Bayesian benchmarks).",
    datasets=tuple(DatasetSpec(n, source="bayesian-benchmarks")
                   for n in ("boston", "energy", "servo", "machine", "fertility", "stock", "forest", "airfoil",
                             "gas", "elevators", "kin40k")),
    models=(*_models("OAK", "Linear", "RBF-ARD"),
            ModelSpec("OAK-feature-starts", "OAK", {"feature_starts": True}, datasets=_OAK_SMALL_PAPER_SETS),
            ModelSpec("OAK-low-noise", "OAK", {"low_noise_start": True}, datasets=(*_OAK_SMALL_PAPER_SETS, "airfoil")),
            ModelSpec("OAK-low-noise-1e-6", "OAK", {"low_noise_start": True, "noise_lower_bound": 1e-6},
                      datasets=_OAK_SMALL_PAPER_SETS),
            ModelSpec("OAK-all-starts", "OAK", {"feature_starts": True, "low_noise_start": True,
                                                "noise_lower_bound": 1e-6}, datasets=_OAK_SMALL_PAPER_SETS),
            _OAK_SGPR_GAS),
    metrics=("rmse", "nlpd"),
    normalisation="none",
    references=_oak_references(model_aliases={"OAK": ["OAK", "OAK-feature-starts", "OAK-low-noise",
                                                      "OAK-low-noise-1e-6", "OAK-all-starts", "OAK-SGPR"]}),
    notes=("The paper's own 10 splits, rebuilt (hdgp.data.bayesian_benchmarks): the paper ran Tables 5-6 "
           "through the Bayesian benchmarks suite, which standardises inputs and target with the statistics of "
           "all rows, shuffles the rows with NumPy's legacy generator seeded by the split number and trains on "
           "the first 90 %. On the shared files' rows this reproduces the paper's deterministic baselines "
           "(scikit-learn LinearRegression, KNN, SVR) to its three decimals on machine, servo, fertility, "
           "forest, stock, airfoil, gas, kin40k and boston (boston from the SIGP folder's raw file, parsed by "
           "pandas.read_fwf as the suite did, which cuts leading digits off RAD, DIS and CRIM); energy's rows "
           "are re-sorted into the UCI spreadsheet's order (KNN and SVR match, least squares on its singular "
           "design does not). Models see the data as the paper's did (normalisation 'none': already "
           "standardised); metrics are on that standardised target, as the paper's. Linear here is hdgp's "
           "Bayesian linear GP, not least squares, so it differs from the paper's Linear where least squares is "
           "ill-conditioned (gas, elevators). OAK-SGPR is oak-table5's recipe for gas (order 3, 200 inducing "
           "points); elevators and kin40k fit sparse by the OAK estimator's default (SGPR, 512 inducing points). "
           "OAK-feature-starts also trains from one start per continuous feature with that feature's "
           "length-scale short (feature_starts=True) and keeps the best MAP objective; on machine the "
           "authors' own code (run on these splits: 0.281 +- 0.042, the paper's number) reaches such an "
           "optimum from its default start, where our L-BFGS does not. OAK-low-noise also trains from the "
           "authors' start with the noise variance at twice its lower bound (low_noise_start=True); on energy, "
           "a simulation, the authors' code (0.036 +- 0.011 on these splits, the paper's number) reaches "
           "optima with almost no noise that our default noise start does not; OAK-low-noise-1e-6 also lowers "
           "the noise bound from 1e-4 to 1e-6 (and so its start to 2e-6); OAK-all-starts has both kinds of "
           "start with that bound. "
           "yacht and protein cannot be rebuilt (see the module)."),
    plots=("rmse", "sobol-by-order"),
)

_OAK_FIG3_M = (25, 50, 100, 200, 400)
FIG3 = Protocol(
    name="oak-fig3",
    description="Lu, Boukouvalas & Hensman (2022), Fig. 3: test RMSE vs number of inducing points (SGPR), OAK "
                "vs the non-orthogonal additive kernel vs RBF-ARD.",
    datasets=(DatasetSpec("pumadyn32nm"),),
    models=tuple(ModelSpec(f"{p} M={m}", p, {"inference": "sparse", "n_inducing": m,
                                             **({"max_order": 3} if p != "RBF-ARD" else {})})
                 for p in ("OAK", "Additive", "RBF-ARD") for m in _OAK_FIG3_M),
    splits=tuple(range(5)),
    metrics=("rmse", "nlpd"),
    normalisation="y-only",
    notes=("The paper's pumadyn is the 8-dimensional set with a 4:1 split; the shared data hold pumadyn32nm "
           "(32 inputs, fixed ~90/10 splits), so the curves are comparable in shape, not value. Five splits "
           "(the paper: 5 repetitions); SGPR with k-means inducing points. OAK and Additive truncate the "
           "interaction order at 3 (the paper's D-tilde, Sec. 3.5; its Fig. 4 finds that every data "
           "set needs interactions of order <= 3) — with 32 inputs the default order 10 costs 320 elementwise passes per kernel entry. "
           "Library defaults otherwise."),
    plots=("convergence-in-M",),
)

