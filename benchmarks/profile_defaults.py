"""Where the time goes: end-to-end cProfile of hdgp's default presets on synthetic tables (issue #40, item 1).

Every fit runs in this process on one thread (``torch.set_num_threads(1)``; set OMP_NUM_THREADS=1 and
MKL_NUM_THREADS=1 in the environment too) under :mod:`cProfile`, through the public API only:
``hdgp.preset(name).fit(X, y)`` then ``predict`` / ``predict_proba`` on 1,000 new rows, and
``hdgp.workflow.fit_table(frame, target)`` for ``--model auto``. Nothing in hdgp is patched: the split
of a fit (flow, measures, starts, objective evaluations, kernel forward / backward, Cholesky, Sobol,
CV grids, auto's candidates) is read from the profile's per-function totals, from the fitted
attributes (``start_losses_``, ``fit_result_``, ``sobol_order_``, ``cv_scores_``) and from the
messages ``fit_table`` sends to its ``progress`` callback.

A fit is stopped after ``--cap`` seconds (SIGALRM raises inside it; its partial profile is kept and the
fit is reported as "> cap"); a model that hit the cap is not tried on any table at least as large in
both rows and features. Each fit records ``os.getloadavg()`` before and after: the machine is shared,
so compare models within one run. The floors of one objective evaluation use rates measured in the
same run: ``torch.linalg.cholesky`` GFLOP/s at the fit's n, and the per-element time of a fused
multiply-add on an n x n block (``torch.addcmul``).

Writes, under ``--out``: ``<model>_<n>x<d>.txt`` (the raw cProfile summaries, cumulative and own
time), ``records-<tag>.jsonl`` (one record per fit) and, with ``--report``, ``tables.md`` from every
``records-*.jsonl`` there (a later file's record of the same fit replaces an earlier one). The analysis,
``README.md`` there, is written by hand from those tables.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/profile_defaults.py \
        --models OAK,OAK-classifier --sizes 1000x8,1000x20,3000x8 --cap 150 --tag a
    python benchmarks/profile_defaults.py --report
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import platform
import pstats
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "profiles"
N_TEST = 1000
REGRESSORS = ("OAK", "DPA-GP-ARD", "RBF-ARD", "HGB")
CLASSIFIERS = ("OAK-classifier", "GP-classifier", "SIGP-classifier", "HGB-classifier")
AUTO = ("auto", "auto-classifier")


class FitCapped(BaseException):
    """Raised by SIGALRM inside a fit that ran past the cap (a BaseException, so no ``except Exception``
    in hdgp, e.g. auto's per-candidate guard, swallows it)."""


def _alarm(signum, frame):
    raise FitCapped


# ----------------------------------------------------------------------------- data
def friedman_table(n: int, d: int, seed: int = 0):
    """Friedman #1 on uniform inputs plus two pairwise interactions; the features beyond 7 are noise.

    f(x) = 10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4 + 4 x5 x6 + 3 x0 x7 (x7 only if d > 7),
    y = f + N(0, 1); the binary target is 1{f + logistic noise > median f}.
    """
    if d < 7:
        raise ValueError(f"friedman_table needs at least 7 features (x0..x6 carry the signal), got {d}.")
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n + N_TEST, d))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
         + 4 * X[:, 5] * X[:, 6] + (3 * X[:, 0] * X[:, 7] if d > 7 else 0.0))
    y = f + rng.normal(size=len(f))
    yc = (f + rng.logistic(scale=1.0, size=len(f)) > np.median(f)).astype(int)
    return X[:n], y[:n], yc[:n], X[n:], y[n:], yc[n:]


# ----------------------------------------------------------------------------- floors
_CHOL_CACHE: dict = {}


