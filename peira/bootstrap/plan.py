"""Resample plans: the B × C matrix of cluster counts every interval is drawn from (docs/spec/uncertainty.md#the-plan).

- Clusters: the sorted unique ``scenario_id`` (``unit="cluster"``, default)
  or ``case_id`` (``unit="case"``) of the *cases* table for the split
  analysed (:func:`plan_for_cases`), never of the responses, so adding a run
  never changes another run's interval.
- Draws: ``numpy.random.PCG64(numpy.random.SeedSequence(seed))``, raw 64-bit
  outputs (``bit_generator.random_raw``) in order; output number b·C + j
  (0-based) is draw j of resample b and maps to cluster index
  ``((raw >> 32) * C) >> 32`` — our own rule, independent of numpy's
  sampling algorithms. ``W[b, c]`` counts the draws of cluster c in
  resample b, so every row sums to C.
- Fingerprint: SHA-256 (hex) of the ASCII bytes ``peira/resample-plan/v1``,
  then B and C as little-endian uint64, then the first min(32, B) rows of
  ``W`` in row-major order as little-endian uint32 (:func:`plan_fingerprint`).
"""

from __future__ import annotations

import hashlib
import struct
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import (
    FewClustersWarning,
    PeiraTypeError,
    PeiraValueError,
    PeiraWarning,
    PlanMismatchError,
)

__all__ = [
    "FINGERPRINT_ROWS",
    "MIN_CLUSTERS",
    "FewClustersWarning",
    "PeiraWarning",
    "PlanMismatchError",
    "ResamplePlan",
    "Unit",
    "make_plan",
    "plan_fingerprint",
    "plan_for_cases",
    "warn_few_clusters",
]

Unit = Literal["cluster", "case"]
I64 = npt.NDArray[np.int64]

MIN_CLUSTERS = 30
"""Below this many clusters in a plan, intervals carry ``few_clusters`` and a warning."""
FINGERPRINT_ROWS = 32
"""Rows of ``W`` covered by the fingerprint."""
_FP_TAG = b"peira/resample-plan/v1"
_CHUNK_ELEMS = 1 << 18  # draws per generation chunk


# ---------------------------------------------------------------- plans


def _to_index(raw: npt.NDArray[np.uint64], n_clusters: int) -> npt.NDArray[np.uint64]:
    """Map raw 64-bit outputs to cluster indices in place: ((raw >> 32) * C) >> 32."""
    raw >>= np.uint64(32)
    raw *= np.uint64(n_clusters)
    raw >>= np.uint64(32)
    return raw


def _draw_block(seed: int, n_clusters: int, start: int, stop: int) -> npt.NDArray[np.uint64]:
    """Cluster indices of resamples ``start .. stop - 1`` as a (stop − start) × C array."""
    bg = np.random.PCG64(np.random.SeedSequence(seed))
    if start:
        bg.advance(start * n_clusters)
    raw = np.asarray(bg.random_raw((stop - start) * n_clusters), dtype=np.uint64)
    return _to_index(raw, n_clusters).reshape(stop - start, n_clusters)


