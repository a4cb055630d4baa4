"""One objective evaluation (value + gradient) of the exact GP presets against its floor, two source trees.

For OAK (``max_order`` 2, 3, 10, capped at D), Additive, DPA-GP-ARD and RBF-ARD at n rows × D features,
builds the model a default ``hdgp.preset(name)`` fit would train (its ``_train`` is intercepted: nothing is
trained) and times ``loss.backward()`` of the training objective at the initial parameters, best of
``--repeats``. Each (model, table, threads) is timed in a fresh process per source tree, the trees
alternating, so "before" (``--before``: another checkout's ``src``, e.g. ``git worktree add`` or
``git archive main src``) and "after" (this checkout) share the machine's state; the loss and gradient of
both are compared (max relative difference). Each evaluation is timed in seconds and in the thread's CPU
time (``time.thread_time``), which other processes on a shared machine disturb less. OAK runs with ``flow=False`` here so both trees see the same
inputs (the flow's own fit is timed by ``benchmarks/flow_fit_speed.py``).

Floor: one Cholesky (n³/3 flops at the ``torch.linalg.cholesky`` rate measured in the same process) plus
the kernel on the n(n+1)/2 lower triangle: OAK/Additive 3·D·R fused multiply-adds + D exps per entry,
RBF-ARD 3·D + 1 exp, DPA-GP-ARD 3·(D + J) + J exps (J = 20 projections), at rates measured there too.

Usage::

    python benchmarks/kernel_evaluation_speed.py --before ../main-src/src --sizes 1000x8,1000x20 \\
        --threads 1,2 --out benchmarks/results/kernel_evaluation
    python benchmarks/kernel_evaluation_speed.py --before ../main-src/src --order-sum 1000x8x8,1000x20x10 \\
        --repeats 5 --out benchmarks/results/kernel_evaluation/oak_sum_fused
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
MODELS = ("OAK-2", "OAK-3", "OAK-10", "Additive", "DPA-GP-ARD", "RBF-ARD")


def _child(args) -> None:
    """Runs inside a fresh process whose sys.path starts with one tree's src."""
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    try:
        import numba
        numba.set_num_threads(args.threads)
    except Exception:  # noqa: BLE001 (numba absent or fewer cores: leave it)
        pass
    import hdgp
    from hdgp import training

    n, d = args.n, args.d
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    X[:, 0] = rng.lognormal(size=n)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, min(2, d - 1)] + 0.1 * rng.normal(size=n)
    name = args.model
    params = {"random_state": 0}
    if name.startswith("OAK"):
        params.update(max_order=min(int(name.split("-")[1]), d), flow=False)
        name = "OAK"
    est = hdgp.preset(name, **params)
    captured = {}

    class _Stop(Exception):
        pass

    def train(model, Xt, yt, desc=None):
        captured.update(model=model, X=Xt, y=yt)
        raise _Stop

    est._train = train
    try:
        est.fit(X, y)
    except _Stop:
        pass
    model, Xt, yt = captured["model"], captured["X"], captured["y"]
    model.train()
    params_ = [p for p in model.parameters() if p.requires_grad]

    def evaluate():
        model.zero_grad(set_to_none=True)
        loss = training._objective(model, Xt, yt)
        loss.backward()
        return loss

    if args.ab_exp:  # NumPy's exp (main's dispatch on every CPU) against this tree's, alternating in one process
        from hdgp.kernels import _elementwise

        ours, numpy_all = _elementwise._NUMPY_DTYPES, (torch.float32, torch.float64)
        evaluate()
        best = {"numpy_exp": [], "dispatch": []}
        for _ in range(args.repeats):
            for key, dtypes in (("numpy_exp", numpy_all), ("dispatch", ours)):
                _elementwise._NUMPY_DTYPES = dtypes
                t = time.perf_counter()
                evaluate()
                best[key].append(time.perf_counter() - t)
        _elementwise._NUMPY_DTYPES = ours
        print(json.dumps({k: min(v) for k, v in best.items()} | {"torch_threads": torch.get_num_threads()}))
        return
    times, cpu = [], []
    for _ in range(args.repeats + 1):  # the first call compiles and warms caches
        t, c = time.perf_counter(), time.thread_time()
        loss = evaluate()
        times.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params_])
    # rates for the floor, in the same process
    A = torch.randn(n, n, dtype=torch.float64)
    A = A @ A.T / n + torch.eye(n, dtype=torch.float64)
    chol = min(_time(lambda: torch.linalg.cholesky(A)) for _ in range(3))
    v = torch.randn(2_000_000, dtype=torch.float64)
    w = torch.randn(2_000_000, dtype=torch.float64)
    fma = min(_time(lambda: v.addcmul_(w, w, value=1e-30)) for _ in range(3)) / v.numel()
    ex = min(_time(lambda: np.exp(w.numpy())) for _ in range(3)) / v.numel()
    tri = n * (n + 1) / 2
    R = getattr(getattr(model, "kernel", None), "max_order", None)
    R = getattr(est, "max_order", None) if R is None else R
    if args.model.startswith("OAK") or args.model == "Additive":
        R = params.get("max_order", min(d, 10))
        kern = tri * (3 * d * R * fma + d * ex)
    elif args.model == "RBF-ARD":
        kern = tri * (3 * d * fma + ex)
    else:
        J = 20
        kern = tri * (3 * (d + J) * fma + J * ex)
    print(json.dumps({"eval_s": min(times[1:]), "eval_cpu_s": min(cpu[1:]), "first_s": times[0], "loss": float(loss), "grad": grad.tolist(),
                      "cholesky_s": chol, "kernel_floor_s": kern, "floor_s": chol + kern,
                      "torch_threads": torch.get_num_threads()}))


