"""Conjugate-gradient solves and the ``linear_operator`` settings of one SKI computation."""

from __future__ import annotations

from contextlib import ExitStack

import gpytorch
import linear_operator
import torch
from linear_operator.operators import AddedDiagLinearOperator


def _cg_solve(Ky: AddedDiagLinearOperator, rhs: torch.Tensor) -> torch.Tensor:
    """:math:`\\hat K^{-1}\\,\\mathrm{rhs}` by preconditioned CG (tolerance and iterations from the active settings).

    Calls ``linear_cg`` itself rather than ``Ky.solve``, which passes no ``eps``: its default
    1e-10 floor on :math:`p^\\top \\hat K p` and :math:`r^\\top P^{-1} r` (of unit-norm right-hand
    sides) zeroes every step once the relative residual is about :math:`10^{-5}\\sigma_n`, so a
    tolerance of 1e-6 would run every iteration without getting there. The floor only has to keep
    an exact zero from being divided by, so ``eps`` is the smallest normal number.
    """
    preconditioner = Ky._preconditioner()[0]
    return linear_operator.utils.linear_cg(
        Ky._matmul, rhs, tolerance=linear_operator.settings.cg_tolerance.value(),
        eps=torch.finfo(rhs.dtype).tiny, max_iter=linear_operator.settings.max_cg_iterations.value(),
        preconditioner=preconditioner,
    )


def _settings(num_probes: int, max_cg: int, tol: float) -> ExitStack:
    """CG / Lanczos settings of linear_operator for one SKI computation (a context manager)."""
    stack = ExitStack()
    for ctx in (
        linear_operator.settings.num_trace_samples(num_probes),
        linear_operator.settings.max_cg_iterations(max_cg),
        linear_operator.settings.cg_tolerance(tol),
        gpytorch.settings.eval_cg_tolerance(tol),
        linear_operator.settings.max_lanczos_quadrature_iterations(min(max_cg, 20)),
        linear_operator.settings.min_preconditioning_size(1),
        linear_operator.settings.max_preconditioner_size(0),  # never the generic pivoted Cholesky
        linear_operator.settings.max_cholesky_size(0),  # iterative at every n (no dense SKI matrix)
        # CG and stochastic Lanczos whatever the process-wide defaults say (importing BoTorch turns
        # linear_operator's fast log-prob and solves off, which would factorise the dense SKI matrix)
        linear_operator.settings.fast_computations(covar_root_decomposition=True, log_prob=True, solves=True),
    ):
        stack.enter_context(ctx)
    return stack
