"""Fuzzing the table reader and the model-file reader (issue 9, part 6).

Malformed inputs — truncated files, flipped bytes, wrong encodings, NUL bytes,
unbalanced quotes, huge headers, random JSON manifests — must give either a
result or the reader's documented error (``TableError`` / ``ModelFileError``,
both ``ValueError`` subclasses with a message); never another exception type,
never a hang.
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
from _reliability_helpers import RELIABILITY
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hdgp
from hdgp.io import ModelFileError, TableError, TableSchema, read_table

FUZZ = settings(RELIABILITY, max_examples=25)

_GOOD_CSV = "a,b,c,y\n1.0,2,x,0.5\n2.5,3,y,1.5\n-1,4,x,2.0\n0.3,5,y,-1.0\n7,6,x,3.3\n".encode()


def _table_outcome(path):
    """read_table + schema inference: a frame, or a TableError with a message."""
    try:
        frame = read_table(path)
    except TableError as exc:
        assert str(exc)
        return None
    assert isinstance(frame, pd.DataFrame) and frame.shape[0] > 0 and frame.shape[1] > 0
    target = frame.columns[-1]
    try:
        schema, X, y = TableSchema.infer(frame, target)
    except TableError as exc:
        assert str(exc)
        return None
    assert len(X) == len(y) and np.all(np.isfinite(schema.encode(X).to_numpy(dtype=float)))
    return frame


@FUZZ
@given(cut=st.integers(0, len(_GOOD_CSV)), flips=st.lists(st.tuples(st.integers(0, len(_GOOD_CSV) - 1),
                                                                    st.integers(0, 255)), max_size=4))
@example(cut=len(_GOOD_CSV), flips=[])  # the intact file is always among the examples
def test_truncated_and_corrupted_csv(tmp_path_factory, cut, flips):
    data = bytearray(_GOOD_CSV[:cut])
    for pos, byte in flips:
        if pos < len(data):
            data[pos] = byte
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_bytes(bytes(data))
    frame = _table_outcome(path)
    if bytes(data) == _GOOD_CSV:  # a TableError on the intact table is no "documented error"
        assert frame is not None and frame.shape == (5, 4)


@FUZZ
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".csv", ".tsv", ".parquet", ".txt"]))
def test_random_bytes_as_a_table(tmp_path_factory, data, suffix):
    path = tmp_path_factory.mktemp("bin") / f"t{suffix}"
    path.write_bytes(data)
    _table_outcome(path)


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list('ab,1.5"\n\r\t;é€\x00 -e+')), max_size=200),
       encoding=st.sampled_from(["utf-8", "latin-1", "utf-16", "cp1252"]))
def test_odd_text_and_wrong_encodings(tmp_path_factory, text, encoding):
    path = tmp_path_factory.mktemp("enc") / "t.csv"
    path.write_bytes(("x,y\n" + text).encode(encoding, errors="replace"))
    _table_outcome(path)


def test_huge_headers_and_wide_tables(tmp_path):
    long_name = "h" * 200_000
    path = tmp_path / "huge_header.csv"
    path.write_text(f"{long_name},y\n1,2\n3,4\n5,6\n")
    frame = _table_outcome(path)
    assert frame is not None and frame.columns[0] == long_name
    wide = tmp_path / "wide.csv"
    cols = [f"c{j}" for j in range(5000)]
    wide.write_text(",".join(cols) + ",y\n" + "\n".join(",".join(["1"] * 5000) + f",{k}" for k in range(3)))
    _table_outcome(wide)
    lonely = tmp_path / "only_header.csv"
    lonely.write_text(",".join(cols) + "\n")
    with pytest.raises(TableError):
        read_table(lonely)


@FUZZ
@given(cut=st.integers(0, 4000), flip=st.integers(0, 4000), byte=st.integers(0, 255))
def test_truncated_and_corrupted_parquet(tmp_path_factory, cut, flip, byte):
    buffer = io.BytesIO()
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["x", "y", "x"], "y": [0.1, 0.2, 0.4]}).to_parquet(buffer)
    data = bytearray(buffer.getvalue())
    if flip < len(data):
        data[flip] = byte
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    path.write_bytes(bytes(data[: cut if cut < len(data) else len(data)]))
    _table_outcome(path)


# ------------------------------------------------------------------ model files
@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = hdgp.preset("RBF-ARD", max_iter=3, random_state=0).fit(X, np.sin(X[:, 0]))
    path = hdgp.save(est, tmp_path_factory.mktemp("model") / "m.hdgp")
    return path.read_bytes()


def _load_outcome(path, intact: bool = False):
    """hdgp.load: the estimator, or a ModelFileError with a message naming the file or the model;
    an intact file must load."""
    try:
        return hdgp.load(path)
    except ModelFileError as exc:
        assert not intact, f"the intact model file was refused: {exc}"
        assert str(exc) and (str(path) in str(exc) or "model" in str(exc).lower()), str(exc)
        return None


@FUZZ
@given(cut=st.integers(0, 100_000), flips=st.lists(st.tuples(st.integers(0, 100_000), st.integers(0, 255)),
                                                   max_size=3))
@example(cut=100_000, flips=[])  # the intact file is always among the examples
def test_truncated_and_corrupted_model_files(tmp_path_factory, model_bytes, cut, flips):
    data = bytearray(model_bytes[: min(cut, len(model_bytes))])
    for pos, byte in flips:
        if data:
            data[pos % len(data)] = byte
    path = tmp_path_factory.mktemp("mf") / "m.hdgp"
    path.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = _load_outcome(path, intact=bytes(data) == model_bytes)
    if bytes(data) == model_bytes:
        assert loaded is not None and loaded.predict(np.zeros((1, 2))).shape == (1,)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["hdgp-model", "$tensor", "$object", "t0", "hdgp.estimators.gp.GPRegressor"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["$dict", "$tensor", "$array", "$object", "$tuple", "$np", "$dtype", "$float", "$module",
                         "$strarray", "state", "value", "dtype", "x"]), children, max_size=3),
    max_leaves=12,
)


@FUZZ
@given(replace=st.sampled_from(["format_version", "estimator", "class", "params", "state", "table", "metadata",
                                "tensors", "modules", "recompute"]),
       value=json_values)
def test_random_manifest_fields(tmp_path_factory, model_bytes, replace, value):
    with zipfile.ZipFile(io.BytesIO(model_bytes)) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        blob = zf.read("tensors.pt")
    target = manifest["estimator"] if replace in ("class", "params", "state", "modules", "recompute") else manifest
    target[replace] = value
    path = tmp_path_factory.mktemp("mj") / "m.hdgp"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("tensors.pt", blob)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _load_outcome(path)


def test_non_utf8_huge_and_bomb_manifests(tmp_path, model_bytes):
    with zipfile.ZipFile(io.BytesIO(model_bytes)) as zf:
        blob = zf.read("tensors.pt")
    cases = {
        "latin1.hdgp": json.dumps({"format": "hdgp-model", "x": "é"}).encode("latin-1"),
        "utf16.hdgp": json.dumps({"format": "hdgp-model"}).encode("utf-16"),
        "huge.hdgp": b'{"format": "hdgp-model", "pad": "' + b"x" * 5_000_000 + b'"}',
        "deep.hdgp": b"[" * 100_000 + b"]" * 100_000,
        "nul.hdgp": b"\x00" * 1000,
    }
    for name, manifest in cases.items():
        path = tmp_path / name
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("manifest.json", manifest)
            zf.writestr("tensors.pt", blob)
        with pytest.raises(ModelFileError):
            hdgp.load(path)
    for name, data in {"empty.hdgp": b"", "text.hdgp": b"not a zip", "dir.hdgp": None}.items():
        path = tmp_path / name
        if data is None:
            path.mkdir()
        else:
            path.write_bytes(data)
        with pytest.raises(ModelFileError):
            hdgp.load(path)


def test_decompression_bomb_manifest_is_refused_before_expanding(tmp_path, model_bytes, monkeypatch):
    import hdgp.io.modelfile as modelfile

    monkeypatch.setattr(modelfile, "_MAX_MANIFEST_BYTES", 100_000)
    path = tmp_path / "bomb.hdgp"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", b" " * 5_000_000)  # ~5 kB compressed, 5 MB expanded
        zf.writestr("tensors.pt", b"")
    assert path.stat().st_size < 50_000
    with pytest.raises(ModelFileError, match="more than the"):
        hdgp.load(path)
