"""Resolvers of parameters that several estimators share: one rule each.

``inference`` is resolved by :mod:`hdgp.inference.engines` (it belongs to the engines).
"""

from __future__ import annotations

import numbers

__all__ = ["MAX_ORDER_CAP", "MAX_ORDER_START", "resolve_max_order"]

#: ``max_order=None`` means every interaction order up to min(D, MAX_ORDER_CAP) (Duvenaud et al.'s
#: additive kernels; the order-R term has C(D, R) components, so orders above 10 are rarely needed).
MAX_ORDER_CAP = 10
#: Order an OAK fit with ``max_order=None`` is first fitted to (Lu et al., 2022, Sec. 5 and Fig. 4:
#: almost all Sobol mass of fitted models lies in orders <= 3); the estimator raises it to the cap
#: when the fitted top order holds non-negligible Sobol mass.
MAX_ORDER_START = 3


def resolve_max_order(max_order, n_features: int, *, cap: int = MAX_ORDER_CAP, start: int | None = None) -> int:
    """The highest interaction order R of an additive kernel on ``n_features`` inputs.

    ``None`` → :math:`\\min(D, \\text{cap})` (``cap``: the estimator's default, :data:`MAX_ORDER_CAP`
    unless it says otherwise), or :math:`\\min(D, \\text{start}, \\text{cap})` when ``start`` is given (the
    first order of a fit that raises it from the data); otherwise an integer with :math:`1 \\le R \\le D`.

    Raises
    ------
    ValueError
        ``max_order`` is not None and not such an integer.
    """
    if max_order is None:
        return min(n_features, cap) if start is None else min(n_features, cap, start)
    if isinstance(max_order, bool) or not isinstance(max_order, numbers.Integral) or not 1 <= max_order <= n_features:
        raise ValueError(
            f"max_order must be None or an integer between 1 and the number of features "
            f"({n_features}), got {max_order!r}."
        )
    return int(max_order)
