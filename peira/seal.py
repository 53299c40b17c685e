"""Sealed run artifacts: canonical JSON, locks, verification and re-derivation (SPEC §7).

A *run artifact* is a directory holding

- ``responses.parquet``: the run's response log (the columns of SPEC §2.3
  only, rows of that run only, sorted by ``run_id, case_id, arm, sample``);
- ``artifact.json``: one JSON object, the *payload* plus its ``lock``.

The payload (every field of ``artifact.json`` except ``lock``)::

    {
      "format": "peira-run-artifact", "format_version": 1,
      "lock_kind": "sha256" | "hmac-sha256",
      "created_utc": "2026-01-01T00:00:00Z",
      "peira_version": "0.1.0",
      "run_id": "...",
      "dataset": {"version": ..., "content_hash": <hex>, "hash_scheme": "peira-dataset/v1",
                  "n_cases": ..., "n_variants": ...},
      "adapter": {"model": ..., "model_version": ...},
      "config": {"split", "missing", "delta", "gates": {...}, "severity_weights": {...},
                 "min_n", "calibration_min_n", "calibration_bins", "calibration_binning",
                 "confidence_level"},
      "results": {"file": "responses.parquet", "content_hash": <hex>,
                  "hash_scheme": "peira-responses/v1", "n_rows": ...},
      "metrics": {<every column of metric_table for the run, SPEC names>},
      "bootstrap_plan": {"n_resamples", "seed", "unit", "method", "fingerprint"}
    }

``lock`` = hex SHA-256 of :func:`canonical_json` of the payload, or with a
secret key hex HMAC-SHA256(key, canonical JSON); ``lock_kind`` says which and
is itself covered. The key is never written, logged or put in a message.

Content hashes
--------------
Both are hex SHA-256 over a tag line followed by one canonical JSON line per
row (a row is an object of *every* column of the table's schema, nulls
included; see :func:`canonical_json`), each line ending in ``\\n``:

- dataset (``peira-dataset/v1``): ``b"peira-dataset/v1\\n"``, then
  ``["cases", row]`` for each case sorted by ``case_id``, then
  ``["variants", row]`` for each variant sorted by ``(case_id, arm)``.
- results (``peira-responses/v1``): ``b"peira-responses/v1\\n"``, then each
  response row sorted by ``(run_id, case_id, arm, sample)``.
- results of a log with columns beyond SPEC §2.3 (the extension columns of
  docs/spec/data-model.md, or any other kept column): scheme
  ``peira-responses/v2``, the same with every column of the log in each row
  object (temporal and other values JSON cannot hold, as their text).

Reference artifacts
-------------------
The reference implementation's lock (``analysis_lock``) is SHA-256 of Python
``json.dumps(payload, sort_keys=True)`` (default separators, ASCII escapes)
over every top-level field except ``created_utc``, ``artifact_version``,
``analysis_lock`` and, in ``artifact_version`` "2" files, ``env``. Those
excluded fields are therefore not protected by the lock.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from .bootstrap import ResamplePlan, plan_for_cases, ratio_intervals
from .canonical import CanonicalJSONError, canonical_json, pretty_json
from .errors import DataFileError, PeiraError, PeiraWarning
from .importers._json import describe
from .io import Dataset, atomic_dir, check_output, read_parquet, write_parquet
from .schema import CASES_SCHEMA, RESPONSES_SCHEMA, VARIANTS_SCHEMA

__all__ = [
    "ARTIFACT_FILE",
    "FORMAT",
    "FORMAT_VERSION",
    "MIN_KEY_BYTES",
    "RESPONSES_FILE",
    "SEAL_KEY_ENV",
    "ArtifactExistsError",
    "CanonicalJSONError",
    "Finding",
    "KeyMaterialError",
    "SealConfig",
    "VerifyReport",
    "build_artifact",
    "canonical_json",
    "compute_lock",
    "dataset_hash",
    "derive",
    "load_key",
    "reference_lock",
    "results_hash",
    "results_scheme",
    "seal",
    "verify",
    "verify_artifact",
    "verify_reference",
]

PathLike = str | os.PathLike[str]

FORMAT = "peira-run-artifact"
FORMAT_VERSION = 1
ARTIFACT_FILE = "artifact.json"
RESPONSES_FILE = "responses.parquet"
SEAL_KEY_ENV = "PEIRA_SEAL_KEY"
MIN_KEY_BYTES = 16
DATASET_SCHEME = "peira-dataset/v1"
RESULTS_SCHEME = "peira-responses/v1"
RESULTS_SCHEME_ALL = "peira-responses/v2"  # every column of the log, extras included
RESPONSE_KEY = ("run_id", "case_id", "arm", "sample")
LOCK_KINDS = ("sha256", "hmac-sha256")

#: Reference fields outside the lock (all versions), and ``env`` in version "2".
REFERENCE_UNLOCKED = ("created_utc", "artifact_version", "analysis_lock")
REFERENCE_VERSIONS = ("2", "3")

_HEX64 = re.compile(r"[0-9a-f]{64}")

EXIT_INTACT, EXIT_TAMPERED, EXIT_UNREADABLE = 0, 1, 2
Status = Literal["intact", "tampered", "unreadable"]


class KeyMaterialError(PeiraError, ValueError):
    """A secret key is missing, unreadable or too short (the key itself is never shown)."""


class ArtifactExistsError(PeiraError, FileExistsError):
    """The output directory of :func:`seal` exists already."""


# ---------------------------------------------------------------- keys and locks


def _strip_newline(data: bytes) -> bytes:
    if data.endswith(b"\r\n"):
        return data[:-2]
    if data.endswith(b"\n"):
        return data[:-1]
    return data


def load_key(
    key_file: PathLike | None = None,
    *,
    env_var: str = SEAL_KEY_ENV,
    required: bool = False,
    purpose: str = "seal",
) -> bytes | None:
    """Read a secret key from a file, or else from an environment variable.

    Parameters
    ----------
    key_file
        A file whose bytes are the key (one trailing newline is stripped).
    env_var
        Environment variable consulted when ``key_file`` is None (its value,
        UTF-8 encoded, one trailing newline stripped).
    required
        Raise when no key is configured (else return None).
    purpose
        Word used in messages (``"seal"``, ``"holdout"``).

    Returns
    -------
    bytes or None

    Raises
    ------
    KeyMaterialError
        No key (when required), an empty variable, or a key shorter than
        :data:`MIN_KEY_BYTES` bytes. Messages name the source and the length,
        never the key.
    DataFileError
        The key file does not exist or cannot be read.
    """
    if key_file is not None:
        p = Path(key_file)
        try:
            data = p.read_bytes()
        except FileNotFoundError as exc:
            raise DataFileError(f"{p}: {purpose} key file not found") from exc
        except OSError as exc:
            raise DataFileError(
                f"{p}: cannot read the {purpose} key file ({type(exc).__name__})"
            ) from exc
        source = f"{p}"
    else:
        value = os.environ.get(env_var)
        if value is None:
            if required:
                raise KeyMaterialError(
                    f"no {purpose} key: pass --key-file FILE or set the environment "
                    f"variable {env_var}"
                )
            return None
        data = value.encode("utf-8")
        source = f"${env_var}"
    key = _strip_newline(data)
    if len(key) < MIN_KEY_BYTES:
        raise KeyMaterialError(
            f"{source}: the {purpose} key is {len(key)} bytes; at least {MIN_KEY_BYTES} "
            "bytes are required (use e.g. 32 random bytes)"
        )
    return key


def compute_lock(payload: Mapping[str, Any], key: bytes | None = None) -> str:
    """The lock of a payload: hex SHA-256, or with ``key`` hex HMAC-SHA256, of its canonical JSON.

    Examples
    --------
    >>> compute_lock({"a": 1})[:16]
    '015abd7f5cc57a2d'
    """
    data = canonical_json(payload)
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def reference_lock(artifact: Mapping[str, Any]) -> str:
    """The ``analysis_lock`` of a reference-implementation artifact.

    SHA-256 (hex) of ``json.dumps(payload, sort_keys=True)`` (Python's default
    separators and ASCII escapes) over every top-level field except
    ``created_utc``, ``artifact_version``, ``analysis_lock`` and, when
    ``artifact_version`` is ``"2"``, ``env``.
    """
    skip = set(REFERENCE_UNLOCKED)
    if artifact.get("artifact_version") == "2":
        skip.add("env")
    payload = {k: v for k, v in artifact.items() if k not in skip}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- content hashes


def _row_lines(
    df: pl.DataFrame, schema: Mapping[str, pl.DataType], tag: str | None
) -> Iterator[bytes]:
    frame = df.select(list(schema))
    dumps = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode
    for i, row in enumerate(frame.iter_rows(named=True)):
        item = row if tag is None else [tag, row]
        try:
            # cells are plain Python values, so the encoder alone gives the canonical form
            line = dumps(item).encode("utf-8")
        except ValueError:
            try:
                line = canonical_json(item)
            except CanonicalJSONError as exc:
                table = tag or "responses"
                raise CanonicalJSONError(f"{table} row {i} (sorted by key): {exc}") from exc
        yield line + b"\n"


def _hash_lines(tag: str, parts: Iterable[bytes]) -> str:
    h = hashlib.sha256(tag.encode("ascii") + b"\n")
    for line in parts:
        h.update(line)
    return h.hexdigest()


def _missing_columns(df: pl.DataFrame, schema: Mapping[str, pl.DataType], what: str) -> None:
    absent = [c for c in schema if c not in df.columns]
    if absent:
        raise DataFileError(f"{what}: missing column(s) {absent}")


def dataset_hash(cases: pl.DataFrame, variants: pl.DataFrame) -> str:
    """Content hash of a dataset (scheme ``peira-dataset/v1``, see the module notes).

    Every column of the cases and variants schemas is hashed, so any change
    of a label, a prompt or an option changes the hash; row order does not.
    """
    _missing_columns(cases, CASES_SCHEMA, "cases")
    _missing_columns(variants, VARIANTS_SCHEMA, "variants")

    def lines() -> Iterator[bytes]:
        yield from _row_lines(cases.sort("case_id"), CASES_SCHEMA, "cases")
        yield from _row_lines(variants.sort("case_id", "arm"), VARIANTS_SCHEMA, "variants")

    return _hash_lines(DATASET_SCHEME, lines())


def results_scheme(responses: pl.DataFrame) -> str:
    """The results hash scheme of a log: v1 for the columns of SPEC §2.3 only, else v2."""
    extra = [c for c in responses.columns if c not in RESPONSES_SCHEMA]
    return RESULTS_SCHEME_ALL if extra else RESULTS_SCHEME


def _hashable(df: pl.DataFrame) -> pl.DataFrame:
    """Extra columns whose values JSON cannot hold (dates, decimals, bytes…) as text."""
    nested = (pl.List, pl.Struct, pl.Array)
    return df.with_columns(
        pl.col(c).cast(pl.String)
        for c, t in df.schema.items()
        if c not in RESPONSES_SCHEMA
        and not (
            (t.is_numeric() and not t.is_decimal())
            or t in (pl.Boolean, pl.String, pl.Null)
            or isinstance(t, nested)
        )
    )


def results_hash(responses: pl.DataFrame, scheme: str | None = None) -> str:
    """Content hash of a response log (schemes ``peira-responses/v1`` and ``/v2``, see the
    module notes).

    Rows are sorted by ``(run_id, case_id, arm, sample)`` first, so the hash
    does not depend on row order; every column of SPEC §2.3 is covered, and
    under v2 (the scheme of a log with more columns, :func:`results_scheme`)
    every other column too.

    Raises
    ------
    CanonicalJSONError
        A cell holds NaN or ±Infinity (the message names row and column).
    """
    _missing_columns(responses, RESPONSES_SCHEMA, "responses")
    scheme = results_scheme(responses) if scheme is None else scheme
    ordered = responses.sort(list(RESPONSE_KEY))
    if scheme == RESULTS_SCHEME_ALL:
        ordered = _hashable(ordered)
        cols = {**RESPONSES_SCHEMA, **{c: ordered.schema[c] for c in ordered.columns}}
        return _hash_lines(scheme, _row_lines(ordered, cols, None))
    return _hash_lines(RESULTS_SCHEME, _row_lines(ordered, RESPONSES_SCHEMA, None))


# ---------------------------------------------------------------- derivation


@dataclass(frozen=True)
class SealConfig:
    """How a run is scored for its artifact (all recorded in ``config`` and the plan block).

    Attributes
    ----------
    split
        Score only cases of this split (``"public"``, ``"holdout"``), or all (None).
    missing
        Missing-arm policy of :func:`peira.pairs.build_pairs`.
    delta
        Shift-without-flip threshold δ.
    gates
        Ranking-gate thresholds (:class:`peira.metrics.GateThresholds` fields);
        None = the defaults.
    min_n, calibration_min_n, calibration_bins, calibration_binning
        Options of :func:`peira.metrics.metric_table`.
    n_resamples, seed, unit, method, confidence_level
        The bootstrap plan and interval settings recorded with the metrics.
    """

    split: str | None = None
    missing: Literal["error", "malformed"] = "error"
    delta: float = 0.10
    gates: Mapping[str, Any] | None = None
    min_n: int = 30
    calibration_min_n: int = 100
    calibration_bins: int = 15
    calibration_binning: Literal["equal_mass", "equal_width"] = "equal_mass"
    n_resamples: int = 10_000
    seed: int = 0
    unit: Literal["cluster", "case"] = "cluster"
    method: Literal["percentile", "bca"] = "percentile"
    confidence_level: float = 0.95

    def config_block(self) -> dict[str, Any]:
        """The ``config`` block of the payload."""
        from .metrics import SEVERITY_WEIGHTS, GateThresholds

        gates = GateThresholds(**dict(self.gates or {}))
        return {
            "split": self.split,
            "missing": self.missing,
            "delta": float(self.delta),
            "gates": gates.as_dict(),
            "severity_weights": dict(SEVERITY_WEIGHTS),
            "min_n": int(self.min_n),
            "calibration_min_n": int(self.calibration_min_n),
            "calibration_bins": int(self.calibration_bins),
            "calibration_binning": self.calibration_binning,
            "confidence_level": float(self.confidence_level),
        }

    @classmethod
    def from_blocks(cls, config: Mapping[str, Any], plan: Mapping[str, Any]) -> SealConfig:
        """Rebuild the configuration recorded in an artifact (for re-derivation)."""
        return cls(
            split=config["split"],
            missing=config["missing"],
            delta=config["delta"],
            gates=dict(config["gates"]),
            min_n=config["min_n"],
            calibration_min_n=config["calibration_min_n"],
            calibration_bins=config["calibration_bins"],
            calibration_binning=config["calibration_binning"],
            n_resamples=plan["n_resamples"],
            seed=plan["seed"],
            unit=plan["unit"],
            method=plan["method"],
            confidence_level=config["confidence_level"],
        )


def _plan(cases: pl.DataFrame, config: SealConfig) -> ResamplePlan:
    return plan_for_cases(
        cases,
        split=config.split,
        unit=config.unit,
        n_resamples=config.n_resamples,
        seed=config.seed,
    )


def _plan_block(plan: ResamplePlan, config: SealConfig) -> dict[str, Any]:
    """The bootstrap plan block."""
    return {
        "n_resamples": int(plan.n_resamples),
        "seed": int(plan.seed),
        "unit": str(plan.unit),
        "method": config.method,
        "fingerprint": str(plan.fingerprint),
    }


def derive(
    dataset: Dataset, responses: pl.DataFrame, config: SealConfig
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metrics block and the bootstrap plan block of one run.

    Parameters
    ----------
    dataset
        The dataset the run answered.
    responses
        The run's response log (one run_id), validated.
    config
        Scoring options.

    Returns
    -------
    (dict, dict)
        ``metrics``: every column of :func:`peira.metrics.metric_table` for
        the run except ``run_id`` (SPEC names; null where undefined; floats
        exactly as computed), and ``<m>_lo``/``<m>_hi`` of every ratio metric
        from the plan below, so that re-derivation checks the intervals too. ``bootstrap_plan``: n_resamples, seed, unit,
        method, fingerprint.
    """
    from .metrics import GateThresholds, metric_table
    from .pairs import build_pairs

    cases = dataset.cases
    if config.split is not None:
        cases = cases.filter(pl.col("split") == config.split)
        if cases.height == 0:
            raise PeiraError(f"dataset has no cases in split {config.split!r}")
    ordered = responses.sort(list(RESPONSE_KEY))
    if config.split is not None:
        ordered = ordered.filter(pl.col("case_id").is_in(cases["case_id"].implode()))
    pairs = build_pairs(ordered, cases, delta=config.delta, missing=config.missing)
    table = metric_table(
        pairs,
        cases=cases,
        min_n=config.min_n,
        calibration_min_n=config.calibration_min_n,
        n_bins=config.calibration_bins,
        binning=config.calibration_binning,
        thresholds=GateThresholds(**dict(config.gates or {})),
    )
    if table.height != 1:
        raise PeiraError(f"expected one run in the responses, found {table.height}")
    metrics = {k: v for k, v in table.to_dicts()[0].items() if k != "run_id"}
    plan = _plan(dataset.cases, config)
    with warnings.catch_warnings():  # a small plan is recorded in the block, not warned about here
        warnings.simplefilter("ignore", PeiraWarning)
        ci = ratio_intervals(pairs, plan, level=config.confidence_level, method=config.method)
    for m, lo, hi in ci.select("metric", "lo", "hi").iter_rows():
        metrics[f"{m}_lo"], metrics[f"{m}_hi"] = lo, hi
    return metrics, _plan_block(plan, config)


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run_rows(responses: pl.DataFrame, run_id: str) -> pl.DataFrame:
    runs = responses["run_id"].unique().sort().to_list()
    if run_id not in runs:
        shown = ", ".join(repr(r) for r in runs[:10]) + (" …" if len(runs) > 10 else "")
        raise PeiraError(f"run_id {run_id!r} is not in the response log (runs: {shown})")
    kept = [c for c in responses.columns if c not in RESPONSES_SCHEMA]  # extension, extra
    return (
        responses.filter(pl.col("run_id") == run_id)
        .select(*[pl.col(c).cast(t) for c, t in RESPONSES_SCHEMA.items()], *kept)
        .sort(list(RESPONSE_KEY))
    )


