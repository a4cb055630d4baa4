"""Sparse-OAK loss + gradient on a GPU with CPU-cache-sized vs GPU-sized tiles of the all-order sum.

The additive kernel's elementary-symmetric sum walks K_uf in tiles (``_CHUNK``
entries on the CPU). On a GPU each elementwise pass over a tile is a kernel launch,
so ``hdgp.kernels.functions.additive_sum`` sizes tiles there by ``_GPU_PREFIX_ENTRIES``.
This script fits a sparse OAK model (n = 15,000, d = 18, m = 256, orders up to 10)
for three iterations, then times loss + gradient with both tile sizes and prints
the loss and gradient norm of each (they must agree).

    python benchmarks/additive_gpu_tiles.py        # needs a CUDA GPU

Result (NVIDIA H200, recorded in benchmarks/README.md): 2.86 s with CPU-sized tiles,
0.096 s with GPU-sized ones, same loss and gradient.
"""

import argparse
import time

import numpy as np
import torch

import hdgp.kernels.functions.additive_sum as additive_sum_module
from hdgp.estimators import OAKRegressor


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("This benchmark needs a CUDA GPU (torch.cuda.is_available() is False).")
    rng = np.random.default_rng(0)
    n, d = 15000, 18
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    est = OAKRegressor(inference="sparse", n_inducing=256, max_iter=3, device="cuda", random_state=0).fit(X, y)
    model = est.model_
    Xt = torch.as_tensor(est._transform_inputs(X, fit=False), device="cuda")
    yt = torch.as_tensor((y - y.mean()) / y.std(), device="cuda")
    for p in model.parameters():
        p.requires_grad_(True)
    gpu_entries = additive_sum_module._GPU_PREFIX_ENTRIES
    for label, entries in (("CPU-sized tiles", 0), ("GPU-sized tiles", gpu_entries)):
        additive_sum_module._GPU_PREFIX_ENTRIES = entries  # 0 falls back to the CPU tile width
        times = []
        for _ in range(4):
            model.zero_grad()
            torch.cuda.synchronize()
            start = time.perf_counter()
            loss = model.neg_log_marginal_likelihood(Xt, yt)
            loss.backward()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        print(f"{label}: {np.median(times[1:]):.3f} s per loss + gradient (median of 3 after a warm-up), "
              f"loss {loss.item():.10g}, gradient norm {grad.norm().item():.10g}")
    additive_sum_module._GPU_PREFIX_ENTRIES = gpu_entries


if __name__ == "__main__":
    main()
