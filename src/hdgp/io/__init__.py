"""Reading users' tables and saving/loading fitted models.

- :func:`read_table`, :class:`TableSchema`: CSV/Parquet in, validated model inputs out.
- :func:`save`, :func:`load`: the versioned ``.hdgp`` model file (see :mod:`hdgp.io.modelfile`).
"""

from .modelfile import FORMAT_VERSION, ModelFileError, load, read_manifest, save
from .table import TableError, TableSchema, read_table

__all__ = ["FORMAT_VERSION", "ModelFileError", "TableError", "TableSchema", "load", "read_manifest",
           "read_table", "save"]
