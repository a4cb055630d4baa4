"""Benchmark harness: protocols as data, a resumable runner, a SQLite results store, reports.

>>> from hdgp.bench import get_protocol
>>> get_protocol("rpa-gp-table1").metrics
('rmse', 'nlpd')
"""

from .protocols import PROTOCOLS, DatasetSpec, ModelSpec, Protocol, ReferenceSpec, get_protocol, protocol_names
from .reference import REFERENCE_DIR_ENV, find_reference_dir, load_reference
from .report import make_report
from .runner import RunSummary, plan_tasks, run_protocol
from .store import ResultStore, StoreError

__all__ = [
    "PROTOCOLS",
    "REFERENCE_DIR_ENV",
    "DatasetSpec",
    "ModelSpec",
    "Protocol",
    "ReferenceSpec",
    "ResultStore",
    "RunSummary",
    "StoreError",
    "find_reference_dir",
    "get_protocol",
    "load_reference",
    "make_report",
    "plan_tasks",
    "protocol_names",
    "run_protocol",
]
