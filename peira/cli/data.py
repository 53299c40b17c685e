"""``peira validate``, ``import``, ``export`` and ``synth``: data in and out."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import _common as c

__all__ = ["cmd_export", "cmd_import", "cmd_synth", "cmd_validate", "register"]

_SYNTH_FILES = ("cases.parquet", "variants.parquet", "responses.parquet", "models.parquet")


def cmd_validate(args: argparse.Namespace) -> int:
    """Report every violation of the data model (exit 1 when there is one)."""
    from ..io import validate_files, write_parquet
    from ..schema import describe_failures

    if args.failures_out is not None:
        c.check_out(args, args.failures_out, datasets=[args.dataset], logs=args.responses)
    failures = validate_files(args.dataset, args.responses)
    if failures.height == 0:
        logs = f" and {len(args.responses)} response log(s)" if args.responses else ""
        print(f"{args.dataset}{logs}: valid")
        return c.EXIT_OK
    print(f"{failures.height} violation(s)", file=sys.stderr)
    print(describe_failures(failures, examples=args.examples), file=sys.stderr)
    if args.failures_out is not None:
        write_parquet(failures, args.failures_out)
    return c.EXIT_VIOLATIONS


def cmd_synth(args: argparse.Namespace) -> int:
    """Write a deterministic synthetic benchmark."""
    from ..io import dataset_owner
    from ..synth import generate

    owner = dataset_owner(_SYNTH_FILES)
    c.check_out(args, args.out, kind="dir", owner=owner, writer="a peira dataset writer")
    bench = generate(args.cases, args.models, seed=args.seed, samples=args.samples)
    out = bench.write(args.out, force=args.force)
    print(
        f"{out}: {bench.cases.height} cases, {bench.variants.height} variants, "
        f"{bench.responses.height} responses of {bench.models.height} runs (seed {args.seed})"
    )
    return c.EXIT_OK


#: Importers of released results (docs/spec/data-model.md): each reads one or more
#: files into a dataset directory with its responses and the source's published figures.
RELEASED = {
    "textattack": "TextAttack --log-to-csv files (.csv, .csv.gz), one run each",
    "jailbreakbench": "JailbreakBench attack artifacts (.json, .json.gz), one run each",
    "table": "any CSV, TSV, JSONL or Parquet table of results with --map FIELD=COLUMN",
}


def _one_line(exc: Exception) -> str:
    """A validation error as one line: its first violation, with file, row and field."""
    from ..errors import ValidationError

    if isinstance(exc, ValidationError) and exc.failures.height:
        f = exc.failures.row(0, named=True)
        where = ", ".join(str(x) for x in (f"row {f['row']}" if f["row"] is not None else None,
                                           f["key"]) if x)  # fmt: skip
        more = f" (and {exc.failures.height - 1} more)" if exc.failures.height > 1 else ""
        return (
            f"{f['source']}: {where}: field {f['column']!r} = {f['value']} breaks "
            f"{f['check']}{more}"
        )
    return str(exc).splitlines()[0]


def _mapping(items: list[str]) -> dict[str, str]:
    """``--map FIELD=COLUMN`` (repeatable) or ``--map FILE.json`` → a mapping."""
    import json
    from pathlib import Path

    from ..errors import PeiraError

    out: dict[str, str] = {}
    for item in items:
        if "=" not in item and Path(item).is_file():
            data = json.loads(Path(item).read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
                raise PeiraError(f"--map {item}: a mapping file is a JSON object of strings")
            out.update(data)
            continue
        field, sep, column = item.partition("=")
        if not sep or not field or not column:
            raise PeiraError(f"--map {item!r}: expected FIELD=COLUMN (or a JSON mapping file)")
        out[field.strip()] = column.strip()
    if not out:
        raise PeiraError("import table needs --map FIELD=COLUMN (at least the gold label)")
    return out


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


def _import_released(args: argparse.Namespace) -> int:
    """Import released results into a dataset directory, whole or not at all (exit 2 on
    bad input, nothing written)."""
    from ..errors import DataFileError, InputFormatError, PeiraError, ValidationError
    from ..io import dataset_owner

    files = list(args.input)
    owner = dataset_owner(
        ("cases.parquet", "variants.parquet", "responses.parquet", "published.parquet")
    )
    c.check_out(args, args.out, kind="dir", inputs=files, owner=owner, writer="peira import")
    try:
        if args.kind == "textattack":
            from ..importers.textattack import read_textattack

            imported = read_textattack(
                files,
                run_ids=args.run or None,
                labels=_split(args.labels),
                family=args.family or "textattack",
            )
        elif args.kind == "jailbreakbench":
            from ..importers.jailbreakbench import read_jailbreakbench

            imported = read_jailbreakbench(files, judge=args.judge, run_ids=args.run or None)
        else:
            from ..importers.table import read_table

            if len(files) != 1:
                raise PeiraError("import table reads one file at a time")
            if args.run and len(args.run) != 1:
                raise PeiraError("import table takes one --run (or map run_id to a column)")
            imported = read_table(
                files[0],
                _mapping(args.map),
                format=args.table_format,
                layout=args.layout,
                run=args.run[0] if args.run else None,
                options=_split(args.options),
                arms=args.arms,
                threshold=args.threshold,
                verdict_source=args.verdict_source,
                family=args.family or "main",
            )
    except (InputFormatError, ValidationError) as exc:
        raise DataFileError(_one_line(exc)) from exc  # unreadable input: exit 2
    out = imported.write(args.out, overwrite=args.force)
    print(f"{out}: {imported.summary()}")
    for note in imported.notes:
        print(f"peira: note: {note}", file=sys.stderr)
    return c.EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Read a reference-format file; write a dataset or a response log."""
    import polars as pl

    from ..io import dataset_owner, write_dataset, write_parquet

    if args.kind in RELEASED:
        return _import_released(args)
    if len(args.input) != 1:
        from ..errors import PeiraError

        raise PeiraError(f"import {args.kind} reads one file")
    args.input = args.input[0]
    if args.kind == "cases":
        from ..importers.cases import read_cases_jsonl

        c.check_out(args, args.out, kind="dir", inputs=[args.input], owner=dataset_owner(),
                    writer="a peira dataset writer")  # fmt: skip
        ds = read_cases_jsonl(args.input)
        write_dataset(ds.cases, ds.variants, args.out, force=args.force)
        print(f"{args.out}: {ds.cases.height} cases, {ds.variants.height} variants")
        inferred = ds.cases.filter(pl.col("extras").str.contains("peira:inferred", literal=True))
        if inferred.height:
            ids = ", ".join(inferred["case_id"].head(10).to_list())
            print(
                f"peira: note: {inferred.height} score case(s) gave no positive_decision; the "
                f"reference default options[0] was assumed and marked in extras ({ids})",
                file=sys.stderr,
            )
        return c.EXIT_OK
    c.check_out(args, args.out, inputs=[args.input])
    if args.kind == "artifact":
        from ..importers.artifact import read_artifact

        df = read_artifact(args.input, run_id=args.run_id)
    else:
        from ..importers.transcript import read_transcript

        df = read_transcript(args.input, run_id=args.run_id)
    write_parquet(df, args.out)
    print(f"{args.out}: {df.height} responses")
    return c.EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """Write a dataset's cases in the reference JSONL format."""
    import polars as pl

    from ..importers.cases import write_cases_jsonl
    from ..io import Dataset, read_dataset

    c.check_out(args, args.out, datasets=[args.dataset])
    ds = read_dataset(args.dataset)
    if args.split != "all":
        keep = ds.cases.filter(pl.col("split") == args.split)
        ds = Dataset(keep, ds.variants.join(keep.select("case_id"), on="case_id", how="semi"))
    write_cases_jsonl(ds, args.out)
    print(f"{args.out}: {ds.cases.height} cases")
    return c.EXIT_OK


