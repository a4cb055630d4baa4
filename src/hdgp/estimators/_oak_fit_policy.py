"""OAK's fit policy (:class:`~hdgp.estimators.oak.OAKRegressor`): its starts, the interaction order chosen
from the data, and the two-stage fit of larger tables.

One policy for every size (issue #40: cost follows n). Up to :data:`STAGE_MIN_ROWS` rows the whole policy
runs on all rows. Above, **stage one** runs it (every start, the order chosen and raised) with exact inference
on a random subset of at most :data:`STAGE_ROWS` rows (of the inputs warped by the flow fitted once, on all
rows), and **stage two** is one warm fit on all rows with the
inference ``inference`` calls for (exact up to 5,000 rows, sparse beyond with ``"auto"``), at the order stage
one chose, with L-BFGS's relative tolerance at :data:`POLISH_FTOL` (and, when stage one had :data:`STAGE_ROWS`
rows, at most :data:`STAGE_TWO_MAX_ITER` iterations unless ``max_iter`` is set). The subset's optimum is near
the full one, so stage two needs few evaluations on all rows, where each costs O(n^2 D R + n^3) (exact) or
O(n m^2) (sparse). Measurements: ``benchmarks/results/oak-defaults/README.md``.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.utils import check_random_state

from .. import explain
from .._cost import FitCost, cost_warning, estimate_fit
from ..exceptions import ConvergenceWarning, CostWarning, warn_caller
from ..inference.engines import ENGINE_REGISTRY
from ..kernels.orthogonal_kernel import ConstrainedSEKernel
from ..training import FitResult
from ._base import _pooled, _Stage
from ._numeric_input import validate_numeric
from ._params import MAX_ORDER_CAP, MAX_ORDER_START, resolve_max_order

__all__ = ["OAKFitPolicy"]

#: From this many continuous features on, OAK is also fitted from a smooth start and the better
#: MAP objective kept: with many features each flexible first-order term can interpolate noise from
#: the authors' start (every length-scale 1), where L-BFGS then stays. Exact and sparse fits only
#: (it doubles the fit). Measurements: benchmarks/README.md, "Measurements behind defaults".
SMOOTH_START_MIN_FEATURES = 21
#: Length-scale of every continuous feature at the smooth start: nearly linear components over the
#: warped inputs' +-2.5 standard deviations.
SMOOTH_START_LENGTHSCALE = 5.0
#: Length-scale of the one short feature of a ``feature_starts`` start (the others at the authors' 1):
#: a tenth of a standard deviation of the warped input, fine enough to resolve a few dozen distinct
#: values (measurements: benchmarks/README.md, "Measurements behind defaults").
FEATURE_START_LENGTHSCALE = 0.1
#: Noise variance of the ``low_noise_start`` start, in multiples of ``noise_lower_bound``: close to the
#: bound, so that nearly noise-free data can reach the optimum that explains it by the function
#: (measurements: benchmarks/README.md, "Measurements behind defaults").
LOW_NOISE_START_FACTOR = 2.0
#: With ``max_order=None`` the fit starts at order :data:`~hdgp.estimators._params.MAX_ORDER_START` and
#: is refitted at min(D, 10) (from the first fit's length-scales and noise) when the normalised Sobol
#: mass of its top order exceeds this (:meth:`OAKFitPolicy._raise_order`): interactions of the next order may matter.
ORDER_RAISE_MASS = 1e-3
#: Up to this many features, ``max_order=None`` fits every order at once (no raise, no refit): the
#: order sum of R <= 5 costs little more than R = 3, where a refit doubles the fit (measurements:
#: benchmarks/README.md, "OAK's default fit policy").
FULL_ORDER_MAX_FEATURES = 5
#: In that refit, each added order's variance starts at this fraction of the first fit's top-order
#: variance: the refit begins at (almost) the first fit's model, and the added orders grow only where
#: the marginal likelihood asks for them (measurements: benchmarks/README.md, "OAK's default fit policy").
RAISED_ORDER_START = 1e-2
#: A fit from its start (not a warm one) on more than this many rows runs in two stages (module docstring).
#: Smaller fits train on all rows from their start (a subset can also leave the basin of a start, e.g.
#: ``low_noise_start`` on nearly noise-free data).
STAGE_MIN_ROWS = 800
#: Rows of stage one: this fraction of the training rows, at least :data:`SUBSET_FIT_ROWS` and at most
#: :data:`STAGE_ROWS` (a smaller subset of a nearly noise-free table can end in another basin).
SUBSET_FIT_FRACTION = 0.6
#: The fewest rows of stage one.
SUBSET_FIT_ROWS = 500
#: The most rows of stage one: an exact evaluation there costs a fraction of one on 5,000 rows.
STAGE_ROWS = 1500
#: L-BFGS's relative tolerance on the objective in stage two.
POLISH_FTOL = 1e-5
#: L-BFGS iterations of stage two (at most twice as many objective evaluations) when ``max_iter`` is None and
#: stage one had :data:`STAGE_ROWS` rows (a smaller stage two, cheap, polishes to convergence). The cap trades
#: accuracy for time on tables whose optimum moves with n (measurements: benchmarks/results/oak-defaults/README.md,
#: "Run h").
STAGE_TWO_MAX_ITER = 18
#: The same for a sparse stage two: its inducing inputs start at k-means centres and need more iterations.
SPARSE_STAGE_TWO_MAX_ITER = 30
#: Objective evaluations :func:`hdgp._cost.estimate_fit` assumes per OAK start.
_ESTIMATE_EVALUATIONS = 45


@dataclass(frozen=True)
class _OAKStage(_Stage):
    """A stage of OAK's fit (:class:`~hdgp.estimators._base._Stage`) with its own: the inputs the kernel's measures
    are built from (``kernel_inputs``: all rows in both stages; None: the training inputs), whether the first kernel
    of the fit chooses the order (``choose_order``), and ``whole``, ``(rows, engine)`` of the whole fit when this
    is stage one (its cost estimate counts both stages)."""
    kernel_inputs: torch.Tensor | None = None
    choose_order: bool = False
    whole: tuple[int, str] | None = None


class OAKFitPolicy:
    """The fit policy of :class:`~hdgp.estimators.oak.OAKRegressor` (a mixin before
    :class:`~hdgp.estimators._base.BaseGPRegressor`): the hooks of the base class that choose the starts,
    the order and the stages, and :meth:`_fit_and_choose_order`, one fit with its Sobol indices. Each fit of a
    staged fit runs in its :class:`_OAKStage`; the constructor parameters are never changed."""

    _stage: _OAKStage = _OAKStage()

    # ------------------------------------------------------------- starts
    def _starts(self) -> list[tuple[str, int | None]]:
        """The starts one exact or sparse fit trains, as ``(name, continuous feature or None)``; the
        lowest MAP objective is kept. First the authors' start (every length-scale 1); a smooth one
        (:data:`SMOOTH_START_LENGTHSCALE`) with :data:`SMOOTH_START_MIN_FEATURES` or more continuous
        features; with ``low_noise_start``, the authors' start with the noise at
        :data:`LOW_NOISE_START_FACTOR` × ``noise_lower_bound``; with ``feature_starts``, one per
        continuous feature whose length-scale starts at :data:`FEATURE_START_LENGTHSCALE`."""
        starts = [("authors", None)]
        if ENGINE_REGISTRY[self.inference_].trains_itself:  # one start: minibatch training has its own schedule
            return starts
        if len(self.continuous_features_) >= SMOOTH_START_MIN_FEATURES:
            starts.append(("smooth", None))
        if self.low_noise_start:
            starts.append(("low noise", None))
        if self.feature_starts:
            names = self._feature_names()
            starts += [(f"short {names[j]}", position) for position, j in enumerate(self.continuous_features_)]
        return starts

    def _start(self) -> tuple[str, int | None]:
        """The start being trained (``_candidate_``). Model files from before the smooth start lack
        ``_candidate_``; a warm start after ``feature_starts`` or ``low_noise_start`` was switched off
        can name one beyond :meth:`_starts`: both start from copied parameters, which replace these."""
        candidate = getattr(self, "_candidate_", 0)
        starts = self._starts() if candidate else ()
        return starts[candidate] if candidate < len(starts) else ("authors", None)

    def _build_model(self, Xt: torch.Tensor):
        model = super()._build_model(Xt)
        if self._start()[0] == "low noise":
            model.likelihood.noise = LOW_NOISE_START_FACTOR * self.noise_lower_bound
        return model

    def _copy_warm(self, previous, model) -> None:
        r"""A warm start, and the refit at a higher order: the matching parameters, and order variances
        :math:`\sigma_0^2, \dots, \sigma_{R'}^2` of the previous fit (order :math:`R'`) with every higher
        order starting at :data:`RAISED_ORDER_START` :math:`\times\, \sigma_{R'}^2`, so that the refit begins
        next to the model it extends instead of at the authors' start of the order variances."""
        super()._copy_warm(previous, model)
        old, new = (getattr(getattr(m, "kernel", None), "order_variances", None) for m in (previous, model))
        if old is not None and new is not None and old.shape != new.shape:
            old, new = old.detach(), new.detach()
            with torch.no_grad():
                extended = (old[-1] * RAISED_ORDER_START).expand(new.shape).clone()
                keep = min(len(old), len(new))
                extended[:keep] = old[:keep]
                model.kernel.order_variances = extended.to(new)

    def _set_start(self, continuous: ConstrainedSEKernel) -> None:
        """Length-scales of the continuous features at the start being trained."""
        name, position = self._start()
        if name == "smooth":
            continuous.lengthscale = SMOOTH_START_LENGTHSCALE
        elif position is not None:
            lengthscale = continuous.lengthscale.detach().clone()
            lengthscale.view(-1)[position] = FEATURE_START_LENGTHSCALE  # one per feature: (D, 1, 1)
            continuous.lengthscale = lengthscale

    def _n_candidates(self) -> int:
        return len(self._starts())

    def _record_candidates(self, model, losses: dict) -> None:
        starts = self._starts()  # a warm start after feature_starts was switched off can name a start beyond them
        self.start_losses_ = {starts[c][0] if c < len(starts) else "warm": loss for c, loss in losses.items()}

    # ------------------------------------------------------------- order
    def _kernel_order(self, n_features: int) -> int:
        """``max_order_``, chosen at the first kernel of a fit whose stage chooses it; model files from before it
        have none and were fitted at the resolved ``max_order`` (min(D, 10) for None)."""
        if self._stage.choose_order and getattr(self, "max_order_", None) is None:
            start = MAX_ORDER_START if n_features > FULL_ORDER_MAX_FEATURES else None
            self.max_order_ = resolve_max_order(self.max_order, n_features, start=start)
        order = getattr(self, "max_order_", None)
        return resolve_max_order(self.max_order, n_features) if order is None else order

    def _order_masses(self) -> np.ndarray:
        """The normalised Sobol mass of each fitted order (``sobol_order_`` of :meth:`_compute_sobol`) from
        the per-order sums alone (OAK eq. 38 by Newton–Girard over the :math:`L_i`), no term enumerated."""
        kernel, X, alpha = self.kernel_, self.posterior_.X, self.posterior_.alpha
        if X.dtype != torch.float64:  # as explain.compute_sobol: the sums cancel heavily
            kernel, X, alpha = copy.deepcopy(kernel).double(), X.double(), alpha.double()
        per_order = explain.order_sobol(kernel, explain.sobol_matrices(kernel, X), alpha).clamp_min(0)
        return (per_order / per_order.sum().clamp_min(torch.finfo(per_order.dtype).tiny)).cpu().numpy()

    def _top_order_mass(self) -> float:
        """The normalised Sobol mass of the fitted top order (``sobol_order_[-1]``)."""
        return float(self._order_masses()[-1])

    def _raise_order(self) -> bool:
        """Whether ``max_order=None`` refits at min(D, 10): the top order holds more than
        :data:`ORDER_RAISE_MASS` of the Sobol mass."""
        if self.max_order is not None or self.max_order_ >= min(self.X_train_.shape[-1], MAX_ORDER_CAP):
            return False
        return not self._top_order_mass() <= ORDER_RAISE_MASS  # a NaN mass raises too

    # ------------------------------------------------------------- stages
    def _stage_rows(self, n: int) -> int | None:
        """Rows of stage one for a fit on ``n`` rows, or None for a one-stage fit (a warm start, few rows, or
        minibatch training)."""
        if self.warm_start or n <= STAGE_MIN_ROWS or ENGINE_REGISTRY[self._resolve_inference(n)].trains_itself:
            return None
        return min(STAGE_ROWS, max(SUBSET_FIT_ROWS, round(SUBSET_FIT_FRACTION * n)))

    def _fit_and_choose_order(self, X, y) -> None:
        """One fit with ``max_order`` resolved (``None``: chosen from the data, :meth:`_raise_order`), Sobol
        indices included; in two stages above :data:`STAGE_MIN_ROWS` rows (module docstring)."""
        try:  # any array-like (validate_numeric reports what it cannot read)
            n = np.shape(X)[0] if np.ndim(X) == 2 and np.shape(y) == np.shape(X)[:1] else 0
        except (TypeError, ValueError):
            n = 0
        rows = self._stage_rows(n)
        if rows is None:
            self._fit_one_stage(X, y)
            self._compute_sobol()
            return
        engine = self._resolve_inference(n)
        # a large table (stage one at STAGE_ROWS): the order is raised in stage one and stage two is capped; a
        # smaller one raises after stage two, on all rows (concrete split 1: that refit finds a better optimum)
        capped = rows >= STAGE_ROWS
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))  # the fit's seed
        subset = np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))
        # the flow, encoders and input measures are fitted once, on all rows: both stages train the same kernel
        Xv, _ = validate_numeric(self, X, y, y_numeric=True, ensure_min_samples=2, dtype=np.float64, order="C")
        inputs = self._transform_inputs(Xv, fit=True)
        measured = self._to_tensor(inputs)
        # stage one: the whole policy, exact, on the subset
        one = _OAKStage(inference="exact", inputs=inputs[subset], kernel_inputs=measured, whole=(n, engine))
        stage_one = self._fit_one_stage(X.iloc[subset] if hasattr(X, "iloc") else np.asarray(X)[subset],
                                        np.asarray(y)[subset], one, raise_order=capped)
        start_losses = self.start_losses_
        # stage two: all rows, warm from stage one's fit at the order it chose (max_order_ is kept)
        cap = self._stage_two_cap(engine) if self.max_iter is None and capped else None
        two = _OAKStage(inputs=inputs, kernel_inputs=measured, warm=True, max_iter=cap, ftol=POLISH_FTOL)
        self.inference_ = engine  # so that the subset's exact model starts a sparse one too
        with warnings.catch_warnings():
            if self.max_iter is None:  # the policy's cap, not the user's: no advice to raise max_iter
                warnings.filterwarnings("ignore", category=ConvergenceWarning)
            self._fit(X, y, two)
        if not capped and self._raise_order():
            self._refit_raised(X, y, two)  # still at POLISH_FTOL (and not capped: the user's max_iter)
        self.init_result_, self.start_, self.start_losses_ = stage_one, "subset", start_losses
        self._compute_sobol()

    @staticmethod
    def _stage_two_cap(engine: str) -> int:
        return SPARSE_STAGE_TWO_MAX_ITER if ENGINE_REGISTRY[engine].inducing_points else STAGE_TWO_MAX_ITER

    def _fit_one_stage(self, X, y, stage: _OAKStage = _OAKStage(), raise_order: bool = True) -> FitResult:
        """The fit in ``stage`` at the order chosen from the data, raised by a warm refit (:meth:`_raise_order`);
        returns its result (with every evaluation of both fits when raised)."""
        self.max_order_ = None
        self._fit(X, y, replace(stage, choose_order=True))
        first = self.fit_result_
        if raise_order and self._raise_order():
            self._refit_raised(X, y, stage)
            return _pooled(self.fit_result_, [first, self.fit_result_])
        return first

    def _refit_raised(self, X, y, stage: _OAKStage) -> None:
        """Refit in ``stage`` at min(D, 10) from the fitted parameters (higher orders start at
        :data:`RAISED_ORDER_START` of the top order's variance) and the fitted warped inputs."""
        self.max_order_ = min(self.X_train_.shape[-1], MAX_ORDER_CAP)
        losses = self.start_losses_
        self._fit(X, y, replace(stage, warm=True, inputs=self.X_train_.cpu().numpy()))
        self.start_losses_ = {**losses, **self.start_losses_}  # the raised start's objective replaces its first

    # ------------------------------------------------------------- cost
    def _warn_if_costly(self, n: int, d: int) -> None:
        if self._flow_in_fit() != True and getattr(self, "_flow_choice_X", None) is not None:  # noqa: E712
            return  # the second fit of flow="choose", counted by the first (_fits_per_start)
        if self._stage.whole is not None:
            self._warn_staged(*self._stage.whole, d, n)
        else:
            super()._warn_if_costly(n, d)

    def _warn_staged(self, n: int, engine: str, d: int, rows: int) -> None:
        """The up-front cost estimate of a two-stage fit (made in stage one, which knows the starts): stage
        one on ``rows`` rows, exact, plus stage two's evaluations on all ``n`` rows with ``engine``."""
        order = self.max_order if self.max_order is not None else min(d, MAX_ORDER_START)
        one = estimate_fit(rows, d, engine="exact", family="oak", order=order,
                           starts=self._n_candidates() * (self.n_restarts + 1) * self._fits_per_start())
        two = estimate_fit(n, d, engine=engine, family="oak", order=order, n_inducing=self.n_inducing)
        cap = self._stage_two_cap(engine) if rows >= STAGE_ROWS else _ESTIMATE_EVALUATIONS
        evaluations = 2 * (cap if self.max_iter is None else self.max_iter)
        seconds = one.seconds + two.seconds * min(evaluations / _ESTIMATE_EVALUATIONS, 1.0)
        message = cost_warning(FitCost("oak", n, d, engine, seconds, two.rbf_seconds, order), type(self).__name__)
        if message:
            warn_caller(message, CostWarning)
