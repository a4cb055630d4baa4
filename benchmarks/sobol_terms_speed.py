"""Sobol index of every OAK term: compiled lower-triangle sums vs the tensor enumeration.

After every OAK fit, :func:`hdgp.explain.term_sobol` computes
:math:`R_u = \\sigma_{|u|}^4 \\alpha^\\top (\\odot_{i\\in u} L_i) \\alpha` (OAK eq. 14) for every
term up to the enumeration budget (100,000 terms: all orders up to 7 of D = 18). Timed here on
the Sobol matrices of constrained SE kernels under Gaussian measures:

- ``compiled``: the CPU path, :func:`hdgp.kernels._compiled.term_sums` (lower triangle, blocks
  of entries kept in cache, zero subtrees passed over);
- ``tensor``: the tensor enumeration other devices run (whole matrices, one matrix-vector
  product per leaf group), on contiguous Sobol matrices;
- ``tensor_strided``: the same on the matrices as the base kernel returns them (features
  innermost in memory), which is what the fits ran before :func:`hdgp.explain.sobol_matrices`
  made them contiguous.

Cases: an exact fit (housing-sized, n = 456, D = 13, R = 10: every term), a sparse fit
(elevators-sized: m = 512 inducing points, D = 18, R = 10: orders up to 7), and the same sparse
fit with 7 of 18 features switched off (length-scale 1e9: their Sobol matrices are exactly zero,
as those of 7 features of a sparse OAK fit on elevators; at 1e6 they hold rounding noise, 1e-16).
Values of the three paths agree to round-off (``max_rel_diff``).

Example
-------
    OMP_NUM_THREADS=1 python benchmarks/sobol_terms_speed.py
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import hdgp.kernels._compiled as compiled_module
from hdgp.explain import sobol_matrices, term_sobol
from hdgp.kernels.additive_kernel import AdditiveKernel
from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel
from hdgp.measures import gaussian_measure

CASES = {  # name: (n support points, D features, R max order, features switched off)
    "exact n=456 D=13 R=10": (456, 13, 10, 0),
    "sparse m=512 D=18 R=10": (512, 18, 10, 0),
    "sparse m=512 D=18 R=10, 7 off": (512, 18, 10, 7),
}


def _case(n, dims, order, off, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, dims, generator=gen, dtype=torch.float64)
    base = ConstrainedSEKernel(gaussian_measure(np.zeros(dims), np.ones(dims))).double()
    lengthscale = torch.linspace(0.5, 3.0, dims, dtype=torch.float64)
    lengthscale[dims - off:] = 1e9
    base.lengthscale = lengthscale.reshape(dims, 1, 1)
    kernel = AdditiveKernel(base, num_dims=dims, max_order=order).double()
    kernel.order_variances = torch.linspace(1.0, 0.1, order + 1, dtype=torch.float64)
    alpha = torch.randn(n, generator=gen, dtype=torch.float64)
    return kernel, X, alpha


def _time(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "oak" / "sobol_terms_speed.json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the enumeration budget's CostWarning at D = 18
    results = {"threads": torch.get_num_threads(), "cases": []}
    for name, (n, dims, order, off) in CASES.items():
        kernel, X, alpha = _case(n, dims, order, off)
        L = sobol_matrices(kernel, X)
        cols = X.T.unsqueeze(-1)
        with torch.no_grad():
            strided = kernel.base_kernel.sobol_integral(cols, cols)
        row = {"case": name, "n": n, "D": dims, "R": order, "features_off": off,
               "strided_layout": list(strided.stride())}
        term_sobol(kernel, L[:, :8, :8].contiguous(), alpha[:8])  # load the compiled loop once
        row["compiled_s"], (terms, compiled) = _time(lambda: term_sobol(kernel, L, alpha), args.repeats)
        compiled_module.ENABLED = False
        try:
            row["tensor_s"], (_, tensor) = _time(lambda: term_sobol(kernel, L, alpha), args.repeats)
            if not off:  # (the tensor path skips nothing: switched-off features do not change its time)
                row["tensor_strided_s"], (_, old) = _time(lambda: term_sobol(kernel, strided, alpha), 1)
        finally:
            compiled_module.ENABLED = True
        scale = tensor.abs().max()
        row["terms"] = len(terms)
        row["max_rel_diff"] = ((compiled - tensor).abs().max() / scale).item()
        row["speedup_vs_tensor"] = row["tensor_s"] / row["compiled_s"]
        if not off:
            row["max_rel_diff"] = max(row["max_rel_diff"], ((old - tensor).abs().max() / scale).item())
            row["speedup_vs_strided"] = row["tensor_strided_s"] / row["compiled_s"]
        results["cases"].append(row)
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
