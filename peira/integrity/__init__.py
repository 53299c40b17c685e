"""Integrity primitives that sealing, holdouts, runs and reports build on.

- :mod:`~peira.integrity.keys`: reading a secret key, the lock of a payload;
- :mod:`~peira.integrity.hashes`: content hashes of a dataset and of a response log.
"""

from __future__ import annotations

from .hashes import (
    DATASET_SCHEME,
    RESULTS_SCHEME,
    RESULTS_SCHEME_ALL,
    dataset_hash,
    results_hash,
    results_scheme,
)
from .keys import MIN_KEY_BYTES, SEAL_KEY_ENV, KeyMaterialError, compute_lock, load_key

__all__ = [
    "DATASET_SCHEME",
    "MIN_KEY_BYTES",
    "RESULTS_SCHEME",
    "RESULTS_SCHEME_ALL",
    "SEAL_KEY_ENV",
    "KeyMaterialError",
    "compute_lock",
    "dataset_hash",
    "load_key",
    "results_hash",
    "results_scheme",
]
