"""GPyTorch kernels implemented by hdgp (usable in any GPyTorch/BoTorch model).

This layer imports nothing of hdgp above it (only :mod:`hdgp.exceptions` and :mod:`hdgp.measures`).

- :class:`SEKernel`, :class:`MaternFeatureKernel`: unit-scale per-feature base kernels, stacked
  along a feature dimension (:class:`FeatureStackKernel` combines groups of features);
- :class:`AdditiveKernel`: all interaction orders of such base kernels (Duvenaud et al., 2011);
- :class:`ConstrainedSEKernel`, :class:`ConstrainedCategoricalKernel`: base kernels orthogonal to
  constant functions under an input measure (OAK);
- :class:`ProjectedAdditiveKernel`: a sum of kernels on projections of the inputs (DPA-GP / RPA-GP);
- :class:`AdditiveRBFKernel`: the first-order (GAM) additive RBF kernel;
- :class:`RBFARDKernel`, :class:`IMQKernel`: scaled ARD kernels on all features at once;
- :mod:`hdgp.kernels.functions`: the autograd sums the kernels run on.
"""

from ._constraints import log_greater_than, log_positive
from .additive_kernel import AdditiveKernel
from .ard_kernel import IMQKernel, RBFARDKernel
from .feature_stack import FeatureStackKernel
from .gam_kernel import AdditiveRBFKernel
from .matern_kernel import MaternFeatureKernel
from .orthogonal_kernel import ConstrainedCategoricalKernel, ConstrainedSEKernel
from .projected_kernel import ProjectedAdditiveKernel
from .se_kernel import SEKernel

__all__ = ["AdditiveKernel", "AdditiveRBFKernel", "ConstrainedCategoricalKernel", "ConstrainedSEKernel",
           "FeatureStackKernel", "IMQKernel", "MaternFeatureKernel", "ProjectedAdditiveKernel", "RBFARDKernel",
           "SEKernel", "log_greater_than", "log_positive"]
