"""Prediction over row blocks with bounded memory."""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["in_row_blocks"]


def in_row_blocks(predict: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]], X: torch.Tensor,
                  block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``predict`` (rows -> (mean, var), row-aligned) on blocks of ``block`` rows of ``X``.

    The outputs are allocated once and filled in place: a list of small per-block results
    kept between the large block temporaries fragmented glibc's heap (10^6 rows: 7.2 GB peak
    RSS instead of about 0.6 GB).
    """
    mean = var = None
    for start in range(0, max(X.shape[0], 1), block):  # an empty X still gets (empty) outputs
        rows = slice(start, start + block)
        m, v = predict(X[rows])
        if mean is None:
            mean = m.new_empty((X.shape[0],) + m.shape[1:])
            var = v.new_empty((X.shape[0],) + v.shape[1:])
        mean[rows], var[rows] = m, v
    return mean, var
