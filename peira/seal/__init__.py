"""Sealed run artifacts: seal a run, verify an artifact, re-derive its metrics (docs/spec/artifacts.md).

A *run artifact* is a directory holding ``responses.parquet`` (the run's
response log) and ``artifact.json`` (the payload plus its ``lock``); its shape
is in :mod:`~peira.seal._layout`. This package is a face; the parts live in

- :mod:`~peira.seal.build`: :class:`SealConfig`, :func:`derive`,
  :func:`build_artifact` and :func:`seal`;
- :mod:`~peira.seal.verification`: :func:`verify` and :func:`verify_artifact`;
- :mod:`~peira.seal.reference`: artifacts of the reference implementation;
- :mod:`~peira.seal.findings`: :class:`Finding` and :class:`VerifyReport`;
- :mod:`peira.integrity`: keys, locks and content hashes (used by holdouts,
  runs and reports too);
- :mod:`peira.canonical`: the canonical JSON everything is locked over.
"""

from __future__ import annotations

from ..canonical import CanonicalJSONError, canonical_json
from ..integrity import (
    DATASET_SCHEME,
    MIN_KEY_BYTES,
    RESULTS_SCHEME,
    RESULTS_SCHEME_ALL,
    SEAL_KEY_ENV,
    KeyMaterialError,
    compute_lock,
    dataset_hash,
    load_key,
    results_hash,
    results_scheme,
)
from ._layout import ARTIFACT_FILE, FORMAT, FORMAT_VERSION, LOCK_KINDS, RESPONSES_FILE
from .build import ArtifactExistsError, SealConfig, build_artifact, derive, seal
from .findings import EXIT_INTACT, EXIT_TAMPERED, EXIT_UNREADABLE, Finding, Status, VerifyReport
from .reference import REFERENCE_UNLOCKED, REFERENCE_VERSIONS, reference_lock, verify_reference
from .verification import verify, verify_artifact

__all__ = [
    "ARTIFACT_FILE",
    "DATASET_SCHEME",
    "EXIT_INTACT",
    "EXIT_TAMPERED",
    "EXIT_UNREADABLE",
    "FORMAT",
    "FORMAT_VERSION",
    "LOCK_KINDS",
    "MIN_KEY_BYTES",
    "REFERENCE_UNLOCKED",
    "REFERENCE_VERSIONS",
    "RESPONSES_FILE",
    "RESULTS_SCHEME",
    "RESULTS_SCHEME_ALL",
    "SEAL_KEY_ENV",
    "ArtifactExistsError",
    "CanonicalJSONError",
    "Finding",
    "KeyMaterialError",
    "SealConfig",
    "Status",
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
