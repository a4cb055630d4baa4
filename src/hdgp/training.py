"""Hyperparameter fitting: L-BFGS on the marginal likelihood, restarts, Adam protocol.

Any ``torch.nn.Module`` with a ``neg_log_marginal_likelihood(X, y)`` method (and
optionally ``log_prior()``) can be fitted. The objective is the negative log
marginal likelihood minus log prior, divided by ``n`` so tolerances do not
depend on the data size.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize
import torch
from tqdm.auto import tqdm

from .exceptions import ConvergenceWarning, NotPositiveDefiniteError, warn_caller

__all__ = ["FitResult", "fit_hyperparameters"]

#: L-BFGS restarts from the best point after a line search failed on non-PD / non-finite evaluations.
_LBFGS_BACKOFF_RESTARTS = 3
#: L-BFGS memory (correction pairs; SciPy's default is 10). A longer memory reaches the same
#: optima in fewer evaluations for the tens to hundreds of hyperparameters of these models, at
#: negligible memory (evaluation counts: benchmarks/README.md, "Numbers behind choices in src/").
_LBFGS_MEMORY = 30
#: L-BFGS stops when a step lowers the objective (per row) by less than this fraction of it; a model
#: whose objective is itself an estimate raises it to its ``objective_resolution``.
_LBFGS_FTOL = 1e-6
#: Adam steps that may fail (non-PD matrix, non-finite loss or gradient) before the run stops.
_ADAM_MAX_BACKOFFS = 10


@dataclass
class FitResult:
    """Outcome of :func:`fit_hyperparameters`.

    Attributes
    ----------
    loss : float
        Final objective (negative log marginal likelihood − log prior) / n.
    n_evaluations : int
        Objective + gradient evaluations across all restarts.
    restart_losses : list of float
        Final loss of each start (the first is the deterministic initialisation).
    converged : bool
        Whether the best start met its stopping rule.
    """

    loss: float
    n_evaluations: int
    restart_losses: list = field(default_factory=list)
    converged: bool = True


def _objective(model, X, y) -> torch.Tensor:
    loss = model.neg_log_marginal_likelihood(X, y)
    if hasattr(model, "log_prior"):
        loss = loss - model.log_prior()
    return loss / y.shape[0]


class _FlatParameters:
    """View a module's trainable parameters as one float64 NumPy vector."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]

    def get(self) -> np.ndarray:
        return torch.cat([p.detach().reshape(-1) for p in self.params]).cpu().double().numpy()

    def set(self, flat: np.ndarray) -> None:
        offset = 0
        with torch.no_grad():
            for p in self.params:
                k = p.numel()
                p.copy_(torch.as_tensor(flat[offset:offset + k], dtype=p.dtype, device=p.device).reshape(p.shape))
                offset += k

    def grad(self) -> np.ndarray:
        return torch.cat([
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params
        ]).cpu().double().numpy()


class _Progress:
    """Counts objective evaluations against the fit's budget: a tqdm bar (elapsed time, seconds per
    evaluation, and the time left if the whole budget were used, an upper bound) and an optional
    ``callback(info)`` after each evaluation.

    ``info``: ``evaluations`` (so far, over all starts), ``budget`` (the most the fit may use),
    ``start`` (0-based), ``elapsed`` and ``seconds_per_evaluation`` (seconds), ``remaining_at_most``
    (seconds: the evaluations left in the budget at the mean rate so far) and ``loss``.
    """

    def __init__(self, budget: int, *, verbose: bool, desc: str, callback=None):
        self.budget, self.callback, self.count, self.start = budget, callback, 0, 0
        self.t0 = time.perf_counter()
        self.bar = tqdm(total=budget, disable=not verbose, desc=desc, leave=False, unit="eval",
                        bar_format="{desc}: {n_fmt}/{total_fmt} evaluations [{elapsed} elapsed, "
                                   "{rate_inv_fmt}, at most {remaining} left]{postfix}")

    def step(self, loss: float) -> None:
        self.count += 1
        elapsed = time.perf_counter() - self.t0
        per = elapsed / self.count
        self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
        self.bar.update(1)
        if self.callback is not None:
            self.callback({"evaluations": self.count, "budget": self.budget, "start": self.start,
                           "elapsed": elapsed, "seconds_per_evaluation": per,
                           "remaining_at_most": per * max(self.budget - self.count, 0), "loss": loss})

    def close(self) -> None:
        self.bar.close()


class _BudgetSpent(Exception):
    """The objective was asked for one evaluation more than an L-BFGS run may use."""


