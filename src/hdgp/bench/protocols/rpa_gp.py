"""Protocols of Delbridge, Bindel & Wilson (2020), "Randomly projected additive Gaussian processes":
Table 1 and Figs. 3, 5 and 6."""

from __future__ import annotations

from ._common import _UCI_SMALL_TO_GAS, _models
from ._specs import DatasetSpec, ModelSpec, Protocol, ReferenceSpec

#: The paper's J for the presets whose default J follows the number of rows (DPA-GP-ARD: 50 directions
#: for 250-1,000 rows): its tables and figures use J = 20 (Table 2) on every data set.
_PAPER_J = {"DPA-GP-ARD": {"n_projections": 20}}


def _paper_models(*names: str) -> tuple:
    """``ModelSpec``s of the paper's models: each preset, with the paper's J pinned where it differs."""
    return tuple(ModelSpec(n, n, dict(_PAPER_J.get(n, {}))) for n in names)

_RPA_MODELS = ("RBF-ARD", "IMQ-ARD", "Single-RP", "RPA-GP-2", "RPA-GP-3", "RPA-GP-1", "DPA-GP",
               "RPA-GP-ARD", "DPA-GP-ARD", "DPA-GP-ARD-SKI")

#: Table 1's projected models fitted on 5 direction sets, keeping the best marginal likelihood.
#: Run on the sets up to n = 506 (and energy for the non-ARD models, whose fit depends most on
#: the directions); each paper row is compared with both our variants.
_RPA_PAPER_MODELS = ("RPA-GP-1", "DPA-GP", "RPA-GP-ARD", "DPA-GP-ARD", "DPA-GP-ARD-SKI")
_RPA_SMALL = _UCI_SMALL_TO_GAS[:10]
_RPA_FIVE_SETS = tuple(
    ModelSpec(f"{m} 5-sets", m, {**_PAPER_J.get(m, {}), "n_direction_sets": 5},
              datasets=_RPA_SMALL + (("energy",) if m in ("RPA-GP-1", "DPA-GP") else ()))
    for m in _RPA_PAPER_MODELS)

#: The same five models with hdgp's default optimiser (L-BFGS to convergence) in place of the paper's
#: Adam protocol, which the issue invites ("with a better optimiser we expect to beat it").
_RPA_LBFGS = tuple(ModelSpec(f"{m} L-BFGS", m, {**_PAPER_J.get(m, {}), "optimizer": "lbfgs"})
                   for m in _RPA_PAPER_MODELS)


TABLE1 = Protocol(
    name="rpa-gp-table1",
    description="Delbridge, Bindel & Wilson (2020), Table 1: test RMSE on 16 UCI sets with the fixed 10 splits.",
    datasets=tuple(DatasetSpec(n) for n in _UCI_SMALL_TO_GAS),
    models=(*_paper_models(*_RPA_MODELS, "GAM", "Linear", "SIGP"), *_RPA_FIVE_SETS, *_RPA_LBFGS),
    metrics=("rmse", "nlpd"),
    estimator_params={"optimizer": "adam", "noise_prior": "smoothed-box"},
    references=(ReferenceSpec("rpa_gp_table1_rmse.csv", "rmse", value_column="rmse_mean",
                              spread_column="rmse_2std", spread="2std", n_repeats=20,
                              model_aliases={m: [m, f"{m} 5-sets", f"{m} L-BFGS"] for m in _RPA_PAPER_MODELS}),),
    notes=("The paper repeated 10-fold CV twice; the shared data hold one set of 10 fixed splits, so each "
           "split runs once per seed. The models whose fit depends on the seed (their projections: "
           "Single-RP, RPA-GP-1, RPA-GP-2, RPA-GP-3, DPA-GP, RPA-GP-ARD, DPA-GP-ARD, DPA-GP-ARD-SKI) ran "
           "with seeds 0 and 1 "
           "(RPA-GP-2 and RPA-GP-3 from the eighteenth session on, not on gas; their degree-4..6 projections "
           "exceed d on challenger, servo and airfoil, which the paper also ran, and warn there), "
           "20 runs per cell like the paper's; the other models are "
           "deterministic (seed 0). A seed draws one direction set for all splits, where the paper drew new "
           "directions per run; the '5-sets' rows (seed 0) fit five "
           "direction sets per split and keep the best marginal likelihood (n_direction_sets=5; no test data "
           "involved). Paper protocol: Adam lr 0.1, <= 1000 steps, "
           "smoothed-box noise prior (set on every model that accepts it); the 'L-BFGS' rows replace "
           "Adam by hdgp's default optimiser (L-BFGS to convergence), same prior, seeds 0 and 1 (gas: "
           "seed 0, except DPA-GP-ARD-SKI L-BFGS: seeds 0 and 1). GAM, Linear and SIGP (Tan & Mukherjee; "
           "hyper-parameters by its own 5-fold CV, no Adam; its rows from 2026-11-24 on scale the predictive "
           "variance by the same CV, calibrate_variance=True) are extra baselines "
           "without paper numbers."),
)