def cholesky_rate(n: int) -> dict:
    """Best-of-3 seconds and GFLOP/s (n^3/3 flops) of torch.linalg.cholesky on an SPD n x n float64
    matrix, and the per-element seconds of torch.addcmul on an n x n block (the kernel-sum rate)."""
    if n in _CHOL_CACHE:
        return _CHOL_CACHE[n]
    g = torch.Generator().manual_seed(0)
    A = torch.randn(n, min(n, 64), generator=g, dtype=torch.float64)
    K = A @ A.T + n * torch.eye(n, dtype=torch.float64)
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        torch.linalg.cholesky(K)
        best = min(best, time.perf_counter() - t)
    m = min(n, 2000)
    a, b, c = (torch.rand(m, m, generator=g, dtype=torch.float64) for _ in range(3))
    fma = math.inf
    for _ in range(5):
        t = time.perf_counter()
        torch.addcmul(c, a, b, out=c)
        fma = min(fma, (time.perf_counter() - t) / (m * m))
    exp = math.inf
    for _ in range(3):
        t = time.perf_counter()
        torch.exp(a)
        exp = min(exp, (time.perf_counter() - t) / (m * m))
    mm = math.inf
    a1, b1 = a[:1000, :1000].contiguous(), b[:1000, :1000].contiguous()
    for _ in range(3):
        t = time.perf_counter()
        a1 @ b1
        mm = min(mm, time.perf_counter() - t)
    k = a1.shape[0]
    out = {"n": n, "chol_s": best, "chol_gflops": n ** 3 / 3 / best / 1e9, "fma_ns_per_elem": fma * 1e9,
           "exp_ns_per_elem": exp * 1e9, "matmul_gflops": 2 * k ** 3 / mm / 1e9}
    del K, A
    _CHOL_CACHE[n] = out
    return out


def evaluation_floor(model: str, n: int, d: int, rate: dict, est) -> dict | None:
    """Seconds of one objective evaluation (value + gradient) at its arithmetic floor.

    Exact GP: one Cholesky (n^3/3 flops at the measured rate) + the kernel on the n(n+1)/2 lower
    triangle: OAK's Newton-Girard sum over R orders of D constrained SE kernels costs D R fused
    multiply-adds per entry forward and about 2 D R backward, plus D exp; RBF-ARD D + 1 exp, DPA-GP-ARD
    J = 20 projections (J exps). SVGP (M inducing points): K_nm with n M D (R for OAK) terms and the
    n M^2 + M^3/3 matrix products at the measured matmul rate.
    """
    fma, ex = rate["fma_ns_per_elem"] * 1e-9, rate["exp_ns_per_elem"] * 1e-9
    chol = rate["chol_s"]
    tri = n * (n + 1) / 2
    if model == "OAK" and getattr(est, "inference_", "exact") == "exact":
        R = int(getattr(getattr(est, "kernel_", None), "max_order", min(d, 10)) or min(d, 10))
        kern = tri * (3 * d * R * fma + d * ex)
        return {"cholesky_s": chol, "kernel_s": kern, "floor_s": chol + kern, "terms": f"n={n}, D={d}, R={R}"}
    if model == "RBF-ARD":
        kern = tri * (3 * d * fma + ex)
        return {"cholesky_s": chol, "kernel_s": kern, "floor_s": chol + kern, "terms": f"n={n}, D={d}"}
    if model == "DPA-GP-ARD":
        J = 20
        kern = tri * (3 * (d + J) * fma + J * ex)
        return {"cholesky_s": chol, "kernel_s": kern, "floor_s": chol + kern, "terms": f"n={n}, D={d}, J={J}"}
    if model in ("GP-classifier", "OAK-classifier"):
        M = int(getattr(est, "n_inducing_", 200) or 200)
        R = min(d, 10) if model == "OAK-classifier" else 1
        mm = rate["matmul_gflops"] * 1e9
        kern = n * M * (3 * d * R * fma + d * ex)
        lin = (2 * n * M * M + M ** 3 / 3) / mm
        return {"cholesky_s": lin, "kernel_s": kern, "floor_s": lin + kern, "terms": f"n={n}, M={M}, D={d}, R={R}"}
    return None


# ----------------------------------------------------------------------------- profile reading
def _fn_key(key) -> str:
    file, line, name = key
    if file == "~":
        return name
    parts = Path(file).parts
    short = "/".join(parts[parts.index("hdgp"):]) if "hdgp" in parts else "/".join(parts[-2:])
    return f"{short}:{line}({name})"


