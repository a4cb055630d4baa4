"""Expand a protocol into tasks and run the missing ones (process pool, Dask, or in-process).

Every finished task is written to the :class:`~hdgp.bench.store.ResultStore` by
this (the main) process as soon as it arrives. Tasks already ``done`` in the
store are skipped; ``failed`` ones are skipped too unless ``retry_failed``, and
``rerun`` runs every selected task again (after a change to the code).
"""

from __future__ import annotations

import difflib
import multiprocessing
import os
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from ..data import DATA_DIR_ENV, find_data_dir, list_datasets, why_data_dir_missing
from ..exceptions import HDGPWarning
from .datasets import n_splits
from .protocols import Protocol, get_protocol
from .peers import PEERS
from .store import ResultStore, default_db_path
from .task import (TaskSpec, build_model, failed_record, library_versions, machine_description, restored_threads, run_task,
                   set_threads)

__all__ = ["check_revision", "plan_tasks", "run_protocol", "RunSummary", "tasks_to_run", "usable_cores"]

_WORKER_DIED = "worker process died while running this task (killed, crashed or out of memory)"


@dataclass
class RunSummary:
    """What a call to :func:`run_protocol` did."""

    total: int
    skipped: int
    done: int = 0
    failed: int = 0
    db: str = ""
    skipped_models: list = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.done + self.failed


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS / Windows
        return os.cpu_count() or 1


def _select(kind: str, requested, valid: list[str]) -> list[str]:
    """The ``valid`` names ``requested`` (case-insensitive, repeats dropped); all of them if none."""
    if not requested:
        return list(valid)
    lower = {v.lower(): v for v in valid}
    unknown = [r for r in requested if r.lower() not in lower]
    if unknown:
        raise ValueError(f"Unknown {kind} {', '.join(map(repr, unknown))}. Valid {kind}s: {', '.join(valid)}.")
    return list(dict.fromkeys(lower[r.lower()] for r in requested))


def _unique_ints(kind: str, requested, default, minimum: int | None = None) -> list[int]:
    """``requested`` (or ``default`` when empty) as integers without repeats, in order."""
    values = list(dict.fromkeys(int(v) for v in (requested if requested else default)))
    bad = [v for v in values if minimum is not None and v < minimum]
    if bad:
        raise ValueError(f"{kind} must be integers >= {minimum}, got {bad}.")
    return values


def describe_unregistered(proto: Protocol, labels: list[str], registered=None) -> str:
    """``'label' (preset 'X'; did you mean 'Y'?)`` for each model whose preset is not registered
    (``registered``: the registered preset names, default all of them)."""
    if registered is None:
        from hdgp.presets import presets  # deferred: the presets import every estimator (torch, gpytorch)

        registered = list(presets())
    by_lower = {name.lower(): name for name in registered}
    parts = []
    for lab in labels:
        preset = proto.model(lab).preset
        close = difflib.get_close_matches(preset.lower(), list(by_lower), n=1, cutoff=0.6)
        hint = f"; did you mean {by_lower[close[0]]!r}?" if close else ""
        parts.append(f"{lab!r} (preset {preset!r}{hint})")
    return ", ".join(parts)


def _no_tasks_error(proto: Protocol, ds_names, labels, split_list, available: dict) -> ValueError:
    """Why models ``labels`` plan no task on ``ds_names``: splits out of range, or the models do not run there."""
    where = (f"No task of protocol {proto.name!r} for model(s) {', '.join(map(repr, labels))} on data set(s) "
             f"{', '.join(map(repr, ds_names))}")
    if not any(s < available[n] for n in ds_names for s in split_list):
        ranges = ", ".join(f"{n}: 0-{available[n] - 1}" for n in ds_names)
        return ValueError(f"{where}: none of the splits {split_list} exists (valid splits: {ranges}).")
    runs = "; ".join(f"{lab!r} runs on {list(m.datasets) if m.datasets is not None else 'every ' + m.task + ' set'}"
                     for lab in labels for m in [proto.model(lab)])
    kinds = ", ".join(f"{n!r} is a {proto.dataset(n).task} set" for n in ds_names)
    return ValueError(f"{where}: {runs}; {kinds}.")