_FIG3_J = (1, 2, 3, 5, 10, 20, 50)
FIG3 = Protocol(
    name="rpa-gp-fig3",
    description="Delbridge et al. (2020), Fig. 3: test RMSE as the number of projections J grows, against RBF/IMQ.",
    datasets=tuple(DatasetSpec(n) for n in ("yacht", "autompg", "housing")),
    models=tuple(ModelSpec(f"{p} J={j}", p, {"n_projections": j}) for p in ("RPA-GP-1", "DPA-GP", "DPA-GP-ARD")
                 for j in _FIG3_J) + _models("RBF-ARD", "IMQ-ARD"),
    metrics=("rmse",),
    estimator_params={"optimizer": "adam", "noise_prior": "smoothed-box"},
    notes=("The paper shows 'representative' data sets without naming all of them; we use yacht, autompg and "
           "housing. RBF-ARD and IMQ-ARD are drawn as horizontal reference lines."),
    plots=("convergence-in-J",),
)

_FIG5_N = (500, 1000, 2000, 4000, 8000)
FIG5 = Protocol(
    name="rpa-gp-fig5",
    description="Delbridge et al. (2020), Fig. 5: training time of RPA-GP with SKI vs exact Cholesky inference.",
    datasets=tuple(DatasetSpec(f"sin-sum-n{n}", loader_name="sin-sum", kwargs={"n": n, "d": 100}) for n in _FIG5_N),
    models=(ModelSpec("RPA-GP-SKI", "RPA-GP-1", {"inference": "ski"}), ModelSpec("RBF (Cholesky)", "RBF-ARD",
                                                                                  {"inference": "exact"})),
    splits=(0, 1, 2),
    metrics=("rmse",),
    estimator_params={"optimizer": "adam", "max_iter": 120},
    notes=("y = sum_i sin(x_i) + 0.01 eps, x ~ N(0, I_100), 120 Adam iterations, 20 1-D projections with SKI "
           "vs an RBF GP with Cholesky inference, as in the paper. Timings depend on the machine's load."),
    plots=("scaling",),
)

_FIG6_N = (100, 200, 400, 800, 1600)
_FIG6_FUNCTIONS = ("additive", "smooth-xor", "rotation-invariant", "half-irrelevant")
_FIG6_DIM = 6
FIG6 = Protocol(
    name="rpa-gp-fig6",
    description="Delbridge et al. (2020), Fig. 6: test RMSE vs n on four synthetic functions (GAM vs DPA-GP vs "
                "DPA-GP-ARD).",
    datasets=tuple(DatasetSpec(f"{f}-n{n}", loader_name=f,
                               kwargs={"n": n, "d": 2 if f == "smooth-xor" else _FIG6_DIM})
                   for f in _FIG6_FUNCTIONS for n in _FIG6_N),
    models=_paper_models("GAM", "DPA-GP", "DPA-GP-ARD", "RBF-ARD"),
    splits=tuple(range(5)),
    metrics=("rmse",),
    notes=(f"The paper does not print the functions, d or the n grid; we use d = {_FIG6_DIM} (d = 2 for the XOR: "
           "a product of six tanh has almost no variance left above the noise), x ~ N(0, I), noise "
           "0.1 and the formulas documented in hdgp.data.synthetic (additive: sum sin(2 x_i); smooth XOR: "
           "prod tanh(2 x_i); rotation-invariant: cos ||x||; half-irrelevant: cos ||x_{1..d/2}||). Each split "
           "draws a new data set (seeded by the split), 90/10 train/test. Library defaults (L-BFGS); "
           "RBF-ARD is an extra reference."),
    plots=("rmse-vs-n",),
)

