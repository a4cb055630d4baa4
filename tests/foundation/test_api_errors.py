"""Wrong arguments at the Python API get a clear error naming the problem (found by fuzzing)."""

import numpy as np
import pytest
import torch

import hdgp
from hdgp.io import ModelFileError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 3))


def test_preset_name_must_be_a_string():
    with pytest.raises(TypeError, match="preset name is a string"):
        hdgp.preset(3)


def test_save_refuses_objects_that_are_not_hdgp_estimators(tmp_path):
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with pytest.raises(ModelFileError, match="stores fitted hdgp estimators; got a builtins.object"):
        hdgp.save(object(), tmp_path / "m.hdgp")
    with pytest.raises(ModelFileError, match="got a sklearn.linear_model.*LinearRegression. Use joblib or pickle"):
        hdgp.save(LinearRegression().fit(X, X[:, 0]), tmp_path / "m.hdgp")
    pipe = make_pipeline(StandardScaler(), hdgp.preset("Linear", max_iter=5)).fit(X, X[:, 0])
    with pytest.raises(ModelFileError, match=r"Pipeline. Save its final step \(pipe\[-1\]\)"):
        hdgp.save(pipe, tmp_path / "m.hdgp")
    assert not (tmp_path / "m.hdgp").exists()
    hdgp.save(pipe[-1], tmp_path / "m.hdgp")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_device_without_a_gpu_is_a_value_error():
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        hdgp.GPRegressor(device="cuda").fit(X, X[:, 0])


def test_sigp_folds_need_as_many_samples():
    with pytest.raises(ValueError, match="5-fold cross-validation needs at least 5 samples; got n_samples = 4"):
        hdgp.SIGPRegressor().fit(X[:4], X[:4, 0])


def test_single_class_message_names_the_classifier():
    with pytest.raises(ValueError, match="^OAKClassifier needs samples of at least 2 classes.*only class 0"):
        hdgp.OAKClassifier().fit(X, np.zeros(30, dtype=int))


def test_categorical_features_as_a_boolean_mask():
    Xc = np.c_[X[:, :2], np.arange(30) % 3]
    est = hdgp.OAKRegressor(categorical_features=[False, False, True], max_order=1, max_iter=3).fit(Xc, X[:, 0])
    assert est.categorical_features_ == [2]  # a mask read as indices would have meant columns 0 and 1
    with pytest.raises(ValueError, match="boolean mask needs one entry per feature"):
        hdgp.OAKRegressor(categorical_features=[False, True]).fit(Xc, X[:, 0])


@pytest.mark.parametrize("call, message", [
    (lambda: hdgp.metrics.rmse([1.0, 2.0, 3.0], [1.0]), "same length; y_true has 3, y_pred has 1"),
    (lambda: hdgp.metrics.nlpd([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0]), "same length.*std has 1"),
    (lambda: hdgp.metrics.mse([1.0, np.nan], [1.0, 2.0]), "y_true must be finite"),
    (lambda: hdgp.metrics.nlpd([1.0, 2.0], [1.0, 2.0], [np.nan, 1.0]), "std must be finite"),
    (lambda: hdgp.metrics.nlpd([1.0, 2.0], [1.0, 2.0], [0.0, 1.0]), "must be positive"),
    (lambda: hdgp.metrics.interval_coverage([1.0, 2.0], [1.0, 2.0], [-1.0, 1.0]), "must be non-negative"),
    (lambda: hdgp.metrics.interval_coverage([1.0], [1.0], [1.0], level=1.5), r"level must be a number in \(0, 1\)"),
    (lambda: hdgp.metrics.interval_coverage([1.0], [1.0], [1.0], level=0), r"level must be a number in \(0, 1\)"),
    (lambda: hdgp.metrics.rmse([], []), "inputs are empty"),
])
def test_metrics_reject_mismatched_non_finite_or_out_of_range_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("unit", [1e-160, 1e-300, 1e150])
def test_metrics_are_unit_free_for_tiny_and_huge_targets(unit):
    """Squares of 1e-161 underflow: RMSE came out a third low, R² 1.0 and NLPD -inf."""
    rng = np.random.default_rng(0)
    y, pred, std = rng.normal(size=20), rng.normal(size=20), rng.uniform(0.5, 1.5, 20)
    m = hdgp.metrics
    assert m.rmse(y * unit, pred * unit) == pytest.approx(m.rmse(y, pred) * unit, rel=1e-12)
    assert m.r2(y * unit, pred * unit) == pytest.approx(m.r2(y, pred), rel=1e-12)
    assert m.nlpd(y * unit, pred * unit, std * unit) == pytest.approx(m.nlpd(y, pred, std) + np.log(unit), rel=1e-12)
    from sklearn.metrics import r2_score

    assert m.r2(y, pred) == pytest.approx(r2_score(y, pred), rel=1e-12)
    for constant in ([1.0, 1.0], [0.1] * 3):  # the mean of 0.1, 0.1, 0.1 is not 0.1
        with pytest.raises(ValueError, match="y_true is constant"):
            m.r2(constant, [1.0] * len(constant))
    assert m.rmse([1e308, -1e308, 0.0], [0.0, 0.0, 0.0]) == pytest.approx(1e308 * np.sqrt(2 / 3), rel=1e-12)


