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

``--profile`` also records where a fit's time goes (``stages``: the input transform and flow, k-means
inducing inputs, every hyperparameter fit with its rows, evaluations and seconds, the Sobol indices;
what is left is the posterior and bookkeeping), and the 1-minute load average before and after.
``--cap SECONDS`` stops a fit after that long (SIGALRM), recording how far it got.
``--eval-cost`` times single objective evaluations (value + gradient) at full size instead of fitting:
each model is fitted with ``max_iter=1`` (its default start and inducing points), its kernel and noise
parameters are made trainable again and ``--reps`` evaluations are timed, one process, one thread::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/sparse_uci.py --eval-cost \\
        --datasets kin40k --models SGPR-RBF-ARD OAK --threads 1 --out <folder>
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
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
            if "stopped_after_s" not in rec:  # a fit stopped at --cap is not done
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


class Stop(Exception):
    """Raised by SIGALRM inside a fit that ran past ``--cap``."""


def _alarm(signum, frame):
    raise Stop


def git_rev() -> str:
    """The commit of the hdgp sources imported (``+dirty`` with uncommitted changes); ``HDGP_GIT_REV``
    names it for a ``git archive`` copy of a commit."""
    if os.environ.get("HDGP_GIT_REV"):
        return os.environ["HDGP_GIT_REV"]
    here = Path(hdgp.__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             cwd=here, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=here, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@contextmanager
def _stages(record: list):
    """Time the stages of a fit through the estimators' module attributes (restored afterwards): every
    ``fit_hyperparameters`` call (label, rows, evaluations, seconds), k-means, the input transform
    (OAK: flow and measures) and OAK's Sobol indices."""
    import hdgp.estimators._base as base
    import hdgp.explain as explain
    from hdgp.estimators.oak import OAKRegressor

    saved = [(base, "fit_hyperparameters"), (base, "kmeans_inducing_points"), (explain, "compute_sobol"),
             (OAKRegressor, "_transform_inputs")]
    originals = [(owner, name, owner.__dict__[name]) for owner, name in saved]

    def timed(label, function, describe=None):
        def wrapper(*args, **kwargs):
            entry = {"stage": label, "seconds": None}  # recorded up front: a fit stopped at --cap shows where
            record.append(entry)
            if label == "hyperparameters" and kwargs.get("callback") is None:
                entry.update(desc=kwargs.get("desc", ""), rows=int(args[1].shape[0]))
                kwargs["callback"] = lambda info: entry.update(evaluations=info["evaluations"],
                                                               elapsed=round(info["elapsed"], 1))
            t0 = time.perf_counter()
            out = function(*args, **kwargs)
            entry["seconds"] = round(time.perf_counter() - t0, 3)
            entry.update(describe(args, kwargs, out) if describe else {})
            return out
        return wrapper

    def fit_info(args, kwargs, out):
        return {"evaluations": out.n_evaluations, "loss": out.loss}

    def transform_info(args, kwargs, out):
        return {"fit": bool(kwargs.get("fit", args[2] if len(args) > 2 else False))}

    base.fit_hyperparameters = timed("hyperparameters", base.fit_hyperparameters, fit_info)
    base.kmeans_inducing_points = timed("k-means", base.kmeans_inducing_points)
    explain.compute_sobol = timed("sobol", explain.compute_sobol)
    OAKRegressor._transform_inputs = timed("transform", OAKRegressor.__dict__["_transform_inputs"], transform_info)
    try:
        yield record
    finally:
        for owner, name, value in originals:
            setattr(owner, name, value)


def _two_stage_fit(est, X, y, rows: int, iterations: int, first_inducing: int, seed: int) -> None:
    """The two-stage policy proposed for sparse OAK, through the public API: fit (order chosen from the data,
    ``first_inducing`` inducing points) on ``rows`` random training rows, then once on all rows from that fit
    (``warm_start``: its kernel and noise; the order it chose; the estimator's own ``n_inducing`` k-means
    inducing inputs; at most ``iterations`` L-BFGS iterations)."""
    keep = np.sort(np.random.default_rng(seed).choice(len(y), min(rows, len(y)), replace=False))
    n_inducing = est.n_inducing
    est.set_params(n_inducing=first_inducing, inference="sparse")  # sparse in both stages: the warm start needs one engine
    est.fit(X[keep], y[keep])
    est.set_params(warm_start=True, max_order=int(est.max_order_), max_iter=iterations, n_inducing=n_inducing)
    with warnings.catch_warnings():  # the capped full-data stage stops before L-BFGS's own rule, on purpose
        warnings.filterwarnings("ignore", message="Hyperparameter optimisation")
        est.fit(X, y)


def run_one(dataset: str, model: str, split: int, n_inducing: int, max_iter, seed: int, verbose: bool = False,
            params: dict | None = None, profile: bool = False, cap: int | None = None,
            two_stage: tuple | None = None) -> dict:
    X_tr, y_tr, X_te, y_te, _ = load_uci(dataset, split)
    overrides = dict(params or {}, n_inducing=n_inducing, random_state=seed, verbose=verbose)
    if max_iter is not None:
        overrides["max_iter"] = max_iter
    est = hdgp.preset(model, **overrides)
    load_before = os.getloadavg()[0]
    stages = []
    if cap:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(cap)
    fit = (lambda: _two_stage_fit(est, X_tr, y_tr, *two_stage, seed)) if two_stage else (lambda: est.fit(X_tr, y_tr))
    if two_stage:
        params = dict(params or {}, two_stage="{}rows/m{}+{}it".format(*two_stage[::2], two_stage[1]))
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        if profile:
            with _stages(stages):
                fit()
        else:
            fit()
    except Stop:
        return dict(dataset=dataset, model=_label(model, params or {}), split=split, n_inducing=n_inducing,
                    n_train=len(y_tr), d=X_tr.shape[1], stopped_after_s=round(time.perf_counter() - t0, 1),
                    stages=stages, threads=torch.get_num_threads(), load_before=load_before,
                    load_after=os.getloadavg()[0], hdgp_git=git_rev(),
                    time=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    finally:
        signal.alarm(0)
    fit_s = time.perf_counter() - t0
    fit_cpu_s = time.process_time() - c0
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
        inference=est.inference_, fit_seconds=round(fit_s, 2), fit_cpu_seconds=round(fit_cpu_s, 2),
        predict_seconds=round(pred_s, 2),
        n_iter=int(getattr(est, "n_iter_", est.fit_result_.n_evaluations)),
        converged=bool(est.fit_result_.converged),
        rmse=float(np.sqrt(np.mean((y_te - mean) ** 2)) / y_scale), loglik=loglik_std,
        noise_std=float(math.sqrt(float(est.model_.noise)) * est.y_scale_ / y_scale),
        threads=torch.get_num_threads(), load_avg=round((load_before + load_after) / 2, 1), torch=torch.__version__, machine=platform.machine(),
        time=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        **(dict(stages=stages, load_before=load_before, load_after=load_after, hdgp_git=git_rev(),
                max_order=getattr(est, "max_order_", None), start=getattr(est, "start_", None)) if profile else {}),
    )


def eval_cost(dataset: str, model: str, split: int, n_inducing: int, reps: int, seed: int,
              params: dict | None = None) -> dict:
    """Seconds of one objective evaluation (value + gradient: ``hdgp.training._objective`` then ``backward``)
    of ``model`` on the whole training split (see the module docstring)."""
    from hdgp.training import _objective

    X_tr, y_tr, _, _, _ = load_uci(dataset, split)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est = hdgp.preset(model, **dict(params or {}, n_inducing=n_inducing, random_state=seed, max_iter=1)).fit(X_tr, y_tr)
        setup_s = time.perf_counter() - t0
    m = est.model_
    for p in list(m.kernel.parameters()) + list(m.likelihood.parameters()):
        p.requires_grad_(True)
    X, y = est.X_train_, torch.as_tensor((y_tr - est.y_mean_) / est.y_scale_)
    load_before = os.getloadavg()[0]
    times, cpu = [], []
    for _ in range(reps):
        m.zero_grad(set_to_none=True)
        t0, c0 = time.perf_counter(), time.thread_time()
        _objective(m, X, y).backward()
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return dict(dataset=dataset, model=_label(model, params or {}), split=split, n_inducing=n_inducing,
                n_train=len(y_tr), d=X_tr.shape[1], inference=est.inference_, max_order=getattr(est, "max_order_", None),
                seconds=[round(t, 3) for t in times], median_s=round(float(np.median(times)), 3),
                thread_cpu_s=[round(t, 3) for t in cpu], median_cpu_s=round(float(np.median(cpu)), 3),
                setup_s=round(setup_s, 1), load_before=load_before, load_after=os.getloadavg()[0],
                threads=torch.get_num_threads(), hdgp_git=git_rev(), torch=torch.__version__,
                time=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))


