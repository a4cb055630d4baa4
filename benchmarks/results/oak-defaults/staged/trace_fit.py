"""Trace one default OAK fit stage by stage (session helper, kept as the command of the logs here).

Every ``fit_hyperparameters`` call of the estimator is logged (model, rows, order, evaluations, seconds,
progress label, max_iter, ftol) with its loss after each evaluation (printed for fits on more than 1,600
rows, every second evaluation in the later logs); then fit seconds, test RMSE / NLPD (z-scored target),
order, start and per-order Sobol mass.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src HDGP_DATA_DIR=<data> \
        python benchmarks/results/oak-defaults/staged/trace_fit.py DATASET SPLIT "{preset params}" "{policy constants}"

DATASET is a table of ``benchmarks/oak_defaults.py``; the policy constants are set on
``hdgp.estimators._oak_fit_policy`` before the fit (e.g. "{'STAGE_TWO_MAX_ITER': 30}").
"""
import sys, time, os, warnings
sys.path.insert(0, "benchmarks")
import torch; torch.set_num_threads(1)
import numpy as np
from oak_defaults import table
import hdgp
from hdgp.estimators import _base
import hdgp.training as tr
real = _base.fit_hyperparameters
log = []
traj = []
def spy(model, X, y, **kw):
    t = time.perf_counter()
    cur = []; traj.append((X.shape[0], cur))
    kw["callback"] = lambda d: cur.append((d["evaluations"], round(d["elapsed"],1), round(d["loss"],5)))
    r = real(model, X, y, **kw)
    log.append((type(model).__name__, X.shape[0], getattr(model.kernel,'max_order',None), r.n_evaluations, round(time.perf_counter()-t,2), kw.get('desc'), kw.get('max_iter'), kw.get('ftol')))
    return r
_base.fit_hyperparameters = spy
ds = sys.argv[1]; split = int(sys.argv[2]) if len(sys.argv) > 2 else 0
params = eval(sys.argv[3]) if len(sys.argv) > 3 else {}
consts = eval(sys.argv[4]) if len(sys.argv) > 4 else {}
import hdgp.estimators._oak_fit_policy as pol
for k, v in consts.items(): setattr(pol, k, v)
print("consts", consts, params)
Xtr, ytr, Xte, yte = table(ds, split)
print(ds, Xtr.shape, "load", os.getloadavg()[0])
est = hdgp.preset("OAK", random_state=0, **params)
t = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est.fit(Xtr, ytr)
fit_s = time.perf_counter() - t
for l in log: print(l)
for n_, cur in traj:
    if n_ > 1600: print(n_, [c for c in cur if c[0] % 2 == 0])
m, s = est.predict(Xte, return_std=True)
var = np.maximum(s**2, 1e-12)
print(f"fit {fit_s:.2f}s rmse {np.sqrt(np.mean((m-yte)**2)):.4f} nlpd {np.mean(0.5*np.log(2*np.pi*var)+0.5*(m-yte)**2/var):.4f} R={est.max_order_} start={est.start_} losses={est.start_losses_} order={np.array2string(est.sobol_order_, precision=3)} load {os.getloadavg()[0]}")
print("fit_result loss", est.fit_result_.loss)