def _check_selection(proto: Protocol, tasks, ds_names, labels, split_list, available, datasets, models) -> None:
    """Raise if the plan is empty, or if an explicitly requested data set or model got no task."""
    if not tasks:
        raise _no_tasks_error(proto, ds_names, labels, split_list, available)
    idle_models = [lab for lab in labels if lab not in {t.model.label for t in tasks}] if models else []
    if idle_models:
        raise _no_tasks_error(proto, ds_names, idle_models, split_list, available)
    idle_sets = [n for n in ds_names if n not in {t.dataset.name for t in tasks}] if datasets else []
    if idle_sets:
        raise _no_tasks_error(proto, idle_sets, labels, split_list, available)


def _needs_data_dir(protocol: Protocol, names: list[str]) -> list[str]:
    free = set(list_datasets(data_dir=os.devnull))  # synthetic and bundled sets need no folder
    return [n for n in names if protocol.dataset(n).source != "sklearn" and (
            protocol.dataset(n).source != "registry" or (protocol.dataset(n).loader_name or n) not in free)]


def check_revision(allow_dirty: bool = False) -> str | None:
    """The hdgp revision the tasks will record (``hdgp_git``), checked before a run.

    Raises
    ------
    ValueError
        The hdgp sources have uncommitted changes (``<commit>+dirty``) and ``allow_dirty`` is
        False: such rows cannot be traced to code anyone can check out.

    Warns
    -----
    HDGPWarning
        The revision is unknown (not a git checkout and ``$HDGP_GIT_REVISION`` unset) or dirty
        with ``allow_dirty``.
    """
    revision = library_versions()["hdgp_git"]
    if revision is None:
        warnings.warn("The hdgp revision is unknown (not a git checkout; set HDGP_GIT_REVISION to the commit of "
                      "this copy): the rows will record hdgp_git = None.", HDGPWarning, stacklevel=2)
    elif revision.endswith("+dirty"):
        if not allow_dirty:
            raise ValueError(f"hdgp has uncommitted changes (revision {revision}): commit them first, so every "
                             "row records a commit that can be checked out, or pass --allow-dirty.")
        warnings.warn(f"Running from uncommitted code: the rows record hdgp_git = {revision}.", HDGPWarning,
                      stacklevel=2)
    return revision


