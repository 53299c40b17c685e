"""The ``peira`` command line: the command table.

Each group of commands is one module with a ``register(sub)`` function; this
module only lists them (:data:`GROUPS`), builds the parser and runs the chosen
command inside the one guard (:func:`peira.cli._errors.guard`). Command
modules import only :mod:`._common`, :mod:`._output`, :mod:`._errors` and the
library, never each other.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .._version import __version__
from . import data, flips, integrity, ranking, report, run, score
from ._errors import guard

__all__ = ["GROUPS", "build_parser", "main"]

#: The command groups, in the order ``peira --help`` lists them.
GROUPS = (ranking, score, flips, data, report, run, integrity)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``peira`` command."""
    p = argparse.ArgumentParser(
        prog="peira", description="Score adversarial-robustness benchmarks of decision models."
    )
    p.add_argument("--version", action="version", version=f"peira {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``peira`` console script; returns the exit code."""
    from .._pandera import without_pandas

    without_pandas()  # start-up: pandera's pandas API is not used (peira/_pandera.py)
    args = build_parser().parse_args(argv)
    return guard(args.func, args)
