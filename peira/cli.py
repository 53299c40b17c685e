"""The ``peira`` command line: parses arguments, calls the library, prints."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from . import __version__
from .errors import (
    DataFileError,
    InputFormatError,
    MissingArmsError,
    PeiraError,
    PeiraWarning,
    ValidationError,
)
from .io import (
    Dataset,
    demo_dir,
    read_dataset,
    read_responses,
    validate_files,
    write_dataset,
    write_parquet,
)
from .render import FORMATS, render
from .schema import describe_failures

if TYPE_CHECKING:
    from .bootstrap import ResamplePlan

EXIT_OK, EXIT_VIOLATIONS, EXIT_UNREADABLE = 0, 1, 2

HEADLINE = (
    "n_pairs",
    "benign_accuracy",
    "asr",
    "robustness",
    "abstention_rate_benign",
    "abstention_rate_attacked",
    "abstention_flip_rate",
    "abstention_dos_rate",
    "target_hit_rate",
    "shift_without_flip_rate",
    "malformed_rate",
    "calibration_status",
    "gate",
)


def _dataset_and_log(args: argparse.Namespace) -> tuple[Path, Path]:
    if args.dataset is None:
        d = demo_dir()
        return d, Path(args.responses) if args.responses else d / "responses.parquet"
    d = Path(args.dataset)
    if args.responses is None:
        default = d / "responses.parquet"
        if not default.exists():
            raise DataFileError(f"{d}: no responses.parquet; pass --responses LOG")
        return d, default
    return d, Path(args.responses)


def _load_pairs(args: argparse.Namespace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pairs, cases) of the split asked for (all splits when ``--split all``)."""
    from .pairs import build_pairs

    d, log = _dataset_and_log(args)
    ds = read_dataset(d)
    responses = read_responses(log, cases=ds.cases)
    pairs = build_pairs(responses, ds.cases, missing=args.missing, delta=args.delta)
    cases = ds.cases
    if args.split != "all":
        cases = cases.filter(pl.col("split") == args.split)
        pairs = pairs.filter(pl.col("split") == args.split)
        if cases.is_empty():
            raise DataFileError(f"{d}: no cases in split {args.split!r}")
    return pairs, cases


def _plan(args: argparse.Namespace, cases: pl.DataFrame) -> ResamplePlan:
    from .bootstrap import plan_for_cases

    return plan_for_cases(cases, unit=args.unit, n_resamples=args.resamples, seed=args.seed)


def _gate_text(table: pl.DataFrame) -> pl.DataFrame:
    gate = (
        pl.when(pl.col("ranked"))
        .then(pl.lit("ranked"))
        .otherwise(pl.lit("unranked: ") + pl.col("gate_reasons").list.join("; "))
    )
    return table.with_columns(gate.alias("gate"))


