"""Array conversions shared by the estimators and the summaries below them."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["as_float64"]


def as_float64(t: torch.Tensor) -> np.ndarray:
    """A tensor as a float64 NumPy array: what the estimators return whatever their ``dtype``.

    Model outputs are mapped back to the target's units after this cast, so a float32 model
    still returns targets of large magnitude at full float64 resolution.
    """
    return t.detach().cpu().numpy().astype(np.float64, copy=False)
