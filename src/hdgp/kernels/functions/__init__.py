"""Execution paths of kernel sums, apart from the kernels that use them (as GPyTorch keeps
``functions/`` apart from ``kernels/``): autograd functions with hand-written backward passes and
the triangle walks of symmetric matrices."""

from .additive_sum import additive_sum, symmetric_additive_sum

__all__ = ["additive_sum", "symmetric_additive_sum"]
