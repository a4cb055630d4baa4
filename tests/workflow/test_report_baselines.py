"""The report's guard rails: the score of a model that ignores the features beside each held-out score
(the training mean's RMSE beside RMSE, the majority-class rate beside accuracy), and R² to three decimals."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from hdgp.workflow import fit_table
from hdgp.workflow.report import mean_baseline_rmse, report_data, write_report
from hdgp.workflow.report_classification import majority_class_rate


def _fit(frame, target, model, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_table(frame, target, model=model, params=params or None, test_size=0.25, random_state=3)


def _cells(html: str, metric: str) -> list[str]:
    """The value and meaning cells of the calibration table's row named ``metric``."""
    match = re.search(rf"<tr><td class='l'>{re.escape(metric)}</td><td>([^<]*)</td><td>([^<]*)</td></tr>", html)
    assert match, f"no row {metric!r} in the report"
    return [match.group(1), match.group(2)]


def _held_out(tm, frame):
    """Held-out and training rows of ``frame``, from the row labels the fit recorded."""
    test = frame.index.astype(str).isin(tm.metadata["holdout"]["rows"])
    return frame[test], frame[~test]


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
    frame["y"] = 3.0 + 2 * frame.a - frame.b + 0.1 * rng.normal(size=80)
    return frame, _fit(frame, "y", "linear")


def test_rmse_sits_beside_the_rmse_of_predicting_the_training_mean(regression, tmp_path):
    frame, tm = regression
    test, train = _held_out(tm, frame)
    assert len(test) == len(tm.metadata["holdout"]["y"]) and len(train) == tm.metadata["data"]["n_train"]
    expected = np.sqrt(np.mean((test.y - train.y.mean()) ** 2))  # brute force from the table's rows
    assert mean_baseline_rmse(tm) == pytest.approx(expected, rel=1e-10)
    # not the held-out rows' own mean (the RMSE of which is their std): the training mean it must be
    assert abs(expected - test.y.std(ddof=0)) > 1e-6
    html = write_report(tm, tmp_path / "r").read_text()
    value, meaning = _cells(html, "baseline RMSE")
    assert float(value) == pytest.approx(expected, rel=1e-3) and "training mean" in meaning
    assert float(_cells(html, "RMSE")[0]) < 0.2 * expected  # the linear signal is learned
    assert report_data(tm)["baseline"]["mean_rmse"] == pytest.approx(expected, rel=1e-10)


def test_r2_is_printed_with_three_decimals(regression, tmp_path):
    _, tm = regression
    html = write_report(tm, tmp_path / "r").read_text()
    measured = tm.metadata["metrics"]["r2"]
    assert _cells(html, "R²")[0] == f"{measured:.3f}"
    tm.metadata["metrics"]["r2"] = 1.0  # a perfect (or leaking) fit reads 1.000, not 1
    try:
        assert _cells(write_report(tm, tmp_path / "r1").read_text(), "R²")[0] == "1.000"
        tm.metadata["metrics"]["r2"] = float("nan")  # constant held-out target: undefined
        assert _cells(write_report(tm, tmp_path / "r2").read_text(), "R²")[0] == "—"
    finally:
        tm.metadata["metrics"]["r2"] = measured


def test_accuracy_sits_beside_the_majority_class_rate(tmp_path):
    rng = np.random.default_rng(1)
    n = 120
    frame = pd.DataFrame(rng.normal(size=(n, 2)), columns=["a", "b"])
    # three classes, "low" most frequent
    frame["label"] = np.where(frame.a < 0.4, "low", np.where(frame.b > 0, "high", "mid"))
    tm = _fit(frame, "label", "gp-classifier", max_iter=30)
    test, train = _held_out(tm, frame)
    majority = train.label.value_counts().idxmax()
    expected = float(np.mean(test.label == majority))
    assert majority == "low" and 0.4 < expected < 0.9
    assert majority_class_rate(tm) == pytest.approx(expected, abs=1e-12)
    html = write_report(tm, tmp_path / "c").read_text()
    value, meaning = _cells(html, "majority-class rate")
    assert float(value) == pytest.approx(expected, rel=1e-3) and "low" in meaning
    assert html.index(">accuracy<") < html.index(">majority-class rate<") < html.index(">balanced accuracy<")
    assert report_data(tm)["baseline"]["majority_class_rate"] == pytest.approx(expected)


def test_no_held_out_rows_no_baseline(tmp_path):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(rng.normal(size=(30, 2)), columns=["a", "b"])
    frame["y"] = frame.a
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = fit_table(frame, "y", model="linear", test_size=0.0)
    assert mean_baseline_rmse(tm) is None
    assert "baseline RMSE" not in write_report(tm, tmp_path / "n").read_text()
