"""Verifying a Peira run artifact: structure, lock, results hash, dataset, re-derived metrics.

:func:`verify` reads an artifact from disk and detects its kind (a Peira run
artifact, or a reference artifact handed to
:func:`~peira.seal.reference.verify_reference`); :func:`verify_artifact`
checks one held in memory. Every difference is a :class:`~peira.seal.Finding`
naming the field, the sealed value and the value found.
"""

from __future__ import annotations

import hmac
import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from .._json import describe
from ..canonical import CanonicalJSONError, canonical_json
from ..errors import DataFileError, PeiraError
from ..integrity.hashes import (
    DATASET_SCHEME,
    RESULTS_SCHEME,
    RESULTS_SCHEME_ALL,
    dataset_hash,
    results_hash,
)
from ..integrity.keys import SEAL_KEY_ENV, compute_lock
from ..io import Dataset, read_parquet
from ..schema import RESPONSES_SCHEMA
from ._layout import (
    ARTIFACT_FILE,
    BLOCK_FIELDS,
    FORMAT,
    FORMAT_VERSION,
    HEX64,
    LOCK_KINDS,
    RESPONSES_FILE,
    TOP_TYPES,
)
from .build import SealConfig, derive
from .decision import DECISION_FILE, verify_decision
from .findings import VerifyReport
from .reference import verify_reference

__all__ = ["verify", "verify_artifact"]

PathLike = str | os.PathLike[str]


class _DuplicateKeyError(ValueError):
    pass


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKeyError(k)
        out[k] = v
    return out


