"""``peira score`` and ``peira metrics``: every metric per run, and what each one means."""

from __future__ import annotations

import argparse
from typing import Any

from . import _common as c

__all__ = ["cmd_metrics", "cmd_score", "register"]


def cmd_score(args: argparse.Namespace) -> int:
    """Every metric per run (× ``--by``); intervals in every format but table/markdown."""
    import polars as pl

    from ..api import headline, score_pairs
    from ..errors import PeiraError

    pairs, cases = c.load_pairs(args)
    unknown = [col for col in args.by if col not in pairs.columns]
    if unknown:
        strings = (col for col in pairs.columns if pairs.schema[col] == pl.String)
        raise PeiraError(
            f"--by {', '.join(unknown)}: not a column of the pair table; "
            f"choose among {', '.join(strings)}"
        )
    if args.format in ("table", "markdown"):
        table = headline(score_pairs(pairs, cases, by=args.by), args.by)
    else:
        table = score_pairs(
            pairs, cases, by=args.by, plan=c.plan(args, cases), level=args.level, method=args.method
        )
    return c.emit(table, args.format)


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
