"""The input side of the OAK estimators: what turns a user's table into the OAK kernel's inputs.

:class:`OAKInputEncoder` encodes DataFrame text/categorical columns as level codes
(``encode_frame``), types every feature as continuous, two-point, binary or
categorical (``categorical_features``, ``binary_features``), warps continuous
features with the sinh-arcsinh flow or standardises them, clips them on request
(``transform_inputs``), and builds the input measures and the orthogonal additive kernel
on the result (``make_measure``, ``make_kernel``; Lu et al. 2022, Sections 3-4).
:class:`~hdgp.estimators.oak.OAKRegressor` is one (it inherits the encoder);
:class:`~hdgp.estimators.oak_classifier.OAKClassifier` keeps one in ``encoder_``.
Both use only these public methods.

Missing cells (NaN, or a missing value in a categorical DataFrame column) stay NaN through
the encoding; the kernel marginalises them
(:class:`~hdgp.kernels.orthogonal_kernel.OrthogonalAdditiveKernel`). Everything fitted on a
column (levels, two-point values, flow, range, measure) is fitted on its observed cells: the
flow, which takes complete columns, sees each column's missing cells at evenly spaced quantiles
of its observed values (:func:`_fill_for_flow`), which leaves each column's empirical
distribution, and so its flow, nearly unchanged; the filled values are used for nothing else.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
import torch
from gpytorch.kernels import Kernel
from gpytorch.priors import GammaPrior

from .._scaling import StandardizedInputs
from ..exceptions import HDGPWarning, warn_caller
from ..flows import LOG_TRANSFORMS, SinhArcsinhFlow
from ..kernels.feature_stack import FeatureStackKernel
from ..kernels.orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel, OrthogonalAdditiveKernel
from ..measures import MixtureMeasure, empirical_measure, gaussian_measure, gaussian_mixture_measure
from ._numeric_input import check_unique_columns

__all__ = ["OAKInputEncoder", "check_oak_params", "column_index", "term_indices", "terms_indices"]

MEASURES = ("gaussian", "empirical", "gmm")
HANDLE_UNKNOWN = ("error", "ignore", "warn")

#: Gamma(concentration=1, rate=0.2) prior on the order variances (a Gamma prior: OAK Section 5;
#: these values: the authors' code).
_ORDER_PRIOR = (1.0, 0.2)

_BEYOND_DATA = 1e150


def _check_handle_unknown(value) -> None:
    if not isinstance(value, str) or value not in HANDLE_UNKNOWN:
        raise ValueError(f"handle_unknown must be one of {HANDLE_UNKNOWN}, got {value!r}.")


def _level_text(value) -> str:
    """A level in messages: numbers as 7 (not 7.0), anything else as its text."""
    return f"{value:g}" if isinstance(value, float) else str(value)


#: Gamma(concentration=1, rate=0.2) prior on the order variances (a Gamma prior: OAK Section 5;
#: these values: the authors' code).


def _observed(column: np.ndarray) -> np.ndarray:
    """The cells of a 1-D column that are not missing (NaN)."""
    return column[~np.isnan(column)]


def _fill_for_flow(X: np.ndarray) -> np.ndarray:
    """``X`` with each column's missing cells replaced by its observed values' quantiles at evenly
    spaced levels :math:`(k + 1/2)/m`, :math:`k = 0..m-1` for :math:`m` missing cells: values that
    follow the column's observed distribution, so a flow fitted column by column sees nearly the
    distribution of the observed cells. Only for fitting the flow or the standardisation."""
    missing = np.isnan(X)
    if not missing.any():
        return X
    X = X.copy()
    for j in np.flatnonzero(missing.any(0)):
        rows = np.flatnonzero(missing[:, j])
        X[rows, j] = np.quantile(_observed(X[:, j]), (np.arange(len(rows)) + 0.5) / len(rows))
    return X


def check_missing_columns(X: np.ndarray, labels) -> None:
    """Refuse columns of ``X`` with no observed cell: nothing can be learned about them.

    Raises
    ------
    ValueError
        Naming every such column.
    """
    empty = np.flatnonzero(np.isnan(X).all(0)) if X.shape[0] else []
    if len(empty):
        raise ValueError(f"Column(s) {', '.join(repr(labels[j]) for j in empty)} have no observed value (every "
                         "cell missing); drop them before fitting.")


def _holds_text(X) -> bool:
    """Whether a 2-D array-like (not a DataFrame) has string cells."""
    try:
        arr = np.asarray(X)
    except ValueError:  # ragged: validate_data reports it
        return False
    if arr.ndim != 2:
        return False
    if arr.dtype.kind in "US":
        return True
    return arr.dtype.kind == "O" and any(isinstance(v, str) for v in arr.ravel())


def _is_discrete_dtype(series: pd.Series) -> bool:
    return isinstance(series.dtype, pd.CategoricalDtype) or series.dtype == object or pd.api.types.is_string_dtype(series)


def _column_specs(specs, n_features: int, what: str) -> list:
    """Column names/indices as given (one, or a list), or the positions of True in a boolean mask
    (scikit-learn's convention for ``categorical_features``; a mask read as indices would mean
    columns 0 and 1)."""
    if specs is None:
        return []
    if isinstance(specs, (str, numbers.Integral)) and not isinstance(specs, (bool, np.bool_)):
        return [specs]  # one column; a string is a name, not a list of characters
    specs = list(specs)
    flags = [isinstance(s, (bool, np.bool_)) for s in specs]
    if specs and all(flags):
        if len(specs) != n_features:
            raise ValueError(f"{what} as a boolean mask needs one entry per feature ({n_features}), got {len(specs)}.")
        return [j for j, flag in enumerate(specs) if flag]
    if any(flags):
        raise ValueError(f"{what} mixes booleans with column names/indices: {specs!r}.")
    return specs


def column_index(spec, n_features: int, names) -> int:
    """Position of the column ``spec`` (a name in ``names`` or an index in ``[-n, n)``)."""
    if isinstance(spec, str):
        if spec not in names:
            raise ValueError(f"Unknown column {spec!r}; the features are {', '.join(map(repr, names))}.")
        return names.index(spec)
    if not isinstance(spec, numbers.Integral) or not -n_features <= spec < n_features:
        raise ValueError(f"Column index {spec!r} is out of range for {n_features} features.")
    return int(spec) % n_features


def term_indices(term, names) -> tuple[int, ...]:
    """A term (a feature name or index, or a tuple of them) as its sorted feature indices."""
    if isinstance(term, (str, numbers.Integral)):
        term = (term,)
    indices = sorted(column_index(t, len(names), names) for t in term)
    if len(set(indices)) < len(indices):
        raise ValueError(f"The term {tuple(term)!r} names a feature more than once; a term is a set of "
                         "distinct features, e.g. ('x0', 'x1') for the interaction of x0 and x1.")
    return tuple(indices)


def terms_indices(terms, names) -> list[tuple[int, ...]]:
    """A list of terms (names or indices) as sorted index tuples, each at most once."""
    terms = [term_indices(t, names) for t in terms]
    if len(set(terms)) < len(terms):
        raise ValueError("terms lists a term more than once; each term enters the mean once.")
    return terms


def check_oak_params(est, booleans=("clip_inputs", "order_variance_prior"), flows=("auto",)) -> None:
    """Check the parameters every OAK estimator has (``est``'s attributes), the
    True/False parameters named in ``booleans`` and ``flow`` (a bool or one of ``flows``)."""
    if est.measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {est.measure!r}.")
    _check_handle_unknown(est.handle_unknown)
    if isinstance(est.gmm_components, bool) or not isinstance(est.gmm_components, numbers.Integral) \
            or est.gmm_components < 1:
        raise ValueError(f"gmm_components must be a positive integer, got {est.gmm_components!r}.")
    if not isinstance(est.sobol_threshold, numbers.Real) or not 0 < est.sobol_threshold <= 1:
        raise ValueError(f"sobol_threshold must be in (0, 1], got {est.sobol_threshold!r}.")
    if not isinstance(est.max_sobol_terms, numbers.Integral) or est.max_sobol_terms < 1:
        raise ValueError(f"max_sobol_terms must be a positive integer, got {est.max_sobol_terms!r}.")
    if not (isinstance(est.flow, (bool, np.bool_)) or (isinstance(est.flow, str) and est.flow in flows)):
        raise ValueError(f"flow must be True, False or {' or '.join(repr(f) for f in flows)}, got {est.flow!r}.")
    for name in booleans:
        if not isinstance(getattr(est, name), (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {getattr(est, name)!r}.")
    if est.log_transform not in LOG_TRANSFORMS:
        raise ValueError(f"log_transform must be one of {LOG_TRANSFORMS}, got {est.log_transform!r}.")


class OAKInputEncoder(StandardizedInputs):
    """Input encoding, feature typing, flow and measures of an OAK model (see the module docstring).

    Parameters
    ----------
    measure, gmm_components, flow, log_transform, clip_inputs, categorical_features, binary_features, handle_unknown
        As in :class:`~hdgp.estimators.oak.OAKRegressor`.

    Attributes
    ----------
    frame_levels_, frame_columns_, levels_, two_point_values_, categorical_features_, binary_features_,
    two_point_features_, continuous_features_, input_min_, input_max_, flow_
        Set by ``encode_frame(X, fit=True)`` and ``transform_inputs(X, fit=True)``, as documented on
        :class:`~hdgp.estimators.oak.OAKRegressor`.
    """

    def __init__(self, *, measure="gaussian", gmm_components=3, flow=True, log_transform="auto", clip_inputs=False,
                 categorical_features=None, binary_features="auto", handle_unknown="error"):
        self.measure = measure
        self.gmm_components = gmm_components
        self.flow = flow
        self.log_transform = log_transform
        self.clip_inputs = clip_inputs
        self.categorical_features = categorical_features
        self.binary_features = binary_features
        self.handle_unknown = handle_unknown

    def encode_frame(self, X, fit: bool):
        """Replace categorical/object/string DataFrame columns by the codes of their observed levels.

        ``frame_levels_`` maps a column label to its levels and ``frame_columns_`` lists the
        labels in column order (None for arrays), so a column is found by position whatever
        its label's type. A missing value in such a column stays missing (NaN), not a level of
        its own: the kernel marginalises it.

        An array given to a model fitted on such a DataFrame is read the same way, by
        position: its cells are level values (``"eu"``), not the codes, which are internal.
        An array with text cells (the object array a ``ColumnTransformer`` returns) is read as
        a table with columns x0, x1, ...: its text columns are categorical, the others numeric.
        """
        if not isinstance(X, pd.DataFrame):
            if fit and _holds_text(X):  # e.g. a ColumnTransformer's object array
                X = np.asarray(X, dtype=object)
                table = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
                # back to an array: an array has no feature names, and predict reads arrays by position
                return self.encode_frame(table.infer_objects(), fit=True).to_numpy(dtype=float)
            if fit:
                self.frame_levels_, self.frame_columns_ = {}, None
                return X
            columns = getattr(self, "frame_columns_", None)
            if not self.frame_levels_ or columns is None or np.ndim(X) != 2 or np.shape(X)[1] != len(columns):
                return X  # validate_data reports a shape mismatch
            # back to an array, so that scikit-learn still warns that the array has no feature names
            return self.encode_frame(pd.DataFrame(np.asarray(X, dtype=object), columns=columns), fit=False).to_numpy()
        check_unique_columns(X)
        if fit:
            self.frame_columns_ = list(X.columns)
            self.frame_levels_ = {
                c: list(pd.Series(X[c]).astype("category").cat.remove_unused_categories().cat.categories)
                for c in X.columns if _is_discrete_dtype(X[c])
            }
        if not self.frame_levels_:
            return X
        X = X.copy()
        for c, cats in self.frame_levels_.items():
            if c not in X.columns:
                continue  # validate_data reports the mismatch
            col = pd.Series(X[c])
            missing = col.isna().to_numpy()
            codes = pd.Index(cats).get_indexer(col)  # an unknown level's code is -1
            unknown = (codes == -1) & ~missing
            if unknown.any():
                self._unknown_levels(c, col[unknown].unique(), cats, int(unknown.sum()))
            codes = codes.astype(float)
            codes[missing] = np.nan
            X[c] = codes
        return X

    def _unknown_levels(self, column, values, known, n_rows: int) -> None:
        """Apply ``handle_unknown`` to ``values`` of ``column`` (in ``n_rows`` rows) not among the ``known`` levels."""
        shown = ", ".join(sorted(map(_level_text, values))[:5])
        policy = getattr(self, "handle_unknown", "error")  # a model saved before the option existed
        _check_handle_unknown(policy)  # (set after fit: not validated by it)
        if policy == "error":
            raise ValueError(f"Column {column!r} has level(s) {shown} not seen during fit (known: "
                             f"{', '.join(map(_level_text, known))}); "
                             "map them to a known level, or set handle_unknown='ignore'.")
        if policy == "warn":
            warn_caller(f"Column {column!r} has level(s) {shown} not seen during fit in {n_rows} row(s): its "
                        "effect and its interactions are set to their average (zero) there.")

    def _frame_labels(self) -> list:
        """The fitted DataFrame's column labels in order (empty for arrays)."""
        columns = getattr(self, "frame_columns_", None)
        if columns is None:  # a model saved before frame_columns_ existed
            columns = list(getattr(self, "feature_names_in_", []))
        return columns

    def _frame_positions(self) -> list[int]:
        """Positions of the DataFrame columns that ``_encode_frame`` turned into level codes."""
        columns = self._frame_labels()
        return [columns.index(c) for c in self.frame_levels_ if c in columns]

    def _resolve_features(self, X: np.ndarray) -> None:
        n_features = X.shape[1]
        labels = self.feature_names(n_features)  # an array's columns are x0, x1, ... as in sobol_indices_
        check_missing_columns(X, labels)
        declared_binary = [] if self.binary_features == "auto" else [
            column_index(s, n_features, labels)
            for s in _column_specs(self.binary_features, n_features, "binary_features")]
        declared_categorical = {
            column_index(spec, n_features, labels)
            for spec in _column_specs(self.categorical_features, n_features, "categorical_features")}
        overlap = set(declared_binary) & declared_categorical
        if overlap:
            raise ValueError(
                f"Columns {[labels[j] for j in sorted(overlap)]} are declared both binary and categorical.")
        # text columns are categorical unless declared binary
        categorical = declared_categorical | (set(self._frame_positions()) - set(declared_binary))
        if self.binary_features == "auto":
            binary = set()
            two_point = {j for j in range(n_features)
                         if j not in categorical and len(np.unique(_observed(X[:, j]))) == 2}
        else:
            binary, two_point = set(declared_binary), set()
        self.levels_ = {}
        for j in sorted(categorical | binary):
            levels = np.unique(_observed(X[:, j]))
            if j in categorical and not np.all(levels == np.round(levels)):
                raise ValueError(
                    f"Column {labels[j]!r} is declared categorical but holds non-integer numbers "
                    f"(e.g. {float(levels[levels != np.round(levels)][0])!r}); encode its levels as integers "
                    "or strings, or treat it as continuous."
                )
            if j in binary and len(levels) != 2:
                raise ValueError(f"Column {labels[j]!r} is declared binary but has {len(levels)} distinct values.")
            if j in categorical and len(levels) > 2 and len(levels) > 0.5 * X.shape[0]:
                warnings.warn(
                    f"Categorical column {labels[j]!r} has {len(levels)} levels in {X.shape[0]} rows (an identifier?): "
                    "its component can only memorise training rows, and its Sobol index says little. Drop it, or "
                    "treat it as continuous if its values are ordered.",
                    HDGPWarning, stacklevel=8)  # the user's fit (through atomic_fit and the input checks)
            self.levels_[j] = levels
        self.two_point_values_ = {}
        for j in sorted(two_point):
            observed = _observed(X[:, j])
            low, high = np.unique(observed)
            self.two_point_values_[j] = (float(low), float(high), float(np.mean(observed == high)))
        self.categorical_features_ = sorted(categorical)
        self.binary_features_ = sorted(binary | two_point)
        self.two_point_features_ = sorted(self.two_point_values_)
        self.continuous_features_ = [j for j in range(n_features) if j not in self.levels_ and j not in two_point]

    def _flow_in_fit(self):
        """The flow of the fit under way: ``flow``, or the one ``flow="choose"`` is trying (``_flow_fit``, set
        by :meth:`OAKRegressor.fit` so that the parameter itself never changes)."""
        return self.__dict__.get("_flow_fit", self.flow)

    def transform_inputs(self, X: np.ndarray, fit: bool) -> np.ndarray:
        """Flow (or standardise) continuous columns; map discrete columns to level codes 0..M-1.
        Missing cells (NaN) stay NaN (module docstring)."""
        if fit:
            self._resolve_features(X)
        out = X.copy()
        cont = self.continuous_features_
        if cont:
            X_cont = X[:, cont]
            missing = np.isnan(X_cont)
            if fit:
                self.input_min_, self.input_max_ = np.nanmin(X_cont, 0), np.nanmax(X_cont, 0)
                labels = self.feature_names(X.shape[1])
                flow = self._flow_in_fit()
                auto = isinstance(flow, str)  # "auto" (validated)
                filled = _fill_for_flow(X_cont)
                self.flow_ = (SinhArcsinhFlow(self.log_transform, skip_light_tails=auto)
                              .fit(filled, [labels[j] for j in cont]) if auto or flow else None)
                if self.flow_ is None:
                    StandardizedInputs._transform_inputs(self, filled, fit=True)
            elif self.clip_inputs:
                X_cont = np.clip(X_cont, self.input_min_, self.input_max_)
            X_cont = np.where(missing, self.input_min_, X_cont)  # a stand-in the flow takes; NaN again below
            warped = (np.clip(self.flow_.transform(X_cont), -_BEYOND_DATA, _BEYOND_DATA)
                      if self.flow_ is not None else StandardizedInputs._transform_inputs(self, X_cont, fit=False))
            out[:, cont] = np.where(missing, np.nan, warped)
        elif fit:
            self.flow_ = None
        for j, (low, high, _) in self.two_point().items():
            out[:, j] = (X[:, j] - low) / (high - low)
        coded_frame_columns = set(self._frame_positions())
        for j, levels in self.levels_.items():
            missing = np.isnan(X[:, j])
            codes = np.clip(np.searchsorted(levels, X[:, j]), 0, len(levels) - 1).astype(float)
            unseen = (levels[codes.astype(int)] != X[:, j]) & ~missing
            if unseen.any():
                if j not in coded_frame_columns:  # a DataFrame's text levels were handled by _encode_frame
                    self._unknown_levels(self.feature_names(X.shape[1])[j], np.unique(X[unseen, j]).tolist(),
                                         levels.tolist(), int(unseen.sum()))
                codes[unseen] = ConstrainedCategoricalKernel.UNKNOWN
            codes[missing] = np.nan
            out[:, j] = codes
        return out

    # --------------------------------------------------------------- kernel
    def make_measure(self, cols: np.ndarray, random_state=None):
        """The input measure of ``cols`` (n, k) that the constrained kernels integrate against (OAK Section 4),
        fitted on each column's observed (not NaN) cells."""
        if self.measure == "gaussian":
            return gaussian_measure(np.nanmean(cols, 0), np.nanstd(cols, 0))
        observed = [_observed(c) for c in cols.T]
        if self.measure == "empirical":
            return empirical_measure(observed)
        return gaussian_mixture_measure(observed, self.gmm_components, random_state=random_state)

    def make_kernel(self, X: torch.Tensor, *, max_order: int, order_variance_prior: bool, random_state=None,
                    start=None) -> Kernel:
        """The OAK kernel (OAK eq. 13; missing cells marginalised) on transformed inputs ``X``: constrained SE kernels on the continuous
        columns with this encoder's measure, two-point measures on the two-valued ones, constrained
        categorical kernels on the level codes, summed over every interaction order up to ``max_order``
        (Newton-Girard, eq. 11) with a Gamma prior on the order variances when ``order_variance_prior``.
        ``start(kernel)``, when given, sets the continuous kernel's starting length-scales."""
        n_dims = X.shape[-1]
        Xn = X.detach().cpu().numpy()
        kernels, groups = [], []
        if self.continuous_features_:
            continuous = ConstrainedSEKernel(self.make_measure(Xn[:, self.continuous_features_], random_state))
            if start is not None:
                start(continuous)
            kernels.append(continuous)
            groups.append(self.continuous_features_)
        two_point = self.two_point()
        if two_point:
            # point masses at the scaled training values 0 and 1 with their training
            # frequencies (stored, so a model rebuilt on inducing inputs gets the same measure)
            cols = sorted(two_point)
            upper = np.array([two_point[j][2] for j in cols])
            ends = np.tile([0.0, 1.0], (len(cols), 1))
            measure = MixtureMeasure(ends, np.zeros_like(ends), np.column_stack([1 - upper, upper]))
            kernels.append(ConstrainedSEKernel(measure))
            groups.append(cols)
        for j, levels in self.levels_.items():
            counts = np.bincount(_observed(Xn[:, j]).astype(int), minlength=len(levels))
            rank = 0 if j in self.binary_features_ else 1
            kernels.append(ConstrainedCategoricalKernel(counts / counts.sum(), rank=rank))
            groups.append([j])
        base = kernels[0] if len(kernels) == 1 else FeatureStackKernel(kernels, groups)
        prior = GammaPrior(*_ORDER_PRIOR) if order_variance_prior else None
        kernel = OrthogonalAdditiveKernel(base, num_dims=n_dims, max_order=max_order, order_variance_prior=prior)
        # the authors' initialisation: every order variance 1 (constrained kernels are < 1
        # on the diagonal, so high orders still start with little prior variance)
        kernel.order_variances = torch.ones(max_order + 1)
        return kernel


    def discrete_columns(self) -> tuple:
        """Every binary and categorical column: the constrained categorical kernel reads
        integer level codes, so k-means inducing inputs take the cluster's most frequent
        code there (:func:`~hdgp.inference.inducing.kmeans_inducing_points` does that by
        itself only for columns with few levels). Codes reach the kernel through integer
        indexing, which has no gradient, so inducing inputs learned by SVGP keep them.
        Auto-detected two-point columns start on their observed values 0 and 1 too,
        where their measure has its mass.
        """
        return tuple(sorted([*self.levels_, *self.two_point()]))

    def two_point(self) -> dict:
        """``two_point_values_``; empty for models saved before two-point columns existed
        (those modelled every two-valued column with the binary kernel, in ``levels_``)."""
        return getattr(self, "two_point_values_", {})


    def feature_names(self, n_features: int | None = None) -> list[str]:
        """Column labels as strings: DataFrame columns (any label type), else ``x0, x1, ...``."""
        if hasattr(self, "feature_names_in_"):
            return [str(c) for c in self.feature_names_in_]
        if getattr(self, "frame_columns_", None) is not None:
            return [str(c) for c in self.frame_columns_]
        return [f"x{i}" for i in range(self.n_features_in_ if n_features is None else n_features)]

    _two_point = two_point  # the name hdgp.plotting reads
