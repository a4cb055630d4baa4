"""Family-specific report figures (convergence in J, Sobol curves, scaling) and per-task extra measurements."""

from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

from hdgp import GPRegressor, presets
from hdgp.bench import ResultStore, get_protocol, make_report, run_protocol


class _CurveRegressor(GPRegressor):
    """A linear GP that also reports a (made-up but deterministic) truncation curve."""

    def truncation_curve(self, X, y, max_terms=50):
        k = np.arange(1, 4)
        return {"n_terms": k, "cumulative_sobol": np.array([0.5, 0.9, 1.0]), "rmse": 1.0 / k}


@pytest.fixture
def curve_preset(monkeypatch):
    """Register the test-only preset for this test only."""
    import importlib

    registry = importlib.import_module("hdgp.presets")
    presets()  # load every family first
    entry = registry._Preset("test-curve", lambda **kw: _CurveRegressor(kernel="linear", **kw), "test only")
    monkeypatch.setitem(registry._REGISTRY, "test-curve", entry)


@pytest.fixture
def saved_figures(monkeypatch):
    """File name -> the matplotlib Figure saved under it, so tests can read what was drawn."""
    figures = {}
    real = matplotlib.figure.Figure.savefig

    def spy(fig, path, *args, **kwargs):
        figures[Path(path).name] = fig
        return real(fig, path, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    return figures


def _line(ax, label):
    [line] = [ln for ln in ax.lines if ln.get_label() == label]
    return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)


def test_extras_are_measured_stored_and_plotted(curve_preset, tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Curve", "preset": "test-curve"}, {"label": "Linear", "preset": "Linear"}],
                         splits=(0,))
    spec.update(extras=["truncation-curve"], plots=["cumulative-sobol"])
    path = str(protocol_file(spec))
    db = tmp_path / "r.sqlite"
    summary = run_protocol(path, workers=0, db=db, progress=False)
    assert summary.done == 2
    with ResultStore(db) as store:
        df = store.frame("tiny").set_index("model")
    assert df.loc["Curve", "extras"]["truncation-curve"]["rmse"] == pytest.approx([1.0, 0.5, 1 / 3])
    assert df.loc["Linear", "extras"] == {}  # models without the method are simply not measured
    paths = make_report(path, db=db, out_dir=tmp_path / "out")
    assert {p.name for p in paths["plots"]} == {"rmse.png", "cumulative_sobol.png"}
    # the committed report folder carries the extras, so a restored database draws the same figures
    from hdgp.bench.restore import restore_store

    restore_store("tiny", tmp_path / "out", tmp_path / "restored.sqlite")
    with ResultStore(tmp_path / "restored.sqlite") as store:
        restored = store.frame("tiny").set_index("model")
    assert restored.loc["Curve", "extras"]["truncation-curve"]["rmse"] == pytest.approx([1.0, 0.5, 1 / 3])
    paths = make_report(path, db=tmp_path / "restored.sqlite", out_dir=tmp_path / "again")
    assert {p.name for p in paths["plots"]} == {"rmse.png", "cumulative_sobol.png"}


