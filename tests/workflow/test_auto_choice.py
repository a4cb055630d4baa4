"""``--model auto``'s final choice: log densities within one standard error are ranked by squared error."""

import numpy as np
import pandas as pd

from hdgp.io import TableSchema
from hdgp.workflow import select as select_module
from hdgp.workflow import select_model


def test_a_tie_in_log_density_goes_to_the_smaller_squared_error():
    rng = np.random.default_rng(0)
    m = 300
    base = rng.normal(size=m)
    e = rng.normal(size=(2, m))
    e -= e.mean(axis=1, keepdims=True)
    density = {"leader": base, "tied": base - 0.02 + 1.0 * e[0],  # gap 0.02, standard error ~0.06: a tie
               "worse": base - 0.5 + 0.1 * e[1]}  # gap 0.5, standard error ~0.006: clearly worse
    errors = {"leader": np.full(m, 1.0), "tied": np.full(m, 0.8), "worse": np.full(m, 0.1)}
    assert select_module.choose(density, errors) == "tied"
    assert select_module.choose(density, {**errors, "tied": np.full(m, 1.2)}) == "leader"
    # the clearly worse density is never chosen, whatever its squared error; without errors the leader wins
    assert select_module.choose({k: density[k] for k in ("leader", "worse")}, errors) == "leader"
    assert select_module.choose(density) == "leader"
    # a tie needs the noise: the same gap measured without spread is beyond noise
    exact = {"leader": base, "tied": base - 0.02}
    assert select_module.choose(exact, errors) == "leader"
    # one standard error by default: a gap of 1.5 of them is no tie, within z = 2 it is
    gap = {"leader": base, "tied": base - 1.5 / np.sqrt(m) + e[0]}
    assert select_module.choose(gap, errors) == "leader"
    assert select_module.choose(gap, errors, z=2.0) == "tied"


def test_auto_reports_a_choice_by_squared_error_among_tied_densities():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 2))
    frame = pd.DataFrame(x, columns=["a", "b"]).assign(y=np.sin(2 * x[:, 0]) + 0.3 * rng.normal(size=120))
    schema, X, y = TableSchema.infer(frame, "y")
    messages = []
    name, rows = select_model(X, y, schema, params={"max_iter": 30}, candidates=["RBF-ARD", "GAM", "Linear"],
                              progress=messages.append)
    by = {r["model"]: r for r in rows}
    density = {k: r["val_log_density_calibrated"] for k, r in by.items()}
    leader = max(density, key=density.get)
    assert by[name]["selected"] and by[name]["val_rmse"] <= by[leader]["val_rmse"]
    assert density["Linear"] < density[leader]  # sin(2a) is not linear
    assert name != "Linear"
    if name != leader:
        assert any("within one standard error" in m and name in m for m in messages)
