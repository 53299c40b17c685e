"""The exit-code policy of the ``peira`` command: the one guard around every command.

- 0: done; 1: the data break the contract (violations, missing arms, a
  tampered artifact); 2: unreadable input (a missing, corrupt or malformed
  file, hostile JSON), bad arguments, an output Peira will not write; 75: a
  run stopped by its spending budget (resumable).
- A :class:`~peira.errors.PeiraError` is printed as ``peira <command>: error:
  …`` and its class's ``exit_code`` returned (the table is in
  :mod:`peira.errors`). An ``OSError`` (permission denied, disk
  full, a directory where a file was expected) is printed the same way, exit 2.
- Anything else is a bug: its traceback is shown, never dressed up as a user
  error.
- 130 on Ctrl-C (SIGINT), 143 on SIGTERM: the command stops as on Ctrl-C
  (writers clean up, the runner checkpoints) and says so on stderr.
- Each :class:`~peira.errors.PeiraWarning` is printed once, as
  ``peira: warning: …``, whatever number of times the library raised it.
- Every message printed here (errors, warnings, the reason of a stop) is
  redacted first: the values of environment variables named like secrets
  become ``[redacted]`` (:mod:`peira._redaction`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from typing import Any

from .._redaction import Redactor
from ..errors import PeiraError, PeiraWarning
from ._common import EXIT_USAGE, Command, release_outputs

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "guard"]

EXIT_INTERRUPTED = 130  # the shell's code for SIGINT
EXIT_TERMINATED = 143  # the shell's code for SIGTERM


def _install(signum: int, handler: Any) -> Any:
    """Set a signal handler; return the previous one (None off the main thread)."""
    try:
        return signal.signal(signum, handler)
    except ValueError:  # not the main thread: leave signals alone
        return None


def _say(text: str) -> None:
    """Print one message to stderr, secret values redacted."""
    print(Redactor().text(text), file=sys.stderr)


def _error(name: str, message: object) -> None:
    _say(f"peira {name}: error: {message}")


def _interrupt_handled() -> None:
    """Tell CPython the interrupt was handled.

    An interrupt raised inside code that ``exec`` runs from a string (a
    dataclass or namedtuple being built while the signal arrives) leaves
    CPython's "unhandled KeyboardInterrupt" mark set, and at exit the
    interpreter then kills itself with SIGINT whatever the exit code (a
    SIGTERM would end as -2, not 143). Every ``exec`` of a string resets that
    mark.
    """
    exec("None")  # a constant string: resets the mark, runs nothing


def _print_warnings(caught: list[warnings.WarningMessage]) -> None:
    shown: set[str] = set()
    for w in caught:
        if issubclass(w.category, PeiraWarning):
            if str(w.message) not in shown:  # one plan warns once per statistic
                shown.add(str(w.message))
                _say(f"peira: warning: {w.message}")
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
        _interrupt_handled()
        how = "terminated (SIGTERM)" if terminated else "interrupted"
        detail = f"; {exc.args[0]}" if exc.args else ""
        _say(f"peira {name}: {how}{detail}")
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except PeiraError as exc:  # refused on purpose: the class says the exit code
        _error(name, exc)
        return exc.exit_code
    except OSError as exc:  # the file system said no (permission, space, a directory)
        _error(name, f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else exc)
        return EXIT_USAGE
    finally:
        release_outputs()
        if previous is not None:
            _install(signal.SIGTERM, previous)
        if previous_int is not None:
            _install(signal.SIGINT, previous_int)
