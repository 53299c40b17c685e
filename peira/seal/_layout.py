"""The shape of a sealed run artifact: file names, format constants, fields and their types.

A *run artifact* is a directory holding

- ``responses.parquet``: the run's response log (the columns of docs/spec/data-model.md#responses
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
      "metrics": {<every column of metric_table for the run, the names of docs/spec/scoring-rule.md>},
      "bootstrap_plan": {"n_resamples", "seed", "unit", "method", "fingerprint"}
    }

``lock`` = hex SHA-256 of the canonical JSON (:mod:`peira.canonical`) of the payload, or with a
secret key hex HMAC-SHA256(key, canonical JSON); ``lock_kind`` says which and
is itself covered. The key is never written, logged or put in a message.
"""

from __future__ import annotations

import re

__all__ = [
    "ARTIFACT_FILE",
    "BLOCK_FIELDS",
    "FORMAT",
    "FORMAT_VERSION",
    "HEX64",
    "LOCK_KINDS",
    "RESPONSES_FILE",
    "TOP_TYPES",
]

FORMAT = "peira-run-artifact"
FORMAT_VERSION = 1
ARTIFACT_FILE = "artifact.json"
RESPONSES_FILE = "responses.parquet"
LOCK_KINDS = ("sha256", "hmac-sha256")

#: A lock: 64 lowercase hex digits.
HEX64 = re.compile(r"[0-9a-f]{64}")

#: Top-level fields of ``artifact.json`` and their types.
TOP_TYPES: dict[str, type | tuple[type, ...]] = {
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
BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
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
