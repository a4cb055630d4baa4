"""The projected-additive paper's GPyTorch training recipe, shared by the speed benchmarks.

Exact GP, ``ExactMarginalLogLikelihood``, Adam with learning rate 0.1 for at most
1000 steps, stopped when the 20-step moving average of the loss improves by less
than 1e-4 (Delbridge et al. 2020, Sec. 5; ``../shared/reference/README.md``).
"""

from __future__ import annotations

import math
import time
from collections import deque

import gpytorch
import torch


def train_paper_recipe(model: gpytorch.models.ExactGP, X: torch.Tensor, y: torch.Tensor,
                       max_steps: int = 1000, window: int = 20, tol: float = 1e-4) -> tuple[float, int]:
    """Train ``model`` in place; returns (seconds, Adam steps taken)."""
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    recent, prev = deque(maxlen=window), math.inf
    t = time.perf_counter()
    steps = 0
    for steps in range(1, max_steps + 1):
        opt.zero_grad()
        loss = -mll(model(X), y)
        loss.backward()
        opt.step()
        recent.append(loss.item())
        if len(recent) == window:
            avg = sum(recent) / window
            if prev - avg < tol:
                break
            prev = avg
    return time.perf_counter() - t, steps


def predict_mean(model: gpytorch.models.ExactGP, X: torch.Tensor):
    """Posterior mean at ``X`` as a numpy array (eval mode, exact predictive variances off)."""
    model.eval()
    with torch.no_grad():
        return model(X).mean.numpy()
