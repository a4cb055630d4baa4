"""`hdgp bench run/report/list` argument handling and error messages."""

from click.testing import CliRunner

from hdgp.bench.cli import bench


def test_list_shows_every_protocol():
    result = CliRunner().invoke(bench, ["list"])
    assert result.exit_code == 0
    for name in ("rpa-gp-table1", "duvenaud-tables", "oak-table5", "sigp-table2", "all-families"):
        assert name in result.output


def test_unknown_names_are_reported_with_valid_ones(tiny_protocol, protocol_file, tmp_path):
    runner = CliRunner()
    result = runner.invoke(bench, ["run", "no-such-protocol"])
    assert result.exit_code != 0 and "Valid protocols: rpa-gp-table1" in result.output
    path = str(protocol_file(tiny_protocol()))
    result = runner.invoke(bench, ["run", path, "--models", "Linear", "Nope", "--db", str(tmp_path / "r.sqlite")])
    assert result.exit_code != 0 and "Unknown model 'Nope'" in result.output and "Valid models: Linear" in result.output
    result = runner.invoke(bench, ["run", path, "--splits", "zero"])
    assert result.exit_code != 0 and "integers" in result.output


def test_missing_data_dir_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("HDGP_DATA_DIR", raising=False)
    result = CliRunner().invoke(bench, ["run", "rpa-gp-table1", "--datasets", "yacht", "--models", "RBF-ARD",
                                        "--db", str(tmp_path / "r.sqlite")])
    assert result.exit_code != 0 and "HDGP_DATA_DIR" in result.output


def test_run_then_report_with_space_separated_lists(tiny_protocol, protocol_file, tmp_path):
    path = str(protocol_file(tiny_protocol(datasets=("bach",), splits=(0, 1, 2))))
    db, out = str(tmp_path / "r.sqlite"), str(tmp_path / "out")
    runner = CliRunner()
    result = runner.invoke(bench, ["run", path, "--splits", "0", "2", "--models", "Linear", "--workers", "0",
                                   "--db", db, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 tasks: 0 already" in result.output and "2 done, 0 failed" in result.output
    result = runner.invoke(bench, ["run", path, "--workers", "0", "--db", db, "--no-progress"])
    assert "3 tasks: 2 already" in result.output and "1 done" in result.output
    result = runner.invoke(bench, ["report", path, "--db", db, "--out", out, "--no-plots"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "report.md").is_file()


def test_labels_with_spaces_can_be_selected(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Linear J=1", "preset": "Linear"}, {"label": "GAM", "preset": "GAM"}],
                         splits=(0,))
    path = str(protocol_file(spec))
    result = CliRunner().invoke(bench, ["run", path, "--models", "Linear J=1", "--workers", "0", "--no-progress",
                                        "--db", str(tmp_path / "r.sqlite")])
    assert result.exit_code == 0, result.output
    assert "1 tasks: 0 already" in result.output
