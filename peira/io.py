"""Reading and writing Peira tables as Parquet.

A *dataset* is a directory holding ``cases.parquet`` and ``variants.parquet``.
A *response log* is a Parquet file, a directory of part files (hive
partitions such as ``run_id=m1/part-0.parquet`` allowed) or a glob pattern.
Every read checks that each file exists, is non-empty and is Parquet before
any data is touched; every write is atomic (a temporary file in the target
directory, then a rename), so a failure leaves no half-written output.
What may be written where (never over an input, never over what Peira did not
make) is decided in one place, :mod:`peira._writes`, re-exported here.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ._writes import (
    PARQUET_STAMP,
    DirOwner,
    atomic_dir,
    atomic_path,
    check_output,
    is_peira_file,
    output_lock,
)
from .errors import DataFileError, ValidationError
from .schema import (
    collect_failures,
    failures_frame,
    judgement_failures,
    raise_if,
    shape_broken,
    validate_cases,
    validate_judgements,
    validate_runs,
    validate_variants,
)

__all__ = [
    "DATASET_FILES",
    "JUDGEMENTS_FILE",
    "RUNS_FILE",
    "Dataset",
    "atomic_dir",
    "atomic_path",
    "check_output",
    "dataset_judgements",
    "dataset_owner",
    "demo_dir",
    "hive_values",
    "in_split",
    "incomplete_pairs",
    "is_peira_file",
    "memory_bytes",
    "output_lock",
    "parquet_files",
    "read_dataset",
    "read_judgements",
    "read_parquet",
    "read_responses",
    "read_runs",
    "run_notes",
    "scan_responses",
    "write_dataset",
    "write_parquet",
]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Dataset:
    """A validated benchmark: the ``cases`` and ``variants`` tables (and, for a dataset
    held in memory, such as an importer's result, its ``judgements`` table; a dataset
    read from a directory reads ``judgements.parquet`` there when asked:
    :func:`dataset_judgements`)."""

    cases: pl.DataFrame
    variants: pl.DataFrame
    path: Path | None = None
    judgements: pl.DataFrame | None = None

    @property
    def version(self) -> str:
        """The dataset_version shared by the cases (joined with '+' if several)."""
        return "+".join(self.cases["dataset_version"].unique().sort().to_list())


def demo_dir() -> Path:
    """The bundled demo data: ``data/demo`` of the source tree (or of the working directory).

    Raises
    ------
    DataFileError
        When neither holds ``data/demo/cases.parquet`` (an installed wheel
        without a clone).
    """
    for base in (Path(__file__).resolve().parent.parent, Path.cwd()):
        d = base / "data" / "demo"
        if (d / "cases.parquet").exists():
            return d
    raise DataFileError(
        "no --dataset given and the bundled demo data (data/demo) were not found; "
        "run from a clone of the repository or pass --dataset and --responses"
    )


# ---------------------------------------------------------------- writing


def write_parquet(df: pl.DataFrame, path: PathLike) -> Path:
    """Write ``df`` to ``path`` atomically (zstd, statistics); return the path.

    The file carries Peira's stamp in its key-value metadata (so a later
    command may replace it; see :func:`check_output`). The same frame always
    gives the same bytes. Write failures raise :class:`~peira.errors.OutputError`.
    """
    with atomic_path(path) as tmp:
        df.write_parquet(
            tmp, compression="zstd", statistics=True, metadata={PARQUET_STAMP: "peira"}
        )
    return Path(path)


DATASET_FILES = ("cases.parquet", "variants.parquet")


def dataset_owner(files: Sequence[str] = DATASET_FILES) -> DirOwner:
    """Recognise a Peira dataset directory: its ``cases.parquet`` carries Peira's stamp.

    The owner returns which of ``files`` Peira wrote there (those a new
    write replaces); every other entry of the directory is kept.
    """

    def owner(d: Path) -> set[str] | None:
        if not is_peira_file(d / "cases.parquet"):
            return None
        return {f for f in files if is_peira_file(d / f)}

    return owner


def write_dataset(
    cases: pl.DataFrame,
    variants: pl.DataFrame,
    directory: PathLike,
    *,
    extra: Mapping[str, pl.DataFrame] | None = None,
    force: bool = False,
) -> Dataset:
    """Validate and write a dataset directory (``cases.parquet``, ``variants.parquet``).

    Both tables are validated before anything is written. Row order is kept
    as given (an imported file keeps its line order), so the same tables
    always give the same bytes. The directory appears whole or not at all:
    the files are staged beside it and swapped in at once (see
    :func:`atomic_dir`); ``extra`` (file name → frame, e.g.
    ``responses.parquet``) joins the same swap. An existing directory must be
    empty or a Peira dataset; its other files are kept.
    """
    d = Path(directory)
    cases = validate_cases(cases, source=str(d / "cases.parquet"))
    variants = validate_variants(variants, cases=cases, source=str(d / "variants.parquet"))
    tables = {"cases.parquet": cases, "variants.parquet": variants, **(extra or {})}
    owner = dataset_owner(tuple(tables))
    with atomic_dir(d, owner=owner, force=force, writer="a peira dataset writer") as tmp:
        for name, frame in tables.items():
            write_parquet(frame, tmp / name)
    return Dataset(cases, variants, d)


# ---------------------------------------------------------------- reading


def _check_parquet(path: Path, *, whole: bool = False) -> None:
    """Check a file's footer before any data is read: present, not truncated, and
    claiming no more rows than this machine could hold (per row group; with
    ``whole``, for the whole file, which an eager read decodes at once)."""
    if not path.exists():
        raise DataFileError(f"{path}: no such file")
    if path.is_file() and path.stat().st_size == 0:
        raise DataFileError(f"{path}: empty file (0 bytes); expected Parquet")
    try:
        pl.read_parquet_schema(path)  # the footer: a truncated file has none
    except Exception as exc:  # polars raises several types for corrupt files
        raise DataFileError(
            f"{path}: not a readable Parquet file (truncated or corrupt?): {exc}"
        ) from exc
    if path.is_file():
        _check_claims(path, whole=whole)


def memory_bytes() -> int:
    """This machine's physical memory in bytes (0 when the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def _check_claims(path: Path, *, whole: bool) -> None:
    """Refuse a footer whose row counts would need more memory than the machine has
    (a corrupt footer can claim 2^31 rows in a 1 KB file; decoding would abort)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except Exception as exc:
        raise DataFileError(
            f"{path}: not a readable Parquet file (truncated or corrupt?): {exc}"
        ) from exc
    limit = memory_bytes()
    if limit <= 0:
        return
    width = 8 * max(1, meta.num_columns)  # bytes a row takes once decoded, at the least
    counts = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    if whole:
        counts.append(meta.num_rows)
    worst = max(counts, default=0)
    if worst * width > limit:
        raise DataFileError(
            f"{path}: the footer claims {worst:,} rows of {meta.num_columns} column(s) in a "
            f"file of {path.stat().st_size:,} bytes; decoding them needs at least "
            f"{worst * width / 2**30:,.1f} GiB, more than this machine's "
            f"{limit / 2**30:,.1f} GiB (a corrupt footer, or a file to split)"
        )


def _is_data_file(root: Path, f: Path) -> bool:
    """Not hidden (no dot-name on the way: temporary or litter files), not a run checkpoint."""
    rel = f.relative_to(root).parts
    if any(part.startswith(".") for part in rel):
        return False
    return not any(
        part.endswith(".parts") and (root.joinpath(*rel[: i + 1]) / "manifest.json").is_file()
        for i, part in enumerate(rel[:-1])
    )


def parquet_files(path: PathLike, *, whole: bool = False) -> list[Path]:
    """The Parquet files a path denotes: a file, a directory (recursive) or a glob.
    With ``whole``, each file is read at once, so all its rows (not only each row
    group's) must fit in this machine's memory.

    Raises
    ------
    DataFileError
        If nothing matches or a matched file is empty or not Parquet.
    """
    p = Path(path)
    s = str(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.parquet") if _is_data_file(p, f))
        if not files:
            raise DataFileError(f"{p}: directory holds no .parquet files")
    elif p.exists():
        files = [p]
    elif glob.has_magic(s):
        files = sorted(Path(f) for f in glob.glob(s, recursive=True))
        if not files:
            raise DataFileError(f"{s}: glob matches no files")
    else:
        raise DataFileError(f"{s}: no such file or directory")
    for f in files:
        _check_parquet(f, whole=whole)
    return files


def read_parquet(path: PathLike) -> pl.DataFrame:
    """Read one Parquet file with a clear error if it is missing or corrupt."""
    p = Path(path)
    _check_parquet(p, whole=True)
    try:
        return pl.read_parquet(p)
    except Exception as exc:
        raise DataFileError(f"{p}: cannot read Parquet data: {exc}") from exc


def scan_responses(path: PathLike) -> pl.LazyFrame:
    """Lazily scan a response log (file, directory with hive partitions, or glob).

    Files are checked eagerly; values are not validated (use :func:`read_responses`).
    """
    files = parquet_files(path)
    p = Path(path)
    if p.is_dir():
        frames, disagree = _partition_frames(p, files)
        raise_if(disagree, str(path))  # a partition never relabels a stored column
        return pl.concat(frames, how="diagonal_relaxed").drop("_file")
    return pl.scan_parquet([str(f) for f in files])


def read_responses(
    path: PathLike,
    *,
    cases: pl.DataFrame | None = None,
    validate: bool = True,
) -> pl.DataFrame:
    """Read and validate a response log.

    Parameters
    ----------
    path
        A Parquet file, a directory of part files or a glob.
    cases
        If given, every response must refer to a known case with a decision
        inside its options.
    validate
        Run every value rule of docs/spec/data-model.md#responses (default). Violations name the part
        file and the row within it.

    Raises
    ------
    DataFileError
        Missing, empty or corrupt files, or a log with no rows.
    ValidationError
        Every rule violation, listed.
    """
    files = parquet_files(path, whole=True)  # read whole: each file's rows at once
    p = Path(path)
    try:
        if p.is_dir():
            df, disagree = _read_partitioned(p, files)
        else:
            df = pl.scan_parquet([str(f) for f in files], include_file_paths="_file").collect()
            disagree = failures_frame([])
    except Exception as exc:
        why = " ".join(str(exc).split())[:300]
        raise DataFileError(f"{path}: cannot read response log: {why}") from None
    if df.height == 0:
        raise DataFileError(f"{path}: response log has no rows")
    locations = df.select(
        pl.col("_file").alias("file"),
        pl.int_range(pl.len()).over("_file").cast(pl.Int64).alias("row"),
    )
    df = df.drop("_file")
    if not validate:
        raise_if(disagree, str(path))
        return df
    out, failures = collect_failures(
        df, "responses", source=str(path), cases=cases, locations=locations
    )
    raise_if(pl.concat([disagree, failures]), str(path))
    return out


def hive_values(root: Path, file: Path) -> dict[str, str]:
    """``key=value`` directories between ``root`` and ``file`` (values percent-decoded)."""
    from urllib.parse import unquote

    out: dict[str, str] = {}
    for part in file.relative_to(root).parts[:-1]:
        key, sep, value = part.partition("=")
        if sep and key:
            out[unquote(key)] = unquote(value)
    return out


def _read_partitioned(root: Path, files: list[Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read a directory log: hive values become columns; a stored column that
    disagrees with its partition value is a failure (check ``partition_agrees``),
    never silently relabelled."""
    frames, failures = _partition_frames(root, files)
    return pl.concat(frames, how="diagonal_relaxed").collect(), failures


def _partition_frames(root: Path, files: list[Path]) -> tuple[list[pl.LazyFrame], pl.DataFrame]:
    """One lazy frame per file (hive columns added, ``_file`` its path) and the
    failures of stored columns that disagree with their partition values."""
    from .schema import RESPONSES_SCHEMA

    frames: list[pl.LazyFrame] = []
    checks: list[tuple[Path, str, str]] = []
    for f in files:
        lf = pl.scan_parquet(f)
        names = set(lf.collect_schema().names())
        add = []
        for key, value in hive_values(root, f).items():
            if key in names:
                checks.append((f, key, value))
                continue
            dtype = RESPONSES_SCHEMA.get(key, pl.String())
            add.append(pl.lit(value).cast(dtype, strict=False).alias(key))
        frames.append(lf.with_columns(*add, pl.lit(str(f)).alias("_file")))
    rows = []
    for f, key, value in checks:
        stored = pl.read_parquet(f, columns=[key])[key]
        bad = (stored.cast(pl.String) != value) | stored.is_null()
        if bad.any():
            first = int(bad.arg_true()[0])
            rows.append(
                {
                    "table": "responses",
                    "source": str(f),
                    "row": first,
                    "key": f"partition {key}={value}",
                    "column": key,
                    "check": "partition_agrees",
                    "value": f"{stored[first]!r} stored, {value!r} in the directory name "
                    f"({int(bad.sum())} row(s))",
                }
            )
    return frames, failures_frame(rows)


def read_dataset(directory: PathLike) -> Dataset:
    """Read and validate a dataset directory (``cases.parquet`` + ``variants.parquet``)."""
    d = Path(directory)
    if not d.is_dir():
        raise DataFileError(
            f"{d}: not a dataset directory (expected cases.parquet, variants.parquet)"
        )
    cases_path, variants_path = d / "cases.parquet", d / "variants.parquet"
    cases_raw = read_parquet(cases_path)
    if cases_raw.height == 0:
        raise DataFileError(f"{cases_path}: no cases")
    variants_raw = read_parquet(variants_path)
    cases = validate_cases(cases_raw, source=str(cases_path))
    variants = validate_variants(variants_raw, cases=cases, source=str(variants_path))
    return Dataset(cases, variants, d)


#: The file beside a dataset that lists the runs its source reports as unfinished.
RUNS_FILE = "runs.parquet"


def read_runs(directory: PathLike) -> pl.DataFrame | None:
    """The validated ``runs.parquet`` of a dataset directory, or None without one.

    One row per run whose source reports it unfinished or incomplete (an
    Inspect log cancelled or stopped by an error, fewer samples than the
    dataset it declares): ``run_id``, the source's ``status``, the ``samples``
    it holds, the count it ``planned`` and the ``source`` file
    (docs/spec/data-model.md, ``runs``).
    """
    p = Path(directory) / RUNS_FILE
    if not p.is_file():
        return None
    return validate_runs(read_parquet(p), source=str(p))


def run_notes(runs: pl.DataFrame | None) -> list[str]:
    """One line per unfinished run: ``run <id>: partial: 134 of 792 samples (…)``.

    >>> import polars as pl
    >>> run_notes(pl.DataFrame({"run_id": ["m:t@1"], "status": ["cancelled"],
    ...     "samples": [134], "planned": [792], "source": ["log.eval"]}))
    ['run m:t@1: partial: 134 of 792 samples (status cancelled, log.eval)']
    """
    if runs is None:
        return []
    lines = []
    for r in runs.sort("run_id", "source").iter_rows(named=True):
        held = r["samples"] if r["planned"] is None else f"{r['samples']} of {r['planned']}"
        lines.append(
            f"run {r['run_id']}: partial: {held} samples (status {r['status']}, {r['source']})"
        )
    return lines


#: The file beside a dataset that holds each judge's verdict on the responses.
JUDGEMENTS_FILE = "judgements.parquet"


def read_judgements(
    directory: PathLike,
    *,
    cases: pl.DataFrame | None = None,
    responses: pl.DataFrame | None = None,
) -> pl.DataFrame | None:
    """The validated ``judgements.parquet`` of a dataset directory, or None without one.

    One row per (run_id, case_id, arm, sample, judge): the verdict of the named
    judge on that response, one of the case's options or ``undetermined``
    (docs/spec/data-model.md#judgements). The verdicts are checked against
    ``cases`` (default: the directory's ``cases.parquet``) and, given the
    ``responses``, each must judge a response row that exists.

    Raises
    ------
    ValidationError
        Every violation, with its file, row, key, column and value.
    """
    d = Path(directory)
    p = d / JUDGEMENTS_FILE
    if not p.is_file():
        return None
    if cases is None and (d / "cases.parquet").is_file():
        cases = validate_cases(read_parquet(d / "cases.parquet"), source=str(d / "cases.parquet"))
    return validate_judgements(read_parquet(p), cases=cases, responses=responses, source=str(p))


def dataset_judgements(ds: Dataset) -> pl.DataFrame | None:
    """The judgements of ``ds``: those it holds, else its directory's validated
    ``judgements.parquet`` (:func:`read_judgements`), else None."""
    if ds.judgements is not None:
        return ds.judgements
    return None if ds.path is None else read_judgements(ds.path, cases=ds.cases)


def _judgement_failures(
    d: Path, cases: pl.DataFrame | None, logs: Sequence[pl.DataFrame] | None
) -> pl.DataFrame:
    """The violations of ``d``'s judgements table (none without one): its own rules,
    then its verdicts against the cases and the response logs (the directory's
    ``responses.parquet`` when no log is given; None: a log is refused, so no
    judgement is checked against the responses)."""
    p = d / JUDGEMENTS_FILE
    if not p.is_file():
        return failures_frame([])
    table, failures = collect_failures(read_parquet(p), "judgements", source=str(p))
    if failures.height:
        return failures
    if logs is not None and not logs and (d / "responses.parquet").is_file():
        with contextlib.suppress(DataFileError):  # an unreadable log is the log's to report
            logs = [read_responses(d / "responses.parquet", validate=False)]
    keys = None
    if logs:
        keys = pl.concat(
            [log.select("run_id", "case_id", "arm", pl.col("sample").cast(pl.Int32)) for log in logs
             if {"run_id", "case_id", "arm", "sample"} <= set(log.columns)],
            how="vertical_relaxed",
        )  # fmt: skip
    return judgement_failures(table, source=str(p), cases=cases, responses=keys)


def validate_files(dataset: PathLike, responses: Sequence[PathLike] = ()) -> pl.DataFrame:
    """Every violation in a dataset and optional response logs, as a failures frame.

    Unreadable files raise :class:`DataFileError`; rule violations are returned,
    not raised, so that all of them can be reported at once.
    """
    d = Path(dataset)
    cases_path, variants_path = d / "cases.parquet", d / "variants.parquet"
    cases_raw = read_parquet(cases_path)
    variants_raw = read_parquet(variants_path)
    cases, f_cases = collect_failures(cases_raw, "cases", source=str(cases_path))
    if cases_raw.height == 0:  # a benchmark without cases cannot be run or scored
        f_cases = pl.concat([f_cases, failures_frame([{
            "table": "cases", "source": str(cases_path), "row": None, "key": "(table)",
            "column": "case_id", "check": "has_cases", "value": "(no rows)",
        }])])  # fmt: skip
    usable_cases = None if shape_broken(f_cases) else cases
    _, f_var = collect_failures(
        variants_raw, "variants", source=str(variants_path), cases=usable_cases
    )
    parts = [f_cases, f_var]
    if (d / RUNS_FILE).is_file():
        parts.append(collect_failures(read_parquet(d / RUNS_FILE), "runs",
                                      source=str(d / RUNS_FILE))[1])  # fmt: skip
    logs: list[pl.DataFrame] | None = []
    for r in responses:
        try:
            log = read_responses(r, cases=usable_cases)
        except ValidationError as exc:
            parts.append(exc.failures)
            logs = None
            continue
        if logs is not None:
            logs.append(log)
        parts.append(incomplete_pairs(log, source=str(r)))
    parts.append(_judgement_failures(d, usable_cases, logs))
    return pl.concat(parts)


def incomplete_pairs(responses: pl.DataFrame, *, source: str = "responses") -> pl.DataFrame:
    """Failures (check ``pair_complete``) for every (run_id, case_id, sample) lacking an arm
    its run observes (a clean-only run, ``arms = "benign"``, lacks none).

    Scoring refuses such pairs by default (``missing="error"``), so
    ``peira validate`` reports them with the other violations.
    """
    keys = ["run_id", "case_id", "sample"]
    # a run that declares one arm unobserved (docs/spec/data-model.md, ``arms``) lacks none
    declared = pl.col("arms").fill_null("both") if "arms" in responses.columns else pl.lit("both")
    arms = responses.group_by(keys).agg(
        pl.col("arm").unique().sort().alias("_arms"), declared.first().alias("_declared")
    )
    bad = (
        arms.filter((pl.col("_arms").list.len() < 2) & (pl.col("_declared") == "both"))
        .select(*keys, "_arms")
        .sort(keys)
    )
    return failures_frame(
        [
            {
                "table": "responses",
                "source": source,
                "row": None,
                "key": f"run_id={run!r}, case_id={case!r}, sample={sample}",
                "column": "arm",
                "check": "pair_complete",
                "value": f"(no {'attacked' if have == ['benign'] else 'benign'} row)",
            }
            for run, case, sample, have in bad.iter_rows()
        ]
    )


def in_split(frame: pl.DataFrame, split: str) -> pl.DataFrame:
    """The rows of ``frame`` in ``split`` (every row for ``"all"``)."""
    import polars as pl

    return frame if split == "all" else frame.filter(pl.col("split") == split)