def test_interval_coverage_allows_zero_std():
    assert hdgp.metrics.interval_coverage([1.0, 2.0], [1.0, 2.5], [0.0, 1.0], level=0.5) == 1.0


def test_preset_keyword_overrides_the_parameter_the_preset_fixes():
    est = hdgp.preset("RBF-ARD", kernel="imq-ard", random_state=3)
    assert est.get_params()["kernel"] == "imq-ard" and est.get_params()["random_state"] == 3
    assert hdgp.preset("GP-classifier", kernel="gam").get_params()["kernel"] == "gam"
    assert hdgp.preset("RBF-ARD").get_params()["kernel"] == "rbf-ard"  # the preset's default is unchanged


def test_preset_rejects_a_keyword_the_estimator_does_not_have():
    with pytest.raises(TypeError, match=r"Preset 'RBF-ARD' builds a GPRegressor, which has no parameter\(s\) "
                                        r"'kernal'\. Valid parameters: .*kernel"):
        hdgp.preset("RBF-ARD", kernal="imq-ard")


@pytest.mark.parametrize("inference", ["ski", "cholesky"])
def test_additive_model_lists_its_inference_modes(inference):
    import hdgp.estimators.projected  # noqa: F401  (registers the SKI engine, as in a full session)

    with pytest.raises(ValueError, match=r"AdditiveGPRegressor supports inference in \('auto', 'exact', 'sparse', "
                                         r"'variational'\), got '" + inference):
        hdgp.AdditiveGPRegressor(inference=inference).fit(X, X[:, 0])