def profile_parts(stats: pstats.Stats) -> dict:
    """Named totals read from the profile: (calls, cumulative seconds) per part of a fit."""
    raw = stats.stats  # {(file, line, func): (cc, nc, tt, ct, callers)}

    def find(file_end: str, func: str):
        calls = cum = 0.0
        for (file, _line, name), (_cc, nc, _tt, ct, _callers) in raw.items():
            if name == func and file.replace("\\", "/").endswith(file_end):
                calls += nc
                cum = max(cum, ct)  # recursive entries: the outermost cumulative time
        return int(calls), cum

    def builtin(substr: str):
        calls = own = 0.0
        for (file, _line, name), (_cc, nc, tt, _ct, _callers) in raw.items():
            if file == "~" and substr in name:
                calls += nc
                own += tt
        return int(calls), own

    parts = {
        "lbfgs_evaluation": find("hdgp/training.py", "fun"),
        "objective_forward": find("hdgp/training.py", "_objective"),
        "fit_hyperparameters": find("hdgp/training.py", "fit_hyperparameters"),
        "tensor_backward": find("torch/_tensor.py", "backward"),
        "fit_candidate": find("hdgp/estimators/_base.py", "_fit_candidate"),
        "flow_fit": find("hdgp/flows.py", "fit"),
        "measure_gaussian": find("hdgp/measures.py", "gaussian_measure"),
        "measure_empirical": find("hdgp/measures.py", "empirical_measure"),
        "measure_gmm": find("hdgp/measures.py", "gaussian_mixture_measure"),
        "additive_kernel_forward": find("hdgp/kernels/additive_kernel.py", "forward"),
        "additive_kernel_backward": find("hdgp/kernels/additive_kernel.py", "backward"),
        "constrained_se_forward": find("hdgp/kernels/orthogonal_kernel.py", "forward"),
        "additive_sum": find("hdgp/kernels/additive_kernel.py", "additive_sum"),
        "symmetric_additive_sum": find("hdgp/kernels/additive_kernel.py", "symmetric_additive_sum"),
        "sobol_compute": find("hdgp/explain.py", "compute_sobol"),
        "sobol_term": find("hdgp/explain.py", "term_sobol"),
        "sobol_order": find("hdgp/explain.py", "order_sobol"),
        "select_terms": find("hdgp/explain.py", "select_terms"),
        "posterior": find("hdgp/inference/exact.py", "posterior"),
        "kmeans_start": find("hdgp/estimators/_base.py", "_kmeans_start"),
        "subset_start": find("hdgp/estimators/_base.py", "_initialise_from_subset"),
        "fit_svgp": find("hdgp/inference/variational.py", "fit_svgp"),
        "sigp_cross_validate": find("hdgp/sigp/cv.py", "cross_validate"),
        "sigp_out_of_fold": find("hdgp/sigp/cv.py", "out_of_fold_means"),
        "auto_select": find("hdgp/workflow/select.py", "_select"),
        "auto_score": find("hdgp/workflow/select.py", "_score"),
        "fit_table_fit": find("hdgp/workflow/fitting.py", "_fit"),
        "cholesky_builtin": builtin("cholesky"),
        "triangular_solve_builtin": builtin("solve_triangular"),
        "cholesky_solve_builtin": builtin("cholesky_solve"),
        "autograd_engine_builtin": builtin("run_backward"),
        "scipy_lbfgsb_builtin": builtin("setulb"),
    }
    return {k: {"calls": int(v[0]), "seconds": round(float(v[1]), 4)} for k, v in parts.items() if v[0]}


def write_profile_text(stats: pstats.Stats, path: Path, header: str) -> None:
    buf = io.StringIO()
    buf.write(header + "\n\n")
    s = stats
    s.stream = buf
    buf.write("=== top 45 by cumulative time ===\n")
    s.sort_stats("cumulative").print_stats(45)
    buf.write("\n=== top 35 by own time ===\n")
    s.sort_stats("tottime").print_stats(35)
    text = buf.getvalue()
    for prefix in sorted({str(Path(p).parent) for p in sys.path if p}, key=len, reverse=True):
        text = text.replace(prefix + os.sep, "")
    path.write_text(text)


# ----------------------------------------------------------------------------- one fit
def _estimator(model: str, seed: int, overrides=None):
    import hdgp

    if model == "HGB":
        from sklearn.ensemble import HistGradientBoostingRegressor
        return HistGradientBoostingRegressor(random_state=seed)
    if model == "HGB-classifier":
        from sklearn.ensemble import HistGradientBoostingClassifier
        return HistGradientBoostingClassifier(random_state=seed)
    return hdgp.preset(model, random_state=seed, **(overrides or {}))


