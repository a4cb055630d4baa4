"""`hdgp demo`: a quick run writes its plot; ordinary mistakes stop with a one-line error, before any fit."""

import pytest
from click.testing import CliRunner

from hdgp.cli import main


def _demo(tmp_path, *args):
    return CliRunner().invoke(main, ["demo", "--dataset", "oak2d", "--quiet", "-o", str(tmp_path / "out"),
                                     *map(str, args)])


def test_demo_fits_the_named_models_and_writes_the_plot(tmp_path):
    result = _demo(tmp_path, "--models", "linear", "--json")
    assert result.exit_code == 0, result.output
    assert '"model": "Linear"' in result.output
    assert (tmp_path / "out" / "predictions.png").is_file()


@pytest.mark.parametrize("models", [["Linear,GAM"], ["Linear", "GAM"], ["Linear", "--models", "GAM"]])
def test_demo_models_take_a_list_as_bench_does(tmp_path, models):
    result = _demo(tmp_path, "--models", *models, "--json")
    assert result.exit_code == 0, result.output
    assert '"model": "Linear"' in result.output and '"model": "GAM"' in result.output


@pytest.mark.parametrize("args, message", [
    (["--models", "RBF-ARD", "--models", "RBFARD"], "'RBFARD' is not a preset. Did you mean 'RBF-ARD'?"),
    (["--models", "GP-classifier"], "'GP-classifier' is a classifier"),
    (["--models", "Linear", "--split", "-1"], "split must be in [0, 9] for 'oak2d', got -1."),
    (["--models", "Linear", "--split", "10"], "split must be in [0, 9] for 'oak2d', got 10."),
])
def test_demo_mistakes_are_one_line_errors(tmp_path, args, message):
    result = _demo(tmp_path, *args)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_demo_refuses_an_output_path_that_is_a_file(tmp_path):
    (tmp_path / "out").write_text("keep me")
    result = _demo(tmp_path, "--models", "Linear")
    assert result.exit_code == 1 and "is an existing file" in result.output
    assert (tmp_path / "out").read_text() == "keep me"
