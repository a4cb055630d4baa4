"""RBF-ARD exact-GP fit speed: hdgp vs scikit-learn vs a plain GPyTorch model (paper recipe).

All three fit the same model (constant mean, σ²·RBF with ARD length-scales,
Gaussian noise) on the same standardised splits of the shared UCI data, in one
run, on one thread each (set below before importing numpy/torch):

- hdgp: ``hdgp.preset("RBF-ARD")`` — L-BFGS on the exact marginal likelihood,
  trace-formula gradients;
- scikit-learn: ``GaussianProcessRegressor(ConstantKernel*RBF(ARD) + WhiteKernel)``
  with its default L-BFGS-B and no restarts (y centred by ``normalize_y=False``
  on the standardised target, which is what a user would run);
- GPyTorch: ``ExactGP`` + ``ExactMarginalLogLikelihood`` trained with the
  projected-additive paper's recipe (Adam lr 0.1, ≤ 1000 steps, 20-step moving-
  average stopping rule with tolerance 1e-4), float64.

It also times one marginal-likelihood + gradient evaluation of hdgp against the
Cholesky factorisation it needs (the floor), for n = 500, 1000, 2000.

Usage::

    HDGP_DATA_DIR=../shared/data python benchmarks/exact_speed.py [--splits 3] \
        [--out benchmarks/results/exact]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import gpytorch  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel  # noqa: E402

import hdgp  # noqa: E402
from _gpytorch_recipe import predict_mean, train_paper_recipe  # noqa: E402

torch.set_num_threads(1)
DATASETS = ("housing", "yacht", "concrete")


def fit_hdgp(X, y, Xt, seed):
    est = hdgp.preset("RBF-ARD", random_state=seed)
    t = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t, est.predict(Xt)


def fit_sklearn(X, y, Xt, seed):
    d = X.shape[1]
    kernel = ConstantKernel(1.0) * RBF(length_scale=np.full(d, math.sqrt(d))) + WhiteKernel(0.1)
    est = GaussianProcessRegressor(kernel, random_state=seed)
    t = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t, est.predict(Xt)


class _GPyTorchModel(gpytorch.models.ExactGP):
    def __init__(self, X, y, likelihood):
        super().__init__(X, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def fit_gpytorch(X, y, Xt, seed):
    torch.manual_seed(seed)
    Xtr, ytr = torch.tensor(X), torch.tensor(y)
    model = _GPyTorchModel(Xtr, ytr, gpytorch.likelihoods.GaussianLikelihood()).double()
    elapsed, _ = train_paper_recipe(model, Xtr, ytr)
    return elapsed, predict_mean(model, torch.tensor(Xt))


def floor_ratio(n, d=8, repeats=5):
    """Seconds for one NLL+gradient evaluation vs one Cholesky of the same n×n matrix."""
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.standard_normal((n, d)))
    y = torch.tensor(rng.standard_normal(n))
    model = hdgp.inference.ExactGPModel(hdgp.estimators.gp.KERNELS["rbf-ard"](X)).double()
    K = model.kernel(X).to_dense().detach() + 0.1 * torch.eye(n)
    def best(f):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)
    chol = best(lambda: torch.linalg.cholesky(K))
    def evaluation():
        model.zero_grad()
        model.neg_log_marginal_likelihood(X, y).backward()
    ev = best(evaluation)
    return chol, ev, (n**3 / 3) / chol / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/exact")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in DATASETS:
        for split in range(args.splits):
            ds = hdgp.data.load(name, split=split, standardize=True)
            for label, fn in (("hdgp", fit_hdgp), ("sklearn", fit_sklearn), ("gpytorch-adam", fit_gpytorch)):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    seconds, mean = fn(ds.X_train, ds.y_train, ds.X_test, split)
                rmse = hdgp.metrics.rmse(ds.y_test, mean)
                rows.append((name, split, label, seconds, rmse))
                print(f"{name} split {split} {label}: {seconds:.2f}s RMSE {rmse:.3f}", flush=True)
    lines = [
        "# RBF-ARD exact fit: hdgp vs scikit-learn vs GPyTorch (paper's Adam recipe)",
        "",
        f"Command: `HDGP_DATA_DIR=../shared/data python benchmarks/exact_speed.py --splits {args.splits}`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, one thread per fit; "
        f"torch {torch.__version__}, gpytorch {gpytorch.__version__}. Other jobs shared the machine: "
        "compare ratios within a row, not absolute seconds across runs.",
        "",
        "| data set | n train | hdgp s | sklearn s | GPyTorch s | sklearn / hdgp | GPyTorch / hdgp | RMSE hdgp | RMSE sklearn | RMSE GPyTorch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in DATASETS:
        sel = {lab: [r for r in rows if r[0] == name and r[2] == lab] for lab in ("hdgp", "sklearn", "gpytorch-adam")}
        med = {lab: float(np.median([r[3] for r in v])) for lab, v in sel.items()}
        rm = {lab: float(np.mean([r[4] for r in v])) for lab, v in sel.items()}
        n = len(hdgp.data.load(name, split=0).y_train)
        lines.append(
            f"| {name} | {n} | {med['hdgp']:.2f} | {med['sklearn']:.2f} | {med['gpytorch-adam']:.2f} | "
            f"{med['sklearn'] / med['hdgp']:.1f}× | {med['gpytorch-adam'] / med['hdgp']:.1f}× | "
            f"{rm['hdgp']:.3f} | {rm['sklearn']:.3f} | {rm['gpytorch-adam']:.3f} |"
        )
    lines += ["", "Median fit seconds over splits 0..{}; RMSE = mean test RMSE on the standardised target.".format(args.splits - 1),
              "", "## One marginal-likelihood + gradient evaluation vs its Cholesky floor", "",
              "| n | Cholesky s | NLL+grad s | ratio | Cholesky GFLOP/s |", "|---:|---:|---:|---:|---:|"]
    for n in (500, 1000, 2000):
        chol, ev, gflops = floor_ratio(n)
        lines.append(f"| {n} | {chol:.4f} | {ev:.4f} | {ev / chol:.1f} | {gflops:.1f} |")
    lines += ["", "The evaluation needs one Cholesky (n³/3 flops), one inverse from it (LAPACK `potri`, ≈ 2n³/3) and the "
              "kernel's forward/backward; a ratio near 3–4 is at the floor of this formulation.",
              "", "GPyTorch switches from Cholesky to CG + Lanczos (approximate) above 800 rows, so its concrete time is for a cheaper, inexact objective; its Adam early stop also lands on different optima (better RMSE on housing, worse on concrete)."]
    (out / "rbf_ard_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