def _fitted_facts(model: str, est) -> dict:
    facts = {}
    for attr in ("inference_", "n_iter_", "best_candidate_", "start_", "n_inducing_", "rank_"):
        v = getattr(est, attr, None)
        if isinstance(v, (int, float, str, np.integer, np.floating)):
            facts[attr] = v.item() if hasattr(v, "item") else v
    losses = getattr(est, "start_losses_", None)
    if losses:
        facts["start_losses_"] = {k: float(v) for k, v in losses.items()}
    fr = getattr(est, "fit_result_", None)
    if fr is not None:
        facts["n_evaluations"] = int(getattr(fr, "n_evaluations", 0) or 0)
        facts["converged"] = bool(getattr(fr, "converged", True))
    kern = getattr(est, "kernel_", None)
    if kern is not None and hasattr(kern, "max_order"):
        facts["max_order"] = int(kern.max_order)
    order = getattr(est, "sobol_order_", None)
    if order is not None:
        order = np.asarray(order, float)
        facts["sobol_by_order"] = [round(float(v), 5) for v in order]
    si = getattr(est, "sobol_indices_", None)
    if si is not None:
        facts["sobol_terms"] = len(si)
    comps = getattr(est, "components_", None)
    if comps is not None:
        facts["components"] = len(comps)
    cv = getattr(est, "cv_scores_", None)
    if cv:
        facts["cv_grid_points"] = len(cv)
    if getattr(est, "cv", None) is not None and isinstance(getattr(est, "cv"), int):
        facts["cv_folds"] = est.cv
    bp = getattr(est, "best_params_", None)
    if isinstance(bp, dict):
        facts["best_params_"] = {k: (float(v) if isinstance(v, (float, np.floating)) else str(v)) for k, v in bp.items()}
    return facts


