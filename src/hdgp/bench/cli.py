"""``hdgp bench``: run benchmark protocols and render their reports.

Attach to the main CLI with ``main.add_command(bench)``; also runnable alone as
``python -m hdgp.bench.cli``.
"""

from __future__ import annotations

import shlex
import sys
import warnings

import click

from .._click import ListOption, split_list
from .protocols import PROTOCOLS, get_protocol
from .report import default_report_dir, make_report
from .restore import restore_store
from .runner import _check_device, check_revision, describe_unregistered, run_protocol, usable_cores
from .status import status_table, task_status
from .store import StoreError, default_db_path

__all__ = ["bench"]


def _command_line() -> str:
    args = sys.argv[1:]
    if args and args[0] == "bench":
        return shlex.join(["hdgp", *args])
    return shlex.join(["hdgp", "bench", *args])


@click.group()
def bench():
    """Reproduce the papers' tables: run protocols, store results, render reports."""


@bench.command("list")
def list_protocols():
    """List the built-in protocols with their data sets and models."""
    for proto in PROTOCOLS.values():
        click.echo(f"{proto.name}: {proto.description}")
        click.echo(f"  data sets: {', '.join(d.name for d in proto.datasets)}")
        click.echo(f"  models:    {', '.join(m.label for m in proto.models)}")
        click.echo(f"  splits:    {', '.join(map(str, proto.splits))}; seeds: {', '.join(map(str, proto.seeds))}")


def _selection_options(fn):
    """The options that pick a protocol's tasks (shared by ``run`` and ``status``)."""
    for option in reversed([
        click.argument("protocol"),
        click.option("--datasets", cls=ListOption, help="Data sets (default: all of the protocol)."),
        click.option("--models", cls=ListOption, help="Model labels (default: all registered ones)."),
        click.option("--splits", cls=ListOption, help="Split indices (default: the protocol's)."),
        click.option("--seeds", cls=ListOption, help="Model seeds (default: the protocol's)."),
        click.option("--db", type=click.Path(dir_okay=False), default=None,
                     help="Results database (default: benchmarks/results/PROTOCOL.sqlite)."),
        click.option("--data-dir", type=click.Path(file_okay=False), default=None,
                     help="Benchmark data folder (default: $HDGP_DATA_DIR)."),
    ]):
        fn = option(fn)
    return fn


def _integers(splits, seeds) -> tuple[list[int], list[int]]:
    try:
        return [int(s) for s in split_list(splits)], [int(s) for s in split_list(seeds)]
    except ValueError as exc:
        raise click.BadParameter(f"splits and seeds must be integers ({exc}).") from None


def _echo_status(frame, dry_run: bool, workers: int) -> None:
    """Print the per-cell table of :func:`hdgp.bench.status.status_table` and what is left to do."""
    table = status_table(frame)
    columns = ["dataset", "model", "done", "failed", "missing"] + (["to_run", "estimate_s"] if dry_run else [])
    columns.append("s_per_task")
    shown = table[columns].rename(columns={"to_run": "to run", "estimate_s": "est. s", "s_per_task": "s/task"})
    click.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
    counts = frame["state"].value_counts()
    click.echo(f"{len(frame)} tasks: {counts.get('done', 0)} done, {counts.get('failed', 0)} failed, "
               f"{counts.get('missing', 0)} missing.")
    failed = frame[frame["state"] == "failed"]
    for error, rows in failed.groupby("error", sort=False):
        where = ", ".join(f"{r.model}/{r.dataset}/split {r.split}/seed {r.seed}" for r in rows.head(3).itertuples())
        more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
        click.echo(f"Failed ({len(rows)}): {error or 'no message'} [{where}{more}]")
    if dry_run:
        to_run = frame[frame["to_run"]]
        known = to_run["estimate"].notna()
        line = f"Would run {len(to_run)} task(s)"
        if known.any():
            total = float(to_run.loc[known, "estimate"].sum())
            line += (f"; from the stored times of the same cells about {total / 60:.1f} min of task time"
                     + (f" ({total / 60 / workers:.1f} min with {workers} workers)" if workers > 1 else "")
                     + (f" for {int(known.sum())} of them" if not known.all() else ""))
        if not known.all():
            line += f"; {int((~known).sum())} in cells with no finished task have no estimate"
        click.echo(line + ".")


@bench.command("run")
@_selection_options
@click.option("--workers", type=int, default=None,
              help="Local worker processes (default: cores // threads; 0 runs in this process).")
@click.option("--threads", type=int, default=1, show_default=True, help="Torch threads per task.")
@click.option("--dask-scheduler", metavar="ADDRESS", default=None,
              help="Run the tasks on this Dask distributed scheduler (e.g. tcp://host:8786).")
@click.option("--retry-failed", is_flag=True, help="Re-run tasks recorded as failed.")
@click.option("--rerun", is_flag=True,
              help="Run the selected tasks again even if done, replacing their records (after a code change).")
@click.option("--dry-run", is_flag=True, help="Show what would run and an estimate of its cost; run nothing.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.option("--device", default=None, metavar="DEVICE",
              help="Torch device for the models that take one, e.g. cuda (default: the CPU). Results record it.")
@click.option("--allow-dirty", is_flag=True,
              help="Run from a checkout with uncommitted changes to hdgp (its rows record '<commit>+dirty').")
