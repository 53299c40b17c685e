"""``peira diff RUN_A RUN_B``: what changed from a baseline run to a candidate, pair by pair.

The counts of regressed, fixed, still-failing and unchanged pairs, every
pair then each family, with the exact McNemar test, Newcombe's interval and
the cluster-bootstrap interval of the difference (:func:`peira.api.diff`).
``--cases`` lists the regressed and fixed pairs with both runs' input and
raw output side by side; ``--pairs`` the outcome of every pair of the
support.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Literal

from . import _common as c

if TYPE_CHECKING:
    import polars as pl

__all__ = ["COMPACT", "PAIRS", "cmd_diff", "register"]

#: What ``peira diff`` shows in a terminal by default.
COMPACT = [
    "family", "n_counted", "regressed", "fixed", "still_failing", "unchanged", "estimate_a",
    "estimate_b", "diff", "mcnemar_p", "mcnemar_midp", "mcnemar_p_adjusted", "newcombe_lo",
    "newcombe_hi", "bootstrap_lo", "bootstrap_hi",
]  # fmt: skip


#: What ``peira diff --pairs`` shows in a terminal by default.
PAIRS = ["case_id", "sample", "family", "outcome", "good_a", "good_b"]


def cmd_diff(args: argparse.Namespace) -> int:
    """The summary (default), the changed cases (``--cases``) or every pair (``--pairs``)."""
    import polars as pl

    from .. import api
    from ..errors import PeiraError

    if args.cases and args.pairs:
        raise PeiraError("--cases and --pairs: give one (the changed cases, or every pair)")
    dataset, log = c.dataset_and_log(args)
    view: Literal["summary", "pairs", "cases"] = (
        "cases" if args.cases else "pairs" if args.pairs else "summary"
    )
    frame = api.diff(
        log, dataset, args.run_a, args.run_b, metric=args.metric, view=view,
        support=args.support or "common",
        **c.api_kwargs(args, ("split", "n_resamples", "seed", "unit", "level", "missing", "delta",
                              "adjust")),
    )  # fmt: skip
    human = args.format in ("table", "markdown")
    if view == "summary":
        if not human:
            return c.emit(frame, args.format)
        if args.format == "table":
            _say(_header(frame, args))
        view_frame = frame.with_columns(
            pl.col("family").fill_null("(all)"),
            *(
                _p_text(pl.col(x)).alias(x)
                for x in ("mcnemar_p", "mcnemar_midp", "mcnemar_p_adjusted")
            ),
        )
        return c.emit(view_frame.select(c.pick_columns(view_frame, COMPACT, args)), args.format)
    total = frame.height
    limit = args.limit if args.limit is not None else (20 if human else 0)
    if limit:
        frame = frame.head(limit)
    if view == "cases" and args.format == "table":
        _side_by_side(frame, args.run_a, args.run_b)
    elif view == "pairs" and human:
        c.emit(frame.select(c.pick_columns(frame, PAIRS, args)), args.format)
    else:
        c.emit(frame, args.format)
    what = "changed pairs" if view == "cases" else "pairs"
    if frame.height < total:
        print(
            f"peira diff: showing {frame.height} of {total} {what} (--limit 0 for all)",
            file=sys.stderr,
        )
    elif human and total == 0:
        print(f"peira diff: no {what}", file=sys.stderr)
    return c.EXIT_OK


def _p_text(p: pl.Expr) -> pl.Expr:
    """A p-value in four decimals, and below 0.0001 in two significant digits."""
    import polars as pl

    return p.map_elements(lambda v: f"{v:.2g}" if v < 1e-4 else f"{v:.4f}", return_dtype=pl.String)


def _say(text: str) -> None:
    from ._output import terminal_width

    width = terminal_width()
    for line in text.splitlines():
        print("\n".join(textwrap.wrap(line, width, subsequent_indent="  ")) if width else line)


def _header(frame: pl.DataFrame, args: argparse.Namespace) -> str:
    """Which run is which, the pairs compared, and what each interval assumes."""
    from ..metrics.gates import metric_den_is_eligible

    row = frame.row(0, named=True)
    counted = (
        "eligible for both runs (benign answer right in both)"
        if metric_den_is_eligible(args.metric)
        else "counted by both runs"
    )
    support = (
        "every run of the log answered"
        if (args.support or "common") == "common"
        else "both answered"
    )
    return "\n".join(
        [
            f"A = {row['run_a']} (baseline), B = {row['run_b']} (candidate); metric "
            f"{row['metric']}; split {args.split}; diff = estimate_a - estimate_b",
            f"pairs: the {row['n_counted']} of the {row['n_support']} (case, sample) pairs "
            f"{support} that are {counted}",
            "regressed: A good, B not; fixed: A not, B good; mcnemar_p, mcnemar_midp: exact "
            "McNemar test of regressed = fixed",
            f"newcombe: Newcombe (1998) method 10 interval, pairs taken as independent; "
            f"bootstrap: {row['level']:.0%} {row['bootstrap_method']}, {row['n_clusters']} "
            f"{'scenarios' if row['unit'] == 'cluster' else 'cases'}, B={row['n_resamples']}, "
            f"seed {row['seed']}, plan {row['fingerprint'][:12]} (peira compare's diff_lo, "
            "diff_hi; honest where cases share a scenario)",
        ]
    )


def _side_by_side(frame: pl.DataFrame, run_a: str, run_b: str) -> None:
    """Each changed pair as a block: a title line, then A | B input and raw output."""
    from ._output import terminal_width

    width = max(terminal_width() or 100, 40)
    half = (width - 3) // 2
    out: list[str] = []
    for row in frame.iter_rows(named=True):
        title = (
            f"{row['outcome']}  {row['case_id']}  sample {row['sample']}  {row['family']}  "
            f"({row['arm']} arm): {row['answer_a']} -> {row['answer_b']} "
            f"(expected {row['expected_decision']}"
            + (
                f"; benign {row['benign_answer_a']} | {row['benign_answer_b']})"
                if row["arm"] == "attacked"
                else ")"
            )
        )
        out.append("=" * width)
        out += textwrap.wrap(title, width) or [""]
        blocks = [
            ([f"A: {run_a}"], [f"B: {run_b}"]),
            *(
                (
                    [f"[{label}]", *textwrap.wrap(row[f"{label}_a"] or "-", half)],
                    [f"[{label}]", *textwrap.wrap(row[f"{label}_b"] or "-", half)],
                )
                for label in ("input", "output")
            ),
        ]
        for left, right in blocks:
            for i in range(max(len(left), len(right))):
                a = left[i] if i < len(left) else ""
                b = right[i] if i < len(right) else ""
                out.append(f"{a:<{half}} | {b}".rstrip())
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))


def register(sub: Any) -> None:
    """Add ``diff`` to the ``peira`` subparsers object ``sub``."""
    d = c.add_command(
        sub,
        "diff",
        cmd_diff,
        "what changed from run A to run B, pair by pair: regressed, fixed (default: demo)",
    )
    d.add_argument("run_a", help="the baseline run")
    d.add_argument("run_b", help="the candidate run (a new model, or the model with a defence)")
    c.add_data_options(d, split="public")
    d.add_argument(
        "--metric",
        default="robustness",
        help="a ratio metric with one 0/1 outcome per pair (default robustness; "
        "benign_accuracy, asr, the flip rates, …)",
    )
    c.add_comparison_options(d, gates=False)
    d.add_argument(
        "--adjust", choices=c.option_choices("adjust"), default="holm",
        help="how the family rows' McNemar p-values are adjusted among themselves "
        "(mcnemar_p_adjusted): holm (default), bh, none",
    )  # fmt: skip
    d.add_argument(
        "--cases",
        action="store_true",
        help="the regressed and fixed pairs, both runs' input and raw output side by side",
    )
    d.add_argument("--pairs", action="store_true", help="the outcome of every pair of the support")
    d.add_argument(
        "--limit",
        type=c.non_negative_int,
        default=None,
        help="--cases, --pairs: at most this many (default: 20 in table/markdown, all in "
        "csv/json; 0: all)",
    )
    c.add_columns_options(d)
