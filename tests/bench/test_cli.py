"""`hdgp bench run/report/list` argument handling and error messages."""

import subprocess
import sys

from click.testing import CliRunner

from hdgp.bench import ResultStore
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


def test_data_dir_without_its_subfolders_says_which_folder_to_name(tmp_path):
    (tmp_path / "uci").mkdir()
    result = CliRunner().invoke(bench, ["run", "rpa-gp-table1", "--datasets", "yacht", "--models", "RBF-ARD",
                                        "--db", str(tmp_path / "r.sqlite"), "--data-dir", str(tmp_path / "uci")])
    assert result.exit_code != 0 and "holds neither 'uci/' nor 'sigp/' (it is itself one of them: use its parent)" \
        in result.output


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
    assert (tmp_path / "out" / "report.md").is_file() and "runs.csv" in result.stdout


def test_report_warnings_are_one_line_notes(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(splits=(0,))
    spec["plots"] = ["rmse", "nope"]
    path = str(protocol_file(spec))
    db = str(tmp_path / "r.sqlite")
    runner = CliRunner()
    runner.invoke(bench, ["run", path, "--workers", "0", "--db", db, "--no-progress"])
    result = runner.invoke(bench, ["report", path, "--db", db, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "Note: Unknown plot hook 'nope'" in result.stderr and "make_report(" not in result.stderr


def test_labels_with_spaces_can_be_selected(tiny_protocol, protocol_file, tmp_path):
    spec = tiny_protocol(models=[{"label": "Linear J=1", "preset": "Linear"}, {"label": "GAM", "preset": "GAM"}],
                         splits=(0,))
    path = str(protocol_file(spec))
    result = CliRunner().invoke(bench, ["run", path, "--models", "Linear J=1", "--workers", "0", "--no-progress",
                                        "--db", str(tmp_path / "r.sqlite")])
    assert result.exit_code == 0, result.output
    assert "1 tasks: 0 already" in result.output


def _run(path, tmp_path, *args):
    return CliRunner().invoke(bench, ["run", str(path), *args, "--workers", "0", "--no-progress",
                                      "--db", str(tmp_path / "r.sqlite")])


def test_run_that_would_plan_no_task_is_an_error_naming_the_valid_choices(tiny_protocol, protocol_file, tmp_path):
    path = protocol_file(tiny_protocol(splits=(0,)))
    result = _run(path, tmp_path, "--splits", "50")
    assert result.exit_code != 0 and "none of the splits [50] exists (valid splits: bach: 0-9)" in result.output
    typo = protocol_file(tiny_protocol(name="typo", models=[{"label": "Lin", "preset": "Linaer"}]))
    result = _run(typo, tmp_path)
    assert result.exit_code != 0
    assert "'Lin' (preset 'Linaer'; did you mean 'Linear'?)" in result.output and "Registered presets:" in result.output
    nowhere = protocol_file(tiny_protocol(name="nowhere", datasets=("bach", "oak2d"),
                                          models=[{"label": "Linear", "preset": "Linear"},
                                                  {"label": "GAM", "preset": "GAM", "datasets": ["oak2d"]}]))
    result = _run(nowhere, tmp_path, "--datasets", "bach", "--models", "GAM")
    assert result.exit_code != 0 and "No task of protocol 'nowhere' for model(s) 'GAM'" in result.output
    assert "'GAM' runs on ['oak2d']" in result.output
    assert not (tmp_path / "r.sqlite").exists()


def test_run_names_a_skipped_model_with_a_hint(tiny_protocol, protocol_file, tmp_path):
    """A model with an unregistered preset beside registered ones is skipped, named with the close match."""
    mixed = protocol_file(tiny_protocol(splits=(0,), models=[{"label": "Linear", "preset": "Linear"},
                                                             {"label": "Lin", "preset": "Linaer"}]))
    result = _run(mixed, tmp_path)
    assert result.exit_code == 0, result.output
    assert "Skipped (preset not registered): 'Lin' (preset 'Linaer'; did you mean 'Linear'?)" in result.output
    assert "1 tasks: 0 already" in result.output


def test_repeated_splits_seeds_and_names_run_once(tiny_protocol, protocol_file, tmp_path):
    path = protocol_file(tiny_protocol(splits=(0,)))
    result = _run(path, tmp_path, "--splits", "0", "0", "--seeds", "1", "1", "--models", "Linear", "linear")
    assert result.exit_code == 0, result.output
    assert "1 tasks: 0 already" in result.output and "1 done" in result.output


def test_a_device_is_checked_before_a_run_or_a_dry_run_and_recorded(tiny_protocol, protocol_file, tmp_path):
    path = str(protocol_file(tiny_protocol(splits=(0,))))
    db = str(tmp_path / "r.sqlite")
    runner = CliRunner()
    for extra in ([], ["--dry-run"]):
        result = runner.invoke(bench, ["run", path, "--device", "gpu0", "--workers", "0", "--db", db, *extra])
        assert result.exit_code == 1 and "device must be 'cpu', 'cuda'" in result.output, result.output
    result = runner.invoke(bench, ["run", path, "--device", "cpu", "--workers", "0", "--db", db, "--no-progress"])
    assert result.exit_code == 0, result.output
    with ResultStore(db) as store:
        assert list(store.frame("tiny")["device"]) == ["cpu"]


def test_bench_help_and_list_do_not_import_torch():
    # the estimators (torch, gpytorch) load when a task runs, not when the harness starts (issue #42:
    # the imports that wait inside bench functions are those of torch and the presets)
    code = ("import sys\nfrom hdgp.cli import main\n"
            "for args in (['bench', '--help'], ['bench', 'run', '--help'], ['bench', 'list']):\n"
            "    try:\n        main(args, prog_name='hdgp')\n    except SystemExit:\n        pass\n"
            "print('LOADED', *sorted(m for m in ('torch', 'gpytorch', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Usage: hdgp bench" in out and "rpa-gp-table1" in out
    assert out.strip().splitlines()[-1] == "LOADED"
