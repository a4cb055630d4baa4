"""Variational GP classification: GP-classifier (RBF-ARD) and OAK-classifier on small tabular sets.

Data: scikit-learn's breast-cancer (569 × 30) and the SIGP paper's ``heart`` (270 × 13)
and ``german`` (1000 × 24) from ``$HDGP_DATA_DIR/sigp``. Protocol: stratified random
80/20 splits (seeded); test accuracy, ROC AUC and mean test log-loss. Every finished
(data set, model, split) is appended to a JSON-lines store at once (reruns skip it)
and a Markdown table is written from the store.

Example
-------
    HDGP_DATA_DIR=../shared/data python benchmarks/classification.py --splits 0 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import train_test_split

import hdgp
from hdgp.data.sigp import load_sigp


def _load(name: str):
    if name == "breast-cancer":
        return load_breast_cancer(return_X_y=True)
    return load_sigp(name)


def run_one(dataset: str, model: str, split: int, n_inducing: int, max_iter, oak_max_order: int,
            optimizer: str) -> dict:
    X, y = _load(dataset)
    classes, y = np.unique(y, return_inverse=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=split, stratify=y)
    extra = {"max_order": oak_max_order} if model.lower().startswith("oak") else {}
    est = hdgp.preset(model, n_inducing=min(n_inducing, len(ytr)), max_iter=max_iter, optimizer=optimizer,
                      random_state=split, **extra)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    proba = est.predict_proba(Xte)[:, 1]
    rec = dict(dataset=dataset, model=model, split=split, n_inducing=est.n_inducing_, n_train=len(ytr),
               n_test=len(yte), d=X.shape[1], fit_seconds=round(fit_s, 2), n_iter=est.n_iter_,
               optimizer_arg=optimizer, optimizer=est.optimizer_,
               converged=all(r.converged for r in est.fit_results_),
               accuracy=accuracy_score(yte, (proba > 0.5).astype(int)), auc=roc_auc_score(yte, proba),
               log_loss=log_loss(yte, np.clip(proba, 1e-12, 1 - 1e-12)),
               threads=torch.get_num_threads(), load_avg=round((load_before + os.getloadavg()[0]) / 2, 1),
               time=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    if hasattr(est, "sobol_order_"):
        rec["sobol_order"] = [round(float(v), 4) for v in np.ravel(est.sobol_order_)]
        rec["top_terms"] = [[list(k), round(v, 4)] for k, v in list(est.sobol_indices_.items())[:5]]
    return rec


def _yes_no(flag) -> str:
    return "–" if flag is None else ("yes" if flag else "no")


def report(records: list, path: Path) -> None:
    commands = sorted({r.get("command", "n/a") for r in records})
    lines = ["# Variational GP classification", "", *[f"- `{c}`" for c in commands], "",
             "Stratified 80/20 split (seed = split). Timings: shared 2-core machine, `load` = 1-min load average.",
             "",
             "Optimiser: `lbfgs` = full-batch L-BFGS on the exact ELBO, `adam` = natural-gradient + Adam steps "
             "(records without the field predate the L-BFGS option); `conv.` = the stopping rule was met.",
             "",
             "| data set | model | split | optimiser | m | n train | d | fit [s] | steps | conv. | load | accuracy "
             "| AUC | log-loss | Sobol by order (OAK) |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in sorted(records, key=lambda r: (r["dataset"], r["model"], r["split"], r.get("optimizer", "adam"))):
        sob = ", ".join(f"{v:.3f}" for v in r.get("sobol_order", [])[:3]) or "–"
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['split']} | {r.get('optimizer', 'adam')} | {r['n_inducing']} "
            f"| {r['n_train']} | {r['d']} | {r['fit_seconds']:.0f} | {r['n_iter']} | {_yes_no(r.get('converged'))} "
            f"| {r['load_avg']} | {r['accuracy']:.3f} | {r['auc']:.3f} "
            f"| {r['log_loss']:.3f} | {sob} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["breast-cancer", "heart", "german"])
    parser.add_argument("--models", nargs="+", default=["GP-classifier", "OAK-classifier"])
    parser.add_argument("--splits", nargs="+", type=int, default=[0])
    parser.add_argument("--n-inducing", type=int, default=200)
    parser.add_argument("--max-iter", type=int, default=None)
    parser.add_argument("--oak-max-order", type=int, default=2)
    parser.add_argument("--optimizer", choices=["auto", "lbfgs", "adam"], default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "scale")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "classification.jsonl"
    done = {}
    if store.is_file():
        for line in store.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[(r["dataset"], r["model"], r["split"], r.get("optimizer_arg", "adam"))] = r
    command = "python benchmarks/classification.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for dataset in args.datasets:
        for model in args.models:
            for split in args.splits:
                key = (dataset, model, split, args.optimizer)
                if key in done:
                    continue
                rec = run_one(dataset, model, split, args.n_inducing, args.max_iter, args.oak_max_order,
                              args.optimizer)
                rec["command"] = command
                with open(store, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                done[key] = rec
                sys.stderr.write(json.dumps(rec) + "\n")
    report(list(done.values()), args.out / "classification.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