def build_artifact(
    dataset: Dataset,
    responses: pl.DataFrame,
    run_id: str,
    *,
    config: SealConfig | None = None,
    key: bytes | None = None,
    created_utc: str | None = None,
) -> tuple[dict[str, Any], pl.DataFrame]:
    """Build a run artifact in memory.

    Parameters
    ----------
    dataset
        The validated dataset.
    responses
        A validated response log; only rows of ``run_id`` are sealed.
    run_id
        The run to seal.
    config
        Scoring options (default :class:`SealConfig`).
    key
        Secret key for an HMAC lock (None: plain SHA-256).
    created_utc
        Timestamp to record (default: now, ``YYYY-MM-DDTHH:MM:SSZ``).

    Returns
    -------
    (dict, polars.DataFrame)
        The ``artifact.json`` object (payload plus ``lock``) and the run's
        responses, sorted by key, as written to ``responses.parquet``.
    """
    from . import __version__

    cfg = config or SealConfig()
    rows = _run_rows(responses, run_id)
    metrics, plan = derive(dataset, rows, cfg)
    payload: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lock_kind": "sha256" if key is None else "hmac-sha256",
        "created_utc": created_utc or _utc_now(),
        "peira_version": __version__,
        "run_id": run_id,
        "dataset": {
            "version": dataset.version,
            "content_hash": dataset_hash(dataset.cases, dataset.variants),
            "hash_scheme": DATASET_SCHEME,
            "n_cases": dataset.cases.height,
            "n_variants": dataset.variants.height,
        },
        "adapter": {"model": rows["model"][0], "model_version": rows["model_version"][0]},
        "config": cfg.config_block(),
        "results": {
            "file": RESPONSES_FILE,
            "content_hash": results_hash(rows),
            "hash_scheme": results_scheme(rows),
            "n_rows": rows.height,
        },
        "metrics": metrics,
        "bootstrap_plan": plan,
    }
    try:
        lock = compute_lock(payload, key)
    except CanonicalJSONError as exc:
        raise CanonicalJSONError(f"cannot seal run {run_id!r}: {exc}") from exc
    return {**payload, "lock": lock}, rows


