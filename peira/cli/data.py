"""``peira validate``, ``import``, ``export`` and ``synth``: data in and out."""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from . import _common as c

__all__ = ["cmd_export", "cmd_import", "cmd_synth", "cmd_validate", "register"]

_SYNTH_FILES = ("cases.parquet", "variants.parquet", "responses.parquet", "models.parquet")


def cmd_validate(args: argparse.Namespace) -> int:
    """Report every violation of the data model (exit 1 when there is one)."""
    from .. import api
    from ..io import write_parquet
    from ..schema import describe_failures

    if args.failures_out is not None:
        c.check_out(args, args.failures_out, datasets=[args.dataset], logs=args.responses)
    failures = api.validate(args.dataset, args.responses)
    if failures.height == 0:
        logs = f" and {len(args.responses)} response log(s)" if args.responses else ""
        print(f"{args.dataset}{logs}: valid")
        c.note_unfinished_runs(args.dataset)
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


def _mapping(items: list[str], *, allow_empty: bool = False) -> dict[str, str]:
    """``--map FIELD=COLUMN`` (repeatable) or ``--map FILE.json`` → a mapping."""
    import json
    from pathlib import Path

    from .._json import JSONLimitError, loads
    from ..errors import PeiraError

    out: dict[str, str] = {}

    def put(field: str, column: str, where: str) -> None:
        if field in out and out[field] != column:
            raise PeiraError(
                f"--map {where}: field {field!r} is mapped twice, to {out[field]!r} and "
                f"{column!r}; map each field once"
            )
        out[field] = column

    for item in items:
        if "=" not in item and Path(item).is_file():
            try:
                data = loads(Path(item).read_text(encoding="utf-8"))
            except UnicodeDecodeError as exc:
                raise PeiraError(f"--map {item}: not UTF-8 text (byte {exc.start})") from None
            except json.JSONDecodeError as exc:
                raise PeiraError(
                    f"--map {item}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
                ) from None
            except JSONLimitError as exc:
                raise PeiraError(f"--map {item}: {exc}") from None
            if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
                raise PeiraError(f"--map {item}: a mapping file is a JSON object of strings")
            for field, column in data.items():
                put(field, column, item)
            continue
        field, sep, column = item.partition("=")
        if not sep or not field or not column:
            raise PeiraError(f"--map {item!r}: expected FIELD=COLUMN (or a JSON mapping file)")
        put(field.strip(), column.strip(), repr(item))
    if not out and not allow_empty:
        raise PeiraError("import table needs --map FIELD=COLUMN (at least the gold label)")
    return out


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


def _import_released(args: argparse.Namespace, read: Any) -> int:
    """Import released results into a dataset directory, whole or not at all (exit 2 on
    bad input, nothing written). ``read`` is the importer's reader; this turns the
    command's options into its arguments."""
    from ..errors import DataFileError, InputFormatError, PeiraError, ValidationError
    from ..io import dataset_owner

    files = list(args.input)
    if args.summary and args.format != "textattack":
        return _usage(args, f"--summary is an option of 'peira import textattack', not of "
                            f"{args.format!r}")  # fmt: skip
    sources = [*files, *([args.published] if getattr(args, "published", None) else [])]
    sources += list(args.summary or [])
    owner = dataset_owner(
        ("cases.parquet", "variants.parquet", "responses.parquet", "published.parquet",
         "runs.parquet")
    )  # fmt: skip
    c.check_out(args, args.out, kind="dir", inputs=sources, owner=owner, writer="peira import")
    try:
        if args.format == "textattack":
            imported = read(
                files,
                run_ids=args.run or None,
                labels=_split(args.labels),
                family=args.family or "textattack",
                summaries=args.summary or True,
            )
        elif args.format == "jailbreakbench":
            imported = read(files, judge=args.judge or "jailbroken", run_ids=args.run or None)
        else:
            if len(files) != 1:
                raise PeiraError("import table reads one file at a time")
            if args.run and len(args.run) != 1:
                raise PeiraError("import table takes one --run (or map run_id to a column)")
            from ..importers.table import parse_constants, parse_values

            constants = parse_constants(args.constants)
            imported = read(
                files[0],
                _mapping(args.map, allow_empty=bool(constants)),
                format=args.table_format,
                records=args.records,
                constants=constants,
                values=parse_values(args.values),
                sample=args.sample,
                published=args.published,
                layout=args.layout,
                run=args.run[0] if args.run else None,
                options=_split(args.options),
                arms=args.arms,
                threshold=args.threshold,
                verdict_source=args.verdict_source,
                family=args.family or "main",
                judge=args.judge,
            )
    except (InputFormatError, ValidationError) as exc:
        raise DataFileError(_one_line(exc)) from exc  # unreadable input: exit 2
    out = imported.write(args.out, overwrite=args.force)
    print(f"{out}: {imported.summary()}")
    for note in [*imported.notes, *_uncomparable(imported.published)]:
        print(f"peira: note: {note}", file=sys.stderr)
    return c.EXIT_OK


