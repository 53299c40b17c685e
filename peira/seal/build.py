"""Writing a sealed run artifact: score the run, fill the payload, lock it, write it whole.

:func:`derive` computes the ``metrics`` and ``bootstrap_plan`` blocks of one
run (verification re-derives them the same way); :func:`build_artifact`
assembles and locks the payload in memory; :func:`seal` writes the artifact
directory atomically.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from ..bootstrap import ResamplePlan, plan_for_cases, ratio_intervals
from ..canonical import CanonicalJSONError, pretty_json
from ..errors import ArtifactExistsError, PeiraError, PeiraWarning
from ..integrity.hashes import DATASET_SCHEME, dataset_hash, results_hash, results_scheme
from ..integrity.keys import compute_lock
from ..io import Dataset, atomic_dir, check_output, write_parquet
from ..schema import RESPONSE_KEY, RESPONSES_SCHEMA
from ._layout import ARTIFACT_FILE, FORMAT, FORMAT_VERSION, RESPONSES_FILE

__all__ = ["ArtifactExistsError", "SealConfig", "build_artifact", "derive", "seal"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class SealConfig:
    """How a run is scored for its artifact (all recorded in ``config`` and the plan block).

    Attributes
    ----------
    split
        Score only cases of this split (``"public"``, ``"holdout"``), or all (None).
    missing
        Missing-arm policy of :func:`peira._pairs.build_pairs`.
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
        from ..metrics import SEVERITY_WEIGHTS, GateThresholds

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
        the run except ``run_id`` (the names of docs/spec/scoring-rule.md; null where undefined; floats
        exactly as computed), and ``<m>_lo``/``<m>_hi`` of every ratio metric
        from the plan below, so that re-derivation checks the intervals too. ``bootstrap_plan``: n_resamples, seed, unit,
        method, fingerprint.
    """
    from .._pairs import build_pairs
    from ..metrics import GateThresholds, metric_table

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
    from .._version import __version__

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
