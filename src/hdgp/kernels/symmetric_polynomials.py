"""Elementary symmetric polynomials :math:`e_r` of a stack of arrays, the sums behind the additive
kernel (Duvenaud et al., 2011), and the adjoint of their recurrence.

They are evaluated with the subtraction-free recurrence

.. math::

    e_r(k_1, \\dots, k_i) = e_r(k_1, \\dots, k_{i-1}) + k_i\\, e_{r-1}(k_1, \\dots, k_{i-1}),

which costs the same :math:`O(D R)` elementwise passes as the Newton–Girard
formulae (Duvenaud eq. 1.13, OAK Algorithm 1) but has none of their cancellation.
Reversing it gives the gradient in the same number of passes (:func:`_reverse_sweep`).
"""

from __future__ import annotations

import torch

__all__ = ["elementary_symmetric"]


def elementary_symmetric(base: torch.Tensor, max_order: int) -> torch.Tensor:
    r"""Elementary symmetric polynomials :math:`e_0, \dots, e_R` of a stack of arrays.

    .. math::

        e_r(k_1, \dots, k_D) = \sum_{i_1 < \dots < i_r} \prod_{l=1}^{r} k_{i_l}
        \qquad (\text{Duvenaud eqs. 1.8–1.12})

    computed elementwise with the recurrence
    :math:`e_r^{(i)} = e_r^{(i-1)} + k_i e_{r-1}^{(i-1)}` (no subtractions).

    Parameters
    ----------
    base : torch.Tensor of shape (D, ...)
        The :math:`D` arrays :math:`k_i` (e.g. one kernel matrix per input feature).
    max_order : int
        Highest order :math:`R \ge 0` to return.

    Returns
    -------
    torch.Tensor of shape (R + 1, ...)
        ``out[r]`` is :math:`e_r(k_1, \dots, k_D)`; orders above :math:`D` are zero.

    Examples
    --------
    >>> import torch
    >>> elementary_symmetric(torch.tensor([[1.0], [2.0], [3.0]]), 3).flatten().tolist()
    [1.0, 6.0, 11.0, 6.0]
    """
    out = base.new_zeros((max_order + 1,) + tuple(base.shape[1:]))
    out[0] = 1.0
    for i in range(base.shape[0]):
        _absorb(out, base[i], min(i + 1, max_order))
    return out


def _absorb(e: torch.Tensor, k: torch.Tensor, top: int) -> None:
    """In place: e_r ← e_r + k·e_{r-1} for r = top..1 (descending, so e_{r-1} is still old)."""
    for r in range(top, 0, -1):
        e[r].addcmul_(k, e[r - 1])


def _reverse_sweep(k, g, variances, prefix, e, grad_k):
    r"""One tile of the backward pass (see :class:`_AdditiveSum`): returns the tile's
    :math:`\partial L/\partial\sigma^2` and writes :math:`\partial L/\partial k` into ``grad_k``
    (None: only the variances' gradient). ``prefix`` and ``e`` are scratch buffers shaped like
    ``(D, R) + k.shape[1:]`` and ``(R + 1,) + k.shape[1:]``."""
    n_dims, max_order = k.shape[0], variances.numel() - 1
    e.zero_()
    e[0] = 1.0
    for i in range(n_dims):  # prefix[i, r] = e_r(k_1..k_{i-1}) for r < R: the values each step multiplies
        prefix[i] = e[:max_order]
        _absorb(e, k[i], min(i + 1, max_order))
    grad_var = torch.tensordot(e, g, dims=g.dim())
    if grad_k is None:
        return grad_var
    adj = variances.view((-1,) + (1,) * g.dim()) * g
    for i in reversed(range(n_dims)):
        gb = grad_k[i]
        torch.mul(adj[1], prefix[i, 0], out=gb)  # the first term written, not added to zeros
        for r in range(1, max_order):
            gb.addcmul_(adj[r + 1], prefix[i, r])
        # adjoint of e_r ← e_r + k e_{r-1}: a_{r} ← a_{r} + k a_{r+1}, ascending r
        for r in range(max_order):
            adj[r].addcmul_(k[i], adj[r + 1])
    return grad_var