def _uncomparable(published: Any) -> list[str]:
    """A note naming the published metrics Peira does not compute (shown beside nothing)."""
    from ..metrics.ratios import RATIO_METRICS

    if published is None:
        return []
    other = sorted(set(published["metric"].to_list()) - set(RATIO_METRICS))
    if not other:
        return []
    return [f"published metric(s) Peira does not compute, kept but shown beside nothing: "
            f"{', '.join(other)}"]  # fmt: skip


#: Formats read from several files into one directory (docs/spec/eval-logs.md).
EVAL_LOG_FORMATS = ("inspect", "lm-eval")
#: The options only one eval-log format takes (argparse ``dest`` → flag).
_EVAL_OPTIONS = {
    "inspect": {
        "scorer": "--scorer",
        "pair_by": "--pair-by",
        "arm_field": "--arm-field",
        "benign": "--benign",
        "attacked": "--attacked",
        "cluster_by": "--cluster-by",
        "score_key": "--score-key",
    },
    "lm-eval": {
        "metric": "--metric",
        "filter_name": "--filter",
        "attacked_task": "--attacked-task",
    },
}
#: The options only ``import table`` takes (argparse ``dest`` → flag).
_TABLE_ONLY = {
    "records": "--records",
    "constants": "--set",
    "values": "--values",
    "sample": "--sample",
    "published": "--published",
}
#: Options of the other formats an eval-log import does not take.
_NOT_EVAL = {
    "run_id": "--run-id",
    "run": "--run",
    "family": "--family",
    "labels": "--labels",
    "summary": "--summary",
    "map": "--map",
    "layout": "--layout",
    "table_format": "--table-format",
    "options": "--options",
    "arms": "--arms",
    "verdict_source": "--verdict-source",
    **_TABLE_ONLY,
}


def _usage(args: argparse.Namespace, message: str) -> int:
    print(f"peira {args.command_name}: error: {message}", file=sys.stderr)
    return c.EXIT_USAGE


def _eval_log_options_misused(args: argparse.Namespace) -> str | None:
    """A message when an option is given to a format that does not take it."""
    if args.judge is not None and args.format not in ("jailbreakbench", "table"):
        other = " (inspect: --scorer NAME)" if args.format == "inspect" else ""
        return (
            f"--judge is an option of 'peira import jailbreakbench' and 'peira import table', "
            f"not of {args.format!r}{other}"
        )
    if args.format != "table":
        for dest, flag in _TABLE_ONLY.items():
            if getattr(args, dest) not in (None, []):
                return f"{flag} is an option of 'peira import table', not of {args.format!r}"
    takes = _EVAL_OPTIONS.get(args.format, {})
    for fmt, options in _EVAL_OPTIONS.items():
        for dest, flag in options.items():
            if dest not in takes and getattr(args, dest) not in (None, []):
                return f"{flag} is an option of 'peira import {fmt}', not of {args.format!r}"
    if args.format in EVAL_LOG_FORMATS:
        for dest, flag in _NOT_EVAL.items():
            if getattr(args, dest) not in (None, []):
                return f"{flag} does not apply to {args.format!r} (docs/spec/eval-logs.md)"
    return None


