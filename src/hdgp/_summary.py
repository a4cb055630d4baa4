"""Readable summaries of fitted estimators: noise, length-scales, order variances, Sobol terms.

It reads only the estimators' fitted attributes and sits below them (their repr
uses it); :mod:`hdgp.workflow.summary` is its public path.

:func:`learned_quantities` collects the numbers (a dict, used by reports and
``--json``); :func:`summarize` formats them as a few lines of text.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

__all__ = ["learned_quantities", "summarize", "feature_names"]

_TOP = 8


def feature_names(est) -> list:
    """The estimator's input feature names (``x0, x1, ...`` without a DataFrame)."""
    if hasattr(est, "feature_names_in_"):
        return [str(c) for c in est.feature_names_in_]
    return [f"x{i}" for i in range(getattr(est, "n_features_in_", 0))]


def _kernel(est):
    """The fitted kernel: ``kernel_``, or that of a binary classifier's single latent model."""
    kernel = getattr(est, "kernel_", None)
    models = getattr(est, "models_", None)
    if kernel is None and isinstance(models, list) and len(models) == 1:
        kernel = getattr(models[0], "kernel", None)
    return kernel


def _per_feature_lengthscales(est, names, kernel):
    """``{feature: length-scale}`` of ``kernel`` on the model's (transformed) input scale, or None."""
    if not isinstance(kernel, torch.nn.Module):
        return None
    cont = getattr(est, "continuous_features_", None)
    for module in kernel.modules():
        for attr in ("input_lengthscale", "lengthscale"):
            value = getattr(module, attr, None)
            if not isinstance(value, torch.Tensor):
                continue
            flat = value.detach().cpu().reshape(-1).numpy()
            if flat.size == len(names) and flat.size > 1 or (flat.size == 1 and len(names) == 1):
                return dict(zip(names, flat.tolist()))
            if cont is not None and flat.size == len(cont) and flat.size > 0:
                return {names[j]: float(v) for j, v in zip(cont, flat)}
    return None


def _constant_features(est, names) -> list:
    """Features with one value in every training row (known where the estimator keeps its training
    inputs or their summary): nothing moves their length-scales, so those say nothing about relevance."""
    X = getattr(est, "X_train_", None)
    if isinstance(X, torch.Tensor) and X.dim() == 2 and X.shape[1] == len(names) and X.shape[0] >= 2:
        same = (X == X[:1]).all(dim=0).cpu().numpy()
    elif isinstance(getattr(est, "input_summary_", None), dict) and len(est.input_summary_["low"]) == len(names):
        same = est.input_summary_["high"] <= est.input_summary_["low"]
    else:
        return []
    return [name for name, flag in zip(names, same) if flag]


#: A feature is flat when the prior standard deviation of f(x) - f(x') for inputs 6 standard
#: deviations apart along it, 6 σ_f / ℓ (σ_f the signal std, ℓ ≫ 6), is below this fraction of the
#: standardised target's std: a long length-scale under a large signal variance (a linear trend
#: seen through an RBF kernel) is not flat.
FLAT_VARIATION = 0.01


def _signal_std(est, kernel) -> float:
    """The prior signal std on the standardised target scale (latent scale for a classifier)."""
    if kernel is not None and hasattr(kernel, "outputscale"):
        return float(kernel.outputscale.detach().sqrt())
    variances = getattr(est, "order_variances_", None)
    if variances is None and kernel is not None and hasattr(kernel, "order_variances"):
        variances = kernel.order_variances.detach().cpu().numpy()
    return float(np.sqrt(np.sum(variances))) if variances is not None else 1.0


def format_lengthscale(value: float, flat: bool = False) -> str:
    """A length-scale for display, marked when the function is flat along the feature."""
    return f"{value:.3g}" + (" (flat)" if flat else "")


def _top_terms(indices: dict) -> dict:
    """The :data:`_TOP` largest normalised Sobol indices, keyed by ``"a × b"``."""
    return {" × ".join(k): float(v) for k, v in list(indices.items())[:_TOP]}


