"""Model files written by an earlier build load and predict identically.

``tests/data/modelfiles`` holds small OAK, GP, SIGP and OAK-classifier models saved
by ``make_files.py`` together with their predictions on ``Xtest.npy``; a refactor
that changes how a saved model is rebuilt (encoder, flows, engines) fails here.
"""

import json
from pathlib import Path

import numpy as np
import pytest

import hdgp

HERE = Path(__file__).resolve().parents[1] / "data" / "modelfiles"
EXPECTED = json.loads((HERE / "predictions.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_saved_model_predicts_as_when_written(name):
    est = hdgp.load(HERE / f"{name}.hdgp")
    Xt = np.load(HERE / "Xtest.npy")
    want = EXPECTED[name]
    if "proba" in want:
        np.testing.assert_allclose(est.predict_proba(Xt), np.array(want["proba"]), rtol=0, atol=1e-12)
    else:
        mean, std = est.predict(Xt, return_std=True)
        np.testing.assert_allclose(mean, np.array(want["mean"]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(std, np.array(want["std"]), rtol=0, atol=1e-12)
