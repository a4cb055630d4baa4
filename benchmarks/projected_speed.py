"""DPA-GP-ARD exact fit speed: hdgp vs the same model as a batched GPyTorch additive kernel.

Issue 4's speed claim: on ``concrete`` and ``airfoil`` (shared fixed splits,
standardised), fit DPA-GP-ARD (J = 20 diverse 1-D directions, ARD length-scales
before projecting, unit sub-kernel length-scales, weights 1/J, constant mean,
Gaussian noise; Delbridge et al. 2020, eq. 2 and Sec. 4.3) with

- hdgp: ``hdgp.preset("DPA-GP-ARD")`` — L-BFGS on the exact marginal likelihood,
  fused O(n²)-memory kernel with its own backward pass;
- GPyTorch: what a GPyTorch user writes — the inputs scaled by learned ARD
  length-scales, projected on the *same* directions, a batch of J unit-length-
  scale 1-D RBF kernels (GPyTorch's batched ``covar_dist``) averaged over the
  batch, wrapped in a ``ScaleKernel``; ``ExactGP`` trained with the paper's Adam recipe
  (:mod:`_gpytorch_recipe`), float64, GPyTorch's default settings (above 800
  rows it solves with preconditioned CG instead of Cholesky).

Both on one thread, same machine, same run, after one untimed warm-up fit of each;
each fit is repeated ``--repeats`` times, alternating the two libraries, and the
median time is reported (single runs on this shared machine varied by ~10 %); test
RMSE beside the time (the fits are deterministic).

Usage::

    HDGP_DATA_DIR=../shared/data python benchmarks/projected_speed.py [--splits 3] [--repeats 3] \
        [--out benchmarks/results/projected]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import gpytorch  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import hdgp  # noqa: E402
from _gpytorch_recipe import predict_mean, train_paper_recipe  # noqa: E402

torch.set_num_threads(1)
DATASETS = ("concrete", "airfoil")
N_PROJECTIONS = 20


class BatchedProjectedKernel(gpytorch.kernels.Kernel):
    """(1/J) Σ_j exp(−½ (p_jᵀ (x − x') / ℓ)²) with a batch of J 1-D RBF kernels."""

    has_lengthscale = True

    def __init__(self, directions: torch.Tensor, **kwargs):
        super().__init__(ard_num_dims=directions.shape[1], **kwargs)
        self.register_buffer("directions", directions)

    def forward(self, x1, x2, diag=False, **params):
        if diag:
            return torch.ones(x1.shape[:-1], dtype=x1.dtype, device=x1.device)
        z1 = ((x1 / self.lengthscale) @ self.directions.T).T.unsqueeze(-1)  # J × n1 × 1
        z2 = ((x2 / self.lengthscale) @ self.directions.T).T.unsqueeze(-1)
        return torch.exp(-0.5 * self.covar_dist(z1, z2, square_dist=True)).mean(dim=-3)


class _GPyTorchModel(gpytorch.models.ExactGP):
    def __init__(self, X, y, directions):
        super().__init__(X, y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(BatchedProjectedKernel(directions))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def fit_hdgp(X, y, Xt, seed):
    est = hdgp.preset("DPA-GP-ARD", random_state=seed)
    t = time.perf_counter()
    est.fit(X, y)
    elapsed = time.perf_counter() - t
    gap = check_same_kernel(est)
    if gap > 1e-10:
        raise AssertionError(f"the GPyTorch kernel differs from hdgp's by {gap:.2e}: not the same model")
    return elapsed, est.predict(Xt), est.n_iter_, est.projections_


def check_same_kernel(est) -> float:
    """Max |difference| between hdgp's fitted kernel (per unit outputscale) and ours at its length-scales."""
    k = est.kernel_
    X = est.X_train_[:100]
    ours = BatchedProjectedKernel(est.projections_).double()
    ours.lengthscale = k.base_kernel.input_lengthscale.detach()
    with torch.no_grad():
        return float((k(X).to_dense() / k.outputscale - ours(X).to_dense()).abs().max())


def fit_gpytorch(X, y, Xt, seed, directions):
    torch.manual_seed(seed)
    Xtr, ytr = torch.tensor(X), torch.tensor(y)
    model = _GPyTorchModel(Xtr, ytr, directions.to(torch.float64)).double()
    elapsed, steps = train_paper_recipe(model, Xtr, ytr)
    return elapsed, predict_mean(model, torch.tensor(Xt)), steps


def warm_up(name: str) -> None:
    """Fit both once on 60 rows, untimed: one-time costs (lazy imports such as the
    ``torch._dynamo`` import of the first ``torch.optim`` optimiser, ~1.3 s) stay out of
    the first split's timings."""
    ds = hdgp.data.load(name, split=0, standardize=True)
    X, y = ds.X_train[:60], ds.y_train[:60]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, _, P = fit_hdgp(X, y, X[:5], 0)
        fit_gpytorch(X, y, X[:5], 0, P)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/projected")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    warm_up(args.datasets[0])
    for name in args.datasets:
        for split in range(args.splits):
            ds = hdgp.data.load(name, split=split, standardize=True)
            times_h, times_g = [], []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for _ in range(args.repeats):  # alternating, so load on the machine hits both alike
                    t_h, mean_h, evals, P = fit_hdgp(ds.X_train, ds.y_train, ds.X_test, split)
                    t_g, mean_g, steps = fit_gpytorch(ds.X_train, ds.y_train, ds.X_test, split, P)
                    times_h.append(t_h)
                    times_g.append(t_g)
            t_h, t_g = float(np.median(times_h)), float(np.median(times_g))
            r_h, r_g = hdgp.metrics.rmse(ds.y_test, mean_h), hdgp.metrics.rmse(ds.y_test, mean_g)
            rows.append((name, split, len(ds.y_train), t_h, r_h, evals, t_g, r_g, steps))
            print(f"{name} split {split}: hdgp {t_h:.1f}s RMSE {r_h:.3f} ({evals} evals) | "
                  f"gpytorch {t_g:.1f}s RMSE {r_g:.3f} ({steps} steps) | ratio {t_g / t_h:.1f}x", flush=True)
    lines = [
        "# DPA-GP-ARD exact fit: hdgp vs a batched GPyTorch additive kernel (paper's Adam recipe)",
        "",
        f"Command: `HDGP_DATA_DIR=../shared/data python benchmarks/projected_speed.py --splits {args.splits} "
        f"--repeats {args.repeats} --datasets {' '.join(args.datasets)}`",
        f"J = {N_PROJECTIONS} diverse directions (the same ones in both), one thread each, float64, "
        f"one untimed warm-up fit of each first; times are medians of {args.repeats} fits, alternating the "
        "libraries. "
        f"Machine: {platform.platform()}, {os.cpu_count()} cores (shared; compare ratios measured in one run).",
        f"hdgp {hdgp.__version__}, torch {torch.__version__}, gpytorch {gpytorch.__version__}.",
        "",
        "| data set | split | n train | hdgp s | hdgp RMSE | hdgp evals | GPyTorch s | GPyTorch RMSE | Adam steps "
        "| speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, split, n, t_h, r_h, evals, t_g, r_g, steps in rows:
        lines.append(f"| {name} | {split} | {n} | {t_h:.2f} | {r_h:.3f} | {evals} | {t_g:.2f} | {r_g:.3f} | {steps} "
                     f"| {t_g / t_h:.1f}× |")
    for name in args.datasets:
        sub = [r for r in rows if r[0] == name]
        ratio = np.median([r[6] / r[3] for r in sub])
        lines.append(f"\n{name}: median speed-up {ratio:.1f}×, mean RMSE hdgp {np.mean([r[4] for r in sub]):.3f} vs "
                     f"GPyTorch {np.mean([r[7] for r in sub]):.3f}.")
    (out / "dpa_ard_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
