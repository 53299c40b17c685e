"""The ``peira`` command line: the command table.

Each group of commands is one module with a ``register(sub)`` function; this
module only lists them (:data:`GROUPS`), builds the parser and runs the chosen
command inside the one guard (:func:`peira.cli._errors.guard`). Command
modules import only :mod:`._common`, :mod:`._output`, :mod:`._errors`,
:mod:`._views` (the terminal views of the API's frames) and the library's
public names, never each other. Every parser is a :class:`._help.HelpParser`:
its help ends with the command's examples (:mod:`._examples`).
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
import time
from collections.abc import Sequence

from .._version import __version__
from . import (
    agreement,
    changes,
    data,
    flips,
    gate,
    integrity,
    planning,
    ranking,
    report,
    run,
    score,
)
from ._errors import guard
from ._help import HelpParser

__all__ = ["GROUPS", "build_parser", "console", "main"]

#: The command groups, in the order ``peira --help`` lists them.
GROUPS = (ranking, changes, gate, score, agreement, flips, data, report, run, integrity, planning)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``peira`` command."""
    p = HelpParser(
        prog="peira",
        description="Score adversarial-robustness benchmarks of decision models.",
        epilog="Every command's help (peira COMMAND --help) lists its examples.",
    )
    p.add_argument("--version", action="version", version=f"peira {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``peira`` command on ``argv`` and return its exit code.

    The Python-level entry point (tests, notebooks, build scripts); the
    installed ``peira`` script is :func:`console`.
    """
    from .._pandera import without_pandas

    without_pandas()  # start-up: pandera's pandas API is not used (peira/_pandera.py)
    args = build_parser().parse_args(argv)
    from ._output import set_wide

    set_wide(getattr(args, "wide", False))
    return guard(args.func, args)


def console() -> None:
    """The installed ``peira`` script: run :func:`main` and end the process.

    When the compiled bootstrap kernels were loaded (numba, LLVM), tearing the
    interpreter down costs about a third of a second for nothing: every output
    is already written whole and closed (``peira._writes``). The process then
    waits for its non-daemon threads, runs the ``atexit`` handlers, flushes the
    standard streams and ends with :func:`os._exit`. Without numba it ends
    through :func:`sys.exit` as any Python program does.
    """
    code = main()
    if "numba" not in sys.modules:
        sys.exit(code)
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            _join(thread)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            code = code or 1
    os._exit(code)


def _join(thread: threading.Thread) -> None:
    """Wait for ``thread`` to end; one listed while it is still starting (a signal's
    handler thread, say) is waited for until it runs, for up to a second."""
    for _ in range(1000):
        try:
            thread.join()
            return
        except RuntimeError:  # "cannot join thread before it is started"
            time.sleep(0.001)
