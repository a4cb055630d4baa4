import json
import warnings

import numpy as np
import pytest

from hdgp.bench import PROTOCOLS, Protocol, get_protocol, load_reference, plan_tasks
from hdgp.bench.reference import REFERENCE_DIR_ENV, find_reference_dir


def test_builtin_protocols_round_trip_through_json():
    for proto in PROTOCOLS.values():
        again = Protocol.from_dict(json.loads(json.dumps(proto.to_dict())))
        assert again == proto


def test_unknown_protocol_lists_valid_names():
    with pytest.raises(ValueError, match="Valid protocols: rpa-gp-table1, duvenaud-tables, oak-table5"):
        get_protocol("rpa-table-1")


def test_protocol_file_with_unknown_field_is_rejected(tiny_protocol, protocol_file):
    spec = tiny_protocol()
    spec["colour"] = "red"
    with pytest.raises(ValueError, match=r"Unknown protocol field\(s\) \['colour'\]"):
        get_protocol(str(protocol_file(spec)))


def test_bad_normalisation_lists_options(tiny_protocol):
    spec = tiny_protocol()
    spec["normalisation"] = "minmax"
    with pytest.raises(ValueError, match="normalisation must be one of"):
        Protocol.from_dict(spec)


def test_unknown_dataset_and_model_list_valid_ones(tiny_protocol, protocol_file):
    path = str(protocol_file(tiny_protocol()))
    with pytest.raises(ValueError, match="Unknown data set 'yacht'.*Valid data sets: bach"):
        plan_tasks(path, datasets=["yacht"])
    with pytest.raises(ValueError, match="Unknown model 'GAMM'.*Valid models: Linear"):
        plan_tasks(path, models=["GAMM"])


def test_unregistered_preset_is_an_error_only_when_requested(tiny_protocol, protocol_file):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"},
                                 {"label": "Future", "preset": "Not-Yet-A-Preset"}])
    path = str(protocol_file(spec))
    with pytest.raises(ValueError, match="not registered.*Registered presets: .*Linear"):
        plan_tasks(path, models=["Future"])
    with pytest.warns(UserWarning, match="Future"):
        tasks, skipped = plan_tasks(path)
    assert skipped == ["Future"] and {t.model.label for t in tasks} == {"Linear"}


def test_plan_expands_datasets_models_splits_seeds(tiny_protocol, protocol_file):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"}, {"label": "GAM", "preset": "GAM"}],
                         splits=(0, 1, 2))
    tasks, _ = plan_tasks(str(protocol_file(spec)), splits=[0, 2], seeds=[0, 5])
    assert len(tasks) == 2 * 2 * 2
    assert {(t.model.label, t.split, t.seed) for t in tasks} == {
        (m, s, seed) for m in ("Linear", "GAM") for s in (0, 2) for seed in (0, 5)}


def test_requested_splits_beyond_a_data_sets_last_are_named(tiny_protocol, protocol_file):
    from hdgp.exceptions import HDGPWarning

    path = str(protocol_file(tiny_protocol()))  # the synthetic bach set has 10 splits
    with pytest.warns(HDGPWarning, match=r"Skipped split\(s\) beyond a data set's last: bach has 10 \(0-9\), not 12"):
        tasks, _ = plan_tasks(path, splits=[0, 12])
    assert {t.split for t in tasks} == {0}
    # the protocol's own splits (the CLI without --splits passes []) may overrun a data set quietly
    quiet = str(protocol_file(tiny_protocol(name="quiet", splits=(0, 11))))
    with warnings.catch_warnings():
        warnings.simplefilter("error", HDGPWarning)
        assert {t.split for t in plan_tasks(quiet, splits=[])[0]} == {0}


def test_model_limited_to_some_data_sets_plans_only_those(tiny_protocol, protocol_file):
    spec = tiny_protocol(datasets=("bach", "oak2d"),
                         models=[{"label": "Linear", "preset": "Linear"},
                                 {"label": "GAM", "preset": "GAM", "datasets": ["oak2d"]}])
    tasks, _ = plan_tasks(str(protocol_file(spec)), splits=[0])
    assert sorted((t.dataset.name, t.model.label) for t in tasks) == [
        ("bach", "Linear"), ("oak2d", "GAM"), ("oak2d", "Linear")]
    spec["models"][1]["datasets"] = ["yacht"]
    with pytest.raises(ValueError, match=r"model 'GAM' names unknown data sets \['yacht'\]"):
        Protocol.from_dict(spec)


