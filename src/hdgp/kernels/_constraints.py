"""Log-scale positivity constraints for GPyTorch parameters."""

import torch
from gpytorch.constraints import GreaterThan, Positive

__all__ = ["log_positive", "log_greater_than"]


def log_positive() -> Positive:
    """Positivity constraint through ``exp`` (raw parameter = log value).

    L-BFGS converges in far fewer steps on log-scale parameters than on GPyTorch's
    default softplus, which is nearly linear for large values, so a step in the raw
    parameter moves a length-scale or variance by a factor, not by an amount
    (evaluation counts: benchmarks/README.md, "Numbers behind choices in src/").
    """
    return Positive(transform=torch.exp, inv_transform=torch.log)


def log_greater_than(lower_bound: float) -> GreaterThan:
    """``value = lower_bound + exp(raw)``: a lower bound with a log-scale raw parameter."""
    return GreaterThan(lower_bound, transform=torch.exp, inv_transform=torch.log)
