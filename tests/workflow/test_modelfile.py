"""The .hdgp model file: identical predictions after a round trip, version checks, damaged files."""

import hashlib
import math
import io
import json
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
import torch

import hdgp
from hdgp.exceptions import HDGPWarning
from hdgp.io import FORMAT_VERSION, ModelFileError, read_manifest
from hdgp.io.codec import StateDecoder, StateEncoder

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3))
Y = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * RNG.normal(size=40)
XT = RNG.normal(size=(7, 3))

FAMILIES = {
    "RBF-ARD": dict(max_iter=10),
    "GAM": dict(max_iter=10),
    "Linear": dict(max_iter=10),
    "Additive": dict(max_iter=10, max_order=2),
    "OAK": dict(max_iter=10, max_order=2, measure="gmm"),
    "DPA-GP-ARD": dict(max_iter=5, n_projections=4),
    "DPA-GP-ARD-SKI": dict(max_iter=5, n_projections=3, grid_size=32),
    "RPA-GP-2": dict(max_iter=5, degree=[(2, 1), (2, 2)]),
    "SGPR-RBF-ARD": dict(max_iter=10, n_inducing=8),
    "SIGP": dict(rank=2, lengthscale=2.0, eta=1e-3, mean_penalty=1.0, y_bandwidth=0.5),
}


def _fit(name, **extra):
    est = hdgp.preset(name, random_state=0, **{**FAMILIES[name], **extra})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_round_trip_gives_identical_predictions(tmp_path, name):
    est = _fit(name)
    path = hdgp.save(est, tmp_path / "m.hdgp")
    back = hdgp.load(path)
    assert type(back) is type(est)
    assert back.get_params() == est.get_params()
    mean, std = est.predict(XT, return_std=True)
    mean2, std2 = back.predict(XT, return_std=True)
    np.testing.assert_array_equal(mean, mean2)
    np.testing.assert_array_equal(std, std2)
    # a reloaded model saves and reloads again
    again = hdgp.load(hdgp.save(back, tmp_path / "m2.hdgp"))
    np.testing.assert_array_equal(again.predict(XT), mean)


def test_oak_with_dataframe_and_text_column_keeps_sobol_and_components(tmp_path):
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["g"] = np.where(X[:, 0] > 0, "hi", "lo")
    est = hdgp.preset("OAK", random_state=0, max_iter=10, max_order=2)
    est.fit(frame, Y)
    back = hdgp.load(hdgp.save(est, tmp_path / "oak.hdgp"))
    assert back.sobol_indices_ == est.sobol_indices_
    test = frame.iloc[:5]
    np.testing.assert_array_equal(back.predict(test), est.predict(test))
    np.testing.assert_array_equal(back.predict_component(test, "a"), est.predict_component(test, "a"))
    assert list(back.feature_names_in_) == ["a", "b", "c", "g"]


@pytest.mark.parametrize("levels", [
    pd.IntervalIndex.from_breaks([-5.0, -0.5, 0.5, 5.0]),
    pd.date_range("2020-01-01", periods=3, tz="Europe/Paris"),
    pd.period_range("2020-01", periods=3, freq="M"),
    pd.to_timedelta([1, 2, 3], unit="D"),
], ids=["interval", "timestamp", "period", "timedelta"])
def test_oak_with_pandas_scalar_categories_round_trips(tmp_path, levels):
    """Category levels from pd.cut, dates, periods and durations used to make the model unsavable."""
    codes = np.digitize(X[:, 0], [-0.5, 0.5])
    frame = pd.DataFrame({"a": X[:, 1], "c": pd.Categorical(np.asarray(levels)[codes])})
    est = hdgp.preset("OAK", random_state=0, max_iter=5, max_order=2).fit(frame, Y)
    back = hdgp.load(hdgp.save(est, tmp_path / "oak.hdgp"))
    assert back.frame_levels_ == est.frame_levels_ and type(back.frame_levels_["c"][0]) is type(levels[0])
    np.testing.assert_array_equal(back.predict(frame.iloc[:5]), est.predict(frame.iloc[:5]))


