"""Loaders of the SIGP paper's data files (skipped without the shared data folder)."""

import numpy as np
import pytest

from hdgp.data import find_data_dir
from hdgp.data.sigp import load_sigp, load_sigp_split

pytestmark = pytest.mark.skipif(
    find_data_dir() is None or not (find_data_dir() / "sigp").is_dir(),
    reason="shared benchmark data not found (set HDGP_DATA_DIR)",
)


@pytest.mark.parametrize(
    "name, shape, labels",
    [("heart", (270, 13), {1, 2}), ("german", (1000, 24), {1, 2}), ("cancer", (699, 9), {2, 4})],
)
def test_classification_sets(name, shape, labels):
    X, y = load_sigp(name)
    assert X.shape == shape and set(np.unique(y)) == labels and np.isfinite(X).all()


def test_fixed_splits():
    X_tr, y_tr, X_te, y_te = load_sigp_split("housing")
    assert X_tr.shape == (400, 13) and X_te.shape == (106, 13)
    assert y_tr[0] == pytest.approx(24.0)  # MEDV of the first row, raw units
    with pytest.raises(ValueError, match="fixed split"):
        load_sigp_split("heart")
    with pytest.raises(ValueError, match="Unknown"):
        load_sigp("temp")