def _counts(seed: int, n_clusters: int, n_resamples: int) -> npt.NDArray[np.unsignedinteger[Any]]:
    """The B × C count matrix, generated in chunks of rows from one raw stream."""
    rows = max(1, _CHUNK_ELEMS // n_clusters)
    w: npt.NDArray[np.unsignedinteger[Any]] = np.empty((n_resamples, n_clusters), np.uint8)
    off = (np.arange(rows, dtype=np.uint64) * np.uint64(n_clusters))[:, None]
    bg = np.random.PCG64(np.random.SeedSequence(seed))
    for s in range(0, n_resamples, rows):
        e = min(n_resamples, s + rows)
        raw = _to_index(
            np.asarray(bg.random_raw((e - s) * n_clusters), dtype=np.uint64), n_clusters
        )
        flat = (raw.reshape(e - s, n_clusters) + off[: e - s]).ravel().astype(np.intp)
        block = np.bincount(flat, minlength=(e - s) * n_clusters).reshape(e - s, n_clusters)
        top = int(block.max())
        if top > np.iinfo(w.dtype).max:  # practically never: a cluster drawn > 255 times
            w = w.astype(np.uint16 if top <= 0xFFFF else np.uint32)
        w[s:e] = block
    w.setflags(write=False)
    return w


def plan_fingerprint(w: npt.NDArray[Any]) -> str:
    """SHA-256 (hex) of a plan's count matrix ``W`` (B × C).

    Notes
    -----
    Hashes, in order: the ASCII bytes ``peira/resample-plan/v1``; B and C as
    little-endian uint64; the first min(32, B) rows of ``W``, row-major, as
    little-endian uint32.
    """
    b, c = w.shape
    h = hashlib.sha256(_FP_TAG)
    h.update(struct.pack("<QQ", b, c))
    h.update(np.ascontiguousarray(w[:FINGERPRINT_ROWS], dtype="<u4").tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class ResamplePlan:
    """A deterministic bootstrap resample plan: a B × C matrix of cluster counts.

    Attributes
    ----------
    clusters : tuple of str
        Sorted unique cluster labels (scenario_ids, or case_ids for unit "case").
    n_resamples : int
        B.
    seed : int
        Seed of the ``SeedSequence`` behind the draws.
    unit : {"cluster", "case"}
        What the labels are.
    W : numpy.ndarray
        B × C read-only unsigned counts; row b sums to C.
    fingerprint : str
        :func:`plan_fingerprint` of ``W``.
    """

    clusters: tuple[str, ...]
    n_resamples: int
    seed: int
    unit: Unit
    W: npt.NDArray[np.unsignedinteger[Any]] = field(repr=False, compare=False)
    fingerprint: str

    @property
    def n_clusters(self) -> int:
        """C, the number of clusters."""
        return len(self.clusters)

    @property
    def few_clusters(self) -> bool:
        """Whether C < :data:`MIN_CLUSTERS`."""
        return self.n_clusters < MIN_CLUSTERS

    @property
    def column(self) -> str:
        """Column of the pair table holding the labels: ``scenario_id`` or ``case_id``."""
        return "scenario_id" if self.unit == "cluster" else "case_id"

    def draws(self, start: int = 0, stop: int | None = None) -> I64:
        """Cluster indices drawn by resamples ``start .. stop - 1``, in draw order.

        Regenerated from the seed (the plan keeps only the counts); row b of
        the result is what ``W[start + b]`` counts.
        """
        stop = self.n_resamples if stop is None else stop
        if not 0 <= start <= stop <= self.n_resamples:
            raise PeiraValueError(f"draws: need 0 <= start <= stop <= {self.n_resamples}")
        return _draw_block(self.seed, self.n_clusters, start, stop).astype(np.int64)

    def index_of(self, labels: pl.Series | Sequence[str], *, source: str = "data") -> I64:
        """Plan index of each label; raises :class:`PlanMismatchError` on unknown labels."""
        s = pl.Series("label", labels, dtype=pl.String)
        ref = pl.DataFrame(
            {"label": list(self.clusters), "_i": np.arange(self.n_clusters, dtype=np.int64)},
            schema={"label": pl.String, "_i": pl.Int64},
        )
        idx = s.to_frame().join(ref, on="label", how="left", maintain_order="left")["_i"]
        if idx.null_count():
            bad = s.filter(idx.is_null()).unique(maintain_order=True)
            raise PlanMismatchError(
                f"{source}: {bad.len()} {self.column} value(s) are not in the resample plan "
                f"(first: {bad[0]!r}); the plan holds {self.n_clusters} {self.unit}s of the "
                "cases table for one split. Filter the pairs to that split, or build the plan "
                "from the cases these pairs come from (plan_for_cases)."
            )
        return idx.to_numpy().astype(np.int64)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise PeiraTypeError(f"{name} must be an integer, not {value!r}")
    if value < minimum:
        raise PeiraValueError(f"{name} must be >= {minimum}, not {value!r}")
    return int(value)


def _check_unit(unit: str) -> Unit:
    if unit not in ("cluster", "case"):
        raise PeiraValueError(f"unit must be 'cluster' or 'case', not {unit!r}")
    return "cluster" if unit == "cluster" else "case"


def make_plan(
    clusters: Iterable[str],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
) -> ResamplePlan:
    """The resample plan for a list of clusters.

    Parameters
    ----------
    clusters
        Cluster labels; the plan uses their sorted unique values.
    n_resamples
        B (default 10,000).
    seed
        Non-negative seed (default 0).
    unit
        ``"cluster"`` (labels are scenario_ids) or ``"case"`` (case_ids).

    Returns
    -------
    ResamplePlan

    Notes
    -----
    Draw j of resample b is raw output b·C + j of
    ``PCG64(SeedSequence(seed))``, mapped to cluster ((raw >> 32)·C) >> 32;
    ``W[b, c]`` counts the draws of cluster c, so Σ_c W[b, c] = C. The
    fingerprint is :func:`plan_fingerprint` of ``W``.

    Examples
    --------
    >>> plan = make_plan(["s2", "s1", "s3", "s1"], n_resamples=4)
    >>> plan.clusters, plan.W.shape, [int(r.sum()) for r in plan.W]
    (('s1', 's2', 's3'), (4, 3), [3, 3, 3, 3])
    """
    labels = list(clusters)
    if any(not isinstance(x, str) for x in labels):
        bad = next(x for x in labels if not isinstance(x, str))
        raise PeiraTypeError(f"cluster labels must be strings, not {bad!r}")
    labs = tuple(sorted(set(labels)))
    if not labs:
        raise PeiraValueError("make_plan: no clusters")
    if len(labs) >= 1 << 32:
        raise PeiraValueError("make_plan: at most 2**32 - 1 clusters")
    b = _check_int("n_resamples", n_resamples, 1)
    s = _check_int("seed", seed, 0)
    w = _counts(s, len(labs), b)
    return ResamplePlan(labs, b, s, _check_unit(unit), w, plan_fingerprint(w))


def plan_for_cases(
    cases: pl.DataFrame | pl.LazyFrame,
    *,
    split: str | None = None,
    unit: Unit = "cluster",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> ResamplePlan:
    """The resample plan of a dataset (its cases table) for one split.

    Parameters
    ----------
    cases
        The cases table (docs/spec/data-model.md#cases).
    split
        ``"public"``, ``"holdout"`` or None (all cases).
    unit
        ``"cluster"`` (default): the sorted unique ``scenario_id``; ``"case"``:
        the sorted unique ``case_id``.
    n_resamples, seed
        As in :func:`make_plan`.

    Raises
    ------
    ValueError
        No cases in the split, or null labels.

    Notes
    -----
    The clusters come from the cases table, never from responses, so the
    plan — and every run's interval — does not depend on which runs exist.
    """
    u = _check_unit(unit)
    col = "scenario_id" if u == "cluster" else "case_id"
    lf = cases.lazy()
    if split is not None:
        lf = lf.filter(pl.col("split") == split)
    vals = lf.select(pl.col(col).cast(pl.String).unique()).collect()[col]
    if vals.null_count():
        raise PeiraValueError(f"cases: {vals.null_count()} null {col} value(s)")
    if vals.len() == 0:
        where = "" if split is None else f" in split {split!r}"
        raise PeiraValueError(f"cases: no cases{where}; cannot build a resample plan")
    return make_plan(vals.to_list(), n_resamples=n_resamples, seed=seed, unit=u)


def warn_few_clusters(plan: ResamplePlan, stacklevel: int = 3) -> None:
    """Warn (:class:`FewClustersWarning`) when the plan has fewer than 30 clusters."""
    if plan.few_clusters:
        warnings.warn(
            f"the resample plan has {plan.n_clusters} {plan.unit}s (< {MIN_CLUSTERS}); "
            "bootstrap intervals are unreliable with so few clusters (rows carry "
            "few_clusters=true)",
            FewClustersWarning,
            stacklevel=stacklevel,
        )
