"""SIGP fit time against an exact RBF GP for n = 1,000 ... 20,000 (Tan & Mukherjee, Sec. 4).

The paper claims O(n^2 m) per EM iteration with the full kernel matrix; hdgp's
SIGP works on a pivoted-Cholesky factor of rank r <= ``max_kernel_rank`` so a fit
is O(n r^2 + n r p + r^3) plus O(n m^2) for the closed-form covariance fit of
the constant-mean model.
Hyper-parameters are fixed (no CV) so that the algorithm itself is timed; the
exact GP (``GPRegressor``, RBF-ARD, L-BFGS on the marginal likelihood) is run up
to ``--exact-max-n``. Data: x ~ N(0, I_8), y = sin(2 x_1) + x_2^2 / 2 + 0.1 eps,
20 % held out; test RMSE is reported beside the time.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/sigp_speed.py --out benchmarks/results/sigp
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from hdgp.estimators import GPRegressor, SIGPRegressor

FIELDS = ["model", "n", "rank", "fit_seconds", "test_rmse", "kernel_rank", "kernel_residual", "threads", "machine"]


def _data(n, p=8, seed=0):
    rng = np.random.default_rng(seed)
    n_all = int(n / 0.8)
    X = rng.normal(size=(n_all, p))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n_all)
    return X[:n], y[:n], X[n:], y[n:]


def main(out: Path, sizes: list[int], ranks: list[int], exact_max_n: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "speed.csv"
    new = not path.exists()
    machine = f"{platform.processor() or platform.machine()}, torch threads={torch.get_num_threads()}"
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for n in sizes:
            X, y, X_te, y_te = _data(n)
            runs = [(f"SIGP m={m}", m) for m in ranks]
            if n <= exact_max_n:
                runs.append(("Exact GP (RBF-ARD)", None))
            for name, m in runs:
                if m is None:
                    model = GPRegressor(kernel="rbf-ard")
                else:
                    model = SIGPRegressor(rank=m, lengthscale=math.sqrt(X.shape[1]), eta=1e-3)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.fit(X, y)
                seconds = time.perf_counter() - t0
                rmse = float(np.sqrt(np.mean((model.predict(X_te) - y_te) ** 2)))
                row = dict(model=name, n=n, rank=m or "", fit_seconds=round(seconds, 3),
                           test_rmse=round(rmse, 4), kernel_rank=getattr(model, "kernel_rank_", ""),
                           kernel_residual=getattr(model, "kernel_residual_", ""),
                           threads=torch.get_num_threads(), machine=machine)
                writer.writerow(row)
                fh.flush()
                print(row, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/sigp"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--exact-max-n", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    main(args.out, args.sizes, args.ranks, args.exact_max_n)
