"""One benchmark task: fit a preset on one split, predict, score, and describe the run.

:func:`run_task` is what local worker processes and Dask workers execute. It never
raises for a failing model: the error and traceback come back in the result so
the run goes on and the store records the failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import resource
import subprocess
import threading
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, log_loss, roc_auc_score
from threadpoolctl import threadpool_limits

from .. import metrics
from .datasets import load_split
from .peers import make_peer
from .protocols import DatasetSpec, ModelSpec

__all__ = ["EXTRAS", "TaskSpec", "build_model", "expected_calibration_error", "run_task", "failed_record", "hyperparameter_summary", "library_versions",
           "machine_description", "restored_threads", "set_threads"]


def _truncation_curve(est, data) -> dict | None:
    """OAK Fig. 5: test RMSE (regression) or AUC, accuracy and log-loss (classification) and the
    cumulative Sobol share as ranked terms are added."""
    if not hasattr(est, "truncation_curve"):
        return None
    curve = est.truncation_curve(data.X_test, data.y_test, max_terms=30)
    return {k: np.asarray(v, float).tolist() for k, v in curve.items()}


#: Extra per-task measurements a protocol can ask for: ``name -> fn(fitted_estimator, data) -> dict | None``.
EXTRAS = {"truncation-curve": _truncation_curve}


@dataclass(frozen=True)
class TaskSpec:
    """Everything a worker needs to run one (data set, model, split, seed) task."""

    protocol: str
    dataset: DatasetSpec
    model: ModelSpec
    split: int
    seed: int
    normalisation: str
    estimator_params: dict = field(default_factory=dict)
    data_dir: str | None = None
    threads: int = 1
    extras: tuple = ()
    device: str | None = None

    @property
    def key(self) -> tuple:
        """Primary key in the results store."""
        return (self.protocol, self.dataset.name, self.model.label, self.split, self.seed)

    def to_dict(self) -> dict:
        return asdict(self)


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def set_threads(threads: int) -> None:
    """Limit torch, BLAS and OpenMP to ``threads`` threads in this process.

    The environment variables reach libraries loaded later. Those already loaded are limited
    through threadpoolctl: a fork-server worker inherits NumPy, SciPy, scikit-learn and torch
    from its server, whose BLAS and OpenMP pools were sized to every core before any variable
    was set (ten workers on a 16-core machine ran 16 BLAS threads each).
    """
    for var in _THREAD_VARIABLES:
        os.environ[var] = str(threads)
    import torch  # deferred: slow to import, and `hdgp bench --help` loads this module

    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)


@contextlib.contextmanager
def restored_threads():
    """On exit, put back what :func:`set_threads` changes: torch's threads, the BLAS and OpenMP
    pools and the environment variables (tasks run in the caller's own process)."""
    import torch  # deferred: slow to import, and `hdgp bench --help` loads this module

    saved_env = {var: os.environ.get(var) for var in _THREAD_VARIABLES}
    saved_torch = torch.get_num_threads()
    try:
        with threadpool_limits(limits=None):  # limits nothing; restores the pools' sizes on exit
            yield
    finally:
        torch.set_num_threads(saved_torch)
        for var, value in saved_env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def _git_revision() -> str | None:
    """``$HDGP_GIT_REVISION`` when set (a copy of the tree sent to a machine without its ``.git``),
    else ``<commit>[+dirty]`` of the hdgp checkout this process imported, or None outside one."""
    if "HDGP_GIT_REVISION" in os.environ:  # read on every call: not frozen by the cache below
        return os.environ["HDGP_GIT_REVISION"] or None
    return _checkout_revision()


@functools.lru_cache(maxsize=1)
def _checkout_revision() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", str(here.parent)],
                               cwd=here, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("+dirty" if dirty else "") if rev else None


def library_versions() -> dict:
    """Versions of Python and the libraries a result depends on (and hdgp's git commit when known)."""
    out = {"python": platform.python_version(), "hdgp_git": _git_revision()}
    for pkg in ("hdgp", "torch", "gpytorch", "numpy", "scipy", "scikit-learn"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def machine_description() -> dict:
    """Host, platform, processor and usable cores of this process."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return {"host": platform.node(), "platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor() or None, "cores": cores}


class _PeakRSS:
    """Sample this process's resident memory every ``interval`` s (Linux ``/proc``; else ``ru_maxrss``)."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def _rss(self) -> int:
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * self._page
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self._rss())

    def __enter__(self):
        self.start = self.peak = self._rss()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


def _regression_metrics(est, X, y) -> dict:
    try:
        mean, std = est.predict(X, return_std=True)
    except TypeError:
        mean, std = est.predict(X), None
    out = {"rmse": metrics.rmse(y, mean), "mse": metrics.mse(y, mean)}
    if std is not None:
        std = np.asarray(std, float)
        if np.all(std > 0):
            out["nlpd"] = metrics.nlpd(y, mean, std)
            out["coverage95"] = metrics.interval_coverage(y, mean, std)
        else:  # recorded with the task's warnings, so the missing NLPD is explained in the store
            warnings.warn(f"{int(np.sum(~(std > 0)))} of {std.size} predictive standard deviations are not "
                          "positive: NLPD and coverage95 not computed.", RuntimeWarning)
    return out


def _classification_metrics(est, X, y, positive) -> dict:
    pred = est.predict(X)
    out = {"accuracy": float(accuracy_score(y, pred))}
    classes = list(getattr(est, "classes_", np.unique(y)))
    pos = positive if positive is not None else classes[-1]
    if len(classes) == 2:
        out["f1"] = float(f1_score(y, pred, pos_label=pos))
    if hasattr(est, "predict_proba"):
        proba = np.clip(est.predict_proba(X), 1e-15, 1.0)
        out["log_loss"] = float(log_loss(y, proba, labels=classes))
        out["ece"] = expected_calibration_error(y, proba, classes)
        if len(classes) == 2 and len(np.unique(y)) == 2:
            out["auc"] = float(roc_auc_score(y == pos, proba[:, classes.index(pos)]))
        elif len(classes) > 2 and set(np.unique(y)) == set(classes):  # one-vs-rest, macro average
            out["auc"] = float(roc_auc_score(y, proba / proba.sum(1, keepdims=True), multi_class="ovr",
                                             labels=classes))
    return out


def expected_calibration_error(y, proba, classes, n_bins: int = 10) -> float:
    r"""Expected calibration error of the top class (Guo et al. 2017, eq. 3).

    .. math:: \mathrm{ECE} = \sum_{b=1}^{B} \frac{|B_b|}{n} \left| \mathrm{acc}(B_b) - \mathrm{conf}(B_b) \right|

    where the test points are binned by their top probability (confidence) into ``n_bins``
    equal-width bins of [0, 1], acc is the fraction of a bin whose top class is right and conf
    its mean top probability.
    """
    proba = np.asarray(proba, float)
    confidence = proba.max(1)
    correct = (np.asarray(classes)[proba.argmax(1)] == np.asarray(y)).astype(float)
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in np.unique(bins):
        inside = bins == b
        total += inside.sum() * abs(correct[inside].mean() - confidence[inside].mean())
    return float(total / len(confidence))


def _scalar(value):
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    return None


def _summarise_array(a, max_list: int = 8) -> object:
    a = np.asarray(a, float).ravel()
    if a.size == 1:
        return float(a[0])
    if a.size <= max_list:
        return [float(v) for v in a]
    return {"size": int(a.size), "min": float(a.min()), "median": float(np.median(a)), "max": float(a.max())}


def hyperparameter_summary(est) -> dict:
    """Fitted scalars of ``est`` (attributes ending in ``_``) and its torch model's constrained parameters."""
    out = {}
    for name, value in vars(est).items():
        if name.endswith("_") and not name.startswith("_"):
            v = _scalar(value)
            if v is not None:
                out[name] = v
            elif isinstance(value, np.ndarray) and value.dtype.kind in "fiub" and 0 < value.size <= 32:
                out[name] = _summarise_array(value, max_list=32)  # e.g. OAK's Sobol share per order
    fit_result = getattr(est, "fit_result_", None)
    if fit_result is not None:
        for attr in ("loss", "n_evaluations", "converged"):
            if hasattr(fit_result, attr):
                out[f"fit_{attr}"] = _scalar(getattr(fit_result, attr))
    model = getattr(est, "model_", None)
    if model is not None and hasattr(model, "named_parameters_and_constraints"):
        for name, param, constraint in model.named_parameters_and_constraints():
            value = param.detach()
            if constraint is not None:
                value = constraint.transform(value)
                name = name.replace("raw_", "")
            out[name] = _summarise_array(value.cpu().numpy())
    return out


def build_model(model: ModelSpec):
    """A new estimator for ``model``: its hdgp preset, or its peer (``source="peer"``), with its params."""
    if model.source == "peer":
        return make_peer(model.preset, **model.params)
    from hdgp.presets import preset  # deferred: the presets import every estimator (torch, gpytorch)

    return preset(model.preset, **model.params)


def _build_estimator(task: TaskSpec):
    """The task's preset with the protocol's estimator parameters, the task's seed and, where the
    estimator takes one, the task's torch device (estimators without a ``device`` run on the CPU)."""
    est = build_model(task.model)
    accepted = est.get_params(deep=False)
    extra = {k: v for k, v in task.estimator_params.items() if k in accepted and k not in task.model.params}
    if "random_state" in accepted and "random_state" not in task.model.params:
        extra["random_state"] = task.seed
    if task.device is not None and "device" in accepted and "device" not in task.model.params:
        extra["device"] = task.device
    return est.set_params(**extra) if extra else est


def _device_of(est) -> str:
    """Where ``est`` computed: ``"cpu"``, or the torch device and its name (``"cuda:0 (NVIDIA H200)"``)."""
    device = est.get_params(deep=False).get("device")
    if device is None:
        return "cpu"
    import torch  # deferred: slow to import, and `hdgp bench --help` loads this module

    device = torch.device(device)
    if device.type == "cpu":  # "cpu:0" too
        return "cpu"
    if device.type != "cuda":
        return str(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def failed_record(task: TaskSpec, error: str) -> dict:
    """A result record for a task that produced none (its worker died, it was cancelled)."""
    now = time.time()
    return {"protocol": task.protocol, "dataset": task.dataset.name, "model": task.model.label,
            "split": task.split, "seed": task.seed, "preset": task.model.preset, "threads": task.threads,
            "status": "failed", "error": error, "metrics": {}, "started_at": now, "finished_at": now,
            "versions": library_versions()}


def run_task(task: TaskSpec) -> dict:
    """Run one task and return its result record (never raises for model errors).

    Returns
    -------
    dict with ``status`` ("done" or "failed"), ``metrics``, ``fit_seconds``,
    ``predict_seconds``, ``peak_rss_mb``, ``hyperparameters``, ``warnings``,
    ``extras``, ``versions``, ``machine``, ``threads``, ``device``, ``error``, ``traceback``,
    ``started_at``, ``finished_at`` and the task's key fields.
    """
    record = {"protocol": task.protocol, "dataset": task.dataset.name, "model": task.model.label,
              "split": task.split, "seed": task.seed, "preset": task.model.preset,
              "threads": task.threads, "started_at": time.time(), "metrics": {}, "hyperparameters": {},
              "warnings": [], "fit_seconds": None, "predict_seconds": None, "peak_rss_mb": None,
              "error": None, "traceback": None, "versions": library_versions(), "machine": machine_description()}
    try:
        set_threads(task.threads)
        data = load_split(task.dataset, task.split, task.normalisation, task.data_dir)
        est = _build_estimator(task)
        record["device"] = _device_of(est)
        record["n_train"], record["n_test"], record["n_features"] = (
            int(data.X_train.shape[0]), int(data.X_test.shape[0]), int(data.X_train.shape[1]))
        with _PeakRSS() as mem, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            est.fit(data.X_train, data.y_train)
            t1 = time.perf_counter()
            if task.dataset.task == "classification":
                scores = _classification_metrics(est, data.X_test, data.y_test, task.dataset.positive_label)
            else:
                scores = _regression_metrics(est, data.X_test, data.y_test)
            t2 = time.perf_counter()
        record.update(metrics=scores, fit_seconds=t1 - t0, predict_seconds=t2 - t1,
                      peak_rss_mb=mem.peak / 2**20, rss_increase_mb=(mem.peak - mem.start) / 2**20,
                      hyperparameters=hyperparameter_summary(est),
                      warnings=sorted({f"{w.category.__name__}: {w.message}" for w in caught})[:10],
                      status="done")
        extras = {}
        for name in task.extras:
            if name not in EXTRAS:
                raise ValueError(f"Unknown extra measurement {name!r}; valid: {', '.join(EXTRAS)}.")
            value = EXTRAS[name](est, data)
            if value is not None:
                extras[name] = value
        record["extras"] = extras
        bad = [k for k, v in scores.items() if not np.isfinite(v)]
        if bad:
            record.update(status="failed", error=f"non-finite metric(s) {bad}: {scores}")
    except Exception as exc:  # noqa: BLE001 - any model error (MemoryError included) is a result
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    record["finished_at"] = time.time()
    return record