def eval_report(out: Path) -> str:
    """``eval_cost.md`` from ``eval_cost.jsonl``: per data set and model the median seconds (wall and thread
    CPU) of one evaluation, its ratio to SGPR-RBF-ARD's of the same run and code, and the load."""
    records = [json.loads(line) for line in (out / "eval_cost.jsonl").read_text().splitlines() if line.strip()]
    lines = ["| data set (n × D) | model | code | R | m | s / evaluation (median of runs) | thread CPU s | "
             "÷ SGPR-RBF-ARD (wall / CPU) | load 1-min before→after |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in records:
        rbf = [q for q in records if q["dataset"] == r["dataset"] and q["model"] == "SGPR-RBF-ARD"
               and q["hdgp_git"] == r["hdgp_git"] and q["n_inducing"] == r["n_inducing"]]
        rbf = rbf or [q for q in records if q["dataset"] == r["dataset"] and q["model"] == "SGPR-RBF-ARD"]
        ratio = (f"{r['median_s'] / rbf[-1]['median_s']:.2f} / {r['median_cpu_s'] / rbf[-1]['median_cpu_s']:.2f}"
                 if rbf and r["model"] != "SGPR-RBF-ARD" else "")
        lines.append(f"| {r['dataset']} ({r['n_train']} × {r['d']}) | {r['model']} | {r['hdgp_git']} | "
                     f"{r.get('max_order') or '–'} | {r['n_inducing']} | {r['median_s']:.2f} {r['seconds']} | "
                     f"{r['median_cpu_s']:.2f} | {ratio} | {r['load_before']:.1f}→{r['load_after']:.1f} |")
    text = "\n".join(lines) + "\n"
    (out / "eval_cost.md").write_text(text)
    return text


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
    parser.add_argument("--report-only", action="store_true",
                        help="only rewrite the report from the store (with --eval-cost: eval_cost.md)")
    parser.add_argument("--rerun", action="store_true",
                        help="fit runs already in the store again; the new record replaces the old in the report")
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder with the OAK reference CSVs (default: $HDGP_DATA_DIR/../reference)")
    parser.add_argument("--profile", action="store_true", help="record the time of each stage of a fit")
    parser.add_argument("--cap", type=int, default=None, help="stop a fit after this many seconds")
    parser.add_argument("--eval-cost", action="store_true",
                        help="time single objective evaluations at full size instead of fitting (eval_cost.jsonl)")
    parser.add_argument("--reps", type=int, default=3, help="evaluations timed per model with --eval-cost")
    parser.add_argument("--label-suffix", default="", help="appended to the model label, e.g. '@594d642'")
    parser.add_argument("--two-stage", metavar="ROWS:ITERATIONS:M", default=None,
                        help="what-if of a proposed policy: fit with M inducing points on ROWS random training rows, "
                             "then warm on all rows with the order chosen there and at most ITERATIONS L-BFGS iterations")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.eval_cost and args.report_only:
        print(eval_report(args.out))
        return 0
    if args.eval_cost:
        params = _params(args.param)
        with open(args.out / "eval_cost.jsonl", "a") as fh:
            for dataset in args.datasets:
                for model in args.models:
                    for m in args.n_inducing:
                        rec = eval_cost(dataset, model, args.splits[0], m, args.reps, args.seed, params)
                        rec["model"] += args.label_suffix
                        fh.write(json.dumps(rec) + "\n")
                        fh.flush()
                        print(json.dumps(rec), flush=True)
        return 0
    store = args.out / "sparse_uci.jsonl"
    done = _done(store)
    command = "python benchmarks/sparse_uci.py " + " ".join(argv if argv is not None else sys.argv[1:])
    params = _params(args.param)
    two_stage = tuple(int(v) for v in args.two_stage.split(":")) if args.two_stage else None
    label_params = dict(params, two_stage="{}rows/m{}+{}it".format(*two_stage[::2], two_stage[1])) if two_stage else params
    for dataset in [] if args.report_only else args.datasets:
        for model in args.models:
            for m in args.n_inducing:
                for split in args.splits:
                    if (dataset, _label(model, label_params) + args.label_suffix, split, m) in done and not args.rerun:
                        continue
                    rec = run_one(dataset, model, split, m, args.max_iter, args.seed, args.verbose, params,
                                  args.profile, args.cap, two_stage)
                    rec["command"] = command
                    rec["model"] += args.label_suffix
                    with open(store, "a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    if "stopped_after_s" in rec:
                        sys.stderr.write(f"{json.dumps(rec)}\n")
                        continue
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
