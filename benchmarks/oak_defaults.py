"""OAK's default fit policy against RBF-ARD's default, in the same run (issues #40 and #41).

Every fit runs in this process on one thread (``torch.set_num_threads(1)``; set OMP_NUM_THREADS=1 and
MKL_NUM_THREADS=1 in the environment too), through the public API only:
``hdgp.preset(name, random_state=0, **params).fit(X_train, y_train)`` then
``predict(X_test, return_std=True)``. Inputs and target are z-scored with training statistics
(``hdgp.data.load(..., standardize=True)``), so RMSE and NLPD are on the standardised target.

Tables: the shared UCI sets pumadyn32nm, concrete and airfoil (their fixed splits), a 5,000-row
subset of kin40k's training rows (seeded by the split; its whole test split), and a synthetic
5,000 x 30 table (``friedman_table`` of ``profile_defaults.py``: Friedman #1 plus two pairwise
interactions, features beyond 7 are noise; seeded by the split; 1,000 test rows).

A fit is stopped after ``--cap`` seconds (SIGALRM raises inside it) and reported as "> cap" with no
accuracy. Each fit records ``os.getloadavg()`` before and after: the machine is shared, so compare
models through ratios within one run, not seconds across runs.

Writes one JSON record per fit to ``<out>/records-<tag>.jsonl``; ``--report`` writes
``<out>/tables.md`` from every ``records-*.jsonl`` there (a later record of the same fit replaces an
earlier one).

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/oak_defaults.py --splits 0 --cap 600 --tag a
    python benchmarks/oak_defaults.py --report
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/oak_defaults.py --eval-cost kin40k-5000   # per evaluation
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
DATASETS = ("concrete", "airfoil", "pumadyn32nm", "kin40k-5000", "synthetic-5000x30")
MODELS = ("OAK", "RBF-ARD")


class Stop(Exception):
    """Raised by SIGALRM inside a fit that ran past ``--cap``."""


def _alarm(signum, frame):
    raise Stop


def friedman_table(n: int, d: int, seed: int, n_test: int = 1000):
    """Friedman #1 on uniform inputs plus two pairwise interactions (as in ``profile_defaults.py``)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n + n_test, d))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
         + 4 * X[:, 5] * X[:, 6] + 3 * X[:, 0] * X[:, 7])
    y = f + rng.normal(size=len(f))
    return X[:n], y[:n], X[n:], y[n:]


def table(name: str, split: int):
    """``(X_train, y_train, X_test, y_test)``, z-scored with training statistics."""
    from hdgp.data import load

    if name.startswith("synthetic-"):
        n, d = (int(v) for v in name.split("-")[1].split("x"))
        Xtr, ytr, Xte, yte = friedman_table(n, d, seed=split)
    else:
        base, _, rows = name.partition("-")
        b = load(base, split=split)
        Xtr, ytr, Xte, yte = b.X_train, b.y_train, b.X_test, b.y_test
        if rows and len(ytr) > int(rows):
            keep = np.sort(np.random.default_rng(split).choice(len(ytr), int(rows), replace=False))
            Xtr, ytr = Xtr[keep], ytr[keep]
    mx, sx = Xtr.mean(0), Xtr.std(0)
    sx[sx == 0] = 1.0
    my, sy = ytr.mean(), ytr.std()
    return (Xtr - mx) / sx, (ytr - my) / sy, (Xte - mx) / sx, (yte - my) / sy


