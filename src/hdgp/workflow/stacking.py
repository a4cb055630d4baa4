r"""``--model auto``'s mixture: stacking weights of the candidates' validation predictive distributions.

Bayesian stacking of predictive distributions (Yao, Vehtari, Simpson & Gelman 2018, *Using
stacking to average Bayesian predictive distributions*, Bayesian Analysis 13(3), eq. 4): with
:math:`p_k(y_i \mid x_i)` candidate k's predictive density (classification: probability) of
validation row i, fitted without that row, the weights solve

.. math::
    \max_{w \in \Delta_K} \; \frac1m \sum_{i=1}^m \log \sum_{k=1}^K w_k\, p_k(y_i \mid x_i),

a concave problem over the simplex. :func:`stacking_weights` solves it by expectation-maximisation
of mixture weights (each step the mean responsibility; the objective never decreases, and its
maximum is the global one). The members of the fitted mixture are the candidates whose weight
reaches :data:`MIN_WEIGHT` (at most :data:`MAX_MEMBERS`), with weights solved again among
themselves (:func:`stack_members`). One member with all the weight is the single best choice.

The mixture predicts (:class:`StackedRegressor`) the mean :math:`\sum_k w_k \mu_k` and the
variance :math:`\sum_k w_k(\sigma_k^2 + \mu_k^2) - \bar\mu^2` (the members' variances plus the
spread of their means), or (:class:`StackedClassifier`) the probabilities :math:`\sum_k w_k p_k`.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone

__all__ = ["MIN_WEIGHT", "MAX_MEMBERS", "mixture_evidence", "mixture_gain", "stacking_weights", "stack_members",
           "StackedRegressor", "StackedClassifier"]

#: A candidate with a smaller stacking weight is left out of the mixture (the others' are solved again).
MIN_WEIGHT = 0.05
#: Most members a mixture keeps (each is refitted on all training rows).
MAX_MEMBERS = 3
_EM_ITERATIONS = 5000
_EM_TOLERANCE = 1e-10


def stacking_weights(terms: dict) -> dict:
    """Weights on the simplex that maximise the mean log of the mixture's validation density.

    Parameters
    ----------
    terms : dict
        Candidate name → its per-row validation log densities :math:`\\log p_k(y_i \\mid x_i)`
        (the same rows for every name, in the same order).

    Returns
    -------
    dict
        Name → weight (non-negative, summing to one).

    Examples
    --------
    Two rows favour a, one b; the optimum solves :math:`2(0.9 - 0.8 w_a) = 0.1 + 0.8 w_a`,
    :math:`w_a = 17/24`:

    >>> w = stacking_weights({"a": np.log([0.9, 0.9, 0.1]), "b": np.log([0.1, 0.1, 0.9])})
    >>> round(w["a"], 3), round(w["b"], 3)
    (0.708, 0.292)
    """
    names = list(terms)
    logs = np.column_stack([np.asarray(terms[k], dtype=np.float64) for k in names])
    logs = np.where(np.isfinite(logs), logs, -745.0)  # a row a candidate gives no density: exp underflows to 0
    dens = np.exp(logs - logs.max(axis=1, keepdims=True))  # rescaled per row: the maximiser is the same
    w = np.full(len(names), 1.0 / len(names))
    last = -np.inf
    for _ in range(_EM_ITERATIONS):
        mix = dens @ w
        objective = float(np.mean(np.log(mix)))
        w = np.mean(dens * w / mix[:, None], axis=0)  # M-step: the mean responsibility of each component
        if objective - last < _EM_TOLERANCE:
            break
        last = objective
    w = np.clip(w, 0.0, None)
    w = w / w.sum()
    vertex = int(np.argmax(np.mean(logs, axis=0)))  # EM crawls on a flat optimum: never end below the best one
    with np.errstate(divide="ignore"):
        if np.mean(np.log(dens @ w)) < np.mean(np.log(dens[:, vertex])):
            w = np.eye(len(names))[vertex]
    return dict(zip(names, w.tolist()))


def stack_members(terms: dict, *, max_members: int = MAX_MEMBERS, min_weight: float = MIN_WEIGHT) -> dict:
    """The mixture's members and weights: :func:`stacking_weights` over all candidates, then over those
    with weight ≥ ``min_weight`` (at most ``max_members``, the heaviest; ties in the order given)."""
    weights = stacking_weights(terms)
    order = sorted(weights, key=lambda k: -weights[k])  # stable: equal weights keep the candidates' order
    kept = [k for k in order if weights[k] >= min_weight][:max_members] or order[:1]
    if len(kept) == len(weights):
        return {k: weights[k] for k in order}
    again = stacking_weights({k: terms[k] for k in kept})
    return {k: again[k] for k in sorted(again, key=lambda k: -again[k])}


def mixture_gain(terms: dict, weights: dict) -> np.ndarray:
    """Per validation row, the mixture's log density minus that of the best single candidate (the
    highest mean of ``terms``): :math:`\\log \\sum_k w_k p_k(y_i \\mid x_i) - \\log p_b(y_i \\mid x_i)`."""
    best = max(terms, key=lambda k: float(np.mean(terms[k])))
    logs = np.column_stack([np.asarray(terms[k], dtype=np.float64) for k in weights])
    top = logs.max(axis=1)
    mix = top + np.log(np.exp(logs - top[:, None]) @ np.asarray(list(weights.values())))
    return mix - np.asarray(terms[best], dtype=np.float64)


def mixture_evidence(terms: dict, weights: dict) -> tuple[float, float]:
    """The mixture's mean validation gain over the best single candidate (:func:`mixture_gain`) and the
    gain that ``len(weights) - 1`` weights fitted on these m rows give by themselves, :math:`(K-1)/2m`
    (Akaike's half a nat per fitted parameter): keep the mixture only when the first is larger."""
    gain = float(np.mean(mixture_gain(terms, weights)))
    return gain, (len(weights) - 1) / (2 * len(next(iter(terms.values()))))


class _Stacked(BaseEstimator):
    """A mixture of ``members`` (``(name, estimator, encoding, columns)``) with ``weights``, on a table of
    ``features`` in the ``"codes"`` encoding (one column per feature); a one-hot member gets each
    categorical feature as indicators of its ``levels`` (feature → number of levels).

    Like scikit-learn's ensembles, the constructor only stores the members as unfitted templates:
    :meth:`fit` fits a clone of each (``members_``), and :meth:`from_members` builds the mixture of
    members fitted elsewhere (``hdgp fit --model auto``), with clones of them as its parameters. So
    ``sklearn.base.clone`` gives the same mixture unfitted, and ``get_params`` / ``set_params`` reach
    each member's parameters by its name (``"OAK__max_iter"``)."""

    _takes_missing = False
    #: The attribute :mod:`hdgp.io.modelfile` saves as nested estimators (each member's own node).
    _model_file_members = "members_"

    def __init__(self, members=None, *, weights=None, features=None, levels=None, handle_unknown: str = "error"):
        self.members = members
        self.weights = weights
        self.features = features
        self.levels = levels
        self.handle_unknown = handle_unknown

    @classmethod
    def from_members(cls, members, weights, features, levels: dict, **params):
        """A fitted mixture of ``members`` (``(name, fitted estimator, encoding, column names)``) on the
        table's ``features`` (``levels``: categorical feature → its number of levels); ``params``: the
        other constructor parameters. Its ``members`` parameter holds unfitted clones of them."""
        fitted = [(str(name), est, str(encoding), list(columns)) for name, est, encoding, columns in members]
        out = cls([(name, clone(est, safe=False), encoding, list(columns)) for name, est, encoding, columns in fitted],
                  weights=[float(w) for w in weights], features=list(features), levels=dict(levels), **params)
        out.__dict__.update(out._layout())
        out.members_ = fitted
        return out

    def _params_from_fitted(self) -> None:
        """Constructor parameters from the fitted mixture where they are missing: a model file of format
        2.6 (before they were parameters) stores only ``members_``, ``weights_`` and the layout."""
        if self.members is None:
            self.members = [(name, clone(est, safe=False), encoding, list(columns))
                            for name, est, encoding, columns in self.members_]
            self.weights = [float(w) for w in self.weights_]
            self.features = [str(c) for c in self.feature_names_in_]
            self.levels = dict(self.levels_)
            if hasattr(self, "n_classes"):
                self.n_classes = len(self.classes_)

    @property
    def names_(self) -> list:
        """The members' preset names."""
        return [m[0] for m in self.members_]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor parameters; with ``deep``, also each member's estimator under its name and
        that estimator's parameters as ``<name>__<parameter>``."""
        out = super().get_params(deep=False)
        if deep:
            for name, est, _, _ in self.members or []:
                out[name] = est
                if hasattr(est, "get_params"):
                    out.update((f"{name}__{k}", v) for k, v in est.get_params(deep=True).items())
        return out

    def set_params(self, **params):
        """Set constructor parameters, a member's estimator by its name, or its parameters as
        ``<name>__<parameter>`` (``members`` itself first, when given)."""
        if "members" in params:
            self.members = params.pop("members")
        for name in [n for n, _, _, _ in self.members or [] if n in params]:
            est = params.pop(name)
            self.members = [(n, est if n == name else e, enc, cols) for n, e, enc, cols in self.members]
        return super().set_params(**params)

    def _layout(self, X=None, y=None) -> dict:
        """Check the parameters; the fitted ``weights_`` (normalised to sum to one), ``feature_names_in_``
        (``features``, else the columns of ``X``), ``n_features_in_`` and ``levels_``."""
        if not self.members:
            raise ValueError(f"{type(self).__name__} needs members: a list of (name, estimator, encoding, "
                             "columns), e.g. from hdgp fit --model auto; it has none to fit.")
        names = [m[0] for m in self.members]
        reserved = set(super().get_params(deep=False))
        bad = sorted({n for n in names if names.count(n) > 1 or "__" in n or n in reserved})
        if bad:
            raise ValueError(f"member names must be unique, without '__' and not a parameter name; got {bad}.")
        k = len(self.members)
        w = np.full(k, 1.0 / k) if self.weights is None else np.asarray(self.weights, dtype=np.float64)
        if w.shape != (k,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"weights must be {k} non-negative numbers, not all zero (one per member); "
                             f"got {self.weights!r}.")
        if self.features is not None:
            features = list(self.features)
        elif isinstance(X, pd.DataFrame):
            features = [str(c) for c in X.columns]
        else:
            features = [f"x{j}" for j in range(np.shape(X)[1])]
        return {"weights_": w / w.sum(), "feature_names_in_": np.asarray(features, dtype=object),
                "n_features_in_": len(features), "levels_": dict(self.levels or {})}

    def _inputs(self, X, encoding: str, columns, layout: dict | None = None):
        """``X`` (the ``"codes"`` layout, one column per feature) as the member's input frame (``layout``:
        that of :meth:`_layout`, else the fitted one)."""
        n_features, names, levels = (self.n_features_in_, self.feature_names_in_, self.levels_) if layout is None \
            else (layout["n_features_in_"], layout["feature_names_in_"], layout["levels_"])
        values = X.to_numpy(dtype=np.float64) if isinstance(X, pd.DataFrame) else np.asarray(X, dtype=np.float64)
        index = X.index if isinstance(X, pd.DataFrame) else None
        if values.ndim != 2 or values.shape[1] != n_features:
            raise ValueError(f"X has shape {values.shape}; this model takes {n_features} feature "
                             f"columns ({', '.join(map(str, names))}).")
        if encoding != "codes" and levels:
            parts = []
            for j, c in enumerate(names):
                n_levels = levels.get(c)
                parts += ([values[:, j]] if n_levels is None
                          else [(values[:, j] == level).astype(np.float64) for level in range(n_levels)])
            values = np.column_stack(parts)
        return pd.DataFrame(values, columns=list(columns), index=index)

    def fit(self, X, y):
        """Fit a clone of every member on ``(X, y)`` (the ``"codes"`` layout), each in its own encoding:
        the mixture of ``members`` with ``weights``. The parameters are left as they are, and so is a
        fitted mixture whose refit fails."""
        layout = self._layout(X, y)
        fitted = []
        for name, est, encoding, columns in self.members:
            member = clone(est)
            member.fit(self._inputs(X, encoding, columns, layout), y)
            fitted.append((name, member, encoding, list(columns)))
        self.__dict__.update(layout)
        self.members_ = fitted
        return self

    def _member(self, est):
        if self.handle_unknown == "ignore" and getattr(est, "handle_unknown", "ignore") != "ignore":
            est = copy.copy(est)  # fitted state shared, read-only
            est.handle_unknown = "ignore"
        return est

    def _each(self, X, method: str, **kwargs):
        return [getattr(self._member(est), method)(self._inputs(X, encoding, columns), **kwargs)
                for _, est, encoding, columns in self.members_]


class StackedRegressor(RegressorMixin, _Stacked):
    """``--model auto``'s mixture of regressors (module docstring): ``predict(X, return_std=True)`` gives
    the mixture's mean and standard deviation.

    Parameters
    ----------
    members : list of (name, estimator, encoding, columns)
        Each member's preset name (unique), its unfitted estimator, its encoding of the table
        (``"codes"`` or ``"onehot"``) and the names of its input columns.
    weights : array-like of shape (n_members,), default=None
        The mixture weights (normalised to sum to one); None: equal weights.
    features : list of str, default=None
        The table's feature columns (the ``"codes"`` layout); None: the columns of ``X`` in ``fit``.
    levels : dict, default=None
        Categorical feature → its number of levels (codes ``0..L-1``), for the one-hot members.
    handle_unknown : {"error", "ignore"}, default="error"
        ``"ignore"``: predict with every member that has this parameter set to ``"ignore"`` (a
        categorical level unseen in training is then not an error).

    Attributes
    ----------
    members_ : list of (name, fitted estimator, encoding, columns)
    weights_ : ndarray, the stacking weights (sum to one)
    feature_names_in_, n_features_in_, levels_ : the table's layout
    """

    def predict(self, X, return_std: bool = False):
        parts = self._each(X, "predict", return_std=True)
        w = self.weights_
        means = np.column_stack([np.asarray(m, dtype=np.float64) for m, _ in parts])
        stds = np.column_stack([np.asarray(s, dtype=np.float64) for _, s in parts])
        mean = means @ w
        if not return_std:
            return mean
        second = (stds ** 2 + means ** 2) @ w
        return mean, np.sqrt(np.clip(second - mean ** 2, 0.0, None))


class StackedClassifier(ClassifierMixin, _Stacked):
    """``--model auto``'s mixture of classifiers: ``predict_proba`` is the weighted mean of the
    members' class probabilities (by class code ``0..K-1``; ``classes_``).

    Parameters are those of :class:`StackedRegressor` and ``n_classes`` (int, default None: the number
    of distinct codes in the ``y`` given to ``fit``).
    """

    def __init__(self, members=None, *, weights=None, features=None, levels=None, n_classes=None,
                 handle_unknown: str = "error"):
        super().__init__(members, weights=weights, features=features, levels=levels, handle_unknown=handle_unknown)
        self.n_classes = n_classes

    @classmethod
    def from_members(cls, members, weights, features, levels: dict, n_classes: int = 2):
        return super().from_members(members, weights, features, levels, n_classes=n_classes)

    def _layout(self, X=None, y=None) -> dict:
        n_classes = self.n_classes if self.n_classes is not None else len(np.unique(y))
        return {**super()._layout(X, y), "classes_": np.arange(n_classes)}

    def predict_proba(self, X):
        out = 0.0
        for (_, est, encoding, columns), w in zip(self.members_, self.weights_):
            proba = np.asarray(self._member(est).predict_proba(self._inputs(X, encoding, columns)), dtype=np.float64)
            full = np.zeros((proba.shape[0], len(self.classes_)))
            full[:, np.asarray(est.classes_, dtype=np.int64)] = proba
            out = out + w * full
        return out

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