def plan_tasks(protocol, datasets=None, models=None, splits=None, seeds=None, data_dir=None, threads: int = 1,
               warn_skipped: bool = True, device: str | None = None) -> tuple[list[TaskSpec], list[str]]:
    """All tasks of ``protocol`` restricted to the given names.

    Parameters
    ----------
    protocol : str, path or Protocol
    datasets, models : list of str, optional
        Subsets of the protocol's data-set names and model labels (default: all).
    splits, seeds : list of int, optional
        Subsets of split indices / seeds (default: the protocol's; repeats are
        dropped). A data set with fewer splits runs those it has.
    data_dir : path, optional
        Folder holding ``uci/`` and ``sigp/``; default ``$HDGP_DATA_DIR``.
    threads : int
        Torch threads per task.
    warn_skipped : bool
        Warn about protocol models whose preset is not registered (they are skipped).
    device : str, optional
        Torch device (e.g. ``"cuda"``) for the models whose estimator takes a ``device``;
        the others, and all of them when None, run on the CPU.

    Returns
    -------
    tasks : list of TaskSpec
    skipped_models : list of str
        Protocol models left out because their preset is not registered yet.

    Raises
    ------
    ValueError
        Unknown protocol, data set or model names (the message lists valid ones);
        requested models, or all models, with unregistered presets; model ``params``
        naming a parameter the preset's estimator lacks; or a selection
        that plans no task, or no task for a requested data set or model (splits out
        of range, model not running on those data sets).
    FileNotFoundError
        The data folder is needed but missing (the message names ``HDGP_DATA_DIR``).
    """
    from hdgp.presets import presets  # deferred: the presets import every estimator (torch, gpytorch)

    proto = get_protocol(protocol)
    ds_names = _select("data set", datasets, [d.name for d in proto.datasets])
    labels = _select("model", models, [m.label for m in proto.models])
    registered = list(presets())
    unknown_peers = [lab for lab in labels if proto.model(lab).source == "peer" and proto.model(lab).preset not in PEERS]
    if unknown_peers:
        raise ValueError(f"Model(s) {', '.join(map(repr, unknown_peers))} of protocol {proto.name!r} name unknown peer "
                         f"estimators; registered peers: {', '.join(PEERS)}.")
    missing = [lab for lab in labels if proto.model(lab).source == "preset"
               and proto.model(lab).preset.lower() not in {r.lower() for r in registered}]
    if missing and (models or len(missing) == len(labels)):
        raise ValueError(
            f"Model(s) {describe_unregistered(proto, missing, registered)} of protocol {proto.name!r} use presets "
            f"that are not registered in this installation. Registered presets: {', '.join(registered)}."
        )
    if missing and warn_skipped:
        warnings.warn(f"Skipping model(s) whose preset is not registered yet: "
                      f"{describe_unregistered(proto, missing, registered)}.", HDGPWarning, stacklevel=2)
    labels = [lab for lab in labels if lab not in missing]
    for lab in labels:  # a misspelt parameter name fails here, not once per task in the workers
        try:
            build_model(proto.model(lab))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Model {lab!r} of protocol {proto.name!r}: {exc}") from None
    need_dir = _needs_data_dir(proto, ds_names)
    if need_dir:
        root = find_data_dir(data_dir)
        if root is None:
            raise FileNotFoundError(
                f"Benchmark data folder not found ({why_data_dir_missing(data_dir)}); data set(s) {', '.join(need_dir)} need it. Set "
                f"{DATA_DIR_ENV} to the folder holding 'uci/' and 'sigp/' (e.g. `export {DATA_DIR_ENV}=../shared/data`)"
                " or pass --data-dir."
            )
        if not any((root / sub).is_dir() for sub in ("uci", "sigp")):
            inside = " (it is itself one of them: use its parent)" if root.name in ("uci", "sigp") else ""
            raise FileNotFoundError(
                f"The benchmark data folder {str(root)!r} holds neither 'uci/' nor 'sigp/'{inside}; data set(s) "
                f"{', '.join(need_dir)} need it. Point {DATA_DIR_ENV} or --data-dir at the folder that contains them."
            )
        data_dir = str(root.resolve())
    split_list = _unique_ints("Splits", splits, proto.splits, minimum=0)
    seed_list = _unique_ints("Seeds", seeds, proto.seeds)
    available = {name: n_splits(proto.dataset(name), data_dir) for name in ds_names}
    tasks = []
    for name in ds_names:
        spec = proto.dataset(name)
        for lab in labels:
            mspec = proto.model(lab)
            if not mspec.runs_on(spec):
                continue
            for split in split_list:
                if split >= available[name]:
                    continue
                for seed in seed_list:
                    tasks.append(TaskSpec(proto.name, spec, mspec, split, seed, proto.normalisation,
                                          dict(proto.estimator_params), data_dir, threads,
                                          tuple(proto.extras), device))
    _check_selection(proto, tasks, ds_names, labels, split_list, available, datasets, models)
    beyond = {name: [s for s in split_list if s >= available[name]] for name in ds_names}
    if splits and any(beyond.values()):  # asked for by number: say which did not run
        warnings.warn("Skipped split(s) beyond a data set's last: " + "; ".join(
            f"{name} has {available[name]} (0-{available[name] - 1}), not {', '.join(map(str, out))}"
            for name, out in beyond.items() if out) + ".", HDGPWarning, stacklevel=2)
    return tasks, missing


def tasks_to_run(tasks: list[TaskSpec], status: dict, retry_failed: bool = False, rerun: bool = False) -> list:
    """The ``tasks`` a run executes, given the stored ``status`` of each key ``(dataset, model, split, seed)``:
    the missing ones, the failed ones too with ``retry_failed``, all of them with ``rerun``."""
    keep = set() if rerun else {"done"} if retry_failed else {"done", "failed"}
    return [t for t in tasks if status.get(t.key[1:]) not in keep]


