"""``ProjectedAdditiveGPRegressor``: RPA-GP, DPA-GP and their -ARD variants, exact or SKI.

Presets for every projected model of Delbridge, Bindel & Wilson (2020), Table 2:
``Single-RP``, ``RPA-GP-1``, ``RPA-GP-2``, ``RPA-GP-3``, ``DPA-GP``, ``RPA-GP-ARD``,
``DPA-GP-ARD``, ``DPA-GP-ARD-SKI`` and ``RPA-GP-SKI``.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import torch
from gpytorch.kernels import Kernel, ScaleKernel

from ..exceptions import HDGPWarning
from ..inference import ExactGPModel
from ..inference.engines import resolve_inference
from ..inference.ski import SKIProjectedGPModel
from ..kernels import log_positive
from ..kernels.projected_kernel import ProjectedAdditiveKernel
from ..projections import diverse_directions, expand_degrees, min_pairwise_angle, random_directions
from ..training import fit_hyperparameters
from ._base import AUTO_EXACT_MAX_N, BaseGPRegressor, _is_int

__all__ = ["ProjectedAdditiveGPRegressor"]


#: Settings of SKIProjectedGPModel a user may pass through ``ski_options``.
_SKI_OPTIONS = ("num_probes", "probe_seed", "preconditioner_rank", "max_cg_iterations", "cg_tolerance")
#: ``inference="auto"`` with 1-D projections: exact inference up to this many training rows, SKI beyond
#: (each exact evaluation costs O(n³), a SKI one O(n) plus the grids).
PROJECTED_EXACT_MAX_N = 3000
#: Above :data:`PROJECTED_EXACT_MAX_N` rows (exact or SKI inference), a fit starts from an exact fit of
#: the same kernel on this many random training rows.
SUBSET_START_ROWS = 1000
#: ... whose length-scales are capped at this many times their generic start before the fit on all rows.
SUBSET_LENGTHSCALE_CAP = 10.0
#: ``n_projections=None`` with an integer ``degree``: this many sub-kernels for a number of training
#: rows within :data:`MORE_DIRECTIONS_ROWS` ...
MORE_DIRECTIONS = 50
#: ... (at most 1,000 rows: 50 directions there cost the kernel work of 20 on 1,581 rows; at least 250:
#: below, the marginal likelihood of a few hundred points does not pin the richer sum down) ...
MORE_DIRECTIONS_ROWS = (250, 1000)
#: ... and this many otherwise (the paper's J).
DEFAULT_DIRECTIONS = 20


class ProjectedAdditiveGPRegressor(BaseGPRegressor):
    r"""GP regression with a projected-additive kernel (RPA-GP / DPA-GP, optionally -ARD).

    .. math::

        k(x, x') = \sigma^2 \sum_{j=1}^{J} \alpha_j\,
        \exp\!\big(-\tfrac12 \lVert P^{(j)} A (x - x') \rVert^2 / \lambda_j^2\big)

    on standardised inputs (Delbridge et al. 2020, eq. 2; Sec. 4.3 for -ARD): with ``ard=True``
    :math:`A = \mathrm{diag}(1/\ell)` is learned and :math:`\lambda_j = 1`; otherwise :math:`A = I`
    and each projection learns its length-scale :math:`\lambda_j`.

    Parameters
    ----------
    n_projections : int or None, default=20
        Number of sub-kernels :math:`J` (None when ``degree`` lists groups). None with an integer
        ``degree``: chosen from the number of training rows n, :data:`MORE_DIRECTIONS` for n within
        :data:`MORE_DIRECTIONS_ROWS` and :data:`DEFAULT_DIRECTIONS` (the paper's J) otherwise. More
        directions bring the sum closer to its :math:`J \to \infty` limit kernel (Sec. 4.1,
        Corollary 1) at no extra hyper-parameter under -ARD; each costs O(n²) per exact evaluation.
    degree : int or sequence of (count, degree) pairs, default=1
        Sub-kernel degrees :math:`D_j`, e.g. ``[(4, 1), (4, 2), (4, 3)]`` for RPA-GP-2. Random
        directions of a degree above the number of features warn (the paper ran RPA-GP-3 so on
        small sets); diverse directions are one-dimensional.
    directions : {"diverse", "random"}, default="diverse"
        ``"random"``: Gaussian entries :math:`N(0, 1/D_j)` (RPA, eq. 4);
        ``"diverse"``: unit directions minimising eq. (7), orthonormal when
        :math:`J \le d` (DPA, Sec. 4.2; 1-D projections only).
    ard : bool, default=True
        Learn :math:`A = \mathrm{diag}(1/\ell)` on the inputs before projecting, with
        unit sub-kernel length-scales and :math:`\alpha_j = 1/J` (-ARD); otherwise
        one length-scale per sub-kernel and learned softmax weights :math:`\alpha`.
    n_direction_sets : int, default=1
        Direction sets to try. Set ``s`` > 0 is drawn from a seed derived from
        ``random_state``; each set is fitted and the one with the highest
        (penalised) marginal likelihood is kept. The paper fits one set per run;
        without ARD the fitted model depends strongly on which set was drawn. More sets
        help some models and hurt others, and on a few hundred rows or fewer the marginal
        likelihood over-fits the choice (the measurements:
        ``benchmarks/results/projected/README.md``).
    grid_size : int, default=512
        Grid points per projection for SKI inference.
    ski_options : dict or None, default=None
        Further settings of the SKI engine
        (:class:`~hdgp.inference.ski.SKIProjectedGPModel`): ``num_probes``,
        ``probe_seed``, ``preconditioner_rank``, ``max_cg_iterations``, ``cg_tolerance``.
    inference : {"auto", "exact", "ski", ...}, default="auto"
        ``"ski"``: additive structured kernel interpolation (1-D projections only,
        linear in n; up to 800 rows its likelihood is computed from the dense SKI matrix, as
        in GPyTorch). ``"auto"``: exact up to :data:`PROJECTED_EXACT_MAX_N` rows and SKI beyond
        when the projections are 1-D (else exact up to
        :data:`~hdgp.estimators._base.AUTO_EXACT_MAX_N` rows, sparse beyond). The choice is
        stored in ``inference_``. Above :data:`PROJECTED_EXACT_MAX_N` rows an exact or SKI fit
        starts from an exact fit on :data:`SUBSET_START_ROWS` random rows, its length-scales
        capped at :data:`SUBSET_LENGTHSCALE_CAP` times their generic start. SKI's conjugate
        gradients and Lanczos steps want ``dtype="float64"`` (the default): in float32 the
        predictive variances can be off by tens of per cent at a noise variance of 1e-4.
    n_inducing, batch_size, noise_lower_bound, noise_prior, optimizer, max_iter, n_restarts, warm_start, random_state, device, dtype, verbose
        See :class:`~hdgp.estimators._base.BaseGPRegressor`. ``random_state`` also
        seeds the directions.

    Attributes
    ----------
    n_projections_ : int
        Number of sub-kernels :math:`J` of the fitted model.
    projections_ : torch.Tensor of shape (sum(degrees), n_features)
        The fixed directions (rows of every :math:`P^{(j)}`).
    degrees_ : tuple of int
    min_pairwise_angle_ : float
        Smallest angle between two directions, in radians (Sec. 4.2).
    direction_set_losses_ : list of float
        Final objective (negative log marginal likelihood − log prior, per row) of
        each direction set; the kept one is the smallest.
    Other fitted attributes as in :class:`~hdgp.estimators._base.BaseGPRegressor`.

    Examples
    --------
    >>> import numpy as np
    >>> from hdgp.estimators.projected import ProjectedAdditiveGPRegressor
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> est = ProjectedAdditiveGPRegressor(5, random_state=0).fit(X, np.sin(X).sum(1))
    >>> est.predict(X[:2]).shape
    (2,)

    References
    ----------
    Delbridge, Bindel & Wilson (2020), "Randomly Projected Additive Gaussian
    Processes for Regression", ICML, eq. (2)-(7), Sec. 4.3-4.4, Table 2.
    """

    _engine_needs = {"projections": True}

    def __init__(self, n_projections=20, *, degree=1, directions="diverse", ard=True, n_direction_sets=1,
                 grid_size=512, ski_options=None, inference="auto", n_inducing=512, batch_size=None,
                 noise_lower_bound=1e-4, noise_prior=None, optimizer="lbfgs", max_iter=None, n_restarts=0,
                 warm_start=False, random_state=None, device=None, dtype="float64", verbose=False):
        self.n_projections = n_projections
        self.degree = degree
        self.directions = directions
        self.ard = ard
        self.n_direction_sets = n_direction_sets
        self.grid_size = grid_size
        self.ski_options = ski_options
        self.inference = inference
        self.n_inducing = n_inducing
        self.batch_size = batch_size
        self.noise_lower_bound = noise_lower_bound
        self.noise_prior = noise_prior
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.n_restarts = n_restarts
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.verbose = verbose

    def _degrees(self, n: int | None = None) -> tuple[int, ...]:
        """One degree per sub-kernel; ``n`` (training rows) resolves ``n_projections=None`` with an integer
        ``degree`` (without it, to :data:`DEFAULT_DIRECTIONS`: the checks need only the degrees)."""
        J = self.n_projections
        if J is None and _is_int(self.degree):
            low, high = MORE_DIRECTIONS_ROWS
            J = MORE_DIRECTIONS if n is not None and low <= n <= high else DEFAULT_DIRECTIONS
        return expand_degrees(self.degree, J)

    def _validate_params_extra(self) -> None:
        degrees = self._degrees()
        if self.directions not in ("diverse", "random"):
            raise ValueError(f"directions must be 'diverse' or 'random', got {self.directions!r}.")
        if self.directions == "diverse" and max(degrees) > 1:
            raise ValueError("directions='diverse' needs 1-D projections (degree=1); use directions='random'.")
        if not isinstance(self.ard, (bool, np.bool_, numbers.Integral)):  # NumPy's bool: e.g. from a parameter grid
            raise ValueError(f"ard must be a bool, got {self.ard!r}.")
        if not _is_int(self.n_direction_sets) or self.n_direction_sets < 1:
            raise ValueError(f"n_direction_sets must be a positive integer, got {self.n_direction_sets!r}.")
        if not _is_int(self.grid_size) or self.grid_size < 16:
            raise ValueError(f"grid_size must be an integer >= 16, got {self.grid_size!r}.")
        if self.ski_options is not None:
            if not isinstance(self.ski_options, dict):
                raise ValueError(f"ski_options must be a dict or None, got {self.ski_options!r}.")
            unknown = sorted(set(self.ski_options) - set(_SKI_OPTIONS))
            if unknown:
                raise ValueError(f"Unknown ski_options {unknown}; choose from {list(_SKI_OPTIONS)}.")
        if self.inference == "ski" and max(degrees) > 1:
            raise ValueError("inference='ski' needs 1-D projections (degree=1); use inference='exact'.")

    def _ski_possible(self) -> bool:
        return max(self._degrees()) == 1

    def _resolve_inference(self, n: int) -> str:
        """``inference``, or for ``"auto"``: exact up to :data:`PROJECTED_EXACT_MAX_N` rows and SKI beyond
        with 1-D projections; exact up to :data:`~hdgp.estimators._base.AUTO_EXACT_MAX_N` rows and
        sparse beyond otherwise."""
        ski = self._ski_possible()
        return resolve_inference(self.inference, n, exact_max_n=PROJECTED_EXACT_MAX_N if ski else AUTO_EXACT_MAX_N,
                                 ski_possible=ski)

    def _fit_candidate(self, Xt: torch.Tensor, yt: torch.Tensor, previous=None):
        """One candidate (direction set); above :data:`PROJECTED_EXACT_MAX_N` rows with exact or SKI
        inference from the hyper-parameters of an exact fit on :data:`SUBSET_START_ROWS` random rows
        (``start_ = "subset"``, its diagnostics in ``init_result_``): an optimum of the same kernel
        on fewer rows, from which the full objective needs few evaluations."""
        if previous is not None or Xt.shape[0] <= PROJECTED_EXACT_MAX_N or self.inference_ not in ("exact", "ski"):
            return super()._fit_candidate(Xt, yt, previous)
        model = self._build_model(Xt)
        init = self._subset_start(model, Xt, yt)
        return model, self._train(model, Xt, yt, desc="fit from the subset start"), init, "subset"

    def _subset_start(self, model, X: torch.Tensor, y: torch.Tensor):
        """Fit an exact GP sharing ``model``'s kernel on :data:`SUBSET_START_ROWS` random rows (seeded by
        the fit's seed and the candidate); its noise and constant mean become ``model``'s start."""
        rng = np.random.default_rng([self._fit_seed_, self._candidate_])
        rows = torch.as_tensor(np.sort(rng.choice(X.shape[0], SUBSET_START_ROWS, replace=False)), device=X.device)
        exact = ExactGPModel(model.kernel, noise_lower_bound=self.noise_lower_bound,
                             noise_prior=self._noise_prior()).to(**self._torch_kwargs)
        exact.likelihood.noise = model.likelihood.noise.detach()
        pk = model.kernel.base_kernel
        name = "input_lengthscale" if pk.ard else "projection_lengthscale"
        cap = SUBSET_LENGTHSCALE_CAP * getattr(pk, name).detach().clone()
        result = fit_hyperparameters(exact, X[rows], y[rows], optimizer=self.optimizer, max_iter=self.max_iter,
                                     random_state=self._fit_seed_, verbose=self.verbose,
                                     desc=f"start: exact fit on {SUBSET_START_ROWS} rows")
        with torch.no_grad():  # just above the (open) lower bound, which the constraint cannot invert
            model.likelihood.noise = exact.likelihood.noise.clamp_min(self.noise_lower_bound * (1 + 1e-6))
            model.mean.constant.copy_(exact.mean.constant)
            # a length-scale far beyond the inputs' spread has a vanishing gradient: what the subset
            # switched off could not come back on all rows, so it restarts within reach
            setattr(pk, name, torch.minimum(getattr(pk, name), cap))
        return result

    def _make_model(self, kernel: Kernel, X: torch.Tensor):
        if self.inference_ == "ski":
            return SKIProjectedGPModel(kernel, grid_size=self.grid_size, noise_lower_bound=self.noise_lower_bound,
                                       noise_prior=self._noise_prior(), **(self.ski_options or {}))
        return super()._make_model(kernel, X)

    def _n_candidates(self) -> int:
        return self.n_direction_sets

    def _direction_seed(self) -> int:
        """Seed of the current direction set: the fit's seed for the first, derived ones after it."""
        if self._candidate_ == 0:
            return self._fit_seed_
        return int(np.random.SeedSequence([self._fit_seed_, self._candidate_]).generate_state(1)[0])

    def _record_candidates(self, model, losses: dict) -> None:
        projected = model.kernel.base_kernel
        self.projections_, self.degrees_ = projected.projections, projected.degrees
        self.n_projections_ = len(projected.degrees)
        self.min_pairwise_angle_ = min_pairwise_angle(projected.projections)
        self.direction_set_losses_ = list(losses.values())

    def _make_kernel(self, X: torch.Tensor) -> Kernel:
        d = X.shape[-1]
        degrees = self._degrees(X.shape[0])
        if max(degrees) > d:  # only random directions reach here (diverse ones are 1-D)
            warnings.warn(
                f"degree {max(degrees)} exceeds the number of features ({d}): each such sub-kernel is an RBF "
                "kernel on all features with the random metric PᵀP (rank d), as in the paper's RPA-GP-3 on its "
                "4- and 5-feature sets (eq. 4 puts no bound on D_j). Lower `degree` for low-dimensional "
                "projections.", HDGPWarning, stacklevel=2)
        kw = dict(dtype=X.dtype, device=X.device)
        seed = self._direction_seed()
        if self.directions == "diverse":
            P = diverse_directions(d, len(degrees), random_state=seed, **kw)
        else:
            P = random_directions(d, degrees, random_state=seed, **kw)
        kernel = ProjectedAdditiveKernel(P, degrees, ard=bool(self.ard)).to(**kw)
        # start with unit-length-scale sub-kernels on projections of unit spread
        spread = (X @ P.T).std(dim=0).clamp_min(1e-6)
        if kernel.ard:
            kernel.input_lengthscale = spread.mean().expand(d)
        else:
            groups = torch.repeat_interleave(torch.arange(len(degrees), device=X.device),
                                             torch.tensor(degrees, device=X.device))
            per_group = torch.zeros(len(degrees), **kw).index_add(0, groups, spread)
            kernel.projection_lengthscale = per_group / torch.tensor(degrees, **kw)
        return ScaleKernel(kernel, outputscale_constraint=log_positive()).to(**kw)
