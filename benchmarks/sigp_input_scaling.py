"""SIGP regression on a smooth function of 5 of 20 features (issue #41's collapse, reproduced).

f = sin(2 x0) + x1^2 + 0.5 x2 x3 + 0.3 cos(3 x4) on uniform[-1, 1]^20, noise sd 0.01, target
standardised; n training rows (argument 1), 1,000 test rows; KEEP=k keeps the first k features.
Extra arguments are SIGPRegressor parameters as name=python-literal. Prints fit seconds, test RMSE
(standardised), the chosen hyper-parameters, the kernel rank and the best CV scores.

    KEEP=20 python benchmarks/sigp_input_scaling.py 800 "eta=[1e-7,1e-5,1e-3]" "rank=[1,3,10]"
"""
import sys
import time
import warnings

import numpy as np
import torch


warnings.simplefilter("ignore"); torch.set_num_threads(1)
n, d = int(sys.argv[1]), 20
rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, size=(n + 1000, d))
f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.5 * X[:, 2] * X[:, 3] + 0.3 * np.cos(3 * X[:, 4])
y = f + 0.01 * rng.standard_normal(len(f))
y = (y - y[:n].mean()) / y[:n].std()
import os
k = int(os.environ.get("KEEP", d))
Xtr, ytr, Xte, yte = X[:n, :k], y[:n], X[n:, :k], y[n:]
kw = dict(a.split("=") for a in sys.argv[2:])
kw = {k: eval(v) for k, v in kw.items()}
from hdgp.estimators import SIGPRegressor
est = SIGPRegressor(random_state=0, **kw)
t = time.time(); est.fit(Xtr, ytr); t = time.time() - t
rmse = np.sqrt(np.mean((est.predict(Xte) - yte) ** 2))
print(f"n={n} {kw} {t:.1f}s rmse={rmse:.4f} best={est.best_params_} score={est.best_score_:.4f} krank={est.kernel_rank_} kres={est.kernel_residual_:.1e}")
sc = sorted(est.cv_scores_.items(), key=lambda kv: -kv[1])[:8]
for k, v in sc: print("  ", dict(k), round(v, 4))
