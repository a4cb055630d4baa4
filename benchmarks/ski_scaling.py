r"""Training cost of RPA-GP with additive SKI vs exact (Cholesky) inference: Delbridge et al. (2020), Fig. 5.

Set-up of the paper's Sec. 5.4: x ~ N(0, I_100), y = sum_i sin(x_i) + 0.01 eps, 20
one-dimensional Gaussian random projections (RPA-GP-1 kernel), 512 grid points
per projection. One training iteration = one evaluation of the negative log
marginal likelihood and its gradient (what an Adam step or an L-BFGS
evaluation costs); we time ``--iters`` of them after one warm-up evaluation.
The exact engine runs the *same* projected kernel with Cholesky inference.
After the iterations each run also conditions on the data once (``posterior``:
SKI's CG solve and variance cache, or the Cholesky factor) and predicts mean and
variance at 10,000 new points; those times are separate columns.

Every (method, n) runs in a fresh subprocess so its peak resident memory
(``ru_maxrss``; with ``--device cuda`` also the peak GPU memory PyTorch allocated)
is its own. Writes ``scaling.json``, ``scaling.md`` (with the fitted
log-log slopes and the crossover) and ``scaling.png`` to ``--out``.

Example (the run committed under benchmarks/results/projected/)::

    OMP_NUM_THREADS=1 python benchmarks/ski_scaling.py \
        --ski-n 1000 2000 4000 8000 16000 32000 64000 128000 200000 --exact-n 1000 2000 4000 8000

and on a GPU (``benchmarks/results/projected/gpu/``)::

    python benchmarks/ski_scaling.py --device cuda --out benchmarks/results/projected/gpu \
        --ski-n ... --exact-n ...
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
D, J, GRID = 100, 20, 512


def _worker(method: str, n: int, iters: int, device: str, seed: int = 0) -> dict:
    """Time ``iters`` loss+gradient evaluations of one model in this process."""
    import torch
    from gpytorch.kernels import ScaleKernel

    from hdgp.inference.exact import ExactGPModel
    from hdgp.inference.ski import SKIProjectedGPModel
    from hdgp.kernels.projected_kernel import ProjectedAdditiveKernel
    from hdgp.projections import random_directions

    torch.set_num_threads(1)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, D, generator=g, dtype=torch.float64)
    y = torch.sin(X).sum(1) + 0.01 * torch.randn(n, generator=g, dtype=torch.float64)
    y = (y - y.mean()) / y.std()
    P = random_directions(D, (1,) * J, random_state=seed)
    pk = ProjectedAdditiveKernel(P, ard=False)
    pk.projection_lengthscale = (X @ P.T).std(0)
    kernel = ScaleKernel(pk).double()
    model = (SKIProjectedGPModel(kernel, grid_size=GRID) if method == "ski" else ExactGPModel(kernel)).double()
    model.likelihood.noise = 0.1
    model, X, y = model.to(device), X.to(device), y.to(device)
    cuda = X.device.type == "cuda"
    times = []
    for it in range(iters + 1):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss = model.neg_log_marginal_likelihood(X, y)
        loss.backward()
        if cuda:
            torch.cuda.synchronize()
        if it > 0:  # the first evaluation is a warm-up
            times.append(time.perf_counter() - start)
    start = time.perf_counter()
    posterior = model.posterior(X, y)
    posterior_seconds = time.perf_counter() - start
    Xs = torch.randn(10_000, D, generator=g, dtype=torch.float64).to(device)
    start = time.perf_counter()
    posterior.predict(Xs)
    if cuda:
        torch.cuda.synchronize()
    predict_seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    row = dict(method=method, n=n, device=str(X.device), seconds_per_iter=float(np.median(times)), iters=iters,
               posterior_seconds=posterior_seconds, predict_seconds=predict_seconds,
               peak_rss_mb=peak / 1024, extra_rss_mb=(peak - base_rss) / 1024, loss=float(loss) / n)
    if cuda:
        row["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return row


def _seconds(row: dict, key: str) -> str:
    """A timing column; rows of runs before it was measured show a dash."""
    return f"{row[key]:.2f}" if key in row else "–"


def _slope(ns, ts) -> float:
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def _report(rows: list, out: Path, command: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpu = any("peak_gpu_mb" in r for r in rows)
    by = {m: sorted((r for r in rows if r["method"] == m), key=lambda r: r["n"]) for m in ("ski", "exact")}
    lines = ["# Additive SKI vs exact inference: time and memory per training iteration (Fig. 5 set-up)", "",
             f"Command: `{command}`", "",
             f"d = {D}, J = {J} one-dimensional random projections, m = {GRID} grid points, float64, "
             + ("one GPU (device column). " if gpu else
                "1 thread on a shared 2-core machine (other jobs running). ")
             + "One iteration = negative log marginal likelihood + gradient; median over the timed "
             "iterations after one warm-up. Posterior: conditioning once on the training data; predict: "
             "mean and variance at 10,000 new points. Peak memory covers all three.", "",
             "| method | n | s / iteration | posterior s | predict s | peak RSS (MB) | extra RSS over start (MB) |"
             + (" peak GPU memory (MB) | device |" if gpu else ""),
             "|---|---|---|---|---|---|---|" + ("---|---|" if gpu else "")]
    for m, rs in by.items():
        lines += [f"| {m} | {r['n']} | {r['seconds_per_iter']:.3f} | {_seconds(r, 'posterior_seconds')} | "
                  f"{_seconds(r, 'predict_seconds')} | {r['peak_rss_mb']:.0f} | "
                  f"{r['extra_rss_mb']:.0f} |" + (f" {r['peak_gpu_mb']:.0f} | {r['device']} |" if gpu else "")
                  for r in rs]
    lines.append("")
    for m, rs in by.items():
        if len(rs) >= 2:
            ns, ts = [r["n"] for r in rs], [r["seconds_per_iter"] for r in rs]
            lines.append(f"- {m}: log-log slope of time vs n = {_slope(ns, ts):.2f} over n = {ns[0]}..{ns[-1]}")
            big = [(a, b) for a, b in zip(ns, ts) if a >= 8000]
            if m == "ski" and len(big) >= 2:
                lines.append(f"  (n >= 8000 only: {_slope(*zip(*big)):.2f})")
            key = "peak_gpu_mb" if gpu else "extra_rss_mb"
            ms = [r[key] for r in rs if r[key] > 0]
            if len(ms) == len(rs):
                lines.append(f"  memory slope ({'peak GPU memory' if gpu else 'extra RSS'} vs n): {_slope(ns, ms):.2f}")
    ski, exact = {r["n"]: r["seconds_per_iter"] for r in by["ski"]}, {r["n"]: r["seconds_per_iter"] for r in by["exact"]}
    common = sorted(set(ski) & set(exact))
    faster = [n for n in common if ski[n] < exact[n]]
    if common:
        lines.append(f"- crossover: SKI is faster than exact from n = {faster[0]} on" if faster
                     else f"- crossover: exact still faster at every common n (up to {common[-1]})")
    (out / "scaling.md").write_text("\n".join(lines) + "\n")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for m, rs in by.items():
        if rs:
            axes[0].loglog([r["n"] for r in rs], [r["seconds_per_iter"] for r in rs], "o-", label=m)
            axes[1].loglog([r["n"] for r in rs], [max(r["peak_gpu_mb" if gpu else "extra_rss_mb"], 1) for r in rs],
                           "o-", label=m)
    if by["ski"]:
        n0, t0 = by["ski"][0]["n"], by["ski"][0]["seconds_per_iter"]
        ns = np.array([r["n"] for r in by["ski"]])
        axes[0].loglog(ns, t0 * ns / n0, "k:", label="slope 1")
    axes[0].set(xlabel="n", ylabel="seconds per iteration", title="time per iteration")
    axes[1].set(xlabel="n", ylabel="peak GPU memory (MB)" if gpu else "extra peak RSS (MB)", title="memory")
    for ax in axes:
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ski-n", nargs="*", type=int, default=[1000, 2000, 4000, 8000, 16000, 32000])
    parser.add_argument("--exact-n", nargs="*", type=int, default=[1000, 2000, 4000])
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "projected")
    parser.add_argument("--device", default="cpu", help="torch device of the models (e.g. cuda)")
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker[0], int(args.worker[1]), args.iters, args.device)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/ski_scaling.py " + " ".join(sys.argv[1:] if argv is None else argv)
    rows = []
    jobs = [("exact", n) for n in args.exact_n] + [("ski", n) for n in args.ski_n]
    for method, n in jobs:
        iters = args.iters if method == "ski" or n <= 4000 else 1
        proc = subprocess.run([sys.executable, __file__, "--worker", method, str(n), "--iters", str(iters),
                               "--device", args.device], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{method} n={n} failed:\n{proc.stderr[-2000:]}", flush=True)
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{method:5s} n={n:7d}: {row['seconds_per_iter']:.3f} s/iter, peak RSS {row['peak_rss_mb']:.0f} MB",
              flush=True)
        with (args.out / "scaling.json").open("w") as fh:
            json.dump(rows, fh, indent=1)
        _report(rows, args.out, command)


if __name__ == "__main__":
    main()
