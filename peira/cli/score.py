"""``peira score`` and ``peira metrics``: every metric per run, and what each one means."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from . import _common as c

if TYPE_CHECKING:
    import polars as pl

__all__ = ["cmd_metrics", "cmd_score", "register"]


def cmd_score(args: argparse.Namespace) -> int:
    """Every metric per run (× ``--by``); intervals in every format but table/markdown;
    the source's own figures beside them where the dataset has them."""
    from .. import api
    from ..errors import PeiraValueError
    from ._views import gate_text, headline, macro_label

    if args.macro and not args.by:  # refused before any data is read
        raise PeiraValueError("--macro averages over groups: give --by (e.g. --by family)")

    check_correct_args(args)
    dataset, log = c.dataset_and_log(args)
    # the source's figures are its primary judge's: not set beside another judge's scores
    published = _published(args) if args.judge is None else None
    terminal = args.format in ("table", "markdown")
    local = args.engine == "local"
    chosen = bool(args.all or args.columns)
    _note_judges(args, dataset, log)
    table = api.score(  # the compact view shows ASR's interval; every other, every interval
        c.responses_arg(args, log), dataset, by=args.by,
        interval_metrics=["asr"] if terminal and not chosen else None,
        ratio_only=args.ratio_only, macro=args.macro, judge=args.judge, **c.api_kwargs(args),
        correct=args.correct, correct_by=args.correct_by, bounds=args.bounds,
    )  # fmt: skip
    if args.judge is not None:
        n = int(table.filter(_not_macro(table))["n_undetermined"].sum())
        who = (
            "the majority of the judges but gold"
            if args.judge == "majority"
            else f"judge {args.judge!r}"
        )
        c.note(
            f"decisions by {who} (judgements.parquet): {n} pair(s) undetermined, "
            "left out of every denominator (column n_undetermined)"
        )
        if args.bounds:
            c.note(
                "bounds: asr_worst counts every undetermined pair as a flip where it can be, "
                "asr_best as none; every completion of the verdicts lies between "
                "(docs/spec/judges.md#bounds-for-undetermined-verdicts)"
            )
    if args.correct is not None:
        correction_note(table, args)
    if terminal:
        view = headline(table, args.by)
        if args.bounds and not chosen:  # the ends of ASR beside it
            at = view.columns.index("asr_hi") + 1 if "asr_hi" in view.columns else view.width
            ends = table.select(c for c in table.columns if c.startswith(("asr_worst", "asr_best")))
            view = (
                view.select(view.columns[:at]).hstack(ends).hstack(view.select(view.columns[at:]))
            )
        if chosen:
            view = macro_label(gate_text(table), args.by)
            view = view.select(c.pick_columns(view, view.columns, args))
        elif args.correct is not None:
            view = correction_view(view, table)
        c.emit(view, args.format)
        if published is not None and local and not args.ratio_only:  # beside needs the pairs
            _emit_published(args, published)
        return c.EXIT_OK
    if published is not None:
        from ..published import published_columns

        pairs = None
        if local and not args.ratio_only:  # Peira's n of each figure needs the pairs
            pairs, _ = api.pairs_and_cases(
                log, dataset, split=args.split, missing=args.missing, delta=args.delta,
                judge=args.judge,
            )  # fmt: skip
        table = published_columns(table, published, args.by, pairs)
    return c.emit(table, args.format)


def _not_macro(table: pl.DataFrame) -> Any:
    import polars as pl

    return pl.col("macro").not_() if "macro" in table.columns else pl.lit(True)


def _note_judges(args: argparse.Namespace, dataset: Any, log: Any) -> None:
    """Without ``--judge``, when the dataset holds judgements: one note naming the judge
    behind the log's decisions (its ``verdict_source``) and the others."""
    if args.judge is not None:
        return
    from ..io import JUDGEMENTS_FILE, read_parquet, scan_responses

    path = dataset / JUDGEMENTS_FILE
    if not path.is_file():
        return
    lf = scan_responses(log)
    primary: list[str] = []
    if "verdict_source" in lf.collect_schema().names():
        values = lf.select("verdict_source").unique().collect()["verdict_source"]
        primary = sorted(v for v in values.to_list() if v is not None)
    judges = sorted(set(read_parquet(path)["judge"].cast(str).to_list()))
    others = [j for j in judges if j not in primary]
    by = f"judge {', '.join(primary)} (the log's verdict_source)" if primary else "the log"
    c.note(
        f"decisions by {by}; judgements.parquet also holds {', '.join(others) or 'no other'}: "
        "--judge NAME or --judge majority scores by another"
    )


