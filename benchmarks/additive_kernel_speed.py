"""Additive-kernel evaluation + gradient: hdgp's recurrence vs naive Newton–Girard with autograd.

The naive baseline is what a direct transcription of Duvenaud eq. (1.13) / OAK
Algorithm 1 does: power sums :math:`S_k = \\sum_i K_i^k`, then
:math:`e_r = \\frac1r \\sum_k (-1)^{k-1} e_{r-k} S_k`, every intermediate kept by
autograd. hdgp's sum runs compiled on the CPU (``hdgp.kernels._compiled``); the tensor-tile version,
which other devices run, is timed too. All start from the same stack of D base matrices (SE, unit variance)
and differentiate :math:`\\sum_{ab} W_{ab} K_{ab}` with respect to the base matrices
and the order variances. Reports time, peak extra memory (tracemalloc is blind to
torch, so we count saved bytes analytically) and the max abs difference. Also times
the whole kernel with its SE base kernels, k(X) (row blocks of the lower triangle) against
k(X, copy of X) (the whole matrix), differentiated with respect to its parameters.

Example
-------
    OMP_NUM_THREADS=1 python benchmarks/additive_kernel_speed.py --n 1000 --dims 13 --order 13
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import hdgp.kernels._compiled as compiled_module
from hdgp.kernels import SEKernel
from hdgp.kernels.additive_kernel import AdditiveKernel, additive_sum, symmetric_additive_sum


def newton_girard(base: torch.Tensor, variances: torch.Tensor) -> torch.Tensor:
    """Order-by-order Newton–Girard with autograd (the baseline)."""
    max_order = variances.numel() - 1
    power, powers = torch.ones_like(base), []
    for _ in range(max_order):
        power = power * base
        powers.append(power.sum(0))
    e = [torch.ones_like(base[0])]
    for r in range(1, max_order + 1):
        acc = torch.zeros_like(base[0])
        for k in range(1, r + 1):
            acc = acc + (-1) ** (k - 1) * e[r - k] * powers[k - 1]
        e.append(acc / r)
    return sum(v * er for v, er in zip(variances, e))


def _time(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--dims", type=int, default=13)
    parser.add_argument("--order", type=int, default=13)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "oak" / "kernel_speed.json")
    args = parser.parse_args(argv)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.n, args.dims, generator=gen, dtype=torch.float64)
    ls = torch.linspace(0.5, 2.0, args.dims, dtype=torch.float64)
    # (D, n, n) in feature-major memory order, as AdditiveKernel lays the base matrices out
    base = torch.exp(-0.5 * ((x.T[:, :, None] - x.T[:, None, :]) / ls[:, None, None]) ** 2).contiguous()
    base.requires_grad_(True)
    variances = torch.rand(args.order + 1, generator=gen, dtype=torch.float64).requires_grad_(True)
    weight = torch.randn(args.n, args.n, generator=gen, dtype=torch.float64)

    def run(fn):
        base.grad = variances.grad = None
        (fn(base, variances) * weight).sum().backward()

    results = {"n": args.n, "D": args.dims, "R": args.order, "threads": torch.get_num_threads()}
    results["hdgp_fwd_s"] = _time(lambda: additive_sum(base.detach(), variances.detach()), args.repeats)
    results["hdgp_fwd_bwd_s"] = _time(lambda: run(additive_sum), args.repeats)
    g_fast = (base.grad.clone(), variances.grad.clone())
    # k(X, X) is symmetric: what AdditiveKernel runs for it (n >= 256, CPU) sums the lower triangle
    results["hdgp_triangle_fwd_s"] = _time(lambda: symmetric_additive_sum(base.detach(), variances.detach()),
                                           args.repeats)
    results["hdgp_triangle_fwd_bwd_s"] = _time(lambda: run(symmetric_additive_sum), args.repeats)
    # the same two sums as tensor tiles, the path of other devices (and of the CPU before the compiled kernels)
    compiled_module.ENABLED = False
    results["hdgp_tensor_fwd_bwd_s"] = _time(lambda: run(additive_sum), args.repeats)
    results["hdgp_tensor_triangle_fwd_bwd_s"] = _time(lambda: run(symmetric_additive_sum), args.repeats)
    compiled_module.ENABLED = True
    pairs = lambda g: g + g.transpose(1, 2)  # noqa: E731  (a base entry and its mirror are one value)
    results["triangle_max_abs_diff_grad_base_pairs"] = (pairs(base.grad) - pairs(g_fast[0])).abs().max().item()
    results["triangle_max_abs_diff_grad_variances"] = (variances.grad - g_fast[1]).abs().max().item()
    # the whole kernel, base kernels included: k(X) evaluates them on row blocks of the lower triangle,
    # k(X, copy of X) on the whole matrix; gradients reach the length-scales and order variances
    kernel = AdditiveKernel(SEKernel(args.dims), num_dims=args.dims, max_order=args.order).double()
    kernel.base_kernel.lengthscale = ls.reshape(-1, 1, 1)

    def run_kernel(second):
        kernel.zero_grad()
        (kernel(x, second(x)).to_dense() * weight).sum().backward()
        return [p.grad.clone() for p in kernel.parameters()]

    results["kernel_whole_fwd_bwd_s"] = _time(lambda: run_kernel(torch.clone), args.repeats)
    results["kernel_lower_blocks_fwd_bwd_s"] = _time(lambda: run_kernel(lambda t: t), args.repeats)
    results["kernel_lower_blocks_max_rel_diff_grad"] = max(
        ((a - b).abs().max() / b.abs().max()).item() for a, b in zip(run_kernel(lambda t: t), run_kernel(torch.clone)))
    with torch.no_grad():
        results["naive_fwd_s"] = _time(lambda: newton_girard(base, variances), args.repeats)
    results["naive_fwd_bwd_s"] = _time(lambda: run(newton_girard), args.repeats)
    with torch.no_grad():
        diff = (additive_sum(base, variances) - newton_girard(base, variances)).abs().max().item()
        results["max_abs_diff_value"] = diff
    results["max_abs_diff_grad_base"] = (g_fast[0] - base.grad).abs().max().item()
    mat = args.n * args.n * 8
    # saved for backward: hdgp keeps the base stack only (+ D·R tiles); naive keeps every power, e_r and product
    results["hdgp_saved_matrices"] = args.dims
    results["naive_saved_matrices_approx"] = args.dims * args.order + args.order * (args.order + 3) // 2
    results["bytes_per_matrix"] = mat
    results["speedup_fwd_bwd"] = results["naive_fwd_bwd_s"] / results["hdgp_fwd_bwd_s"]
    results["speedup_fwd_bwd_triangle"] = results["naive_fwd_bwd_s"] / results["hdgp_triangle_fwd_bwd_s"]
    results["speedup_compiled_vs_tensor_triangle"] = (results["hdgp_tensor_triangle_fwd_bwd_s"]
                                                      / results["hdgp_triangle_fwd_bwd_s"])
    results["speedup_kernel_lower_blocks"] = (results["kernel_whole_fwd_bwd_s"]
                                              / results["kernel_lower_blocks_fwd_bwd_s"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
