"""Import pandera's polars API without its pyspark side effects.

``import pandera`` (which ``import pandera.polars`` runs first) probes for
pyspark: when pyspark is installed it imports ``pyspark.pandas`` (several
seconds; under pandas 3 pyspark also emits a ``FutureWarning``) and leaves
``SPARK_LOCAL_IP=127.0.0.1`` and ``PYARROW_IGNORE_TIMEZONE=1`` in the process
environment, which points a Spark driver's executors at localhost on a real
cluster (pandera issue #2344). pandera 0.35 offers no switch for it. Peira
validates polars frames only and never uses pandera's pyspark or pandas
backends, so :func:`load` imports pandera the way it imports itself when
pyspark is absent: with ``pyspark.pandas`` unavailable for the duration of the
import, and the two environment variables as they were before. Afterwards
``pyspark.pandas`` imports normally (nothing is cached) for anyone who wants it;
if it was imported already, pandera finds it and nothing is blocked.

The ``peira`` command goes one step further (:func:`without_pandas`): pandera
imports pandas, when it is installed, only to offer its pandas API (about half
a second of every command's start-up), and hypothesis for its data synthesis;
Peira uses neither. In the
command's own process pandera is therefore imported as in an install without
pandas; the polars API it validates with is the same either way. A library
caller's process is left as it is, so ``import pandera`` there keeps its pandas
API for the caller's own use.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["load", "without_pandas"]

_BLOCKED = "pyspark.pandas"
_pandas_blocked = False
# What pandera imports, when installed, for APIs Peira does not use: its pandas
# API, and hypothesis for its data synthesis (hypothesis is a test dependency).
_LEAN_ABSENT = ("pandas", "hypothesis")
_ENV = ("SPARK_LOCAL_IP", "PYARROW_IGNORE_TIMEZONE")


class _Unavailable(MetaPathFinder):
    """A finder that reports ``pyspark.pandas`` (and pyspark, if not imported yet) as absent."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        # "pyspark" too: importing pyspark.pandas imports its parent first (pyspark.sql,
        # about 0.4 s); a pyspark imported already is in sys.modules and not looked up.
        if fullname in ("pyspark", _BLOCKED) or fullname.startswith(_BLOCKED + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        if _pandas_blocked and fullname.partition(".")[0] in _LEAN_ABSENT:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def without_pandas() -> None:
    """Import pandera, when :func:`load` first runs, without its pandas API.

    For the ``peira`` command's process only (see the module notes); it has no
    effect once pandera or pandas is imported.
    """
    global _pandas_blocked
    _pandas_blocked = "pandas" not in sys.modules


def load() -> ModuleType:
    """``pandera.polars``, imported without pandera's pyspark probe (see the module notes)."""
    if "pandera" in sys.modules:
        return importlib.import_module("pandera.polars")
    saved = {k: os.environ.get(k) for k in _ENV}
    finder = _Unavailable()
    sys.meta_path.insert(0, finder)
    try:
        module = importlib.import_module("pandera.polars")
        if _pandas_blocked:
            # pandera looks for pandas once more when it first validates, and
            # caches the answer: let it find that pandas is absent here.
            checks = importlib.import_module("pandera.backends.register_checks")
            probe = getattr(checks, "_load_get_backend_types_from_mro", None)
            if callable(probe):
                probe()
            # imported on first validation otherwise, and with it hypothesis
            importlib.import_module("pandera.backends.polars.builtin_checks")
        return module
    finally:
        sys.meta_path.remove(finder)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
