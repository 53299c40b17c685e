"""Compatibility mode: the reference implementation's intervals, for parity checks (docs/spec/uncertainty.md#compatibility-mode).

The reference harness reports Wilson score intervals for its headline rates
and runs a case-level bootstrap driven by Python's ``random.Random(seed)``:
for each of B resamples it draws n case indices with ``randrange(n)``, in
order, takes the statistic of the resampled cases, sorts the B values and
reads the order statistics at ``int(0.025 * B)`` and ``int(0.975 * B)``.
It has no cluster bootstrap. These functions reproduce both, so published
reference numbers can be checked; new results should use the cluster
bootstrap of :mod:`peira.bootstrap`.
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from ..errors import PeiraTypeError, PeiraValueError
from .intervals import BootstrapResult

__all__ = ["Z95", "compat_bootstrap", "compat_draws", "wilson_interval"]

Z95 = 1.959963984540054
"""Φ⁻¹(0.975), the z of a 95% Wilson interval."""
_TAG = b"peira/compat-plan/v1"
_CHUNK = 1 << 20
FIRST_ROWS = 32


def wilson_interval(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k / n.

    Parameters
    ----------
    k, n
        Successes and trials (0 ≤ k ≤ n, n ≥ 1).
    level
        Confidence level (default 0.95, z = 1.959963984540054).

    Returns
    -------
    tuple of float
        (low, high), clipped to [0, 1].

    Notes
    -----
    With p = k/n and z = Φ⁻¹(1 − α/2):
    centre = (p + z²/2n) / (1 + z²/n),
    half-width = z·√(p(1 − p)/n + z²/4n²) / (1 + z²/n).
    The rate's direction of "better" is the caller's.

    Examples
    --------
    >>> lo, hi = wilson_interval(41, 100)
    >>> round(lo, 3), round(hi, 3)
    (0.319, 0.508)
    """
    for name, v in (("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise PeiraTypeError(f"{name} must be an integer, not {v!r}")
    if n < 1 or not 0 <= k <= n:
        raise PeiraValueError(f"need 0 <= k <= n and n >= 1, not k={k}, n={n}")
    if not 0 < level < 1:
        raise PeiraValueError(f"level must be in (0, 1), not {level!r}")
    if level == 0.95:
        z = Z95
    else:
        from scipy.special import ndtri  # scipy loads only for another level

        z = float(ndtri(1 - (1 - level) / 2))
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _mt_from_python(seed: int | str | bytes) -> np.random.MT19937:
    """A numpy MT19937 in the exact state of ``random.Random(seed)``."""
    state = random.Random(seed).getstate()[1]
    bg = np.random.MT19937()
    bg.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(state[:624], dtype=np.uint32), "pos": int(state[624])},
    }
    return bg


def _draw_chunks(
    n: int, n_resamples: int, seed: int | str | bytes, rows: int
) -> Iterator[npt.NDArray[np.int64]]:
    """Successive blocks of up to ``rows`` resamples of :func:`compat_draws`."""
    if n < 1 or n > 1 << 32:
        raise PeiraValueError(f"n must be in [1, 2**32], not {n}")
    bg = _mt_from_python(seed)
    shift = np.uint64(32 - n.bit_length())
    pending = np.empty(0, dtype=np.int64)
    for start in range(0, n_resamples, rows):
        need = min(rows, n_resamples - start) * n
        parts, have = [pending], pending.size
        while have < need:
            r = np.asarray(bg.random_raw(2 * (need - have) + 64), dtype=np.uint64) >> shift
            kept = r[r < n].astype(np.int64)
            parts.append(kept)
            have += kept.size
        got = np.concatenate(parts)
        pending = got[need:]
        yield got[:need].reshape(-1, n)


