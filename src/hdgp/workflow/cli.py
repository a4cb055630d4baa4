"""``hdgp fit``, ``hdgp predict`` and ``hdgp explain``: the user workflow on the command line.

The commands only parse arguments and call :mod:`hdgp.workflow` / :mod:`hdgp.io`.
Progress goes to stderr (``--quiet`` silences it); results go to stdout, as text
or, with ``--json``, as one JSON document.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import sys
import warnings
from pathlib import Path

import click


# The hdgp modules these commands call are imported inside the commands: each loads torch,
# scikit-learn or matplotlib (seconds), which `hdgp fit --help` and `hdgp predict --help` need not.
__all__ = ["fit", "predict", "explain"]

_MODEL_HELP = ("Model: auto, oak, additive, dpa-gp-ard, sigp, rbf-ard or any name from `hdgp presets` "
               "(case-insensitive). Classification: auto, oak, rbf-ard, sigp or additive (their "
               "classifiers), oak-classifier, gp-classifier, sigp-classifier, additive-classifier.")


def _columns(values, table_columns=()) -> list[str]:
    """``--categorical a,b --categorical c`` → ``["a", "b", "c"]``; a value that is itself a column
    of the table (``--drop "size, m2"``) is kept whole."""
    known = {str(c) for c in table_columns}
    return [c.strip() for v in values for c in ([v] if v.strip() in known else v.split(",")) if c.strip()]


def _params(values) -> dict:
    out = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def _jsonable(value):
    """Plain JSON types; NaN and infinity (not JSON) become null."""
    import numpy as np  # deferred: only output needs it, `--help` does not

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _fail(exc: Exception):
    raise click.ClickException(str(exc)) from exc


def _progress(quiet: bool):
    return (lambda message: None) if quiet else (lambda message: click.echo(message, err=True))


def _load_table_model(path):
    from ..io import ModelFileError, load  # deferred: model files load torch
    from .tabular import TabularModel  # deferred: imports the estimators (torch)

    try:
        model = load(path)
    except ModelFileError as exc:
        _fail(exc)
    if not isinstance(model, TabularModel):
        raise click.ClickException(
            f"{path} holds a {type(model).__name__} saved from Python without a table description; "
            "use it with hdgp.load() in Python, or create the model with `hdgp fit`.")
    return model


def _output_ok(path: Path, what: str, suffixes: tuple = (), *, inputs: tuple = (), refused: tuple = ()) -> None:
    """Refuse an output path in a missing folder, without one of ``suffixes``, with one of
    ``refused``, or that is one of the ``inputs`` (it would be overwritten)."""
    if not path.parent.is_dir():
        raise click.ClickException(f"Cannot write the {what} to {path}: the folder {path.parent} does not exist.")
    same = [p for p in inputs if path.resolve() == Path(p).resolve()]
    if same:
        raise click.ClickException(f"Cannot write the {what} to {path}: it is the input file {same[0]}, which "
                                   "would be overwritten. Choose another output name with -o.")
    if suffixes and path.suffix.lower() not in suffixes:
        raise click.ClickException(f"Cannot write the {what} to {path.name}: use a file name ending in "
                                   f"{', '.join(suffixes)}.")
    if path.suffix.lower() in refused:
        raise click.ClickException(f"Cannot write the {what} to {path.name}: that name is for a table; use a "
                                   "name such as model.hdgp.")


# ------------------------------------------------------------------------ fit
@click.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("-t", "--target", required=True, help="Column to predict (numbers, or class labels).")
@click.option("--task", default="auto", show_default=True, type=click.Choice(["auto", "regression", "classification"]),
              help="auto: a text, true/false or two-valued target is classification, other numbers regression.")
@click.option("-m", "--model", default="auto", show_default=True, help=_MODEL_HELP)
@click.option("--categorical", multiple=True, metavar="COLS",
              help="Comma-separated columns to treat as categorical (text columns always are).")
@click.option("--drop", multiple=True, metavar="COLS", help="Comma-separated columns to ignore (ids, free text).")
@click.option("--drop-missing", is_flag=True, help="Remove rows with missing values instead of stopping.")
@click.option("--sep", default=None, metavar="CHAR",
              help="Separator of a CSV/TSV file (default ',' for .csv, tab for .tsv), e.g. --sep ';'.")
@click.option("--na-values", "na_values", multiple=True, metavar="CELLS",
              help="Comma-separated cell values that mean 'missing' besides empty cells and NA, e.g. --na-values '?'.")
@click.option("--test-size", default=0.2, show_default=True, type=float,
              help="Fraction of rows held out to measure accuracy and calibration (0 = none).")
@click.option("--random-state", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1),
              help="Seed of the split and the model.")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Estimator parameter, e.g. -p max_iter=100 -p max_order=2 (values parsed as JSON).")
@click.option("--refit-all", is_flag=True,
              help="After the held-out evaluation, refit the model on all rows and save that one.")
@click.option("-o", "--output", default="model.hdgp", show_default=True, type=click.Path(dir_okay=False),
              help="Model file to write.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress messages.")
def fit(data, target, task, model, categorical, drop, drop_missing, sep, na_values, test_size, random_state, params,
        refit_all, output, as_json, quiet):
    """Fit a GP model to a CSV/Parquet table and save it.

    Text columns (and those given with --categorical) are categorical, dates
    (text with a year, e.g. 2024-03-01) one numeric input in days; rows with
    missing feature cells stop the fit unless --drop-missing, except with an OAK
    model (--model oak), which keeps them (marginalising each missing feature);
    rows with a missing target are left out, with a note. A random --test-size share
    of rows is held out to report RMSE, R², NLPD and the coverage of 50/90/95 %
    predictive intervals; the saved model is the one fitted without them, unless
    --refit-all refits it on every row after that evaluation (--test-size 0:
    no evaluation, all rows). Columns that number the rows (a pandas index
    written to the CSV) or hold a single value are left out, with a note.

    --model auto compares the candidates suited to the data size (n ≤ 3000: OAK,
    DPA-GP-ARD, RBF-ARD, SIGP; up to 20000: DPA-GP-ARD, SGPR-RBF-ARD, SIGP;
    beyond: DPA-GP-ARD, SGPR-RBF-ARD) by their mean log predictive density on 20 % of the training
    rows once their predictive variances are calibrated there (one factor: the
    mean squared standardised error). Candidates are fitted by successive
    halving on growing subsets of the other 80 % (×3 per rung, from 200 rows):
    after a rung, one outside the best third and worse than the leader beyond
    validation noise stops. Up to 600 training rows the score is pooled over a
    5-fold cross-validation instead. The candidates left are stacked: mixture
    weights that maximise the validation log density of their mixture; those
    with weight ≥ 0.05 (at most 3; 2 above 600 rows) are refitted on all
    training rows, each keeping its factor (up to 600 rows afresh and also from
    where its validated fit ended, keeping the better training objective;
    beyond, from its validated fit only, with a short L-BFGS polish), and the
    model predicts with their mixture (one member with all the weight: that
    model alone).

    Classification (--task auto picks it for a text, true/false or two-valued
    target): the held-out share is stratified by class (at least one row of every
    class, so it can exceed --test-size by a row per rare class) and reports accuracy,
    balanced accuracy, log-loss, Brier score, ROC AUC (two classes) and the
    expected calibration error. --model auto compares OAK-classifier (while rows
    × latent functions ≤ 3000: one function for two classes, one per class
    beyond), GP-classifier and SIGP-classifier (up to 20000 rows) by validation
    log-loss, stacked the same way (a mixture of their class probabilities).

    \b
    Examples:
      hdgp fit diabetes.csv --target target -o diabetes.hdgp
      hdgp fit houses.parquet -t price --model oak --drop id --categorical zip
      hdgp fit cancer.csv -t diagnosis --model oak -o cancer.hdgp   # classification
    """
    from .._summary import learned_quantities  # deferred: torch
    from ..exceptions import HDGPWarning  # deferred: scikit-learn (its ConvergenceWarning)
    from ..io import TableError, read_table, save  # deferred: pandas readers, model files (torch)
    from ..io.table import TABLE_FORMATS  # deferred: pandas
    from .fitting import fit_table  # deferred: the estimators (torch, gpytorch, scikit-learn)
    from .report import mean_baseline_rmse  # deferred: matplotlib
    from .report_classification import majority_class_rate  # deferred: with the report

    out = Path(output)
    _output_ok(out, "model", inputs=(data,), refused=tuple(TABLE_FORMATS))
    try:
        frame = read_table(data, sep=sep, na_values=_columns(na_values))
        with warnings.catch_warnings(record=True) as caught:  # shown as plain lines, not with source code
            warnings.simplefilter("always", HDGPWarning)
            tm = fit_table(frame, target, task=task, model=model, categorical=_columns(categorical, frame.columns),
                           drop=_columns(drop, frame.columns),
                           drop_missing=drop_missing, test_size=test_size, random_state=random_state,
                           params=_params(params), refit_all=refit_all, progress=_progress(quiet),
                           verbose=not quiet and not as_json and sys.stderr.isatty())  # bars only on a terminal
        tm.metadata["data"]["file"] = Path(data).name
        save(tm, out)
    except (TableError, ValueError, TypeError, RuntimeError, FloatingPointError, OSError) as exc:  # OSError: disk full
        _fail(exc)
    meta = tm.metadata
    for w in caught:  # fit_table's own warnings are in meta["warnings"]; others as Python shows them
        if not issubclass(w.category, HDGPWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        elif str(w.message) not in meta["warnings"]:
            meta["warnings"].append(str(w.message))
    if as_json:
        click.echo(json.dumps(_jsonable({
            "task": tm.task, "classes": list(tm.schema.classes) if tm.task == "classification" else None,
            "model": meta["model"], "members": meta.get("members"), "output": str(out), "target": target,
            "metrics": meta["metrics"],
            "selection": meta["selection"], "fit_seconds": meta["fit_seconds"],
            "n_train": meta["data"]["n_train"], "n_test": meta["data"]["n_test"], "refit_all": meta["refit_all"],
            "learned": learned_quantities(tm.estimator, classes=tm.schema.classes), "warnings": meta["warnings"]}), indent=2))
        return
    if meta["selection"]:
        _echo_selection(meta["selection"], tm.task)
    click.echo("")
    click.echo(tm.summary())
    m = meta["metrics"]
    if m and tm.task == "classification":
        auc = "—" if m["roc_auc"] is None else f"{m['roc_auc']:.3f}"
        majority = majority_class_rate(tm)
        click.echo(f"\nHeld-out ({meta['data']['n_test']} rows, stratified): accuracy {m['accuracy']:.3f}"
                   + ("" if majority is None else f" (majority-class rate {majority:.3f})") + ", "
                   f"balanced accuracy {m['balanced_accuracy']:.3f}, log-loss {m['log_loss']:.4g}, "
                   f"Brier {m['brier']:.4g}, ROC AUC {auc}; calibration error (ECE) {m['ece']:.3f}")
    elif m:
        baseline = mean_baseline_rmse(tm)
        r2 = "—" if m["r2"] is None or not math.isfinite(m["r2"]) else f"{m['r2']:.3f}"
        click.echo(f"\nHeld-out ({meta['data']['n_test']} rows): RMSE {m['rmse']:.4g}"
                   + ("" if baseline is None else f" (predicting the training mean: {baseline:.4g})")
                   + f", R² {r2}, "
                   f"NLPD {m['nlpd']:.4g}; interval coverage 50 % → {100 * m['coverage_50']:.0f} %, "
                   f"90 % → {100 * m['coverage_90']:.0f} %, 95 % → {100 * m['coverage_95']:.0f} %")
    if meta["refit_all"]:
        click.echo(f"\nRefitted on all {meta['refit_all']['n_rows']} rows ({meta['refit_all']['fit_seconds']:.1f} s) "
                   "and saved that model; the held-out numbers above are of the same model fitted without "
                   "the held-out rows.")
    fit_warnings = [w for w in meta["warnings"] + (meta["refit_all"] or {}).get("warnings", [])
                    if w not in tm.schema.notes]  # the notes went to the progress lines
    if fit_warnings:
        click.echo("\nWarnings while fitting the model:\n" + "\n".join(f"  {w}" for w in fit_warnings), err=True)
    click.echo(f"\nSaved {out}. Next: hdgp predict {out} NEW.csv -o predictions.csv; hdgp explain {out} -o report/")


def _echo_selection(rows, task: str) -> None:
    def cell(value, fmt):
        return "—" if value is None else format(value, fmt)

    if task == "classification":
        click.echo("\nModel comparison (validation rows of the training rows; lower log-loss is better; rows: "
                   "fitted at the candidate's last rung):")
        click.echo(f"  {'model':<16}{'log-loss':>10}{'accuracy':>10}{'fit (s)':>9}{'rows':>8}")
        cells = [(cell(r["val_log_loss"], ".4g"), cell(r["val_accuracy"], ".3f")) for r in rows]
    else:
        click.echo("\nModel comparison (validation rows of the training rows; higher calibrated log density "
                   "is better; rows: fitted at the candidate's last rung):")
        click.echo(f"  {'model':<14}{'log density':>12}{'calibrated':>12}{'variance ×':>12}{'RMSE':>11}{'fit (s)':>9}"
                   f"{'rows':>8}")
        cells = [(cell(r["val_log_density"], ".4g"), cell(r["val_log_density_calibrated"], ".4g"),
                  cell(r["val_variance_ratio"], ".3g"), cell(r["val_rmse"], ".4g")) for r in rows]
    width = (16, 10, 10) if task == "classification" else (14, 12, 12, 12, 11)
    for r, values in zip(rows, cells):
        weight = r.get("weight")
        mark = ("  <- chosen" + (f" (weight {weight:.3f})" if weight is not None else "") if r["selected"]
                else f"  <- in the mixture, weight {weight:.3f}" if weight else
                f"  failed: {r['error']}" if r["error"] else "")
        columns = "".join(f"{v:>{w}}" for v, w in zip(values, width[1:]))
        rows_cell = cell(r.get("rung_rows"), "d")
        click.echo(f"  {r['model']:<{width[0]}}{columns}{cell(r['fit_seconds'], '.1f'):>9}{rows_cell:>8}{mark}")


# -------------------------------------------------------------------- predict
@click.command()
@click.argument("model_file", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Predictions file (.csv, .tsv or .parquet; .txt and .pq as .csv and .parquet).")
@click.option("--id-column", default=None, help="Column copied to the predictions to identify rows.")
@click.option("--sep", default=None, metavar="CHAR", help="Separator of a CSV/TSV file, as in hdgp fit.")
@click.option("--na-values", "na_values", multiple=True, metavar="CELLS",
              help="Comma-separated cell values that mean 'missing', as in hdgp fit.")
@click.option("--level", default=0.95, show_default=True, type=float,
              help="Probability of the central interval (regression models).")
@click.option("--unknown-levels", type=click.Choice(["error", "ignore"]), default="error", show_default=True,
              help="A categorical value training never saw: stop with an error, or predict without it (OAK: "
                   "the column's average effect; other models: no known level), with a warning naming the rows.")
@click.option("--drop-missing", is_flag=True,
              help="Leave out rows with a missing feature cell (OAK models predict them by default; others stop).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option("--quiet", is_flag=True, help="No progress messages.")
def predict(model_file, data, output, id_column, sep, na_values, level, unknown_levels, drop_missing, as_json, quiet):
    """Predict the target for every row of a table.

    Writes one row per input row: the predictive mean, its standard deviation and
    a central interval (mean ± z·std, Gaussian) of a new observation, in the
    target's original units. Rows with missing feature cells: an OAK model predicts
    them with each missing feature marginalised over its input measure (the terms
    containing it leave the mean and add their prior variance); other models stop,
    and --drop-missing leaves those rows out. For a classifier: the most probable class (column
    label, as written in the training table) and one proba_<class> column per
    class. The table needs the training feature columns (any order; other columns
    are ignored).

    \b
    Example:
      hdgp predict diabetes.hdgp new_patients.csv -o predictions.csv --id-column patient
    """
    from ..exceptions import HDGPWarning  # deferred: scikit-learn (its ConvergenceWarning)
    from ..io import TableError, read_table  # deferred: pandas readers
    from ..io import atomic  # deferred: with the io package (model files: torch)
    from ..io.table import TABLE_FORMATS  # deferred: pandas

    out = Path(output)
    _output_ok(out, "predictions", tuple(TABLE_FORMATS), inputs=(data, model_file))
    kind = TABLE_FORMATS[out.suffix.lower()]
    if kind == "parquet" and not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        raise click.ClickException(f"Writing {out} needs a Parquet engine: pip install pyarrow, or write a .csv file.")
    say = _progress(quiet)
    tm = _load_table_model(model_file)
    if tm.task == "classification" and click.get_current_context().get_parameter_source("level").name != "DEFAULT":
        raise click.UsageError(f"--level sets the interval of a regression model; {model_file} is a classifier, "
                               "whose predictions are class probabilities.")
    try:
        frame = read_table(data, text_columns=tm.schema.categorical, sep=sep, na_values=_columns(na_values))
        frame, missing_said = _missing_rows(tm, frame, drop_missing)
        if missing_said:
            say(missing_said)
        say(f"predicting {tm.target!r} for {len(frame)} row{'s' * (len(frame) != 1)} with {tm.metadata.get('model')}")
        with warnings.catch_warnings(record=True) as caught:  # shown as plain lines, not with source code
            warnings.simplefilter("always", HDGPWarning)
            table = tm.predict(frame, level=level, id_column=id_column, unknown_levels=unknown_levels)
    except (TableError, ValueError, TypeError, FloatingPointError) as exc:
        _fail(exc)
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, HDGPWarning)))
    for w in caught:
        if not issubclass(w.category, HDGPWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    for note in notes:
        click.echo(f"Warning: {note}", err=True)
    if kind == "parquet":
        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False)
        payload = buffer.getvalue()
    else:
        payload = table.to_csv(index=False, sep="\t" if kind == "tsv" else ",").encode("utf-8")
    try:
        atomic.write_bytes_atomic(out, payload)
    except OSError as exc:  # disk full, no permission
        _fail(exc)
    if as_json:
        info = {"output": str(out), "n_rows": len(table), "columns": list(table.columns), "warnings": notes}
        if tm.task == "classification":
            info["labels"] = {str(k): int(v) for k, v in table["label"].value_counts().sort_index().items()}
        else:
            info.update(mean={"min": float(table["mean"].min()), "max": float(table["mean"].max())},
                        std={"min": float(table["std"].min()), "max": float(table["std"].max())})
        click.echo(json.dumps(_jsonable(info), indent=2))
    elif not quiet:
        click.echo(f"Wrote {len(table)} prediction{'s' * (len(table) != 1)} to {out}")


def _missing_rows(tm, frame, drop_missing: bool):
    """``(frame, message)``: with ``drop_missing`` the rows with a missing feature cell left out; for an
    OAK model, rows with them kept; the message (or None) says which."""
    from ..io import TableError  # deferred: pandas readers
    from ..io.table import missing_note  # deferred: pandas

    note = missing_note(frame[[c for c in tm.schema.features if c in frame.columns]])
    if note is None:
        return frame, None
    if drop_missing:
        kept = frame.dropna(subset=[c for c in tm.schema.features if c in frame.columns])
        if kept.empty:
            raise TableError("Every row has a missing feature cell; nothing is left after --drop-missing.")
        return kept, f"{note}: left out (--drop-missing); predicting the other {len(kept)}"
    if getattr(tm.estimator, "_takes_missing", False):
        return frame, (f"{note}: predicted with each missing feature marginalised over its input measure (its "
                       "terms leave the mean and add their prior variance)")
    return frame, None  # the schema's check names every missing cell


# -------------------------------------------------------------------- explain
@click.command()
@click.argument("model_file", type=click.Path(dir_okay=False))
@click.option("--top", default=10, show_default=True, type=click.IntRange(1, 100),
              help="Sobol terms listed (and components plotted, at most 12).")
@click.option("-o", "--output", default="hdgp-report", show_default=True, type=click.Path(file_okay=False),
              help="Folder for report.html and its PNG figures.")
@click.option("--json", "as_json", is_flag=True, help="Print the report's numbers as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress messages.")
def explain(model_file, top, output, as_json, quiet):
    """Write an HTML report explaining a fitted model (works offline).

    The report shows the data summary, held-out accuracy and calibration
    (coverage of 50/90/95 % intervals, NLPD; for classifiers accuracy, log-loss,
    Brier score, ROC AUC, a reliability diagram and a confusion table), the
    model comparison of --model auto, the fitted hyper-parameters and, for OAK
    models, the Sobol ranking of features and interactions, the top components
    (regression) and the cumulative-Sobol curve.

    \b
    Example:
      hdgp explain diabetes.hdgp --top 10 -o report/   # then open report/report.html
    """
    from .report import report_data, write_report  # deferred: matplotlib

    tm = _load_table_model(model_file)
    _progress(quiet)(f"writing the report for {tm.metadata.get('model')} to {str(output).rstrip('/')}/")
    try:
        path = write_report(tm, output, top=top)
    except (OSError, ValueError) as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(_jsonable({"report": str(path), **report_data(tm, top)}), indent=2))
    elif not quiet:
        click.echo(f"Report: {path}")
