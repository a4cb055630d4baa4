"""The repr of hdgp estimators: scikit-learn's, plus what was learned once fitted."""

from __future__ import annotations

from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._summary import summarize


class LearnedRepr:
    """scikit-learn's parameter repr; once fitted, followed by the learned quantities
    (:func:`hdgp.summary`: noise, length-scales, order variances, top Sobol terms, ...)."""

    def __repr__(self, N_CHAR_MAX=700):
        text = super().__repr__(N_CHAR_MAX)
        try:
            check_is_fitted(self)
        except NotFittedError:
            return text
        return f"{text}\n{summarize(self, header=False)}"
