"""``peira leaderboard`` and ``peira compare``: rank the runs, or compare two."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import _common as c

if TYPE_CHECKING:
    import polars as pl

__all__ = ["cmd_compare", "cmd_leaderboard", "register"]

_RULES = {
    "ci": "non-overlapping intervals (overlap = tie)",
    "paired": "paired test, Holm-adjusted over every pair of runs",
}


_ADJUSTED = {"holm": "Holm-adjusted", "bh": "Benjamini-Hochberg-adjusted", "none": "unadjusted"}


def _rule_text(args: argparse.Namespace) -> str:
    """The rule of ``--rule``, with the adjustment of ``--adjust`` when the rule uses it."""
    if args.rule == "ci":
        return _RULES["ci"]
    return f"paired test, {_ADJUSTED[args.adjust]} over every pair of runs"


#: Rates shown beside the ranked metric (docs/spec/scoring-rule.md: abstention and
#: malformed answers are always reported beside ASR, never blended into it).
RATES = ("asr", "abstention_rate_attacked", "abstention_flip_rate", "malformed_rate")


def _board(args: argparse.Namespace) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(leaderboard with :data:`RATES`, divergence per run or None).

    The log is reduced once, over both splits, to its run sums on the engine
    of ``--engine`` (:func:`peira.api.run_sums`): the leaderboard ranks the
    split asked for, and when that is the public split and the dataset has a
    holdout, :func:`peira.holdout.divergence` (ASR, the same bootstrap
    settings, the flag family of ``--flag-family``) says which runs look tuned
    to the public split.
    """
    import polars as pl

    from .. import api
    from ..errors import PeiraValueError
    from ..metrics.gates import GateThresholds
    from ..ranking import leaderboard as rank_runs

    dataset, log = c.dataset_and_log(args)
    ds = api.as_dataset(dataset)
    cases = api.split_cases(ds, args.split)
    plan = api.resample_plan(cases, **c.api_kwargs(args, ("unit", "n_resamples", "seed")))
    sums = api.run_sums(
        c.responses_arg(args, log), ds, judge=args.judge,
        **c.api_kwargs(args, ("unit", "missing", "delta", "engine")),
    )  # fmt: skip
    table = sums.split(args.split)
    metric = args.metric
    kw = c.comparison_kwargs(args, table.runs)
    try:
        board = rank_runs(
            table,
            cases,
            plan,
            metric=metric,
            rule=args.rule,
            adjust=args.adjust,
            level=args.level,
            thresholds=GateThresholds.of(kw["gates"]),
            support=kw["support"],
            top_k=args.top_k,
        )
    except PeiraValueError as e:  # the library names its argument; say the option's name
        if str(e).startswith("top_k "):
            raise PeiraValueError(f"--top-k {str(e)[len('top_k ') :]}") from None
        raise
    rates = [r for r in RATES if r != metric]
    board = board.with_columns(
        pl.col("estimate").alias(metric),
        pl.col("lo").alias(f"{metric}_lo"),
        pl.col("hi").alias(f"{metric}_hi"),
    ).join(  # the rates on the pairs the board was computed on
        (table.common_to(table.runs) if kw["support"] == "common" else table)
        .totals()
        .select("run_id", *rates),
        on="run_id",
        how="left",
        maintain_order="left",
    )
    splits = set(sums.frame["split"].unique().to_list())
    if args.split != "public" or not {"public", "holdout"} <= splits:
        return board, None
    from ..holdout import divergence

    div = divergence(
        sums.cluster_sums(by=["split"]), ds.cases, family=args.flag_family,
        **c.api_kwargs(args, ("n_resamples", "seed", "unit", "level")),
    ).filter(pl.col("run_id").is_in(board["run_id"].implode()))  # fmt: skip
    board = board.join(
        div.select(
            "run_id",
            pl.col("holdout").alias("holdout_asr"),
            pl.col("suspected_hill_climbing").alias("holdout_flag"),
        ),
        on="run_id",
        how="left",
        maintain_order="left",
    )
    return board, div


#: What the ``table``/``markdown`` leaderboard shows by default (``--columns``, ``--all``).
COMPACT = [
    "rank", "run_id", "ranks", "tie", "top_{k}", "{metric}", "lo", "hi", "holdout", *RATES, "n_eligible", "n", "gate",
    "beaten_by", "interval_method", "flags", "verdict_source", "note",
]  # fmt: skip