def learned_quantities(est, *, classes=None) -> dict:
    """Key fitted quantities of a fitted hdgp estimator as plain Python values.

    ``classes`` names the classes in the order of ``est.classes_`` where the estimator was
    fitted to codes (a table model's is fitted to 0..K-1); by default ``est.classes_``.

    Returns
    -------
    dict
        Any of ``noise_variance`` (in squared target units), ``lengthscales``
        (feature → length-scale on the standardised/warped input scale, smallest
        = most wiggly first), ``outputscale``, ``order_variances``,
        ``sobol_top`` (term → normalised Sobol index), ``sobol_by_order``,
        ``sobol_not_enumerated`` (``above_order`` and ``share``: the Sobol mass of the orders whose
        terms ``max_sobol_terms`` left unenumerated, when above 0.001),
        ``sobol_top_by_class`` (class → its ``sobol_top``: a classifier of more than two classes
        has one latent function per class),
        ``flat_features`` (those whose length-scale makes the function nearly constant along them
        at the fitted signal variance, :data:`FLAT_VARIATION`), ``lengthscales_by_class`` and
        ``flat_features_by_class`` (class → the same, for a one-vs-rest classifier),
        ``constant_features`` (one value in every training row, left out of ``lengthscales``),
        ``log_marginal_likelihood``, ``inference``, ``best_params`` and ``cv_score`` (SIGP: the
        chosen hyper-parameters' cross-validation score and what it scores, when cross-validated),
        ``n_classes`` and ``temperature`` (classifiers; the latter SIGP's softmax
        inverse temperature), ``class_weights`` (class → weight, when ``class_weight``
        was set), ``variance_scale`` (SIGP's cross-validated variance factor), plus ``n_train`` and ``n_features``. A binary GP /
        OAK classifier reports the length-scales and Sobol terms of its latent function.
    """
    check_is_fitted(est)
    labels = getattr(est, "classes_", None) if classes is None else classes
    names = feature_names(est)
    out: dict = {"estimator": type(est).__name__, "n_features": len(names)}
    if hasattr(est, "X_train_"):
        out["n_train"] = int(est.X_train_.shape[0])
    elif hasattr(est, "input_summary_"):
        out["n_train"] = est.input_summary_["n_rows"]
    if hasattr(est, "inference_"):
        out["inference"] = est.inference_
    y_scale = float(getattr(est, "y_scale_", 1.0))
    model = getattr(est, "model_", None)
    if isinstance(model, torch.nn.Module) and hasattr(model, "noise"):
        out["noise_variance"] = float(model.noise) * y_scale**2
    elif hasattr(est, "noise_"):
        out["noise_variance"] = float(est.noise_)
    kernel = _kernel(est)
    constant = _constant_features(est, names)
    if constant:
        out["constant_features"] = constant

    def ranked(kernel) -> tuple[dict, list] | None:  # length-scales (shortest first) and the flat features
        scales = _per_feature_lengthscales(est, names, kernel)
        if not scales:
            return None
        scales = dict(sorted(((k, v) for k, v in scales.items() if k not in constant), key=lambda kv: kv[1]))
        signal = _signal_std(est, kernel)
        return scales, [k for k, v in scales.items() if 6 * signal / v < FLAT_VARIATION]

    models = getattr(est, "models_", None)
    if kernel is not None and (found := ranked(kernel)):
        out["lengthscales"], out["flat_features"] = found
    elif isinstance(models, list) and len(models) > 1:  # one latent function per class, against the rest
        per_class = {str(c): ranked(getattr(m, "kernel", None)) for c, m in zip(labels, models)}
        if all(per_class.values()):
            out["lengthscales_by_class"] = {c: f[0] for c, f in per_class.items()}
            out["flat_features_by_class"] = {c: f[1] for c, f in per_class.items()}
    if kernel is not None and hasattr(kernel, "outputscale"):
        out["outputscale"] = float(kernel.outputscale) * y_scale**2
    if hasattr(est, "order_variances_"):
        out["order_variances"] = np.asarray(est.order_variances_, float).tolist()
    elif kernel is not None and hasattr(kernel, "order_variances"):
        out["order_variances"] = kernel.order_variances.detach().cpu().numpy().tolist()
    if hasattr(est, "classes_"):
        out["n_classes"] = len(est.classes_)
    if hasattr(est, "temperature_"):
        out["temperature"] = float(est.temperature_)
    if getattr(est, "class_weight_", None) is not None:
        out["class_weights"] = {str(c): float(w) for c, w in zip(labels, est.class_weight_)}
    indices = getattr(est, "sobol_indices_", None)
    if isinstance(indices, dict):  # one latent function
        out["sobol_top"] = _top_terms(indices)
        out["sobol_by_order"] = np.asarray(est.sobol_order_, float).tolist()
        enumerated = max(map(len, indices), default=0)
        if sum(out["sobol_by_order"][enumerated:]) > 1e-3:  # max_sobol_terms stopped the enumeration
            out["sobol_not_enumerated"] = {"above_order": enumerated,
                                           "share": float(sum(out["sobol_by_order"][enumerated:]))}
    elif isinstance(indices, list):  # one per class, against the rest
        out["sobol_top_by_class"] = {str(c): _top_terms(ind) for c, ind in zip(labels, indices)}
    if getattr(est, "variance_scale_", 1.0) != 1.0:
        out["variance_scale"] = float(est.variance_scale_)
    if hasattr(est, "log_marginal_likelihood_value_"):
        out["log_marginal_likelihood"] = float(est.log_marginal_likelihood_value_)
    if hasattr(est, "best_params_"):
        out["best_params"] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in est.best_params_.items()}
    if math.isfinite(getattr(est, "best_score_", math.nan)):  # models saved before best_score_ have none
        out["cv_score"] = {"value": float(est.best_score_),
                           "scoring": "minus the mean squared error" if est.scoring is None else str(est.scoring)}
    return out