def run_cmd(protocol, datasets, models, splits, seeds, db, data_dir, workers, threads, dask_scheduler,
            retry_failed, rerun, dry_run, no_progress, device, allow_dirty):
    """Run every missing task of PROTOCOL (a built-in name or a protocol .json file); with --rerun, every selected one.

    Refuses to run from a checkout whose hdgp sources have uncommitted changes unless --allow-dirty:
    every stored row records the commit it ran on, and a '+dirty' one cannot be rebuilt.
    """
    split_indices, seed_list = _integers(splits, seeds)
    if dry_run:
        try:
            if device is not None:
                _check_device(device, local=dask_scheduler is None)
            frame = task_status(protocol, datasets=split_list(datasets), models=split_list(models),
                                splits=split_indices, seeds=seed_list, db=db, data_dir=data_dir,
                                retry_failed=retry_failed, rerun=rerun)
        except (ValueError, FileNotFoundError, StoreError) as exc:
            raise click.ClickException(str(exc)) from None
        _echo_status(frame, dry_run=True, workers=workers if workers else max(1, usable_cores() // threads))
        return
    try:
        check_revision(allow_dirty)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        summary = run_protocol(protocol, datasets=split_list(datasets), models=split_list(models),
                               splits=split_indices, seeds=seed_list, workers=workers, threads=threads,
                               dask_scheduler=dask_scheduler, db=db, retry_failed=retry_failed, rerun=rerun,
                               data_dir=data_dir, progress=not no_progress, command=_command_line(),
                               warn_skipped=False, device=device)
    except (ValueError, FileNotFoundError, StoreError, ImportError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # e.g. a Dask scheduler that does not answer
        where = f" (Dask scheduler {dask_scheduler})" if dask_scheduler else ""
        raise click.ClickException(f"{type(exc).__name__}{where}: {exc}") from None
    except KeyboardInterrupt:
        click.echo("\nInterrupted. Finished tasks are saved; run the same command again to resume.", err=True)
        sys.exit(130)
    if summary.skipped_models:
        click.echo(f"Skipped (preset not registered): "
                   f"{describe_unregistered(get_protocol(protocol), summary.skipped_models)}", err=True)
    click.echo(f"{summary.total} tasks: {summary.skipped} already in {summary.db}, "
               f"{summary.done} done, {summary.failed} failed now.")
    if summary.failed:
        click.echo("Failed tasks are recorded with their error; re-run them with --retry-failed.", err=True)


@bench.command("status")
@_selection_options
def status_cmd(protocol, datasets, models, splits, seeds, db, data_dir):
    """Show which tasks of PROTOCOL are done, failed or missing, per data set and model, with their stored times."""
    split_indices, seed_list = _integers(splits, seeds)
    try:
        frame = task_status(protocol, datasets=split_list(datasets), models=split_list(models),
                            splits=split_indices, seeds=seed_list, db=db, data_dir=data_dir, stored_only=True)
    except (ValueError, FileNotFoundError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    if frame.empty:
        raise click.ClickException(f"No stored task of {protocol} matches the selection (and without the benchmark "
                                   "data folder, HDGP_DATA_DIR, the planned tasks are unknown).")
    _echo_status(frame, dry_run=False, workers=1)
    if frame.attrs.get("stored_only"):
        click.echo(f"{frame.attrs['stored_only']} Only the stored tasks are listed; the missing ones are not counted.")


@bench.command("report")
@click.argument("protocol")
@click.option("--db", type=click.Path(dir_okay=False), default=None,
              help="Results database (default: benchmarks/results/PROTOCOL.sqlite).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output folder (default: benchmarks/results/PROTOCOL/).")
@click.option("--reference-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with the papers' CSVs (default: $HDGP_REFERENCE_DIR or $HDGP_DATA_DIR/../reference).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG figures.")
def report_cmd(protocol, db, out_dir, reference_dir, no_plots):
    """Write Markdown, CSV and PNG reports of PROTOCOL's stored results."""
    try:
        with warnings.catch_warnings(record=True) as caught:  # shown as notes, not as source lines
            warnings.simplefilter("always")
            paths = make_report(protocol, db=db, out_dir=out_dir, reference_dir=reference_dir, plots=not no_plots,
                                command=_command_line())
    except (ValueError, FileNotFoundError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    for message in dict.fromkeys(str(w.message) for w in caught):
        click.echo(f"Note: {message}", err=True)
    click.echo(f"Wrote {paths['markdown']}, {paths['summary_csv']}, {paths['tasks_csv']}, {paths['runs_csv']}"
               + (f" and {len(paths['plots'])} figure(s)" if paths["plots"] else "") + ".")


@bench.command("restore")
@click.argument("protocol")
@click.option("--from", "folder", type=click.Path(file_okay=False), default=None,
              help="Report folder with tasks.csv (default: benchmarks/results/PROTOCOL/).")
@click.option("--db", type=click.Path(dir_okay=False), default=None,
              help="Results database (default: benchmarks/results/PROTOCOL.sqlite).")
def restore_cmd(protocol, folder, db):
    """Rebuild PROTOCOL's results database from its committed report folder.

    A fresh clone has the committed tables but not the (ignored) database; after
    `restore`, `bench run` skips the tasks already there and `bench report` renders
    old and new results together. Tasks already in the database are kept.
    """
    try:
        name = get_protocol(protocol).name
        counts = restore_store(name, folder if folder is not None else default_report_dir(name),
                               db if db is not None else default_db_path(name))
    except (ValueError, FileNotFoundError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Restored {counts['tasks']} tasks ({counts['kept']} already in the database) "
               f"and {counts['runs']} run command(s).")


if __name__ == "__main__":
    bench()
