"""Regression guards: a few benchmark tasks re-run against the committed harness numbers.

Each guard re-runs (with :func:`hdgp.bench.task.run_task`, one thread) the first ``SPLITS``
splits of one (protocol, data set, model) whose results are committed under
``benchmarks/results/<protocol>/`` (``tasks.csv``: one row per split and seed; ``summary.csv``:
mean and standard deviation over all of them), and compares the mean test RMSE and NLPD over
those splits with the committed values *of the same splits and seed*.

Tolerance: the committed mean over its n splits (and seeds) is known to within its standard
error ``sd / sqrt(n)``, ``sd`` being the split-to-split standard deviation of the metric and n the
number of tasks behind it (both from ``summary.csv``): a change in accuracy smaller than that is
below the harness's own resolution. A guard fails when the new mean over the guarded splits is worse
than the committed mean over the same splits by more than ``sd / sqrt(n)`` (RMSE on servo: about
0.02-0.03 on a mean of 0.33, i.e. a loss of ~7 %); being better passes (improvements are welcome:
re-run the harness and commit its numbers). Same splits and seed reproduce the committed numbers
to 4 digits today, so the whole allowance is left for legitimate numerical changes.
The data sets are the small ones (servo: 167 rows, yacht: 308): about a minute for all guards
on one thread.
"""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from hdgp.bench.protocols import get_protocol
from hdgp.bench.task import TaskSpec, run_task

pytestmark = pytest.mark.data

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
SPLITS = (0, 1, 2)
SEED = 0
METRICS = ("rmse", "nlpd")

GUARDS = [  # (protocol, data set, model): each committed under benchmarks/results/<protocol>/
    ("rpa-gp-table1", "servo", "DPA-GP-ARD"),
    ("rpa-gp-table1", "yacht", "DPA-GP-ARD"),
    ("oak-table5", "servo", "OAK"),
    ("oak-table5", "yacht", "OAK"),
    ("duvenaud-tables", "servo", "Additive"),
    ("rpa-gp-table1", "servo", "SIGP"),
]


def committed(protocol: str, dataset: str, model: str) -> tuple[dict, dict]:
    """``({metric: {split: value}}, {metric: sd / sqrt(n)})`` from the committed CSVs (seed SEED;
    the latest finished row when a task was re-run)."""
    per_split = {m: {} for m in METRICS}
    finished = {}
    with open(RESULTS / protocol / "tasks.csv", newline="") as f:
        for row in csv.DictReader(f):
            if (row["dataset"], row["model"], row["status"]) != (dataset, model, "done") or int(row["seed"]) != SEED:
                continue
            split, when = int(row["split"]), float(row["finished_at"] or 0)
            if when >= finished.get(split, -math.inf):
                finished[split] = when
                for m in METRICS:
                    per_split[m][split] = float(row[f"metric_{m}"])
    resolution = {}
    with open(RESULTS / protocol / "summary.csv", newline="") as f:
        for row in csv.DictReader(f):
            if (row["dataset"], row["model"]) == (dataset, model) and row["metric"] in METRICS:
                resolution[row["metric"]] = float(row["std"]) / math.sqrt(float(row["n"]))
    return per_split, resolution


@pytest.mark.parametrize("protocol, dataset, model", GUARDS, ids=["-".join(g) for g in GUARDS])
def test_committed_benchmark_numbers_still_hold(protocol, dataset, model, data_dir):
    per_split, resolution = committed(protocol, dataset, model)
    assert set(SPLITS) <= set(per_split["rmse"]) and set(resolution) == set(METRICS), "committed numbers missing"
    proto = get_protocol(protocol)
    new = {m: [] for m in METRICS}
    for split in SPLITS:
        task = TaskSpec(proto.name, proto.dataset(dataset), proto.model(model), split, SEED, proto.normalisation,
                        dict(proto.estimator_params), str(data_dir), 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record = run_task(task)
        assert record["status"] == "done", record["error"]
        for m in METRICS:
            new[m].append(record["metrics"][m])
    for m in METRICS:
        before = np.mean([per_split[m][s] for s in SPLITS])
        after = np.mean(new[m])
        allowed = resolution[m]
        assert after <= before + allowed, (
            f"{model} on {dataset} ({protocol}), splits {SPLITS}: mean {m} {after:.4f} against the committed "
            f"{before:.4f} (allowed +{allowed:.4f}: split-to-split sd / sqrt(n) of the committed results); "
            f"per split {np.round(new[m], 4).tolist()} vs {[round(per_split[m][s], 4) for s in SPLITS]}"
        )
