"""Class weights for GP classifiers: a decision-theoretic shift of the fitted probabilities.

A classifier whose probabilities :math:`p(k \\mid x)` are calibrated for the
training class frequencies :math:`\\pi_k` gives the probabilities it would have
for class frequencies proportional to :math:`w_k \\pi_k` by Bayes' rule,

.. math::

    p_w(k \\mid x) = \\frac{w_k\\, p(k \\mid x)}{\\sum_l w_l\\, p(l \\mid x)}.

With scikit-learn's ``"balanced"`` weights :math:`w_k = n / (K n_k)` every class
counts as equally frequent, which moves the decision boundary towards the
majority class (higher recall, and usually a higher F1, for a minority class).
The GP fit itself is not reweighted: the weights act on the calibrated link
only, so fits with different weights share the same latent posterior. As for any
scikit-learn parameter, a new ``class_weight`` (``set_params``) takes effect at
the next ``fit``: prediction uses ``class_weight_``, the weights of the fit.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.class_weight import compute_class_weight

__all__ = ["class_weights", "fitted_class_weights", "reweight_proba"]


def class_weights(class_weight, classes: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Weights :math:`w_k` aligned with ``classes`` (None when ``class_weight`` is None).

    Parameters
    ----------
    class_weight : None, "balanced" or dict
        As in scikit-learn; a dict maps class labels to weights (missing classes get 1;
        a key that is not a class is an error).
    classes : ndarray of shape (n_classes,)
    y : ndarray of shape (n_samples,)
        Training labels (for ``"balanced"``).
    """
    if class_weight is None:
        return None
    if not (class_weight == "balanced" or isinstance(class_weight, dict)):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}.")
    if isinstance(class_weight, dict):  # a misspelt label would otherwise just leave its class at weight 1
        known = set(classes.tolist())
        unknown = [k for k in class_weight if (k.item() if isinstance(k, np.generic) else k) not in known]
        if unknown:
            raise ValueError(f"class_weight names {', '.join(map(repr, unknown))}, not a class of y; "
                             f"the classes are {', '.join(map(repr, classes.tolist()))}.")
    weights = compute_class_weight(class_weight, classes=classes, y=y)
    if not (np.all(np.isfinite(weights)) and np.all(weights > 0)):
        raise ValueError(f"class weights must be positive and finite, got {dict(zip(classes.tolist(), weights))}.")
    return weights


def fitted_class_weights(est) -> np.ndarray | None:
    """``est.class_weight_``, or None for a classifier loaded from a file written before class weights."""
    return getattr(est, "class_weight_", None)


def reweight_proba(proba: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """:math:`p_w(k \\mid x) \\propto w_k\\, p(k \\mid x)` row by row (``proba`` unchanged for None)."""
    if weights is None:
        return proba
    shifted = proba * weights
    total = shifted.sum(axis=1, keepdims=True)
    return np.where(total > 0, shifted / np.where(total > 0, total, 1.0), 1.0 / proba.shape[1])
