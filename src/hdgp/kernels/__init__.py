"""GPyTorch kernels implemented by hdgp (usable in any GPyTorch/BoTorch model)."""

from .gam_kernel import AdditiveRBFKernel
from .imq_kernel import IMQKernel

__all__ = ["AdditiveRBFKernel", "IMQKernel"]