def _progress(total: int, desc: str, enabled: bool):
    return tqdm(total=total, desc=desc, unit="task", disable=not enabled, dynamic_ncols=True,
                mininterval=0.5 if os.isatty(2) else 10.0)


def _pool_context():
    """Fork-server processes on POSIX (workers fork from a server that imported hdgp once), else spawn.

    Never plain fork: the parent may hold torch/OpenMP thread pools that a forked
    child would inherit in a broken state.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["hdgp.bench.task", "hdgp.estimators"])
        return ctx
    return multiprocessing.get_context("spawn")


def _run_local(tasks, workers, threads, on_result, fn=run_task):
    """Run ``tasks`` in a process pool; a pool broken by a dying worker is rebuilt.

    Tasks in flight when the pool broke are re-run one at a time, so a task that
    kills its worker on its own is recorded as failed without blaming the others.
    """
    ctx = _pool_context()
    queue = list(tasks)
    suspects: list = []
    while queue or suspects:
        isolate = bool(suspects)
        source = suspects if isolate else queue
        limit = 1 if isolate else workers
        pool = ProcessPoolExecutor(max_workers=limit, mp_context=ctx, initializer=set_threads, initargs=(threads,))
        in_flight, crashed, interrupted = {}, [], False
        try:
            while (source or in_flight) and not crashed:
                while len(in_flight) < limit and source:
                    task = source.pop(0)
                    in_flight[pool.submit(fn, task)] = task
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = in_flight.pop(fut)
                    try:
                        record = fut.result()
                    except BrokenProcessPool:
                        crashed.append(task)
                        continue
                    on_result(record)
            crashed.extend(in_flight.values())
        except BaseException:  # Ctrl-C or a store error: leave at once, in-flight tasks are lost
            interrupted = True
            raise
        finally:
            pool.shutdown(wait=not (crashed or interrupted), cancel_futures=True)
        if isolate or limit == 1:  # one task in flight: it killed its worker
            for task in crashed:
                on_result(failed_record(task, _WORKER_DIED))
        else:
            suspects.extend(crashed)


def _run_dask(tasks, address, on_result):
    try:  # deferred: Dask's distributed is an optional extra (hdgp[bench]), slow to import
        from distributed import Client, as_completed
    except ImportError as exc:
        raise ImportError(
            "--dask-scheduler needs Dask's distributed scheduler: pip install 'hdgp[bench]' "
            "(or `pip install \"dask[distributed]\"`)."
        ) from exc
    with Client(address) as client:
        futures = {client.submit(run_task, t, pure=False,
                                 key=f"hdgp-{t.protocol}-{t.dataset.name}-{t.model.label}-{t.split}-{t.seed}-"
                                     f"{time.time_ns()}"): t for t in tasks}
        for fut in as_completed(futures):
            task = futures[fut]
            try:
                record = fut.result()
            except Exception as exc:  # noqa: BLE001 - worker lost, cancelled: still a result
                record = failed_record(task, f"Dask task failed: {type(exc).__name__}: {exc}")
            on_result(record)


def _run_inline(tasks, threads, on_result):
    """Run ``tasks`` in this process; the caller's thread settings come back afterwards."""
    with restored_threads():
        for task in tasks:
            on_result(run_task(task))


def _check_device(device, local: bool = True) -> None:
    """Fail before any task for a device no task could use. ``local``: this machine runs the tasks
    (with a Dask scheduler the workers' GPUs count, so only the spelling is checked here)."""
    import torch  # deferred: slow to import, and `hdgp bench --help` loads this module

    from hdgp.estimators._base import resolve_device  # deferred: the estimators import torch and gpytorch

    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        resolved = None
    if resolved is None or resolved.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}.")
    if not local:
        return
    resolve_device(device)  # "cuda" without a GPU
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r}, but this machine has {torch.cuda.device_count()} CUDA GPU(s).")


