"""The three GP classifiers' default presets against HistGradientBoosting, before and after a change.

Fits OAK-classifier, GP-classifier and SIGP-classifier (default presets, ``random_state=0``) and
scikit-learn's ``HistGradientBoostingClassifier`` on

- ``breast-cancer``: scikit-learn's ``load_breast_cancer`` (569 × 30), stratified 80/20 split;
- ``german``: the German credit table of the SIGP paper (``$HDGP_DATA_DIR/sigp/german.data``,
  1,000 × 24), stratified 80/20 split (skipped when the data folder is absent);
- ``synthetic-6000``: 6,000 training rows × 8 (Friedman #1 plus two interactions, the binary
  target 1{f + logistic noise > median f}, as ``profile_defaults.friedman_table``), 2,000 test rows.

Each fit runs in its own process, one torch thread, with the ``src`` folder of every code
version given by ``--src LABEL=PATH`` (e.g. the branch and a ``git worktree`` of ``main``), so
both versions run in the same session under the same load. It records fit seconds, test AUC,
log-loss and accuracy, the fit's CPU seconds (one thread: less sensitive to a shared machine's load than
the wall seconds) and the 1-minute load average before and after the fit (the machine is shared: compare
ratios within one run). One JSON record per line goes to ``--out``;
``--report`` turns the records into a Markdown table.

Run from the repository root::

    python benchmarks/classifier_defaults.py --src after=src --src before=../base/src \\
        --out benchmarks/results/classifier-defaults/records.jsonl
    python benchmarks/classifier_defaults.py --report benchmarks/results/classifier-defaults/records.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MODELS = ("OAK-classifier", "GP-classifier", "SIGP-classifier", "HGB")
DATASETS = ("breast-cancer", "german", "synthetic-6000")


def load(name: str, split: int = 0):
    import numpy as np
    from sklearn.model_selection import train_test_split

    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        return train_test_split(X, y, test_size=0.2, random_state=split, stratify=y)
    if name == "german":
        root = os.environ.get("HDGP_DATA_DIR")
        path = os.path.join(root, "sigp", "german.data") if root else None
        if path is None or not os.path.exists(path):
            return None
        data = np.loadtxt(path)
        X, y = data[:, :-1], (data[:, -1] == 2).astype(int)
        return train_test_split(X, y, test_size=0.2, random_state=split, stratify=y)
    if name == "synthetic-6000":
        n, n_test, d = 6000, 2000, 8
        rng = np.random.default_rng(split)
        X = rng.uniform(size=(n + n_test, d))
        f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
             + 4 * X[:, 5] * X[:, 6] + 3 * X[:, 0] * X[:, 7])
        y = (f + rng.logistic(scale=1.0, size=len(f)) > np.median(f)).astype(int)
        return X[:n], X[n:], y[:n], y[n:]
    raise ValueError(f"unknown data set {name!r}")


def run_one(model: str, dataset: str, split: int = 0) -> dict:
    """Fit one model on one data set in this process and return its record."""
    import warnings

    import numpy as np
    import torch
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    data = load(dataset, split)
    if data is None:
        return {"model": model, "data": dataset, "skipped": "data folder absent"}
    Xtr, Xte, ytr, yte = data
    if model == "HGB":
        from sklearn.ensemble import HistGradientBoostingClassifier

        est = HistGradientBoostingClassifier(random_state=0)
    else:
        import hdgp

        est = hdgp.preset(model, random_state=0)
    load_before = os.getloadavg()[0]
    start, cpu_start = time.perf_counter(), time.process_time()
    est.fit(Xtr, ytr)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    load_after = os.getloadavg()[0]
    p = np.clip(est.predict_proba(Xte)[:, 1], 1e-15, 1 - 1e-15)
    record = {"model": model, "data": dataset, "split": split, "n_train": int(len(ytr)), "d": int(Xtr.shape[1]),
              "fit_s": round(seconds, 2), "cpu_s": round(cpu, 2), "auc": round(float(roc_auc_score(yte, p)), 4),
              "log_loss": round(float(log_loss(yte, p)), 4),
              "accuracy": round(float(accuracy_score(yte, (p > 0.5).astype(int))), 4),
              "load_before": round(load_before, 2), "load_after": round(load_after, 2)}
    for attr in ("n_iter_", "n_inducing_"):
        if hasattr(est, attr):
            record[attr] = int(getattr(est, attr))
    return record


def report(path: str) -> str:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    lines = ["| data | split | model | version | fit s | CPU s | AUC | log-loss | accuracy | load before / after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r or "error" in r:
            lines.append(f"| {r['data']} | {r.get('split', 0)} | {r['model']} | {r.get('version', '')} | "
                         f"{r.get('skipped', r.get('error'))} | | | | | |")
            continue
        lines.append(f"| {r['data']} | {r.get('split', 0)} | {r['model']} | {r['version']} | {r['fit_s']} | {r.get('cpu_s', '')} | "
                     f"{r['auc']} | {r['log_loss']} | "
                     f"{r['accuracy']} | {r['load_before']} / {r['load_after']} |")
    groups: dict = {}
    for r in rows:
        if "fit_s" in r:
            groups.setdefault((r["data"], r["model"], r["version"]), []).append(r)
    lines += ["", "Means over the splits run:", "",
              "| data | model | version | splits | fit s | CPU s | AUC | log-loss | load |",
              "|---|---|---|---|---|---|---|---|---|"]
    for (data, model, version), rs in groups.items():
        mean = {k: sum(r.get(k, float("nan")) for r in rs) / len(rs)
                for k in ("fit_s", "cpu_s", "auc", "log_loss", "load_before")}
        lines.append(f"| {data} | {model} | {version} | {','.join(str(r.get('split', 0)) for r in rs)} | "
                     f"{mean['fit_s']:.1f} | {mean['cpu_s']:.1f} | {mean['auc']:.4f} | {mean['log_loss']:.4f} | "
                     f"{mean['load_before']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", default=[], help="LABEL=PATH of a code version's src folder")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--data", default=",".join(DATASETS))
    parser.add_argument("--out", help="JSON-lines file the records are appended to")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before one fit is stopped")
    parser.add_argument("--report", help="print the Markdown table of a records file and exit")
    parser.add_argument("--splits", default="0", help="comma-separated split seeds (train/test split, synthetic data)")
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "DATA", "SPLIT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report))
        return
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], int(args.one[2]))))
        return
    versions = [s.split("=", 1) for s in args.src] or [["current", "src"]]
    jobs = [(d, m, int(s)) for d in args.data.split(",") for s in args.splits.split(",") for m in args.models.split(",")]
    for dataset, model, split in jobs:
        for label, src in (versions if model != "HGB" else versions[:1]):
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            try:
                out = subprocess.run([sys.executable, __file__, "--one", model, dataset, str(split)], env=env,
                                     capture_output=True, text=True, timeout=args.timeout)
                record = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {
                    "model": model, "data": dataset, "split": split, "error": out.stderr.strip().splitlines()[-1:]}
            except subprocess.TimeoutExpired:
                record = {"model": model, "data": dataset, "split": split, "error": f"stopped after {args.timeout:.0f} s"}
            record["version"] = label if model != "HGB" else "-"
            print(json.dumps(record), flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