def run_one(model: str, n: int, d: int, cap: float, out: Path, seed: int = 0, overrides=None) -> dict:
    X, y, yc, Xs, ys, ycs = friedman_table(n, d, seed)
    classify = model in CLASSIFIERS or model == "auto-classifier"
    target = yc if classify else y
    label = model + ("[" + ",".join(f"{k}={v}" for k, v in overrides.items()) + "]" if overrides else "")
    rec = {"model": label, "preset": model, "overrides": overrides or {}, "n": n, "d": d, "cap_s": cap,
           "load_start": os.getloadavg()[0]}
    prof = cProfile.Profile()
    events = []
    est = None
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(max(1, int(cap)))
    t0 = time.perf_counter()
    try:
        prof.enable()
        if model in AUTO:
            import hdgp.workflow

            frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(d)])
            frame["y"] = target
            tm = hdgp.workflow.fit_table(frame, "y", random_state=seed,
                                         progress=lambda m: events.append((round(time.perf_counter() - t0, 2), m)))
            rec["fit_s"] = time.perf_counter() - t0
            meta = tm.metadata
            rec["auto_selection"] = [{k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                                      for k, v in row.items()} for row in meta.get("selection", []) or []]
            rec["auto_model"] = meta.get("model")
            rec["auto_fit_seconds_meta"] = meta.get("fit_seconds")
            rec["holdout_metrics"] = {k: float(v) for k, v in (meta.get("metrics") or {}).items()
                                      if isinstance(v, (int, float))}
            rec["predict_s"] = None
        else:
            est = _estimator(model, seed, overrides)
            est.fit(X, target)
            rec["fit_s"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            if classify:
                p = est.predict_proba(Xs)[:, 1]
                rec["predict_s"] = time.perf_counter() - t1
                from sklearn.metrics import roc_auc_score
                rec["test_auc"] = float(roc_auc_score(ycs, p))
            else:
                mean = est.predict(Xs)
                rec["predict_s"] = time.perf_counter() - t1
                rec["test_rmse"] = float(np.sqrt(np.mean((np.asarray(mean) - ys) ** 2)))
        rec["status"] = "ok"
    except FitCapped:
        rec["fit_s"] = time.perf_counter() - t0
        rec["status"] = "capped"
    finally:
        prof.disable()
        signal.alarm(0)
    rec["load_end"] = os.getloadavg()[0]
    stats = pstats.Stats(prof)
    rec["parts"] = profile_parts(stats)
    rec["events"] = events
    if est is not None and rec["status"] == "ok":
        rec["facts"] = _fitted_facts(model, est)
    n_fit = int(round(0.8 * n)) if model in AUTO else n
    if model not in ("HGB", "HGB-classifier"):
        rate = cholesky_rate(n_fit)
        rec["rate"] = rate
        floor = evaluation_floor(model, n_fit, d, rate, est)
        if floor:
            rec["floor"] = floor
    name = f"{label}_{n}x{d}.txt".replace("[", "_").replace("]", "").replace(",", "_").replace("=", "")
    header = (f"{label} on friedman_table({n}, {d}, seed={seed}); status={rec['status']}; fit {rec['fit_s']:.2f} s; "
              f"predict {rec.get('predict_s')}; loadavg {rec['load_start']:.2f} -> {rec['load_end']:.2f}; "
              f"threads {torch.get_num_threads()}; profiler on")
    write_profile_text(stats, out / name, header)
    rec["profile_file"] = name
    return rec


# ----------------------------------------------------------------------------- tables
def _load(out: Path):
    envs, recs = [], {}
    for path in sorted(out.glob("records-*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "env" in r:
                envs.append({**r["env"], "started": r["started"], "file": path.name})
            else:
                recs[(r["model"], r["n"], r["d"])] = r  # a later record of the same fit wins
    return envs, recs


def _secs(r) -> str:
    if r is None:
        return ""
    st = r.get("status", "")
    if st == "ok":
        return f"{r['fit_s']:.1f}"
    if st == "capped":
        return f"> {r['fit_s']:.0f}"
    return "skip"


#: Parts read back from the profile text (cumulative seconds of the first line naming them).
_TEXT_PARTS = {
    "lapack": "hdgp/linalg.py:112(_lapack_on_copy)",
    "se_minus_outer": "kernels/se_kernel.py:108(se_minus_outer)",
    "sum_rows_forward": "kernels/_compiled.py:83(rows_forward)",
    "sum_rows_backward": "kernels/_compiled.py:111(rows_backward)",
    "exp_inplace": "kernels/_elementwise.py:21(exp_)",
    "flow_warp": "hdgp/flows.py:189(_objective)",
}
_OUT_DIR = [DEFAULT_OUT]


def _text_part(r, key):
    """(calls, cumulative seconds) of a function in the fit's profile text, or None."""
    path = _OUT_DIR[0] / r.get("profile_file", "")
    pattern = _TEXT_PARTS[key]
    if not path.is_file():
        return None
    for line in path.read_text().splitlines():
        if line.rstrip().endswith(pattern):
            cols = line.split()
            return int(cols[0].split("/")[0]), float(cols[3])
    return None


def _part(r, key, per=None) -> float | None:
    v = (r.get("parts") or {}).get(key)
    if v is None and key in _TEXT_PARTS:
        t = _text_part(r, key)
        v = None if t is None else {"calls": t[0], "seconds": t[1]}
    if v is None:
        return None
    return v["seconds"] / per if per else v["seconds"]


def _f(v, fmt="{:.2f}") -> str:
    return "" if v is None else fmt.format(v)


def write_tables(out: Path) -> None:
    """``tables.md``: the measured tables of every ``records-*.jsonl`` in ``out``."""
    _OUT_DIR[0] = out
    envs, recs = _load(out)
    sizes = sorted({(n, d) for (_m, n, d) in recs}, key=lambda s: (s[0], s[1]))
    models = [m for m in REGRESSORS + CLASSIFIERS + AUTO if any(k[0] == m for k in recs)]
    L = ["# Profiles of the default presets: measured tables", "",
         "Generated by `python benchmarks/profile_defaults.py --report` from the `records-*.jsonl` here.", "",
         "## Runs", ""]
    for e in envs:
        L.append(f"- `{e['file']}` started {e['started']}: `{e['command']}` (Python {e['python']}, torch {e['torch']}, "
                 f"{e['threads']} torch thread, OMP_NUM_THREADS={e['OMP_NUM_THREADS']}, {e['cpus']} CPUs, "
                 f"warm-up {e.get('warm_up_s')} s)")
    L += ["", "## Fit seconds (profiler on; `> X`: stopped at the cap; `skip`: not run, see status)", "",
          "| model | " + " | ".join(f"{n}x{d}" for n, d in sizes) + " |",
          "|---|" + "---|" * len(sizes)]
    for m in models:
        L.append(f"| {m} | " + " | ".join(_secs(recs.get((m, n, d))) for n, d in sizes) + " |")
    L += ["", "Ratio to RBF-ARD (regressors) / to HistGradientBoosting on the same table (ok fits only):", "",
          "| model | " + " | ".join(f"{n}x{d}" for n, d in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for m in models:
        cells = []
        for n, d in sizes:
            r = recs.get((m, n, d))
            base = recs.get(("RBF-ARD", n, d)) if m in REGRESSORS + ("auto",) else None
            hgb = recs.get(("HGB" if m in REGRESSORS + ("auto",) else "HGB-classifier", n, d))
            c = ""
            if r and r.get("status") in ("ok", "capped"):
                parts = []
                if base and base.get("status") == "ok":
                    parts.append(f"{'≥' if r['status'] == 'capped' else ''}{r['fit_s'] / base['fit_s']:.1f}× RBF")
                if hgb and hgb.get("status") == "ok":
                    parts.append(f"{'≥' if r['status'] == 'capped' else ''}{r['fit_s'] / hgb['fit_s']:.0f}× HGB")
                c = ", ".join(parts)
            cells.append(c)
        L.append(f"| {m} | " + " | ".join(cells) + " |")
    L += ["", "## Split of each fit", "",
          "Seconds are cProfile cumulative times (profiler on). eval: L-BFGS objective evaluations "
          "(`hdgp/training.py:_run_lbfgs.fun`, value + gradient); s/eval its mean; fwd: kernel forward "
          "(`kernels/additive_kernel.py:AdditiveKernel.forward`, all calls incl. posterior) per evaluation, of which "
          "base SE: the per-feature constrained SE matrices (`kernels/se_kernel.py:se_minus_outer`) and sum fwd / bwd: "
          "the compiled Newton-Girard order sum (`kernels/_compiled.py:rows_forward` / `rows_backward`); backward: "
          "all of `loss.backward()`; LAPACK: `hdgp/linalg.py:_lapack_on_copy` (potrf and friends, own Cholesky path); chol: own time of torch's builtins named *cholesky* (factor and cholesky_solve), all calls; "
          "floor/eval: the arithmetic floor of one evaluation (see the script's `evaluation_floor`) at the "
          "rates measured in the same run; load: 1-min load average at start → end.", "",
          "| model | n×D | status | fit s | predict s | flow s | measures s | starts (kept) | eval | s/eval | fwd/eval | base SE fwd/eval | sum fwd/eval | sum bwd/eval | backward/eval | LAPACK s/eval | chol s | Sobol s | other | floor/eval s | s/eval ÷ floor | load |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (m, n, d), r in sorted(recs.items(), key=lambda kv: (models.index(kv[0][0]) if kv[0][0] in models else 99,
                                                             kv[0][1], kv[0][2])):
        if r.get("overrides"):
            continue
        if r.get("status") not in ("ok", "capped"):
            L.append(f"| {m} | {n}×{d} | {r.get('status')} |" + " |" * 19)
            continue
        facts = r.get("facts") or {}
        ev = (r.get("parts") or {}).get("lbfgs_evaluation", {}).get("calls")
        s_eval = _part(r, "lbfgs_evaluation", ev) if ev else None
        fwd = _part(r, "additive_kernel_forward", ev) if ev else None
        bwd = _part(r, "additive_kernel_backward", ev) if ev else None
        meas = sum(_part(r, k) or 0 for k in ("measure_gaussian", "measure_empirical", "measure_gmm")) or None
        starts = facts.get("start_losses_")
        st = (", ".join(f"{k} {v:.3f}" for k, v in starts.items()) + f" ({facts.get('best_candidate_')})") if starts else ""
        other = []
        if _part(r, "sigp_cross_validate") is not None:
            other.append(f"CV {_part(r, 'sigp_cross_validate'):.1f} s"
                         + (f" over {facts['cv_grid_points']} grid pts × {facts.get('cv_folds')} folds"
                            if "cv_grid_points" in facts else ""))
        if _part(r, "fit_svgp") is not None:
            other.append(f"fit_svgp {_part(r, 'fit_svgp'):.1f} s")
        if _part(r, "subset_start") is not None:
            other.append(f"subset start {_part(r, 'subset_start'):.1f} s")
        if _part(r, "auto_select") is not None:
            other.append(f"auto select {_part(r, 'auto_select'):.1f} s")
        if facts.get("max_order"):
            other.append(f"R={facts['max_order']}")
        if facts.get("sobol_by_order"):
            so = facts["sobol_by_order"]
            other.append("Sobol by order " + "/".join(f"{v:.3f}" for v in so[:4]) + (" …" if len(so) > 4 else "")
                         + f", {facts.get('sobol_terms')} terms")
        fl = (r.get("floor") or {}).get("floor_s")
        L.append(f"| {m} | {n}×{d} | {r['status']} | {r['fit_s']:.1f} | {_f(r.get('predict_s'))} | "
                 f"{_f(_part(r, 'flow_fit'))} | {_f(meas, '{:.3f}')} | {st} | {ev or ''} | {_f(s_eval, '{:.3f}')} | "
                 f"{_f(fwd, '{:.3f}')} | {_f(_part(r, 'se_minus_outer', ev) if ev else None, '{:.3f}')} | "
                 f"{_f(_part(r, 'sum_rows_forward', ev) if ev else None, '{:.3f}')} | "
                 f"{_f(_part(r, 'sum_rows_backward', ev) if ev else None, '{:.3f}')} | "
                 f"{_f(_part(r, 'tensor_backward', ev) if ev else None, '{:.3f}')} | "
                 f"{_f(_part(r, 'lapack', ev) if ev else None, '{:.3f}')} | {_f(_part(r, 'cholesky_builtin'))} | "
                 f"{_f(_part(r, 'sobol_compute'))} | {'; '.join(other)} | {_f(fl, '{:.4f}')} | "
                 f"{_f(s_eval / fl if (s_eval and fl) else None, '{:.0f}×')} | "
                 f"{r.get('load_start', 0):.1f}→{r.get('load_end', 0):.1f} |")
    L += ["", "## Rates measured in the same runs", "",
          "| n | Cholesky s | Cholesky GFLOP/s | matmul GFLOP/s (1000², n ≥ 1000) | addcmul ns/elem | exp ns/elem |",
          "|---|---|---|---|---|---|"]
    rates = {}
    for r in recs.values():
        if r.get("rate"):
            rates.setdefault(r["rate"]["n"], r["rate"])
    for n in sorted(rates):
        q = rates[n]
        L.append(f"| {n} | {q['chol_s']:.4f} | {q['chol_gflops']:.2f} | {q['matmul_gflops']:.2f} | "
                 f"{q['fma_ns_per_elem']:.2f} | {q['exp_ns_per_elem']:.2f} |")
    sweeps = sorted((r for r in recs.values() if r.get("overrides")), key=lambda r: (r["n"], r["d"], r["model"]))
    if sweeps:
        L += ["", "## Short fits (overrides in brackets): per-evaluation cost by max_order and at larger n", "",
              "Fits stopped by `max_iter` (a ConvergenceWarning each): only the per-evaluation columns and the one-off "
              "parts (flow, Sobol) mean anything here.", "",
              "| model | n×D | status | fit s | evals | s/eval | kernel fwd/eval | base SE fwd/eval | sum fwd/eval | "
              "sum bwd/eval | backward/eval | LAPACK/eval | flow s | Sobol s | load |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sweeps:
            ev = (r.get("parts") or {}).get("lbfgs_evaluation", {}).get("calls")
            g = (lambda k: _f(_part(r, k, ev), "{:.3f}")) if ev else (lambda k: "")  # noqa: E731
            L.append(f"| {r['model']} | {r['n']}×{r['d']} | {r['status']} | {r['fit_s']:.1f} | {ev or ''} | "
                     f"{g('lbfgs_evaluation')} | {g('additive_kernel_forward')} | {g('se_minus_outer')} | "
                     f"{g('sum_rows_forward')} | {g('sum_rows_backward')} | {g('tensor_backward')} | {g('lapack')} | "
                     f"{_f(_part(r, 'flow_fit'), '{:.1f}')} | {_f(_part(r, 'sobol_compute'), '{:.1f}')} | "
                     f"{r.get('load_start', 0):.1f}→{r.get('load_end', 0):.1f} |")
    autos = [(k, r) for k, r in sorted(recs.items()) if k[0] in AUTO and r.get("status") in ("ok", "capped")]
    if autos:
        L += ["", "## `--model auto` (hdgp.workflow.fit_table): candidates and refit", ""]
        for (m, n, d), r in autos:
            L.append(f"### {m} {n}×{d}: {r['status']}, {r['fit_s']:.1f} s, kept {r.get('auto_model')}")
            L.append("")
            if r.get("auto_selection"):
                L.append("| candidate | fit s | validation | selected |")
                L.append("|---|---|---|---|")
                for row in r["auto_selection"]:
                    val = row.get("val_log_density_calibrated", row.get("val_log_loss"))
                    L.append(f"| {row['model']} | {_f(row.get('fit_seconds'), '{:.1f}')} | {_f(val, '{:.3f}')} "
                             f"| {row.get('selected')} {row.get('error') or ''} |")
                L.append("")
            L.append("Progress messages (seconds since the start):")
            L.append("")
            L += [f"- {t:7.1f} s  {msg}" for t, msg in r.get("events", [])]
            L.append("")
    (out / "tables.md").write_text("\n".join(L) + "\n")


# ----------------------------------------------------------------------------- driver
def warm_up(names=("OAK", "DPA-GP-ARD", "RBF-ARD", "SIGP", "GP-classifier", "OAK-classifier", "SIGP-classifier")) -> float:
    """Import hdgp, its workflow and scikit-learn and fit each family once on a tiny table, so that
    imports and first-call set-up (compiled kernels) stay out of the profiles; returns its seconds."""
    t = time.perf_counter()
    import warnings

    import hdgp
    import hdgp.workflow  # noqa: F401
    from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: F401
    from sklearn.metrics import roc_auc_score  # noqa: F401

    X, y, yc, *_ = friedman_table(120, 8, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            target = yc if "classifier" in name else y
            hdgp.preset(name, random_state=0, **({"max_iter": 3} if name != "SIGP-classifier" and name != "SIGP"
                                                else {})).fit(X, target)
    return time.perf_counter() - t


def parse_sizes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in s.lower().split("x")) for s in text.split(",") if s]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(REGRESSORS + CLASSIFIERS + AUTO))
    ap.add_argument("--sizes", default="1000x8,1000x20,3000x8,1000x30,3000x20,5000x8,3000x30,5000x20,5000x30")
    ap.add_argument("--cap", type=float, default=180.0, help="seconds after which one fit is stopped")
    ap.add_argument("--budget", type=float, default=2400.0, help="no new fit starts after this many seconds")
    ap.add_argument("--tag", default="run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--order-sweep", default=None, metavar="R1,R2,...",
                    help="instead: OAK with max_order=R and max_iter=--sweep-iter for each R (per-evaluation cost by order)")
    ap.add_argument("--sweep-iter", type=int, default=5)
    ap.add_argument("--params", default="", metavar="K=V,...",
                    help="integer overrides for every hdgp preset fitted (e.g. max_iter=3: per-evaluation cost at scale)")
    ap.add_argument("--report", action="store_true", help="only write tables.md from the records in --out")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report:
        write_tables(args.out)
        return 0
    torch.set_num_threads(1)
    warm_s = warm_up(("OAK",)) if args.order_sweep else warm_up()
    models = [m for m in args.models.split(",") if m]
    sizes = parse_sizes(args.sizes)
    params = {k: int(v) for k, v in (kv.split("=") for kv in args.params.split(",") if kv)}
    capped: dict[str, list] = {}
    start = time.perf_counter()
    records = args.out / f"records-{args.tag}.jsonl"
    env = {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "cpus": os.cpu_count(),
           "warm_up_s": round(warm_s, 2), "command": "python benchmarks/profile_defaults.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    with records.open("a") as fh:
        fh.write(json.dumps({"env": env, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}) + "\n")
    if args.order_sweep:
        for n, d in sizes:
            for R in [int(v) for v in args.order_sweep.split(",")]:
                if R > d or time.perf_counter() - start > args.budget:
                    continue
                rec = run_one("OAK", n, d, args.cap, args.out, overrides={"max_order": R, "max_iter": args.sweep_iter})
                print(json.dumps({k: rec.get(k) for k in ("model", "n", "d", "status", "fit_s")}), flush=True)
                with records.open("a") as fh:
                    fh.write(json.dumps(rec, default=str) + "\n")
        return 0
    for n, d in sizes:
        for model in models:
            if any(n >= cn and d >= cd for cn, cd in capped.get(model, [])):
                rec = {"model": model, "n": n, "d": d, "status": "skipped (a smaller table hit the cap)"}
            elif time.perf_counter() - start > args.budget:
                rec = {"model": model, "n": n, "d": d, "status": "skipped (run budget spent)"}
            else:
                remaining = args.budget + args.cap - (time.perf_counter() - start)
                over = params if params and model not in AUTO and not model.startswith("HGB") else None
                rec = run_one(model, n, d, min(args.cap, max(30.0, remaining)), args.out, overrides=over)
                if rec["status"] == "capped":
                    capped.setdefault(model, []).append((n, d))
            print(json.dumps({k: rec.get(k) for k in ("model", "n", "d", "status", "fit_s", "predict_s",
                                                       "load_start", "load_end")}), flush=True)
            with records.open("a") as fh:
                fh.write(json.dumps(rec, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
