"""Coverage of the Sobol credible intervals (:func:`hdgp.sobol_intervals.sobol_intervals`).

Synthetic tables with a known FANOVA decomposition, :math:`x \\sim N(0, I_3)`, :math:`y = f(x) + 0.3\\,\\varepsilon`:

- ``bounded``: :math:`f = \\sin x_0 + 2(\\cos x_1 - e^{-1/2}) + 1.5 \\sin x_0 \\sin x_2`;
- ``product``: :math:`f = x_0 + 1.5 \\sin x_1 + 0.8\\, x_0 x_2` (an interaction that grows without bound,
  where a GP with SE components reverts to its prior in the tails of the measure).

Every term is zero-mean in each of its variables under :math:`N(0, 1)`, so the true shares of
:math:`\\{0\\}, \\{1\\}, \\{0, 2\\}` are closed form (``true p``). OAK integrates against the Gaussian
measure it fits to the data, :math:`\\hat p_j = N(\\bar x_j, s_j^2)`; under :math:`\\hat p` the decomposition
of the same :math:`f` is also closed form (``fitted p``: the interaction leaks into first-order terms and
the variances change with :math:`\\bar x_j, s_j`). The posterior method holds the measure and the
hyper-parameters fixed, so it targets the ``fitted p`` shares; the bootstrap refits both.

For each n, ``--reps`` independent tables are fitted (``OAKRegressor(max_order=2, flow=False)``,
warm-started from the previous draw's optimum) and the 50 % and 90 % equal-tailed intervals of the three
true terms are checked against both truths. Output: JSON lines and a Markdown table.

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

NOISE = 0.3
TERMS = [(0,), (1,), (0, 2)]


def _gauss_trig(mu, s):
    """E sin x, Var sin x, Var cos x under N(mu, s^2)."""
    es, ec = np.sin(mu) * np.exp(-s**2 / 2), np.cos(mu) * np.exp(-s**2 / 2)
    vs = (1 - np.cos(2 * mu) * np.exp(-2 * s**2)) / 2 - es**2
    vc = (1 + np.cos(2 * mu) * np.exp(-2 * s**2)) / 2 - ec**2
    return es, vs, vc


def _measure(X):
    return (np.zeros(3), np.ones(3)) if X is None else (X.mean(0), X.std(0))


def product_f(X):
    """a x0 + b sin x1 + c x0 x2 (a, b, c = 1, 1.5, 0.8): the interaction grows without bound."""
    return 1.0 * X[:, 0] + 1.5 * np.sin(X[:, 1]) + 0.8 * X[:, 0] * X[:, 2]


def product_shares(X=None) -> dict:
    """Shares under N(mean(X), std(X)^2), or N(0, I) when X is None: x0 x2 = (m0 + s0 z0)(m2 + s2 z2)."""
    a, b, c = 1.0, 1.5, 0.8
    m, s = _measure(X)
    v = {(0,): (a + c * m[2]) ** 2 * s[0] ** 2, (1,): b**2 * _gauss_trig(m[1], s[1])[1],
         (2,): (c * m[0]) ** 2 * s[2] ** 2, (0, 2): c**2 * s[0] ** 2 * s[2] ** 2}
    total = sum(v.values())
    return {u: x / total for u, x in v.items()}


def bounded_f(X):
    """a sin x0 + b (cos x1 - e^{-1/2}) + c sin x0 sin x2 (a, b, c = 1, 2, 1.5): bounded terms."""
    return 1.0 * np.sin(X[:, 0]) + 2.0 * (np.cos(X[:, 1]) - np.exp(-0.5)) + 1.5 * np.sin(X[:, 0]) * np.sin(X[:, 2])


def bounded_shares(X=None) -> dict:
    """Shares under N(mean(X), std(X)^2), or N(0, I): sin x0 sin x2 = (e0 + d0)(e2 + d2) with e = E sin."""
    a, b, c = 1.0, 2.0, 1.5
    m, s = _measure(X)
    (e0, v0, _), (_, _, vc1), (e2, v2, _) = (_gauss_trig(m[j], s[j]) for j in range(3))
    v = {(0,): (a + c * e2) ** 2 * v0, (1,): b**2 * vc1, (2,): (c * e0) ** 2 * v2, (0, 2): c**2 * v0 * v2}
    total = sum(v.values())
    return {u: x / total for u, x in v.items()}


FUNCTIONS = {"bounded": (bounded_f, bounded_shares), "product": (product_f, product_shares)}
LEVELS = (0.5, 0.9)


def run(function: str, n: int, reps: int, method: str, seed: int, n_boot: int) -> dict:
    f, shares = FUNCTIONS[function]
    rng = np.random.default_rng(seed)
    est = OAKRegressor(max_order=2, flow=False, warm_start=True)
    hits = {(truth, level): [] for truth in ("fitted p", "true p") for level in LEVELS}
    widths, stable, seconds = [], [], 0.0
    for _ in range(reps):
        X = rng.standard_normal((n, 3))
        y = f(X) + NOISE * rng.standard_normal(n)
        est.fit(X, y)
        t0 = time.perf_counter()
        r = sobol_intervals(est, terms=TERMS, level=0.9, method=method, n_samples=1000, X=X, y=y, n_boot=n_boot,
                            random_state=int(rng.integers(1 << 30)))
        seconds += time.perf_counter() - t0
        for name, truth in (("fitted p", shares(X)), ("true p", shares())):
            t = np.array([truth[u] for u in TERMS])
            for level in LEVELS:
                lo, hi = np.quantile(r.samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
                hits[(name, level)] += list((lo <= t) & (t <= hi))
        widths.append(float(np.mean(r.upper - r.lower)))
        stable.append(r.rank_stable)
    out = {"function": function, "method": method, "n": n, "reps": reps, "intervals": reps * len(TERMS),
           "width90": float(np.mean(widths)), "rank_stable": float(np.mean(stable)), "seconds_per_call": seconds / reps}
    for (name, level), h in hits.items():
        out[f"{name} {level:.0%}"] = float(np.mean(h))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=list(FUNCTIONS))
    parser.add_argument("--n", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--boot-n", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--boot-reps", type=int, default=20)
    parser.add_argument("--n-boot", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/sobol-intervals"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for function in args.functions:
        rows += [run(function, n, args.reps, "posterior", 1000 + n, args.n_boot) for n in args.n]
        rows += [run(function, n, args.boot_reps, "bootstrap", 2000 + n, args.n_boot) for n in args.boot_n]
    with open(args.out / "coverage.jsonl", "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    keys = ["function", "method", "n", "reps", "intervals"] + [f"{t} {lv:.0%}" for t in ("fitted p", "true p")
                                                               for lv in LEVELS]
    keys += ["width90", "rank_stable", "seconds_per_call"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in keys) + " |")
    (args.out / "coverage.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