def artifact_owner(directory: Path) -> set[str] | None:
    """The files of a sealed run artifact in ``directory`` (its marker: ``artifact.json``)."""
    try:
        obj = json.loads((directory / ARTIFACT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(obj, dict) and obj.get("format") == FORMAT):
        return None
    return {ARTIFACT_FILE, RESPONSES_FILE}


def seal(
    dataset: Dataset,
    responses: pl.DataFrame,
    run_id: str,
    out: PathLike,
    *,
    config: SealConfig | None = None,
    key: bytes | None = None,
    created_utc: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a sealed run artifact directory (``artifact.json`` + ``responses.parquet``).

    Everything is computed first and written into a temporary directory that
    is renamed onto ``out`` at the end, so a failure leaves nothing behind.
    Parameters are those of :func:`build_artifact`, plus ``out`` and
    ``overwrite`` (replace an existing directory).

    Raises
    ------
    ArtifactExistsError
        ``out`` exists (and is not an empty directory) and ``overwrite`` is False.
    OutputError
        ``out`` is not a sealed artifact (``overwrite`` replaces only those;
        files in it that are not the artifact's are kept), or cannot be written.
    MissingArmsError, ValidationError, CanonicalJSONError, PeiraError
        The run cannot be scored or sealed.
    """
    target = Path(out)
    if target.exists() and not overwrite and not (target.is_dir() and not any(target.iterdir())):
        raise ArtifactExistsError(f"{target}: exists already (pass --force to replace it)")
    check_output(target, kind="dir", owner=artifact_owner, writer="peira seal")
    artifact, rows = build_artifact(
        dataset, responses, run_id, config=config, key=key, created_utc=created_utc
    )
    with atomic_dir(target, owner=artifact_owner, writer="peira seal") as tmp:
        write_parquet(rows, tmp / RESPONSES_FILE)
        (tmp / ARTIFACT_FILE).write_bytes(pretty_json(artifact))
    return target


# ---------------------------------------------------------------- verification


@dataclass(frozen=True)
class Finding:
    """One difference found by verification.

    Attributes
    ----------
    field
        Dotted path of what differs (``lock``, ``metrics.asr``, ``results.content_hash``).
    expected
        What the artifact records (as text), or None.
    found
        What verification computed or found (as text), or None.
    message
        One line for people.
    """

    field: str
    expected: str | None
    found: str | None
    message: str

    def describe(self) -> str:
        """The finding as one line: message, then expected vs found when known."""
        if self.expected is None and self.found is None:
            return f"{self.field}: {self.message}"
        return f"{self.field}: {self.message} (sealed {self.expected}, found {self.found})"


@dataclass
class VerifyReport:
    """The outcome of verifying one artifact.

    Attributes
    ----------
    source
        The path verified.
    kind
        ``"peira"`` (a run artifact directory) or ``"reference"`` (a JSON file
        of the reference implementation), or ``"unknown"``.
    status
        ``"intact"``, ``"tampered"`` or ``"unreadable"``.
    findings
        What differs (empty when intact).
    notes
        What was checked, for the summary line.
    """

    source: str
    kind: str = "unknown"
    status: Status = "intact"
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the artifact is intact."""
        return self.status == "intact"

    @property
    def exit_code(self) -> int:
        """0 intact, 1 tampered, 2 unreadable."""
        return {"intact": EXIT_INTACT, "tampered": EXIT_TAMPERED}.get(self.status, EXIT_UNREADABLE)

    def tampered(self, fld: str, message: str, expected: Any = None, found: Any = None) -> None:
        """Record a difference (the artifact does not verify)."""
        self.findings.append(Finding(fld, _show(expected), _show(found), message))
        if self.status == "intact":
            self.status = "tampered"

    def unreadable(self, fld: str, message: str) -> None:
        """Record that something needed for verification cannot be read.

        A proven difference (status "tampered") is kept as the status.
        """
        self.findings.append(Finding(fld, None, None, message))
        if self.status == "intact":
            self.status = "unreadable"


def _show(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return repr(value)
    try:
        return canonical_json(value).decode("utf-8")
    except CanonicalJSONError:
        return repr(value)


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


_TOP_TYPES: dict[str, type | tuple[type, ...]] = {
    "format": str,
    "format_version": int,
    "lock_kind": str,
    "created_utc": str,
    "peira_version": str,
    "run_id": str,
    "dataset": dict,
    "adapter": dict,
    "config": dict,
    "results": dict,
    "metrics": dict,
    "bootstrap_plan": dict,
    "lock": str,
}
_BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "dataset": ("version", "content_hash", "hash_scheme", "n_cases", "n_variants"),
    "adapter": ("model", "model_version"),
    "results": ("file", "content_hash", "hash_scheme", "n_rows"),
    "bootstrap_plan": ("n_resamples", "seed", "unit", "method", "fingerprint"),
    "config": (
        "split",
        "missing",
        "delta",
        "gates",
        "severity_weights",
        "min_n",
        "calibration_min_n",
        "calibration_bins",
        "calibration_binning",
        "confidence_level",
    ),
}


def _check_structure(artifact: Any, report: VerifyReport) -> bool:
    """Fields and types of an artifact object; False when it cannot be checked further."""
    if not isinstance(artifact, dict):
        report.tampered("(root)", f"artifact.json holds a {type(artifact).__name__}, not an object")
        return False
    ok = True
    for name, typ in _TOP_TYPES.items():
        if name not in artifact:
            report.tampered(name, "required field is missing")
            ok = False
        elif not isinstance(artifact[name], typ) or isinstance(artifact[name], bool):
            report.tampered(name, f"has the wrong type ({type(artifact[name]).__name__})")
            ok = False
    extra = sorted(set(artifact) - set(_TOP_TYPES))
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
    for block, names in _BLOCK_FIELDS.items():
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
    if not _HEX64.fullmatch(artifact["lock"]):
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
    from .metrics import SEVERITY_WEIGHTS

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


def verify_reference(artifact: Any, *, source: str = "(artifact)") -> VerifyReport:
    """Verify an artifact of the reference implementation (its ``analysis_lock``).

    Notes
    -----
    ``created_utc`` and ``artifact_version`` are outside the reference lock,
    so a change of ``created_utc`` cannot be detected; ``artifact_version``
    must be a known version ("2", "3"), and version "3" must carry ``env``
    (which the lock then covers).
    """
    report = VerifyReport(source=source, kind="reference")
    if not isinstance(artifact, dict):
        report.unreadable("(root)", "not a JSON object")
        return report
    lock = artifact.get("analysis_lock")
    if not isinstance(lock, str) or not _HEX64.fullmatch(lock):
        report.tampered("analysis_lock", "not a 64-digit lowercase hex digest", None, lock)
        return report
    version = artifact.get("artifact_version")
    if version not in REFERENCE_VERSIONS:
        report.tampered(
            "artifact_version",
            f"unknown reference artifact version (known: {', '.join(REFERENCE_VERSIONS)})",
            None,
            version,
        )
        return report
    if version != "2" and "env" not in artifact:
        report.tampered(
            "env", f"artifact_version {version!r} requires an env block (covered by its lock)"
        )
    created = artifact.get("created_utc")
    if created is not None and not _valid_timestamp(created):
        report.tampered("created_utc", "not an ISO-8601 timestamp", None, created)
    found = reference_lock(artifact)
    if not hmac.compare_digest(found, lock):
        report.tampered("analysis_lock", "the artifact does not match its lock", lock, found)
    elif report.status == "intact":
        report.notes.append(f"reference analysis_lock ok (artifact_version {version})")
    return report


def _valid_timestamp(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


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
        ``artifact.json``, or a reference-implementation artifact (a JSON file
        with ``analysis_lock``).
    key, dataset, rederive
        As in :func:`verify_artifact` (ignored for reference artifacts, which
        carry no key and no link to a dataset).

    Returns
    -------
    VerifyReport
    """
    p = Path(path)
    report = VerifyReport(source=str(p))
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
