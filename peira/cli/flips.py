"""``peira flips``: the pairs an attack flipped, with both inputs and raw outputs.

The same rows as the drill-down of the HTML report
(:func:`peira.report.flips.flipped_pairs`): every eligible pair whose
attacked answer flipped, filtered by ``--run``, ``--family`` and
``--reason``. ``table`` shows a compact line per pair (``--side-by-side``
shows the benign and attacked input and raw output in two columns);
``csv`` and ``json`` give every column, full text.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from . import _common as c

if TYPE_CHECKING:
    import polars as pl

__all__ = ["COMPACT", "cmd_flips", "register"]

#: What ``peira flips`` shows in a terminal by default.
COMPACT = [
    "run_id",
    "case_id",
    "family",
    "reason",
    "expected_decision",
    "benign_answer",
    "attacked_answer",
    "attacked_output",
]


def cmd_flips(args: argparse.Namespace) -> int:
    """List the flipped pairs (exit 0, also when there are none)."""
    from .. import api

    d, log = c.dataset_and_log(args)
    flips = api.flips(
        log, d, split=args.split, runs=args.run, families=args.family, reasons=args.reason,
        missing=args.missing, delta=args.delta,
    )  # fmt: skip
    total = flips.height
    human = args.format in ("table", "markdown")
    limit = args.limit if args.limit is not None else (30 if human else 0)
    if limit:
        flips = flips.head(limit)
    if args.side_by_side:
        _side_by_side(flips)
    elif human:
        c.emit(flips.select(c.pick_columns(flips, COMPACT, args)), args.format)
    else:
        c.emit(flips, args.format)
    if flips.height < total:
        print(
            f"peira flips: showing {flips.height} of {total} flipped pairs (--limit 0 for all)",
            file=sys.stderr,
        )
    elif human and total == 0:
        print("peira flips: no flipped pair matches", file=sys.stderr)
    return c.EXIT_OK


def _side_by_side(flips: pl.DataFrame) -> None:
    """Each pair as a block: a title line, then benign | attacked input and output."""
    from ._output import terminal_width

    width = max(terminal_width() or 100, 40)
    half = (width - 3) // 2
    out: list[str] = []
    for row in flips.iter_rows(named=True):
        target = f", target {row['target_decision']}" if row["target_decision"] else ""
        title = (
            f"{row['run_id']}  {row['case_id']}  {row['family']}  {row['reason']}: "
            f"{row['benign_answer']} -> {row['attacked_answer']} "
            f"(expected {row['expected_decision']}{target})"
        )
        out.append("=" * width)
        out += textwrap.wrap(title, width) or [""]
        for label, left, right in (
            ("benign", "benign", "attacked"),
            ("input", row["benign_input"], row["attacked_input"]),
            ("output", row["benign_output"], row["attacked_output"]),
        ):
            if label == "benign":
                cols = (["benign".upper()], ["attacked".upper()])
            else:
                cols = (
                    [f"[{label}]", *textwrap.wrap(left or "-", half)],
                    [f"[{label}]", *textwrap.wrap(right or "-", half)],
                )
            for i in range(max(len(cols[0]), len(cols[1]))):
                a = cols[0][i] if i < len(cols[0]) else ""
                b = cols[1][i] if i < len(cols[1]) else ""
                out.append(f"{a:<{half}} | {b}".rstrip())
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))


def register(sub: Any) -> None:
    """Add ``flips`` to the ``peira`` subparsers object ``sub``."""
    f = c.add_command(
        sub, "flips", cmd_flips, "the flipped pairs: both inputs and raw outputs (default: demo)"
    )
    c.add_input_options(f)
    c.add_format_option(f)
    c.add_split_option(f, "public")
    c.add_pair_options(f)
    f.add_argument("--run", action="append", default=[], metavar="RUN", help="repeatable")
    f.add_argument("--family", action="append", default=[], metavar="FAMILY", help="repeatable")
    f.add_argument(
        "--reason",
        action="append",
        default=[],
        choices=("decision_flip", "abstention_flip", "malformed_flip"),
        help="the kind of flip (repeatable): decision_flip (another decision under attack), "
        "abstention_flip (abstained in one arm only) or malformed_flip (the attacked answer "
        "could not be parsed)",
    )
    f.add_argument(
        "--limit",
        type=c.non_negative_int,
        default=None,
        help="at most this many pairs (default: 30 in table/markdown, all in csv/json; 0: all)",
    )
    f.add_argument(
        "--side-by-side",
        action="store_true",
        help="each pair as a block: benign and attacked input and raw output side by side",
    )
    c.add_columns_options(f)