def _published(args: argparse.Namespace) -> pl.DataFrame | None:
    """The source's own figures: ``--published FILE``, else ``published.parquet`` beside
    the dataset (docs/spec/data-model.md)."""
    from ..published import read_published

    if args.published:
        from pathlib import Path

        from ..io import read_parquet
        from ..schema import validate_published

        p = Path(args.published)
        return validate_published(read_parquet(p), source=str(p))
    d, _ = c.dataset_and_log(args)
    return read_published(d)


#: The columns of :func:`peira.published.beside` shown after ``metric``, in order,
#: by the name the view gives them.
_BESIDE = {
    "estimate": "peira",
    "lo": "peira_lo",
    "hi": "peira_hi",
    "method": "peira_method",
    "published": "published",
    "published_stderr": "stderr",
    "published_lo": "pub_lo",
    "published_hi": "pub_hi",
    "published_n": "n_pub",
    "peira_n": "n_peira",
    "peira_n_cases": "n_cases",
    "n_check": "n_check",
    "source": "source",
}


def _emit_published(args: argparse.Namespace, published: pl.DataFrame) -> None:
    """The source's figures beside Peira's estimate and cluster interval."""
    import polars as pl

    from .. import api
    from ..published import beside, n_check

    dataset, log = c.dataset_and_log(args)
    pairs, cases = api.pairs_and_cases(
        log, dataset, split=args.split, missing=args.missing, delta=args.delta, judge=args.judge
    )
    plan = api.resample_plan(cases, **c.api_kwargs(args, ("unit", "n_resamples", "seed")))
    rows = beside(pairs, published, plan, level=args.level)
    if rows.is_empty():
        return
    rows = rows.with_columns(n_check(pl.col("n_match")).alias("n_check"))
    shown = rows.select(
        "run_id",
        *(["family"] if rows["family"].is_not_null().any() else []),
        "metric",
        *(pl.col(name).alias(shown) for name, shown in _BESIDE.items()),
    )
    unit = "cluster" if args.unit == "cluster" else "case"
    print(
        f"\nbeside the source's own figures: Peira's estimate with its {args.level:.0%} "
        f"interval ({unit} bootstrap, B={args.resamples}, or Korn-Graubard where the "
        "bootstrap cannot carry the cell: peira_method); the source's estimate ± its "
        "standard error (normal interval) where it reports one; n_pub is the source's n, "
        "n_peira Peira's pairs, n_cases their cases (n_check: ok when n_pub is either, "
        "MISMATCH, or unknown where the source gives none)"
    )
    c.emit(shown, args.format)
    off = rows.filter(pl.col("n_match").not_())
    if off.height:
        print(
            f"MISMATCH: {off.height} of {rows.height} published figure(s) rest on another n "
            "than Peira's (e.g. "
            + ", ".join(
                f"{r['run_id']} {r['metric']}: {r['published_n']} published, {r['peira_n']} here"
                for r in off.head(3).iter_rows(named=True)
            )
            + "): they are not about the same items"
        )


def cmd_metrics(args: argparse.Namespace) -> int:
    """The metric registry: name, kind, direction of "better", definition."""
    from ..metrics.registry import COLUMNS, registry_rows
    from ._output import render_rows

    # plain rows: listing the registry imports no dataframe library
    numeric = [col == "min_n" for col in COLUMNS]
    sys.stdout.write(render_rows(COLUMNS, registry_rows(), numeric, args.format))
    return c.EXIT_OK


def register(sub: Any) -> None:
    """Add ``score`` and ``metrics`` to the ``peira`` subparsers object ``sub``."""
    s = c.add_command(
        sub,
        "score",
        cmd_score,
        "per-run metrics (no --dataset or --responses: the bundled demo data)",
    )
    c.add_data_options(s, split="public", method=True)
    c.add_engine_options(s)
    s.add_argument(
        "--ratio-only",
        action="store_true",
        help="the ratio metrics only, streamed from the log to per-cluster sums: memory "
        "follows the clusters, not the log (always so with --engine spark)",
    )
    s.add_argument("--by", action="append", default=[], help="breakdown column (repeatable)")
    s.add_argument(
        "--macro",
        action="store_true",
        help="with --by: after each run's group rows, the unweighted mean over its groups "
        "(e.g. families) of every ratio metric, with its cluster-bootstrap interval",
    )
    s.add_argument(
        "--judge",
        metavar="NAME",
        help="score by this judge's verdicts in judgements.parquet beside the dataset, or "
        "by 'majority' of its judges (default: the decisions in the log, whose judge a note "
        "names); undetermined pairs are left out and counted (n_undetermined)",
    )

    add_correct_options(s)
    s.add_argument(
        "--bounds",
        action="store_true",
        help="with --judge: ASR and robustness at both ends of the undetermined verdicts "
        "(asr_worst: every undetermined pair a flip where it can be; asr_best: none), each "
        "with its interval on the same plan",
    )
    s.add_argument(
        "--published",
        help="the source's own figures (default: published.parquet beside the dataset)",
    )
    c.add_columns_options(s)

    m = c.add_command(sub, "metrics", cmd_metrics, "list every metric: kind, direction, definition")
    c.add_format_option(m)


