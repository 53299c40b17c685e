"""``peira score`` and ``peira metrics``: every metric per run, and what each one means."""

from __future__ import annotations

import argparse
from typing import Any

from . import _common as c

__all__ = ["cmd_metrics", "cmd_score", "register"]


def cmd_score(args: argparse.Namespace) -> int:
    """Every metric per run (× ``--by``); intervals in every format but table/markdown."""
    from .. import api

    dataset, log = c.dataset_and_log(args)
    terminal = args.format in ("table", "markdown")
    table = api.score(log, dataset, by=args.by, intervals=not terminal, **c.data_kwargs(args))
    return c.emit(api.headline(table, args.by) if terminal else table, args.format)


def cmd_metrics(args: argparse.Namespace) -> int:
    """The metric registry: name, kind, direction of "better", definition."""
    from ..metrics import registry_frame

    return c.emit(registry_frame(), args.format)


def register(sub: Any) -> None:
    """Add ``score`` and ``metrics`` to the ``peira`` subparsers object ``sub``."""
    s = c.add_command(sub, "score", cmd_score, "per-run metrics (default: the bundled demo data)")
    c.add_data_options(s, split="all", method=True)
    s.add_argument("--by", action="append", default=[], help="breakdown column (repeatable)")

    m = c.add_command(sub, "metrics", cmd_metrics, "list every metric: kind, direction, definition")
    c.add_format_option(m)
