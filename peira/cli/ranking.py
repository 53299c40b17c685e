"""``peira leaderboard`` and ``peira compare``: rank the runs, or compare two."""

from __future__ import annotations

import argparse
from typing import Any

from . import _common as c

__all__ = ["cmd_compare", "cmd_leaderboard", "register"]

_RULES = {
    "ci": "non-overlapping intervals (overlap = tie)",
    "paired": "paired test, Holm-adjusted over every pair of runs",
}


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Ranked runs with their intervals (the rule of ``--rule``)."""
    import polars as pl

    from .. import api
    from ..metrics.gates import metric_den_is_eligible

    dataset, log = c.dataset_and_log(args)
    metric = args.metric
    board = api.leaderboard(log, dataset, metric=metric, **c.data_kwargs(args))
    if args.format in ("table", "markdown"):
        if args.format == "table" and board.height:
            print(
                f"split {args.split}; {args.level:.0%} {args.unit}-bootstrap intervals, "
                f"B={args.resamples}, seed {args.seed}, plan {board['fingerprint'][0][:12]}; "
                f"rule: {_RULES[args.rule]}"
            )
        board = api.gate_text(board)
        board = board.select(
            "rank",
            "run_id",
            metric,
            "lo",
            "hi",
            "n_eligible" if metric_den_is_eligible(metric) else pl.col("n_counted").alias("n"),
            pl.col("beaten_by").list.len().alias("beaten_by"),
            *api.with_notes(board, ["gate"]),
            pl.when(pl.col("lo").is_not_null())
            .then(pl.col("method"))
            .otherwise(pl.lit(""))
            .alias("interval_method"),
            pl.when(pl.col("lo").is_not_null() & pl.col("few_clusters"))
            .then(pl.lit("few_clusters"))
            .otherwise(pl.lit(""))
            .alias("flags"),
        )
    return c.emit(board, args.format)


def cmd_compare(args: argparse.Namespace) -> int:
    """Two runs head to head, or every pair (Holm-adjusted)."""
    from .. import api
    from ..errors import PeiraError

    if bool(args.run_a) != bool(args.run_b):
        raise PeiraError("compare needs two runs (RUN_A RUN_B), or none for every pair")
    dataset, log = c.dataset_and_log(args)
    runs = [args.run_a, args.run_b] if args.run_a else None
    table = api.compare(log, dataset, runs=runs, metric=args.metric, **c.data_kwargs(args))
    if args.format in ("table", "markdown"):
        table = table.select(
            "run_a", "run_b", "estimate_a", "estimate_b", "diff", "diff_lo", "diff_hi",
            "p_holm", "family_size", "ci_verdict", "paired_verdict", "winner", "n_common",
            "n_set_aside_a", "n_set_aside_b", "note",
        )  # fmt: skip
    return c.emit(table, args.format)


def _rule_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rule", choices=("ci", "paired"), default="ci")


def register(sub: Any) -> None:
    """Add ``leaderboard`` and ``compare`` to the ``peira`` subparsers object ``sub``."""
    lb = c.add_command(
        sub, "leaderboard", cmd_leaderboard, "ranked runs with intervals (default: demo data)"
    )
    c.add_data_options(lb, split="public")
    _rule_option(lb)
    lb.add_argument(
        "--metric",
        default="robustness",
        help="ratio metric to rank by (e.g. benign_accuracy, which ranks clean-only runs too)",
    )

    cp = c.add_command(sub, "compare", cmd_compare, "head-to-head: two runs, or every pair")
    cp.add_argument("run_a", nargs="?")
    cp.add_argument("run_b", nargs="?")
    c.add_data_options(cp, split="public")
    cp.add_argument("--metric", default="robustness")
    _rule_option(cp)
