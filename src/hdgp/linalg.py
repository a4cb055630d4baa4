"""Dense linear algebra helpers shared by the inference engines."""

from __future__ import annotations

import warnings

import torch

from .exceptions import NotPositiveDefiniteError, NumericalWarning

__all__ = ["robust_cholesky"]

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
        L, info = torch.linalg.cholesky_ex(Kj)
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