def _import_eval_logs(args: argparse.Namespace, read: Any) -> int:
    """``peira import inspect|lm-eval``: eval logs → one dataset directory (exit 2 on bad
    input, naming file, record and field; nothing written)."""
    from ..errors import DataFileError, InputFormatError, ValidationError

    if len(args.benign) != len(args.attacked):
        return _usage(args, "--benign and --attacked go in pairs (one attacked log per benign)")
    if not args.input and not args.benign:
        return _usage(args, f"no input: give the {args.format} logs to import")
    from ..io import dataset_owner

    owner = dataset_owner(
        ("cases.parquet", "variants.parquet", "responses.parquet", "published.parquet",
         "runs.parquet")
    )  # fmt: skip
    inputs = [*args.input, *args.benign, *args.attacked]
    c.check_out(args, args.out, kind="dir", logs=inputs, owner=owner, writer="peira import")
    threshold = 1.0 if args.threshold is None else args.threshold
    try:
        if args.format == "inspect":
            imported = read(
                args.input,
                scorer=args.scorer,
                pair_by=args.pair_by,
                arm_field=args.arm_field,
                pairs=list(zip(args.benign, args.attacked, strict=True)),
                threshold=threshold,
                cluster_by=args.cluster_by,
                score_key=args.score_key,
            )
        else:
            twins = {}
            for spec in args.attacked_task:
                clean, sep, perturbed = spec.partition("=")
                if not sep or not clean or not perturbed:
                    return _usage(args, f"--attacked-task takes CLEAN=PERTURBED, not {spec!r}")
                twins[clean] = perturbed
            metric = _split(args.metric)
            imported = read(
                args.input,
                metric=metric,
                filter_name=args.filter_name,
                threshold=threshold,
                attacked_tasks=twins,
            )
    except (InputFormatError, ValidationError) as exc:
        raise DataFileError(_one_line(exc)) from exc  # unreadable input: exit 2
    out = imported.write(args.out, overwrite=args.force)
    print(f"{out}: {imported.summary()}")
    runs = imported.responses.group_by("run_id", "model", "arms").len().sort("run_id").iter_rows()
    for run_id, model, arms, n in runs:
        print(f"  {run_id}  {model}  arms={arms}  {n} answers")
    return c.EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Read files in a registered format; write a dataset, a response log, or a dataset
    directory with its responses (released results, eval logs)."""
    import polars as pl

    from ..importers import IMPORTERS
    from ..io import dataset_owner, write_dataset, write_parquet

    misused = _eval_log_options_misused(args)
    if misused is not None:
        return _usage(args, misused)
    imp = IMPORTERS[args.format]
    if args.format in EVAL_LOG_FORMATS:
        return _import_eval_logs(args, imp.reader())
    if not args.input:
        return _usage(args, f"import {args.format} needs the file(s) to read")
    if imp.produces == "benchmark":
        return _import_released(args, imp.reader())
    if len(args.input) != 1:
        return _usage(args, f"{args.format!r} reads one INPUT file, got {len(args.input)}")
    path = args.input[0]
    if imp.produces == "dataset":
        c.check_out(args, args.out, kind="dir", inputs=[path], owner=dataset_owner(),
                    writer="a peira dataset writer")  # fmt: skip
        result = imp.read(path, run_id=args.run_id)
        write_dataset(result.cases, result.variants, args.out, force=args.force)
        print(f"{args.out}: {result.cases.height} cases, {result.variants.height} variants")
        cases = result.cases
        inferred = cases.filter(pl.col("extras").str.contains("peira:inferred", literal=True))
        if inferred.height:
            ids = ", ".join(inferred["case_id"].head(10).to_list())
            print(
                f"peira: note: {inferred.height} score case(s) gave no positive_decision; the "
                f"reference default options[0] was assumed and marked in extras ({ids})",
                file=sys.stderr,
            )
        return c.EXIT_OK
    c.check_out(args, args.out, inputs=[path])
    result = imp.read(path, run_id=args.run_id)
    write_parquet(result, args.out)
    print(f"{args.out}: {result.height} responses")
    return c.EXIT_OK


def _formats() -> tuple[str, ...]:
    """The registered importer names (entry points are listed on first use only)."""
    from ..importers import IMPORTERS

    return IMPORTERS.names()


#: Worked examples of ``peira import table`` (shown by ``peira import table --help``).
TABLE_EXAMPLES = """\
import table, one worked example per option (docs/spec/formats.md):
  --map FIELD=COLUMN     the column of each Peira field (repeatable, or a JSON file):
      peira import table results.csv --map case_id=id --map expected=label \\
          --map benign_decision=pred --map attacked_decision=adv_pred --out DIR
  --records KEY          a .json object holding the records (an array of objects or an
                         object of arrays) under KEY; a top-level array needs no option:
      peira import table evaluations.json --records completions ... --out DIR
  --set FIELD=VALUE      a field with the same value on every row (repeatable):
      --set expected=refuse --set run_id=llama-2-7b
  --values FIELD=RAW:VALUE,...  read a column's raw values through a table; a raw value
                         left unmapped is an error naming it, its row and column:
      --map attacked_correct=jailbroken --values attacked_correct=1:false,0:true
      --map attacked_decision=is_jailbreak --values attacked_decision=1:comply,0:refuse
  --map verdict:NAME=COLUMN  judge NAME's verdicts (repeatable; NAME gold: human labels),
                         kept in judgements.parquet; an empty cell is no verdict, the text
                         undetermined an undetermined one; --values verdict=... reads every
                         judge's column, --judge NAME (default: the first but gold) gives
                         the attacked decision where no decision column is mapped:
      --map verdict:llama3=llama3_cf --map verdict:gold=human_majority \\
          --values verdict=1:comply,0:refuse --set expected=refuse --set target=comply
  --sample auto          number the repeated rows of a (run, case, arm) 0, 1, ... in file
                         order (sampled generations without a sample column):
      --map case_id=prompt_id --sample auto
  --published FILE       the source's own figures, CSV or JSON with columns metric, value
                         and optionally n, family, stderr, run_id; `peira score` shows them
                         beside Peira's intervals:
      --published published.csv      # metric,value,n,family  /  asr,0.09,100,
  --options A,B  --arms benign|attacked|both  --layout wide|long  --threshold X
                         the options of every case, the arms observed, one row per pair
                         (wide) or per call (long, with --map arm=COLUMN), a verdict score
                         from X on counts as correct
