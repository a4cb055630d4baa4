"""Model files are data, never code (issue 9, part 5).

A crafted ``.hdgp`` file — valid zip, valid JSON, correct checksum, so every
integrity check passes — must not execute code or touch the file system when
loaded: a pickle payload inside ``tensors.pt`` is refused by
``torch.load(weights_only=True)``; the manifest may only name hdgp *estimator*
classes (not any class that happens to be importable from an hdgp module, such
as ``pathlib.Path`` or the benchmark ``ResultStore``, whose constructor creates
files); zip members named ``../x`` or ``/abs`` are never extracted; and the
report written by ``hdgp explain`` from a crafted file stays inside its folder
with every string HTML-escaped.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import hdgp
from hdgp.cli import main
from hdgp.io import ModelFileError


def _fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hdgp.preset("RBF-ARD", max_iter=3, random_state=0).fit(X, np.sin(X[:, 0])), X


def _members(path) -> dict:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _write(path, manifest: dict, blob: bytes, extra: dict | None = None, fix_checksum: bool = True):
    if fix_checksum:
        manifest = {**manifest, "tensors": {**manifest["tensors"], "sha256": hashlib.sha256(blob).hexdigest()}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("tensors.pt", blob)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return path


class _Payload:
    """Unpickling this object creates the marker file: proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def saved(tmp_path):
    est, X = _fitted()
    path = hdgp.save(est, tmp_path / "ok.hdgp")
    members = _members(path)
    return path, json.loads(members["manifest.json"]), members["tensors.pt"], X


def test_pickle_payload_in_the_tensor_data_is_refused_and_never_runs(tmp_path, saved):
    _, manifest, _, _ = saved
    marker = tmp_path / "owned.txt"
    for payload in ({"t0": _Payload(marker)}, _Payload(marker)):
        buffer = io.BytesIO()
        torch.save(payload, buffer)  # a torch file whose pickle calls open() when loaded unsafely
        bad = _write(tmp_path / "evil.hdgp", manifest, buffer.getvalue())
        with pytest.raises(ModelFileError, match="cannot read the tensors"):
            hdgp.load(bad)
        assert not marker.exists(), "loading executed code from the model file"
    raw = _write(tmp_path / "raw.hdgp", manifest, pickle.dumps(_Payload(marker)))  # plain pickle, not torch
    with pytest.raises(ModelFileError):
        hdgp.load(raw)
    assert not marker.exists()


@pytest.mark.parametrize("target", [
    "os.system", "builtins.eval", "subprocess.Popen", "hdgp.io.atomic.Path", "hdgp.io.modelfile.zipfile.ZipFile",
    "hdgp.bench.runner.ProcessPoolExecutor", "hdgp.bench.store.ResultStore", "hdgp.io.codec.importlib",
    "hdgp.__builtins__", "hdgp.estimators.gp.copy.deepcopy",
])
def test_manifest_may_only_name_hdgp_estimators(tmp_path, saved, target):
    _, manifest, blob, _ = saved
    outside = tmp_path / "outside" / "created.sqlite"
    params = {"$dict": [["path", str(outside)], ["writer", True]]}
    crafted = {**manifest, "estimator": {**manifest["estimator"], "class": target, "params": params}}
    with pytest.raises(ModelFileError):
        hdgp.load(_write(tmp_path / "evil.hdgp", crafted, blob))
    assert not outside.parent.exists(), f"loading {target!r} wrote outside the target directory"


def test_object_nodes_may_only_name_hdgp_classes(tmp_path, saved):
    _, manifest, blob, _ = saved
    state = manifest["estimator"]["state"]
    for target in ("hdgp.io.atomic.Path", "hdgp.bench.runner.ProcessPoolExecutor", "collections.OrderedDict"):
        node = {"$object": target, "state": {"$dict": [["_closed", False]]}}
        crafted_state = {"$dict": state["$dict"] + [["evil_", node]]}
        crafted = {**manifest, "estimator": {**manifest["estimator"], "state": crafted_state}}
        with pytest.raises(ModelFileError):
            hdgp.load(_write(tmp_path / "evil.hdgp", crafted, blob))


def test_zip_members_with_traversal_names_are_never_extracted(tmp_path, saved):
    _, manifest, blob, X = saved
    inner = tmp_path / "inner"
    inner.mkdir()
    escape = tmp_path / "escaped.txt"
    extra = {"../escaped.txt": b"x", str(escape): b"y", "../../../../tmp/hdgp-escaped.txt": b"z"}
    path = _write(inner / "m.hdgp", manifest, blob, extra)
    est = hdgp.load(path)  # extra members are ignored
    assert np.all(np.isfinite(est.predict(X)))
    assert not escape.exists()
    assert sorted(p.name for p in inner.iterdir()) == ["m.hdgp"]


def test_explain_on_a_crafted_file_writes_only_inside_its_folder(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(20, 2)), columns=["a", "b"])
    frame["y"] = np.sin(frame.a)
    frame.to_csv(tmp_path / "t.csv", index=False)
    runner = CliRunner()
    fitted = runner.invoke(main, ["fit", str(tmp_path / "t.csv"), "-t", "y", "-m", "Linear", "--test-size", "0",
                                  "--quiet", "-o", str(tmp_path / "m.hdgp")])
    assert fitted.exit_code == 0, fitted.output
    members = _members(tmp_path / "m.hdgp")
    manifest = json.loads(members["manifest.json"])
    hostile = "../../escape/<script>alert(1)</script>"

    def poison(node):
        if isinstance(node, dict) and "$dict" in node:
            return {"$dict": [[k, hostile if k in ("model", "file", "target") and isinstance(v, str) else poison(v)]
                              for k, v in node["$dict"]]}
        if isinstance(node, list):
            return [poison(v) for v in node]
        return node

    manifest["metadata"] = poison(manifest["metadata"])
    crafted = _write(tmp_path / "crafted.hdgp", manifest, members["tensors.pt"], fix_checksum=False)
    report = tmp_path / "report"
    result = runner.invoke(main, ["explain", str(crafted), "-o", str(report), "--quiet"])
    assert result.exit_code in (0, 1), result.exception
    outside = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")} - {
        "t.csv", "m.hdgp", "crafted.hdgp", "report"}
    assert all(p.startswith("report/") for p in outside), outside
    if result.exit_code == 0:
        page = (report / "report.html").read_text(encoding="utf-8")
        assert "<script>" not in page


@pytest.mark.parametrize("name", ["_make_kernel", "predict", "_rebuild_module", "__class__", "_torch_kwargs"])
def test_fitted_state_cannot_shadow_methods(tmp_path, saved, name):
    """State entries named like methods/properties would let a file redirect calls made while loading."""
    _, manifest, blob, _ = saved
    state = manifest["estimator"]["state"]
    crafted_state = {"$dict": state["$dict"] + [[name, "not a method"]]}
    crafted = {**manifest, "estimator": {**manifest["estimator"], "state": crafted_state}}
    with pytest.raises(ModelFileError, match="replace"):
        hdgp.load(_write(tmp_path / "evil.hdgp", crafted, blob))
