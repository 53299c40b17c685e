"""Reading and writing Peira tables as Parquet.

A *dataset* is a directory holding ``cases.parquet`` and ``variants.parquet``.
A *response log* is a Parquet file, a directory of part files (hive
partitions such as ``run_id=m1/part-0.parquet`` allowed) or a glob pattern.
Every read checks that each file exists, is non-empty and is Parquet before
any data is touched; every write is atomic (a temporary file in the target
directory, then a rename), so a failure leaves no half-written output.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from .errors import DataFileError, ValidationError
from .schema import (
    collect_failures,
    failures_frame,
    raise_if,
    validate_cases,
    validate_variants,
)

__all__ = [
    "Dataset",
    "atomic_dir",
    "atomic_path",
    "demo_dir",
    "incomplete_pairs",
    "parquet_files",
    "read_dataset",
    "read_parquet",
    "read_responses",
    "scan_responses",
    "write_dataset",
    "write_parquet",
]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Dataset:
    """A validated benchmark: the ``cases`` and ``variants`` tables."""

    cases: pl.DataFrame
    variants: pl.DataFrame
    path: Path | None = None

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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path``.

    The directory gets the usual mode (umask applied). An existing ``path``
    is swapped out and removed only after the new one is in place; on
    failure the temporary directory is removed and ``path`` is untouched.
    Callers decide beforehand whether replacing ``path`` is allowed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        if target.exists():
            old = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
            )
            os.rmdir(old)
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_parquet(df: pl.DataFrame, path: PathLike) -> Path:
    """Write ``df`` to ``path`` atomically (zstd, statistics); return the path.

    The same frame always gives the same bytes.
    """
    with atomic_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", statistics=True)
    return Path(path)


def write_dataset(cases: pl.DataFrame, variants: pl.DataFrame, directory: PathLike) -> Dataset:
    """Validate and write a dataset directory (``cases.parquet``, ``variants.parquet``).

    Both tables are validated before anything is written. Row order is kept
    as given (an imported file keeps its line order), so the same tables
    always give the same bytes.
    """
    d = Path(directory)
    cases = validate_cases(cases, source=str(d / "cases.parquet"))
    variants = validate_variants(variants, cases=cases, source=str(d / "variants.parquet"))
    write_parquet(cases, d / "cases.parquet")
    write_parquet(variants, d / "variants.parquet")
    return Dataset(cases, variants, d)


# ---------------------------------------------------------------- reading


def _check_parquet(path: Path) -> None:
    if not path.exists():
        raise DataFileError(f"{path}: no such file")
    if path.is_file() and path.stat().st_size == 0:
        raise DataFileError(f"{path}: empty file (0 bytes); expected Parquet")
    try:
        pq.read_metadata(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataFileError(
            f"{path}: not a readable Parquet file (truncated or corrupt?): {exc}"
        ) from exc


def parquet_files(path: PathLike) -> list[Path]:
    """The Parquet files a path denotes: a file, a directory (recursive) or a glob.

    Raises
    ------
    DataFileError
        If nothing matches or a matched file is empty or not Parquet.
    """
    p = Path(path)
    s = str(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.parquet") if not f.name.startswith("."))
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
        _check_parquet(f)
    return files


def read_parquet(path: PathLike) -> pl.DataFrame:
    """Read one Parquet file with a clear error if it is missing or corrupt."""
    p = Path(path)
    _check_parquet(p)
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
        return pl.scan_parquet(p, hive_partitioning=True)
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
    files = parquet_files(path)
    p = Path(path)
    try:
        if p.is_dir():
            lf = pl.scan_parquet(p, hive_partitioning=True, include_file_paths="_file")
        else:
            lf = pl.scan_parquet([str(f) for f in files], include_file_paths="_file")
        df = lf.collect()
    except Exception as exc:
        raise DataFileError(f"{path}: cannot read response log: {exc}") from exc
    if df.height == 0:
        raise DataFileError(f"{path}: response log has no rows")
    locations = df.select(
        pl.col("_file").alias("file"),
        pl.int_range(pl.len()).over("_file").cast(pl.Int64).alias("row"),
    )
    df = df.drop("_file")
    if not validate:
        return df
    out, failures = collect_failures(
        df, "responses", source=str(path), cases=cases, locations=locations
    )
    raise_if(failures, str(path))
    return out


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
    usable_cases = cases if f_cases.filter(pl.col("check") == "missing_column").is_empty() else None
    _, f_var = collect_failures(
        variants_raw, "variants", source=str(variants_path), cases=usable_cases
    )
    parts = [f_cases, f_var]
    for r in responses:
        try:
            log = read_responses(r, cases=usable_cases)
        except ValidationError as exc:
            parts.append(exc.failures)
            continue
        parts.append(incomplete_pairs(log, source=str(r)))
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
