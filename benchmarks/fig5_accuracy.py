"""Why RPA-GP-SKI's test RMSE on the Fig. 5 table (~0.9) is far above the RBF baseline's (~0.4).

Delbridge et al. (2020), Fig. 5: ``y = sum_i sin(x_i) + 0.01 eps``, ``x ~ N(0, I_100)``, RPA-GP with
20 one-dimensional Gaussian random projections, 120 Adam iterations. One split of the harness's
``sin-sum-n<N>`` data set (``hdgp.bench``'s ``rpa-gp-fig5`` protocol, z-scored with training
statistics), and three questions:

1. **Is SKI the same model as exact inference?** At the hyper-parameters of an exact fit, the SKI
   objective (CG + stochastic Lanczos quadrature, and the dense SKI matrix) against the exact
   Cholesky one, and SKI's predictive means against the exact GP's, for several grid sizes,
   probe counts, CG tolerances, no preconditioner and float32.
2. **Do SKI and exact fits land on the same hyper-parameters?** The protocol's fit (Adam, 120
   steps) with either engine, and the converged L-BFGS fit of each (``--lbfgs``).
3. **Is it the model?** The best any function of the 20 projections can do: the Bayes predictor
   ``E[f(x) | Px]`` in closed form (for ``x ~ N(0, I)`` and ``f = sum_i sin(x_i)``:
   ``x | Px ~ N(Bz, I - BP)`` with ``B = P^T (P P^T)^{-1}``, ``E sin(x_i) = sin(m_i) exp(-v_i / 2)``),
   least squares on the 20 projections and least squares on all 100 inputs (the linear part of f,
   about 85 % of its variance, which an RBF kernel with long length-scales finds).

    OMP_NUM_THREADS=1 python benchmarks/fig5_accuracy.py --n 1000 --split 0 [--lbfgs]
    python benchmarks/fig5_accuracy.py --oracles-only

Writes one JSON record per run to ``benchmarks/results/rpa-gp-fig5/accuracy.jsonl``; ``--oracles-only``
(no GP fit: seconds) prints the floors of every size and split of the protocol beside the harness's
test RMSEs in ``tasks.csv`` and writes them to ``oracles.csv``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parent / "results" / "rpa-gp-fig5" / "accuracy.jsonl"


def _rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def _data(n: int, split: int):
    from hdgp.bench.datasets import load_split
    from hdgp.bench.protocols import get_protocol

    spec = get_protocol("rpa-gp-fig5").dataset(f"sin-sum-n{n}")
    raw = load_split(spec, split, "none")
    mean, std = raw.X_train.mean(0), raw.X_train.std(0)
    y_mean, y_std = raw.y_train.mean(), raw.y_train.std()
    z = dict(X_train=(raw.X_train - mean) / std, X_test=(raw.X_test - mean) / std,
             y_train=(raw.y_train - y_mean) / y_std, y_test=(raw.y_test - y_mean) / y_std)
    return raw, z, (mean, std, y_mean, y_std)


def _oracles(raw, z, stats, P: np.ndarray) -> dict:
    """Test RMSE (standardised target) of the best predictors from the projections and from all inputs."""
    mean, std, y_mean, y_std = stats
    # the model sees P (x - mean) / std: the same information as P' x with P' = P diag(1 / std)
    Pp = P / std
    B = Pp.T @ np.linalg.inv(Pp @ Pp.T)  # (d, J)
    proj = B @ Pp  # orthogonal projector onto the row space of P'
    m = raw.X_test @ proj.T  # E[x | P'x] (x ~ N(0, I))
    v = 1.0 - np.diag(proj)  # Var[x_i | P'x]
    bayes = (np.sin(m) * np.exp(-v / 2)).sum(1)
    out = {"bayes_given_projections": _rmse((bayes - y_mean) / y_std, z["y_test"])}
    ones = np.ones(P.shape[1]) / math.sqrt(P.shape[1])
    out["share_of_linear_part_in_span"] = float(ones @ proj @ ones)
    for name, F, Ft in (("ols_on_projections", z["X_train"] @ P.T, z["X_test"] @ P.T),
                        ("ols_on_all_inputs", z["X_train"], z["X_test"])):
        A = np.c_[np.ones(len(F)), F]
        coef = np.linalg.lstsq(A, z["y_train"], rcond=None)[0]
        out[name] = _rmse(np.c_[np.ones(len(Ft)), Ft] @ coef, z["y_test"])
    return out


def _rpa_directions(d: int, random_state: int = 0) -> np.ndarray:
    """The directions ``preset("RPA-GP-1", random_state=random_state)`` draws for ``d`` features (the
    estimator's fit seed, then :func:`hdgp.projections.random_directions`); checked against a fit below."""
    from sklearn.utils import check_random_state

    from hdgp.projections import random_directions

    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    return random_directions(d, (1,) * 20, random_state=seed).numpy()


def _oracles_only() -> None:
    import csv

    from hdgp.bench.protocols import get_protocol

    here = OUT.parent
    harness = {}
    with (here / "tasks.csv").open() as fh:
        for row in csv.DictReader(fh):
            if row["status"] == "done":
                harness[(row["dataset"], row["model"], int(row["split"]))] = float(row["metric_rmse"])
    P = _rpa_directions(100)
    rows = []
    for spec in get_protocol("rpa-gp-fig5").datasets:
        n = int(spec.name.rsplit("n", 1)[1])
        for split in (0, 1, 2):
            raw, z, stats = _data(n, split)
            row = {"dataset": spec.name, "split": split, "n_train": len(z["y_train"]), **_oracles(raw, z, stats, P),
                   "harness_rpa_gp_ski": harness.get((spec.name, "RPA-GP-SKI", split)),
                   "harness_rbf_cholesky": harness.get((spec.name, "RBF (Cholesky)", split))}
            rows.append(row)
            print(json.dumps(row), flush=True)
    with (here / "oracles.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)


def _hyper(model) -> dict:
    pk = model.kernel.base_kernel
    return {"outputscale": float(model.kernel.outputscale), "noise": float(model.likelihood.noise),
            "constant": float(model.mean.constant),
            "lengthscales": [round(float(v), 4) for v in pk.projection_lengthscale],
            "weights": [round(float(v), 4) for v in pk.weights]}


def _fit(engine: str, optimizer: str, z, max_iter):
    import hdgp

    est = hdgp.preset("RPA-GP-1", inference=engine, optimizer=optimizer, max_iter=max_iter, random_state=0)
    t0 = time.perf_counter()
    est.fit(z["X_train"], z["y_train"])
    seconds = time.perf_counter() - t0
    mean, std = est.predict(z["X_test"], return_std=True)
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * ((mean - z["y_test"]) / std) ** 2))
    return est, {"engine": engine, "optimizer": optimizer, "seconds": round(seconds, 2),
                 "evaluations": int(est.n_iter_), "loss_per_row": float(est.fit_result_.loss),
                 "rmse": _rmse(mean, z["y_test"]), "nlpd": nlpd, **_hyper(est.model_)}


