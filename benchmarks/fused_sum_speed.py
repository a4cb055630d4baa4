"""Seconds of the fused constrained-SE additive sum k(X, X) (value, then gradient against a random weight) by
row-block size and thread count, and of Duvenaud's SE base kernel and the GAM kernel through the same walk
against their older paths (issue #40; results in ``results/kernel_evaluation/fused_sum/``).

    python benchmarks/fused_sum_speed.py --n 5000            # OAK's walk: block sizes x threads
    python benchmarks/fused_sum_speed.py --n 2000 --others   # Additive (SE) and GAM: compiled walk vs old path

Random standard-normal inputs, unit length-scales, a random constraint term (u, v ~ 0.1 N(0, 1)); medians of
``--reps`` calls after a first (compiling) one.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from hdgp.kernels import SEKernel
from hdgp.kernels.additive_kernel import AdditiveKernel
from hdgp.kernels.functions.se_additive_sum import se_lower_additive_sum
from hdgp.kernels.functions.triangle import _row_blocks
from hdgp.kernels.gam_kernel import AdditiveRBFKernel, _AdditiveRBF


def _median(f, reps):
    f()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def walk(n: int, reps: int) -> None:
    rng = np.random.default_rng(0)
    for d, order in ((8, 8), (30, 3)):
        x = torch.tensor(rng.normal(size=(d, n, 1)))
        l2 = torch.ones(d, 1, 1, dtype=torch.float64, requires_grad=True)
        u = torch.tensor(0.1 * rng.normal(size=(d, n)), requires_grad=True)
        v = torch.tensor(0.1 * rng.normal(size=(d, n)), requires_grad=True)
        variances = torch.full((order + 1,), 0.5, dtype=torch.float64, requires_grad=True)
        weight = torch.tensor(rng.normal(size=(n, n)))
        for label, entries in (("n^2/32 entries", max(64, n * n // 32)), ("8 MB", 2**23 // (8 * d)),
                               ("2 MB", 2**21 // (8 * d))):
            bounds = _row_blocks(0, n, entries)
            for threads in (1, 2):
                torch.set_num_threads(threads)
                seconds = _median(lambda: (se_lower_additive_sum(x, bounds, l2, u, v, None, variances) * weight)
                                  .sum().backward(), reps)
                print(f"D={d} R={order} n={n} blocks={label} ({len(bounds)}) threads={threads}: value+gradient "
                      f"{seconds:.3f} s  load {os.getloadavg()[0]:.1f}", flush=True)


def others(n: int, reps: int) -> None:
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    rng = torch.Generator().manual_seed(0)
    for d, order in ((8, 8), (30, 10), (128, 10)):
        x = torch.randn(n, d, generator=rng)
        weight = torch.randn(n, n, generator=rng)
        additive = AdditiveKernel(SEKernel(d), num_dims=d, max_order=order)
        params = [p for p in additive.parameters() if p.requires_grad]
        compiled = _median(lambda: torch.autograd.grad((additive.forward(x, x) * weight).sum(), params), reps)
        walk_methods = SEKernel.lower_additive_sum, SEKernel.cross_additive_sum
        SEKernel.lower_additive_sum = SEKernel.cross_additive_sum = None  # the base-block path
        try:
            blocks = _median(lambda: torch.autograd.grad((additive.forward(x, x) * weight).sum(), params), reps)
        finally:
            del SEKernel.lower_additive_sum, SEKernel.cross_additive_sum  # the mixin's again
        assert (SEKernel.lower_additive_sum, SEKernel.cross_additive_sum) == walk_methods
        gam = AdditiveRBFKernel(ard_num_dims=d)
        walked = _median(lambda: torch.autograd.grad((gam.forward(x, x) * weight).sum(), [gam.raw_lengthscale]), reps)
        looped = _median(lambda: torch.autograd.grad((_AdditiveRBF.apply(x, x, gam.lengthscale) * weight).sum(),
                                                     [gam.raw_lengthscale]), reps)
        print(f"n={n} D={d}: Additive R={order} walk {compiled:.3f} s, base blocks {blocks:.3f} s; "
              f"GAM walk {walked:.3f} s, feature loop {looped:.3f} s  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--others", action="store_true")
    args = parser.parse_args()
    (others if args.others else walk)(args.n, args.reps)
