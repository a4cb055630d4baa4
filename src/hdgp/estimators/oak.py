"""``OAKRegressor``: orthogonal additive GP (Lu et al., 2022) with Sobol-index explanations."""

from __future__ import annotations

import numpy as np
import torch
from gpytorch.kernels import Kernel
from sklearn.utils.validation import check_is_fitted

from .. import explain
from .._arrays import as_float64
from ..flows import light_tailed
from ..plotting import plot_components
from ._base import COMMON_PARAMS, BaseGPRegressor, _is_int, atomic_fit
from ._oak_fit_policy import (FEATURE_START_LENGTHSCALE, FULL_ORDER_MAX_FEATURES, LOW_NOISE_START_FACTOR,  # noqa: F401
                               ORDER_RAISE_MASS, RAISED_ORDER_START, SMOOTH_START_LENGTHSCALE,
                               SMOOTH_START_MIN_FEATURES, SPARSE_STAGE_TWO_MAX_ITER, STAGE_MIN_ROWS, STAGE_ROWS,
                               STAGE_TWO_MAX_ITER,
                               OAKFitPolicy)
from .oak_encoder import OAKInputEncoder, check_oak_params, term_indices, terms_indices

__all__ = ["OAKRegressor"]

#: With ``flow="choose"`` on at most this many rows, a fit with a light-tailed continuous feature is
#: repeated with ``flow="auto"`` (those features standardised, not warped) and the higher log marginal
#: likelihood kept: cheap on small tables, where the warp of evenly spread inputs can cost most
#: (measurements: benchmarks/README.md, "OAK's default fit policy").
FLOW_CHOICE_MAX_ROWS = 500
#: Accepted string values of ``flow`` (besides True and False).
FLOWS = ("auto", "choose")