"""


class _ImportParser(c.ImportHelpParser):
    """Lists the registered formats below the options of ``peira import --help``."""

    #: More help of one format, shown by ``peira import FORMAT --help``.
    format_notes: ClassVar[dict[str, str]] = {"table": TABLE_EXAMPLES}

    @property
    def epilog(self) -> str:
        from ..importers import IMPORTERS

        width = max(len(name) for name in IMPORTERS)
        rows = [
            f"  {imp.name:<{width}}  {imp.description} ({', '.join(imp.suffixes)})"
            for imp in IMPORTERS.values()
        ]
        return (
            "formats:\n" + "\n".join(rows) + "\n\neval logs (docs/spec/eval-logs.md):\n"
            "  peira import inspect LOG... --out DIR      Inspect .eval/.json logs\n"
            "  peira import lm-eval DIR|FILE... --out DIR lm-eval --log_samples outputs\n"
            "Without pairing options every run is clean-only (no attacked arm).\n\n"
            + TABLE_EXAMPLES
        )

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        pass


def cmd_export(args: argparse.Namespace) -> int:
    """Write a dataset's cases in the reference JSONL format."""
    import polars as pl

    from ..errors import PeiraError
    from ..importers.cases import write_cases_jsonl
    from ..io import Dataset, read_dataset

    c.check_out(args, args.out, datasets=[args.dataset])
    ds = read_dataset(args.dataset)
    if args.split == "all":
        n_hold = ds.cases.filter(pl.col("split") == "holdout").height
        if n_hold:
            raise PeiraError(
                f"{args.dataset}: {n_hold} holdout case(s); holdout cases are never exported "
                "(leave out --split all: the public split is the default)"
            )
    else:
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

    im = c.add_command(
        sub,
        "import",
        cmd_import,
        "import files in another format: a dataset, a response log, or released results",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parser_class=_ImportParser,
    )
    im.add_argument(
        "format",
        choices=c.LazyChoices(_formats),
        metavar="FORMAT",
        help="see below; peira import FORMAT --help: that format's options and examples",
    )
    im.add_argument("input", nargs="*", metavar="INPUT", help="the file(s) to read")
    im.add_argument(
        "--out", required=True, help="dataset directory or Parquet log to write (see below)"
    )
    im.add_argument("--run-id", help="run_id for imported responses (artifact, transcript)")
    im.add_argument("--run", action="append", default=[], help="run id, one per file")
    c.add_force_option(im, "output file (or, in a peira dataset, cases/variants file)")
    im.add_argument("--family", default=None, help="family of every case (textattack, table)")
    im.add_argument("--labels", help="textattack: the options, comma-separated, in order")
    im.add_argument(
        "--summary",
        action="append",
        default=[],
        metavar="FILE",
        help="textattack: the attack summary of each CSV, one per file, in order (default: "
        "looked for beside it: <stem>.txt, <stem>.log, <stem>_summary.json, …)",
    )
    im.add_argument(
        "--judge",
        metavar="NAME",
        help="jailbreakbench: the verdict field (default jailbroken); table: the judge "
        "(--map verdict:NAME=COLUMN) whose verdicts are the decisions (default: the first "
        "mapped but gold)",
    )
    im.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="table: a Peira field and its column (repeatable), or a JSON file",
    )
    im.add_argument(
        "--layout",
        choices=("wide", "long"),
        help="table: wide (one row per pair: benign_* and attacked_* fields) or long (one row "
        "per call, with --map arm=COLUMN)",
    )
    im.add_argument(
        "--table-format",
        choices=("csv", "tsv", "json", "jsonl", "parquet"),
        help="table: the file format, csv, tsv (tab-separated), json (an array of objects or an "
        "object of arrays), jsonl (one object per line) or parquet (default: from the suffix)",
    )
    im.add_argument("--options", help="table: the options of every case, comma-separated")
    im.add_argument(
        "--arms",
        choices=("both", "benign", "attacked"),
        help="table: what the runs observed, both arms, benign only (clean-only runs) or "
        "attacked only (benign answers unobserved) (default: inferred per run)",
    )
    im.add_argument(
        "--threshold",
        type=c.finite_number,
        help="table, inspect, lm-eval: a verdict score from this on counts as correct "
        "(eval logs: default 1)",
    )
    im.add_argument("--verdict-source", help="table: who gave the verdicts")  # fmt: skip
    im.add_argument(
        "--records", metavar="KEY", help="table: the key of a .json object holding the records"
    )
    im.add_argument(
        "--set",
        dest="constants",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="table: a field with this value on every row (repeatable)",
    )
    im.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="FIELD=RAW:VALUE,...",
        help="table: read a mapped column's raw values through this table (repeatable)",
    )
    im.add_argument(
        "--sample",
        choices=("auto",),
        help="table: auto numbers the repeated rows of a (run, case, arm) in file order",
    )
    im.add_argument(
        "--published",
        metavar="FILE",
        help="table: the source's figures (CSV/JSON: metric, value, optional n, family)",
    )
    ev = im.add_argument_group("eval logs (inspect, lm-eval)")
    ev.add_argument("--scorer", help="inspect: the scorer whose value is the verdict")
    ev.add_argument(
        "--score-key",
        metavar="KEY",
        help="inspect: the entry of a dictionary-valued score that is the verdict "
        "(AgentHarm: score or refusal)",
    )
    ev.add_argument(
        "--pair-by",
        metavar="FIELD",
        help="inspect: metadata field shared by the benign and attacked samples of a case",
    )
    ev.add_argument(
        "--arm-field", metavar="FIELD", help="inspect: metadata field saying benign or attacked"
    )
    ev.add_argument(
        "--benign", action="append", default=[], metavar="LOG", help="inspect: a benign log"
    )
    ev.add_argument(
        "--attacked",
        action="append",
        default=[],
        metavar="LOG",
        help="inspect: the attacked log of the same model (pairs with the --benign before it)",
    )
    ev.add_argument(
        "--cluster-by", metavar="FIELD", help="inspect: metadata field grouping samples (clusters)"
    )
    ev.add_argument(
        "--metric", help="lm-eval: the verdict metric(s), in order of preference (acc,exact_match)"
    )
    ev.add_argument(
        "--filter", dest="filter_name", metavar="NAME", help="lm-eval: the filter to read"
    )
    ev.add_argument(
        "--attacked-task",
        action="append",
        default=[],
        metavar="CLEAN=PERTURBED",
        help="lm-eval: a perturbed twin task on the same documents is the attacked arm",
    )

    ex = c.add_command(sub, "export", cmd_export, "export to reference formats")
    ex.add_argument("kind", choices=("cases",), help="cases: the cases, as reference JSONL")
    ex.add_argument("dataset")
    ex.add_argument("--out", required=True)
    ex.add_argument(
        "--split",
        choices=("public", "all"),
        default="public",
        help="public (default): the public cases; all: every case, refused when the "
        "dataset has holdout cases (they are never exported)",
    )
    c.add_force_option(ex)

    y = c.add_command(sub, "synth", cmd_synth, "write a deterministic synthetic benchmark")
    y.add_argument("--out", required=True)
    y.add_argument("--cases", type=c.int_range(1, 10_000_000), default=1200, help="1-10000000")
    y.add_argument("--models", type=c.int_range(1, 10_000), default=8, help="1-10000")
    y.add_argument("--seed", type=c.non_negative_int, default=0, help="generator seed")
    y.add_argument("--samples", type=c.int_range(1, 10_000), default=1, help="1-10000")
    c.add_force_option(y, "file in a peira dataset")
