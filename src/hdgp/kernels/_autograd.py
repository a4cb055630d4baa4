"""Guard for hand-written backward passes that are not themselves differentiable."""

from __future__ import annotations

import torch


def refuse_double_backward(kernel: str) -> None:
    """Raise when a backward pass runs under ``create_graph=True`` (grad mode on inside backward).

    The memory-light backward passes of the additive and projected kernels work in place,
    so autograd cannot differentiate them again; PyTorch's ``once_differentiable`` would
    return a second derivative of zero without a word whenever the incoming gradient does
    not itself require grad (a Hessian of ``f(K).sum()``), so they refuse instead.
    """
    if torch.is_grad_enabled():
        raise RuntimeError(f"{kernel} has first derivatives only (a hand-written backward pass); second "
                           "derivatives (create_graph=True, Hessians) are not available.")
