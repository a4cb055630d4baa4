"""``AdditiveGPRegressor``: exact GP with the all-order additive kernel of Duvenaud et al. (2011)."""

from __future__ import annotations

import functools
import math

import torch
from gpytorch.kernels import Kernel

from ..kernels import MaternFeatureKernel, SEKernel
from ..kernels.additive_kernel import AdditiveKernel
from ._base import COMMON_PARAMS, BaseGPRegressor, atomic_fit
from ._params import resolve_max_order

__all__ = ["AdditiveGPRegressor", "additive_kernel", "resolve_max_order"]

#: Names of the one-dimensional base kernels and their builders for D features.
BASE_KERNELS = {"se": SEKernel, **{f"matern{name}": functools.partial(MaternFeatureKernel, nu=nu)
                                   for name, nu in (("12", 0.5), ("32", 1.5), ("52", 2.5))}}


def additive_kernel(X: torch.Tensor, max_order=None, base_kernel: str = "se") -> AdditiveKernel:
    """The all-order additive kernel of :class:`AdditiveGPRegressor` for the inputs ``X``: unit
    length-scales (on standardised inputs) and equal prior variance per order."""
    n_dims = X.shape[-1]
    base = BASE_KERNELS[base_kernel](n_dims)
    base.lengthscale = 1.0
    return AdditiveKernel(base, num_dims=n_dims, max_order=resolve_max_order(max_order, n_dims))


class AdditiveGPRegressor(BaseGPRegressor):
    r"""Exact GP regression with additive interactions of every order up to ``max_order``.

    .. math::

        k(\mathbf x, \mathbf x') = \sum_{r=0}^{R} \sigma_r^2\, e_r\big(k_1(x_1, x_1'), \dots, k_D(x_D, x_D')\big),
        \qquad k_i(x, x') = e^{-(x - x')^2 / 2\ell_i^2}

    (Duvenaud et al. eqs. 1.2–1.5, 1.13): unit-variance SE base kernels with one
    length-scale per feature and one variance per order, as in the chapter's
    experiments (Section 1.6), plus an order-0 constant term. ``base_kernel`` swaps the SE
    kernel for a Matérn one (the chapter allows any one-dimensional base kernel). ``max_order=1`` is a
    GP-GAM (the ``GAM`` preset up to that constant); ``max_order=D`` contains the
    SE-ARD kernel as its top term (eq. 1.7).

    Parameters
    ----------
    max_order : int or None, default=None
        Highest interaction order :math:`R` (None: :math:`\min(D, 10)`, the chapter's cap).
    base_kernel : {"se", "matern12", "matern32", "matern52"}, default="se"
        One-dimensional kernel of every feature: squared exponential, or Matérn with
        :math:`\nu = 1/2, 3/2, 5/2` (:class:`~hdgp.kernels.MaternFeatureKernel`), unit variance,
        one length-scale per feature.
    inference : {"auto", "exact", "sparse", "variational"}, default="auto"
        See :class:`~hdgp.estimators._base.BaseGPRegressor`. SKI (``"ski"``) exists only for
        projected models (:class:`~hdgp.estimators.projected.ProjectedAdditiveGPRegressor`).
    n_inducing, batch_size, noise_lower_bound, noise_prior, optimizer, max_iter, n_restarts, warm_start, random_state, device, dtype, verbose
        See :class:`~hdgp.estimators._base.BaseGPRegressor`.

    Attributes
    ----------
    order_variances_ : ndarray of shape (R + 1,)
        Fitted :math:`\sigma_0^2, \dots, \sigma_R^2`.
    order_variance_shares_ : ndarray of shape (R,)
        Prior variance of each order 1..R at unit base values,
        :math:`\sigma_r^2 \binom{D}{r} / \sum_s \sigma_s^2 \binom{D}{s}` — an analogue of
        Duvenaud's Table 1.1, which does not say how its shares were computed (not identifiable; see :class:`OAKRegressor` for Sobol indices).

    Examples
    --------
    >>> import numpy as np
    >>> from hdgp.estimators.additive import AdditiveGPRegressor
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> est = AdditiveGPRegressor(max_order=2, random_state=0).fit(X, X[:, 0] * X[:, 1])
    >>> est.predict(X[:2]).shape
    (2,)
    """

    def __init__(self, max_order=None, *, base_kernel="se", inference="auto", n_inducing=512, batch_size=None,
                 noise_lower_bound=COMMON_PARAMS["noise_lower_bound"], noise_prior=None,
                 optimizer="lbfgs", max_iter=None, n_restarts=0, warm_start=False, random_state=None, device=None,
                 dtype="float64", verbose=False):
        self.max_order = max_order
        self.base_kernel = base_kernel
        self.inference = inference
        self.n_inducing = n_inducing
        self.batch_size = batch_size
        self.noise_lower_bound = noise_lower_bound
        self.noise_prior = noise_prior
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.n_restarts = n_restarts
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.verbose = verbose

    def _validate_params_extra(self) -> None:
        if not isinstance(self.base_kernel, str) or self.base_kernel not in BASE_KERNELS:
            raise ValueError(f"base_kernel must be one of {sorted(BASE_KERNELS)}, got {self.base_kernel!r}.")

    def _make_kernel(self, X: torch.Tensor) -> Kernel:
        return additive_kernel(X, self.max_order, self.base_kernel)

    @atomic_fit
    def fit(self, X, y):
        """Fit by maximising the marginal likelihood (L-BFGS by default); see the base class."""
        super().fit(X, y)
        var = self.kernel_.order_variances.detach().cpu().numpy()
        self.order_variances_ = var
        d = self.kernel_.num_dims
        mass = var[1:] * [math.comb(d, r) for r in range(1, len(var))]
        self.order_variance_shares_ = mass / mass.sum()
        return self