def test_sigp_classifier_round_trip(tmp_path):
    labels = np.where(Y > np.median(Y), "yes", "no")
    est = hdgp.preset("SIGP-classifier", random_state=0, rank=2, lengthscale=2.0, eta=1e-3, mean_penalty=1.0)
    est.fit(X, labels)
    back = hdgp.load(hdgp.save(est, tmp_path / "c.hdgp"))
    np.testing.assert_array_equal(back.predict_proba(XT), est.predict_proba(XT))
    assert list(back.classes_) == ["no", "yes"]


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])  # Cholesky vs natural parameters of q(v)
def test_gp_classifier_round_trip(tmp_path, optimizer):
    labels = np.array(["a", "b", "c"])[np.digitize(Y, np.quantile(Y, [1 / 3, 2 / 3]))]
    est = hdgp.preset("GP-classifier", random_state=0, max_iter=3, n_inducing=6, optimizer=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, labels)
    path = hdgp.save(est, tmp_path / "gpc.hdgp")
    assert [m["attribute"] for m in read_manifest(path)["estimator"]["modules"]] == ["models_"] * 3
    back = hdgp.load(path)
    np.testing.assert_array_equal(back.predict_proba(XT), est.predict_proba(XT))
    assert back.posteriors_[1].kernel is back.models_[1].kernel


def test_oak_classifier_with_empirical_measure_round_trip(tmp_path):
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["g"] = np.where(X[:, 1] > 0, "u", "v")
    labels = (X[:, 0] + (frame["g"] == "u") > 0.5).astype(int)
    est = hdgp.preset("OAK-classifier", random_state=0, max_iter=3, n_inducing=8, measure="empirical")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(frame, labels)
    back = hdgp.load(hdgp.save(est, tmp_path / "oakc.hdgp"))  # measure buffers sized from the file
    np.testing.assert_array_equal(back.predict_proba(frame.iloc[:6]), est.predict_proba(frame.iloc[:6]))


def test_manifest_is_documented_json(tmp_path):
    path = hdgp.save(_fit("GAM"), tmp_path / "m.hdgp")
    manifest = read_manifest(path)
    assert manifest["format"] == "hdgp-model"
    assert manifest["format_version"] == list(FORMAT_VERSION)
    assert manifest["library_version"] == hdgp.__version__
    assert manifest["estimator"]["class"] == "hdgp.estimators.gp.GPRegressor"
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["manifest.json", "tensors.pt"]
        tensors = torch.load(io.BytesIO(zf.read("tensors.pt")), weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in tensors.values())
    assert any(k.startswith("model_state/") for k in tensors)


def _rewrite(path, out, *, manifest=None, tensors=None):
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    if manifest is not None:
        members["manifest.json"] = json.dumps(manifest(json.loads(members["manifest.json"]))).encode()
    if tensors is not None:
        members["tensors.pt"] = tensors
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return hdgp.save(_fit("GAM"), tmp_path_factory.mktemp("m") / "m.hdgp")


def test_future_major_version_is_refused(saved, tmp_path):
    def bump(m):
        m["format_version"] = [FORMAT_VERSION[0] + 1, 0]
        m["library_version"] = "9.0.0"
        return m

    with pytest.raises(ModelFileError, match=rf"format {FORMAT_VERSION[0] + 1}\.0 .*hdgp 9\.0\.0.*Upgrade hdgp"):
        hdgp.load(_rewrite(saved, tmp_path / "future.hdgp", manifest=bump))


def test_format_0_is_refused(saved, tmp_path):
    def old(m):
        m["format_version"] = [0, 9]
        return m

    with pytest.raises(ModelFileError, match=r"format 0\.9 .*Refit the model"):
        hdgp.load(_rewrite(saved, tmp_path / "old.hdgp", manifest=old))


def _as_older_format(path, out, version, edit_tensors=None, edit_manifest=None):
    """``path`` rewritten as a file of format ``version``; ``edit_tensors(tensors)`` and
    ``edit_manifest(manifest)`` change in place what that format stored differently."""
    with zipfile.ZipFile(path) as zf:
        tensors = torch.load(io.BytesIO(zf.read("tensors.pt")), weights_only=True)
    if edit_tensors is not None:
        edit_tensors(tensors)
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    blob = buffer.getvalue()

    def downgrade(m):
        m["format_version"] = list(version)
        m["tensors"]["sha256"] = hashlib.sha256(blob).hexdigest()
        if edit_manifest is not None:
            edit_manifest(m)
        return m

    return _rewrite(path, out, manifest=downgrade, tensors=blob)