def _run_lbfgs(model, X, y, max_iter: int, progress, ftol: float | None = None) -> tuple[float, int, bool]:
    """L-BFGS-B from the current parameters: at most ``max_iter`` iterations and ``2 * max_iter``
    objective evaluations over all its restarts, then the best parameters evaluated are kept.
    ``ftol``: the relative tolerance on the objective (default :data:`_LBFGS_FTOL`).

    SciPy checks ``maxfun`` only between iterations, so a line search could overrun it, and one
    evaluation of a large SKI fit can take many seconds: the objective itself stops the run when
    the budget is spent.
    """
    ftol = max(_LBFGS_FTOL if ftol is None else ftol, getattr(model, "objective_resolution", 0.0))
    budget = 2 * max_iter
    flat = _FlatParameters(model)
    best = {"loss": math.inf, "x": flat.get()}
    count = {"n": 0, "failed": 0}

    def back_off(x):
        """Value and gradient for a point where the objective failed (non-PD matrix, NaN/inf).

        A huge value with the gradient of the bowl f_best + c‖x − x_best‖² through it, so
        the line search sees the objective rise away from the best point and shrinks the
        step. (A zero gradient would read as a stationary point and stop L-BFGS there.)
        """
        count["failed"] += 1
        if not math.isfinite(best["loss"]):
            return 1e10, np.zeros_like(x)
        value = (abs(best["loss"]) + 1.0) * 1e6
        step = x - best["x"]
        sq = float(step @ step)
        return value, (2.0 * (value - best["loss"]) / sq) * step if sq > 0 else np.zeros_like(x)

    def fun(x):
        if count["n"] >= budget:
            raise _BudgetSpent
        flat.set(x)
        model.zero_grad(set_to_none=True)
        count["n"] += 1
        try:
            loss = _objective(model, X, y)
            loss.backward()
        except NotPositiveDefiniteError:
            return back_off(x)
        value = loss.item()
        g = flat.grad()
        if not (math.isfinite(value) and np.all(np.isfinite(g))):
            return back_off(x)
        if value < best["loss"]:
            best["loss"], best["x"] = value, x.copy()
        if progress is not None:
            progress.step(value)
        return value, g

    x_start, iterations, status = flat.get(), 0, 0
    for _ in range(_LBFGS_BACKOFF_RESTARTS + 1):
        failed_before = count["n"], count["failed"]
        try:
            res = scipy.optimize.minimize(
                fun, x_start, jac=True, method="L-BFGS-B",
                options={"maxiter": max_iter - iterations, "maxfun": budget - count["n"],
                         "ftol": ftol, "gtol": 1e-5, "maxcor": _LBFGS_MEMORY},
            )
        except _BudgetSpent:
            status = 1
            break
        iterations += int(res.nit)
        status = res.status
        # A run that met failed evaluations (non-PD matrix, NaN gradient) restarts from the best point
        # with a fresh quasi-Newton memory, while the budget lasts: its line search either gave up
        # (status 2) or, pushed back onto the best point by the bowl of back_off, read the zero
        # reduction there as convergence (status 0), which stopped an RBF-ARD fit after 2 good steps.
        if (status == 1 or count["failed"] == failed_before[1] or not math.isfinite(best["loss"])
                or iterations >= max_iter or count["n"] >= budget):
            break
        x_start = best["x"]
    flat.set(best["x"])  # keep the best parameters ever evaluated
    # status 1 = iteration/evaluation cap; line-search stalls at the optimum count as converged
    return best["loss"], count["n"], status == 0 or (status != 1 and iterations < max_iter)


