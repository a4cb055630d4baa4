"""Time of the default ``DPA-GP-ARD`` fit on a synthetic table (issue #40: ≤ 60 s at 3,700 × 22).

Fits ``hdgp.preset("DPA-GP-ARD", random_state=0)`` (public API only, so the same script times any
checkout put first on ``PYTHONPATH``) on ``friedman_table(rows, features)`` of ``profile_defaults.py``
(seed 0), predicts its 1,000 test rows and appends one JSON record to
``benchmarks/results/projected/default-timing.jsonl``: fit seconds, engine, start, objective
evaluations, final objective, test RMSE and NLPD, and the 1-minute load average before and after
(``--tag`` names the checkout).

    python benchmarks/dpa_default_timing.py --rows 3700 --features 22 --tag new
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_defaults import friedman_table  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "projected" / "default-timing.jsonl"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--features", type=int, required=True)
    parser.add_argument("--tag", default="")
    parser.add_argument("--params", default="{}", help="JSON dict of estimator parameters")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import hdgp

    X, y, _, X_test, y_test, _ = friedman_table(args.rows, args.features)
    params = json.loads(args.params)
    est = hdgp.preset("DPA-GP-ARD", random_state=0).set_params(**params)
    record = {"rows": args.rows, "features": args.features, "tag": args.tag, "params": params,
              "load_before": os.getloadavg()[0], "started": time.strftime("%H:%M:%S")}
    start = time.perf_counter()
    est.fit(X, y)
    record["seconds"] = time.perf_counter() - start
    mean, std = est.predict(X_test, return_std=True)
    record.update(engine=est.inference_, start=est.start_, evaluations=int(est.n_iter_),
                  subset_evaluations=None if est.init_result_ is None else int(est.init_result_.n_evaluations),
                  converged=bool(est.fit_result_.converged), loss=float(est.fit_result_.loss), rmse=float(np.sqrt(np.mean((mean - y_test) ** 2))),
                  nlpd=float(np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * ((mean - y_test) / std) ** 2)),
                  load_after=os.getloadavg()[0])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
