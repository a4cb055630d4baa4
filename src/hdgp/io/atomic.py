"""Write files atomically: to a temporary name in the same folder, then rename into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_bytes_atomic"]


def write_bytes_atomic(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the complete new one, never a part.

    Raises
    ------
    FileNotFoundError
        If the folder of ``path`` does not exist (the message names it).
    """
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"Cannot write {path}: the folder {folder} does not exist.")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # data on disk before the rename publishes it (power loss, not just a crash)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