def _say(text: str) -> None:
    """Print a line of prose, wrapped to the terminal's width (whole when there is none)."""
    import textwrap

    from ._output import terminal_width

    width = terminal_width()
    print("\n".join(textwrap.wrap(text, width, subsequent_indent="  ")) if width else text)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Ranked runs with their intervals (the rule of ``--rule``), the rates reported
    beside the metric, and a mark on runs the public/holdout divergence check flags."""
    import polars as pl

    from ..metrics.gates import metric_den_is_eligible
    from ._views import gate_text, with_notes

    metric = args.metric
    if args.judges is not None:
        return _panel_board(args)
    if args.quorum is not None:
        from ..errors import PeiraError

        raise PeiraError(f"--quorum {args.quorum}: a quorum of judges needs --judges")
    board, div = _board(args)
    if args.format not in ("table", "markdown"):
        return c.emit(board, args.format)
    if args.format == "table" and board.height:
        _say(
            f"split {args.split}; {args.level:.0%} {args.unit}-bootstrap intervals, "
            f"B={args.resamples}, seed {args.seed}, plan {board['fingerprint'][0][:12]}; "
            f"rule: {_rule_text(args)}"
        )
        _say(_support_text(board))
        _say(_gates_text(args))
        _say(_ranks_text(board, args))
    view = gate_text(board).with_columns(
        pl.col("beaten_by").list.len().alias("beaten_by"),
        pl.when(pl.col("lo").is_not_null())
        .then(pl.col("method"))
        .otherwise(pl.lit(""))
        .alias("interval_method"),
        pl.when(pl.col("lo").is_not_null() & pl.col("few_clusters"))
        .then(pl.lit("few_clusters"))
        .otherwise(pl.lit(""))
        .alias("flags"),
        pl.when(pl.col("rank_lo") == pl.col("rank_hi"))
        .then(pl.col("rank_lo").cast(pl.String))
        .otherwise(pl.format("{}-{}", "rank_lo", "rank_hi"))
        .alias("ranks"),
        pl.col("tie_group").alias("tie"),
    )
    if args.top_k is not None:
        view = view.with_columns(
            pl.col("in_top_k").replace_strict({True: "yes", False: "no"}, default=None,
                return_dtype=pl.String).alias(f"top_{args.top_k}")
        )  # fmt: skip
    if not metric_den_is_eligible(metric):
        view = view.with_columns(pl.col("n_counted").alias("n"))
    if "holdout_flag" in view.columns:
        view = view.with_columns(
            pl.when(pl.col("holdout_flag"))
            .then(pl.lit("FLAGGED"))
            .when(pl.col("holdout_flag").is_not_null() & pl.col("holdout_asr").is_not_null())
            .then(pl.lit("ok"))
            .otherwise(pl.lit("-"))
            .alias("holdout")
        )
    # once each: the metric ranked may be one of the rates shown beside it (--metric asr)
    default = list(dict.fromkeys(x.format(metric=metric, k=args.top_k) for x in COMPACT))
    if metric_den_is_eligible(metric):
        default.remove("n")
    else:
        default.remove("n_eligible")
    default = [x for x in default if x not in ("verdict_source", "note")]
    default += [x for x in with_notes(view, []) if x not in default]
    code = c.emit(view.select(c.pick_columns(view, default, args)), args.format)
    if div is not None:
        flagged = view.filter(pl.col("holdout_flag").fill_null(False))
        for row in flagged.iter_rows(named=True):
            _say(
                f"FLAGGED {row['run_id']}: holdout ASR {row['holdout_asr']:.4f} vs public "
                f"{row['asr']:.4f}; the divergence check suspects tuning to the public split "
                + (
                    "(Holm across the board; peira holdout divergence --flag-family board)"
                    if args.flag_family == "board"
                    else "(peira holdout divergence)"
                )
            )
    return code


def _judges_arg(args: argparse.Namespace) -> str | list[str]:
    """``--judges``: ``all``, or the comma-separated names; not with ``--judge``."""
    from ..errors import PeiraError

    if args.judge is not None:
        raise PeiraError(f"--judge {args.judge} and --judges {args.judges}: one or the other")
    if args.judges == "all":
        return "all"
    return [x.strip() for x in args.judges.split(",") if x.strip()]


def _panel_text(frame: pl.DataFrame) -> str:
    """The panel and its quorum in a sentence."""
    judges = frame["judge"].cast(str).unique(maintain_order=True).to_list()
    q = int(frame["quorum"][0]) if "quorum" in frame.columns else None
    n = len(judges)
    need = "every judge" if q in (None, n) else f"{q} of the {n} judges"
    return (
        f"judges: {', '.join(judges)}; judge_robust: a verdict that holds under {need} "
        "(and under more judges than the opposite verdict); docs/spec/judges.md"
    )


def _panel_board(args: argparse.Namespace) -> int:
    """``peira leaderboard --judges``: each judge's board, and the judge-robust ranks."""
    import polars as pl

    from .. import api

    dataset, log = c.dataset_and_log(args)
    kw = c.comparison_kwargs(args, ["", ""])
    board = api.leaderboard(
        c.responses_arg(args, log), dataset, metric=args.metric, support=kw["support"],
        gates=kw["gates"], top_k=args.top_k, judges=_judges_arg(args),
        **c.api_kwargs(args, [n for n in api.PARAMETERS if n != "support"]),
    )  # fmt: skip
    if args.format not in ("table", "markdown"):
        return c.emit(board, args.format)
    if args.format == "table" and board.height:
        q = args.quorum
        n = board["judge"].n_unique()
        need = "every judge" if q in (None, n) else f"{q} of the {n} judges"
        _say(
            f"split {args.split}; {args.level:.0%} {args.unit}-bootstrap intervals, "
            f"B={args.resamples}, seed {args.seed}; rule: {_rule_text(args)}"
        )
        _say(
            f"judges: {', '.join(board['judge'].cast(str).unique(maintain_order=True))}; "
            f"robust: the rank from the verdicts that hold under {need} (and under more "
            "judges than the opposite verdict); rank: the judge's own; docs/spec/judges.md"
        )
    view = board.with_columns(
        pl.col("judge_robust_rank").alias("robust"),
        pl.col("judge_robust_beaten_by").list.len().alias("robust_beaten_by"),
        pl.col("beaten_by").list.len().alias("beaten_by"),
        pl.col("estimate").alias(args.metric),
        pl.col("gate_reasons").list.join("; ").alias("gate"),
        pl.col("judge").cast(pl.String),
    )
    default = [
        "robust", "run_id", "judge", "rank", args.metric, "lo", "hi", "n_eligible",
        "beaten_by", "robust_beaten_by", "gate", "judge_robust_note",
    ]  # fmt: skip
    return c.emit(view.select(c.pick_columns(view, default, args)), args.format)