def _order_sum(before: str, after: str, sizes: str, repeats: int) -> list[str]:
    """The compiled order sum alone (``_compiled.rows_forward`` / ``rows_backward`` with the base gradient) of
    both trees in one process, alternating, on one row block of 1/16 of the rows of an n-row lower triangle
    (uniform base values in [-0.3, 1], R + 1 random order variances); thread CPU time, best of ``repeats``
    rounds of 3 calls each. Both trees' outputs are compared (largest relative difference)."""
    import importlib.util
    import tempfile

    import numpy as np

    # a fresh Numba cache: cached loops of a module loaded from a file path cannot be read back
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="hdgp-order-sum-")

    def load(src, name):
        spec = importlib.util.spec_from_file_location(name, str(Path(src) / "hdgp" / "kernels" / "_compiled.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    trees = {"before": load(before, "_compiled_before"), "after": load(after, "_compiled_after")}
    lines = ["| n, D, R | forward ms before / after | backward ms before / after | backward ÷ forward before / after "
             "| backward speed-up | max rel. diff | load 1-min |", "|---|---|---|---|---|---|---|"]
    for size in sizes.split(","):
        n, d, r = map(int, size.split("x"))
        rng = np.random.default_rng(0)
        rows = n // 16
        row0 = n - rows
        block = rng.uniform(-0.3, 1.0, size=(d, rows, n))
        variances = rng.uniform(0.1, 1.0, size=r + 1)
        grad = rng.normal(size=(n, n))
        state = {k: (np.zeros((n, n)), np.empty_like(block), np.zeros(r + 1)) for k in trees}
        best = {k: [np.inf, np.inf] for k in trees}
        load0 = os.getloadavg()[0]
        for _ in range(repeats):
            for key, mod in trees.items():
                out, gb, gv = state[key]
                for which, call in enumerate((lambda: mod.rows_forward(block, row0, True, variances, out),
                                              lambda: mod.rows_backward(block, row0, True, variances, grad, True, gb, gv))):
                    for _ in range(3):
                        c = time.thread_time()
                        call()
                        best[key][which] = min(best[key][which], time.thread_time() - c)
        outs = {}
        for key, mod in trees.items():
            out, gb, gv = np.zeros((n, n)), np.empty_like(block), np.zeros(r + 1)
            mod.rows_forward(block, row0, True, variances, out)
            mod.rows_backward(block, row0, True, variances, grad, True, gb, gv)
            outs[key] = (out, gb, gv)
        diff = max(_rel(a.ravel(), b.ravel()) for a, b in zip(outs["before"], outs["after"]))
        (fb, bb), (fa, ba) = best["before"], best["after"]
        line = (f"| {n}, {d}, {r} | {fb * 1e3:.2f} / {fa * 1e3:.2f} | {bb * 1e3:.2f} / {ba * 1e3:.2f} | "
                f"{bb / fb:.1f} / {ba / fa:.1f} | {bb / ba:.2f}× | {diff:.1e} | {load0:.1f}→{os.getloadavg()[0]:.1f} |")
        print(line, flush=True)
        lines.append(line)
    return lines


def _time(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def _run(src: str, model: str, n: int, d: int, threads: int, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), NUMBA_NUM_THREADS="2")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--model", model, "--n", str(n), "--d", str(d),
           "--threads", str(threads), "--repeats", str(repeats)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"rc {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    scale = np.maximum(np.abs(a), np.abs(b)).max()
    return float(np.abs(a - b).max() / scale) if scale > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model")
    parser.add_argument("--n", type=int)
    parser.add_argument("--d", type=int)
    parser.add_argument("--before", help="src folder of the tree to compare against")
    parser.add_argument("--after", default=str(HERE.parent / "src"), help="src folder of the new tree (default: this checkout's)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sizes", default="1000x8,1000x20,3000x8,3000x20")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for results.jsonl and table.md")
    parser.add_argument("--order-sum", default=None, metavar="NxDxR,...",
                        help="time the compiled order sum's forward and backward of --before and --after in this "
                             "process instead (e.g. 1000x8x8,1000x20x10)")
    parser.add_argument("--ab-exp", action="store_true",
                        help="in one process per row, alternate NumPy's exp everywhere (main) and this tree's exp "
                             "dispatch, --repeats times each; prints the best of each")
    args = parser.parse_args()
    if args.child:
        args.threads = int(args.threads)
        _child(args)
        return
    if args.order_sum:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        lines = _order_sum(args.before, args.after, args.order_sum, args.repeats)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            head = (f"Started {started}; `python benchmarks/kernel_evaluation_speed.py --order-sum {args.order_sum} "
                    f"--repeats {args.repeats} --before <main's src> --out {args.out}` (thread CPU time, one process)\n")
            (Path(args.out) / "order_sum.md").write_text(head + "\n" + "\n".join(lines) + "\n")
        return
    if args.ab_exp:
        lines = [f"`python benchmarks/kernel_evaluation_speed.py --ab-exp --sizes {args.sizes} --models {args.models} "
                 f"--threads {args.threads} --repeats {args.repeats}` started "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n",
                 "| model | n×D | threads | NumPy exp s/eval | dispatch s/eval | speed-up | load 1-min |",
                 "|---|---|---|---|---|---|---|"]
        for size in args.sizes.split(","):
            n, d = map(int, size.split("x"))
            for model in args.models.split(","):
                for threads in map(int, args.threads.split(",")):
                    load0 = os.getloadavg()[0]
                    env = dict(os.environ, PYTHONPATH=args.after, OMP_NUM_THREADS=str(threads),
                               MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
                    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--ab-exp", "--model", model,
                           "--n", str(n), "--d", str(d), "--threads", str(threads), "--repeats", str(args.repeats)]
                    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                    if out.returncode != 0:
                        line = f"| {model} | {n}×{d} | {threads} | error | | | |"
                    else:
                        r = json.loads(out.stdout.strip().splitlines()[-1])
                        line = (f"| {model} | {n}×{d} | {threads} | {r['numpy_exp']:.3f} | {r['dispatch']:.3f} | "
                                f"{r['numpy_exp'] / r['dispatch']:.2f}× | {load0:.1f}→{os.getloadavg()[0]:.1f} |")
                    print(line, flush=True)
                    lines.append(line)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "ab_exp.md").write_text("\n".join(lines) + "\n")
        return
    after = args.after
    rows = []
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    for size in args.sizes.split(","):
        n, d = map(int, size.split("x"))
        for model in args.models.split(","):
            for threads in map(int, args.threads.split(",")):
                load0 = os.getloadavg()[0]
                res = {"model": model, "n": n, "d": d, "threads": threads}
                if args.before:
                    res["before"] = _run(args.before, model, n, d, threads, args.repeats)
                res["after"] = _run(after, model, n, d, threads, args.repeats)
                res["load"] = (load0, os.getloadavg()[0])
                if args.before and "error" not in res["before"] and "error" not in res["after"]:
                    res["loss_rel_diff"] = _rel(res["before"]["loss"], res["after"]["loss"])
                    res["grad_rel_diff"] = _rel(res["before"]["grad"], res["after"]["grad"])
                for side in ("before", "after"):
                    if side in res and "grad" in res[side]:
                        res[side].pop("grad")
                rows.append(res)
                print(_line(res), flush=True)
                if out:
                    with open(out / "results.jsonl", "a") as f:
                        f.write(json.dumps(res) + "\n")
    if out:
        header = ("| model | n×D | threads | before s/eval | after s/eval | speed-up | CPU s/eval before → after | "
                  "CPU speed-up | after ÷ floor | floor s (Cholesky + kernel) | max rel. diff loss / grad | load 1-min |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        cmd = "python benchmarks/kernel_evaluation_speed.py " + " ".join(
            f"--{k} {v}" for k, v in (("sizes", args.sizes), ("models", args.models), ("threads", args.threads),
                                     ("repeats", args.repeats)))
        with open(out / "table.md", "w") as f:
            f.write(f"Started {started}; `{cmd} --before <main's src> --out {args.out}`\n\n{header}")
            f.write("\n".join(_line(r) for r in rows) + "\n")


def _line(r) -> str:
    b, a = r.get("before", {}), r["after"]
    if "error" in a or "error" in b:
        return f"| {r['model']} | {r['n']}×{r['d']} | {r['threads']} | error: {b.get('error', '')} {a.get('error', '')} |"
    bs = f"{b['eval_s']:.3f}" if b else ""
    speed = f"{b['eval_s'] / a['eval_s']:.2f}×" if b else ""
    diff = f"{r['loss_rel_diff']:.1e} / {r['grad_rel_diff']:.1e}" if b else ""
    cpu = cpu_speed = ""
    if "eval_cpu_s" in a:  # thread CPU time: less disturbed by other processes on a shared machine than seconds
        cpu = f"{b['eval_cpu_s']:.3f} → {a['eval_cpu_s']:.3f}" if b.get("eval_cpu_s") else f"{a['eval_cpu_s']:.3f}"
        cpu_speed = f"{b['eval_cpu_s'] / a['eval_cpu_s']:.2f}×" if b.get("eval_cpu_s") else ""
    return (f"| {r['model']} | {r['n']}×{r['d']} | {r['threads']} | {bs} | {a['eval_s']:.3f} | {speed} | {cpu} | {cpu_speed} | "
            f"{a['eval_s'] / a['floor_s']:.1f}× | {a['floor_s']:.3f} ({a['cholesky_s']:.3f} + {a['kernel_floor_s']:.3f}) "
            f"| {diff} | {r['load'][0]:.1f}→{r['load'][1]:.1f} |")


if __name__ == "__main__":
    main()
