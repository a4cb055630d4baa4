"""The report's "Top components": every ranked term is drawn (three-way terms as slices) or named as left out."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from hdgp.workflow import fit_table
from hdgp.workflow.report import write_report


def _table(n_features, n=120, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(n, n_features)), columns=[f"f{j}" for j in range(n_features)])
    frame["y"] = frame.f0 * frame.f1 * frame.f2 + 0.5 * frame.f0 + 0.05 * rng.normal(size=n)
    if n_features == 4:
        frame["y"] += 2 * frame.f0 * frame.f1 * frame.f2 * frame.f3
    return frame


def _fit(frame, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_table(frame, "y", model="oak", params=params)


def _figures(html):
    """(caption, img src) of each component figure."""
    return re.findall(r"<figure class='component'[^>]*><img alt='([^']*)' src='([^']*)'><figcaption>", html)


@pytest.fixture(scope="module")
def three_way(tmp_path_factory):
    tm = _fit(_table(3), max_order=3, max_iter=40)
    return tm, write_report(tm, tmp_path_factory.mktemp("r3") / "out", top=7)


def test_a_ranked_three_way_term_is_drawn(three_way):
    tm, path = three_way
    ranked = [tuple(int(j) for j in u) for u in tm.estimator.sobol_.terms]
    rank = ranked.index((0, 1, 2)) + 1
    assert rank <= 2  # the fit found the interaction that makes the target
    html = path.read_text()
    figures = dict(_figures(html))
    caption = f"rank {rank}: f0 × f1 × f2"
    assert caption in figures
    # its figure is a row of three slices: three times as wide as a single panel
    import matplotlib.image as mpimg

    (name,) = re.findall(rf"<figure class='component' data-file='([^']*)'><img alt='{caption}'", html)
    height, width = mpimg.imread(path.parent / name).shape[:2]
    assert width > 2.5 * height
    # the rest of the seven ranked terms are either drawn or named, each once
    drawn = {int(c.split(":")[0].split()[1]) for c in figures}
    notes = re.findall(r"<p class='note left-out'>([^<]*)</p>", html)
    named = {int(r) for note in notes for r in re.findall(r"rank (\d+) ", note)}
    assert drawn | named == set(range(1, 8)) and not drawn & named


def test_terms_above_order_three_are_named_as_left_out(tmp_path):
    tm = _fit(_table(4, n=100, seed=1), max_order=4, max_iter=15)
    ranked = [tuple(int(j) for j in u) for u in tm.estimator.sobol_.terms]
    rank = ranked.index((0, 1, 2, 3)) + 1
    html = write_report(tm, tmp_path / "out", top=len(ranked)).read_text()
    (note,) = re.findall(r"<p class='note left-out'>([^<]*)</p>", html)
    assert f"rank {rank} f0 × f1 × f2 × f3 (order 4: components are drawn up to order 3)" in note
    captions = [c for c, _ in _figures(html)]
    assert not any("f0 × f1 × f2 × f3" in c for c in captions)
    # a term is either drawn or named, never skipped
    drawn = {int(c.split(":")[0].split()[1]) for c in captions}
    named = {int(r) for r in re.findall(r"rank (\d+) ", note)}
    assert drawn | named == set(range(1, len(ranked) + 1)) and not drawn & named
