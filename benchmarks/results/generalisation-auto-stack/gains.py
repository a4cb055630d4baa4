import sys, warnings, time
import numpy as np, pandas as pd
from hdgp.bench.datasets import load_split
from hdgp.bench.protocols._specs import DatasetSpec
from hdgp.io.table import TableSchema
from hdgp.workflow.select import select
from hdgp.bench.protocols import get_protocol
PROTO = get_protocol("generalisation")
sets = sys.argv[1].split(",")
for name in sets:
    task = "classification" if name in ("wine", "iris", "breast_cancer") else "regression"
    for split in range(3):
        spec = next(d for d in PROTO.datasets if d.name == name)
        data = load_split(spec, split, PROTO.normalisation)
        X = pd.DataFrame(data.X_train, columns=[f"x{j}" for j in range(data.X_train.shape[1])])
        frame = X.assign(target=data.y_train)
        schema, X_raw, y = TableSchema.infer(frame, "target", task=task)
        msgs = []
        t = time.time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            best, rows, members = select(X_raw, y, schema, params=None, random_state=0, progress=msgs.append, candidates=None)
        print(name, split, f"{time.time()-t:.0f}s", [m for m in msgs if m.startswith("[auto] stacking")] or ["single " + best], flush=True)