def _ranks_text(board: pl.DataFrame, args: argparse.Namespace) -> str:
    """What ``ranks``, ``tie`` (and ``top_K``) mean, and the top-K set."""
    import polars as pl

    ranked = board.filter(pl.col("ranked"))
    text = (
        f"ranks: the rank's {args.level:.0%} interval, simultaneous over the {ranked.height} "
        "ranked runs (max-T step-down on the head-to-head differences); tie: runs of a group "
        "are each shown better than every run of a later group"
    )
    if args.top_k is None:
        return text + " (--top-k K: the set that holds the best K)"
    top = ranked.filter(pl.col("in_top_k"))["run_id"].to_list()
    return text + (
        f"; top {args.top_k}: these {len(top)} run(s) hold the best {args.top_k} with "
        f"{args.level:.0%} confidence: {', '.join(top)}"
    )


def _support_text(board: pl.DataFrame) -> str:
    """The board's support in a sentence: the pairs compared, what was set aside."""
    if board["support"][0] == "own":
        return "support own: each run on all the pairs it answered"
    aside = [f"{r} {n}" for r, n in board.select("run_id", "n_set_aside").iter_rows() if n]
    return f"support common: the {board['n_common'][0]} (case, sample) pairs every run answered" + (
        f"; set aside: {', '.join(aside)}" if aside else ""
    )


def _gates_text(args: argparse.Namespace) -> str:
    """The gates the board used, the ones changed marked, and how to change them."""
    from ..metrics.gates import GateThresholds

    given = c.gates_of(args)
    shown = ", ".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}{'*' if k in given else ''}"
        for k, v in GateThresholds.of(given).as_dict().items()
    )
    return f"gates: {shown} ({'* set here; ' if given else ''}change with --gate NAME=VALUE)"


