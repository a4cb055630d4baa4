"""The report's section on the certainty of the Sobol ranking, and its entry in ``hdgp explain --json``."""

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from hdgp.workflow import fit_table
from hdgp.workflow.report import report_data, write_report


def _fit(frame, target, model, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_table(frame, target, model=model, params=params or None, test_size=0.25, random_state=3)


@pytest.fixture(scope="module")
def oak_model():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(rng.normal(size=(90, 3)), columns=["a", "b", "c"])
    frame["y"] = 2 * frame.a + np.sin(frame.b) + 0.5 * frame.a * frame.c + 0.1 * rng.normal(size=90)
    return _fit(frame, "y", "oak", max_order=2, max_iter=60)


def test_json_holds_intervals_around_the_ranked_indices(oak_model):
    data = report_data(oak_model, top=5)
    intervals = data["sobol_intervals"]
    json.dumps(intervals)  # JSON-ready
    assert [t["term"] for t in intervals["terms"]] == [t["term"] for t in data["sobol"]]
    for t, ranked in zip(intervals["terms"], data["sobol"]):
        assert t["sobol"] == pytest.approx(ranked["sobol"])
        assert 0 <= t["lower"] <= t["mean"] <= t["upper"] <= 1
    assert intervals["terms"][0]["term"] == ["a"] and intervals["terms"][0]["keeps_rank"] > 0.9
    assert 0 <= intervals["rank_stable"] <= 1 and intervals["level"] == 0.9


def test_html_shows_the_intervals_and_the_stability(oak_model, tmp_path):
    html = write_report(oak_model, tmp_path / "r", top=5).read_text()
    assert "How certain is the ranking?" in html
    table = re.search(r"<table class='sobol-intervals'>(.*?)</table>", html).group(1)
    assert table.count("<tr>") == 1 + 5 and re.search(r"\[0\.\d{4}, [01]\.\d{4}\]", table)
    assert re.search(r"The order of the top 3 terms \(a → [^)]*\) holds in <b>\d+%</b>", html)


def test_models_without_sobol_indices_have_no_intervals(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(60, 2)), columns=["a", "b"])
    frame["y"] = frame.a + 0.1 * rng.normal(size=60)
    tm = _fit(frame, "y", "linear")
    assert "sobol_intervals" not in report_data(tm)
    assert "How certain is the ranking?" not in write_report(tm, tmp_path / "r").read_text()
