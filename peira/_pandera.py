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
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["load"]

_BLOCKED = "pyspark.pandas"
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
        return None


def load() -> ModuleType:
    """``pandera.polars``, imported without pandera's pyspark probe (see the module notes)."""
    if "pandera" in sys.modules:
        return importlib.import_module("pandera.polars")
    saved = {k: os.environ.get(k) for k in _ENV}
    finder = _Unavailable()
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("pandera.polars")
    finally:
        sys.meta_path.remove(finder)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
