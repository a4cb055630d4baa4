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


def test_save_refuses_objects_that_are_not_estimators(tmp_path):
    with pytest.raises(ModelFileError, match="stores fitted hdgp estimators; got a object"):
        hdgp.save(object(), tmp_path / "m.hdgp")


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
