"""Checkpoints of a run: ``LOG.parts/`` with its manifest and part files, and resume checks.

Completed calls are buffered and written every ``checkpoint_every`` calls,
at least every ``checkpoint_seconds`` (default 5 s) and when the run stops,
as ``LOG.parts/part-00001.parquet``, … — each part
written atomically (temporary file, then rename), holding response-log rows
(``case_id``, ``arm``; never a ``variant_id``, so no pseudonym map is ever
written). ``LOG.parts/manifest.json`` records the run's identity (run_id,
model, version, samples, dataset hash, the adapter's ``module:Class`` and
digests of its configuration — see :func:`~peira.run.adapter_identity`). Running again with the same ``out``
reads the parts, skips every (case, arm, sample) they hold and calls only
the rest, so an interrupted run resumes without redoing or duplicating a
completed call; a manifest that does not match (another dataset, run_id,
sample count, adapter class or adapter configuration) is an error, so a
resume never mixes two configurations in one log. Calls in flight when a process is killed are
redone. At the end the parts are merged, validated (docs/spec/data-model.md#responses) and sorted by
``run_id, case_id, arm, sample`` into ``out`` (written atomically); the
parts directory is then removed unless ``keep_parts``.

Because resumed calls are keyed by case, not by pseudonym, a run resumes
under a different key — including the ephemeral random key used when none is
given. The key itself is never written anywhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ..integrity.hashes import dataset_hash
from ..io import Dataset, atomic_path, read_parquet, write_parquet
from ..schema import RESPONSES_SCHEMA
from .protocol import RESPONSE_KEY, ResumeError

__all__ = ["Checkpoint", "open_parts", "part_files", "parts_dir", "run_manifest"]

PathLike = str | os.PathLike[str]


def parts_dir(out: PathLike) -> Path:
    """The checkpoint directory of a log: ``LOG.parts`` beside it."""
    p = Path(out)
    return p.with_name(p.name + ".parts")


_MANIFEST = "manifest.json"


def run_manifest(
    dataset: Dataset,
    run_id: str,
    model: str,
    version: str,
    samples: int,
    adapter: dict[str, Any],
) -> dict[str, Any]:
    return {
        "format": "peira-run-parts/v1",
        "run_id": run_id,
        "model": model,
        "model_version": version,
        "samples": samples,
        "dataset_version": dataset.version,
        "dataset_hash": dataset_hash(dataset.cases, dataset.variants),
        **adapter,
    }


def _config_diff(old: Any, new: Any) -> str:
    """Which adapter configuration keys differ (values are only digested)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        known = {True: "recorded", False: "unknown"}
        return (
            f"adapter configuration: {known[isinstance(old, dict)]} in the checkpoint, "
            f"{known[isinstance(new, dict)]} now"
        )
    keys = sorted(set(old) | set(new))
    parts = []
    for k in keys:
        if k not in old:
            parts.append(f"{k} (not set before)")
        elif k not in new:
            parts.append(f"{k} (not set now)")
        elif old[k] != new[k]:
            parts.append(k)
    return "adapter configuration differs in: " + ", ".join(parts)


def part_files(d: Path) -> list[Path]:
    return sorted(f for f in d.glob("part-*.parquet") if not f.name.startswith("."))


class Checkpoint:
    """Buffered rows → atomically written part files."""

    def __init__(
        self,
        directory: Path,
        every: int,
        next_index: int,
        schema: Mapping[str, Any] | None = None,
    ) -> None:
        self.dir = directory
        self.schema = dict(schema) if schema is not None else RESPONSES_SCHEMA
        self.every = every
        self.next = next_index
        self.last_flush = time.monotonic()
        self.buffer: list[dict[str, Any]] = []
        self.written: list[Path] = []

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.every:
            self.flush()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        rows, self.buffer = self.buffer, []
        df = pl.DataFrame(rows, schema=self.schema)
        path = self.dir / f"part-{self.next:05d}.parquet"
        write_parquet(df, path)
        self.next += 1
        self.written.append(path)

    async def every_seconds(self, seconds: float) -> None:
        """Flush buffered rows at least every ``seconds`` (runs until cancelled)."""
        while True:
            await asyncio.sleep(max(0.0, self.last_flush + seconds - time.monotonic()))
            if time.monotonic() - self.last_flush >= seconds:
                self.flush()


def read_parts(files: list[Path]) -> pl.DataFrame:
    """The rows of checkpoint parts (parts of a cached run carry a ``cached`` column)."""
    parts = [read_parquet(f).cast(RESPONSES_SCHEMA) for f in files]  # type: ignore[arg-type]
    if not parts:
        return pl.DataFrame(schema=RESPONSES_SCHEMA)
    return pl.concat(parts, how="diagonal_relaxed")


def open_parts(directory: Path, manifest: dict[str, Any]) -> tuple[pl.DataFrame, int]:
    """Read earlier parts (checking the manifest); return their rows and the next part index."""
    mpath = directory / _MANIFEST
    if directory.exists():
        if not mpath.exists():
            if part_files(directory):
                raise ResumeError(
                    f"{directory}: part files without {_MANIFEST}; not a checkpoint of "
                    "peira run (remove the directory to start afresh)"
                )
        else:
            try:
                old = json.loads(mpath.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ResumeError(f"{mpath}: unreadable checkpoint manifest: {exc}") from exc
            diff = [k for k in manifest if old.get(k) != manifest[k]]
            if diff:
                shown = ", ".join(
                    _config_diff(old.get(k), manifest[k])
                    if k == "adapter_config"
                    else f"{k}: {old.get(k)!r} → {manifest[k]!r}"
                    for k in diff
                )
                raise ResumeError(
                    f"{directory}: the checkpoint belongs to another run ({shown}); use "
                    "another --out, or remove the directory to start afresh"
                )
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(".part-*.tmp"):  # left by a killed writer
        stale.unlink(missing_ok=True)
    if not mpath.exists():
        with atomic_path(mpath) as tmp:
            tmp.write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n", "utf-8")
    files = part_files(directory)
    if not files:
        return pl.DataFrame(schema=RESPONSES_SCHEMA), 1
    done = read_parts(files)
    dup = done.filter(pl.struct(*RESPONSE_KEY).is_duplicated())
    if dup.height:
        raise ResumeError(
            f"{directory}: {dup.height} checkpoint rows are duplicated (first: "
            f"{dup.row(0, named=True)['case_id']!r}); remove the directory to start afresh"
        )
    last = max(int(f.stem.split("-")[1]) for f in files)
    return done, last + 1
