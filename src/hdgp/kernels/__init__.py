"""GPyTorch kernels implemented by hdgp (usable in any GPyTorch/BoTorch model)."""

from ._constraints import log_greater_than, log_positive
from .ard_kernel import IMQKernel, RBFARDKernel
from .gam_kernel import AdditiveRBFKernel
from .matern_kernel import MaternFeatureKernel
from .se_kernel import SEKernel

__all__ = ["AdditiveRBFKernel", "IMQKernel", "MaternFeatureKernel", "RBFARDKernel", "SEKernel", "log_greater_than", "log_positive"]
