"""Shared test configuration.

The shared benchmark data folder is located through ``HDGP_DATA_DIR``; when it is
unset and the repository sits beside ``shared/data`` (as on the team's machines
and in CI), that folder is used. Tests that need it skip with a reason otherwise.
"""

import os
from pathlib import Path

import pytest

_SIBLING = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if not os.environ.get("HDGP_DATA_DIR") and _SIBLING.is_dir():
    os.environ["HDGP_DATA_DIR"] = str(_SIBLING)


@pytest.fixture
def data_dir():
    """The benchmark data folder, or skip the test with the reason."""
    from hdgp.data import find_data_dir

    path = find_data_dir()
    if path is None:
        pytest.skip("shared benchmark data not found: set HDGP_DATA_DIR to the folder holding uci/ and sigp/")
    return path


@pytest.fixture
def float64_default():
    """Make float64 torch's default dtype for one test and restore the previous default after.

    For tests that build tensors without a dtype; setting the default at module level
    would leak into every other test module.
    """
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(autouse=True)
def _seed_global_generators():
    """Seed torch's and NumPy's global generators before every test.

    Tests that draw from them without their own generator (``torch.randn(...)``) then see
    the same numbers whatever ran before them, so no result depends on test order.
    """
    import numpy as np
    import torch

    torch.manual_seed(0)
    np.random.seed(0)


def pytest_collection_modifyitems(config, items):
    """Every test that reads the shared data (through the ``data_dir`` fixture, directly or via
    another fixture) carries the ``data`` marker, so ``-m "not data"`` leaves them all out."""
    for item in items:
        if "data_dir" in getattr(item, "fixturenames", ()) and item.get_closest_marker("data") is None:
            item.add_marker(pytest.mark.data)
