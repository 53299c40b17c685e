"""Slow imports started ahead, on a thread, while a command reads its data.

A command that will need a module with a slow import (``scipy.special`` for
BCa intervals) starts that import first thing; reading and validating the
data runs in polars, outside the GIL, so on a machine with two or more cores
the import costs the command next to nothing. The import that needs the
module later runs as usual: it waits for this one if it is under way, and it
raises as usual if the module cannot be imported (a failure here is dropped).
"""

from __future__ import annotations

import importlib
import sys
import threading

__all__ = ["prefetch"]

_started: set[str] = set()
_lock = threading.Lock()


def prefetch(*modules: str) -> threading.Thread | None:
    """Import ``modules`` on a background thread; the thread, or None if there is
    nothing to do (every module imported, or its import already started)."""
    with _lock:
        todo = [m for m in modules if m not in sys.modules and m not in _started]
        _started.update(todo)
    if not todo:
        return None

    def run() -> None:
        for name in todo:
            try:
                importlib.import_module(name)
            except Exception:  # the import that needs the module raises it
                continue

    # not a daemon: a command that fails early waits for the import rather than
    # leaving the interpreter to stop a thread in the middle of initialising a module
    thread = threading.Thread(target=run, name="peira-prefetch")
    thread.start()
    return thread