def _ski_at(est, z, dtype=torch.float64, **options) -> dict:
    """SKI objective and predictions at ``est``'s (exact) hyper-parameters, against the exact ones."""
    from hdgp.inference.ski import SKIProjectedGPModel
    from hdgp.inference.ski.operator import _dense_ski_matrix

    exact = est.model_
    X, Xs = est.X_train_.to(dtype), torch.as_tensor(z["X_test"], dtype=dtype)
    y = torch.as_tensor((z["y_train"] - est.y_mean_) / est.y_scale_, dtype=dtype)
    kernel = copy.deepcopy(exact.kernel).to(dtype)
    ski = SKIProjectedGPModel(kernel, **options).to(dtype)
    with torch.no_grad():
        ski.likelihood.noise = exact.likelihood.noise.to(dtype)
        ski.mean.constant.copy_(exact.mean.constant.to(dtype))
        t0 = time.perf_counter()
        nll = float(ski.neg_log_marginal_likelihood(X, y))
        seconds = time.perf_counter() - t0
        op, _ = ski.operator(X)
        K = _dense_ski_matrix(op).double() + float(ski.noise) * torch.eye(len(y), dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        r = (y.double() - float(ski.constant))[:, None]
        dense = float(0.5 * (r * torch.cholesky_solve(r, L)).sum() + L.diagonal().log().sum()
                      + len(y) / 2 * math.log(2 * math.pi))
        exact_nll = float(exact.neg_log_marginal_likelihood(est.X_train_, y.double()))
        with torch.no_grad():
            mean_ski, _ = ski.posterior(X, y).predict(Xs, latent=True)
        mean_exact, _ = exact.posterior(est.X_train_, y.double()).predict(Xs.double(), latent=True)
    mean_ski, mean_exact = mean_ski.double().numpy(), mean_exact.double().numpy()
    n = len(y)
    return {"options": {k: v for k, v in options.items()}, "dtype": str(dtype).replace("torch.", ""),
            "nll_exact_per_row": exact_nll / n, "nll_ski_per_row": nll / n, "nll_dense_ski_per_row": dense / n,
            "nll_ski_minus_exact": nll - exact_nll, "nll_dense_ski_minus_exact": dense - exact_nll,
            "ski_seconds": round(seconds, 3),
            "mean_max_abs_diff": float(np.abs(mean_ski - mean_exact).max()),
            "mean_rms_diff": _rmse(mean_ski, mean_exact),
            "rmse_exact_mean": _rmse(mean_exact * est.y_scale_ + est.y_mean_, z["y_test"]),
            "rmse_ski_mean": _rmse(mean_ski * est.y_scale_ + est.y_mean_, z["y_test"])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="rows of the sin-sum-n<N> data set (90 %% train)")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--lbfgs", action="store_true", help="also fit both engines with L-BFGS to convergence")
    parser.add_argument("--no-ski-fit", action="store_true", help="skip the SKI fits (cross-evaluation only)")
    parser.add_argument("--oracles-only", action="store_true", help="only the floors, every size and split")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.oracles_only:
        return _oracles_only()
    raw, z, stats = _data(args.n, args.split)
    record = {"n": args.n, "split": args.split, "n_train": len(z["y_train"]), "load_before": os.getloadavg()[0]}
    fits = []
    est, row = _fit("exact", "adam", z, 120)
    fits.append(row)
    P = est.projections_.numpy()
    assert np.array_equal(P, _rpa_directions(P.shape[1]))
    record["oracles"] = _oracles(raw, z, stats, P)
    print(json.dumps({"oracles": record["oracles"]}), flush=True)
    print(json.dumps(row), flush=True)
    cross = []
    for options in ({}, {"grid_size": 128}, {"grid_size": 2048}, {"num_probes": 100}, {"cg_tolerance": 1e-6},
                    {"preconditioner_rank": 0}):
        cross.append(_ski_at(est, z, **options))
        print(json.dumps(cross[-1]), flush=True)
    try:
        cross.append(_ski_at(est, z, dtype=torch.float32))
    except Exception as error:  # recorded: float32 is part of the question
        cross.append({"dtype": "float32", "error": f"{type(error).__name__}: {error}"})
    print(json.dumps(cross[-1]), flush=True)
    record["ski_at_exact_fit"] = cross
    if not args.no_ski_fit:
        ski_est, row = _fit("ski", "adam", z, 120)
        fits.append(row)
        print(json.dumps(row), flush=True)
        assert np.array_equal(ski_est.projections_.numpy(), P)  # the same directions: the same model
    if args.lbfgs:
        for engine in ("exact",) + (() if args.no_ski_fit else ("ski",)):
            fits.append(_fit(engine, "lbfgs", z, None)[1])
            print(json.dumps(fits[-1]), flush=True)
    record["fits"] = fits
    record["load_after"] = os.getloadavg()[0]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
