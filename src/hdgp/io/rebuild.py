"""Per-family hooks that recreate an estimator's torch modules before ``load_state_dict``.

A fitted estimator may hold torch modules in *slots*: an attribute whose value is a
module (``model_``) or a list of modules (``models_``). Their parameters and buffers
go to the file as state dicts; their *structure* is rebuilt here from the
estimator's already restored plain attributes:

- an estimator method ``_rebuild_module(attribute, index, state_dict)`` wins;
- :class:`~hdgp.estimators.BaseGPRegressor` families (``model_``): the estimator's own
  ``_make_kernel`` and ``_make_model`` on the stored training inputs ``X_train_``, or on
  the inducing points of a sparse/variational model saved without them (placeholder rows
  of the input dimension for SKI);
- :class:`~hdgp.estimators.classifier.GPClassifier` (``models_[k]``): a Bernoulli
  SVGP around ``_make_kernel`` with the stored inducing points.
"""

from __future__ import annotations

import torch

from ..estimators import BaseGPRegressor, GPClassifier
from ..inference.variational import SVGPModel

__all__ = ["load_state", "module_slots", "rebuild_module"]


def module_slots(est) -> list[tuple[str, int | None, torch.nn.Module]]:
    """``(attribute, index or None, module)`` for every top-level torch module held by the estimator.

    A module that is part of another one (``kernel_`` is ``model_.kernel``) is not a
    slot of its own: it is saved as a reference into that module.
    """
    slots = []
    params = est.get_params(deep=False)
    for name, value in vars(est).items():
        if name in params:  # constructor arguments are never fitted state
            continue
        if isinstance(value, torch.nn.Module):
            slots.append((name, None, value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.nn.Module) for v in value):
            slots.extend((name, k, v) for k, v in enumerate(value))
    inner = {id(m) for _, _, module in slots for m in list(module.modules())[1:]}
    return [slot for slot in slots if id(slot[2]) not in inner]


def slot_name(attribute: str, index: int | None) -> str:
    """``model_`` or ``models_[2]``: the name used in ``{"$module": ...}`` references."""
    return attribute if index is None else f"{attribute}[{index}]"


def _rebuild_base_regressor(est, state_dict) -> torch.nn.Module:
    X = getattr(est, "X_train_", None)
    if X is None:  # a model saved without its training rows (hdgp.io.compact)
        inducing = [v for k, v in state_dict.items() if k.endswith("inducing_points")]
        if inducing:
            X = inducing[0].to(**est._torch_kwargs)
        else:  # SKI: the kernel needs only the input dimension; the state dict sets its values
            d = next(v for k, v in state_dict.items() if k.endswith("projections")).shape[1]
            X = torch.zeros(2, d, **est._torch_kwargs)
    kernel = est._make_kernel(X)
    return est._make_model(kernel, X).to(dtype=X.dtype, device=X.device)


def _rebuild_gp_classifier(est, state_dict) -> torch.nn.Module:
    Z = state_dict["variational_strategy.inducing_points"].to(**est._torch_kwargs)
    natural = any(key.endswith("natural_vec") for key in state_dict)  # Adam/NGD-trained; L-BFGS: Cholesky q(v)
    return SVGPModel(est._make_kernel(Z), inducing_points=Z, likelihood="bernoulli",
                     learn_inducing=est.learn_inducing, natural_gradient=natural).to(**est._torch_kwargs)


def rebuild_module(est, attribute: str, index: int | None, state_dict: dict) -> torch.nn.Module:
    """An untrained module with the structure of ``est.<attribute>[index]`` (values come from ``state_dict``)."""
    hook = getattr(est, "_rebuild_module", None)
    if hook is not None:
        return hook(attribute, index, state_dict)
    if isinstance(est, BaseGPRegressor) and attribute == "model_" and index is None:
        return _rebuild_base_regressor(est, state_dict)
    if isinstance(est, GPClassifier) and attribute == "models_" and index is not None:
        return _rebuild_gp_classifier(est, state_dict)
    raise TypeError(f"{type(est).__name__} does not say how to rebuild its {slot_name(attribute, index)} "
                    "(define _rebuild_module(attribute, index, state_dict)).")


def load_state(module: torch.nn.Module, state_dict: dict) -> None:
    """``load_state_dict`` (strict) after giving data buffers the shapes stored in the file.

    Buffers hold data such as measure locations (e.g. one per distinct training value
    for an empirical measure), whose size a rebuild without the training inputs cannot
    know; parameters must match exactly.
    """
    owners = dict(module.named_modules())
    for key, value in state_dict.items():
        owner_name, _, leaf = key.rpartition(".")
        owner = owners.get(owner_name)
        current = None if owner is None else owner._buffers.get(leaf)
        if current is not None and current.shape != value.shape:
            owner._buffers[leaf] = torch.empty(value.shape, dtype=current.dtype, device=current.device)
    module.load_state_dict(state_dict)
