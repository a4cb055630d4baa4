"""Reading model files of older formats: every conversion of stored contents in one place.

:func:`upgrade_contents` is called by :func:`hdgp.io.modelfile.load_parts` on the manifest and
tensors of a file whose ``format_version`` predates a change of what is stored; it converts
them, in place, to what this version reads.
"""

from __future__ import annotations

import torch

from ..estimators._sigp_base import _SIGPBase
from ..estimators.projected import ProjectedAdditiveGPRegressor

__all__ = ["upgrade_contents", "sigp_pivot_inputs"]

#: Raw parameters of a ``ProjectedAdditiveGPRegressor``'s model that format 1.x stored as
#: softplus⁻¹(value) and 2.0 stores as log(value).
_SOFTPLUS_IN_1X = ("kernel.raw_outputscale", "kernel.base_kernel.raw_input_lengthscale",
                   "kernel.base_kernel.raw_projection_lengthscale")


def upgrade_contents(manifest: dict, cls, tensors: dict) -> None:
    """Convert, in place, the manifest and stored values of a file whose encoding a later format
    changed: a format-1.x projected-additive model's raw scales (softplus⁻¹(v) then, log(v)
    now), and a SIGP model before 2.3, which stored its training inputs instead of the kernel
    factor's pivot rows (the only rows prediction reads)."""
    version = tuple(manifest["format_version"])
    if version < (2, 3) and issubclass(cls, _SIGPBase):
        sigp_pivot_inputs(manifest["estimator"]["state"], tensors)
    if version[0] >= 2 or not issubclass(cls, ProjectedAdditiveGPRegressor):
        return
    for slot in manifest["estimator"].get("modules") or []:
        for name in _SOFTPLUS_IN_1X:
            key = slot["state_dict_prefix"] + name
            if key in tensors:
                tensors[key] = torch.nn.functional.softplus(tensors[key]).log()


def sigp_pivot_inputs(state: dict, tensors: dict) -> None:
    """Replace a stored SIGP model's ``X_train`` by its kernel factor's ``pivot_inputs`` (format 2.3)."""
    def entries(node) -> list:  # the [key, value] pairs of a $dict node, or of an $object's state
        return (node["state"] if "$object" in node else node)["$dict"]

    model = dict(entries(state)).get("model_")
    if model is None:  # not fitted
        return
    fields = entries(model)
    X_train = dict(fields)["X_train"]["$tensor"]
    fields[:] = [kv for kv in fields if kv[0] != "X_train"]
    factor = entries(dict(fields)["factor"])
    pivots = dict(factor)["pivots"]["$tensor"]
    key = f"t{len(tensors)}"
    while key in tensors:
        key += "_"
    tensors[key] = tensors[X_train][tensors[pivots]]
    factor.append(["pivot_inputs", {"$tensor": key}])
