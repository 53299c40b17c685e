"""Random streams of the generator: one ``PCG64`` generator per (seed, stream, index).

All randomness comes from ``numpy.random.Generator(PCG64(SeedSequence(seed,
spawn_key=(stream, index))))``; no global random state is used, and model
``j`` draws from its own stream, so adding models never changes the responses
of the others.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "STREAM_CASES",
    "STREAM_PARAMS",
    "STREAM_RESPONSES",
    "BoolArray",
    "FloatArray",
    "IntArray",
    "stream_rng",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# Random streams (first element of the SeedSequence spawn_key).
STREAM_CASES = 0
STREAM_PARAMS = 1
STREAM_RESPONSES = 2


def stream_rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    """The generator of one random stream (``index``: e.g. the model)."""
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(stream, index)))
    )
