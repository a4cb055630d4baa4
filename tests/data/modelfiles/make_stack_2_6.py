"""Writes stack_2_6.hdgp: a StackedRegressor saved before its members were constructor parameters (hdgp at
commit 5c81424, format 2.6). Run with that code: python tests/data/modelfiles/make_stack_2_6.py tests/data/modelfiles
The printed predictions are the ones tests/workflow/test_auto_stacking.py expects."""
import json, sys
import numpy as np, pandas as pd, hdgp
from hdgp.workflow.stacking import StackedRegressor
out = sys.argv[1]
rng = np.random.default_rng(1)
X = pd.DataFrame({"a": rng.uniform(-1, 1, 40), "g": rng.integers(0, 3, 40).astype(float)})
y = np.sin(2 * X["a"].to_numpy()) + (X["g"].to_numpy() == 1) + 0.05 * rng.standard_normal(40)
oak = hdgp.OAKRegressor(max_iter=20, random_state=0).fit(X, y)
onehot = pd.DataFrame({"a": X["a"], **{f"g={k}": (X["g"] == k).astype(float) for k in range(3)}})
gp = hdgp.GPRegressor(max_iter=20, random_state=0).fit(onehot, y)
stack = StackedRegressor.from_members([("OAK", oak, "codes", ["a", "g"]),
                                       ("RBF-ARD", gp, "onehot", ["a", "g=0", "g=1", "g=2"])],
                                      [0.375, 0.625], ["a", "g"], {"g": 3})
Xt = pd.DataFrame({"a": [-0.5, 0.0, 0.7], "g": [0.0, 1.0, 2.0]})
mean, std = stack.predict(Xt, return_std=True)
hdgp.save(stack, f"{out}/stack_2_6.hdgp")
print(json.dumps({"X": Xt.to_numpy().tolist(), "mean": mean.tolist(), "std": std.tolist()}))
