"""Constructor-parameter rules declared as scikit-learn declares them, checked in ``fit``.

An estimator lists its rules in ``_parameter_constraints`` with the constraint types of
scikit-learn (``Interval``, ``StrOptions``, ``"boolean"``, a class, ``None``), and
:func:`validate_constraints` checks them with scikit-learn's own validator, so a wrong value
raises ``InvalidParameterError`` (a ``ValueError``) naming the parameter, the estimator, what
is allowed and what was given. One rule is added: ``True``/``False`` is not a count, although
Python (and scikit-learn's ``Interval(Integral, ...)``) treats ``bool`` as an integer.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import (  # the constraint types scikit-learn's own estimators use
    Interval,
    InvalidParameterError,
    StrOptions,
    validate_parameter_constraints,
)

__all__ = ["COUNT", "POSITIVE_COUNT", "Interval", "StrOptions", "validate_constraints"]

#: An integer >= 0 (e.g. ``n_restarts``).
COUNT = Interval(Integral, 0, None, closed="left")
#: An integer >= 1 (e.g. ``max_iter``, ``n_inducing``).
POSITIVE_COUNT = Interval(Integral, 1, None, closed="left")


def _is_count_rule(rule) -> bool:
    return isinstance(rule, Interval) and rule.type is Integral


def validate_constraints(estimator) -> None:
    """Check ``estimator``'s constructor parameters against its ``_parameter_constraints``.

    Raises
    ------
    InvalidParameterError
        A parameter breaks its rule (a bool given for a count included).
    """
    rules = type(estimator)._parameter_constraints
    params = estimator.get_params(deep=False)
    owner = type(estimator).__name__
    for name, allowed in rules.items():
        value = params.get(name)
        if isinstance(value, (bool, np.bool_)) and "boolean" not in allowed and any(map(_is_count_rule, allowed)):
            options = " or ".join("None" if rule is None else str(rule) for rule in allowed)
            raise InvalidParameterError(
                f"The {name!r} parameter of {owner} must be {options}, not a bool. Got {value!r} instead."
            )
    validate_parameter_constraints(rules, params, caller_name=owner)
