r"""Up-front estimate of a GP fit's cost, and the warning when it is far beyond its peers.

One objective evaluation (value and gradient) of an exact GP on n rows costs two dense
factorisations of the n × n kernel matrix (Cholesky and the inverse for the gradient,
:math:`\tfrac23 n^3` flops) plus the kernel and its gradient over the :math:`n^2/2` row
pairs; the sparse (SGPR) engine with m inducing points replaces them by
:math:`n m^2 + m^3/3` and :math:`n m` pairs. The kernel term per pair is, in
Cholesky-flop equivalents (``c`` below, measured against the Cholesky rate in the same
process; the profiles of ``benchmarks/results/profiles/``):

- RBF-ARD, D inputs: :math:`c_{SE} D`;
- OAK / additive, D inputs, interaction order R: :math:`(c_{base} + c_{order} R) D`
  (base constrained matrices, and the order sum of Newton–Girard, eq. 11 of Duvenaud et al.
  2011, forward and backward);
- projected additive, J projections: :math:`c_{proj} J`.

Seconds = evaluations × flops / rate, the rate from a tiny timed Cholesky
(:func:`flop_rate`); evaluations are the typical L-BFGS counts of each family, times the
starts. The estimate is a forecast (within a factor of ~2 on an idle machine), good enough
to say "minutes, not seconds" and which knob helps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["FitCost", "estimate_fit", "cost_warning", "flop_rate", "RELATIVE_LIMIT", "ABSOLUTE_LIMIT_S",
           "RELATIVE_FLOOR_S"]

#: A fit estimated at more than this many times an RBF-ARD fit of the same table is warned about ...
RELATIVE_LIMIT = 10.0
#: ... when it is also estimated at more than this many seconds (small tables stay quiet).
RELATIVE_FLOOR_S = 60.0
#: Any fit estimated at more than this many seconds is warned about.
ABSOLUTE_LIMIT_S = 300.0

# Kernel cost per row pair and input (or projection), in Cholesky-flop equivalents.
_C_SE = 143.0
_C_BASE = 370.0
_C_ORDER = 28.0
_C_PROJ = 315.0
#: Typical objective evaluations of one L-BFGS start.
_EVALUATIONS = {"rbf": 20, "oak": 45, "projected": 30}
_MAX_ORDER_CAP = 10  # as hdgp.estimators._params.MAX_ORDER_CAP: max_order=None means min(D, 10)

_RATE: list = []


def flop_rate() -> float:
    """Flops per second of a 384 × 384 Cholesky factorisation in this process (best of 3, cached)."""
    if not _RATE:
        import torch  # deferred: this module is imported by the light CLI path through the estimators only

        n = 384
        a = torch.randn(n, n, dtype=torch.float64)
        a = a @ a.T + n * torch.eye(n, dtype=torch.float64)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            torch.linalg.cholesky(a)
            best = min(best, time.perf_counter() - start)
        _RATE.append((n ** 3 / 3) / max(best, 1e-6))
    return _RATE[0]


@dataclass
class FitCost:
    """Estimated cost of one fit: ``seconds`` and an RBF-ARD fit of the same table, ``rbf_seconds``."""

    family: str
    n: int
    d: int
    engine: str
    seconds: float
    rbf_seconds: float
    order: int | None = None


def _per_evaluation(n, d, *, engine, family, order, n_projections, n_inducing) -> float:
    sparse = engine in ("sparse", "variational")
    m = min(n_inducing or n, n)
    linalg = n * m * m + m ** 3 / 3 if sparse else 2.0 * n ** 3 / 3
    pairs = n * m if sparse else n * n / 2
    if family == "oak":
        kernel = (_C_BASE + _C_ORDER * order) * d
    elif family == "projected":
        kernel = _C_PROJ * n_projections
    else:
        kernel = _C_SE * d
    return linalg + pairs * kernel


def estimate_fit(n: int, d: int, *, engine: str = "exact", family: str = "rbf", order: int | None = None,
                 n_projections: int = 20, n_inducing: int = 512, starts: int = 1, rate: float | None = None
                 ) -> FitCost:
    """Estimated seconds of a fit on ``n`` rows × ``d`` inputs.

    ``family``: ``"rbf"``, ``"oak"`` (also the additive GP; ``order`` R, default min(d, 10)) or
    ``"projected"`` (``n_projections`` J). ``engine``: ``"exact"``, ``"sparse"`` or ``"variational"``
    (``n_inducing`` points), or ``"ski"`` (estimated as sparse). ``rate``: flops per second
    (default :func:`flop_rate`).
    """
    rate = flop_rate() if rate is None else rate
    order = min(d, _MAX_ORDER_CAP) if order is None else order
    engine_ = "sparse" if engine == "ski" else engine
    per = _per_evaluation(n, d, engine=engine_, family=family, order=order, n_projections=n_projections,
                          n_inducing=n_inducing)
    rbf = _per_evaluation(n, d, engine=engine_, family="rbf", order=1, n_projections=1, n_inducing=n_inducing)
    evaluations = _EVALUATIONS.get(family, 30) * max(starts, 1)
    return FitCost(family, n, d, engine, evaluations * per / rate, _EVALUATIONS["rbf"] * rbf / rate,
                   order if family == "oak" else None)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cost_warning(cost: FitCost, name: str) -> str | None:
    """The warning for an estimate far beyond its peers (None when it is not): more than
    :data:`RELATIVE_LIMIT` × RBF-ARD's and :data:`RELATIVE_FLOOR_S` seconds, or more than
    :data:`ABSOLUTE_LIMIT_S` seconds. It names the knobs that help."""
    ratio = cost.seconds / max(cost.rbf_seconds, 1e-12)
    if not (cost.seconds > ABSOLUTE_LIMIT_S or (ratio > RELATIVE_LIMIT and cost.seconds > RELATIVE_FLOOR_S)):
        return None
    knobs = []
    if cost.family == "oak" and cost.order and cost.order > 2:
        knobs.append(f"max_order=2 or 3 (interactions of up to {cost.order} inputs now; most tables need ≤ 3)")
    if cost.engine == "exact":
        knobs.append("inference='sparse' with n_inducing=256 (cost linear in the rows)")
    elif cost.engine in ("sparse", "variational"):
        knobs.append("a smaller n_inducing (e.g. 256)")
    if cost.family != "rbf":
        knobs.append("the model rbf-ard (--model rbf-ard)")
    return (f"{name} on {cost.n} rows × {cost.d} inputs ({cost.engine} inference) is estimated to take about "
            f"{_duration(cost.seconds)} on this machine ({ratio:.0f}× an RBF-ARD fit of the same table, about "
            f"{_duration(cost.rbf_seconds)}). To make it faster: " + "; ".join(knobs)
            + ". On the command line: -p name=value.")