def compat_draws(n: int, n_resamples: int, seed: int | str | bytes = 0) -> npt.NDArray[np.int64]:
    """The indices ``random.Random(seed).randrange(n)`` yields, B × n in call order.

    Notes
    -----
    CPython's ``randrange(n)`` takes k = n.bit_length() bits of one 32-bit
    Mersenne Twister output (``output >> (32 − k)``) and rejects values
    ≥ n. The same outputs come from numpy's MT19937 set to the state of
    ``random.Random(seed)``, so the draws are vectorised here; the test suite
    checks them against ``random.Random`` itself. Needs 1 ≤ n ≤ 2³².

    Examples
    --------
    >>> import random
    >>> rng = random.Random(3)
    >>> compat_draws(7, 2, seed=3).tolist() == [[rng.randrange(7) for _ in range(7)] for _ in range(2)]
    True
    """
    return np.concatenate(list(_draw_chunks(n, n_resamples, seed, max(1, _CHUNK // n))))


def compat_bootstrap(
    flags: Sequence[bool] | Sequence[float] | npt.ArrayLike,
    *,
    n_resamples: int = 10_000,
    seed: int | str | bytes = 0,
    denominator: Sequence[bool] | npt.ArrayLike | None = None,
) -> BootstrapResult:
    """The reference implementation's case-level bootstrap of a rate.

    Parameters
    ----------
    flags
        Per-case values, e.g. the flip flags of the eligible pairs (the
        reference's ASR); bools or numbers.
    n_resamples
        B (default 10,000).
    seed
        Seed of ``random.Random`` (default 0).
    denominator
        Optional per-case denominators: the statistic becomes
        Σ flags / Σ denominator over the resampled cases, and resamples with
        an empty denominator are dropped and counted.

    Returns
    -------
    BootstrapResult
        ``method="compat-percentile"``; ``low`` and ``high`` are the sorted
        statistics at ``int(0.025 * B')`` and ``int(0.975 * B')`` (B' defined
        resamples; B' = B without a denominator). ``fingerprint`` is the
        SHA-256 of ``peira/compat-plan/v1``, B and n (little-endian uint64)
        and the first min(32, B) resamples' indices (little-endian uint32).

    Notes
    -----
    Resample b draws n indices with ``randrange(n)``; its statistic is
    Σ flags[i] / n, or the ratio with the denominator, summed left to right
    (bit-identical to a Python loop for 0/1 flags; Python ≥ 3.12's ``sum``
    of non-integer floats is compensated and may differ in the last bit).
    The estimate is the full-data value.

    Examples
    --------
    >>> r = compat_bootstrap([True] * 41 + [False] * 59, n_resamples=1000)
    >>> r.estimate, r.method, r.low < 0.41 < r.high
    (0.41, 'compat-percentile', True)
    """
    x = np.asarray(flags, dtype=np.float64).ravel()
    n = x.size
    if n == 0:
        raise PeiraValueError("compat_bootstrap: no cases")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise PeiraValueError(f"n_resamples must be an integer >= 1, not {n_resamples!r}")
    d = None if denominator is None else np.asarray(denominator, dtype=np.float64).ravel()
    if d is not None and d.size != n:
        raise PeiraValueError(f"denominator has {d.size} values for {n} cases")
    stat = np.full(n_resamples, np.nan)
    head: list[npt.NDArray[np.int64]] = []
    at = 0
    for idx in _draw_chunks(n, n_resamples, seed, max(1, _CHUNK // n)):
        if at < FIRST_ROWS:
            head.append(idx[: FIRST_ROWS - at])
        num = np.cumsum(x[idx], axis=1)[:, -1]  # left to right, like a Python loop
        if d is None:
            stat[at : at + idx.shape[0]] = num / n
        else:
            den = np.cumsum(d[idx], axis=1)[:, -1]
            np.divide(num, den, out=stat[at : at + idx.shape[0]], where=den != 0)
        at += idx.shape[0]
    tot_num = float(np.cumsum(x)[-1])
    if d is None:
        est: float | None = tot_num / n
    else:
        tot = float(np.cumsum(d)[-1])
        est = tot_num / tot if tot != 0 else None
    defined = np.sort(stat[~np.isnan(stat)])
    b = defined.size
    h = hashlib.sha256(_TAG)
    h.update(struct.pack("<QQ", n_resamples, n))
    h.update(np.concatenate(head).astype("<u4").tobytes())
    return BootstrapResult(
        estimate=est,
        low=float(defined[int(0.025 * b)]) if b else None,
        high=float(defined[int(0.975 * b)]) if b else None,
        method="compat-percentile",
        n_defined=b,
        fingerprint=h.hexdigest(),
        n_resamples=n_resamples,
        confidence_level=0.95,
        few_clusters=False,
    )
