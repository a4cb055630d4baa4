"""Writes the committed model files and their predictions (run once, with the code of the format they pin):

    python tests/data/modelfiles/make_files.py tests/data/modelfiles
"""
import numpy as np, hdgp, json, sys
out = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, (40, 3)); y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.05 * rng.standard_normal(40)
Xt = rng.uniform(-1, 1, (7, 3))
yc = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
ests = {
 "oak": hdgp.OAKRegressor(max_iter=20, random_state=0),
 "gp": hdgp.GPRegressor(max_iter=20, random_state=0),
 "sigp": hdgp.SIGPRegressor(random_state=0),
 "oak_classifier": hdgp.OAKClassifier(max_iter=10, random_state=0),
}
res = {}
for name, est in ests.items():
    cls = "classifier" in name
    try:
        est.fit(X, yc if cls else y)
    except TypeError as e:
        print(name, e); raise
    p = hdgp.save(est, f"{out}/{name}.hdgp")
    print(name, p)
    if cls:
        res[name] = {"proba": est.predict_proba(Xt).tolist()}
    else:
        m, s = est.predict(Xt, return_std=True)
        res[name] = {"mean": np.asarray(m).tolist(), "std": np.asarray(s).tolist()}
np.save(f"{out}/Xtest.npy", Xt)
json.dump(res, open(f"{out}/predictions.json", "w"), indent=1)