def run_protocol(protocol, *, datasets=None, models=None, splits=None, seeds=None, workers=None, threads=1,
                 dask_scheduler=None, db=None, retry_failed=False, rerun=False, data_dir=None, progress=True,
                 command=None, warn_skipped=True, device=None) -> RunSummary:
    """Run every task of ``protocol`` that the results store does not hold yet.

    Parameters
    ----------
    protocol : str, path or Protocol
    datasets, models, splits, seeds
        Restrict the protocol (see :func:`plan_tasks`).
    workers : int, optional
        Local worker processes (default ``cores // threads``); ``0`` runs the
        tasks in this process. Ignored with ``dask_scheduler``.
    threads : int, default=1
        Torch threads per task. ``workers * threads`` must not exceed the usable cores.
    dask_scheduler : str, optional
        Address of a running Dask distributed scheduler (``tcp://host:8786``) or a
        ``distributed.LocalCluster``; the tasks then run on its workers, which must
        have hdgp installed and see the data folder at the same path.
    db : path, optional
        Results database (default ``benchmarks/results/<protocol>.sqlite``).
    retry_failed : bool, default=False
        Re-run tasks recorded as failed.
    rerun : bool, default=False
        Run every selected task, done or failed, and replace its record: how stored
        results are brought up to date after a change to the code (select the rows
        with ``datasets``, ``models`` and ``splits``).
    data_dir : path, optional
        Benchmark data folder (default ``$HDGP_DATA_DIR``).
    progress : bool, default=True
        Show a progress bar (done / failed / remaining, ETA) on stderr.
    command : str, optional
        The command line that started the run, logged in the store for report headers.
    warn_skipped : bool, default=True
        Warn about protocol models whose preset is not registered (listed in the summary either way).
    device : str, optional
        Torch device for the models that take one (see :func:`plan_tasks`); each result
        records where it ran (``device`` column), and reports mark GPU timings.

    Returns
    -------
    RunSummary
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}.")
    cores = usable_cores()
    if workers is None:
        workers = max(1, cores // threads)
    if workers < 0:
        raise ValueError(f"workers must be >= 0 (0 runs in this process), got {workers}.")
    if dask_scheduler is None and max(workers, 1) * threads > cores:
        raise ValueError(
            f"workers x threads = {max(workers, 1)} x {threads} exceeds the {cores} usable cores; this "
            "oversubscribes the CPU and distorts timings. Lower --workers or --threads."
        )
    if device is not None:
        _check_device(device, local=dask_scheduler is None)
    proto = get_protocol(protocol)
    tasks, skipped_models = plan_tasks(proto, datasets, models, splits, seeds, data_dir, threads, warn_skipped,
                                       device)
    db_path = Path(db) if db is not None else default_db_path(proto.name)
    with ResultStore(db_path, writer=True) as store:
        pending = tasks_to_run(tasks, store.status(proto.name), retry_failed, rerun)
        summary = RunSummary(total=len(tasks), skipped=len(tasks) - len(pending), db=str(db_path),
                             skipped_models=skipped_models)
        started = time.time()
        run_id = store.log_run(proto.name, command, started, None, len(tasks), summary.skipped, 0, 0,
                               library_versions(), machine_description())
        if not pending:
            store.log_run(proto.name, command, started, time.time(), len(tasks), summary.skipped, 0, 0,
                          library_versions(), machine_description(), run_id=run_id)
            return summary
        if dask_scheduler is None and workers > len(pending):
            workers = len(pending)
        bar = _progress(len(pending), proto.name, progress)

        def on_result(record: dict) -> None:
            record.setdefault("machine", machine_description())
            # the run's record counts its tasks as they arrive, so a run that is killed still lists them
            store.write(record, run_id=run_id)
            if record.get("status") == "done":
                summary.done += 1
            else:
                summary.failed += 1
            bar.set_postfix(done=summary.done, failed=summary.failed,
                            remaining=len(pending) - summary.ran, refresh=False)
            bar.update(1)

        try:
            if dask_scheduler is not None:
                _run_dask(pending, dask_scheduler, on_result)
            elif workers == 0:
                _run_inline(pending, threads, on_result)
            else:
                _run_local(pending, workers, threads, on_result)
        finally:
            bar.close()
            store.log_run(proto.name, command, started, time.time(), len(tasks), summary.skipped, summary.done,
                          summary.failed, library_versions(), machine_description(), run_id=run_id)
    return summary
