"""TextAttack ``--log-to-csv`` results → a dataset, a response log and TextAttack's summary.

Each CSV file (or ``.csv.gz``) is one run (named by its stem unless run ids are given). Its
rows hold ``ground_truth_output, original_output, perturbed_output,
original_text, perturbed_text, result_type`` (and usually ``num_queries,
original_score, perturbed_score``); TextAttack marks the words an attack
changed with ``[[`` and ``]]``, which are removed to recover the model's
input. The mapping to docs/spec/data-model.md:

- a **case** per distinct (original sentence, ground truth) — files over the
  same sentences share cases, so attack methods or victims on one dataset
  compare and rank against each other; each case is its own scenario (no
  grouping in the source); options are the labels seen in the files (or
  those given);
- the **benign** response is the model's original prediction on the
  original sentence (``prompt`` = the sentence);
- the **attacked** response depends on ``result_type``: ``Successful`` — the
  prediction on the perturbed sentence (``prompt`` = that sentence);
  ``Failed`` — the search found no adversarial input: ``no_attack``, with
  the prediction on its last attempt; ``Skipped`` — the original prediction
  was already wrong, no attack ran: ``no_attack`` and no decision;
- ``num_queries`` and ``result_type`` are kept as columns, the scores and any
  other field in ``extras``.

TextAttack's own summary becomes the ``published`` table: "Original
accuracy" → ``benign_accuracy``, "Accuracy under attack" →
``accuracy_under_attack``, "Attack success rate" → ``asr``; Peira's values
equal them (TextAttack prints percentages rounded to two decimals). It is read
from the file named for the CSV (``summaries=[…]``, ``--summary FILE``), else
from the first file beside it, of :data:`SUMMARY_NAMES`, that holds one: the
``--log-to-txt`` log (``Number of successful attacks: 423`` lines), the console
output saved to a file (the same rows in TextAttack's ``| … | … |`` table) or
the ``--log-summary-to-json`` file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputFormatError
from ..schema import CASES_SCHEMA, PUBLISHED_SCHEMA, RESPONSES_SCHEMA
from ._bundle import Imported, case_key, input_files, sort_labels, variants_of

__all__ = ["RESULT_TYPES", "SUMMARY_NAMES", "read_summary", "read_textattack"]

PathLike = str | os.PathLike[str]

#: ``result_type`` values of TextAttack's CSV log and what each means here.
RESULT_TYPES = ("Successful", "Failed", "Skipped")
REQUIRED = (
    "ground_truth_output",
    "original_output",
    "perturbed_output",
    "original_text",
    "perturbed_text",
    "result_type",
)
_MARK = re.compile(r"\[\[|\]\]")
_SUMMARY = {
    "Number of successful attacks": "n_successful",
    "Number of failed attacks": "n_failed",
    "Number of skipped attacks": "n_skipped",
    "Original accuracy": "benign_accuracy",
    "Accuracy under attack": "accuracy_under_attack",
    "Attack success rate": "asr",
}
_SUMMARY_LINE = re.compile(
    r"^\|?\s*(" + "|".join(map(re.escape, _SUMMARY)) + r"):\s*\|?\s*([0-9.]+)(%?)\s*\|?$"
)
#: The rates of the summary (printed as percentages), as opposed to its counts.
_RATES = ("benign_accuracy", "accuracy_under_attack", "asr")

#: Where the summary of ``<stem>.csv`` is looked for beside it, in this order: the
#: ``--log-to-txt`` log of the same name (TextAttack's own ``<time>-log.csv`` and
#: ``<time>-log.txt``), the console output kept in a file, a summary of its own,
#: the ``--log-summary-to-json`` file.
SUMMARY_NAMES = (
    "{stem}.txt",
    "{stem}.log",
    "{stem}.out",
    "{stem}.summary.txt",
    "{stem}_summary.txt",
    "{stem}-summary.txt",
    "{stem}.summary.json",
    "{stem}_summary.json",
    "{stem}-summary.json",
    "{stem}.json",
)


def _label(col: str) -> pl.Expr:
    """A label as text; ``"1.0"`` (a float written by TextAttack) becomes ``"1"``
    (vectorised :func:`~peira.importers._bundle.label_text`)."""
    s = pl.col(col).str.strip_chars()
    f = s.cast(pl.Float64, strict=False)
    whole = f.is_not_null() & (f == f.floor()) & (f.abs() < 2.0**53)
    return pl.when(whole).then(f.cast(pl.Int64).cast(pl.String)).otherwise(s)


def read_summary(path: PathLike) -> dict[str, float] | None:
    """TextAttack's printed summary from a log, or None when it has none.

    Reads the ``--log-to-txt`` log (``Original accuracy: 82.92%`` lines), the
    console output (the same rows in ``| … | … |`` table cells) and the
    ``--log-summary-to-json`` file (``{"Attack Results": {"Original
    accuracy:": 82.92, …}}``). Keys: ``n_successful``, ``n_failed``,
    ``n_skipped`` (counts), ``benign_accuracy``, ``accuracy_under_attack``,
    ``asr`` (fractions; TextAttack prints percentages).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputFormatError(f"{p}: cannot read the TextAttack log: {exc}") from exc
    found = _json_summary(text)
    if found is None:
        found = {}
        for line in text.splitlines()[-60:]:
            m = _SUMMARY_LINE.match(line.strip())
            if m:
                value = float(m.group(2))
                found[_SUMMARY[m.group(1)]] = value / 100.0 if m.group(3) else value
    return found if "asr" in found or "benign_accuracy" in found else None


def _json_summary(text: str) -> dict[str, float] | None:
    """The summary of a ``--log-summary-to-json`` file (rows under their table's
    title, percentages as plain numbers), or None when ``text`` is not one."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, Mapping):
        return None
    tables = [data, *(v for v in data.values() if isinstance(v, Mapping))]
    found: dict[str, float] = {}
    for table in tables:
        for label, value in table.items():
            key = _SUMMARY.get(str(label).strip().removesuffix(":"))
            if key is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            found[key] = float(value) / 100.0 if key in _RATES else float(value)
    return found


def _summary_beside(csv: Path) -> tuple[Path, dict[str, float]] | None:
    """The first file of :data:`SUMMARY_NAMES` beside ``csv`` that holds a summary."""
    for name in SUMMARY_NAMES:
        candidate = csv.with_name(name.format(stem=_stem(csv)))
        if candidate.is_file():
            summary = read_summary(candidate)
            if summary is not None:
                return candidate, summary
    return None


def _named_summary(path: Path, csv: Path) -> dict[str, float]:
    """The summary in the file named for ``csv``: missing or without one is an error."""
    if not path.is_file():
        raise InputFormatError(f"{path}: no such file (the TextAttack summary named for {csv})")
    summary = read_summary(path)
    if summary is None:
        raise InputFormatError(
            f"{path}: no TextAttack summary in it (no 'Attack success rate' or 'Original "
            f"accuracy' row), named for {csv}"
        )
    return summary


def _stem(path: Path) -> str:
    """The file's name without ``.csv`` (or ``.csv.gz``): the default run id."""
    name = path.name
    for suffix in (".gz", ".csv", ".tsv"):
        name = name.removesuffix(suffix)
    return name


def _read_csv(path: Path) -> pl.DataFrame:
    if not path.exists():
        raise InputFormatError(f"{path}: no such file")
    if not path.is_file():
        raise InputFormatError(f"{path}: not a regular file (a directory or a device)")
    try:
        df = pl.read_csv(path, infer_schema=False, encoding="utf8")
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        why = " ".join(str(exc).split())[:200]
        kind = "gzip-compressed CSV" if path.name.endswith(".gz") else "CSV"
        raise InputFormatError(f"{path}: not a readable {kind} file (truncated?): {why}") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise InputFormatError(
            f"{path}: no column {missing[0]!r}; a TextAttack --log-to-csv file has "
            f"{', '.join(REQUIRED)}"
        )
    if df.height == 0:
        raise InputFormatError(f"{path}: no rows")
    for col in REQUIRED:
        nulls = df[col].is_null()
        if nulls.any():
            row = int(nulls.arg_true()[0]) + 1
            raise InputFormatError(f"{path}: row {row}: field {col!r} is empty")
    bad = df["result_type"].is_in(list(RESULT_TYPES)).not_()
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputFormatError(
            f"{path}: row {i + 1}: unknown result_type {df['result_type'][i]!r} "
            f"(known: {', '.join(RESULT_TYPES)})"
        )
    return df


def _check_consistency(path: Path, df: pl.DataFrame) -> None:
    """Each row's result_type agrees with its labels (untargeted classification)."""
    rt = pl.col("result_type")
    gt, o, p = pl.col("_gt"), pl.col("_orig"), pl.col("_pert")
    rules = [
        ((rt == "Skipped") & (o == gt), "result_type 'Skipped' but original_output is right"),
        ((rt != "Skipped") & (o != gt), "original_output is wrong but the row was attacked"),
        (
            (rt == "Successful") & (p == gt),
            "result_type 'Successful' but perturbed_output is right",
        ),
        ((rt == "Failed") & (p != gt), "result_type 'Failed' but perturbed_output is wrong"),
    ]
    for cond, what in rules:
        hit = df.select(cond.alias("x"))["x"]
        if hit.any():
            i = int(hit.arg_true()[0])
            raise InputFormatError(
                f"{path}: row {i + 1}: field 'result_type': {what} "
                f"(ground_truth_output={df['ground_truth_output'][i]!r}, "
                f"original_output={df['original_output'][i]!r}, "
                f"perturbed_output={df['perturbed_output'][i]!r})"
            )


def _check_labels_finite(path: Path, df: pl.DataFrame) -> None:
    """A label that reads as NaN or an infinite number (``nan``, ``1e400``) is no class."""
    for col in ("ground_truth_output", "original_output", "perturbed_output"):
        f = pl.col(col).str.strip_chars().cast(pl.Float64, strict=False)
        hit = df.select((f.is_nan() | f.is_infinite()).fill_null(False).alias("x"))["x"]
        if hit.any():
            i = int(hit.arg_true()[0])
            raise InputFormatError(
                f"{path}: row {i + 1}: field {col!r}: {df[col][i]!r} is not a class label "
                "(not a finite number)"
            )


def _drop_repeats(f: Path, df: pl.DataFrame, columns: list[str]) -> tuple[pl.DataFrame, str]:
    """Keep once each row that repeats an earlier row of the file in every column (a
    log concatenated with itself would otherwise count its attacks twice)."""
    first = df.select(pl.struct(columns).is_first_distinct()).to_series()
    if bool(first.all()):
        return df, ""
    rows = df.filter(first.not_())["_row"].to_list()
    shown = ", ".join(str(r) for r in rows[:5]) + (", …" if len(rows) > 5 else "")
    return df.filter(first), (
        f"{f.name}: {len(rows)} row(s) repeat an earlier row exactly (every column; rows "
        f"{shown}); each is kept once"
    )


def read_textattack(
    paths: Sequence[PathLike],
    *,
    run_ids: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    family: str = "textattack",
    dataset_version: str = "textattack",
    summaries: bool | Sequence[PathLike] = True,
) -> Imported:
    """Read TextAttack CSV logs (docs/spec/data-model.md; mapping in the module notes).

    Parameters
    ----------
    paths
        One or more ``--log-to-csv`` files; each is a run.
    run_ids
        Run ids, one per file (default: each file's stem).
    labels
        The options, in order (default: the labels seen in the files,
        sorted); a label outside them is an error.
    family
        The family of every case (default ``"textattack"``).
    dataset_version
        Written into every case.
    summaries
        Where TextAttack's summary of each CSV is (its figures become the
        ``published`` table): True (default) looks beside each CSV for the
        first of :data:`SUMMARY_NAMES` that holds one (``<stem>.txt``,
        ``<stem>.log``, ``<stem>_summary.json``, …; none found is a note);
        a list names one file per CSV (a missing file, or one without a
        summary, is an error); False reads none.

    Returns
    -------
    Imported
        Cases, variants (benign only: attacked inputs are per run), responses
        and the published summaries, validated.

    Raises
    ------
    InputFormatError
        A missing column, an empty field, an unknown ``result_type``, a row
        whose ``result_type`` contradicts its labels, a label outside
        ``labels``, two files with one run id, a named summary that is missing
        or holds none: the message names the file, the row and the field.
    """
    files = input_files(paths, run_ids, "TextAttack CSV file")
    named: list[Path] | None = None
    if not isinstance(summaries, bool):
        named = [Path(x) for x in summaries]
        if len(named) != len(files):
            raise InputFormatError(
                f"{len(named)} summary file(s) for {len(files)} CSV file(s); give one "
                "--summary per file"
            )
    names = list(run_ids) if run_ids is not None else [_stem(f) for f in files]
    seen: dict[str, Path] = {}
    for name, f in zip(names, files, strict=True):
        if name in seen:
            raise InputFormatError(
                f"{f}: run id {name!r} is also the run id of {seen[name]}; name the runs "
                "with --run (one per file)"
            )
        seen[name] = f
    frames = []
    notes: list[str] = []
    published: list[dict[str, Any]] = []
    for i, (run, f) in enumerate(zip(names, files, strict=True)):
        raw = _read_csv(f)
        df = raw.with_columns(
            _label("ground_truth_output").alias("_gt"),
            _label("original_output").alias("_orig"),
            _label("perturbed_output").alias("_pert"),
            pl.col("original_text").str.replace_all(_MARK.pattern, "").alias("_text"),
            pl.col("perturbed_text").str.replace_all(_MARK.pattern, "").alias("_ptext"),
            pl.int_range(1, pl.len() + 1).alias("_row"),
            pl.lit(run).alias("_run"),
            pl.lit(str(f)).alias("_file"),
        )
        _check_labels_finite(f, df)
        _check_consistency(f, df)
        df, note = _drop_repeats(f, df, raw.columns)
        if note:
            notes.append(note)
        # the k-th occurrence of a sentence with its label is the same case in every file
        df = df.with_columns(pl.int_range(pl.len()).over("_text", "_gt").alias("_k"))
        frames.append(df)
        if named is not None:
            published += _published(run, named[i], _named_summary(named[i], f), df)
        elif summaries:
            found = _summary_beside(f)
            if found is None:
                looked = ", ".join(n.format(stem=_stem(f)) for n in SUMMARY_NAMES[:3])
                notes.append(
                    f"{f.name}: no TextAttack summary beside it (looked for {looked}, …); "
                    "nothing to compare with (name one with --summary FILE)"
                )
            else:
                published += _published(run, found[0], found[1], df)
    allrows = pl.concat(frames, how="diagonal_relaxed")
    seen_labels = pl.concat([allrows["_gt"], allrows["_orig"], allrows["_pert"]]).to_list()
    if labels is None:
        options = sort_labels(seen_labels)
        notes.append(f"options inferred from the labels seen: {', '.join(options)}")
        if len(options) < 2:
            raise InputFormatError(
                f"{files[0]}: only one label ({options[0]!r}) occurs; give the options with --labels"
            )
    else:
        options = [str(x) for x in labels]
        for col, field_ in (("_gt", "ground_truth_output"), ("_orig", "original_output"),
                            ("_pert", "perturbed_output")):  # fmt: skip
            out = allrows.filter(pl.col(col).is_in(options).not_())
            if out.height:
                r = out.row(0, named=True)
                raise InputFormatError(
                    f"{r['_file']}: row {r['_row']}: field {field_!r}: label {r[col]!r} "
                    f"is not one of the options ({', '.join(options)})"
                )
    keys = allrows.select("_text", "_gt").unique(maintain_order=True)
    keys = keys.with_columns(
        pl.Series(
            "_base",
            ["ta-" + case_key(t, g) for t, g in keys.iter_rows()],
            dtype=pl.String,
        )
    )
    allrows = allrows.join(keys, on=["_text", "_gt"], how="left", maintain_order="left")
    allrows = allrows.with_columns(
        pl.when(pl.col("_k") == 0)
        .then(pl.col("_base"))
        .otherwise(pl.format("{}-{}", pl.col("_base"), pl.col("_k")))
        .alias("case_id")
    )
    cases = _cases(allrows, options, family, dataset_version)
    responses = _responses(allrows)
    prompts = allrows.select(
        "case_id", pl.lit("benign").alias("arm"), pl.col("_text").alias("prompt")
    )
    variants = variants_of(prompts.unique("case_id", keep="first", maintain_order=True), cases)
    shared = allrows.group_by("case_id").agg(pl.col("_run").n_unique().alias("n"))
    if len(files) > 1:
        notes.append(
            f"{shared.filter(pl.col('n') > 1).height} of {cases.height} cases occur in "
            "more than one file (one case per sentence and label)"
        )
    notes.append("no scenario grouping in the source: each case is its own cluster")
    pub = pl.DataFrame(published, schema=PUBLISHED_SCHEMA) if published else None
    return Imported(cases, variants, responses, pub, tuple(notes)).validated(
        ", ".join(str(f) for f in files[:3]) + (" …" if len(files) > 3 else "")
    )


def _published(run: str, txt: Path, s: dict[str, float], df: pl.DataFrame) -> list[dict[str, Any]]:
    counts = df["result_type"].value_counts()
    got = dict(zip(counts["result_type"], counts["count"], strict=True))
    n = df.height
    n_attacked = int(got.get("Successful", 0)) + int(got.get("Failed", 0))
    printed = tuple(
        None if x is None else int(x)
        for x in (s.get("n_successful"), s.get("n_failed"), s.get("n_skipped"))
    )
    mine = (got.get("Successful", 0), got.get("Failed", 0), got.get("Skipped", 0))
    if None not in printed and printed != tuple(mine):
        raise InputFormatError(
            f"{txt}: the summary counts successful/failed/skipped {printed} attacks but the CSV "
            f"holds {mine}; the two files are not of one run"
        )
    rows = []
    for metric, count in (
        ("benign_accuracy", n),
        ("accuracy_under_attack", n),
        ("asr", n_attacked),
    ):
        if metric in s:
            rows.append(
                {
                    "run_id": run,
                    "family": None,
                    "metric": metric,
                    "estimate": s[metric],
                    "stderr": None,
                    "n": count,
                    "source": f"textattack summary ({txt.name}, percent to 2 decimals)",
                }
            )
    return rows


def _cases(rows: pl.DataFrame, options: list[str], family: str, version: str) -> pl.DataFrame:
    first = rows.unique("case_id", keep="first", maintain_order=True)
    return first.select(
        "case_id",
        pl.col("case_id").alias("scenario_id"),
        pl.lit("public").alias("split"),
        pl.lit("main").alias("suite"),
        pl.lit(family).alias("family"),
        pl.lit("choice").alias("primitive"),
        pl.lit(None, dtype=pl.String).alias("severity"),
        pl.lit(options, dtype=pl.List(pl.String)).alias("options"),
        pl.col("_gt").alias("expected_decision"),
        pl.lit(None, dtype=pl.String).alias("positive_decision"),
        pl.lit(None, dtype=pl.String).alias("target_decision"),
        pl.lit(None, dtype=pl.Float64).alias("expected_score"),
        pl.lit(version).alias("dataset_version"),
        pl.lit(None, dtype=pl.String).alias("extras"),
    ).select([pl.col(c).cast(t) for c, t in CASES_SCHEMA.items()])


def _responses(rows: pl.DataFrame) -> pl.DataFrame:
    known = {*REQUIRED, "num_queries"}
    other = [c for c in rows.columns if not c.startswith("_") and c not in known and c != "case_id"]
    # other fields as one JSON object per row, keys sorted (canonical for string values)
    extras = pl.struct(sorted(other)).struct.json_encode() if other else pl.lit(None, pl.String)
    rows = rows.with_columns(extras.alias("_extras"))
    rt = pl.col("result_type")
    queries = (
        pl.col("num_queries").cast(pl.Float64, strict=False).cast(pl.Int64, strict=False)
        if ("num_queries" in rows.columns)
        else pl.lit(None, dtype=pl.Int64)
    )
    base: list[pl.Expr] = [
        pl.col("_run").alias("run_id"),
        pl.col("_run").alias("model"),
        pl.lit("").alias("model_version"),
        pl.col("case_id"),
    ]
    null_s = pl.lit(None, dtype=pl.String)
    benign = rows.select(
        *base,
        pl.lit("benign").alias("arm"),
        pl.col("_orig").alias("decision"),
        pl.col("_text").alias("prompt"),
        pl.lit(False).alias("no_attack"),
        null_s.alias("result_type"),
        pl.lit(None, dtype=pl.Int64).alias("num_queries"),
        null_s.alias("extras"),
    )
    attacked = rows.select(
        *base,
        pl.lit("attacked").alias("arm"),
        pl.when(rt == "Skipped").then(None).otherwise(pl.col("_pert")).alias("decision"),
        pl.when(rt == "Skipped").then(None).otherwise(pl.col("_ptext")).alias("prompt"),
        (rt != "Successful").alias("no_attack"),
        rt.alias("result_type"),
        queries.alias("num_queries"),
        pl.col("_extras").alias("extras"),
    )
    both = pl.concat([benign, attacked])
    core = {
        c: pl.lit(None, dtype=t).alias(c)
        for c, t in RESPONSES_SCHEMA.items()
        if c not in both.columns
    }
    core["sample"] = pl.lit(0, dtype=pl.Int32).alias("sample")
    core["abstained"] = pl.lit(False).alias("abstained")
    core["malformed"] = pl.lit(False).alias("malformed")
    out = both.with_columns(*core.values())
    return out.select(
        *[pl.col(c).cast(t) for c, t in RESPONSES_SCHEMA.items()],
        "prompt",
        "no_attack",
        "extras",
        "result_type",
        "num_queries",
    ).sort("run_id", "case_id", "arm", "sample")