def _wide_intervals(ci: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Long intervals (one row per metric) → ``<m>_lo``, ``<m>_hi``, ``<m>_n_defined``,
    ``<m>_method``, ``<m>_n_clusters``, ``<m>_few_clusters`` + metadata."""
    wide: pl.DataFrame | None = None
    for field in ("lo", "hi", "n_defined", "method", "n_clusters", "few_clusters"):
        part = ci.pivot(on="metric", index=keys, values=field, sort_columns=True)
        part = part.rename({c: f"{c}_{field}" for c in part.columns if c not in keys})
        wide = part if wide is None else wide.join(part, on=keys, how="left", nulls_equal=True)
    meta = ci.group_by(keys).agg(
        pl.col("level", "n_resamples", "unit", "seed", "fingerprint").first(),
        pl.col("few_clusters").any(),
        pl.col("method").filter(pl.col("lo").is_not_null()).unique().sort().str.join(",")
        .alias("interval_method"),
    )  # fmt: skip
    assert wide is not None
    return wide.join(meta, on=keys, how="left", nulls_equal=True)


def cmd_score(args: argparse.Namespace) -> int:
    from .bootstrap import nonratio_intervals, ratio_intervals
    from .metrics import metric_table

    pairs, cases = _load_pairs(args)
    unknown = [c for c in args.by if c not in pairs.columns]
    if unknown:
        raise PeiraError(
            f"--by {', '.join(unknown)}: not a column of the pair table; "
            f"choose among {', '.join(c for c in pairs.columns if pairs.schema[c] == pl.String)}"
        )
    table = metric_table(pairs, args.by, cases=cases)
    keys = ["run_id", *args.by]
    plan = _plan(args, cases)
    opts = {"by": args.by or None, "method": args.method, "level": args.level}
    if args.format in ("table", "markdown"):
        # the headline ASR with its interval, the method it used and its flags
        asr = ratio_intervals(pairs, plan, metrics=["asr"], **opts).select(
            *keys,
            pl.col("lo").alias("asr_lo"),
            pl.col("hi").alias("asr_hi"),
            pl.when(pl.col("lo").is_not_null())
            .then(pl.col("method"))
            .otherwise(pl.lit(""))
            .alias("interval_method"),
            pl.when(pl.col("lo").is_not_null() & pl.col("few_clusters"))
            .then(pl.lit("few_clusters"))
            .otherwise(pl.lit(""))
            .alias("flags"),
        )
        head = [*HEADLINE[:3], "asr_lo", "asr_hi", *HEADLINE[3:], "interval_method", "flags"]
        table = _gate_text(table).join(asr, on=keys, how="left", nulls_equal=True)
        table = table.select(*keys, *head).sort(keys)
    else:
        common = ["metric", "lo", "hi", "n_defined", "level", "method", "n_resamples"]
        common += ["unit", "seed", "fingerprint", "few_clusters", "n_clusters"]
        nr_opts = {
            **opts,
            "method": "auto" if args.method not in ("percentile", "bca") else args.method,
        }
        ci = pl.concat(
            [
                ratio_intervals(pairs, plan, **opts).select(*keys, *common),
                nonratio_intervals(pairs, plan, **nr_opts).select(*keys, *common),
            ]
        )
        table = table.join(_wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
        table = table.sort(keys)
    sys.stdout.write(render(table, args.format))
    return EXIT_OK


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from .compare import leaderboard

    pairs, cases = _load_pairs(args)
    plan = _plan(args, cases)
    board = leaderboard(pairs, cases, plan, rule=args.rule, level=args.level)
    metric = board["metric"][0] if board.height else "robustness"
    board = board.with_columns(
        pl.col("estimate").alias(metric),
        pl.col("lo").alias(f"{metric}_lo"),
        pl.col("hi").alias(f"{metric}_hi"),
    )
    if args.format in ("table", "markdown"):
        board = _gate_text(board).select(
            "rank",
            "run_id",
            metric,
            pl.col(f"{metric}_lo").alias("lo"),
            pl.col(f"{metric}_hi").alias("hi"),
            "n_eligible",
            pl.col("beaten_by").list.len().alias("beaten_by"),
            "gate",
            pl.when(pl.col("lo").is_not_null())
            .then(pl.col("method"))
            .otherwise(pl.lit(""))
            .alias("interval_method"),
            pl.when(pl.col("lo").is_not_null() & pl.col("few_clusters"))
            .then(pl.lit("few_clusters"))
            .otherwise(pl.lit(""))
            .alias("flags"),
        )
        if args.format == "table":
            rule = (
                "non-overlapping intervals (overlap = tie)"
                if args.rule == "ci"
                else "paired test, Holm-adjusted over every pair of runs"
            )
            print(
                f"split {args.split}; {args.level:.0%} {args.unit}-bootstrap intervals, "
                f"B={args.resamples}, seed {args.seed}, plan {plan.fingerprint[:12]}; rule: {rule}"
            )
    sys.stdout.write(render(board, args.format))
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import head_to_head, pairwise

    pairs, cases = _load_pairs(args)
    plan = _plan(args, cases)
    if args.run_a and args.run_b:
        row = head_to_head(
            pairs,
            plan,
            args.run_a,
            args.run_b,
            metric=args.metric,
            rule=args.rule,
            level=args.level,
        )
        table = pl.DataFrame([row])
    elif args.run_a or args.run_b:
        raise PeiraError("compare needs two runs (RUN_A RUN_B), or none for every pair")
    else:
        table = pairwise(pairs, plan, metric=args.metric, rule=args.rule, level=args.level)
    if args.format in ("table", "markdown"):
        table = table.select(
            "run_a", "run_b", "estimate_a", "estimate_b", "diff", "diff_lo", "diff_hi",
            "p_holm", "family_size", "ci_verdict", "paired_verdict", "winner",
        )  # fmt: skip
    sys.stdout.write(render(table, args.format))
    return EXIT_OK


def cmd_metrics(args: argparse.Namespace) -> int:
    from .metrics import registry_frame

    sys.stdout.write(render(registry_frame(), args.format))
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    failures = validate_files(args.dataset, args.responses)
    if failures.height == 0:
        logs = f" and {len(args.responses)} response log(s)" if args.responses else ""
        print(f"{args.dataset}{logs}: valid")
        return EXIT_OK
    print(f"{failures.height} violation(s)", file=sys.stderr)
    print(describe_failures(failures, examples=args.examples), file=sys.stderr)
    if args.failures_out:
        write_parquet(failures, args.failures_out)
    return EXIT_VIOLATIONS


def cmd_synth(args: argparse.Namespace) -> int:
    from .synth import generate

    bench = generate(args.cases, args.models, seed=args.seed, samples=args.samples)
    out = bench.write(args.out)
    print(
        f"{out}: {bench.cases.height} cases, {bench.variants.height} variants, "
        f"{bench.responses.height} responses of {bench.models.height} runs (seed {args.seed})"
    )
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    if args.kind == "cases":
        from .importers.cases import read_cases_jsonl

        ds = read_cases_jsonl(args.input)
        write_dataset(ds.cases, ds.variants, args.out)
        print(f"{args.out}: {ds.cases.height} cases, {ds.variants.height} variants")
        inferred = ds.cases.filter(pl.col("extras").str.contains("peira:inferred", literal=True))
        if inferred.height:
            ids = ", ".join(inferred["case_id"].head(10).to_list())
            print(
                f"peira: note: {inferred.height} score case(s) gave no positive_decision; the "
                f"reference default options[0] was assumed and marked in extras ({ids})",
                file=sys.stderr,
            )
        return EXIT_OK
    if args.kind == "artifact":
        from .importers.artifact import read_artifact

        df = read_artifact(args.input, run_id=args.run_id)
    else:
        from .importers.transcript import read_transcript

        df = read_transcript(args.input, run_id=args.run_id)
    write_parquet(df, args.out)
    print(f"{args.out}: {df.height} responses")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from .importers.cases import write_cases_jsonl

    ds = read_dataset(args.dataset)
    if args.split != "all":
        keep = ds.cases.filter(pl.col("split") == args.split)
        ds = Dataset(keep, ds.variants.join(keep.select("case_id"), on="case_id", how="semi"))
    write_cases_jsonl(ds, args.out)
    print(f"{args.out}: {ds.cases.height} cases")
    return EXIT_OK


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _level(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``peira`` command."""
    p = argparse.ArgumentParser(
        prog="peira", description="Score adversarial-robustness benchmarks of decision models."
    )
    p.add_argument("--version", action="version", version=f"peira {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def data_options(q: argparse.ArgumentParser, split: str) -> None:
        q.add_argument("--dataset", help="dataset directory (default: the bundled data/demo)")
        q.add_argument("--responses", help="response log: file, directory or glob")
        q.add_argument("--format", choices=FORMATS, default="table")
        q.add_argument("--split", choices=("public", "holdout", "all"), default=split)
        q.add_argument("--missing", choices=("error", "malformed"), default="error")
        q.add_argument("--delta", type=float, default=0.10, help="shift-without-flip threshold")
        q.add_argument(
            "--resamples", type=_positive_int, default=10_000, help="bootstrap resamples B"
        )
        q.add_argument("--seed", type=_non_negative_int, default=0, help="bootstrap seed")
        q.add_argument("--unit", choices=("cluster", "case"), default="cluster")
        q.add_argument("--level", type=_level, default=0.95, help="confidence level")

    lb = sub.add_parser("leaderboard", help="ranked runs with intervals (default: demo data)")
    data_options(lb, "public")
    lb.add_argument("--rule", choices=("ci", "paired"), default="ci")
    lb.set_defaults(func=cmd_leaderboard)

    s = sub.add_parser("score", help="per-run metrics (default: the bundled demo data)")
    data_options(s, "public")
    s.add_argument("--by", action="append", default=[], help="breakdown column (repeatable)")
    s.add_argument(
        "--method",
        choices=("auto", "percentile", "bca", "korn-graubard", "design-jeffreys", "design-wilson"),
        default="auto",
        help="interval method (default auto: BCa where the cluster bootstrap carries the row, "
        "Korn-Graubard where too few clusters or events do)",
    )
    s.set_defaults(func=cmd_score)

    c = sub.add_parser("compare", help="head-to-head: two runs, or every pair")
    c.add_argument("run_a", nargs="?")
    c.add_argument("run_b", nargs="?")
    data_options(c, "public")
    c.add_argument("--metric", default="robustness")
    c.add_argument("--rule", choices=("ci", "paired"), default="ci")
    c.set_defaults(func=cmd_compare)

    mt = sub.add_parser("metrics", help="list every metric: kind, direction, definition")
    mt.add_argument("--format", choices=FORMATS, default="table")
    mt.set_defaults(func=cmd_metrics)

    v = sub.add_parser("validate", help="report every violation of the data model")
    v.add_argument("dataset", help="dataset directory")
    v.add_argument("--responses", action="append", default=[], help="response log (repeatable)")
    v.add_argument("--examples", type=int, default=20, help="examples shown per check")
    v.add_argument("--failures-out", help="write all violations to this Parquet file")
    v.set_defaults(func=cmd_validate)

    y = sub.add_parser("synth", help="write a deterministic synthetic benchmark")
    y.add_argument("--out", required=True)
    y.add_argument("--cases", type=int, default=1200)
    y.add_argument("--models", type=int, default=8)
    y.add_argument("--seed", type=int, default=0)
    y.add_argument("--samples", type=int, default=1)
    y.set_defaults(func=cmd_synth)

    im = sub.add_parser("import", help="import reference-format files")
    im.add_argument("kind", choices=("cases", "artifact", "transcript"))
    im.add_argument("input")
    im.add_argument("--out", required=True)
    im.add_argument("--run-id", help="run_id for imported responses")
    im.set_defaults(func=cmd_import)

    ex = sub.add_parser("export", help="export to reference formats")
    ex.add_argument("kind", choices=("cases",))
    ex.add_argument("dataset")
    ex.add_argument("--out", required=True)
    ex.add_argument(
        "--split",
        choices=("public", "all"),
        default="all",
        help="holdout cases are never exported; --split public exports the public ones",
    )
    ex.set_defaults(func=cmd_export)
    from .cli_integrity import register as register_integrity
    from .cli_report import register as register_report
    from .cli_run import register as register_run

    register_integrity(sub)
    register_run(sub)
    register_report(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``peira`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PeiraWarning)
            code = int(args.func(args))
        shown: set[str] = set()
        for w in caught:
            if issubclass(w.category, PeiraWarning):
                if str(w.message) not in shown:  # one plan warns once per statistic
                    shown.add(str(w.message))
                    print(f"peira: warning: {w.message}", file=sys.stderr)
            else:  # pragma: no cover - not ours: re-emit
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return code
    except (ValidationError, MissingArmsError, InputFormatError) as exc:
        print(f"peira: error: {exc}", file=sys.stderr)
        return EXIT_VIOLATIONS
    except (DataFileError, PeiraError) as exc:
        print(f"peira: error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except (ValueError, KeyError) as exc:  # bad arguments found by the library (run ids, metrics)
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"peira: error: {msg}", file=sys.stderr)
        return EXIT_UNREADABLE
    except pl.exceptions.PolarsError as exc:  # pragma: no cover - unexpected data shape
        print(f"peira: error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
