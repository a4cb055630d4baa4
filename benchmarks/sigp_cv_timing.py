"""Wall-clock time of SIGP fits with the default cross-validation grid (Tan & Mukherjee data).

Times ``SIGPRegressor()`` / ``SIGPClassifier(rank=1)`` with every hyper-parameter
left to the estimator's default 5-fold CV grid, on the housing demo split, split 0
of heart and german (test sizes 100 / 300) and arcene train -> valid; prints the
fit time, the number of grid points scored and the test metric. The folds are
shuffled with ``random_state=0`` so that an older hdgp (whose folds were always
shuffled) can be timed with the same call: put its ``src`` first on
``PYTHONPATH``.

Usage::

    HDGP_DATA_DIR=../shared/data OMP_NUM_THREADS=1 python benchmarks/sigp_cv_timing.py
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedShuffleSplit

import hdgp
from hdgp.data.sigp import load_sigp, load_sigp_split
from hdgp.estimators import SIGPClassifier, SIGPRegressor


def _timed(model, X, y):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return time.perf_counter() - t0


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    torch.set_num_threads(1)
    print(f"hdgp from {hdgp.__file__}, torch threads = {torch.get_num_threads()}")
    X_tr, y_tr, X_te, y_te = load_sigp_split("housing")
    for kw in (dict(), dict(rank=2)):
        model = SIGPRegressor(random_state=0, **kw)
        seconds = _timed(model, X_tr, y_tr)
        mse = np.mean((model.predict(X_te) - y_te) ** 2)
        print(f"housing SIGPRegressor({kw}): fit {seconds:.1f} s, {len(model.cv_scores_)} grid points, MSE {mse:.2f}")
    for name, n_test in (("heart", 100), ("german", 300)):
        X, y = load_sigp(name)
        tr, te = next(StratifiedShuffleSplit(1, test_size=n_test, random_state=0).split(X, y))
        model = SIGPClassifier(rank=1, random_state=0)
        seconds = _timed(model, X[tr], y[tr])
        f1 = f1_score(y[te], model.predict(X[te]), pos_label=2)
        print(f"{name} SIGPClassifier(rank=1): fit {seconds:.1f} s, {len(model.cv_scores_)} grid points, F1 {f1:.3f}")
    X_tr, y_tr, X_te, y_te = load_sigp_split("arcene")
    model = SIGPClassifier(rank=1, random_state=0)
    seconds = _timed(model, X_tr, y_tr)
    f1 = f1_score(y_te, model.predict(X_te))
    print(f"arcene SIGPClassifier(rank=1): fit {seconds:.1f} s, {len(model.cv_scores_)} grid points, F1 {f1:.3f}")


if __name__ == "__main__":
    main()
