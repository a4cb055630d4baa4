r"""The ``.hdgp`` model file: a versioned zip archive with a JSON manifest and tensors.

Layout (format 2.x)
-------------------
A model file is a zip archive with exactly these members:

``manifest.json``
    UTF-8 JSON object::

        {
          "format": "hdgp-model",
          "format_version": [2, 0],          # [major, minor]
          "library_version": "0.1.0",        # hdgp that wrote the file
          "created": "2026-01-01T00:00:00+00:00",
          "estimator": {
            "class": "hdgp.estimators.oak.OAKRegressor",
            "params": <node>,                # get_params(deep=False)
            "state": <node>,                 # every other attribute (fitted values)
            "modules": [                     # torch modules held by the estimator
              {"attribute": "model_", "index": null, "state_dict_prefix": "model_state/"}
            ],                               # (a list attribute: "models_", index k, "models_[k]/")
            "recompute": ["posterior_"],     # posteriors saved without their n×n factor
            "members": [...]                 # a mixture only (format 2.6): per member "name",
          },                                 # "encoding", "columns" and its own "estimator" node,
                                             # whose tensors are stored under "member<k>/"
          "table": <node> | null,            # hdgp.io.TableSchema of the training table
          "metadata": <node> | null,         # free-form: metrics, data summary, ...
          "tensors": {"member": "tensors.pt", "sha256": "...", "count": 12}
        }

    ``<node>`` is the JSON encoding of :mod:`hdgp.io.codec` (tagged objects such as
    ``{"$tensor": "t3"}``, ``{"$tuple": [...]}``, ``{"$object": "hdgp...."}``).

``tensors.pt``
    ``torch.save`` of a flat ``{str: torch.Tensor}`` dictionary (CPU tensors): the
    ``t<k>`` keys referenced from the manifest and the ``state_dict`` of every module
    slot under its prefix. It is read with
    ``torch.load(weights_only=True)``, so loading never executes code from the file.

Loading
-------
The estimator is created from its class and ``params``, the stored attributes are
set, and its GPyTorch modules (``model_``, or a list such as ``models_``) are rebuilt
with the estimator's own kernel and engine factories (:mod:`hdgp.io.rebuild`) before
``load_state_dict``; references such as ``{"$module": "model_:kernel"}`` then resolve
to the rebuilt sub-modules, and cached
posteriors are restored from their stored tensors, so predictions are identical. The
Cholesky factor of an exact posterior with more than
:data:`hdgp.io.compact.MAX_STORED_FACTOR` training rows is not stored but recomputed
with the fit's own operations, and a sparse or variational regressor is saved without its
training rows, which it does not predict from (both in :mod:`hdgp.io.compact`).

Compatibility
-------------
Files of a newer major ``format_version`` than :data:`FORMAT_VERSION` are refused with
:class:`ModelFileError`; format 1.x files are read and converted (2.0 changed how the
projected-additive kernel's scales are stored), and older minor versions are converted where
a later minor changed what is stored (:func:`~hdgp.io.upgrade.upgrade_contents`). A newer minor version is read
with a :class:`~hdgp.exceptions.HDGPWarning`: it adds optional fields, which this version
ignores, but it may also leave out what this version needs (see :data:`FORMAT_VERSION`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io as _io
import json
import warnings
import zipfile
from pathlib import Path

import torch
from sklearn.base import BaseEstimator

from .. import _version
from ..exceptions import HDGPWarning
from .atomic import write_bytes_atomic
from .compact import compact_state, restore_state
from .codec import StateDecoder, StateEncoder, UnsupportedStateError, _import_hdgp_class
from .rebuild import load_state, module_slots, rebuild_module, slot_name
from .upgrade import upgrade_contents

__all__ = ["FORMAT_VERSION", "ModelFileError", "save", "load", "load_parts", "read_manifest"]

#: (major, minor) of the format this version writes. 1.1 added ``$pandas`` nodes (pandas scalars
#: as category levels); a 1.0 reader warns on such a file and fails on the node. 2.0 stores the
#: projected-additive kernel's length-scales and output scale as logarithms (1.x: GPyTorch's
#: softplus), which a 1.x reader would misread; 1.x files are converted when read. 2.1 adds the OAK
#: flow's ``log_min_`` (a 2.0 file's flow refuses values <= 0 in a log-transformed feature). 2.2
#: adds the SKI posterior's ``columns`` (its variance cache keeps r_j columns per projection; an
#: older file's cache keeps the same number for all, which 2.2 still reads). 2.3 stores a SIGP
#: model's r pivot rows instead of its n×p training inputs (older files are converted when read;
#: a 2.2 reader cannot predict from a 2.3 SIGP file). 2.4 adds the OAK flow's ``log_start_`` (started
#: logs of skewed features that are not positive; an older file's flow reads as log x, which is
#: what it stored, and a 2.3 reader mis-warps such a feature). 2.5 adds ``$splitter`` and ``$randomstate``
#: nodes (a scikit-learn splitter as ``cv``, a ``RandomState`` as ``random_state``; a 2.4 reader refuses them).
#: 2.6 adds mixtures (``--model auto``'s stack): the estimator node's ``members``, each a nested estimator
#: node with its tensors under ``member<k>/`` (a 2.5 reader cannot rebuild one). 2.7 stores a mixture's
#: constructor parameters (its members as unfitted templates, weights, features, levels): a 2.6 reader cannot
#: construct it; a 2.6 file's mixture gets them from its fitted members when read (``_params_from_fitted``).
FORMAT_VERSION = (2, 7)
#: Oldest major version this version reads (:func:`~hdgp.io.upgrade.upgrade_contents` converts older majors).
_OLDEST_READABLE_MAJOR = 1
_FORMAT_NAME = "hdgp-model"
_MANIFEST = "manifest.json"
_TENSORS = "tensors.pt"
#: Largest manifest accepted (real ones are kilobytes; a decompression bomb is refused before it expands).
_MAX_MANIFEST_BYTES = 64 * 2**20
_MODEL_PREFIX = "model_state/"
#: Prefix of the tensors of member k of a mixture (format 2.6), whose node's keys are without it.
_MEMBER_PREFIX = "member{}/"
#: The class a file with a table section loads as. Named, as the manifest names its estimator
#: class, so that this layer imports nothing from the workflow above it (which saves through
#: the ``_to_model_file`` hook).
_TABLE_MODEL = "hdgp.workflow.tabular.TabularModel"


class ModelFileError(ValueError):
    """A model file cannot be written or read (damaged, wrong version, not an hdgp file)."""


def _library_version() -> str:
    return _version.__version__


# ---------------------------------------------------------------------- saving
def _slot_prefix(attribute: str, index: int | None) -> str:
    return _MODEL_PREFIX if (attribute, index) == ("model_", None) else f"{slot_name(attribute, index)}/"


def save(est, path, *, table=None, metadata=None) -> Path:
    """Write a fitted estimator to ``path`` (a ``.hdgp`` zip archive; see the module docstring).

    The file is written to a temporary file in the same folder and renamed into
    place, so an interrupted save never leaves a half-written model.

    Parameters
    ----------
    est : fitted hdgp estimator
        Any hdgp estimator (``GPRegressor``, ``OAKRegressor``, ``SIGPRegressor``, ...).
        A :class:`hdgp.workflow.TabularModel` is saved with its table schema.
    path : str or Path
    table : hdgp.io.TableSchema, optional
        Schema of the training table (columns, types, categorical levels).
    metadata : dict, optional
        Extra JSON-like information (metrics, data summary, arrays) to keep.

    Returns
    -------
    Path

    Raises
    ------
    ModelFileError
        If the estimator is not fitted or holds something that cannot be stored.
    IsADirectoryError
        If ``path`` is an existing folder.
    """
    if hasattr(est, "_to_model_file"):
        est, table, metadata = est._to_model_file()
    path = Path(path)
    if path.is_dir():  # the atomic rename would name its temporary file instead
        raise IsADirectoryError(f"{str(path)!r} is a folder; give hdgp.save a file name, e.g. {str(path / 'model.hdgp')!r}.")
    if type(est).__module__.split(".")[0] != "hdgp" or not hasattr(est, "get_params"):
        name = f"{type(est).__module__}.{type(est).__qualname__}"
        hint = (" Save its final step (pipe[-1]) with hdgp.save, or the whole pipeline with joblib or pickle."
                if hasattr(est, "steps") else " Use joblib or pickle for other objects.")
        raise ModelFileError(f"hdgp.save stores fitted hdgp estimators; got a {name}.{hint}")
    if not any(k.endswith("_") and not k.startswith("__") for k in vars(est)):
        raise ModelFileError(f"{type(est).__name__} is not fitted yet; call fit before saving it.")
    try:
        spec, encoder, tensors = _encode_estimator(est)
        manifest = {
            "format": _FORMAT_NAME,
            "format_version": list(FORMAT_VERSION),
            "library_version": _library_version(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "estimator": spec,
            "table": encoder.encode(table, "table"),
            "metadata": encoder.encode(metadata, "metadata"),
        }
    except UnsupportedStateError as exc:
        raise ModelFileError(
            f"Cannot save this {type(est).__name__}: {exc} Model files hold estimators built from named kernels "
            "and presets; for a model with your own kernel object use pickle (trusted files only). A parameter "
            "that only fit uses can be set to a storable value with set_params before saving (cv or "
            "random_state to an int, a scorer object in scoring to its name or None)."
        ) from exc
    tensors = {**encoder.tensors, **tensors}
    buffer = _io.BytesIO()
    torch.save(tensors, buffer)
    blob = buffer.getvalue()
    manifest["tensors"] = {"member": _TENSORS, "sha256": hashlib.sha256(blob).hexdigest(), "count": len(tensors)}
    _atomic_write_zip(path, json.dumps(manifest, indent=1, allow_nan=False).encode("utf-8"), blob)
    return path


def _encode_estimator(est) -> tuple[dict, StateEncoder, dict]:
    """The manifest's ``estimator`` node of ``est``, its encoder (whose ``tensors`` the node's ``$tensor``
    keys name; more may be encoded with it) and its modules' tensors. A mixture (``_model_file_members``
    names its attribute of ``(name, estimator, encoding, columns)`` members: ``--model auto``'s stack)
    nests each member's node under ``members``, its tensors under ``member<k>/``."""
    slots = module_slots(est)
    encoder = StateEncoder({id(m): f"{slot_name(a, i)}:{n}" for a, i, mod in slots for n, m in mod.named_modules()})
    cls = type(est)
    nested = getattr(cls, "_model_file_members", None)
    params = est.get_params(deep=False)
    state, recompute = compact_state({k: v for k, v in vars(est).items() if k not in params and k != nested})
    spec = {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "params": encoder.encode(params, "parameter"),
        "state": encoder.encode(state, "attribute"),
        "modules": [{"attribute": a, "index": i, "state_dict_prefix": _slot_prefix(a, i)} for a, i, _ in slots],
        "recompute": recompute,
    }
    tensors = {}
    for attribute, index, module in slots:
        prefix = _slot_prefix(attribute, index)
        tensors.update({prefix + k: v.detach().cpu().clone() for k, v in module.state_dict().items()})
    if nested is not None:
        spec["members"] = []
        for k, (name, member, encoding, columns) in enumerate(getattr(est, nested)):
            node, member_encoder, member_tensors = _encode_estimator(member)
            spec["members"].append({"name": str(name), "encoding": str(encoding), "columns": [str(c) for c in columns],
                                    "estimator": node})
            tensors.update({f"{_MEMBER_PREFIX.format(k)}{key}": v
                            for key, v in {**member_encoder.tensors, **member_tensors}.items()})
    return spec, encoder, tensors


