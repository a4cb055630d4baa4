"""Coverage of the Sobol credible intervals (:func:`hdgp.sobol_intervals.sobol_intervals`).

Synthetic table with a known FANOVA decomposition: :math:`x \\sim N(0, I_3)`,

.. math::

    f(x) = a x_0 + b \\sin(x_1) + c\\, x_0 x_2, \\qquad y = f(x) + 0.3\\,\\varepsilon,

whose terms are zero-mean in each of their variables, so the true shares are
:math:`a^2 : b^2 (1 - e^{-2})/2 : c^2` for :math:`\\{0\\}, \\{1\\}, \\{0, 2\\}` (``true p``).
OAK integrates against the Gaussian measure it fits to the data, :math:`\\hat p_j = N(\\bar x_j, s_j^2)`;
under :math:`\\hat p` the decomposition of the same :math:`f` is also closed form (``fitted p``:
:math:`x_0 x_2` leaks :math:`c\\bar x_2 x_0` and :math:`c \\bar x_0 x_2` into first-order terms, and
:math:`\\operatorname{Var}\\sin(x_1)` changes with :math:`s_1`). The posterior method holds the measure and
the hyper-parameters fixed, so it targets the ``fitted p`` shares; the bootstrap refits both.

For each n, ``--reps`` independent tables are fitted (``OAKRegressor(max_order=2, flow=False)``,
warm-started from the previous draw's optimum) and the ``--level`` intervals of the three true terms
are checked against both truths. Output: JSON lines and a Markdown table.

Example
-------
    OMP_NUM_THREADS=1 python benchmarks/sobol_interval_coverage.py --out benchmarks/results/sobol-intervals
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from hdgp.estimators.oak import OAKRegressor
from hdgp.sobol_intervals import sobol_intervals

A, B, C, NOISE = 1.0, 1.5, 0.8, 0.3
TERMS = [(0,), (1,), (0, 2)]


def draw(n: int, rng):
    X = rng.standard_normal((n, 3))
    f = A * X[:, 0] + B * np.sin(X[:, 1]) + C * X[:, 0] * X[:, 2]
    return X, f + NOISE * rng.standard_normal(n)


def _var_sin(mu, s):
    """Variance of sin(x) under N(mu, s^2)."""
    return (1 - np.cos(2 * mu) * np.exp(-2 * s**2)) / 2 - (np.sin(mu) * np.exp(-s**2 / 2)) ** 2


def true_shares(X=None) -> dict:
    """Shares of every nonzero FANOVA term of f under N(0, I) (``X`` None) or under N(mean(X), std(X)^2)."""
    m, s = (np.zeros(3), np.ones(3)) if X is None else (X.mean(0), X.std(0))
    v = {(0,): (A + C * m[2]) ** 2 * s[0] ** 2, (1,): B**2 * _var_sin(m[1], s[1]),
         (2,): (C * m[0]) ** 2 * s[2] ** 2, (0, 2): C**2 * s[0] ** 2 * s[2] ** 2}
    total = sum(v.values())
    return {u: x / total for u, x in v.items()}


def run(n: int, reps: int, method: str, level: float, seed: int, n_boot: int) -> dict:
    rng = np.random.default_rng(seed)
    est = OAKRegressor(max_order=2, flow=False, warm_start=True)
    hits = {"fitted p": [], "true p": []}
    widths, stable, seconds = [], [], 0.0
    for _ in range(reps):
        X, y = draw(n, rng)
        est.fit(X, y)
        t0 = time.perf_counter()
        r = sobol_intervals(est, terms=TERMS, level=level, method=method, n_samples=1000, X=X, y=y, n_boot=n_boot,
                            random_state=int(rng.integers(1 << 30)))
        seconds += time.perf_counter() - t0
        for name, truth in (("fitted p", true_shares(X)), ("true p", true_shares())):
            hits[name] += [bool(lo <= truth[u] <= hi) for u, lo, hi in zip(r.terms, r.lower, r.upper)]
        widths.append(float(np.mean(r.upper - r.lower)))
        stable.append(r.rank_stable)
    out = {"n": n, "method": method, "level": level, "reps": reps, "intervals": len(hits["true p"]),
           "mean_width": float(np.mean(widths)), "mean_rank_stable": float(np.mean(stable)),
           "seconds_per_call": seconds / reps}
    for name, h in hits.items():
        out[f"coverage {name}"] = float(np.mean(h))
    # binomial spread of the hit rate at the nominal level
    out["binomial_sd"] = float(np.sqrt(level * (1 - level) / len(hits["true p"])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--boot-n", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--boot-reps", type=int, default=20)
    parser.add_argument("--n-boot", type=int, default=10)
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/sobol-intervals"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [run(n, args.reps, "posterior", args.level, 1000 + n, args.n_boot) for n in args.n]
    rows += [run(n, args.boot_reps, "bootstrap", args.level, 2000 + n, args.n_boot) for n in args.boot_n]
    with open(args.out / "coverage.jsonl", "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    keys = ["method", "n", "reps", "intervals", "coverage fitted p", "coverage true p", "binomial_sd", "mean_width",
            "mean_rank_stable", "seconds_per_call"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in keys) + " |")
    (args.out / "coverage.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