def _as_format_1(path, out, raw_of_value=None):
    """``path`` rewritten as a format-1.1 file; ``raw_of_value`` re-encodes the raw scales of a
    projected model the way 1.x stored them."""
    def softplus_scales(tensors):
        for key in [k for k in tensors if k.endswith(("raw_outputscale", "raw_input_lengthscale",
                                                       "raw_projection_lengthscale"))]:
            tensors[key] = raw_of_value(tensors[key].exp())

    return _as_older_format(path, out, (1, 1), softplus_scales if raw_of_value is not None else None)


@pytest.mark.parametrize("name", ["DPA-GP-ARD", "RPA-GP-2", "DPA-GP-ARD-SKI"])
def test_format_1_projected_file_is_converted(name, tmp_path):
    """Format 1.x stored the projected kernel's scales as softplus^-1(v); they are read as log(v) now."""
    est = _fit(name)
    path = hdgp.save(est, tmp_path / "new.hdgp")
    softplus_inverse = lambda v: v + torch.log(-torch.expm1(-v))  # noqa: E731
    back = hdgp.load(_as_format_1(path, tmp_path / "old.hdgp", softplus_inverse))
    np.testing.assert_allclose(back.predict(XT), est.predict(XT), rtol=1e-10, atol=1e-12)
    for a, b in zip(back.model_.parameters(), est.model_.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_format_1_file_of_other_family_loads_unchanged(saved, tmp_path):
    back = hdgp.load(_as_format_1(saved, tmp_path / "old.hdgp"))
    np.testing.assert_array_equal(back.predict(XT), hdgp.load(saved).predict(XT))


def _find_object(node, cls):
    """The first ``$object`` node of class ``cls`` in a manifest node."""
    if isinstance(node, dict):
        if node.get("$object") == cls:
            return node
        node = list(node.values())
    for child in node if isinstance(node, list) else []:
        if (found := _find_object(child, cls)) is not None:
            return found
    return None


def test_format_2_2_sigp_file_is_converted(tmp_path):
    """Before 2.3 a SIGP model stored its n×p standardised training inputs and no pivot rows; such
    a file is read with the pivot rows taken from the training inputs, and predicts identically."""
    est = _fit("SIGP")
    path = hdgp.save(est, tmp_path / "new.hdgp")

    def training_inputs(tensors):
        tensors["x_train"] = est._standardise(X, fit=False)

    def no_pivot_rows(m):
        model = _find_object(m["estimator"]["state"], "hdgp.sigp.model.SIGPModel")
        model["state"]["$dict"].append(["X_train", {"$tensor": "x_train"}])
        factor = _find_object(model, "hdgp.sigp.lowrank.KernelFactor")["state"]
        factor["$dict"] = [kv for kv in factor["$dict"] if kv[0] != "pivot_inputs"]

    back = hdgp.load(_as_older_format(path, tmp_path / "old.hdgp", (2, 2), training_inputs, no_pivot_rows))
    assert "X_train" not in vars(back.model_)
    torch.testing.assert_close(back.model_.factor.pivot_inputs, est.model_.factor.pivot_inputs, rtol=0, atol=0)
    for a, b in zip(back.predict(XT, return_std=True), est.predict(XT, return_std=True)):
        np.testing.assert_array_equal(a, b)


def test_newer_minor_version_loads_with_warning(saved, tmp_path):
    def bump(m):
        m["format_version"] = [FORMAT_VERSION[0], FORMAT_VERSION[1] + 1]
        return m

    with pytest.warns(HDGPWarning, match="newer hdgp"):
        est = hdgp.load(_rewrite(saved, tmp_path / "minor.hdgp", manifest=bump))
    np.testing.assert_array_equal(est.predict(XT), hdgp.load(saved).predict(XT))


def test_saving_to_a_folder_names_the_folder(saved, tmp_path):
    """It failed in the atomic rename, naming the temporary file ("'.m.xxxx.tmp' -> '...'")."""
    model = hdgp.load(saved)
    with pytest.raises(IsADirectoryError, match=r"is a folder; give hdgp.save a file name, e.g. .*model\.hdgp"):
        hdgp.save(model, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_truncated_file_gives_clear_error(saved, tmp_path):
    data = saved.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 30):
        bad = tmp_path / f"cut{cut}.hdgp"
        bad.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match="not a readable hdgp model file.*truncated or damaged"):
            hdgp.load(bad)


