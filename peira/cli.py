"""The ``peira`` command line: parses arguments, calls the library, prints."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from . import __version__
from .errors import DataFileError, InputFormatError, MissingArmsError, PeiraError, ValidationError
from .io import read_dataset, read_responses, validate_files, write_dataset, write_parquet
from .render import FORMATS, render
from .schema import describe_failures

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


def demo_dir() -> Path:
    """The bundled demo data: ``data/demo`` of the source tree (or of the working directory)."""
    for base in (Path(__file__).resolve().parent.parent, Path.cwd()):
        d = base / "data" / "demo"
        if (d / "cases.parquet").exists():
            return d
    raise DataFileError(
        "no --dataset given and the bundled demo data (data/demo) were not found; "
        "run from a clone of the repository or pass --dataset and --responses"
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


def cmd_score(args: argparse.Namespace) -> int:
    from .metrics import metric_table
    from .pairs import build_pairs

    d, log = _dataset_and_log(args)
    ds = read_dataset(d)
    responses = read_responses(log, cases=ds.cases)
    pairs = build_pairs(responses, ds.cases, missing=args.missing, delta=args.delta)
    table = metric_table(pairs, args.by, cases=ds.cases)
    keys = ["run_id", *args.by]
    if args.format in ("table", "markdown"):
        gate = (
            pl.when(pl.col("ranked"))
            .then(pl.lit("ranked"))
            .otherwise(pl.lit("unranked: ") + pl.col("gate_reasons").list.join("; "))
        )
        table = table.with_columns(gate.alias("gate")).select(*keys, *HEADLINE)
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
    write_cases_jsonl(ds, args.out)
    print(f"{args.out}: {ds.cases.height} cases")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``peira`` command."""
    p = argparse.ArgumentParser(
        prog="peira", description="Score adversarial-robustness benchmarks of decision models."
    )
    p.add_argument("--version", action="version", version=f"peira {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("score", help="per-run metrics (default: the bundled demo data)")
    s.add_argument("--dataset", help="dataset directory (default: data/demo)")
    s.add_argument("--responses", help="response log: file, directory or glob")
    s.add_argument("--by", action="append", default=[], help="breakdown column (repeatable)")
    s.add_argument("--format", choices=FORMATS, default="table")
    s.add_argument("--missing", choices=("error", "malformed"), default="error")
    s.add_argument("--delta", type=float, default=0.10, help="shift-without-flip threshold")
    s.set_defaults(func=cmd_score)

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
    ex.set_defaults(func=cmd_export)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``peira`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValidationError, MissingArmsError, InputFormatError) as exc:
        print(f"peira: error: {exc}", file=sys.stderr)
        return EXIT_VIOLATIONS
    except (DataFileError, PeiraError) as exc:
        print(f"peira: error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except pl.exceptions.PolarsError as exc:  # pragma: no cover - unexpected data shape
        print(f"peira: error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
