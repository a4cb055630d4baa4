"""The compiled (Numba) loops where Numba cannot cache or compile: hdgp must still import and compute."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import hdgp

_SCRIPT = """
import torch
import hdgp.kernels._compiled as compiled
from hdgp.kernels.additive_kernel import additive_sum
base = torch.rand(3, 20, 30, dtype=torch.float64, requires_grad=True)
variances = torch.tensor([0.5, 1.0, 0.3, 0.2], dtype=torch.float64)
out = additive_sum(base, variances)
out.sum().backward()
print(compiled.use_compiled(base), bool(torch.isfinite(out).all()), bool(torch.isfinite(base.grad).all()))
"""


def _run(env_updates, pythonpath):
    env = {**os.environ, **env_updates, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300)


def test_no_writable_cache_folder_compiles_without_a_cache(tmp_path):
    """A read-only installation and home (containers): Numba finds no cache locator and would raise at
    import; hdgp compiles without a cache instead. Files stand where Numba's folders would be created
    (unwritable even for root)."""
    package = tmp_path / "site" / "hdgp"
    shutil.copytree(Path(hdgp.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "kernels" / "__pycache__").write_text("")  # the in-tree cache folder cannot be made
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    env = {"NUMBA_CACHE_DIR": str(blocker / "numba"), "XDG_CACHE_HOME": str(blocker / "cache"),
           "HOME": str(blocker / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    result = _run(env, package.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "True", "True"]


def test_numba_jit_disabled_takes_the_tensor_code(tmp_path):
    """NUMBA_DISABLE_JIT=1 would run the loops as Python (~100x slower): the tensor code runs instead."""
    result = _run({"NUMBA_DISABLE_JIT": "1"}, Path(hdgp.__file__).parent.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "True", "True"]