class OAKRegressor(OAKInputEncoder, OAKFitPolicy, BaseGPRegressor):
    r"""Orthogonal additive GP regression with analytic Sobol indices.

    .. math::

        k(\mathbf x, \mathbf x') = \sum_{r=0}^{R} \sigma_r^2\, e_r\big(\tilde k_1, \dots, \tilde k_D\big)

    where each :math:`\tilde k_i` integrates to zero under the input measure
    :math:`p_i` (OAK eqs. 7–10; appendix C for discrete features), so the additive
    components are the FANOVA decomposition and their variances are Sobol indices
    (Section 4). The recipe of appendix H: continuous features are warped by a
    per-feature normalising flow and get a constrained SE kernel under a Gaussian
    (or empirical / Gaussian-mixture) measure; binary and categorical features get
    constrained categorical kernels under their level frequencies; a Gamma prior on
    the order variances (parameters (1, 0.2), from the authors' code) gives MAP estimates; Sobol indices of every term
    are computed after fitting and ranked.

    Parameters
    ----------
    max_order : int or None, default=None
        Highest interaction order :math:`\tilde D`. None: with at most :data:`FULL_ORDER_MAX_FEATURES`
        features every order :math:`D`; with more it is chosen from the data: the model is
        fitted at order :math:`\min(D, 3)` (the paper finds almost all Sobol mass in orders
        :math:`\le 3`, Fig. 4) and refitted at :math:`\min(D, 10)`, starting from the first fit's
        parameters (the added orders' variances small, :data:`RAISED_ORDER_START`), when the normalised Sobol
        mass of order 3 exceeds :data:`ORDER_RAISE_MASS` (in a fit of two stages, see ``inference``: on more than
        2,500 rows decided in stage one, otherwise after stage two). The order used is ``max_order_``. The order-:math:`R` term has
        :math:`\binom{D}{R}` components, so low orders keep the kernel's sum and the Sobol
        enumeration cheap.
    measure : {"gaussian", "empirical", "gmm"}, default="gaussian"
        Input measure of continuous features (fitted to the warped training data).
    gmm_components : int, default=3
        Components per feature when ``measure="gmm"``.
    flow : bool, "auto" or "choose", default="choose"
        ``True``: warp continuous features with :class:`~hdgp.flows.SinhArcsinhFlow`;
        ``False`` standardises them; ``"auto"`` warps only those that are skewed or heavy-tailed
        and standardises light-tailed, roughly symmetric ones (``skip_light_tails`` of the flow:
        uniform-like features, evenly spread grids), whose Gaussianising warp steepens at the
        data's edges (on the paper's eq. (5) example the full flow doubles the error).
        ``"choose"``: ``True``, except on at most :data:`FLOW_CHOICE_MAX_ROWS` training rows where
        ``"auto"`` would leave a feature unwarped: there the model is fitted both ways and the higher
        log marginal likelihood kept (``flow_log_likelihoods_``).
    log_transform : {"auto", True, False, "shifted"}, default="auto"
        Passed to the flow: log of skewed features (``"auto"``: for a right tail :math:`\log x`
        if positive and that removes the skew, else :math:`\log(x - x_{\min} + c)` with the
        least skewed start :math:`c`; left tails get none), or the
        OAK authors' :math:`\log(x - x_{\min} + 1)` of every feature (``"shifted"``, meant for
        inputs in their natural units); see :class:`~hdgp.flows.SinhArcsinhFlow`. Beyond the
        training range on the log's side every log continues as its tangent line, so a test value
        there (a zero in a feature that was positive in training) is warped, not refused.
    clip_inputs : bool, default=False
        At prediction, clip every continuous feature to the range seen in ``fit``
        (``input_min_``, ``input_max_``) before the flow, as the OAK authors' UCI
        protocol does: beyond the training range a prediction then stays at its
        boundary value instead of following the flow's extrapolated tails, which
        are fitted to no data. Components and plots see the clipped inputs too.
    categorical_features : list of int or str, boolean mask, or None
        Columns to treat as categorical (indices, names for DataFrames, or a
        boolean mask with one entry per feature).
        DataFrame columns of categorical / object / string dtype always are.
        Numeric columns declared categorical must hold integer codes.
    binary_features : "auto", list of int or str, or None, default="auto"
        Binary columns, modelled by the constrained binary kernel (appendix C), which
        refuses values not seen in training. ``"auto"`` instead finds every other
        numeric column with exactly two distinct training values :math:`a < b` and
        gives it a constrained SE kernel under its two-point empirical measure, on
        :math:`(x - a)/(b - a)`: on :math:`\{a, b\}` this spans the same zero-mean
        functions as the binary kernel, and it is also defined between and beyond
        the two values, so a level that training happened to miss (a rare level of
        a small data set) gets an interpolated prediction instead of an error.
    handle_unknown : {"error", "ignore", "warn"}, default="error"
        What ``predict`` (and the component and Sobol methods) do with a level of a categorical
        or declared binary column that ``fit`` never saw: raise a ``ValueError`` naming it, or
        (``"ignore"``; ``"warn"`` also issues an :class:`~hdgp.exceptions.HDGPWarning`) give it
        the average effect: that feature's component and every interaction with it are zero
        there, their mean under the level frequencies by the orthogonality constraint, and add
        no variance, as in scikit-learn's ``OneHotEncoder(handle_unknown="ignore")``. The rest
        of the prediction is the model's as usual.
    order_variance_prior : bool, default=True
        Use a Gamma prior on :math:`\sigma_r^2` (MAP), as the paper does (Section 5); its parameters
        (1, 0.2) are the authors' code's.
    sobol_threshold : float, default=0.99
        Cumulative normalised Sobol mass kept in ``components_``: the shortest prefix of the
        ranking that reaches it. (OAK appendix H step 3 instead drops each term whose own index
        is below 0.01; the two differ when many small terms add up.)
    max_sobol_terms : int, default=100000
        Cap on the number of terms whose individual Sobol index is computed: only the
        interaction orders whose terms fit under it in total are enumerated (first-order
        terms always), with a ``CostWarning``. ``sobol_order_`` stays exact; ``components_``
        (and so ``predict_truncated``) then holds enumerated terms only, with a second
        ``CostWarning`` when they do not reach ``sobol_threshold``.
    inference : {"auto", "exact", "sparse", "variational"}, default="auto"
        ``"exact"``: Cholesky inference, :math:`O(n^3)`. ``"sparse"``: SGPR, Titsias'
        collapsed bound with ``n_inducing`` inducing inputs :math:`Z`, :math:`O(nm^2)`.
        ``"variational"``: minibatch SVGP (natural gradients + Adam; ``optimizer`` and
        ``n_restarts`` do not apply). ``"auto"``: exact up to 5000 training rows, sparse
        beyond. A fit (not a warm one) on more than :data:`STAGE_MIN_ROWS` rows runs in two stages: the
        whole fit (starts, order choice and raise) with exact inference on a random 60 % of the rows, at
        most :data:`STAGE_ROWS`, then one warm fit on all rows with the inference asked for, at the order
        chosen there (on more than 2,500 rows with at most :data:`STAGE_TWO_MAX_ITER`, sparse
        :data:`SPARSE_STAGE_TWO_MAX_ITER`, L-BFGS iterations unless ``max_iter`` is set)
        (``start_ = "subset"``, stage one's diagnostics in ``init_result_`` and ``start_losses_``;
        :mod:`hdgp.estimators._oak_fit_policy`). With inducing points the posterior mean is :math:`c + k(x, Z)\alpha_u`,
        so the Sobol indices and component means are OAK eqs. 13–14 with :math:`X \to Z`;
        component variances use the whole :math:`q(f(Z))`
        (:func:`hdgp.explain.component_posterior`). Inducing points start at k-means
        centres whose binary and categorical columns take observed level codes.
    feature_starts : bool, default=False
        Also train from one start per continuous feature, that feature's length-scale at
        :data:`FEATURE_START_LENGTHSCALE` (0.1 on the warped input) and the others at the
        authors' 1, keeping the lowest MAP objective (no held-out data involved). It finds
        optima where one feature acts through fine detail, which L-BFGS from the smooth
        authors' start does not reach. Costs one more fit per continuous feature; exact and sparse
        inference only. A higher marginal likelihood is not always better held out (the
        measurements: ``benchmarks/results/oak/README.md``).
    low_noise_start : bool, default=False
        Also train from the authors' start with the noise variance at
        :data:`LOW_NOISE_START_FACTOR` times ``noise_lower_bound`` (instead of 0.1), keeping the
        lowest MAP objective. Nearly noise-free data (simulations such as energy) can have an
        optimum that explains the data by the function where the default start stays with more
        noise. One more fit; as with ``feature_starts``, a higher marginal likelihood is not always
        better held out (the measurements: ``benchmarks/results/oak/README.md``).
    n_inducing, batch_size, noise_lower_bound, noise_prior, optimizer, max_iter, n_restarts, warm_start, random_state, device, dtype, verbose
        See :class:`~hdgp.estimators._base.BaseGPRegressor`.

    Attributes
    ----------
    max_order_ : int
        Highest interaction order of the fitted kernel.
    sobol_indices_ : dict
        ``{(feature name, ...): normalised Sobol index}``, sorted decreasingly.
    sobol_order_ : ndarray of shape (R,)
        Normalised Sobol mass of each order 1..R (OAK Fig. 4).
    components_ : list of tuple of int
        Highest-ranked terms (feature indices) reaching ``sobol_threshold``.
    continuous_features_, binary_features_, categorical_features_ : list of int
        Flow-warped continuous columns, binary columns (declared and auto-detected)
        and categorical columns.
    two_point_features_ : list of int
        The auto-detected binary columns (constrained SE kernel under two points).
    two_point_values_ : dict
        Column index → ``(a, b, weight of b)``: the two training values and the
        training frequency of the upper one.
    levels_ : dict
        Column index → sorted training levels of every categorical and declared binary column.
    frame_levels_ : dict
        DataFrame column label → its observed levels (categories, text, ...) in code order;
        empty for array input.
    frame_columns_ : list or None
        The training DataFrame's column labels in order (None for array input).
    input_min_, input_max_ : ndarray of shape (len(continuous_features_),)
        Training range of the continuous features (used by ``clip_inputs``).
    flow_ : SinhArcsinhFlow or None
    flow_log_likelihoods_ : dict or None
        ``{"flow": ..., "auto": ...}``: log marginal likelihoods of the fits with the full flow and
        with ``flow="auto"`` when ``flow="choose"`` tried both; the higher was kept. None otherwise.
    inference_ : str
        Engine used (``"exact"``, ``"sparse"`` or ``"variational"``).
    posterior_ : ExactPosterior or InducingPosterior
        Support points ``posterior_.X`` (transformed training inputs, or inducing inputs)
        and weights ``posterior_.alpha`` of the Sobol indices.
    start_losses_ : dict
        Final objective (negative log marginal likelihood − log prior, per row) from each start:
        ``"authors"``; for exact and sparse fits with :data:`SMOOTH_START_MIN_FEATURES` or more
        continuous features also ``"smooth"``, with ``low_noise_start`` ``"low noise"``, and with
        ``feature_starts`` ``"short <feature>"`` for each continuous feature (``"warm"``: a warm
        start that began from a start no longer tried). The lowest was kept. After two stages, those of
        stage one (on its rows).

    References
    ----------
    Lu, Boukouvalas & Hensman (2022), *Additive Gaussian Processes Revisited*, ICML.
    """

    _engine_needs = {"sobol": True}
    _takes_missing = True  # missing cells (NaN) are marginalised by the kernel (hdgp.kernels.orthogonal_kernel)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def __init__(self, max_order=None, *, measure="gaussian", gmm_components=3, flow="choose",
                 log_transform="auto", clip_inputs=False, categorical_features=None, binary_features="auto",
                 handle_unknown="error", order_variance_prior=True, sobol_threshold=0.99, max_sobol_terms=100_000,
                 inference="auto", n_inducing=512, batch_size=None,
                 noise_lower_bound=COMMON_PARAMS["noise_lower_bound"], noise_prior=None, optimizer="lbfgs",
                 max_iter=None, n_restarts=0, feature_starts=False, low_noise_start=False, warm_start=False,
                 random_state=None, device=None, dtype="float64", verbose=False):
        self.max_order = max_order
        self.measure = measure
        self.gmm_components = gmm_components
        self.flow = flow
        self.log_transform = log_transform
        self.clip_inputs = clip_inputs
        self.categorical_features = categorical_features
        self.binary_features = binary_features
        self.handle_unknown = handle_unknown
        self.order_variance_prior = order_variance_prior
        self.sobol_threshold = sobol_threshold
        self.max_sobol_terms = max_sobol_terms
        self.inference = inference
        self.n_inducing = n_inducing
        self.batch_size = batch_size
        self.noise_lower_bound = noise_lower_bound
        self.noise_prior = noise_prior
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.n_restarts = n_restarts
        self.feature_starts = feature_starts
        self.low_noise_start = low_noise_start
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.verbose = verbose

    # ------------------------------------------------------------ validation
    def _validate_params_extra(self) -> None:
        check_oak_params(self, ("clip_inputs", "order_variance_prior", "feature_starts", "low_noise_start"),
                         flows=FLOWS)

    # ------------------------------------------------- the encoder's hooks
    _transform_inputs = OAKInputEncoder.transform_inputs  # (an alias: warnings keep their stack level)

    def _make_kernel(self, X: torch.Tensor) -> Kernel:
        X = X if self._stage.kernel_inputs is None else self._stage.kernel_inputs  # staged: all rows' measures
        return self.make_kernel(X, max_order=self._kernel_order(X.shape[-1]),
                                order_variance_prior=self.order_variance_prior, random_state=self._fit_seed_,
                                start=self._set_start)

    def _discrete_columns(self) -> tuple:
        return self.discrete_columns()

    def _feature_names(self, n_features: int | None = None) -> list[str]:
        return self.feature_names(n_features)

    def _term(self, term) -> tuple[int, ...]:
        return term_indices(term, self._feature_names())

    def _terms(self, terms) -> list[tuple[int, ...]]:
        return terms_indices(terms, self._feature_names())

    # ------------------------------------------------------------------ fit
    @atomic_fit
    def fit(self, X, y):
        """Fit the flow, the measures and the GP hyperparameters (MAP), then rank Sobol indices.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            DataFrame columns of categorical, object or string dtype are categorical.
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        X = self.encode_frame(X, fit=True)
        choose = isinstance(self.flow, str) and self.flow == "choose"
        try:
            if choose:
                self._flow_fit, self._flow_choice_X = True, X  # the full flow first
            self._fit_and_choose_order(X, y)
            self.flow_log_likelihoods_ = None
            if choose and self._compare_flows(X):
                kept = {k: v for k, v in self.__dict__.items() if k not in ("_flow_choice_X", "_flow_fit")}
                self._flow_fit = "auto"  # the light-tailed features standardised instead of warped
                self._fit_and_choose_order(X, y)
                scores = {"flow": kept["log_marginal_likelihood_value_"], "auto": self.log_marginal_likelihood_value_}
                if scores["auto"] <= scores["flow"]:
                    self.__dict__.clear()
                    self.__dict__.update(kept)
                self.flow_log_likelihoods_ = scores
        finally:
            self.__dict__.pop("_flow_choice_X", None)
            self.__dict__.pop("_flow_fit", None)
        return self

    def _fits_per_start(self) -> int:
        """For the cost estimate, made in the first fit: two when ``flow="choose"`` will fit ``"auto"`` too."""
        X = getattr(self, "_flow_choice_X", None)
        if X is None or self._flow_in_fit() != True:  # noqa: E712 (the second fit, flow="auto", was counted by the first)
            return 1
        return 2 if self._compare_flows(X) else 1

    def _compare_flows(self, X) -> bool:
        """Whether ``flow="choose"`` also fits the model with ``flow="auto"`` (after the full flow's fit
        on ``X``) and keeps the higher log marginal likelihood: not for a warm start; on at most
        :data:`FLOW_CHOICE_MAX_ROWS` rows with a continuous feature that ``"auto"`` leaves unwarped
        (light-tailed, roughly symmetric)."""
        if self.warm_start or self.flow_ is None:
            return False
        try:  # a coded DataFrame or an array-like of numbers (the fit has just read it)
            X = np.asarray(X, dtype=float)
        except (TypeError, ValueError):
            return False
        if X.ndim != 2 or X.shape[0] > FLOW_CHOICE_MAX_ROWS:
            return False
        columns = (X[:, j][~np.isnan(X[:, j])] for j in self.continuous_features_)
        return any(column.size > 2 and np.ptp(column) > 0 and light_tailed(column) for column in columns)

    def _compute_sobol(self) -> None:
        # the posterior's support points: training inputs (exact) or inducing inputs (sparse/variational)
        self.sobol_ = explain.compute_sobol(self.kernel_, self.posterior_.X, self.posterior_.alpha,
                                            self.max_sobol_terms)
        names = self._feature_names()
        self.sobol_indices_ = {tuple(names[i] for i in u): float(v) for u, v in zip(self.sobol_.terms, self.sobol_.values)}
        self.sobol_order_ = self.sobol_.by_order.cpu().numpy()
        self.components_ = explain.select_terms(self.sobol_, self.sobol_threshold)

    def _prepare_predict_inputs(self, X) -> torch.Tensor:
        check_is_fitted(self, "posterior_")
        return super()._prepare_predict_inputs(self.encode_frame(X, fit=False))

    # -------------------------------------------------------- explanations
    def predict_component(self, X, term, return_std: bool = False):
        r"""Posterior mean (and std) of the component :math:`f_u`, in the units of ``y``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            All columns, checked as by ``predict`` (number, names, known levels); only the
            values of the columns in ``term`` change the result, so the others can hold any
            valid value (e.g. one training row repeated along a grid).
        term : int, str or tuple of them
            Feature indices or names :math:`u` (OAK eq. 13). ``()`` is the order-0 term
            :math:`\sigma_0^2 \mathbf 1^\top\alpha` of the kernel, without the fitted constant mean
            and the target's mean (which the fit usually absorbs it into, leaving it near 0).
        """
        Xt = self._prepare_predict_inputs(X)
        mean, var = explain.component_posterior(self.posterior_, self._term(term), Xt)
        mean = as_float64(mean) * self.y_scale_
        if return_std:
            return mean, np.sqrt(as_float64(var)) * self.y_scale_
        return mean

    def predict_truncated(self, X, terms=None):
        """Posterior mean using only ``terms`` (default ``components_``) plus the constant."""
        Xt = self._prepare_predict_inputs(X)
        terms = self.components_ if terms is None else self._terms(terms)
        return as_float64(explain.truncated_mean(self.posterior_, terms, Xt)) * self.y_scale_ + self.y_mean_

    def truncation_curve(self, X, y, max_terms: int = 50):
        """Test RMSE as ranked terms are added (OAK Figs. 5–6).

        Returns
        -------
        dict with ``n_terms``, ``cumulative_sobol`` and ``rmse`` arrays (length ≤ ``max_terms``).
        """
        if not _is_int(max_terms) or max_terms < 1:  # a negative one sliced off the last terms
            raise ValueError(f"max_terms must be a positive integer, got {max_terms!r}.")
        Xt = self._prepare_predict_inputs(X)
        y = np.asarray(y, dtype=float).reshape(-1)
        if len(y) != Xt.shape[0]:  # one value would broadcast against every row
            raise ValueError(f"X has {Xt.shape[0]} rows but y has {len(y)}.")
        terms = self.sobol_.terms[:max_terms]
        means = explain.component_means(self.posterior_, [(), *terms], Xt)
        running = as_float64(self.posterior_.constant + means[0])
        rmse = []
        for mean in as_float64(means[1:]):
            running = running + mean
            pred = running * self.y_scale_ + self.y_mean_
            rmse.append(float(np.sqrt(np.mean((pred - y) ** 2))))
        return {
            "n_terms": np.arange(1, len(terms) + 1),
            "cumulative_sobol": np.cumsum(self.sobol_.values[: len(terms)].cpu().numpy()),
            "rmse": np.asarray(rmse),
        }

    def plot_components(self, terms=None, **kwargs):
        """Plot components (default: the first- and second-order terms of ``components_``).

        See :func:`hdgp.plotting.plot_components`.
        """
        return plot_components(self, terms, **kwargs)
