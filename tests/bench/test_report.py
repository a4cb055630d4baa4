"""Reports: paper numbers beside ours, bold on a match, CSV and PNG outputs."""

import numpy as np
import pandas as pd
import pytest

from hdgp.bench import ResultStore, make_report, run_protocol


def _fake(store, dataset, model, values, metric="rmse", device=None):
    for split, v in enumerate(values):
        store.write({"device": device(split) if device else None,
                     "protocol": "tiny", "dataset": dataset, "model": model, "split": split, "seed": 0,
                     "status": "done", "metrics": {metric: float(v)}, "fit_seconds": 0.1, "predict_seconds": 0.01,
                     "peak_rss_mb": 500.0, "rss_increase_mb": 1.0, "n_train": 90, "threads": 1,
                     "versions": {"hdgp": "0"}, "machine": {"platform": "test", "cores": 2}})


@pytest.fixture
def reference_folder(tmp_path):
    folder = tmp_path / "reference"
    folder.mkdir()
    pd.DataFrame({"dataset": ["paperbach", "paperbach"], "model": ["Linear", "Other"],
                  "rmse_mean": [0.50, 0.1], "rmse_2std": [0.10, 0.02]}).to_csv(folder / "ref.csv", index=False)
    return folder


def _protocol(tiny_protocol, protocol_file):
    ref = {"file": "ref.csv", "metric": "rmse", "value_column": "rmse_mean", "spread_column": "rmse_2std",
           "spread": "2std", "n_repeats": 10, "dataset_aliases": {"paperbach": "bach"}}
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"}, {"label": "GAM", "preset": "GAM"},
                                 {"label": "Other", "preset": "Linear"}], references=[ref])
    return str(protocol_file(spec))


def test_report_puts_paper_numbers_beside_ours_and_bolds_matches(tiny_protocol, protocol_file, reference_folder,
                                                                 tmp_path):
    path = _protocol(tiny_protocol, protocol_file)
    db = tmp_path / "r.sqlite"
    rng = np.random.default_rng(0)
    with ResultStore(db, writer=True) as store:
        _fake(store, "bach", "Linear", 0.50 + 0.05 * rng.standard_normal(10))  # matches the paper
        _fake(store, "bach", "Other", 0.30 + 0.01 * rng.standard_normal(10))   # clearly worse than 0.1
        _fake(store, "bach", "GAM", 0.2 + 0.01 * rng.standard_normal(10))      # no paper number
    paths = make_report(path, db=db, out_dir=tmp_path / "out", reference_dir=reference_folder)
    md = paths["markdown"].read_text()
    line = {ln.split("|")[2].strip(): ln for ln in md.splitlines() if ln.startswith("| bach |")
            and "fit" not in ln and ln.count("|") == 8}
    assert "**" in line["Linear"] and "0.500 ± 0.100" in line["Linear"]
    assert "**" not in line["Other"] and "0.100 ± 0.020" in line["Other"]
    assert "**" not in line["GAM"]
    summary = pd.read_csv(paths["summary_csv"])
    row = summary[(summary.model == "Other") & (summary.metric == "rmse")].iloc[0]
    assert row.paper_mean == pytest.approx(0.1) and row.paper_std == pytest.approx(0.01)
    assert row["diff"] == pytest.approx(row["mean"] - 0.1) and row.p_worse < 1e-6
    assert paths["plots"] and all(p.stat().st_size > 1000 for p in paths["plots"])
    assert paths["tasks_csv"].is_file() and len(pd.read_csv(paths["tasks_csv"])) == 30


def test_report_names_cells_not_run_and_their_paper_numbers(tiny_protocol, protocol_file, reference_folder,
                                                             tmp_path):
    path = _protocol(tiny_protocol, protocol_file)
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        _fake(store, "bach", "GAM", [0.2, 0.3])  # Linear and Other never ran
    md = make_report(path, db=db, out_dir=tmp_path / "out", reference_dir=reference_folder)["markdown"].read_text()
    not_run = md.split("## Not run yet")[1].split("##")[0]
    assert "- Linear: bach" in not_run and "- Other: bach" in not_run and "GAM" not in not_run
    paper_only = md.split("## Paper numbers without a result of ours here")[1].split("##")[0]
    assert "| bach | Linear | rmse | 0.500 ± 0.100 |" in paper_only and "| bach | Other |" in paper_only