def summarize(est, *, header: bool = True, classes=None) -> str:
    """A few lines describing a fitted estimator (``classes``: as in :func:`learned_quantities`), or
    a model fitted to a table (what ``hdgp fit`` saves and ``hdgp.load`` returns: its own summary).
    A scikit-learn ``Pipeline`` is described by its final step, after a line naming the steps.

    Raises ``sklearn.exceptions.NotFittedError`` for an estimator that is not fitted.

    Examples
    --------
    >>> import numpy as np, hdgp
    >>> X = np.linspace(0, 1, 15)[:, None]
    >>> est = hdgp.GPRegressor(random_state=0, max_iter=20).fit(X, np.sin(6 * X[:, 0]))
    >>> "noise" in hdgp.summary(est)
    True
    """
    if callable(getattr(est, "summary", None)):  # describes itself (a TabularModel: its schema, then this)
        return est.summary()
    if isinstance(est, Pipeline):  # its own n_features_in_ would be all it could say
        steps = " → ".join(type(step).__name__ for _, step in est.steps)
        return f"Pipeline {steps}; its final step:\n" + summarize(est[-1], header=header, classes=classes)
    q = learned_quantities(est, classes=classes)
    lines = []
    if header:
        size = f", trained on {q['n_train']} rows" if "n_train" in q else ""
        lines.append(f"{q['estimator']} with {q['n_features']} feature(s){size}")
    if "inference" in q:
        lines.append(f"  inference: {q['inference']}")
    if "noise_variance" in q:
        lines.append(f"  noise std: {np.sqrt(q['noise_variance']):.4g} (target units)")
    if "outputscale" in q:
        lines.append(f"  signal std: {np.sqrt(q['outputscale']):.4g}")
    if "lengthscales" in q:
        items = list(q["lengthscales"].items())
        shown = ", ".join(f"{k}={format_lengthscale(v, k in q['flat_features'])}" for k, v in items[:_TOP]) \
            + (" ..." if len(items) > _TOP else "")
        lines.append(f"  length-scales (shortest first): {shown}")
    for label, scales in q.get("lengthscales_by_class", {}).items():
        flat = q["flat_features_by_class"][label]
        shown = ", ".join(f"{k}={format_lengthscale(v, k in flat)}" for k, v in list(scales.items())[:_TOP])
        lines.append(f"  length-scales, class {label} vs rest: {shown}" + (" ..." if len(scales) > _TOP else ""))
    if "constant_features" in q:
        lines.append(f"  constant in training (no effect): {', '.join(q['constant_features'])}")
    if "order_variances" in q:
        lines.append("  order variances σ²_0..R: " + ", ".join(f"{v:.3g}" for v in q["order_variances"]))
    tops = {"": q["sobol_top"]} if "sobol_top" in q else {
        f", class {label} vs rest": top for label, top in q.get("sobol_top_by_class", {}).items()}
    for which, top in tops.items():
        lines.append(f"  top Sobol terms{which}: " + ", ".join(f"{k} {v:.3f}" for k, v in list(top.items())[:5]))
    if "sobol_not_enumerated" in q:
        gap = q["sobol_not_enumerated"]
        lines.append(f"  terms of order > {gap['above_order']} not enumerated (max_sobol_terms); together they "
                     f"carry {gap['share']:.3f} of the variance (sobol_order_)")
    if "temperature" in q:
        lines.append(f"  softmax inverse temperature: {q['temperature']:.4g}")
    if "class_weights" in q:
        lines.append("  class weights on the probabilities: "
                     + ", ".join(f"{c} {w:.3g}" for c, w in q["class_weights"].items()))
    if "variance_scale" in q:
        lines.append(f"  predictive variance × {q['variance_scale']:.3g} (product of its calibration factors, "
                     "variance_scale_)")
    if "best_params" in q:
        lines.append("  hyper-parameters: " + ", ".join(f"{k}={v}" for k, v in q["best_params"].items()))
    if "cv_score" in q:
        lines.append(f"  their cross-validation score: {q['cv_score']['value']:.4g} ({q['cv_score']['scoring']})")
    if "log_marginal_likelihood" in q:
        bound = q.get("inference") in ("sparse", "variational")  # a lower bound on it, not the value
        name = "evidence lower bound" if bound else "log marginal likelihood"
        lines.append(f"  {name} (standardised y): {q['log_marginal_likelihood']:.4g}")
    return "\n".join(lines)