def test_scikit_learns_convergence_filter_silences_hdgps_convergence_warnings():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X = np.random.default_rng(0).normal(size=(30, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ConvergenceWarning)
        hdgp.GPRegressor(max_iter=1).fit(X, X[:, 0])
    assert not [w for w in caught if "max_iter" in str(w.message)]
    with pytest.warns(hdgp.exceptions.ConvergenceWarning, match="max_iter"):
        hdgp.GPRegressor(max_iter=1).fit(X, X[:, 0])


def test_exact_inference_too_large_for_memory_is_a_clear_error(monkeypatch):
    """Exact inference that cannot hold its n x n matrices stops at once with a MemoryError naming
    the size and the engines that scale (it used to fail deep in torch's allocator)."""
    import os

    import hdgp.estimators._base as base

    X = np.random.default_rng(0).normal(size=(300, 2))
    y = X[:, 0]
    monkeypatch.setattr(os, "sysconf", lambda name: 4096 if name == "SC_PAGE_SIZE" else 100)  # 400 KiB
    with pytest.raises(MemoryError, match=r"300 rows.*inference='sparse'"):
        hdgp.GPRegressor(inference="exact").fit(X, y)
    monkeypatch.undo()

    def no_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(base.BaseGPRegressor, "_fit_candidate", no_memory)
    with pytest.raises(MemoryError, match="inference='auto'"):
        hdgp.GPRegressor(inference="exact").fit(X, y)
    with pytest.raises(RuntimeError, match="allocate"):  # other engines keep torch's error
        hdgp.GPRegressor(inference="sparse", n_inducing=10).fit(X, y)


def test_dtype_accepts_numpy_and_torch_dtypes_of_the_two_names():
    from hdgp.estimators._base import resolve_dtype

    for given in ("float32", np.float32, np.dtype("float32"), torch.float32):
        assert resolve_dtype(given) is torch.float32
    assert resolve_dtype(np.float64) is resolve_dtype("float64") is torch.float64
    for bad in (np.int64, None, "f32", 3):
        with pytest.raises(ValueError, match=r"dtype must be one of \['float32', 'float64'\]"):
            resolve_dtype(bad)
    est = hdgp.preset("Linear", dtype=np.float32, max_iter=5).fit(X, X[:, 0])
    assert next(est.model_.parameters()).dtype is torch.float32
    # computed in float32, returned in float64: the target's scale and mean are applied after the cast
    assert est.predict(X).dtype == np.float64


def test_a_user_kernel_for_another_number_of_features_is_named_at_fit():
    import gpytorch

    with pytest.raises(ValueError, match="kernel RBFKernel cannot be evaluated on the 3 input features: .*ard_num_dims"):
        hdgp.GPRegressor(kernel=gpytorch.kernels.RBFKernel(ard_num_dims=5), max_iter=5).fit(X, X[:, 0])


def test_a_pickle_from_another_hdgp_version_warns(monkeypatch):
    import pickle
    import re
    import warnings

    data = pickle.dumps(hdgp.preset("Linear", max_iter=5).fit(X, X[:, 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", hdgp.exceptions.HDGPWarning)
        pickle.loads(data)  # same version: silent
    written = hdgp.__version__
    monkeypatch.setattr(hdgp._version, "__version__", "99.0")
    with pytest.warns(hdgp.exceptions.HDGPWarning, match=rf"pickled by hdgp {re.escape(written)} and is unpickled by hdgp 99\.0"):
        restored = pickle.loads(data)
    assert restored.predict(X[:3]).shape == (3,)


@pytest.mark.parametrize("name", ["RBF-ARD", "Additive", "DPA-GP-ARD", "SIGP", "GP-classifier", "SIGP-classifier"])
def test_numeric_only_estimators_name_the_dataframe_columns_that_are_not_numbers(name):
    import pandas as pd

    frame = pd.DataFrame({"x": X[:, 0], "group": pd.Categorical(RNG.choice(["a", "b"], 30)),
                          "when": pd.date_range("2020-01-01", periods=30), "n": X[:, 1].astype(object)})
    y = (X[:, 0] > 0).astype(float)
    with pytest.raises(ValueError, match=r"takes numeric inputs, but column\(s\) 'group' \(category\), 'when' "
                                         r"\(datetime64.*OAKRegressor and OAKClassifier take categorical columns"):
        hdgp.preset(name, max_iter=2).fit(frame, y)
    est = hdgp.preset(name, max_iter=2).fit(frame[["x", "n"]], y)  # an object column of numbers is numbers
    with pytest.raises(ValueError, match=r"column\(s\) 'n' \("):
        est.predict(frame[["x", "n"]].assign(n="text"))
    repeated = pd.DataFrame(X[:, :3], columns=["a", "a", "b"])  # it was an AttributeError inside pandas
    with pytest.raises(ValueError, match="Column names must be unique; 'a' appears more than once"):
        hdgp.preset(name, max_iter=2).fit(repeated, y)


def test_python_dash_m_runs_the_command_line():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "hdgp", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("Usage: hdgp ")


@pytest.mark.parametrize("name", ["GP-classifier", "SIGP-classifier", "OAK-classifier", "Additive-classifier"])
def test_classifiers_name_missing_class_labels(name):
    """A None among text labels failed inside np.unique ("'<' not supported between 'NoneType' and 'str'")."""
    y = np.array(["a", "b"] * 15, dtype=object)
    y[3] = None
    with pytest.raises(ValueError, match=r"y has 1 missing class label\(s\) \(None or NaN\), e.g. at row 3"):
        hdgp.preset(name, max_iter=2).fit(X, y)