def test_report_of_a_real_run_lists_the_command_and_failures(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Linear", "preset": "Linear"},
                                 {"label": "Broken", "preset": "Linear", "params": {"max_iter": -3}}], splits=(0,))
    path = str(protocol_file(spec))
    db = tmp_path / "r.sqlite"
    run_protocol(path, workers=0, db=db, progress=False, command="hdgp bench run tiny.json --workers 0")
    run_protocol(path, workers=0, db=db, progress=False, command="hdgp bench run tiny.json --again")  # skips all
    paths = make_report(path, db=db, out_dir=tmp_path / "out", plots=False)
    md = paths["markdown"].read_text()
    assert "hdgp bench run tiny.json --workers 0" in md and "--again" not in md  # a run that ran nothing
    assert "## Failed tasks" in md and "| bach | Broken | 0 | 0 | 1 |" in md
    assert "## Cost per task" in md


def test_report_without_results_says_how_to_get_them(tiny_protocol, protocol_file, tmp_path):
    from hdgp.bench import StoreError

    path = str(protocol_file(tiny_protocol()))
    with pytest.raises(StoreError, match="hdgp bench run"):
        make_report(path, db=tmp_path / "none.sqlite", out_dir=tmp_path / "out")
    ResultStore(tmp_path / "empty.sqlite", writer=True).close()
    with pytest.raises(ValueError, match="No results for protocol 'tiny'.*run `hdgp bench run " + path):
        make_report(path, db=tmp_path / "empty.sqlite", out_dir=tmp_path / "out")


@pytest.fixture
def without_reference(tiny_protocol, protocol_file, tmp_path, monkeypatch):
    """(protocol path, results db) of a protocol with paper numbers, where none can be found."""
    monkeypatch.delenv("HDGP_REFERENCE_DIR", raising=False)
    monkeypatch.delenv("HDGP_DATA_DIR", raising=False)
    path = _protocol(tiny_protocol, protocol_file)
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        _fake(store, "bach", "Linear", [0.5, 0.6])
    return path, db


def test_report_without_the_reference_folder_warns(without_reference, tmp_path):
    from hdgp.exceptions import HDGPWarning

    path, db = without_reference
    with pytest.warns(HDGPWarning, match="Paper numbers not found.*no paper column"):
        paths = make_report(path, db=db, out_dir=tmp_path / "out", plots=False)
    assert "*Paper numbers not found" in paths["markdown"].read_text()


def test_report_without_the_reference_folder_keeps_a_report_with_paper_numbers(without_reference, reference_folder,
                                                                                 tmp_path):
    """The committed report, regenerated on a machine without the papers' CSVs, would lose its paper column."""
    path, db = without_reference
    make_report(path, db=db, out_dir=tmp_path / "out", reference_dir=reference_folder, plots=False)
    before = (tmp_path / "out" / "report.md").read_text()
    with pytest.raises(ValueError, match="holds a report with the papers' numbers"):
        make_report(path, db=db, out_dir=tmp_path / "out", plots=False)
    assert (tmp_path / "out" / "report.md").read_text() == before
    make_report(path, db=db, out_dir=tmp_path / "elsewhere", plots=False)  # another folder: a report without them


def test_the_cost_table_shows_the_device_once_a_task_ran_on_a_gpu(tiny_protocol, protocol_file, tmp_path):
    path = str(protocol_file(tiny_protocol(models=[{"label": "Linear", "preset": "Linear"},
                                                   {"label": "GAM", "preset": "GAM"}])))
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        _fake(store, "bach", "Linear", [0.5, 0.6])
    md = make_report(path, db=db, out_dir=tmp_path / "cpu", plots=False)["markdown"].read_text()
    assert "device" not in md and "GPU" not in md
    with ResultStore(db, writer=True) as store:
        _fake(store, "bach", "GAM", [0.2, 0.3], device=lambda split: "cuda:0 (Test GPU)" if split == 0 else "cpu")
    md = make_report(path, db=db, out_dir=tmp_path / "gpu", plots=False)["markdown"].read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| bach |") and ln.count("|") == 10]
    assert [(r.split("|")[2].strip(), r.split("|")[-2].strip()) for r in rows] == [
        ("Linear", "cpu"), ("GAM", "cpu"), ("GAM", "cuda:0 (Test GPU)")]  # one row per device: times not mixed
    assert "1 task(s) ran on cuda:0 (Test GPU)" in md
    # a GPU task that failed is in neither the cost table nor the GPU line
    with ResultStore(db, writer=True) as store:
        _fake(store, "bach", "GAM", [0.2, 0.3], device=lambda split: "cpu")
        store.write({"protocol": "tiny", "dataset": "bach", "model": "Linear", "split": 5, "seed": 0,
                     "status": "failed", "error": "CUDA error", "device": "cuda:0 (Test GPU)"})
    md = make_report(path, db=db, out_dir=tmp_path / "failed", plots=False)["markdown"].read_text()
    assert "device" not in md and "GPU" not in md
