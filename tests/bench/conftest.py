"""Helpers for the benchmark-harness tests: tiny protocols on synthetic data (no data folder needed)."""

import json

import pytest


def _tiny_protocol(name="tiny", datasets=("bach",), models=None, splits=(0, 1), n=60, references=()):
    """A protocol dict on the synthetic 'bach' set with the fast Linear preset."""
    models = models if models is not None else [{"label": "Linear", "preset": "Linear"}]
    return {"name": name, "description": "tiny test protocol",
            "datasets": [{"name": d, "kwargs": {"n": n}} for d in datasets],
            "models": models, "splits": list(splits), "metrics": ["rmse", "nlpd"],
            "references": list(references), "plots": ["rmse"]}


@pytest.fixture(autouse=True)
def _clean_revision(monkeypatch):
    """Rows of these tests record a fixed clean revision, so `bench run` (which refuses a dirty
    checkout) runs while the sources are being edited; tests of the check set their own."""
    monkeypatch.setenv("HDGP_GIT_REVISION", "0123456789ab")


@pytest.fixture
def protocol_file(tmp_path):
    """Write a protocol dict to a JSON file and return its path."""

    def write(spec):
        path = tmp_path / f"{spec['name']}.json"
        path.write_text(json.dumps(spec))
        return path

    return write


@pytest.fixture
def tiny_protocol():
    """Factory of tiny protocol dicts (see :func:`_tiny_protocol`)."""
    return _tiny_protocol
