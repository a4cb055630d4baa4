"""Draws and densities of a fitted regressor's Gaussian predictive distribution."""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["PredictiveDistribution", "sample_gaussian"]


class PredictiveDistribution:
    """Mixin: :meth:`sample_y` and :meth:`log_predictive_density` for regressors whose ``predict``
    takes ``return_std``, ``return_cov`` and ``latent``."""

    def sample_y(self, X, n_samples: int = 1, random_state=0, *, latent: bool = False):
        """Draw joint samples from the posterior predictive at ``X``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        n_samples : int, default=1
            Number of joint draws.
        random_state : int, RandomState or None, default=0
            Seed of the draws; the default 0 gives the same draws at every call, as in
            scikit-learn's ``GaussianProcessRegressor.sample_y`` (None: fresh draws).
        latent : bool, default=False
            Draw the latent function :math:`f` instead of :math:`y = f + \\varepsilon`.

        Returns
        -------
        samples : ndarray of shape (n_queries, n_samples)
        """
        mean, cov = self.predict(X, return_cov=True, latent=latent)
        return sample_gaussian(mean, cov, n_samples, random_state)

    def log_predictive_density(self, X, y) -> np.ndarray:
        """Per-point log predictive density :math:`\\log p(y_* \\mid x_*, D)` in the units of ``y``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        y : array-like of shape (n_queries,)
            Observed targets at ``X``.

        Returns
        -------
        ndarray of shape (n_queries,)
            :math:`\\log N(y_*; \\mu_*, \\sigma_*^2)` with the predictive mean and standard
            deviation of ``predict(X, return_std=True)``; minus its mean is the NLPD.
        """
        mean, std = self.predict(X, return_std=True)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        return -0.5 * np.log(2 * np.pi * std**2) - 0.5 * ((y - mean) / std) ** 2


def sample_gaussian(mean: np.ndarray, cov: np.ndarray, n_samples: int, random_state) -> np.ndarray:
    """Samples of :math:`N(\\text{mean}, \\text{cov})` as columns, (t, n_samples); a symmetric square
    root from the eigendecomposition (negative rounding-level eigenvalues clipped to 0)."""
    rng = check_random_state(random_state)
    evals, evecs = np.linalg.eigh(cov)
    root = evecs * np.sqrt(np.clip(evals, 0.0, None))
    return mean[:, None] + root @ rng.standard_normal((len(mean), n_samples))