def test_corrupted_tensors_are_detected(saved, tmp_path):
    with zipfile.ZipFile(saved) as zf:
        blob = bytearray(zf.read("tensors.pt"))
    blob[len(blob) // 2] ^= 0xFF
    with pytest.raises(ModelFileError, match="checksum"):
        hdgp.load(_rewrite(saved, tmp_path / "flip.hdgp", tensors=bytes(blob)))


def test_code_in_tensor_member_is_not_executed(saved, tmp_path):
    import hashlib

    buffer = io.BytesIO()
    torch.save({"t0": torch.zeros(1), "evil": _Evil()}, buffer)
    blob = buffer.getvalue()

    def fix_checksum(m):
        m["tensors"]["sha256"] = hashlib.sha256(blob).hexdigest()
        return m

    bad = _rewrite(saved, tmp_path / "evil.hdgp", manifest=fix_checksum, tensors=blob)
    with pytest.raises(ModelFileError, match="cannot read the tensors"):
        hdgp.load(bad)
    assert not _Evil.ran


def test_manifest_cannot_name_foreign_classes(saved, tmp_path):
    def swap(m):
        m["estimator"]["class"] = "subprocess.Popen"
        return m

    with pytest.raises(ModelFileError, match="only name hdgp classes"):
        hdgp.load(_rewrite(saved, tmp_path / "foreign.hdgp", manifest=swap))


class _Evil:
    ran = False

    def __reduce__(self):
        return (_Evil._mark, ())

    @staticmethod
    def _mark():
        _Evil.ran = True
        return None


@pytest.mark.parametrize("content", [b"", b"hello world", b"PK\x03\x04garbage"])
def test_not_a_model_file(tmp_path, content):
    path = tmp_path / "x.hdgp"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=str(path.name)):
        hdgp.load(path)


def test_missing_file_and_unfitted_estimator(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        hdgp.load(tmp_path / "nope.hdgp")
    with pytest.raises(ModelFileError, match="not fitted"):
        hdgp.save(hdgp.GPRegressor(), tmp_path / "u.hdgp")
    assert list(tmp_path.iterdir()) == []


def test_failed_save_leaves_previous_file_intact(saved, tmp_path):
    target = tmp_path / "keep.hdgp"
    target.write_bytes(saved.read_bytes())
    from gpytorch.kernels import MaternKernel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = hdgp.GPRegressor(kernel=MaternKernel(), max_iter=3).fit(X, Y)  # a user-supplied kernel object
    with pytest.raises(ModelFileError, match="Cannot save"):
        hdgp.save(est, target)
    assert target.read_bytes() == saved.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.hdgp"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the CPU fallback of a GPU-fitted model")
def test_model_fitted_on_a_gpu_loads_on_cpu_with_warning(tmp_path):
    est = _fit("GAM")
    est.device = "cuda"  # as if it had been fitted on a GPU
    path = hdgp.save(est, tmp_path / "gpu.hdgp")
    with pytest.warns(HDGPWarning, match="fitted on 'cuda'.*loaded on the CPU"):
        back = hdgp.load(path)
    assert back.device is None
    est.device = None
    np.testing.assert_array_equal(back.predict(XT), est.predict(XT))
    with pytest.raises(ModelFileError, match="no CUDA GPU is available"):
        hdgp.load(path, device="cuda")


def test_shared_tensors_stay_shared(tmp_path):
    back = hdgp.load(hdgp.save(_fit("GAM"), tmp_path / "m.hdgp"))
    assert back.posterior_.X is back.X_train_
    assert back.posterior_.kernel is back.model_.kernel is back.kernel_


def test_large_exact_posterior_is_saved_without_its_factor(tmp_path, monkeypatch):
    from hdgp.io import compact

    est = _fit("Additive")
    monkeypatch.setattr(compact, "MAX_STORED_FACTOR", 10)
    path = hdgp.save(est, tmp_path / "big.hdgp")
    assert read_manifest(path)["estimator"]["recompute"] == ["posterior_"]
    monkeypatch.setattr(compact, "MAX_STORED_FACTOR", 10_000)
    full = hdgp.save(est, tmp_path / "full.hdgp")
    assert path.stat().st_size < full.stat().st_size - 40 * 40 * 8 // 2
    back = hdgp.load(path)
    torch.testing.assert_close(back.posterior_.L, est.posterior_.L, rtol=0, atol=1e-12)
    mean, std = est.predict(XT, return_std=True)
    mean2, std2 = back.predict(XT, return_std=True)
    np.testing.assert_allclose(mean2, mean, rtol=1e-12)
    np.testing.assert_allclose(std2, std, rtol=1e-10)
    assert est.posterior_.L is not None  # saving never modifies the estimator


