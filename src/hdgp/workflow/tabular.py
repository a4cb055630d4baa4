"""``TabularModel``: a fitted estimator together with the table schema it was trained on.

It is what ``hdgp fit`` writes and ``hdgp predict`` / ``hdgp explain`` read: pandas
in, pandas out, with the user's column names and categorical labels.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..io.modelfile import save
from ..io.table import TableError, TableSchema
from .classification import predict_proba_codes, proba_columns, proba_frame
from .._summary import summarize

__all__ = ["TabularModel", "predict_frame"]


def predict_frame(est, X, *, level: float = 0.95) -> pd.DataFrame:
    """Predictions of any fitted hdgp regressor as a DataFrame (pandas in, pandas out).

    Parameters
    ----------
    est : fitted regressor with ``predict(X, return_std=True)``
    X : DataFrame or array-like
        The output keeps a DataFrame's index.
    level : float, default=0.95
        Probability of the central interval ``mean ± z·std`` (Gaussian predictive of y).

    Returns
    -------
    DataFrame with columns ``mean, std, lower_<pct>, upper_<pct>``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, hdgp
    >>> X = pd.DataFrame({"a": np.linspace(0, 1, 12)}, index=[f"r{i}" for i in range(12)])
    >>> est = hdgp.GPRegressor(random_state=0, max_iter=20).fit(X, np.sin(5 * X["a"]))
    >>> hdgp.workflow.predict_frame(est, X.head(2)).index.tolist()
    ['r0', 'r1']
    """
    z, lower, upper = _interval(level)
    mean, std = est.predict(X, return_std=True)
    index = X.index if isinstance(X, (pd.DataFrame, pd.Series)) else None
    return pd.DataFrame({"mean": mean, "std": std, lower: mean - z * std, upper: mean + z * std}, index=index)


def _interval(level: float) -> tuple[float, str, str]:
    """The normal quantile z of a central ``level`` interval and its two column names."""
    z = norm.ppf(0.5 + level / 2) if 0 < level < 1 else np.nan
    if not np.isfinite(z):  # 1 - 1e-16 rounds 0.5 + level/2 to 1: an infinite interval
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), and not so close to 1 that the interval "
                         f"is infinite; got {level!r}.")
    pct = f"{100 * level:.10g}".replace(".", "_")  # 0.9999999999 -> 99_99999999, not 100
    return z, f"lower_{pct}", f"upper_{pct}"


class TabularModel:
    """A fitted hdgp estimator plus the :class:`~hdgp.io.TableSchema` of its training table.

    Build one with :func:`hdgp.workflow.fit_table` (or ``hdgp fit``); save it with
    :func:`hdgp.save` and read it back with :func:`hdgp.load`.

    Parameters
    ----------
    estimator : fitted hdgp estimator
        Trained on ``schema.encode(table)``.
    schema : TableSchema
    metadata : dict, optional
        Anything recorded at fit time: ``model`` (preset name), ``metrics`` on the
        held-out rows, ``data`` summary, ``holdout`` arrays, ``selection`` table.

    Examples
    --------
    >>> import pandas as pd, numpy as np, hdgp
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"a": rng.normal(size=40), "g": rng.choice(["u", "v"], 40)})
    >>> df["y"] = df["a"] + (df["g"] == "u")
    >>> tm = hdgp.workflow.fit_table(df, "y", model="rbf-ard", params={"max_iter": 20})
    >>> list(tm.predict(df.head(2)).columns)
    ['mean', 'std', 'lower_95', 'upper_95']
    """

    def __init__(self, estimator, schema: TableSchema, metadata: dict | None = None):
        self.estimator = estimator
        self.schema = schema
        self.metadata = dict(metadata or {})

    # --------------------------------------------------------------- files
    def _to_model_file(self):
        return self.estimator, self.schema, self.metadata

    @classmethod
    def _from_model_file(cls, estimator, schema, metadata):
        if not isinstance(schema, TableSchema):
            raise TypeError("the model file's table section is not a TableSchema")
        return cls(estimator, schema, metadata)

    def save(self, path):
        """Write to ``path`` (see :func:`hdgp.save`)."""
        return save(self, path)

    # ------------------------------------------------------------- predict
    @property
    def target(self) -> str | None:
        """Name of the predicted column."""
        return self.schema.target

    @property
    def task(self) -> str:
        """``"regression"`` or ``"classification"``."""
        return self.schema.task

    @property
    def classes_(self) -> np.ndarray:
        """Class labels, as in the training table (classification only)."""
        if self.task != "classification":
            raise AttributeError("classes_ exists only for a model fitted to a classification target.")
        return np.asarray(self.schema.classes)

    def transform(self, frame: pd.DataFrame, unknown_levels: str = "error") -> pd.DataFrame:
        """The numeric inputs the estimator sees for ``frame`` (checks columns and values;
        ``unknown_levels`` as in :meth:`predict`)."""
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"TabularModel.predict needs a pandas DataFrame, got {type(frame).__name__}.")
        if unknown_levels not in ("error", "ignore"):
            raise ValueError(f"unknown_levels must be 'error' or 'ignore', got {unknown_levels!r}.")
        if frame.shape[0] == 0:
            raise TableError("The table has no rows to predict.")
        missing = "keep" if getattr(self.estimator, "_takes_missing", False) else "error"  # OAK marginalises them
        return self.schema.encode(frame, unknown=unknown_levels, missing=missing)

    def _estimator_for(self, unknown_levels: str):
        """The estimator, or a shallow copy that reads the code of an unknown level as its average effect
        (silently: the schema has warned, naming the values the codes stand for)."""
        est = self.estimator
        if unknown_levels == "ignore" and getattr(est, "handle_unknown", "ignore") != "ignore":
            est = copy.copy(est)  # fitted state shared, read-only; the user's model keeps its setting
            est.handle_unknown = "ignore"
        return est

    def predict(self, frame: pd.DataFrame, *, level: float = 0.95, id_column: str | None = None,
                unknown_levels: str = "error") -> pd.DataFrame:
        """Predictions per row: the target's distribution (regression) or class probabilities.

        Parameters
        ----------
        frame : DataFrame
            Must contain every training feature column (any order; extra columns,
            including the target, are ignored).
        level : float, default=0.95
            Regression: probability of the central interval ``mean ± z·std``
            (Gaussian predictive of y). Not used by classifiers.
        id_column : str, optional
            Column copied to the output first, to match predictions to rows.
        unknown_levels : {"error", "ignore"}, default="error"
            A categorical value that training never saw: a :class:`~hdgp.io.TableError`, or
            (``"ignore"``, with an :class:`~hdgp.exceptions.HDGPWarning` naming the rows) a
            prediction without it: OAK models give that column's effect and its interactions their
            average over the training levels (zero); one-hot models set all of its indicator
            columns to 0.

        Returns
        -------
        DataFrame with the input's index. Regression: columns ``[id_column,] mean,
        std, lower_<pct>, upper_<pct>`` in the target's original units.
        Classification: ``[id_column,] label, proba_<class>...``, the most probable
        class (a label as in the training table) and one probability per class.
        """
        if id_column is not None:
            if id_column not in frame.columns:
                raise TableError(f"The id column {id_column!r} is not in the table. "
                                 f"Columns: {', '.join(map(repr, frame.columns))}.")
            if id_column in self._prediction_columns(level):  # checked before the (possibly long) prediction
                raise TableError(f"The id column {id_column!r} has the name of a prediction column; rename it.")
        if self.task == "classification":
            out = self.predict_proba(frame, unknown_levels=unknown_levels)
        else:
            X = self.transform(frame, unknown_levels)
            out = predict_frame(self._estimator_for(unknown_levels), X, level=level)
            if not np.all(np.isfinite(out[["mean", "std"]].to_numpy())):
                raise FloatingPointError("The model produced non-finite predictions; refit it (see `hdgp fit --help`).")
        if id_column is not None:
            out.insert(0, id_column, frame[id_column].to_numpy())
        return out

    def _prediction_columns(self, level: float) -> list[str]:
        """The columns :meth:`predict` returns (without the id column)."""
        if self.task == "classification":
            return proba_columns(self.schema)
        return ["mean", "std", *_interval(level)[1:]]

    def predict_proba(self, frame: pd.DataFrame, *, unknown_levels: str = "error") -> pd.DataFrame:
        """Class probabilities per row (classification only; ``unknown_levels`` as in :meth:`predict`).

        Returns
        -------
        DataFrame with the input's index and columns ``label`` (most probable class)
        and ``proba_<class>`` for each class of ``classes_``; rows sum to one.
        """
        if self.task != "classification":
            raise TypeError(f"predict_proba needs a classifier; this model fits {self.target!r} as regression. "
                            "Use predict for its mean and intervals.")
        X = self.transform(frame, unknown_levels)
        proba = predict_proba_codes(self._estimator_for(unknown_levels), X, len(self.schema.classes))
        return proba_frame(self.schema, proba, X.index)

    # ------------------------------------------------------------- display
    def summary(self) -> str:
        """Model, data and held-out accuracy in a few lines."""
        meta = self.metadata
        lines = [f"hdgp model {meta.get('model', type(self.estimator).__name__)!s} predicting {self.target!r} "
                 f"from {len(self.schema.features)} column(s)"
                 + (f" ({len(self.schema.categorical)} categorical)" if self.schema.categorical else "")]
        if self.task == "classification":
            lines.append(f"  classes: {', '.join(map(repr, self.schema.classes))}")
        metrics = meta.get("metrics")
        if metrics:
            lines.append("  held-out: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float)))
        members = getattr(self.estimator, "members_", None)
        if members:  # --model auto's mixture: each member with its weight
            for (name, est, _, _), weight in zip(members, self.estimator.weights_):
                lines.append(f"  member {name}, weight {weight:.3f}:")
                text = summarize(est, header=False, classes=self.schema.classes)
                lines += ["  " + line for line in text.splitlines()]
        else:
            lines.append(summarize(self.estimator, header=False, classes=self.schema.classes))
        return "\n".join(line for line in lines if line)

    def __repr__(self) -> str:
        return self.summary()