def _run_adam(model, X, y, max_iter: int, lr: float, progress) -> tuple[float, int, bool]:
    """Delbridge et al. (2020, sec. 5) protocol: Adam(lr), ≤ max_iter steps, stop when the
    20-step moving average of the loss improves by less than 1e-4."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    window: deque = deque(maxlen=20)
    previous_avg = math.inf
    best_loss, best_state = math.inf, None
    converged = False
    failures = 0
    it = 0
    for it in range(max_iter):
        opt.zero_grad(set_to_none=True)
        try:
            loss = _objective(model, X, y)
            loss.backward()
            value = loss.item()
            ok = math.isfinite(value) and all(p.grad is None or torch.isfinite(p.grad).all() for p in params)
        except NotPositiveDefiniteError:
            ok = False
        if not ok:
            # Back off: return to the best parameters, halve the step size and forget the moments.
            failures += 1
            if best_state is None or failures > _ADAM_MAX_BACKOFFS:
                break
            with torch.no_grad():
                for p, v in zip(params, best_state):
                    p.copy_(v)
            for group in opt.param_groups:
                group["lr"] *= 0.5
            opt.state.clear()
            continue
        if value < best_loss:
            best_loss = value
            best_state = [p.detach().clone() for p in params]
        opt.step()
        window.append(value)
        if progress is not None:
            progress.step(value)
        if len(window) == window.maxlen:
            avg = sum(window) / len(window)
            if previous_avg - avg < 1e-4:
                converged = True
                break
            previous_avg = avg
    if best_state is not None:
        with torch.no_grad():
            for p, v in zip(params, best_state):
                p.copy_(v)
    return best_loss, it + 1, converged


def fit_hyperparameters(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                        optimizer: str = "lbfgs", max_iter: int | None = None,
                        n_restarts: int = 0, random_state=None, lr: float = 0.1,
                        verbose: bool = False, desc: str = "fitting hyperparameters", callback=None,
                        ftol: float | None = None) -> FitResult:
    """Maximise the (penalised) marginal likelihood of ``model`` in place.

    Parameters
    ----------
    model : torch.nn.Module
        Has ``neg_log_marginal_likelihood(X, y)`` and optionally ``log_prior()``. A model
        whose objective sets a profiled parameter (``profile_constant``, see
        :class:`~hdgp.inference.ExactGPModel`) is evaluated once more at the returned
        parameters, so that it matches them. A model whose objective is an estimate
        may declare ``objective_resolution``: L-BFGS's relative tolerance on the
        objective (default 1e-6) is raised to it (SKI: 1e-5).
    X, y : torch.Tensor
        Training inputs (n, d) and targets (n,).
    optimizer : {"lbfgs", "adam"}
        ``"lbfgs"``: SciPy's L-BFGS-B on the unconstrained (raw) parameters,
        typically 20–100 evaluations. ``"adam"``: the projected-additive paper's
        protocol (lr 0.1, at most 1000 steps, moving-average stopping rule).
    max_iter : int, optional
        Iteration cap (default 500 for L-BFGS, 1000 for Adam).
    n_restarts : int, default=0
        Extra starts from the initial raw parameters perturbed by N(0, 1) noise
        drawn from ``random_state``; the best final loss wins.
    random_state : int, numpy Generator or None
        Seed for the restarts.
    verbose : bool
        Show a progress bar: evaluations out of the budget (``2 * max_iter`` per L-BFGS start,
        ``max_iter`` per Adam start), elapsed time, seconds per evaluation, the time left if the
        whole budget were used (an upper bound: L-BFGS usually stops well before) and the loss.
    callback : callable, optional
        Called after each objective evaluation with a dict (``evaluations``, ``budget``, ``start``,
        ``elapsed``, ``seconds_per_evaluation``, ``remaining_at_most``, ``loss``).
    ftol : float, optional
        L-BFGS stops when a step lowers the objective by less than this fraction of it (default
        1e-6; a fit that polishes a start found on a subset of rows may stop earlier).
    desc : str, default="fitting hyperparameters"
        Label of the progress bar (a fit in stages names each stage).

    Returns
    -------
    FitResult
    """
    if optimizer not in ("lbfgs", "adam"):
        raise ValueError(f"optimizer must be 'lbfgs' or 'adam', got {optimizer!r}.")
    max_iter = max_iter if max_iter is not None else (500 if optimizer == "lbfgs" else 1000)
    flat = _FlatParameters(model)
    if not flat.params:
        loss = _objective(model, X, y).item()
        return FitResult(loss, 1, [loss], True)
    x0 = flat.get()
    rng = np.random.default_rng(random_state)
    results = []
    total = 0
    per_start = 2 * max_iter if optimizer == "lbfgs" else max_iter
    bar = _Progress(per_start * (n_restarts + 1), verbose=verbose,
                    desc=desc if n_restarts == 0 else f"{desc} ({n_restarts + 1} starts)", callback=callback)
    try:
        for start in range(n_restarts + 1):
            bar.start = start
            flat.set(x0 if start == 0 else x0 + rng.standard_normal(x0.shape))
            if optimizer == "lbfgs":
                loss, n_eval, ok = _run_lbfgs(model, X, y, max_iter, bar, ftol)
            else:
                loss, n_eval, ok = _run_adam(model, X, y, max_iter, lr, bar)
            total += n_eval
            results.append((loss, flat.get(), ok))
    finally:
        bar.close()
    losses = [r[0] for r in results]
    best = int(np.argmin(losses))
    if not math.isfinite(losses[best]):
        raise NotPositiveDefiniteError(
            "No hyperparameter setting tried gave a finite marginal likelihood; "
            "increase `noise_lower_bound` or check the inputs for duplicates/scale."
        )
    flat.set(results[best][1])
    if getattr(model, "profile_constant", False):  # exact and SGPR engines: the constant of these parameters
        with torch.no_grad():
            _objective(model, X, y)
    if not results[best][2]:
        warn_caller(
            f"Hyperparameter optimisation ({optimizer}) stopped at max_iter={max_iter} before "
            "converging; predictions use the best parameters found. Raise `max_iter` to continue.",
            ConvergenceWarning,
        )
    return FitResult(losses[best], total, losses, results[best][2])
