"""Dense linear algebra helpers shared by the inference engines."""

from __future__ import annotations

import warnings

import torch
from scipy.linalg import lapack

from ._threads import blas_libraries
from .exceptions import NotPositiveDefiniteError, NumericalWarning

__all__ = ["folded_inverse", "min_norm_lstsq", "robust_cholesky"]

#: Jitter levels tried in turn, relative to the mean diagonal of the matrix.
_RELATIVE_JITTERS = (0.0, 1e-10, 1e-8, 1e-6, 1e-4)


def robust_cholesky(K: torch.Tensor, *, warn: bool = True) -> tuple[torch.Tensor, float]:
    r"""Lower Cholesky factor of a symmetric matrix, adding jitter if needed.

    Tries :math:`K + \epsilon\,\bar d\,I` for :math:`\epsilon` in
    ``(0, 1e-10, 1e-8, 1e-6, 1e-4)``, where :math:`\bar d` is the mean diagonal,
    and stops at the first that factorises.

    Parameters
    ----------
    K : torch.Tensor of shape (n, n)
        Symmetric matrix that should be positive definite.
    warn : bool, default=True
        Emit a :class:`~hdgp.exceptions.NumericalWarning` when jitter was added.

    Returns
    -------
    L : torch.Tensor of shape (n, n)
        Lower-triangular factor with :math:`LL^\top = K + jI`.
    jitter : float
        Absolute jitter :math:`j` that was added (0.0 when none was needed).

    Raises
    ------
    NotPositiveDefiniteError
        If the matrix has non-finite entries or is not PD even with the largest jitter.
    """
    scale = K.diagonal().mean().abs().clamp_min(torch.finfo(K.dtype).tiny).item()
    for rel in _RELATIVE_JITTERS:
        jitter = rel * scale
        Kj = K
        if jitter:
            Kj = K.clone()
            Kj.diagonal().add_(jitter)
        L, info = _cholesky_ex(Kj)
        if int(info) == 0 and torch.isfinite(L.diagonal()).all():
            if jitter and warn:
                warnings.warn(
                    f"Kernel matrix was not numerically positive definite; added jitter "
                    f"{jitter:.3g} ({rel:g} x mean diagonal) to its diagonal.",
                    NumericalWarning,
                    stacklevel=2,
                )
            return L, jitter
    if not torch.isfinite(K).all():
        raise NotPositiveDefiniteError(
            "The kernel matrix contains NaN or inf entries; check the inputs and "
            "hyperparameters (e.g. a length-scale that underflowed to zero)."
        )
    raise NotPositiveDefiniteError(
        f"Kernel matrix of size {K.shape[-1]} is not positive definite even with jitter "
        f"{_RELATIVE_JITTERS[-1]:g} x mean diagonal. Increase `noise_lower_bound`, "
        "remove duplicated/constant columns, or standardise the inputs."
    )


def folded_inverse(L: torch.Tensor) -> torch.Tensor:
    r"""A matrix :math:`P` with :math:`P + P^\top = 2K^{-1}`, from the lower Cholesky factor of :math:`K = LL^\top`.

    Enough wherever only inner products with symmetric matrices count, as in the
    gradient of a Gaussian log-likelihood with respect to a kernel matrix:
    :math:`\langle P, S\rangle = \langle K^{-1}, S\rangle` for every symmetric
    :math:`S`, and :math:`\operatorname{diag} P = \operatorname{diag} K^{-1}`. On the
    CPU (2-D float32/float64) :math:`P` is twice the strict lower triangle of
    :math:`K^{-1}` plus its diagonal, upper triangle zero, from LAPACK ``potri``, which
    fills one triangle: ``torch.cholesky_inverse`` also mirrors it into the other, a pass
    this skips. Elsewhere :math:`P = K^{-1}` itself.
    """
    done = _lapack_on_copy(L, "potri", overwrite_c=1)
    if done is None:
        return torch.cholesky_inverse(L)
    P, info = done
    if info != 0:
        raise NotPositiveDefiniteError(f"LAPACK potri failed (info = {info}) on a Cholesky factor of size {L.shape[-1]}.")
    P.mul_(2.0).diagonal().mul_(0.5)
    return P


def _cholesky_ex(K: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(L, info)`` as :func:`torch.linalg.cholesky_ex`; on the CPU through SciPy's LAPACK ``potrf``.

    ``potrf`` on a copy skips torch's separate pass that zeroes the upper triangle
    (timings: benchmarks/README.md, "Numbers behind choices in src/"). Reads the lower
    triangle of ``K``, as torch does.
    """
    done = _lapack_on_copy(K, "potrf", clean=1, overwrite_a=1)
    if done is None:
        L, info = torch.linalg.cholesky_ex(K)
        return L, int(info)
    return done


def _lapack_on_copy(A: torch.Tensor, name: str, **options) -> tuple[torch.Tensor, int] | None:
    """``(result, info)`` of SciPy's LAPACK routine ``name`` on the lower triangle of a copy of ``A``,
    or ``None`` where torch must do it (GPU, batches, autograd, other dtypes).

    A C-order matrix read in Fortran order is its transpose, so the routine works on the
    upper triangle of that view, in place, and its result is transposed back. OpenBLAS
    runs with torch's thread count: the caller's, or one inside an estimator's
    :func:`~hdgp._threads.thread_budget`.
    """
    if A.device.type != "cpu" or A.dim() != 2 or A.requires_grad or A.dtype not in _LAPACK_PREFIX:
        return None
    routine = getattr(lapack, _LAPACK_PREFIX[A.dtype] + name)
    work = A.clone(memory_format=torch.contiguous_format).numpy().T
    with blas_libraries().limit(limits=torch.get_num_threads()):
        result, info = routine(work, lower=0, **options)
    return torch.from_numpy(result.T), int(info)


_LAPACK_PREFIX = {torch.float64: "d", torch.float32: "s"}


def min_norm_lstsq(dF: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    r"""Minimum-norm :math:`\gamma = \arg\min_\gamma \lVert f - \Delta F\,\gamma\rVert_2` (e.g. the coefficients of an
    Anderson step, Walker & Ni 2011: the least-squares problem in differences of the residuals).

    On the CPU by the SVD driver ``gelsd``: the default ``gelsy`` (QR with column pivoting) reads its
    pivot array as input, and :func:`torch.linalg.lstsq` leaves that array uninitialised, so its result
    would depend on leftover memory; on CUDA by ``gels``, the only driver there.
    """
    driver = "gelsd" if dF.device.type == "cpu" else None
    return torch.linalg.lstsq(dF, f.unsqueeze(-1), driver=driver).solution.squeeze(-1)
