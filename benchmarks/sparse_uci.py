"""Sparse / variational GP regression on the large UCI sets vs the OAK paper's Tables 5–6.

Fits each (data set, model, split) through the public preset API, appends each
finished result to a JSON-lines store immediately (a rerun skips what is done)
and writes a Markdown report beside the paper's numbers.

Metrics are on the target standardised with training statistics, as in the paper:
test RMSE and mean test log-likelihood :math:`\\frac1t\\sum \\log N(y_* \\mid \\mu_*, s_*^2)`.

Example
-------
    HDGP_DATA_DIR=../shared/data python benchmarks/sparse_uci.py \\
        --datasets kin40k protein --models SGPR-RBF-ARD --splits 0 --threads 2
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

import hdgp
from hdgp.data.uci import load_uci

#: OAK-paper names of our data sets (reference/README.md).
_PAPER_NAMES = {"keggdirected": "keggdirect", "housing": "boston"}


def _reference(ref_dir: Path) -> dict:
    table = {}
    for metric, name in (("rmse", "oak_table5_regression_rmse.csv"), ("loglik", "oak_table6_regression_loglik.csv")):
        path = ref_dir / name
        if not path.is_file():
            continue
        with open(path) as fh:
            for row in csv.DictReader(fh):
                if row["mean"]:
                    table[(row["dataset"], row["model"], metric)] = (float(row["mean"]), float(row["std"] or "nan"))
    return table


def _done(store: Path) -> dict:
    """The store's records by (dataset, model, split, m); a later line (``--rerun``) replaces an earlier one."""
    if not store.is_file():
        return {}
    out = {}
    for line in store.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[(rec["dataset"], rec["model"], rec["split"], rec["n_inducing"])] = rec
    return out


def _label(model: str, params: dict) -> str:
    """``OAK`` or, with extra parameters, ``OAK(max_order=3)`` (the store's model key)."""
    return model + (f"({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})" if params else "")


def _params(items) -> dict:
    out = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"--param expects KEY=VALUE, got {item!r}")
        out[key] = json.loads(raw)
    return out


def run_one(dataset: str, model: str, split: int, n_inducing: int, max_iter, seed: int, verbose: bool = False,
            params: dict | None = None) -> dict:
    X_tr, y_tr, X_te, y_te, _ = load_uci(dataset, split)
    overrides = dict(params or {}, n_inducing=n_inducing, random_state=seed, verbose=verbose)
    if max_iter is not None:
        overrides["max_iter"] = max_iter
    est = hdgp.preset(model, **overrides)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    est.fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t0
    load_after = os.getloadavg()[0]
    t0 = time.perf_counter()
    mean, std = est.predict(X_te, return_std=True)
    pred_s = time.perf_counter() - t0
    y_scale = float(np.std(y_tr))
    z = (y_te - mean) / std
    loglik_std = float(np.mean(-0.5 * np.log(2 * np.pi * (std / y_scale) ** 2) - 0.5 * z**2))
    return dict(
        dataset=dataset, model=_label(model, params or {}), split=split, n_inducing=n_inducing,
        n_train=len(y_tr), n_test=len(y_te), d=X_tr.shape[1],
        inference=est.inference_, fit_seconds=round(fit_s, 2), predict_seconds=round(pred_s, 2),
        n_iter=int(getattr(est, "n_iter_", est.fit_result_.n_evaluations)),
        converged=bool(est.fit_result_.converged),
        rmse=float(np.sqrt(np.mean((y_te - mean) ** 2)) / y_scale), loglik=loglik_std,
        noise_std=float(math.sqrt(float(est.model_.noise)) * est.y_scale_ / y_scale),
        threads=torch.get_num_threads(), load_avg=round((load_before + load_after) / 2, 1), torch=torch.__version__, machine=platform.machine(),
        time=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    )


def report(records: list, ref: dict, path: Path) -> None:
    commands = sorted({r.get("command", "n/a") for r in records})
    lines = [
        "# Sparse / variational GP regression on large UCI sets",
        "",
        "Commands (each record in `sparse_uci.jsonl` stores its own):",
        "",
        *[f"- `{c}`" for c in commands],
        "",
        "Timings are wall-clock on a shared 2-core machine; `load` is the 1-minute load average",
        "during the fit (values far above 2 mean the fit shared the cores with other jobs).",
        "",
        "Test RMSE and mean test log-likelihood on the standardised target (training statistics).",
        "Paper: OAK paper (Lu et al. 2022) Tables 5–6, mean ± std over 10 random 90/10 splits",
        "(their splits are not ours; ours are the fixed `uci/` splits).",
        "",
        "| data set | model | split | m | n train | fit [s] | iters | threads | load | RMSE | log-lik "
        "| paper OAK RMSE | paper SVGP RMSE | paper OAK log-lik | paper SVGP log-lik |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def fmt(key):
        return f"{ref[key][0]:.3f} ± {ref[key][1]:.3f}" if key in ref else "–"

    for r in sorted(records, key=lambda r: (r["dataset"], r["model"], r["n_inducing"], r["split"])):
        pn = _PAPER_NAMES.get(r["dataset"], r["dataset"])
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['split']} | {r['n_inducing']} | {r['n_train']} "
            f"| {r['fit_seconds']:.0f} | {r['n_iter']} | {r['threads']} | {r.get('load_avg', '–')} "
            f"| {r['rmse']:.3f} | {r['loglik']:.3f} "
            f"| {fmt((pn, 'OAK', 'rmse'))} | {fmt((pn, 'SVGP', 'rmse'))} "
            f"| {fmt((pn, 'OAK', 'loglik'))} | {fmt((pn, 'SVGP', 'loglik'))} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["kin40k", "protein", "elevators", "keggdirected"])
    parser.add_argument("--models", nargs="+", default=["SGPR-RBF-ARD"])
    parser.add_argument("--splits", nargs="+", type=int, default=[0])
    parser.add_argument("--n-inducing", nargs="+", type=int, default=[512])
    parser.add_argument("--max-iter", type=int, default=None)
    parser.add_argument("--param", action="append", metavar="KEY=VALUE",
                        help="extra estimator parameter, value as JSON (e.g. --param max_order=3); repeatable")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "scale")
    parser.add_argument("--verbose", action="store_true", help="progress bars (stderr)")
    parser.add_argument("--report-only", action="store_true", help="only rewrite the report from the store")
    parser.add_argument("--rerun", action="store_true",
                        help="fit runs already in the store again; the new record replaces the old in the report")
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder with the OAK reference CSVs (default: $HDGP_DATA_DIR/../reference)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "sparse_uci.jsonl"
    done = _done(store)
    command = "python benchmarks/sparse_uci.py " + " ".join(argv if argv is not None else sys.argv[1:])
    params = _params(args.param)
    for dataset in [] if args.report_only else args.datasets:
        for model in args.models:
            for m in args.n_inducing:
                for split in args.splits:
                    if (dataset, _label(model, params), split, m) in done and not args.rerun:
                        continue
                    rec = run_one(dataset, model, split, m, args.max_iter, args.seed, args.verbose, params)
                    rec["command"] = command
                    with open(store, "a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    done[(dataset, rec["model"], split, m)] = rec
                    sys.stderr.write(f"{json.dumps(rec)}\n")
    ref_dir = args.reference
    if ref_dir is None:
        from hdgp.data._paths import find_data_dir
        root = find_data_dir()
        ref_dir = root.parent / "reference" if root is not None else Path("reference")
    report(list(done.values()), _reference(ref_dir), args.out / "sparse_uci.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
