"""Synthetic regression functions from the seed papers (all seeded).

Every generator returns ``(X, y)`` with ``X`` of shape (n, d).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SYNTHETIC", "bach", "oak_2d", "sin_sum", "additive", "smooth_xor", "rotation_invariant",
           "half_irrelevant"]


def bach(n: int = 200, noise: float = 0.2, wishart_dof: int = 1024, rng=None):
    r"""Bach's HKL synthetic regression set (Duvenaud et al., additive chapter, eq. 1.21).

    .. math:: f(x) = \sum_{i=1}^{4}\sum_{j=i+1}^{4} x_i x_j,\qquad
              y = f / \mathrm{sd}(f) + \varepsilon,\quad \varepsilon \sim N(0, \text{noise}^2)

    The chapter says only "correlated Gaussian inputs ... following the same recipe
    as Bach (2009)"; Bach's recipe (HKL's regression demo, which the chapter's
    experiments reuse) draws :math:`x = z^\top S` with :math:`z \sim N(0, I_p)`,
    :math:`S` a :math:`p \times 8` matrix of standard normals (the first eight
    columns of a Wishart square root, :math:`p` = ``wishart_dof``) with unit-norm
    columns, so each :math:`x_k` is standard normal and pairs are weakly
    correlated (:math:`\rho \approx N(0, 1/p)`). The target is scaled to unit
    standard deviation *before* the noise (s.d. 0.2) is added, so the best
    achievable test MSE on the standardised target is about
    :math:`0.2^2 / (1 + 0.2^2) \approx 0.04` (the chapter's GPs reach 0.045).
    The last four inputs are irrelevant to :math:`f`. The text's ``j = 1+1`` is a
    typo for ``j = i+1``.
    """
    rng = np.random.default_rng(rng)
    S = rng.standard_normal((wishart_dof, 8))
    S /= np.linalg.norm(S, axis=0)
    X = rng.standard_normal((n, wishart_dof)) @ S
    f = sum(X[:, i] * X[:, j] for i in range(4) for j in range(i + 1, 4))
    return X, f / f.std() + noise * rng.standard_normal(n)


def oak_2d(n: int = 500, noise: float = 0.1, rng=None):
    r"""The OAK paper's identifiability example (Lu et al. 2022, eq. 5).

    .. math:: f(x_1, x_2) = x_1^2 - 2x_2 + \cos(3x_1)\sin(5x_2),\quad x \sim U(-1, 1)^2

    with noise variance 0.01 (``noise`` is the standard deviation).
    """
    rng = np.random.default_rng(rng)
    X = rng.uniform(-1.0, 1.0, size=(n, 2))
    f = X[:, 0] ** 2 - 2 * X[:, 1] + np.cos(3 * X[:, 0]) * np.sin(5 * X[:, 1])
    return X, f + noise * rng.standard_normal(n)


def sin_sum(n: int = 1000, d: int = 100, noise: float = 0.01, rng=None):
    r"""SKI scaling function of Delbridge et al. (2020, Fig. 5): :math:`y = \sum_i \sin(x_i) + 0.01\epsilon`, :math:`x \sim N(0, I_d)`."""
    rng = np.random.default_rng(rng)
    X = rng.standard_normal((n, d))
    return X, np.sin(X).sum(axis=1) + noise * rng.standard_normal(n)


# The four functions of Delbridge et al. (2020, Fig. 6). The paper names them but does
# not print their formulas; these are the standard choices matching each description.

def additive(n: int = 500, d: int = 10, noise: float = 0.1, rng=None):
    r"""Truly additive: :math:`f(x) = \sum_i \sin(2 x_i)`, :math:`x \sim N(0, I_d)`."""
    rng = np.random.default_rng(rng)
    X = rng.standard_normal((n, d))
    return X, np.sin(2 * X).sum(axis=1) + noise * rng.standard_normal(n)


def smooth_xor(n: int = 500, d: int = 10, noise: float = 0.1, rng=None):
    r"""Smooth relaxation of XOR (very non-additive): :math:`f(x) = \prod_i \tanh(2 x_i)`."""
    rng = np.random.default_rng(rng)
    X = rng.standard_normal((n, d))
    return X, np.prod(np.tanh(2 * X), axis=1) + noise * rng.standard_normal(n)


def rotation_invariant(n: int = 500, d: int = 10, noise: float = 0.1, rng=None):
    r"""Rotation-invariant: :math:`f(x) = \cos(\lVert x\rVert_2)`, :math:`x \sim N(0, I_d)`."""
    rng = np.random.default_rng(rng)
    X = rng.standard_normal((n, d))
    return X, np.cos(np.linalg.norm(X, axis=1)) + noise * rng.standard_normal(n)


def half_irrelevant(n: int = 500, d: int = 10, noise: float = 0.1, rng=None):
    r"""Rotation-invariant in the first ``d // 2`` features only; the other half is irrelevant."""
    rng = np.random.default_rng(rng)
    X = rng.standard_normal((n, d))
    return X, np.cos(np.linalg.norm(X[:, : d // 2], axis=1)) + noise * rng.standard_normal(n)


#: Name → generator for :func:`hdgp.data.load`.
SYNTHETIC = {
    "bach": bach,
    "oak2d": oak_2d,
    "sin-sum": sin_sum,
    "additive": additive,
    "smooth-xor": smooth_xor,
    "rotation-invariant": rotation_invariant,
    "half-irrelevant": half_irrelevant,
}