def _atomic_write_zip(path: Path, manifest: bytes, blob: bytes) -> None:
    archive = _io.BytesIO()
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_MANIFEST, manifest)
        zf.writestr(_TENSORS, blob)
    try:
        write_bytes_atomic(path, archive.getvalue())
    except FileNotFoundError as exc:
        raise ModelFileError(str(exc)) from exc


# --------------------------------------------------------------------- loading
def _damaged(path, why: str) -> ModelFileError:
    return ModelFileError(
        f"{path} is not a readable hdgp model file ({why}). It may be truncated or damaged, or not "
        "have been written by `hdgp.save` / `hdgp fit`; save or fit the model again."
    )


def _read_members(path) -> tuple[dict, bytes]:
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"Model file {path} does not exist.")
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder, not a model file.")
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if _MANIFEST not in names:
                raise _damaged(path, f"no {_MANIFEST} inside")
            size = zf.getinfo(_MANIFEST).file_size  # reads stop at the declared size: a zip bomb stops here
            if size > _MAX_MANIFEST_BYTES:
                raise _damaged(path, f"its manifest is {size} bytes, more than the {_MAX_MANIFEST_BYTES} allowed")
            manifest = json.loads(zf.read(_MANIFEST).decode("utf-8"))
            blob = zf.read(_TENSORS) if _TENSORS in names else None
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, zipfile.LargeZipFile) as exc:
        raise _damaged(path, f"not a valid zip archive: {exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _damaged(path, f"its manifest is not valid JSON: {exc}") from exc
    except Exception as exc:  # zlib.error and friends from a corrupt stream
        raise _damaged(path, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT_NAME:
        raise _damaged(path, "its manifest does not describe an hdgp model")
    return manifest, blob


def _check_version(path, manifest: dict) -> None:
    version = manifest.get("format_version")
    if not (isinstance(version, list) and len(version) == 2 and all(isinstance(v, int) for v in version)):
        raise _damaged(path, f"invalid format_version {version!r}")
    writer = manifest.get("library_version", "unknown")
    if not _OLDEST_READABLE_MAJOR <= version[0] <= FORMAT_VERSION[0]:
        newer = version[0] > FORMAT_VERSION[0]
        raise ModelFileError(
            f"{path} uses model-file format {version[0]}.{version[1]} (written by hdgp {writer}), but this "
            f"hdgp {_library_version()} reads formats {_OLDEST_READABLE_MAJOR}.x to {FORMAT_VERSION[0]}.x only. "
            + ("Upgrade hdgp (pip install -U hdgp) to read it." if newer
               else "Refit the model with this version of hdgp.")
        )
    if version[0] == FORMAT_VERSION[0] and version[1] > FORMAT_VERSION[1]:
        warnings.warn(
            f"{path} was written by a newer hdgp ({writer}, format {version[0]}.{version[1]}); "
            "fields this version does not know are ignored.", HDGPWarning, stacklevel=3,
        )


def read_manifest(path) -> dict:
    """Return the manifest of a model file without loading tensors (checks the format version)."""
    manifest, _ = _read_members(path)
    _check_version(path, manifest)
    return manifest


def _load_tensors(path, manifest: dict, blob: bytes | None) -> dict:
    info = manifest.get("tensors") or {}
    if blob is None:
        raise _damaged(path, f"no {_TENSORS} inside")
    if info.get("sha256") != hashlib.sha256(blob).hexdigest():
        raise _damaged(path, "the tensor data does not match its checksum")
    try:
        tensors = torch.load(_io.BytesIO(blob), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise _damaged(path, f"cannot read the tensors: {exc}") from exc
    if not isinstance(tensors, dict) or not all(isinstance(v, torch.Tensor) for v in tensors.values()):
        raise _damaged(path, "the tensor data is not a dictionary of tensors")
    return tensors


def load(path, *, device=None):
    """Read a model written by :func:`save` (or ``hdgp fit``).

    Parameters
    ----------
    path : str or Path
    device : None or str, optional
        Torch device for the model's tensors (e.g. ``"cpu"``, ``"cuda"``), for
        estimators with a ``device`` parameter. None: the device it was fitted on,
        or the CPU (with a warning) when that GPU is not available here.

    Returns
    -------
    estimator or hdgp.workflow.TabularModel
        A :class:`~hdgp.workflow.TabularModel` when the file holds a table schema
        (files written by ``hdgp fit``), otherwise the fitted estimator.

    Raises
    ------
    ModelFileError
        Missing, truncated or damaged file; file from an incompatible format version.
    """
    est, table, metadata = load_parts(path, device=device)
    if table is not None:
        try:
            return _import_hdgp_class(_TABLE_MODEL)._from_model_file(est, table, metadata)
        except Exception as exc:
            raise _damaged(path, f"cannot restore the table model: {exc}") from exc
    return est


def _choose_device(est, path, device):
    """Set the estimator's ``device`` parameter for this machine; return the torch device for tensors."""
    params = est.get_params(deep=False)
    if "device" not in params:
        return torch.device("cpu")
    wanted = params["device"] if device is None else device
    try:
        target = torch.device("cpu" if wanted is None else wanted)
    except (RuntimeError, TypeError) as exc:
        raise ModelFileError(f"device must be None, 'cpu' or 'cuda[:N]', got {wanted!r}.") from exc
    if target.type == "cuda" and not torch.cuda.is_available():
        if device is not None:
            raise ModelFileError(f"Cannot load {path} onto {wanted!r}: no CUDA GPU is available; use device='cpu'.")
        warnings.warn(f"{path} was fitted on {wanted!r}, which is not available here; it is loaded on the CPU "
                      "(predictions agree up to floating-point rounding).", HDGPWarning, stacklevel=4)
        target = torch.device("cpu")
    est.set_params(device=None if target.type == "cpu" else str(target))
    return target


#: Optional estimator methods that loading looks up on the instance (never taken from a file).
_LOAD_HOOKS = frozenset({"_rebuild_module", "_rebuild_model", "_to_model_file", "_from_model_file"})


def _fitted_state(cls, state: dict) -> dict:
    """``state`` unless it would shadow a method or property of ``cls`` (a crafted file could then
    make loading call into its data); raises ``ValueError``."""
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError("the fitted state is not a dictionary of attribute names")
    clash = sorted(k for k in state if k.startswith("__") or k in _LOAD_HOOKS or callable(getattr(cls, k, None))
                   or isinstance(getattr(cls, k, None), property))
    if clash:
        raise ValueError(f"the fitted state would replace {cls.__name__} methods {clash}")
    return state


def load_parts(path, *, device=None):
    """Like :func:`load` but return ``(estimator, table schema or None, metadata or None)``."""
    try:
        return _load_parts(path, device)
    except ModelFileError:
        raise
    except Exception as exc:  # a malformed manifest field the steps below did not anticipate
        raise _damaged(path, f"{type(exc).__name__}: {exc}") from exc


def _load_parts(path, device):
    manifest, blob = _read_members(path)
    _check_version(path, manifest)
    tensors = _load_tensors(path, manifest, blob)
    writer = manifest.get("library_version")
    versions = "" if writer == _library_version() else f"; written by hdgp {writer}, read by hdgp {_library_version()}"
    est, decoder = _load_estimator(path, manifest.get("estimator"), tensors, device, versions, manifest)
    try:
        table = decoder.decode(manifest.get("table"))
        metadata = decoder.decode(manifest.get("metadata"))
    except Exception as exc:
        raise _damaged(path, f"cannot restore the fitted state: {exc}{versions}") from exc
    return est, table, metadata


def _load_estimator(path, spec, tensors, device, versions, manifest=None):
    """The estimator of the manifest node ``spec`` (its ``$tensor`` keys in ``tensors``) and the decoder
    that restored it; ``manifest`` (the top-level estimator's) for :func:`upgrade_contents`. A mixture's
    ``members`` are loaded from their own nodes and ``member<k>/`` tensors."""
    try:
        cls = _import_hdgp_class(spec["class"])
        if not issubclass(cls, BaseEstimator):  # the constructor runs: only estimators, never e.g. a ResultStore
            raise ValueError(f"{spec['class']!r} is not an hdgp estimator")
        if manifest is not None:
            upgrade_contents(manifest, cls, tensors)
        est = cls(**StateDecoder(tensors).decode(spec["params"]))
        target = _choose_device(est, path, device)
        first = StateDecoder(tensors, device=target)
        state_node = spec["state"]
        slots = spec.get("modules") or []
    except ModelFileError:
        raise
    except Exception as exc:
        raise _damaged(path, f"cannot rebuild the estimator: {exc}{versions}") from exc
    modules = {}
    if slots:
        # pass 1: everything except references to modules, which are rebuilt from it
        try:
            est.__dict__.update(_fitted_state(cls, first.decode(_strip_modules(state_node))))
        except Exception as exc:
            raise _damaged(path, f"cannot restore the fitted state: {exc}{versions}") from exc
        for slot in slots:
            attribute, index, prefix = slot["attribute"], slot["index"], slot["state_dict_prefix"]
            try:
                state_dict = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
                module = rebuild_module(est, attribute, index, state_dict)
                load_state(module, state_dict)
                module.to(target)
            except Exception as exc:
                raise _damaged(path, f"cannot rebuild {cls.__name__}.{slot_name(attribute, index)}: "
                                     f"{exc}{versions}") from exc
            module.eval()
            for p in module.parameters():
                p.requires_grad_(False)
            modules.update({f"{slot_name(attribute, index)}:{n}": m for n, m in module.named_modules()})
    try:
        decoder = StateDecoder(tensors, modules, device=target)
        est.__dict__.update(_fitted_state(cls, decoder.decode(state_node)))
        restore_state(est, spec.get("recompute") or [])
    except Exception as exc:
        raise _damaged(path, f"cannot restore the fitted state: {exc}{versions}") from exc
    nested = getattr(cls, "_model_file_members", None)
    if nested is not None:
        members = []
        for k, node in enumerate(spec.get("members") or []):
            prefix = _MEMBER_PREFIX.format(k)
            own = {key[len(prefix):]: v for key, v in tensors.items() if key.startswith(prefix)}
            member, _ = _load_estimator(path, node["estimator"], own, device, versions)
            members.append((str(node["name"]), member, str(node["encoding"]), [str(c) for c in node["columns"]]))
        if not members:
            raise _damaged(path, f"the {cls.__name__} has no members{versions}")
        setattr(est, nested, members)
        est._params_from_fitted()
    return est, decoder


def _strip_modules(node):
    """The ``$dict`` state node without the attributes that reference model modules."""
    def has_module(n) -> bool:
        if isinstance(n, dict):
            return "$module" in n or any(has_module(v) for v in n.values())
        if isinstance(n, list):
            return any(has_module(v) for v in n)
        return False

    return {"$dict": [kv for kv in node["$dict"] if not has_module(kv[1])]}
