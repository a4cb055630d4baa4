"""Encode fitted state as JSON plus a flat dictionary of tensors, and back.

The encoding is data only: decoding never runs code stored in a file. Objects are
rebuilt only from classes that live in the ``hdgp`` package (by dotted name,
without calling their constructor) and from scikit-learn's public cross-validation
splitters (by class name, through their constructors, which only store their arguments),
tensors come from ``torch.load(weights_only=True)`` and everything else is plain JSON.

JSON node forms (documented in :mod:`hdgp.io.modelfile`):

=====================================  ============================================
``null``, ``true``, number, string      the same Python value
list                                     ``list`` of nodes
``{"$float": "nan" | "inf" | "-inf"}``   non-finite float
``{"$tuple": [...]}``                    ``tuple``
``{"$dict": [[key, value], ...]}``       ``dict`` (keys are nodes, order kept)
``{"$tensor": key}``                     ``torch.Tensor`` stored under ``key``
``{"$array": key}``                      numeric ``numpy.ndarray`` stored under ``key``
``{"$strarray": [...], "dtype": d}``     ``numpy.ndarray`` of strings/objects (1-D)
``{"$np": dtype, "value": v}``           NumPy scalar
``{"$dtype": name}``                     ``torch.dtype``
``{"$pandas": kind, ...}``               pandas ``Timestamp`` / ``Timedelta`` (ns, tz), ``Period``
                                         (text, freq) or ``Interval`` (ends, closed): category levels
``{"$object": "hdgp.mod.Class", ...}``   hdgp object rebuilt from its attribute dict
``{"$splitter": "KFold", "params": d}``  scikit-learn cross-validation splitter (a class of
                                         ``sklearn.model_selection``) rebuilt from its constructor
                                         parameters (format 2.5)
``{"$randomstate": key, ...}``           ``numpy.random.RandomState`` and its MT19937 state (2.5)
``{"$module": path}``                    sub-module of the estimator's model (by name)
=====================================  ============================================
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import numbers

import numpy as np
import pandas as pd
import sklearn.model_selection as model_selection
import torch

__all__ = ["StateEncoder", "StateDecoder", "UnsupportedStateError"]

_TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


class UnsupportedStateError(TypeError):
    """A value cannot be written to a model file (e.g. a user-defined kernel object)."""


class StateEncoder:
    """Turn nested Python state into JSON nodes, collecting tensors in :attr:`tensors`.

    Parameters
    ----------
    modules : dict, optional
        ``id(module) -> name`` for the torch modules that are saved separately
        (their state dict) and referenced by name.
    """

    def __init__(self, modules: dict | None = None):
        self.tensors: dict[str, torch.Tensor] = {}
        self._seen: dict[int, str] = {}
        self._alive: list = []  # keeps encoded objects alive so their ids stay unique
        self._modules = modules or {}

    def _store(self, obj) -> str:
        """Store a tensor or numeric array once (shared objects share one key)."""
        key = self._seen.get(id(obj))
        if key is None:
            key = f"t{len(self.tensors)}"
            # np.array copies: the array may be a read-only view, which torch.from_numpy warns about
            tensor = obj if isinstance(obj, torch.Tensor) else torch.from_numpy(np.array(obj, order="C"))
            self.tensors[key] = tensor.detach().cpu().clone().contiguous()
            self._seen[id(obj)] = key
            self._alive.append(obj)
        return key

    def encode(self, value, where: str = "value"):
        """Encode ``value``; ``where`` names it in error messages."""
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.generic):
            return {"$np": value.dtype.str, "value": self.encode(value.item(), where)}
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, torch.nn.Module):
            if id(value) in self._modules:
                return {"$module": self._modules[id(value)]}
            raise UnsupportedStateError(
                f"{where} is a torch module ({type(value).__name__}) that is not part of the "
                "estimator's fitted model, so it cannot be saved."
            )
        if isinstance(value, torch.Tensor):
            return {"$tensor": self._store(value)}
        if isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "biufc":
                return {"$array": self._store(value)}
            if value.ndim == 1:
                return {"$strarray": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value.tolist())],
                        "dtype": value.dtype.str if value.dtype.kind in "US" else "object"}
        if isinstance(value, pd.Timestamp):
            return {"$pandas": "Timestamp", "ns": int(value.as_unit("ns").value),
                    "tz": None if value.tz is None else str(value.tz)}
        if isinstance(value, pd.Timedelta):
            return {"$pandas": "Timedelta", "ns": int(value.as_unit("ns").value)}
        if isinstance(value, pd.Period):
            return {"$pandas": "Period", "value": str(value), "freq": value.freqstr}
        if isinstance(value, pd.Interval):
            return {"$pandas": "Interval", "left": self.encode(value.left, where),
                    "right": self.encode(value.right, where), "closed": value.closed}
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {"$dict": [[self.encode(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in value.items()]}
        if type(value) is np.random.RandomState:
            _, keys, pos, has_gauss, cached = value.get_state(legacy=True)
            return {"$randomstate": self._store(keys.astype(np.int64)), "pos": int(pos),
                    "has_gauss": int(has_gauss), "cached_gaussian": self.encode(float(cached), where)}
        cls = type(value)
        if _splitter_class(cls.__name__) is cls:
            return {"$splitter": cls.__name__, "params": self.encode(_splitter_params(value, where), where)}
        if cls.__module__.split(".")[0] == "hdgp" and hasattr(value, "__dict__"):
            return {"$object": f"{cls.__module__}.{cls.__qualname__}",
                    "state": self.encode(dict(vars(value)), f"{where}.__dict__")}
        raise UnsupportedStateError(
            f"{where} has type {cls.__module__}.{cls.__qualname__}, which hdgp model files cannot "
            "store (only numbers, strings, arrays, tensors and hdgp objects)."
        )


def _splitter_class(name: str):
    """The scikit-learn cross-validation splitter class ``sklearn.model_selection.<name>``, or None.

    Only the public, concrete splitters (a ``split`` and a ``get_n_splits`` method) qualify: their
    constructors just store their arguments, so rebuilding one from a file runs no stored code.
    """
    if not isinstance(name, str) or name not in model_selection.__all__ or name.startswith(("Base", "Halving")):
        return None
    cls = getattr(model_selection, name, None)
    if not (isinstance(cls, type) and callable(getattr(cls, "split", None))
            and callable(getattr(cls, "get_n_splits", None))):
        return None
    return cls


def _splitter_params(splitter, where: str) -> dict:
    """The constructor arguments of a scikit-learn splitter, read back from its attributes (the
    repeated splitters keep those of their inner splitter in ``cvargs``)."""
    params = {}
    inner = getattr(splitter, "cvargs", None) or {}
    for name, parameter in inspect.signature(type(splitter).__init__).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if hasattr(splitter, name):
            params[name] = getattr(splitter, name)
        elif name in inner:
            params[name] = inner[name]
        else:
            raise UnsupportedStateError(
                f"{where} is a {type(splitter).__name__} whose parameter {name!r} cannot be read back."
            )
    return params


def _import_hdgp_class(path: str):
    """Return the class at dotted ``path``; only classes of the hdgp package are allowed."""
    module_name, _, qualname = path.rpartition(".")
    if module_name.split(".")[0] != "hdgp" or not qualname.isidentifier():
        raise ValueError(f"refusing to rebuild {path!r}: model files may only name hdgp classes")
    cls = getattr(importlib.import_module(module_name), qualname, None)
    # defined in hdgp, not merely imported into an hdgp module (pathlib.Path, ProcessPoolExecutor, ...)
    if (not isinstance(cls, type) or issubclass(cls, torch.nn.Module)
            or str(getattr(cls, "__module__", "")).split(".")[0] != "hdgp"):
        raise ValueError(f"{path!r} is not a data class of this hdgp version")
    return cls


class StateDecoder:
    """Inverse of :class:`StateEncoder`.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
    modules : dict, optional
        ``name -> module`` to resolve ``{"$module": name}`` nodes.
    device : torch.device, optional
        Where ``$tensor`` nodes are placed (NumPy arrays always come from CPU copies).
    """

    def __init__(self, tensors: dict, modules: dict | None = None, device=None):
        self.tensors = tensors
        self.modules = modules
        self.device = device
        self._placed: dict = {}

    def _tensor(self, key):
        try:
            return self.tensors[key]
        except (KeyError, TypeError):
            raise ValueError(f"the manifest refers to a missing tensor {key!r}") from None

    def _pandas(self, node):
        kind = node["$pandas"]
        if kind == "Timestamp":
            return pd.Timestamp(node["ns"], unit="ns", tz="UTC").tz_convert(node["tz"]) if node["tz"] \
                else pd.Timestamp(node["ns"], unit="ns")
        if kind == "Timedelta":
            return pd.Timedelta(node["ns"], unit="ns")
        if kind == "Period":
            return pd.Period(node["value"], freq=node["freq"])
        if kind == "Interval":
            return pd.Interval(self.decode(node["left"]), self.decode(node["right"]), closed=node["closed"])
        raise ValueError(f"unknown pandas value kind {kind!r}")

    def decode(self, node):
        """Decode one JSON node (raises ``ValueError`` on malformed input)."""
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict) or len(node) == 0:
            raise ValueError(f"unexpected node {node!r}")
        tag = next(iter(node))
        if tag == "$float":
            return float(node[tag])
        if tag == "$tuple":
            return tuple(self.decode(v) for v in node[tag])
        if tag == "$dict":
            return {_hashable(self.decode(k)): self.decode(v) for k, v in node[tag]}
        if tag == "$tensor":
            key = node[tag]
            if key not in self._placed:  # tensors shared in the file stay shared after loading
                tensor = self._tensor(key)
                self._placed[key] = tensor if self.device is None else tensor.to(self.device)
            return self._placed[key]
        if tag == "$array":
            return self._tensor(node[tag]).numpy()
        if tag == "$strarray":
            return np.asarray([self.decode(v) for v in node[tag]], dtype=np.dtype(node["dtype"]))
        if tag == "$np":
            return np.dtype(node[tag]).type(self.decode(node["value"]))
        if tag == "$dtype":
            return _TORCH_DTYPES[node[tag]]
        if tag == "$pandas":
            return self._pandas(node)
        if tag == "$module":
            if self.modules is None or node[tag] not in self.modules:
                raise ValueError(f"reference to unknown model part {node[tag]!r}")
            return self.modules[node[tag]]
        if tag == "$randomstate":
            keys = self._tensor(node[tag]).numpy()
            state = np.random.RandomState()
            state.set_state(("MT19937", keys.astype(np.uint32), int(node["pos"]), int(node["has_gauss"]),
                             float(self.decode(node["cached_gaussian"]))))
            return state
        if tag == "$splitter":
            cls = _splitter_class(node[tag])
            if cls is None:
                raise ValueError(f"{node[tag]!r} is not a scikit-learn cross-validation splitter")
            params = self.decode(node["params"])
            if not (isinstance(params, dict) and all(isinstance(k, str) for k in params)):
                raise ValueError(f"the parameters of a {node[tag]} are not a dictionary of names")
            return cls(**params)
        if tag == "$object":
            cls = _import_hdgp_class(node[tag])
            obj = cls.__new__(cls)
            state = self.decode(node["state"])
            if dataclasses.is_dataclass(cls):  # a field with a default was added by a later minor format
                fields = [f for f in dataclasses.fields(cls) if f.name not in state]
                missing = [f.name for f in fields if f.default is dataclasses.MISSING]
                if missing:
                    raise ValueError(f"{node[tag]} is missing fields {sorted(missing)}")
                obj.__dict__.update({f.name: f.default for f in fields})
            obj.__dict__.update(state)
            return obj
        raise ValueError(f"unknown node tag {tag!r}")


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key