# ---------------------------------------------------------------- --correct
# (docs/spec/judges.md#correcting-for-judge-error): options, view and note
#: The correction's columns in the terminal view, after the headline's.
SHOWN = (
    "asr_corrected", "asr_corrected_lo", "asr_corrected_hi", "judge_sensitivity",
    "judge_specificity", "n_labelled", "correction_note",
)  # fmt: skip
_NAMES = {"rogan-gladen": "Rogan-Gladen", "ppi": "prediction-powered inference (PPI)"}


def add_correct_options(s: argparse.ArgumentParser) -> None:
    """``--correct`` and ``--correct-by`` of ``peira score``."""
    s.add_argument(
        "--correct",
        choices=("rogan-gladen", "ppi"),
        help="with --judge NAME (not gold): also the ASR corrected for that judge's error, "
        "measured on the gold verdicts of judgements.parquet (asr_corrected, with its "
        "cluster-bootstrap interval; null and a correction_note where not identifiable): "
        "rogan-gladen (the judge's ASR through its sensitivity and specificity) or ppi "
        "(prediction-powered inference: the judge's ASR plus its mean error on the gold labels)",
    )
    s.add_argument(
        "--correct-by",
        choices=("overall", "family"),
        default="overall",
        help="estimate the judge's sensitivity and specificity on every labelled pair of "
        "the run (overall, default) or per family",
    )


def check_correct_args(args: argparse.Namespace) -> None:
    """Refuse, before any data is read, ``--correct`` without ``--judge`` (or with gold)."""
    from ..errors import PeiraValueError

    if args.correct is None:
        if args.correct_by != "overall":
            raise PeiraValueError("--correct-by needs --correct (rogan-gladen or ppi)")
        return
    if args.judge is None:
        raise PeiraValueError(
            "--correct needs --judge NAME: the judge whose error the gold verdicts of "
            "judgements.parquet measure"
        )
    if args.judge == "gold":
        raise PeiraValueError(
            "--correct corrects a judge against the gold verdicts: --judge gold is those "
            "verdicts themselves (score it without --correct)"
        )


def correction_view(view: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """The terminal ``view`` (one row per row of ``table``, in order) with the
    correction's columns right after ASR's interval (so a table fitted to the terminal
    shows them; the note last)."""
    import polars as pl

    cols = [x for x in SHOWN if x in table.columns and x not in view.columns]
    head = [x for x in cols if x != "correction_note"]
    at = view.columns.index("asr_hi") + 1 if "asr_hi" in view.columns else view.width
    parts = [view.select(view.columns[:at]), table.select(head), view.select(view.columns[at:])]
    if "correction_note" in cols:
        parts.append(table.select("correction_note"))
    return pl.concat([p for p in parts if p.width], how="horizontal")


def correction_note(table: pl.DataFrame, args: argparse.Namespace) -> None:
    """One note naming the method, where the judge's error was measured and on how many
    gold-labelled pairs."""
    import polars as pl

    rows: Any = table.filter(pl.col("correction_method").is_not_null())
    if args.correct_by == "family" and "family" in args.by:
        n = int(rows["n_labelled"].sum())
    else:
        n = int(rows.unique("run_id")["n_labelled"].sum())
    where = "per family" if args.correct_by == "family" else "over each run"
    null = int(rows["asr_corrected"].null_count())
    c.note(
        f"asr_corrected: the ASR of judge {args.judge!r} corrected for its error by "
        f"{_NAMES[args.correct]}, the error measured {where} on {n} gold-labelled pair(s); "
        "interval from the same cluster bootstrap, the labelled pairs resampled with the rest"
        + (f"; {null} row(s) not identifiable (correction_note)" if null else "")
    )