def test_missing_data_dir_error_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("HDGP_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="HDGP_DATA_DIR"):
        plan_tasks("rpa-gp-table1", datasets=["yacht"], models=["RBF-ARD"])
    monkeypatch.delenv("HDGP_DATA_DIR")
    with pytest.raises(FileNotFoundError, match="HDGP_DATA_DIR is not set"):
        plan_tasks("rpa-gp-table1", datasets=["yacht"], models=["RBF-ARD"])


def test_reference_dir_from_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(REFERENCE_DIR_ENV, str(tmp_path))
    assert find_reference_dir() == tmp_path
    monkeypatch.setenv(REFERENCE_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=REFERENCE_DIR_ENV):
        find_reference_dir()


@pytest.fixture
def reference_dir(data_dir, monkeypatch):
    monkeypatch.delenv(REFERENCE_DIR_ENV, raising=False)
    path = find_reference_dir()
    if path is None:
        pytest.skip("shared reference folder not found beside HDGP_DATA_DIR")
    return path


def test_every_rpa_dataset_and_paper_model_has_a_paper_rmse(reference_dir):
    proto = PROTOCOLS["rpa-gp-table1"]
    ref = load_reference(proto)
    have = set(zip(ref["dataset"], ref["model"]))
    paper_models = [m.label for m in proto.models if m.label not in ("GAM", "Linear", "SIGP")]
    assert {(d.name, m) for d in proto.datasets for m in paper_models} <= have
    yacht = ref[(ref.dataset == "yacht") & (ref.model == "RBF-ARD")].iloc[0]
    assert yacht.metric == "rmse" and yacht.paper_n == 20
    import pandas as pd

    raw = pd.read_csv(reference_dir / "rpa_gp_table1_rmse.csv")
    row = raw[(raw.dataset == "yacht") & (raw.model == "RBF-ARD")].iloc[0]
    assert yacht.paper_mean == pytest.approx(row.rmse_mean)
    assert yacht.paper_std == pytest.approx(row.rmse_2std / 2)  # the table prints 2*std


def test_reference_names_are_mapped_to_ours(reference_dir):
    oak = load_reference("oak-table5")
    housing = oak[(oak.dataset == "housing") & (oak.model == "OAK")]
    assert set(housing.metric) == {"rmse", "nlpd"}
    # the paper's test log-likelihood (-0.122 on boston) becomes an NLPD of +0.122
    assert housing[housing.metric == "nlpd"].paper_mean.iloc[0] == pytest.approx(0.122)
    # one paper row, several of our variants (a list alias): each gets the same paper value
    variants = oak[(oak.dataset == "housing") & (oak.metric == "rmse") & oak.model.isin(["OAK", "OAK-5-starts"])]
    assert sorted(variants.model) == ["OAK", "OAK-5-starts"]
    assert variants.paper_mean.nunique() == 1
    duv = load_reference("duvenaud-tables")
    assert {"Linear", "GAM", "RBF-ARD", "Additive"} <= set(duv.model)
    assert duv[(duv.dataset == "servo") & (duv.model == "Additive") & (duv.metric == "mse")].paper_mean.iloc[0] \
        == pytest.approx(0.110)
    sigp = load_reference("sigp-table2")
    assert sigp[(sigp.dataset == "housing-demo") & (sigp.model == "RBF-ARD")].paper_mean.iloc[0] \
        == pytest.approx(93.1109)
    # one paper data set, two of our splits (a list alias): both get the paper's F1
    heart = sigp[sigp.dataset.isin(["heart", "heart-last100"]) & (sigp.model == "SIGP m=3 balanced")]
    assert sorted(heart.dataset) == ["heart", "heart-last100"] and set(heart.paper_mean) == {0.8605}


def test_builtin_protocol_data_sets_exist_in_the_shared_folder(data_dir):
    from hdgp.data import list_datasets

    available = set(list_datasets())
    for proto in PROTOCOLS.values():
        for d in proto.datasets:
            if d.source == "registry":
                assert (d.loader_name or d.name) in available, (proto.name, d.name)


@pytest.mark.parametrize("normalisation", ["zscore", "x-only", "y-only", "none"])
def test_load_split_normalisations_scale_only_what_they_name(data_dir, normalisation):
    from hdgp.bench.datasets import load_split
    from hdgp.data import load

    spec = get_protocol("oak-table5").datasets[0]  # housing
    raw = load(spec.name, split=1, data_dir=data_dir, standardize=False)
    b = load_split(spec, 1, normalisation, data_dir)
    x_scaled = normalisation in ("zscore", "x-only")
    y_scaled = normalisation in ("zscore", "y-only")
    if x_scaled:
        np.testing.assert_allclose(b.X_train.mean(0), 0, atol=1e-10)
        np.testing.assert_allclose(b.X_test, (raw.X_test - raw.X_train.mean(0)) / raw.X_train.std(0))
    else:
        np.testing.assert_array_equal(b.X_train, raw.X_train)
    if y_scaled:
        np.testing.assert_allclose(b.y_test, (raw.y_test - raw.y_train.mean()) / raw.y_train.std())
    else:
        np.testing.assert_array_equal(b.y_test, raw.y_test)


def test_exp_target_transform_recovers_the_raw_yacht_target(data_dir):
    """The shared yacht target is log(resistance) minus its mean; exp gives the raw UCI
    target up to a constant factor (its 0.01 ... 62.42 range has ratio 6242)."""
    from hdgp.bench.datasets import load_split

    proto = get_protocol("oak-table5")
    log_b = load_split(proto.dataset("yacht"), 2, "none", data_dir)
    raw_b = load_split(proto.dataset("yacht-raw"), 2, "none", data_dir)
    np.testing.assert_array_equal(raw_b.X_train, log_b.X_train)
    np.testing.assert_allclose(raw_b.y_test, np.exp(log_b.y_test))
    y_all = np.concatenate([raw_b.y_train, raw_b.y_test])
    assert y_all.max() / y_all.min() == pytest.approx(62.42 / 0.01, rel=1e-3)
    # after z-scoring, the constant factor is gone: the paper's yacht row sees raw units
    z = load_split(proto.dataset("yacht-raw"), 2, "y-only", data_dir)
    np.testing.assert_allclose(z.y_train.std(), 1.0)


def test_unknown_target_transform_is_rejected():
    from hdgp.bench.protocols import DatasetSpec

    with pytest.raises(ValueError, match="target_transform must be one of"):
        DatasetSpec("yacht", target_transform="log")


def _with_model(**fields):
    return lambda spec: spec["models"][0].update(fields)


@pytest.mark.parametrize("change, message", [
    (_with_model(params=[1, 2]), r"Protocol 'tiny': models\[0\]: ModelSpec 'Linear': params must be a mapping"),
    (_with_model(params="max_iter=3"), r"models\[0\]: ModelSpec 'Linear': params must be a mapping.*got str"),
    (lambda spec: spec["datasets"][0].update(kwargs=["n", 60]),
     r"datasets\[0\]: DatasetSpec 'bach': kwargs must be a mapping"),
    (lambda spec: spec.update(splits="0,1"), r"Protocol 'tiny': splits must be a JSON list, got str '0,1'"),
    (lambda spec: spec.update(splits=[0, "1"]), r"Protocol 'tiny': splits must be a list of integers >= 0"),
    (_with_model(label=None), r"models\[0\]: ModelSpec: label must be a non-empty string, got None"),
    (_with_model(label="a/b"), r"models\[0\]: ModelSpec: label 'a/b' must not contain '/'"),
    (lambda spec: spec.update(name="x/y"), r"Protocol: name 'x/y' must not contain '/'"),
    (lambda spec: spec["models"][0].update(name=None), r"models\[0\]: unknown field\(s\) \['name'\]; valid fields"),
    (lambda spec: spec.update(models=["Linear"]), r"models\[0\] must be a JSON object with fields"),
    (_with_model(datasets="bach"), r"ModelSpec 'Linear': datasets must be a JSON list"),
])
def test_malformed_protocol_file_names_protocol_entry_and_field(tiny_protocol, protocol_file, tmp_path, change,
                                                                message):
    spec = tiny_protocol()
    change(spec)
    path = tmp_path / "malformed.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="is not a valid protocol: .*" + message):
        get_protocol(str(path))


def test_paper_protocols_pin_the_papers_number_of_directions():
    """DPA-GP-ARD's preset chooses J from the rows (50 for 250-1,000 of them); the projected paper's
    table and figures use J = 20 everywhere, so their DPA-GP-ARD rows must build the J = 20 model."""
    import hdgp

    assert hdgp.preset("DPA-GP-ARD").n_projections is None
    for name in ("rpa-gp-table1", "rpa-gp-fig6"):
        models = [m for m in get_protocol(name).models if m.preset == "DPA-GP-ARD"]
        assert models, name
        for model in models:
            assert hdgp.preset(model.preset, **model.params).n_projections == 20, (name, model.label)
    generalisation = get_protocol("generalisation").model("DPA-GP-ARD")
    assert hdgp.preset(generalisation.preset, **generalisation.params).n_projections is None
