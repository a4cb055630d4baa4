"""The reliability suite (issue 9): its helpers live in ``_reliability_helpers``.

pytest runs with ``--import-mode=importlib``, so this folder is put on
``sys.path`` for the test modules to import the helpers by name.
"""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