def test_unknown_extra_fails_the_task_with_the_valid_names(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(splits=(0,))
    spec["extras"] = ["sobol-everything"]
    db = tmp_path / "r.sqlite"
    run_protocol(str(protocol_file(spec)), workers=0, db=db, progress=False)
    with ResultStore(db) as store:
        error = store.frame("tiny").error.iloc[0]
    assert "Unknown extra measurement 'sobol-everything'" in error and "truncation-curve" in error


def _write(store, protocol, dataset, model, split, rmse, n_train=100, fit=1.0, hp=None):
    store.write({"protocol": protocol, "dataset": dataset, "model": model, "split": split, "seed": 0,
                 "status": "done", "metrics": {"rmse": rmse}, "fit_seconds": fit, "n_train": n_train, "threads": 1,
                 "hyperparameters": hp or {}, "versions": {}, "machine": {"platform": "t", "cores": 2}})


def test_convergence_in_j_and_scaling_figures(tmp_path, saved_figures):
    fig3, fig5 = get_protocol("rpa-gp-fig3"), get_protocol("rpa-gp-fig5")
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        for j in (1, 5, 20):
            for split in range(3):
                _write(store, fig3.name, "yacht", f"DPA-GP-ARD J={j}", split, 1.0 / j + 0.01 * split)
        for split in range(3):
            _write(store, fig3.name, "yacht", "RBF-ARD", split, 0.1)
        for n in (500, 1000, 2000):
            _write(store, fig5.name, f"sin-sum-n{n}", "RPA-GP-SKI", 0, 0.1, n_train=int(0.9 * n), fit=n / 1000)
            _write(store, fig5.name, f"sin-sum-n{n}", "RBF (Cholesky)", 0, 0.1, n_train=int(0.9 * n), fit=(n / 1000) ** 3)
    p3 = make_report(fig3, db=db, out_dir=tmp_path / "fig3", reference_dir=tmp_path)
    p5 = make_report(fig5, db=db, out_dir=tmp_path / "fig5", reference_dir=tmp_path)
    assert "convergence_in_J.png" in {p.name for p in p3["plots"]}
    assert "scaling.png" in {p.name for p in p5["plots"]}
    assert all(p.stat().st_size > 1000 for p in p3["plots"] + p5["plots"])
    [ax] = saved_figures["convergence_in_J.png"].axes
    x, m = _line(ax, "DPA-GP-ARD")  # one curve per preset: split means against J
    np.testing.assert_allclose(x, [1, 5, 20])
    np.testing.assert_allclose(m, [1.01, 0.21, 0.06])
    assert _line(ax, "RBF-ARD")[1] == pytest.approx([0.1, 0.1])  # a baseline without J: a horizontal line
    [ax] = saved_figures["scaling.png"].axes
    n_train = [450, 900, 1800]
    assert _line(ax, "RPA-GP-SKI")[0].tolist() == n_train
    np.testing.assert_allclose(_line(ax, "RPA-GP-SKI")[1], [0.5, 1.0, 2.0])
    np.testing.assert_allclose(_line(ax, "RBF (Cholesky)")[1], [0.125, 1.0, 8.0])


def test_convergence_in_inducing_points_figure(tmp_path, saved_figures):
    fig3 = get_protocol("oak-fig3")
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        for spec in fig3.models:
            for split in range(2):
                _write(store, fig3.name, "pumadyn32nm", spec.label, split, 1.0 / spec.params["n_inducing"] + 0.01 * split)
    paths = make_report(fig3, db=db, out_dir=tmp_path / "out", reference_dir=tmp_path)
    [png] = [p for p in paths["plots"] if p.name == "convergence_in_M.png"]
    assert png.stat().st_size > 1000
    [ax] = saved_figures["convergence_in_M.png"].axes
    for preset in ("OAK", "Additive", "RBF-ARD"):  # one curve per preset, split means against M
        x, m = _line(ax, preset)
        np.testing.assert_allclose(x, [25, 50, 100, 200, 400])
        np.testing.assert_allclose(m, 1.0 / x + 0.005)


def test_metric_vs_n_figure_has_one_panel_per_generating_function(tmp_path, saved_figures):
    fig6 = get_protocol("rpa-gp-fig6")
    assert {d.loader_name for d in fig6.datasets} == {"additive", "smooth-xor", "rotation-invariant",
                                                      "half-irrelevant"}
    db = tmp_path / "r.sqlite"
    chosen = fig6.datasets[:3] + fig6.datasets[5:7]  # two functions, several n
    with ResultStore(db, writer=True) as store:
        for d in chosen:
            for split in range(2):
                _write(store, fig6.name, d.name, "GAM", split, 0.5 + 0.1 * split, n_train=int(0.9 * d.kwargs["n"]))
                _write(store, fig6.name, d.name, "DPA-GP-ARD", split, 0.3, n_train=int(0.9 * d.kwargs["n"]))
    paths = make_report(fig6, db=db, out_dir=tmp_path / "fig6", reference_dir=tmp_path)
    [png] = [p for p in paths["plots"] if p.name == "rmse_vs_n.png"]
    assert png.stat().st_size > 1000
    axes = saved_figures["rmse_vs_n.png"].axes
    assert [ax.get_title() for ax in axes] == ["additive", "smooth-xor"]
    for ax, n_sets in zip(axes, (3, 2)):
        x, gam = _line(ax, "GAM")
        assert len(x) == n_sets and np.all(np.diff(x) > 0)
        np.testing.assert_allclose(gam, 0.55)
        np.testing.assert_allclose(_line(ax, "DPA-GP-ARD")[1], 0.3)


def test_sobol_by_order_reads_the_stored_vector(tmp_path, saved_figures):
    oak = get_protocol("oak-table5")
    db = tmp_path / "r.sqlite"
    with ResultStore(db, writer=True) as store:
        for split, shares in enumerate(([0.8, 0.15, 0.05], [1.6, 0.3, 0.1])):  # the second is not normalised
            _write(store, oak.name, "housing", "OAK", split, 0.3, hp={"sobol_order_": shares})
    paths = make_report(oak, db=db, out_dir=tmp_path / "out")
    assert "sobol_by_order.png" in {p.name for p in paths["plots"]}
    [ax] = saved_figures["sobol_by_order.png"].axes
    np.testing.assert_allclose([bar.get_height() for bar in ax.patches], [0.8, 0.15, 0.05])


def test_report_counts_fits_whose_low_orders_miss_the_fig4_threshold(tmp_path):
    oak = get_protocol("oak-table5")
    db = tmp_path / "r.sqlite"
    fits = {"housing": ([0.8, 0.15, 0.04, 0.01], [0.5, 0.2, 0.2, 0.1]),   # 0.99 and 0.90 in orders <= 3
            "energy": ([2.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0])}
    with ResultStore(db, writer=True) as store:
        for dataset, shares in fits.items():
            for split, v in enumerate(shares):
                _write(store, oak.name, dataset, "OAK", split, 0.3,
                       hp={"sobol_order_": v, "likelihood.noise_covar.noise": 0.1 * (split + 1)})
    md = make_report(oak, db=db, out_dir=tmp_path / "out", plots=False)["markdown"].read_text()
    section = md.split("## Sobol mass of interaction orders ≤ 3")[1].split("\n## ")[0]
    rows = {ln.split("|")[1].strip(): ln for ln in section.splitlines() if ln.startswith("| ") and "OAK" in ln}
    assert rows["housing"] == "| housing | OAK | 2 | 0.945 | 0.900 | **1** | 0.15 |"
    assert rows["energy"] == "| energy | OAK | 2 | 1.000 | 1.000 | 0 | 0.15 |"


def test_hyperparameter_summary_keeps_short_fitted_vectors_whole():
    from hdgp.bench.task import hyperparameter_summary

    class Fitted:
        pass

    est = Fitted()
    est.sobol_order_ = np.linspace(1, 0, 13)   # one share per order, d = 13
    est.alpha_ = np.ones(500)                  # long fitted arrays are left out
    est.n_iter_ = 7
    est._private_ = 1.0
    hp = hyperparameter_summary(est)
    assert hp["sobol_order_"] == pytest.approx(list(np.linspace(1, 0, 13)))
    assert hp["n_iter_"] == 7 and "alpha_" not in hp and "_private_" not in hp
