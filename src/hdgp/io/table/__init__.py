"""Read a user's table (CSV / Parquet) and turn it into model inputs with clear errors.

:func:`read_table` reads the file; :meth:`TableSchema.infer` decides which columns
are features, which are categorical and checks the target; :meth:`TableSchema.encode`
turns any later table with the same columns into the numeric matrix the estimator
saw during fit (categorical levels as integer codes, or one-hot columns).

One job per module: :mod:`.reading` (files into frames), :mod:`.sniffing` (what a column holds),
:mod:`.schema` (:class:`TableSchema` and whole-column checks), :mod:`.task` (regression or
classification, class codes), :mod:`.errors` (:class:`TableError` and its messages).
"""

from .errors import TableError
from .reading import TABLE_FORMATS, read_table
from .schema import MAX_CATEGORICAL_LEVELS, TableSchema, missing_note
from .task import MAX_CLASSES, TASKS, infer_task
from .task import _level_label  # noqa: F401 (the class labels of hdgp.workflow.classification)

__all__ = ["TableError", "TableSchema", "read_table", "infer_task", "MAX_CATEGORICAL_LEVELS", "MAX_CLASSES",
           "TASKS", "TABLE_FORMATS", "missing_note"]
