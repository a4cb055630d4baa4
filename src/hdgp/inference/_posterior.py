r"""What the exact and the inducing-point posteriors share: prediction from one summand rule.

Both posteriors describe :math:`f \mid y` through *support points* :math:`X`
(the training inputs, or the inducing inputs :math:`Z`) with mean weights
:math:`\alpha`, so that the latent mean is :math:`c + k(x_*, X)\alpha`. Each
implements :meth:`GaussianPosterior.summand`: the posterior of a process
:math:`g` that is an a-priori independent summand of :math:`f = g + h`, given its
cross-covariance with the support values, :math:`\operatorname{Cov}(g(x_*), f(X)) = k_g(x_*, X)`.
Prediction is the special case :math:`g = f`; the components of an additive
model (:func:`hdgp.explain.component_posterior`) are the other cases.
"""

from __future__ import annotations

import torch

from .._blocks import in_row_blocks

__all__ = ["GaussianPosterior"]

#: Test points handled per block in prediction (bounds memory at block × support size).
_PREDICT_BLOCK = 4096


class GaussianPosterior:
    """Mixin of the posterior dataclasses: needs ``kernel``, ``X``, ``alpha``, ``constant``, ``noise``.

    ``variance_scale`` multiplies every variance the posterior returns (of :math:`f`, of
    each summand and of the noise), as if kernel and noise were scaled together; the
    means do not change. It is 1 unless a calibration sets it
    (:meth:`hdgp.estimators.BaseGPRegressor.scale_variance`).
    """

    variance_scale = 1.0

    def summand(self, cross: torch.Tensor, prior: torch.Tensor, *, full_cov: bool = False):
        """Posterior mean and variance of a summand of :math:`f` (see the subclasses)."""
        raise NotImplementedError  # pragma: no cover - abstract

    @torch.no_grad()
    def predict(self, Xs: torch.Tensor, *, latent: bool = False, full_cov: bool = False):
        r"""Predictive mean and variance (or covariance) at ``Xs``.

        :meth:`summand` with :math:`g = f`, cross-covariance :math:`K_{*X}` and
        prior :math:`K_{**}`, plus the constant mean :math:`c`; ``latent=False``
        adds :math:`\sigma_n^2` for a new observation :math:`y_*`. Without
        ``full_cov`` the test points are handled in blocks of 4096.

        Returns
        -------
        mean : torch.Tensor of shape (t,)
        var : torch.Tensor of shape (t,) or (t, t) when ``full_cov``
        """
        if not latent and self.noise is None:
            raise ValueError("This posterior has no Gaussian noise; call predict with latent=True.")
        if full_cov:
            mean, cov = self.summand(self.kernel(Xs, self.X).to_dense(), self.kernel(Xs).to_dense(), full_cov=True)
            if not latent:
                cov.diagonal().add_(self.noise * self.variance_scale)
            return self.constant + mean, cov
        mean, var = in_row_blocks(lambda xb: self.summand(self.kernel(xb, self.X).to_dense(),
                                                          self.kernel(xb, diag=True)), Xs, _PREDICT_BLOCK)
        if not latent:
            var += self.noise * self.variance_scale
        return mean + self.constant, var