def git_rev() -> str:
    """The commit of this checkout (``+dirty`` with uncommitted changes); ``HDGP_GIT_REV`` names it for a
    copy of a commit made with ``git archive`` (so that edits in the checkout cannot reach a long run)."""
    if os.environ.get("HDGP_GIT_REV"):
        return os.environ["HDGP_GIT_REV"]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             cwd=HERE, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=HERE, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_one(dataset: str, model: str, params: dict, split: int, cap: int) -> dict:
    import hdgp

    Xtr, ytr, Xte, yte = table(dataset, split)
    record = {"dataset": dataset, "model": model, "params": params, "split": split, "n_train": len(ytr),
              "n_test": len(yte), "d": Xtr.shape[1], "load_before": os.getloadavg()[0],
              "started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    est = hdgp.preset(model, random_state=0, **params)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(cap)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Xtr, ytr)
        record["fit_s"] = time.perf_counter() - t0
    except Stop:
        record["fit_s"] = None
        record["stopped_after_s"] = time.perf_counter() - t0
    finally:
        signal.alarm(0)
    record["load_after"] = os.getloadavg()[0]
    if record["fit_s"] is None:
        return record
    t0 = time.perf_counter()
    mean, std = est.predict(Xte, return_std=True)
    record["predict_s"] = time.perf_counter() - t0
    var = np.maximum(std ** 2, 1e-12)
    record["rmse"] = float(np.sqrt(np.mean((mean - yte) ** 2)))
    record["nlpd"] = float(np.mean(0.5 * np.log(2 * math.pi * var) + 0.5 * (mean - yte) ** 2 / var))
    init = getattr(est, "init_result_", None)  # a subset start: its evaluations (on fewer rows) beside n_iter_
    if init is not None:
        record["init_evaluations"] = int(init.n_evaluations)
    for attr in ("inference_", "max_order_", "n_iter_", "start_losses_", "start_"):
        if hasattr(est, attr):
            value = getattr(est, attr)
            record[attr.rstrip("_")] = value if not isinstance(value, np.integer) else int(value)
    if hasattr(est, "sobol_order_"):
        record["sobol_order"] = [float(v) for v in est.sobol_order_]
    return record


EVAL_COST_MODELS = (("RBF-ARD", {"inference": "sparse"}), ("OAK", {"inference": "sparse"}),
                    ("OAK", {"inference": "sparse", "max_order": 3}), ("RBF-ARD", {"inference": "exact"}),
                    ("OAK", {"inference": "exact", "max_order": 3}))


def eval_cost(dataset: str, reps: int) -> None:
    """Seconds of one objective evaluation (value + gradient, ``hdgp.training._objective`` then
    ``backward``) of sparse and exact OAK and RBF-ARD on split 0 of ``dataset``, all in this process: each
    model is fitted with ``max_iter=1`` (its default number of inducing points and start), then its kernel
    and noise parameters are made trainable again and ``reps`` evaluations are timed."""
    import hdgp
    from hdgp.training import _objective

    Xtr, ytr, _, _ = table(dataset, 0)
    print(f"{dataset} {Xtr.shape} load {os.getloadavg()[0]:.1f}", flush=True)
    for model, params in EVAL_COST_MODELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = hdgp.preset(model, random_state=0, max_iter=1, **params).fit(Xtr, ytr)
        m = est.model_
        for p in list(m.kernel.parameters()) + list(m.likelihood.parameters()):
            p.requires_grad_(True)
        X, y = est.X_train_, torch.as_tensor((ytr - est.y_mean_) / est.y_scale_)
        times = []
        for _ in range(reps):
            m.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            _objective(m, X, y).backward()
            times.append(time.perf_counter() - t0)
        print(f"{model} {params} R={getattr(est, 'max_order_', '-')} s/eval median {np.median(times):.3f} "
              f"{[round(t, 3) for t in times]} load {os.getloadavg()[0]:.1f}", flush=True)


def report(out: Path) -> None:
    records = {}
    for path in sorted(out.glob("records-*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            records[(r["dataset"], r["label"], r["split"])] = r
    seen = {k[0] for k in records}
    datasets = [d for d in DATASETS if d in seen] + sorted(seen - set(DATASETS))
    labels = sorted({k[1] for k in records}, key=lambda s: (not s.startswith("OAK"), s != "RBF-ARD", s))
    lines = ["# OAK default vs RBF-ARD default (generated by `benchmarks/oak_defaults.py --report`)", "",
             "Per table and model: mean over the splits run (number of splits in brackets). Fit seconds on one "
             "thread of a shared 2-core machine (1-minute load average before / after the fits in the last "
             "columns); `> cap`: stopped.", "",
             "| table (n × D) | model | splits | fit s | fit / RBF-ARD | RMSE | NLPD | inference, order | load |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for d in datasets:
        rbf = [r["fit_s"] for k, r in records.items() if k[0] == d and k[1] == "RBF-ARD" and r.get("fit_s")]
        for label in labels:
            rows = [r for k, r in sorted(records.items()) if k[0] == d and k[1] == label]
            if not rows:
                continue
            done = [r for r in rows if r.get("fit_s") is not None]
            if done:
                fit = np.mean([r["fit_s"] for r in done])
                fit_s = f"{fit:.1f}" + (f" (+{len(rows) - len(done)} > cap)" if len(done) < len(rows) else "")
                ratio = f"{fit / np.mean(rbf):.2f}" if rbf else ""
                rmse, nlpd = (f"{np.mean([r[m] for r in done]):.4f}" for m in ("rmse", "nlpd"))
                how = ", ".join(sorted({f"{r.get('inference', '')} R={r['max_order']}" if "max_order" in r
                                        else str(r.get("inference", "")) for r in done}))
            else:
                fit_s = f"> {min(r['stopped_after_s'] for r in rows):.0f}"
                ratio = rmse = nlpd = how = ""
            load = ", ".join(f"{r['load_before']:.1f}/{r['load_after']:.1f}" for r in rows)
            lines.append(f"| {d} ({rows[0]['n_train']} × {rows[0]['d']}) | {label} | {len(rows)} | {fit_s} | "
                         f"{ratio} | {rmse} | {nlpd} | {how} | {load} |")
    revs = sorted({r.get("hdgp_git", "unknown") for r in records.values()})
    lines += ["", f"Code of the rows (hdgp_git): {', '.join(revs)}."]
    (out / "tables.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--models", default=",".join(MODELS),
                        help="preset names; NAME:key=value;key=value gives parameters (label NAME[key=value,...])")
    parser.add_argument("--splits", default="0")
    parser.add_argument("--cap", type=int, default=600, help="seconds before a fit is stopped")
    parser.add_argument("--tag", default="run")
    parser.add_argument("--label-suffix", default="",
                        help="appended to every label, e.g. '@c09c20c' for a run of an older commit's code "
                             "(PYTHONPATH pointing at its `git archive` copy, HDGP_GIT_REV naming it)")
    parser.add_argument("--out", default=str(HERE / "results" / "oak-defaults"))
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--eval-cost", metavar="DATASET",
                        help="time single objective evaluations of sparse/exact OAK and RBF-ARD on DATASET instead")
    parser.add_argument("--reps", type=int, default=3, help="evaluations timed per model with --eval-cost")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report:
        report(out)
        return
    torch.set_num_threads(1)
    if args.eval_cost:
        eval_cost(args.eval_cost, args.reps)
        return
    import hdgp

    meta = {"hdgp_git": git_rev(), "hdgp": hdgp.__version__, "torch": torch.__version__,
            "python": platform.python_version(), "cores": os.cpu_count()}
    with open(out / f"records-{args.tag}.jsonl", "a") as fh:
        for split in (int(s) for s in args.splits.split(",")):
            for dataset in args.datasets.split(","):
                for spec in args.models.split(","):
                    model, _, raw = spec.partition(":")
                    params = {}
                    for item in filter(None, raw.split(";")):
                        key, _, value = item.partition("=")
                        params[key] = json.loads(value) if value[:1] in '0123456789-[{tn"f' else value
                    label = model + (f"[{','.join(f'{k}={v}' for k, v in params.items())}]" if params else "")
                    label += args.label_suffix
                    record = {**run_one(dataset, model, params, split, args.cap), **meta, "label": label}
                    fh.write(json.dumps(record, default=str) + "\n")
                    fh.flush()
                    print(json.dumps({k: record.get(k) for k in ("dataset", "label", "split", "fit_s", "rmse",
                                                                 "nlpd", "inference", "max_order", "load_before")}),
                          flush=True)


if __name__ == "__main__":
    sys.exit(main())
