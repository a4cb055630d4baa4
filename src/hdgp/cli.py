"""Command-line interface: ``hdgp --help``.

The CLI only parses arguments and calls the public Python API. It starts fast: the modules
behind a command (torch, gpytorch, scikit-learn, matplotlib) are imported only when that
command runs, or shows its own help.
"""

from __future__ import annotations

import json

import click

from ._version import __version__
from ._click import LazyGroup, ListOption, split_list

#: Subcommands defined in other modules: name → (module, attribute, one-line help for `hdgp --help`).
_LAZY_COMMANDS = {
    "bench": ("hdgp.bench.cli", "bench", "Reproduce the papers' tables: run protocols, store results, render..."),
    "fit": ("hdgp.workflow.cli", "fit", "Fit a GP model to a CSV/Parquet table and save it."),
    "predict": ("hdgp.workflow.cli", "predict", "Predict the target for every row of a table."),
    "explain": ("hdgp.workflow.cli", "explain", "Write an HTML report explaining a fitted model (works offline)."),
}


@click.group(cls=LazyGroup, lazy_commands=_LAZY_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hdgp")
def main():
    """hdgp — structured Gaussian processes for high-dimensional tabular data.

    \b
    Examples:
      hdgp fit data.csv --target y -o model.hdgp     fit a model to your own table
      hdgp predict model.hdgp new.csv -o pred.csv    mean, std and interval per row
      hdgp explain model.hdgp -o report/             HTML report (accuracy, Sobol, components)
      hdgp demo                      fit every model family on built-in data
      hdgp presets                   list the named models of the papers
      hdgp datasets                  list built-in and HDGP_DATA_DIR data sets
    """

@main.command()
@click.option("--dataset", default="diabetes", show_default=True, help="Data set name (see `hdgp datasets`).")
@click.option("--split", default=0, show_default=True, help="Train/test split index.")
@click.option("--models", cls=ListOption, help="Preset names to fit (--models A B, A,B or repeated; default: the demo set).")
@click.option("-o", "--output", default="hdgp-demo-output", show_default=True, help="Folder for the plot.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def demo(dataset, split, models, output, as_json, quiet):
    """Fit the models on a built-in data set; print test RMSE, NLPD and fit time; save a plot.

    Metrics use the target standardised with training statistics (an RMSE of one is
    the error of predicting the mean), as in the papers' tables.
    """
    from .demo import DEMO_MODELS, run_demo  # deferred: fits models (torch, scikit-learn)

    try:
        rows = run_demo(dataset, split, split_list(models) or DEMO_MODELS, output, progress=not quiet)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"\nhdgp demo — {dataset}, split {split} (standardised target)\n")
    click.echo(f"{'model':<14}{'test RMSE':>10}{'NLPD':>9}{'95% cov.':>10}{'fit (s)':>9}")
    for r in sorted(rows, key=lambda r: r["rmse"]):
        click.echo(f"{r['model']:<14}{r['rmse']:>10.3f}{r['nlpd']:>9.3f}{r['coverage95']:>10.2f}{r['fit_seconds']:>9.2f}")
    click.echo(f"\nPlot of test predictions with ±2σ bands: {output}/predictions.png")


@main.command("presets")
def list_presets():
    """List the named model presets (the model names of the papers' tables)."""
    from .presets import presets  # deferred: imports every estimator (torch)

    for name, description in presets().items():
        click.echo(f"{name:<18} {description}")


@main.command()
@click.option("--data-dir", default=None, help="Benchmark data folder (default: $HDGP_DATA_DIR).")
def datasets(data_dir):
    """List built-in, synthetic and HDGP_DATA_DIR data sets."""
    from .data import DATA_DIR_ENV, find_data_dir, list_datasets  # deferred: scikit-learn's data sets

    for name, source in list_datasets(data_dir).items():
        click.echo(f"{name:<20} {source}")
    if find_data_dir(data_dir) is None:
        click.echo(f"\n(UCI benchmark sets appear when {DATA_DIR_ENV} points to the shared data folder.)")


if __name__ == "__main__":  # pragma: no cover
    main()
