"""Keep model files small: leave out what grows with the training rows and is not needed.

An :class:`~hdgp.inference.exact.ExactPosterior` holds :math:`L` with
:math:`LL^\\top = K + \\sigma_n^2 I + jI`. For more than :data:`MAX_STORED_FACTOR`
training rows it is not written (n = 5000 would be 200 MB); on loading it is
recomputed from the stored inputs, hyperparameters and jitter with the same
operations, in the same order and under the same thread budget as at fit time
(:meth:`ExactGPModel.posterior` and :func:`hdgp.linalg.robust_cholesky`).

An estimator whose posterior is an :class:`~hdgp.inference.inducing.InducingPosterior`
(sparse or variational inference) predicts from its m inducing points alone, and one with a
:class:`~hdgp.inference.ski.SKIPosterior` from its grids, so their training inputs
``X_train_`` (n × d; 10⁶ × 50 rows would be 400 MB) are not written.
What the component plots and summaries read of them is kept instead as
``input_summary_`` (:func:`~hdgp._input_summary.summarize_inputs`); the
loaded estimator has no ``X_train_`` and its model is rebuilt on the inducing points, or
for SKI on placeholder rows of the input dimension (:mod:`hdgp.io.rebuild`).
"""

from __future__ import annotations

import copy

import torch

from .._threads import thread_budget
from .._input_summary import summarize_inputs
from ..inference.exact import ExactPosterior
from ..inference.inducing import InducingPosterior
from ..inference.ski import SKIPosterior

__all__ = ["MAX_STORED_FACTOR", "compact_state", "restore_state"]

#: Exact posteriors with more training rows than this are saved without their Cholesky factor.
MAX_STORED_FACTOR = 1000


def compact_state(state: dict) -> tuple[dict, list[str]]:
    """Return ``state`` with large factors removed, and the names of the attributes that need restoring."""
    out, dropped = dict(state), []
    if isinstance(state.get("posterior_"), (InducingPosterior, SKIPosterior)) and isinstance(state.get("X_train_"),
                                                                                            torch.Tensor):
        if state.get("input_summary_") is None:
            out["input_summary_"] = summarize_inputs(state["X_train_"], state.get("levels_", {}))
        del out["X_train_"]
    for name, value in state.items():
        if isinstance(value, ExactPosterior) and value.L.shape[-1] > MAX_STORED_FACTOR:
            light = copy.copy(value)
            light.L = None
            out[name] = light
            dropped.append(name)
    return out, dropped


@torch.no_grad()
def restore_state(est, names) -> None:
    """Recompute the Cholesky factor of every posterior attribute listed in ``names``."""
    for name in names:
        post = getattr(est, name)
        if not isinstance(post, ExactPosterior):
            raise ValueError(f"attribute {name!r} was marked for recomputation but is a {type(post).__name__}")
        with thread_budget(post.X.shape[0]):
            Ky = post.kernel(post.X).to_dense().clone()
            Ky.diagonal().add_(post.noise)
            if post.jitter:
                Ky = Ky.clone()
                Ky.diagonal().add_(post.jitter)
            L, info = torch.linalg.cholesky_ex(Ky)
        if int(info) != 0:
            raise ValueError("the stored hyperparameters no longer give a positive-definite kernel matrix")
        post.L = L