def cmd_compare(args: argparse.Namespace) -> int:
    """Two runs head to head, or every pair (Holm-adjusted); with ``--judges``, under
    every judge of a panel, with the judge-robust verdict."""
    import polars as pl

    from .. import api
    from ..errors import PeiraError

    if bool(args.run_a) != bool(args.run_b):
        raise PeiraError("compare needs two runs (RUN_A RUN_B), or none for every pair")
    dataset, log = c.dataset_and_log(args)
    runs = [args.run_a, args.run_b] if args.run_a else None
    given = c.gates_of(args)
    other = sorted(set(given) - {"allow_missing"})
    if other:
        raise PeiraError(
            f"--gate {other[0]}: compare ranks nothing; of the gates only allow_missing applies"
        )
    kw = c.comparison_kwargs(args, runs or ["", ""])
    panel = None if args.judges is None else _judges_arg(args)
    table = api.compare(
        c.responses_arg(args, log), dataset, runs=runs, metric=args.metric,
        support=kw["support"], allow_missing=bool(given.get("allow_missing", False)),
        judge=args.judge, judges=panel, bounds=args.bounds,
        **c.api_kwargs(args, [n for n in api.PARAMETERS if n != "support"]),
    )  # fmt: skip
    if panel is not None and args.format == "table" and table.height:
        _say(_panel_text(table))
    if args.format in ("table", "markdown"):
        p_shown = "p_holm" if args.adjust == "holm" else "p_adjusted"
        margin = (
            []
            if args.margin is None
            else [
                "margin",
                "tost_lo",
                "tost_hi",
                "noninferiority",
                "noninferiority_b",
                "equivalence",
            ]
        )
        robust = [] if panel is None else ["judge_robust", "n_judges_for_a", "n_judges_for_b"]
        default = [
            *([] if panel is None else ["judge"]),
            "run_a", "run_b", "estimate_a", "estimate_b", "own_a", "own_b", "diff", "diff_lo",
            "diff_hi", p_shown, "family_size", "ci_verdict", "paired_verdict", *margin, "winner",
            *robust, "n_common", "n_both", "n_set_aside_a", "n_set_aside_b", "note",
            *_bounds_view(args),
        ]  # fmt: skip
        if panel is not None:
            table = table.with_columns(pl.col("judge").cast(pl.String))
        table = table.select(c.pick_columns(table, default, args))
    return c.emit(table, args.format)


def _rule_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rule", choices=c.option_choices("rule"), default="ci", help=c.option_help("rule")
    )
    p.add_argument(
        "--adjust", choices=c.option_choices("adjust"), default="holm",
        help=c.option_help("adjust"),
    )  # fmt: skip


def _bounds_view(args: argparse.Namespace) -> list[str]:
    """The columns ``--bounds`` adds to the terminal view of ``compare``."""
    if not args.bounds:
        return []
    ends = [f"{x}_end_{e}" for e in "ab" for x in ("diff", "winner")]
    return [*ends, "winner_bounds", "bounds_note"]


def _bounds_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bounds",
        action="store_true",
        help="with --judge (asr or robustness): the comparison again at the two ends of the "
        "undetermined verdicts least favourable to each run; winner_bounds names a winner "
        "only when both ends do (docs/spec/judges.md)",
    )


def _judge_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--judge",
        metavar="NAME",
        help="rank by this judge's verdicts in judgements.parquet beside the dataset, or by "
        "'majority' of its judges (default: the decisions in the log); undetermined pairs "
        "are left out (docs/spec/judges.md)",
    )
    p.add_argument(
        "--judges",
        metavar="all|A,B,…",
        help="a panel: the verdicts under every judge of judgements.parquet but gold (all), "
        "or under the judges named (majority and gold allowed), and the judge-robust "
        "verdict, the one that holds under every judge (or --quorum of them); "
        "docs/spec/judges.md",
    )
    p.add_argument(
        "--quorum",
        type=c.option_type("quorum", "positive integer"),
        default=None,
        metavar="K",
        help="with --judges: a verdict is judge-robust when K judges of the panel give it "
        "(default: every one) and more of them give it than the opposite one",
    )


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
    c.add_comparison_options(lb)
    lb.add_argument(
        "--top-k",
        type=c.int_range(1, 1_000_000, "positive integer"),
        default=None,
        metavar="K",
        help="mark the runs of the set that holds the best K with the --level confidence "
        "(top_K column); K from 1 to the number of ranked runs",
    )
    c.add_columns_options(lb)
    _judge_option(lb)
    c.add_flag_family_option(lb)
    c.add_engine_options(
        lb, "the board, its gates and the holdout check are the same as on the local engine"
    )

    cp = c.add_command(sub, "compare", cmd_compare, "head-to-head: two runs, or every pair")
    cp.add_argument("run_a", nargs="?")
    cp.add_argument("run_b", nargs="?")
    c.add_data_options(cp, split="public")
    cp.add_argument("--metric", default="robustness")
    _rule_option(cp)
    cp.add_argument(
        "--margin",
        type=c.option_type("margin"),
        default=None,
        metavar="M",
        help=c.option_help("margin")
        + ": adds the non-inferiority verdicts (run_a to run_b, and back) and equivalence (TOST)",
    )
    c.add_comparison_options(cp)
    c.add_columns_options(cp)
    _judge_option(cp)
    _bounds_option(cp)
    c.add_engine_options(cp)