def register(sub: Any) -> None:
    """Add ``validate``, ``import``, ``export`` and ``synth`` to the subparsers ``sub``."""
    v = c.add_command(sub, "validate", cmd_validate, "report every violation of the data model")
    v.add_argument("dataset", help="dataset directory")
    v.add_argument("--responses", action="append", default=[], help="response log (repeatable)")
    v.add_argument(
        "--examples",
        type=c.int_range(0, 1_000_000),
        default=20,
        help="examples shown per check (0-1000000)",
    )
    v.add_argument("--failures-out", help="write all violations to this Parquet file")
    c.add_force_option(v)

    formats = "; ".join(f"{k}: {v}" for k, v in RELEASED.items())
    im = c.add_command(
        sub,
        "import",
        cmd_import,
        "import reference-format files, or released results into a dataset directory",
    )
    im.add_argument("kind", choices=("cases", "artifact", "transcript", *RELEASED), help=formats)
    im.add_argument("input", nargs="+", help="the file(s) to import")
    im.add_argument("--out", required=True)
    im.add_argument("--run-id", help="run_id for imported responses (artifact, transcript)")
    im.add_argument("--run", action="append", default=[], help="run id, one per file")
    c.add_force_option(im, "output file (or, in a peira dataset, cases/variants file)")
    im.add_argument("--family", default=None, help="family of every case (textattack, table)")
    im.add_argument("--labels", help="textattack: the options, comma-separated, in order")
    im.add_argument("--judge", default="jailbroken", help="jailbreakbench: the verdict field")
    im.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="table: a Peira field and its column (repeatable), or a JSON file",
    )
    im.add_argument(
        "--layout", choices=("wide", "long"), help="table: one row per pair or per call"
    )
    im.add_argument(
        "--table-format",
        choices=("csv", "tsv", "jsonl", "parquet"),
        help="table: the file format (default: from the suffix)",
    )
    im.add_argument("--options", help="table: the options of every case, comma-separated")
    im.add_argument(
        "--arms",
        choices=("both", "benign", "attacked"),
        help="table: what the runs observed (default: inferred)",
    )
    im.add_argument("--threshold", type=float, help="table: threshold of verdict_score")
    im.add_argument("--verdict-source", help="table: who gave the verdicts")  # fmt: skip

    ex = c.add_command(sub, "export", cmd_export, "export to reference formats")
    ex.add_argument("kind", choices=("cases",))
    ex.add_argument("dataset")
    ex.add_argument("--out", required=True)
    ex.add_argument(
        "--split",
        choices=("public", "all"),
        default="all",
        help="holdout cases are never exported; --split public exports the public ones",
    )
    c.add_force_option(ex)

    y = c.add_command(sub, "synth", cmd_synth, "write a deterministic synthetic benchmark")
    y.add_argument("--out", required=True)
    y.add_argument("--cases", type=c.int_range(1, 10_000_000), default=1200, help="1-10000000")
    y.add_argument("--models", type=c.int_range(1, 10_000), default=8, help="1-10000")
    y.add_argument("--seed", type=c.non_negative_int, default=0, help="generator seed")
    y.add_argument("--samples", type=c.int_range(1, 10_000), default=1, help="1-10000")
    c.add_force_option(y, "file in a peira dataset")
