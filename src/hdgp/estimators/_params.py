"""Resolvers of parameters that several estimators share: one rule each.

``inference`` is resolved by :mod:`hdgp.inference.engines` (it belongs to the engines).
"""

from __future__ import annotations

import numbers

__all__ = ["MAX_ORDER_CAP", "resolve_max_order"]

#: ``max_order=None`` means every interaction order up to min(D, MAX_ORDER_CAP) (Duvenaud et al.'s
#: additive kernels; the order-R term has C(D, R) components, so orders above 10 are rarely needed).
MAX_ORDER_CAP = 10


def resolve_max_order(max_order, n_features: int, *, cap: int = MAX_ORDER_CAP) -> int:
    """The highest interaction order R of an additive kernel on ``n_features`` inputs.

    ``None`` → :math:`\\min(D, \\text{cap})` (``cap``: the estimator's default, :data:`MAX_ORDER_CAP`
    unless it says otherwise); otherwise an integer with :math:`1 \\le R \\le D`.

    Raises
    ------
    ValueError
        ``max_order`` is not None and not such an integer.
    """
    if max_order is None:
        return min(n_features, cap)
    if isinstance(max_order, bool) or not isinstance(max_order, numbers.Integral) or not 1 <= max_order <= n_features:
        raise ValueError(
            f"max_order must be None or an integer between 1 and the number of features "
            f"({n_features}), got {max_order!r}."
        )
    return int(max_order)
