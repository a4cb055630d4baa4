"""The OAK authors' own code on the OAK paper's own splits, for a like-for-like check.

Two steps, in two Python environments:

1. ``export`` (hdgp's environment): write each split of the paper's splits
   (``hdgp.data.bayesian_benchmarks``) to ``DIR/NAME_SPLIT.npz``::

       HDGP_DATA_DIR=../shared/data python benchmarks/oak_authors_code.py export machine --dir /tmp/bbdata

2. ``run`` (an environment with the authors' package ``oak`` from
   amzn/orthogonal-additive-gaussian-processes, e.g. TensorFlow 2.15.1, TensorFlow
   Probability 0.23.0, GPflow 2.9.2; its ``fit`` also needs IPython < 9 and its
   plotting module tikzplotlib with matplotlib 3.7): fit ``oak_model`` with its
   defaults and ``max_interaction_depth = d`` (their UCI regression recipe, flow and
   sparsity prior on) on every split, predict the test rows (clipped to the training
   range only where the unclipped prediction is not finite: their log-based flow is
   undefined below the training minimum minus 1), and append one CSV row per split::

       OMP_NUM_THREADS=1 python benchmarks/oak_authors_code.py run machine --dir /tmp/bbdata \\
           --oak-path /path/to/authors/checkout --out authors.csv

No code of the authors is part of this repository; ``run`` imports their package.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np


def export(name: str, folder: Path) -> None:
    from hdgp.data.bayesian_benchmarks import N_SPLITS, load_bb_split

    folder.mkdir(parents=True, exist_ok=True)
    for split in range(N_SPLITS):
        X_train, y_train, X_test, y_test = load_bb_split(name, split)
        np.savez(folder / f"{name}_{split}.npz", X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test)


def _scores(model, X_test, y_test, clip: bool):
    """Test RMSE and mean log density on the standardised target (None when not finite)."""
    pred = model.predict(X_test, clip=clip)
    if pred is None or not np.all(np.isfinite(pred)):
        return None
    loglik = float(model.get_loglik(X_test, y_test.reshape(-1, 1), clip=clip))
    return (float(np.sqrt(np.mean((pred - y_test) ** 2))), loglik) if np.isfinite(loglik) else None


def run(name: str, folder: Path, splits, oak_path: str, out: Path) -> None:
    sys.path.insert(0, oak_path)
    import tensorflow as tf
    from oak.model_utils import oak_model

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    new = not out.exists()
    with out.open("a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(["dataset", "split", "rmse", "loglik", "fit_seconds", "clipped"])
        for split in splits:
            data = np.load(folder / f"{name}_{split}.npz")
            np.random.seed(0)
            tf.random.set_seed(0)
            model = oak_model(max_interaction_depth=data["X_train"].shape[1])
            start = time.perf_counter()
            model.fit(data["X_train"], data["y_train"].reshape(-1, 1))
            seconds = time.perf_counter() - start
            scores, clipped = _scores(model, data["X_test"], data["y_test"], clip=False), False
            if scores is None:
                scores, clipped = _scores(model, data["X_test"], data["y_test"], clip=True), True
            writer.writerow([name, split, *scores, f"{seconds:.1f}", clipped])
            handle.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("export", "run"))
    parser.add_argument("dataset")
    parser.add_argument("--dir", type=Path, required=True, help="folder of the exported splits")
    parser.add_argument("--splits", type=int, nargs="*", default=list(range(10)))
    parser.add_argument("--oak-path", help="checkout of the authors' repository (run)")
    parser.add_argument("--out", type=Path, default=Path("authors.csv"), help="CSV to append to (run)")
    args = parser.parse_args()
    if args.step == "export":
        export(args.dataset, args.dir)
    else:
        if not args.oak_path:
            parser.error("run needs --oak-path")
        run(args.dataset, args.dir, args.splits, args.oak_path, args.out)


if __name__ == "__main__":
    main()