def _read_json(path: Path, report: VerifyReport) -> Any:
    """Parse a JSON file (NaN/Infinity parsed, judged later); None when unreadable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        report.unreadable(path.name, f"{path}: no such file")
        return None
    except OSError as exc:
        report.unreadable(path.name, f"{path}: cannot read ({type(exc).__name__})")
        return None
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_pairs_hook)
    except RecursionError:
        report.unreadable(path.name, f"{path}: JSON nested too deeply to be an artifact")
    except _DuplicateKeyError as exc:
        report.tampered(path.name, f"duplicate key {exc.args[0]!r}: the JSON is ambiguous")
    except UnicodeDecodeError as exc:
        report.unreadable(path.name, f"{path}: not UTF-8 text (byte {exc.start})")
    except json.JSONDecodeError as exc:
        report.unreadable(
            path.name, f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({describe(exc)})"
        )
    except ValueError:  # an integer literal longer than Python converts
        report.unreadable(path.name, f"{path}: a number too long to read")
    return None


def _check_structure(artifact: Any, report: VerifyReport) -> bool:
    """Fields and types of an artifact object; False when it cannot be checked further."""
    if not isinstance(artifact, dict):
        report.tampered("(root)", f"artifact.json holds a {type(artifact).__name__}, not an object")
        return False
    ok = True
    for name, typ in TOP_TYPES.items():
        if name not in artifact:
            report.tampered(name, "required field is missing")
            ok = False
        elif not isinstance(artifact[name], typ) or isinstance(artifact[name], bool):
            report.tampered(name, f"has the wrong type ({type(artifact[name]).__name__})")
            ok = False
    extra = sorted(set(artifact) - set(TOP_TYPES))
    for name in extra:
        report.tampered(name, "unexpected field (not written by peira seal)")
    if not ok:
        return False
    if artifact["format"] != FORMAT:
        report.tampered("format", "unknown artifact format", FORMAT, artifact["format"])
    if artifact["format_version"] != FORMAT_VERSION:
        report.tampered(
            "format_version",
            "unsupported format version",
            FORMAT_VERSION,
            artifact["format_version"],
        )
    for block, names in BLOCK_FIELDS.items():
        missing = [n for n in names if n not in artifact[block]]
        for n in missing:
            report.tampered(f"{block}.{n}", "required field is missing")
            ok = False
        for n in sorted(set(artifact[block]) - set(names)):
            report.tampered(f"{block}.{n}", "unexpected field (not written by peira seal)")
    fixed = {
        ("results", "file"): RESPONSES_FILE,
        ("dataset", "hash_scheme"): DATASET_SCHEME,
    }
    scheme = artifact["results"].get("hash_scheme")
    if scheme is not None and scheme not in (RESULTS_SCHEME, RESULTS_SCHEME_ALL):
        report.tampered("results.hash_scheme", "unknown value", RESULTS_SCHEME, scheme)
    for (block, name), value in fixed.items():
        if name in artifact[block] and artifact[block][name] != value:
            report.tampered(f"{block}.{name}", "unknown value", value, artifact[block][name])
    if artifact["lock_kind"] not in LOCK_KINDS:
        report.tampered("lock_kind", f"unknown lock kind (known: {', '.join(LOCK_KINDS)})")
        ok = False
    if not HEX64.fullmatch(artifact["lock"]):
        report.tampered("lock", "not a 64-digit lowercase hex digest")
        ok = False
    return ok


def _check_lock(artifact: dict[str, Any], key: bytes | None, report: VerifyReport) -> None:
    kind = artifact["lock_kind"]
    payload = {k: v for k, v in artifact.items() if k != "lock"}
    if kind == "hmac-sha256" and key is None:
        report.unreadable(
            "lock",
            "the artifact is sealed with a secret key (lock_kind 'hmac-sha256'); pass "
            f"--key-file FILE or set {SEAL_KEY_ENV} to verify it",
        )
        return
    if kind == "sha256" and key is not None:
        report.tampered(
            "lock_kind",
            "a key was given but the artifact carries a plain SHA-256 lock: anyone can "
            "compute it, so the artifact may have been re-sealed without the key",
            "hmac-sha256",
            "sha256",
        )
    try:
        lock = compute_lock(payload, key if kind == "hmac-sha256" else None)
    except CanonicalJSONError as exc:
        report.tampered("(payload)", f"not canonical JSON: {exc}")
        return
    if not hmac.compare_digest(lock, artifact["lock"]):
        what = "HMAC-SHA256 with the given key" if kind == "hmac-sha256" else "SHA-256"
        report.tampered(
            "lock",
            f"the payload does not match its lock ({what} of the canonical payload)",
            artifact["lock"],
            lock,
        )
    else:
        report.notes.append(f"lock {kind} ok")


def _check_results(artifact: dict[str, Any], responses: pl.DataFrame, report: VerifyReport) -> bool:
    """Results hash, row count and consistency with run_id and adapter; True when usable."""
    res = artifact["results"]
    cols = set(responses.columns)
    missing = [c for c in RESPONSES_SCHEMA if c not in cols]
    extra = sorted(cols - set(RESPONSES_SCHEMA))
    scheme = res.get("hash_scheme")
    for c in missing:
        report.tampered(f"responses.{c}", "column missing from responses.parquet")
    if scheme != RESULTS_SCHEME_ALL:  # under v2 every column is in the hash
        for c in extra:
            report.tampered(f"responses.{c}", "unexpected column in responses.parquet")
    if missing:
        return False
    if responses.height != res.get("n_rows"):
        report.tampered(
            "results.n_rows",
            "row count of responses.parquet differs",
            res.get("n_rows"),
            responses.height,
        )
    try:
        found = results_hash(
            responses, RESULTS_SCHEME_ALL if scheme == RESULTS_SCHEME_ALL else RESULTS_SCHEME
        )
    except CanonicalJSONError as exc:
        report.tampered("results.content_hash", f"responses.parquet: {exc}")
        return False
    except pl.exceptions.PolarsError as exc:
        report.tampered("results.content_hash", f"responses.parquet cannot be hashed: {exc}")
        return False
    if found != res.get("content_hash"):
        report.tampered(
            "results.content_hash",
            "responses.parquet differs from the sealed response log",
            res.get("content_hash"),
            found,
        )
        return False
    run_ids = responses["run_id"].unique().to_list()
    if run_ids != [artifact["run_id"]]:
        report.tampered(
            "run_id", "differs from the run_id of the responses", artifact["run_id"], run_ids
        )
    adapter = artifact["adapter"]
    for col in ("model", "model_version"):
        vals = responses[col].unique().to_list()
        if vals != [adapter.get(col)]:
            report.tampered(
                f"adapter.{col}", f"differs from the responses' {col}", adapter.get(col), vals
            )
    report.notes.append(f"results {responses.height} rows ok")
    return True


def _check_dataset(artifact: dict[str, Any], dataset: Dataset, report: VerifyReport) -> bool:
    ds = artifact["dataset"]
    found = dataset_hash(dataset.cases, dataset.variants)
    if found != ds.get("content_hash"):
        where = f" ({dataset.path})" if dataset.path is not None else ""
        report.tampered(
            "dataset.content_hash",
            f"the dataset given{where} is not the one the run was sealed with",
            ds.get("content_hash"),
            found,
        )
        return False
    for name, n in (("n_cases", dataset.cases.height), ("n_variants", dataset.variants.height)):
        if ds.get(name) != n:
            report.tampered(f"dataset.{name}", "differs from the dataset's", ds.get(name), n)
    if dataset.version != ds.get("version"):
        report.tampered(
            "dataset.version", "differs from the dataset's", ds.get("version"), dataset.version
        )
    return True


def _same(a: Any, b: Any) -> bool:
    """Exact equality in the canonical JSON sense (1 ≠ 1.0, 0.0 ≠ -0.0)."""
    try:
        return canonical_json(a) == canonical_json(b)
    except CanonicalJSONError:
        return False


def _rederive(
    artifact: dict[str, Any], responses: pl.DataFrame, dataset: Dataset, report: VerifyReport
) -> None:
    from ..metrics import SEVERITY_WEIGHTS

    config, plan = artifact["config"], artifact["bootstrap_plan"]
    if not _same(config.get("severity_weights"), dict(SEVERITY_WEIGHTS)):
        report.tampered(
            "config.severity_weights",
            "differ from the weights this peira computes with",
            config.get("severity_weights"),
            dict(SEVERITY_WEIGHTS),
        )
    try:
        cfg = SealConfig.from_blocks(config, plan)
        metrics, plan_found = derive(dataset, responses, cfg)
    except (PeiraError, KeyError, TypeError, ValueError) as exc:
        report.tampered("metrics", f"cannot re-derive the metrics from the results: {exc}")
        return
    sealed = artifact["metrics"]
    for name in sorted(set(sealed) | set(metrics)):
        if name not in metrics:
            report.tampered(
                f"metrics.{name}", "not a metric this peira computes", sealed[name], None
            )
        elif name not in sealed:
            report.tampered(
                f"metrics.{name}", "missing from the sealed metrics", None, metrics[name]
            )
        elif not _same(sealed[name], metrics[name]):
            report.tampered(
                f"metrics.{name}",
                "differs from the value re-derived from the results",
                sealed[name],
                metrics[name],
            )
    for name in sorted(set(plan) | set(plan_found)):
        if not _same(plan.get(name), plan_found.get(name)):
            report.tampered(
                f"bootstrap_plan.{name}",
                "differs from the re-derived plan",
                plan.get(name),
                plan_found.get(name),
            )
    if report.status == "intact":
        report.notes.append(f"{len(metrics)} metrics re-derived")


def verify_artifact(
    artifact: Any,
    responses: pl.DataFrame | None,
    *,
    key: bytes | None = None,
    dataset: Dataset | None = None,
    rederive: bool = False,
    source: str = "(artifact)",
) -> VerifyReport:
    """Verify a Peira run artifact held in memory.

    Parameters
    ----------
    artifact
        The parsed ``artifact.json`` object.
    responses
        The frame read from ``responses.parquet`` (None when it could not be
        read: the report is then "unreadable").
    key
        Secret key. Required for ``hmac-sha256`` locks; given for a plain
        ``sha256`` lock, the artifact does not verify (it may have been
        re-sealed without the key).
    dataset
        The dataset of the run: its content hash is checked, and it is
        required for ``rederive``.
    rederive
        Recompute every metric and the bootstrap plan from the results and the
        dataset and compare them exactly with the sealed values.
    source
        Name used in the report.

    Returns
    -------
    VerifyReport
        Status ``intact``, ``tampered`` (with findings naming each field,
        sealed vs found) or ``unreadable``.
    """
    report = VerifyReport(source=source, kind="peira")
    if rederive and dataset is None:
        raise ValueError("rederive=True needs the dataset the run was scored on")
    if not _check_structure(artifact, report):
        return report
    _check_lock(artifact, key, report)
    if responses is None:
        report.unreadable(RESPONSES_FILE, f"{RESPONSES_FILE} cannot be read")
        return report
    usable = _check_results(artifact, responses, report)
    if dataset is not None:
        usable = _check_dataset(artifact, dataset, report) and usable
    if rederive and dataset is not None and usable:
        _rederive(artifact, responses, dataset, report)
    return report


def _read_responses_file(path: Path, report: VerifyReport) -> pl.DataFrame | None:
    try:
        return read_parquet(path)
    except DataFileError as exc:
        report.unreadable(RESPONSES_FILE, str(exc))
        return None


def verify(
    path: PathLike,
    *,
    key: bytes | None = None,
    dataset: Dataset | None = None,
    rederive: bool = False,
) -> VerifyReport:
    """Verify an artifact on disk; the format is detected.

    Parameters
    ----------
    path
        A Peira run artifact directory (holding ``artifact.json``), its
        ``artifact.json``, a gate decision record (a directory holding
        ``decision.json``, or that file: :mod:`peira.seal.decision`), or a
        reference-implementation artifact (a JSON file with ``analysis_lock``).
    key, dataset, rederive
        As in :func:`verify_artifact` (ignored for reference artifacts, which
        carry no key and no link to a dataset).

    Returns
    -------
    VerifyReport
    """
    p = Path(path)
    report = VerifyReport(source=str(p))
    decision = p / DECISION_FILE if p.is_dir() else p
    if decision.name == DECISION_FILE and decision.is_file() and not (p / ARTIFACT_FILE).exists():
        obj = _read_json(decision, report)
        if report.status != "intact":
            return report
        out = verify_decision(obj, key=key, dataset=dataset, source=str(p))
        if rederive:
            out.notes.append("re-derivation is not available for gate decisions (run peira gate "
                             "again on the log whose hash the record names)")  # fmt: skip
        return out
    if p.is_dir():
        art_path = p / ARTIFACT_FILE
        if not art_path.exists():
            report.unreadable(ARTIFACT_FILE, f"{p}: directory holds no {ARTIFACT_FILE}")
            return report
        directory = p
    elif p.is_file():
        art_path, directory = p, p.parent
    else:
        report.unreadable("(path)", f"{p}: no such file or directory")
        return report
    obj = _read_json(art_path, report)
    if report.status != "intact":
        return report
    if isinstance(obj, dict) and "analysis_lock" in obj and "format" not in obj:
        ref = verify_reference(obj, source=str(p))
        if rederive:
            ref.notes.append("re-derivation is not available for reference artifacts")
        return ref
    ours = p.is_dir() or art_path.name == ARTIFACT_FILE
    if not (isinstance(obj, dict) and (obj.get("format") == FORMAT or ours)):
        report.unreadable(
            "(format)",
            f"{art_path}: neither a Peira run artifact (format {FORMAT!r}) nor a reference "
            "artifact (analysis_lock)",
        )
        return report
    responses = _read_responses_file(directory / RESPONSES_FILE, report)
    out = verify_artifact(
        obj, responses, key=key, dataset=dataset, rederive=rederive, source=str(p)
    )
    if responses is None:  # the reader's message is more precise than the generic one
        out.findings = [f for f in out.findings if f.field != RESPONSES_FILE] + report.findings
    return out
