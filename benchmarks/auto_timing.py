"""End-to-end time of ``hdgp fit`` with the default ``--model auto`` on synthetic tables (issue #40).

Writes the table to a temporary CSV, runs the ``hdgp`` command (``python -m hdgp fit TABLE -t y
--json --quiet``, one process, the start-up included) and appends one JSON record per run to
``benchmarks/results/auto-timing/records.jsonl``: wall seconds, the load average before and after,
the choice, every candidate's row of the comparison (validation score, rows of its last rung,
seconds) and the held-out metrics.

Tables: ``friedman_table(n, d)`` of ``profile_defaults.py`` (seed 0): regression target ``y``, or
its binary target with ``--binary``.

    python benchmarks/auto_timing.py --rows 20000 --features 10
    python benchmarks/auto_timing.py --rows 6000 --features 8 --binary
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_defaults import friedman_table  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "auto-timing" / "records.jsonl"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--features", type=int, required=True)
    parser.add_argument("--binary", action="store_true")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--tag", default="")
    parser.add_argument("--extra", nargs="*", default=[], help="more arguments for hdgp fit")
    args = parser.parse_args(argv)
    X, y, yc, *_ = friedman_table(args.rows, args.features)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["y"] = np.where(yc == 1, "yes", "no") if args.binary else y
    record = {"rows": args.rows, "features": args.features, "binary": args.binary, "tag": args.tag,
              "extra": args.extra, "load_before": os.getloadavg()[0], "started": time.strftime("%H:%M:%S")}
    with tempfile.TemporaryDirectory() as tmp:
        table, model = Path(tmp) / "table.csv", Path(tmp) / "model.hdgp"
        frame.to_csv(table, index=False)
        command = [sys.executable, "-m", "hdgp", "fit", str(table), "-t", "y", "-o", str(model), "--json",
                   "--quiet", *args.extra]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
            record["seconds"] = time.perf_counter() - start
            record["returncode"] = done.returncode
            if done.returncode == 0:
                out = json.loads(done.stdout)
                record.update(model=out["model"], metrics=out["metrics"], fit_seconds=out["fit_seconds"],
                              selection=out["selection"], warnings=out["warnings"])
            else:
                record["error"] = done.stderr[-2000:]
        except subprocess.TimeoutExpired:
            record.update(seconds=time.perf_counter() - start, returncode=None, error=f"timeout {args.timeout} s")
    record["load_after"] = os.getloadavg()[0]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps({k: record.get(k) for k in ("rows", "features", "binary", "seconds", "model", "metrics",
                                                  "load_before", "load_after", "error")}, indent=1))


if __name__ == "__main__":
    main()
