"""Speed and quality of OAK's input flow fit (:class:`hdgp.flows.SinhArcsinhFlow`), two source trees.

For every shared UCI set (training inputs of split 0) and synthetic skewed / heavy-tailed tables, fits
``SinhArcsinhFlow()`` (``log_transform="auto"``, OAK's default) in a fresh process per source tree —
``--before`` (another checkout's ``src``) and this checkout, alternating — on one thread, and reports the
fit's seconds (best of ``--repeats``) and the fitted KL objective of every warped feature
(:meth:`SinhArcsinhFlow._objective` of the standardised column at the fitted parameters; lower is better):
the largest increase after − before over the features (negative: the new fit ends lower).

Usage::

    HDGP_DATA_DIR=../shared/data python benchmarks/flow_fit_speed.py --before ../main-src/src \\
        --out benchmarks/results/flow_fit
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYNTHETIC = ("synthetic-skewed-1000x8", "synthetic-skewed-1000x20", "synthetic-skewed-5000x20", "synthetic-skewed-50000x8")


def _table(name: str):
    import numpy as np

    if name.startswith("synthetic"):
        n, d = map(int, name.rsplit("-", 1)[1].split("x"))
        rng = np.random.default_rng(0)
        kinds = [lambda: rng.lognormal(size=n), lambda: rng.standard_t(3, size=n), lambda: rng.gamma(2.0, size=n) - 3,
                 lambda: -rng.pareto(1.0, n), lambda: rng.uniform(size=n), lambda: rng.poisson(2.0, n).astype(float),
                 lambda: rng.normal(size=n), lambda: rng.exponential(size=n) ** 2]
        return np.column_stack([kinds[j % len(kinds)]() for j in range(d)])
    from hdgp.data import load

    return np.asarray(load(name, split=0).X_train, dtype=float)


def _child(name: str, repeats: int) -> None:
    import numpy as np

    from hdgp.flows import SinhArcsinhFlow

    X = _table(name)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        flow = SinhArcsinhFlow().fit(X)
        times.append(time.perf_counter() - t)
    U = (flow._pre(X) - flow.center_) / flow.scale_
    objective = [float(SinhArcsinhFlow._objective(U[:, j], flow.params_[j])[0]) if flow.warped_[j] else None
                 for j in range(X.shape[1])]
    print(json.dumps({"seconds": min(times), "objective": objective, "shape": list(X.shape),
                      "params": np.asarray(flow.params_).tolist()}))


def _run(src: str, name: str, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name, "--repeats", str(repeats)],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--before", help="src folder of the tree to compare against")
    parser.add_argument("--after", default=str(HERE.parent / "src"), help="src folder of the new tree (default: this checkout's)")
    parser.add_argument("--tables", default=None, help="comma-separated (default: every shared UCI set + synthetic)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.repeats)
        return
    if args.tables:
        tables = args.tables.split(",")
    else:
        sys.path.insert(0, str(HERE.parent / "src"))
        from hdgp.data.uci import uci_names

        tables = list(uci_names()) + list(SYNTHETIC)
    after = args.after
    lines = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    worst = -float("inf")
    for name in tables:
        load0 = os.getloadavg()[0]
        b = _run(args.before, name, args.repeats) if args.before else None
        a = _run(after, name, args.repeats)
        diffs = [fa - fb for fa, fb in zip(a["objective"], b["objective"]) if fa is not None] if b else []
        worst = max([worst, *diffs])
        n, d = a["shape"]
        line = (f"| {name} | {n}×{d} | {len(diffs)} | {b['seconds']:.3f} | {a['seconds']:.4f} | "
                f"{b['seconds'] / a['seconds']:.0f}× | {max(diffs, default=0):+.1e} | {min(diffs, default=0):+.1e} | "
                f"{load0:.1f} |" if b else f"| {name} | {n}×{d} | | | {a['seconds']:.4f} | | | | {load0:.1f} |")
        print(line, flush=True)
        lines.append(line)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "table.md", "w") as f:
            f.write(f"Started {started}; `python benchmarks/flow_fit_speed.py --repeats {args.repeats} "
                    f"--before <main's src> --out {args.out}` (one thread)\n\n")
            f.write("| table | n×D | warped features | before s | after s | speed-up | max objective "
                    "after − before | min | load 1-min |\n|---|---|---|---|---|---|---|---|---|\n")
            f.write("\n".join(lines) + f"\n\nLargest objective increase over all features: {worst:+.2e}\n")


if __name__ == "__main__":
    main()