def test_recomputed_factor_keeps_the_jitter_the_fit_needed(tmp_path, monkeypatch):
    """A fit that escalated jitter factorised K + σ²I + jI: the reloaded factor must add the same j."""
    from hdgp.io import compact

    est = _fit("Additive")
    post = est.posterior_
    with torch.no_grad():
        Ky = post.kernel(post.X).to_dense().clone()
        Ky.diagonal().add_(post.noise + 1e-3)
        post.jitter, post.L = 1e-3, torch.linalg.cholesky(Ky)  # as if the fit had needed j = 1e-3
    monkeypatch.setattr(compact, "MAX_STORED_FACTOR", 10)
    back = hdgp.load(hdgp.save(est, tmp_path / "jittered.hdgp"))
    assert back.posterior_.jitter == 1e-3
    torch.testing.assert_close(back.posterior_.L, post.L, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.predict(XT, return_std=True)[1], est.predict(XT, return_std=True)[1], rtol=1e-10)


@pytest.mark.parametrize("inference", ["sparse", "variational"])
def test_inducing_point_model_file_keeps_no_training_rows(tmp_path, inference):
    """Sparse/variational fits predict from their inducing points: the file must not grow with n,
    and the loaded OAK model predicts, explains and plots exactly as the fitted one."""
    from hdgp.estimators.oak import OAKRegressor

    rng = np.random.default_rng(0)
    sizes, fits = [], []
    for n in (300, 3000):
        frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.exponential(size=n),
                              "c": pd.Categorical(rng.choice(["x", "y", "z"], n))})
        y = np.sin(frame["a"]) + frame["b"] + (frame["c"] == "x") + 0.1 * rng.normal(size=n)
        est = OAKRegressor(max_order=2, inference=inference, n_inducing=30, max_iter=15, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(frame, y)
        assert est.X_train_.shape[0] == n  # kept in memory, as scikit-learn's GPR does
        sizes.append(hdgp.save(est, tmp_path / f"m{n}.hdgp").stat().st_size)
        fits.append((est, frame))
    assert sizes[1] < 1.05 * sizes[0]
    est, frame = fits[1]
    back = hdgp.load(tmp_path / "m3000.hdgp")
    assert not hasattr(back, "X_train_") and back.input_summary_["n_rows"] == 3000
    mean, std = est.predict(frame.iloc[:40], return_std=True)
    mean2, std2 = back.predict(frame.iloc[:40], return_std=True)
    np.testing.assert_array_equal(mean2, mean)
    np.testing.assert_array_equal(std2, std)
    assert back.sobol_indices_ == est.sobol_indices_
    assert hdgp.workflow.learned_quantities(back)["n_train"] == 3000
    terms = [("a",), ("c",), ("a", "c")]
    for new, old in zip(back.plot_components(terms).axes, est.plot_components(terms).axes):
        for line, line0 in zip(new.lines, old.lines):
            np.testing.assert_allclose(np.asarray(line.get_ydata(), float), np.asarray(line0.get_ydata(), float),
                                       rtol=0, atol=1e-12)


def test_ski_model_file_keeps_no_training_rows(tmp_path):
    """A SKI posterior predicts from its grids: no stored tensor has a row per training row (the
    file held X_train_, its largest tensor at 36,000 rows; the grid caches are bounded by the grid
    size), and the loaded model predicts exactly as the fitted one."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 4))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=3000)
    est = hdgp.ProjectedAdditiveGPRegressor(n_projections=4, inference="ski", grid_size=64, max_iter=5,
                                             random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    path = hdgp.save(est, tmp_path / "ski.hdgp")
    with zipfile.ZipFile(path) as archive:
        tensors = torch.load(io.BytesIO(archive.read("tensors.pt")), weights_only=True)
    assert all(3000 not in t.shape for t in tensors.values())
    back = hdgp.load(path)
    assert not hasattr(back, "X_train_") and hdgp.workflow.learned_quantities(back)["n_train"] == 3000
    X_new = rng.normal(size=(50, 4))
    for a, b in zip(est.predict(X_new, return_std=True), back.predict(X_new, return_std=True)):
        np.testing.assert_array_equal(a, b)


def test_a_user_prior_is_left_unchanged_and_saving_it_is_refused_clearly(tmp_path):
    """The prior used to join the model (converted to float64 in place) and be saved as a reference
    into it, which loading could not resolve: a file that could be written but never read."""
    from gpytorch.priors import GammaPrior

    prior = GammaPrior(1.1, 0.05)
    est = _fit("RBF-ARD", noise_prior=prior)
    assert prior.concentration.dtype == torch.float32
    assert not any(m is prior for m in est.model_.modules())
    with pytest.raises(ModelFileError, match="noise_prior.*GammaPrior.*cannot be saved"):
        hdgp.save(est, tmp_path / "p.hdgp")
    assert not (tmp_path / "p.hdgp").exists()


def test_oak_flow_with_a_started_log_round_trip(tmp_path):
    skewed = np.column_stack([RNG.lognormal(size=40) - 1.5, X[:, 1]])  # skewed with negative values
    est = hdgp.preset("OAK", random_state=0, max_iter=5, max_order=2).fit(skewed, Y)
    assert est.flow_.use_log_[0] and est.flow_.log_start_[0] > 0
    back = hdgp.load(hdgp.save(est, tmp_path / "oak.hdgp"))
    np.testing.assert_array_equal(back.flow_.log_start_, est.flow_.log_start_)
    np.testing.assert_array_equal(back.predict(XT[:, :2]), est.predict(XT[:, :2]))


def _codec_round_trip(value):
    enc = StateEncoder()
    node = enc.encode(value)
    return StateDecoder(enc.tensors).decode(node)


def test_non_finite_floats_keep_their_value():
    back = _codec_round_trip([math.inf, -math.inf, math.nan, 1.5])
    assert back[0] == math.inf and back[1] == -math.inf and math.isnan(back[2]) and back[3] == 1.5


def test_numpy_scalars_keep_their_dtype():
    back = _codec_round_trip({"a": np.float32(0.1), "b": np.int16(-3), "c": np.bool_(True)})
    assert type(back["a"]) is np.float32 and back["a"] == np.float32(0.1)
    assert type(back["b"]) is np.int16 and back["b"] == -3
    assert type(back["c"]) is np.bool_


@pytest.mark.parametrize("cv", ["KFold", "RepeatedKFold", "PredefinedSplit", "LeaveOneOut"])
def test_scikit_learn_splitter_and_random_state_parameters_round_trip(tmp_path, cv):
    """A scikit-learn splitter as ``cv`` and a RandomState as ``random_state`` are documented parameter
    values; saving refused them ("... has type sklearn.model_selection._split.KFold, which hdgp model files
    cannot store")."""
    from sklearn import model_selection

    splitter = {"KFold": model_selection.KFold(3, shuffle=True, random_state=0),
                "RepeatedKFold": model_selection.RepeatedKFold(n_splits=3, n_repeats=2, random_state=1),
                "PredefinedSplit": model_selection.PredefinedSplit(np.arange(len(Y)) % 3),
                "LeaveOneOut": model_selection.LeaveOneOut()}[cv]
    state = np.random.RandomState(4)
    state.normal()  # not at its seed: the stream position is kept
    est = hdgp.SIGPRegressor(**FAMILIES["SIGP"], cv=splitter, random_state=state).fit(X, Y)
    back = hdgp.load(hdgp.save(est, tmp_path / "m.hdgp"))
    assert type(back.cv) is type(splitter) and repr(back.cv) == repr(splitter)
    assert [t.tolist() for t, _ in back.cv.split(X, Y)] == [t.tolist() for t, _ in splitter.split(X, Y)]
    assert back.random_state.normal() == state.normal()
    np.testing.assert_array_equal(back.predict(XT, return_std=True), est.predict(XT, return_std=True))


def test_a_file_cannot_name_other_classes_as_splitters(saved, tmp_path):
    def swap(m):
        m["estimator"]["params"] = {"$dict": [["max_iter", {"$splitter": "GridSearchCV", "params": {"$dict": []}}]]}
        return m

    with pytest.raises(ModelFileError, match="'GridSearchCV' is not a scikit-learn cross-validation splitter"):
        hdgp.load(_rewrite(saved, tmp_path / "x.hdgp", manifest=swap))


def test_an_unknown_splitter_names_set_params_in_the_error(tmp_path):
    class Halves:
        def split(self, X, y=None, groups=None):
            yield np.arange(20), np.arange(20, 40)

        def get_n_splits(self, *args, **kwargs):
            return 1

    est = hdgp.SIGPRegressor(**FAMILIES["SIGP"], cv=Halves()).fit(X, Y)
    with pytest.raises(ModelFileError, match=r"parameter\['cv'\].*set_params before saving"):
        hdgp.save(est, tmp_path / "m.hdgp")
