"""The exit-code policy of the ``peira`` command: the one guard around every command.

- 0: done; 1: the data break the model (violations, missing arms, a
  tampered artifact); 2: unreadable input (a missing, corrupt or malformed
  file, hostile JSON), bad arguments, an output Peira will not write.
- 130 on Ctrl-C (SIGINT), 143 on SIGTERM: the command stops as on Ctrl-C
  (writers clean up, the runner checkpoints) and says so on stderr.
- Each :class:`~peira.errors.PeiraWarning` is printed once, as
  ``peira: warning: …``, whatever number of times the library raised it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from typing import Any

from ._common import EXIT_USAGE, EXIT_VIOLATIONS, Command

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "guard"]

EXIT_INTERRUPTED = 130  # the shell's code for SIGINT
EXIT_TERMINATED = 143  # the shell's code for SIGTERM


def _install(signum: int, handler: Any) -> Any:
    """Set a signal handler; return the previous one (None off the main thread)."""
    try:
        return signal.signal(signum, handler)
    except ValueError:  # not the main thread: leave signals alone
        return None


def _error(name: str, exc: BaseException) -> None:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    print(f"peira {name}: error: {msg}", file=sys.stderr)


def _exit_code(exc: Exception) -> int | None:
    """The exit code of an error the library raised on purpose (None: a bug)."""
    import polars as pl

    from ..errors import (
        DataFileError,
        InputFormatError,
        MissingArmsError,
        PeiraError,
        ValidationError,
    )
    from ..holdout import UnblindError

    declared = getattr(type(exc), "exit_code", None)
    if isinstance(exc, PeiraError) and isinstance(declared, int):
        return declared
    if isinstance(exc, InputFormatError):  # a file that cannot be read as its format
        return EXIT_USAGE
    if isinstance(exc, ValidationError | MissingArmsError | UnblindError):
        return EXIT_VIOLATIONS
    if isinstance(exc, DataFileError | PeiraError):
        return EXIT_USAGE
    if isinstance(exc, ValueError | KeyError):  # bad arguments found by the library
        return EXIT_USAGE
    if isinstance(exc, pl.exceptions.PolarsError):  # unexpected data shape
        return EXIT_USAGE
    return None


def _print_warnings(caught: list[warnings.WarningMessage]) -> None:
    from ..errors import PeiraWarning

    shown: set[str] = set()
    for w in caught:
        if issubclass(w.category, PeiraWarning):
            if str(w.message) not in shown:  # one plan warns once per statistic
                shown.add(str(w.message))
                print(f"peira: warning: {w.message}", file=sys.stderr)
        else:  # not ours: re-emit
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def guard(func: Command, args: argparse.Namespace) -> int:
    """Run one command; map its errors, signals and warnings to exit code and stderr."""
    name = getattr(args, "command_name", None) or args.command
    terminated = False

    def on_signal(signum: int, frame: Any) -> None:
        # stop like Ctrl-C, so writers clean up and the runner checkpoints first;
        # raised here, not re-sent as SIGINT: a background job of a script
        # inherits SIGINT ignored, and a SIGTERM must stop it all the same
        nonlocal terminated
        terminated = terminated or signum == signal.SIGTERM
        raise KeyboardInterrupt

    from ..errors import PeiraWarning

    # installed whatever the inherited disposition (SIG_IGN included)
    previous = _install(signal.SIGTERM, on_signal)
    previous_int = _install(signal.SIGINT, on_signal)
    caught: list[warnings.WarningMessage] = []
    try:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PeiraWarning)
                code = int(func(args))
        finally:
            _print_warnings(caught)  # also when the command failed
        return code
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if terminated else "interrupted"
        detail = f"; {exc.args[0]}" if exc.args else ""
        print(f"peira {name}: {how}{detail}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except Exception as exc:
        exit_code = _exit_code(exc)
        if exit_code is None:
            raise
        _error(name, exc)
        return exit_code
    finally:
        if previous is not None:
            _install(signal.SIGTERM, previous)
        if previous_int is not None:
            _install(signal.SIGINT, previous_int)
