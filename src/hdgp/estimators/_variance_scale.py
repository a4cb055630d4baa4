"""A fitted regressor's predictive variances multiplied by a calibration factor."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["VarianceScaling"]


class VarianceScaling:
    """Mixin: :meth:`scale_variance` for regressors whose predictions read ``variance_scale_``.

    A subclass whose variances come from a posterior object overrides
    :meth:`_apply_variance_scale` to hand the factor on.
    """

    def scale_variance(self, factor: float):
        r"""Multiply every predictive variance by ``factor``; the mean is unchanged.

        For a Gaussian process this is the posterior of the same model with kernel and
        noise both scaled by ``factor`` (the mean weights :math:`(K + \sigma^2 I)^{-1}`
        cancel the scale). Use it to calibrate the predictive intervals on rows the model
        was not fitted to: with standardised residuals :math:`z_i = (y_i - \mu_i)/\sigma_i`
        there, ``factor`` = mean :math:`z_i^2` (what ``hdgp fit --model auto`` does with
        its validation rows). Factors compound: ``variance_scale_`` is their product.
        Saved model files keep it.

        Parameters
        ----------
        factor : float
            Positive and finite.

        Returns
        -------
        self
        """
        check_is_fitted(self)
        if not (isinstance(factor, numbers.Real) and not isinstance(factor, bool) and np.isfinite(factor)
                and factor > 0):
            raise ValueError(f"factor must be a positive finite number, got {factor!r}.")
        self.variance_scale_ = getattr(self, "variance_scale_", 1.0) * float(factor)
        self._apply_variance_scale()
        return self

    def _apply_variance_scale(self) -> None:
        """Pass ``variance_scale_`` to whatever computes the variances (nothing by default)."""
