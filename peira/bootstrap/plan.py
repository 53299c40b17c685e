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
- Memory: a plan stores no more than its fingerprint; ``W`` is regenerated
  from the seed in blocks of resamples (:meth:`ResamplePlan.counts`,
  :meth:`ResamplePlan.iter_counts`), so a plan over 1,000,000 clusters costs
  O(block × C) memory, never O(B × C). Any block of rows equals the same rows
  of the whole matrix bit for bit: every draw has a fixed place in the stream
  (``PCG64.advance``). Small plans (B·C ≤ :data:`CACHE_DRAWS`) keep ``W`` once
  it is first needed.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
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
    warn,
)
from ._arrays import I64

__all__ = [
    "BLOCK_DRAWS",
    "CACHE_DRAWS",
    "FINGERPRINT_ROWS",
    "MIN_CLUSTERS",
    "SEED_LIMIT",
    "TYPED_BLOCK_BYTES",
    "TYPED_BLOCK_FACTOR",
    "TYPE_MEMO_BYTES",
    "FewClustersWarning",
    "PeiraWarning",
    "PlanMismatchError",
    "ResamplePlan",
    "Unit",
    "holdout_seed",
    "make_plan",
    "plan_fingerprint",
    "plan_for_cases",
    "preload_for",
    "preload_kernels",
    "warn_few_clusters",
]

Unit = Literal["cluster", "case"]

MIN_CLUSTERS = 30
"""Below this many clusters in a plan, intervals carry ``few_clusters`` and a warning."""
FINGERPRINT_ROWS = 32
"""Rows of ``W`` covered by the fingerprint."""
_FP_TAG = b"peira/resample-plan/v1"
CACHE_DRAWS = 1 << 26
"""Plans with B·C at most this (64 MB of uint8 counts) keep ``W`` once it is built."""
BLOCK_DRAWS = 1 << 20
"""Draws generated per block when a plan is streamed (rows = max(1, this // C))."""
NUMPY_DRAWS = 1 << 25
"""Plans with B·C at most this are counted with numpy; larger ones with the compiled
kernels (:mod:`peira.bootstrap._kernels`), whose start-up (importing numba and loading
the cached machine code, about a second) costs more than a small plan's whole count.
Both give the same counts to the bit."""
TYPED_BLOCK_FACTOR = 8
"""Blocks counted per type (:meth:`ResamplePlan.iter_counts` with ``types``) hold this many
times the rows of an untyped block: a block is a few rows × T integers rather than
rows × C counts, so longer blocks cost little memory and pay each block's fixed costs
(its generator state, a thread hand-off, the caller's per-block numpy work) less often."""
TYPED_BLOCK_BYTES = 1 << 24
"""At most this many bytes of int64 counts per typed block (rows × T × 8)."""
TYPE_MEMO_BYTES = 1 << 26
"""A whole pass counted per type (:meth:`ResamplePlan.iter_counts` with ``types``) is kept
when its B × T int32 counts fit in this many bytes: later passes over the same partition
(the leaderboard's intervals, duels and replicates) read it instead of drawing again."""


# ---------------------------------------------------------------- plans


def _workers() -> int:
    """Threads for generating blocks (the CPUs this process may use, at most 8)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n))


_LOADER: list[threading.Thread] = []
_LOADER_LOCK = threading.Lock()


def _load_kernels() -> None:
    try:
        from . import _kernels  # numba

        _kernels.warm()
    except Exception:  # the first caller imports again and meets the error itself
        return


def preload_kernels() -> None:
    """Start loading the compiled kernels on a background thread, once per process.

    Importing numba and loading the kernels' cached machine code takes about
    a second of a process that will count a large plan; started when such a
    plan is made, it overlaps the reading and reducing of the data that
    follow (polars releases the GIL). Nothing waits for the thread: whoever
    needs a kernel imports :mod:`peira.bootstrap._kernels` as before, and
    Python's import lock and numba's compiler lock make it wait for the part
    in progress. A failure on the thread is left to that import to raise, in
    the caller's thread. The thread is not a daemon: the interpreter lets it
    finish before exiting.
    """
    with _LOADER_LOCK:
        if _LOADER or "peira.bootstrap._kernels" in sys.modules:
            return
        thread = threading.Thread(target=_load_kernels, name="peira-kernels")
        _LOADER.append(thread)
    thread.start()


def preload_for(n_clusters: int, n_resamples: int) -> None:
    """:func:`preload_kernels` when a plan of this size will be counted by the kernels.

    For callers that know the size of the plan before making it (the command
    line reads the number of clusters off the cases table first), so that
    loading the kernels overlaps reading and validating the data.
    """
    if n_clusters > 0 and _compiled(n_clusters, n_resamples):
        preload_kernels()


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


def _compiled(n_clusters: int, n_resamples: int) -> bool:
    """Whether a plan's counts come from the compiled kernels (:data:`NUMPY_DRAWS`)."""
    return n_clusters * n_resamples > NUMPY_DRAWS


def _count_block(
    seed: int,
    n_clusters: int,
    start: int,
    stop: int,
    types: npt.NDArray[Any] | None = None,
    n_types: int = 0,
    *,
    compiled: bool = True,
) -> npt.NDArray[Any]:
    """Counts of resamples ``start .. stop - 1``: rows × C, or rows × n_types by ``types``.

    With ``types`` (the type of each cluster), entry [b, t] counts the draws
    of resample b that fall on a cluster of type t: the row of ``W`` summed
    over the clusters of each type, without forming it. ``compiled``: count
    in the compiled kernels (one pass, no draw stored) or, for small plans,
    with numpy from the drawn indices; the counts and their dtypes are the same.
    """
    if not compiled:
        return _count_block_numpy(seed, n_clusters, start, stop, types, n_types)
    from ._kernels import count_block, count_types_block, pcg_state  # numba, on first use

    rows = stop - start
    state = pcg_state(seed, start * n_clusters)
    if types is None:
        return count_block(state, n_clusters, rows)
    return count_types_block(state, n_clusters, rows, types, n_types)


def _count_block_numpy(
    seed: int,
    n_clusters: int,
    start: int,
    stop: int,
    types: npt.NDArray[Any] | None,
    n_types: int,
) -> npt.NDArray[Any]:
    """:func:`_count_block` with numpy: uint8 counts per cluster (int64 if one passes 255),
    int64 counts per type, as the kernels return them."""
    rows = stop - start
    cells = _draw_block(seed, n_clusters, start, stop).astype(np.int64)
    width = n_clusters
    if types is not None:
        cells = np.asarray(types, dtype=np.int64)[cells]
        width = n_types
    cells += (np.arange(rows, dtype=np.int64) * width)[:, None]
    counts = np.bincount(cells.ravel(), minlength=rows * width).reshape(rows, width)
    if types is None and (not counts.size or int(counts.max()) <= 0xFF):
        return counts.astype(np.uint8)
    return counts


def _canonical_types(types: I64) -> tuple[I64, I64]:
    """The partition ``types`` describes, labelled by first appearance, and the caller's
    label of each canonical type (two labellings of one partition give the same array)."""
    uniq, first, inv = np.unique(types, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[inv.ravel()], uniq[order]


def _narrow(counts: I64) -> npt.NDArray[np.unsignedinteger[Any]]:
    """Counts in the smallest unsigned type that holds them (uint8 in practice)."""
    top = int(counts.max()) if counts.size else 0
    dtype = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32
    return counts.astype(dtype)


_W_MEMO: OrderedDict[tuple[int, ...], npt.NDArray[np.unsignedinteger[Any]]] = OrderedDict()
_W_MEMO_LOCK = threading.Lock()


def _counts(seed: int, n_clusters: int, n_resamples: int) -> npt.NDArray[np.unsignedinteger[Any]]:
    """The whole B × C count matrix (read-only).

    ``W`` depends on (seed, C, B) only, not on the labels: plans of the same
    size and seed (a split's plan made twice, by the leaderboard and by the
    holdout check) share one, kept while the matrices held stay within
    :data:`CACHE_DRAWS` bytes in all (least recently used dropped first).
    """
    key = (seed, n_clusters, n_resamples, BLOCK_DRAWS, NUMPY_DRAWS)  # how it is generated too
    with _W_MEMO_LOCK:
        held = _W_MEMO.get(key)
        if held is not None:
            _W_MEMO.move_to_end(key)
            return held
    w = _generate_counts(seed, n_clusters, n_resamples)
    if w.nbytes <= CACHE_DRAWS:
        with _W_MEMO_LOCK:
            _W_MEMO[key] = w
            while sum(x.nbytes for x in _W_MEMO.values()) > CACHE_DRAWS:
                _W_MEMO.popitem(last=False)
    return w


def _generate_counts(
    seed: int, n_clusters: int, n_resamples: int
) -> npt.NDArray[np.unsignedinteger[Any]]:
    rows = max(1, BLOCK_DRAWS // n_clusters)
    compiled = _compiled(n_clusters, n_resamples)
    parts = [
        _count_block(seed, n_clusters, s, min(n_resamples, s + rows), compiled=compiled)
        for s in range(0, n_resamples, rows)
    ]
    w = _narrow(np.concatenate(parts) if len(parts) > 1 else parts[0])
    w.setflags(write=False)
    return w


def plan_fingerprint(w: npt.NDArray[Any], n_resamples: int | None = None) -> str:
    """SHA-256 (hex) of a plan's count matrix ``W`` (B × C).

    Parameters
    ----------
    w
        ``W``, or at least its first min(32, B) rows.
    n_resamples
        B, when ``w`` holds only the first rows (default: ``w.shape[0]``).

    Notes
    -----
    Hashes, in order: the ASCII bytes ``peira/resample-plan/v1``; B and C as
    little-endian uint64; the first min(32, B) rows of ``W``, row-major, as
    little-endian uint32.
    """
    b = w.shape[0] if n_resamples is None else n_resamples
    c = w.shape[1]
    if w.shape[0] < min(FINGERPRINT_ROWS, b):
        raise PeiraValueError(
            f"plan_fingerprint needs the first {min(FINGERPRINT_ROWS, b)} rows of W"
        )
    h = hashlib.sha256(_FP_TAG)
    h.update(struct.pack("<QQ", b, c))
    h.update(np.ascontiguousarray(w[:FINGERPRINT_ROWS], dtype="<u4").tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class ResamplePlan:
    """A deterministic bootstrap resample plan: a B × C matrix of cluster counts.

    The plan keeps its definition (clusters, B, seed) and fingerprint;
    ``W`` is generated from the seed, whole (:attr:`W`, for small plans) or
    in blocks of resamples (:meth:`iter_counts`), identical either way.

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
    fingerprint : str
        :func:`plan_fingerprint` of ``W``.
    """

    clusters: tuple[str, ...]
    n_resamples: int
    seed: int
    unit: Unit
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

    @cached_property
    def W(self) -> npt.NDArray[np.unsignedinteger[Any]]:
        """B × C read-only unsigned counts; row b sums to C.

        Built on first access and kept. B·C bytes: for large plans use
        :meth:`iter_counts` (blocks of rows), as the library itself does.
        """
        return _counts(self.seed, self.n_clusters, self.n_resamples)

    @property
    def cached(self) -> bool:
        """Whether ``W`` is (or will be, on first use) held whole: B·C ≤ :data:`CACHE_DRAWS`."""
        return "W" in self.__dict__ or self.n_resamples * self.n_clusters <= CACHE_DRAWS

    def block_rows(self, width: int | None = None) -> int:
        """Resamples per block for :meth:`iter_counts` (about :data:`BLOCK_DRAWS` draws)."""
        return max(1, BLOCK_DRAWS // max(1, self.n_clusters if width is None else width))

    def _typed_rows(self, n_types: int) -> int:
        """Resamples per block of a pass counted per type (:data:`TYPED_BLOCK_FACTOR`):
        within :data:`TYPED_BLOCK_BYTES`, and short enough to give every worker thread
        two blocks."""
        rows = self.block_rows() * TYPED_BLOCK_FACTOR
        rows = min(rows, TYPED_BLOCK_BYTES // (8 * max(1, n_types)))
        rows = min(rows, -(-self.n_resamples // (2 * _workers())))
        return max(1, rows)

    def counts(self, start: int = 0, stop: int | None = None) -> npt.NDArray[Any]:
        """Rows ``start .. stop - 1`` of ``W`` (equal to ``W[start:stop]``, without building W)."""
        stop = self._check_range(start, stop)
        if self.cached:
            return self.W[start:stop]
        compiled = _compiled(self.n_clusters, self.n_resamples)
        return _narrow(_count_block(self.seed, self.n_clusters, start, stop, compiled=compiled))

    def iter_counts(
        self,
        rows: int | None = None,
        *,
        types: npt.ArrayLike | None = None,
        start: int = 0,
        stop: int | None = None,
    ) -> Iterator[tuple[int, int, npt.NDArray[Any]]]:
        """Blocks ``(s, e, counts)`` of ``W[s:e]`` for s = start, start + rows, …, in order.

        Parameters
        ----------
        rows
            Resamples per block (default :meth:`block_rows`, or with ``types``
            :data:`TYPED_BLOCK_FACTOR` times that, see :meth:`_typed_rows`).
        types
            Optional type (0 … T − 1) of each of the C clusters: each block is
            then the (e − s) × T matrix of draws per type, ``W[s:e]`` summed
            over the clusters of each type, computed from the draws directly.
        start, stop
            The resamples to cover (default all).

        Notes
        -----
        Blocks of a large plan are generated ahead on worker threads, each
        from its own ``PCG64`` advanced to the block's first draw, so the
        counts do not depend on ``rows`` nor on the threads. Memory: a few
        blocks of rows × C draws. A whole pass per type is kept when small
        (:data:`TYPE_MEMO_BYTES`); a later pass over the same partition of
        the clusters, however its types are numbered, reads it.
        """
        stop = self._check_range(start, stop)
        c = self.n_clusters
        t_arr: npt.NDArray[Any] | None = None
        n_types = c
        if types is not None:
            t_arr = np.ascontiguousarray(types, dtype=np.int64)
            if t_arr.shape != (c,) or (c and (t_arr.min() < 0)):
                raise PeiraValueError(f"types must hold one non-negative type per cluster ({c})")
            n_types = int(t_arr.max()) + 1 if c else 0
            # the smallest type that holds them: a lookup per draw stays in cache
            small = np.uint8 if n_types <= 1 << 8 else np.uint16 if n_types <= 1 << 16 else None
            if small is not None:
                t_arr = t_arr.astype(small)
        if rows is not None:
            step = _check_int("rows", rows, 1)
        elif t_arr is not None:
            step = self._typed_rows(n_types)
        else:
            step = self.block_rows()
        bounds = [(s, min(stop, s + step)) for s in range(start, stop, step)]
        if t_arr is None and self.cached:
            w = self.W
            for s, e in bounds:
                yield s, e, w[s:e]
            return
        if t_arr is None:
            yield from self._generate(bounds, None, c)
            return
        canon, labels = _canonical_types(t_arr)
        key = hashlib.sha256(canon.tobytes()).hexdigest()
        memo = self._type_counts.get(key)
        if memo is not None and np.array_equal(memo[0], canon):
            for s, e in bounds:
                block = np.zeros((e - s, n_types), dtype=np.int64)
                block[:, labels] = memo[1][s:e]
                yield s, e, block
            return
        n_canon = labels.size
        keep = (
            start == 0
            and stop == self.n_resamples
            and self.n_resamples * n_canon * 4 <= TYPE_MEMO_BYTES
        )
        store = np.empty((self.n_resamples, n_canon), dtype=np.int32) if keep else None
        for s, e, block in self._generate(bounds, t_arr, n_types):
            if store is not None:
                store[s:e] = block[:, labels]
            yield s, e, block
        if store is not None:
            store.setflags(write=False)
            self._type_counts[key] = (canon, store)

    @cached_property
    def _type_counts(self) -> dict[str, tuple[I64, npt.NDArray[np.int32]]]:
        """Counts per type of whole passes typed by a partition of the clusters (small ones)."""
        return {}

    def _generate(
        self, bounds: list[tuple[int, int]], t_arr: npt.NDArray[Any] | None, n_types: int
    ) -> Iterator[tuple[int, int, npt.NDArray[Any]]]:
        """Blocks of counts (per cluster, or per type with ``t_arr``), generated ahead on threads."""
        c = self.n_clusters
        compiled = _compiled(c, self.n_resamples)
        if len(bounds) <= 1 or not compiled:
            for s, e in bounds:
                yield s, e, _count_block(self.seed, c, s, e, t_arr, n_types, compiled=compiled)
            return
        k = _workers()
        with ThreadPoolExecutor(k) as pool:
            ahead: deque[tuple[int, int, Future[npt.NDArray[Any]]]] = deque()
            for s, e in bounds:
                ahead.append((s, e, pool.submit(_count_block, self.seed, c, s, e, t_arr, n_types)))
                if len(ahead) > k:
                    a, b, f = ahead.popleft()
                    yield a, b, f.result()
            while ahead:
                a, b, f = ahead.popleft()
                yield a, b, f.result()

    @cached_property
    def _labels(self) -> pl.Series:
        return pl.Series("label", self.clusters, dtype=pl.String)

    def _check_range(self, start: int, stop: int | None) -> int:
        stop = self.n_resamples if stop is None else stop
        if not 0 <= start <= stop <= self.n_resamples:
            raise PeiraValueError(f"need 0 <= start <= stop <= {self.n_resamples}")
        return stop

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
        known = self._labels
        if s.len() == known.len() and s.equals(known):  # the plan's own labels, in order
            return np.arange(s.len(), dtype=np.int64)
        # the labels are sorted (code-point order, as polars sorts strings): a binary
        # search finds each one's place, and the label there says whether it is known
        if known.is_sorted():
            pos = known.search_sorted(s, side="left").clip(upper_bound=known.len() - 1)
            hit = (known.gather(pos) == s).fill_null(False)
        else:  # a plan made by hand from unsorted labels
            index = known.to_frame().with_row_index("_i")
            pos = s.to_frame().join(index, on="label", how="left", maintain_order="left")["_i"]
            hit = pos.is_not_null()
            pos = pos.fill_null(0)
        if not hit.all():
            bad = s.filter(~hit).unique(maintain_order=True)
            raise PlanMismatchError(
                f"{source}: {bad.len()} {self.column} value(s) are not in the resample plan "
                f"(first: {bad[0]!r}); the plan holds {self.n_clusters} {self.unit}s of the "
                "cases table for one split. Filter the pairs to that split, or build the plan "
                "from the cases these pairs come from (plan_for_cases)."
            )
        return pos.to_numpy().astype(np.int64)


def _sorted_labels(clusters: Iterable[str]) -> pl.Series:
    """Sorted unique labels (code-point order, as Python sorts str), checked to be strings."""
    if isinstance(clusters, pl.Series) and clusters.dtype == pl.String:
        series = clusters
    else:
        values = list(clusters)
        bad = next((x for x in values if not isinstance(x, str)), None)
        if bad is not None or any(x is None for x in values):
            raise PeiraTypeError(f"cluster labels must be strings, not {bad!r}")
        series = pl.Series(values, dtype=pl.String)
    if series.null_count():
        raise PeiraTypeError("cluster labels must be strings, not None")
    # polars orders strings by their UTF-8 bytes, which is code-point order
    return series.unique().sort().rename("label")


def _stream_fingerprint(seed: int, n_clusters: int, n_resamples: int) -> str:
    """:func:`plan_fingerprint` from the first rows of W, generated a block at a time."""
    rows = min(FINGERPRINT_ROWS, n_resamples)
    h = hashlib.sha256(_FP_TAG)
    h.update(struct.pack("<QQ", n_resamples, n_clusters))
    step = max(1, BLOCK_DRAWS // n_clusters)
    # the fingerprint's rows alone decide: a few rows are counted with numpy even when
    # the rest of the plan will come from the compiled kernels (same counts)
    compiled = _compiled(n_clusters, rows)
    for a in range(0, rows, step):
        block = _count_block(seed, n_clusters, a, min(rows, a + step), compiled=compiled)
        h.update(np.ascontiguousarray(block, dtype="<u4").tobytes())
    return h.hexdigest()


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


#: Largest seed (seeds are stored and hashed as signed 64-bit integers).
SEED_LIMIT = 2**63 - 1


def holdout_seed(seed: int) -> int:
    """The holdout plan's default seed: ``seed + 1``, and 0 after :data:`SEED_LIMIT`.

    Always another seed than ``seed`` (independent bootstraps) and inside the
    seeds' range, so the largest seed works too.

    >>> holdout_seed(0), holdout_seed(SEED_LIMIT)
    (1, 0)
    """
    return seed + 1 if seed < SEED_LIMIT else 0


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
    fingerprint is :func:`plan_fingerprint` of ``W``; only its first rows are
    generated here, the rest when a statistic needs them.

    Examples
    --------
    >>> plan = make_plan(["s2", "s1", "s3", "s1"], n_resamples=4)
    >>> plan.clusters, plan.W.shape, [int(r.sum()) for r in plan.W]
    (('s1', 's2', 's3'), (4, 3), [3, 3, 3, 3])
    """
    series = _sorted_labels(clusters)
    labs = tuple(series.to_list())
    if not labs:
        raise PeiraValueError("make_plan: no clusters")
    if len(labs) >= 1 << 32:
        raise PeiraValueError("make_plan: at most 2**32 - 1 clusters")
    b = _check_int("n_resamples", n_resamples, 1)
    s = _check_int("seed", seed, 0)
    if _compiled(len(labs), b):
        preload_kernels()
    plan = ResamplePlan(labs, b, s, _check_unit(unit), _stream_fingerprint(s, len(labs), b))
    plan.__dict__["_labels"] = series  # the labels as polars holds them (:meth:`index_of`)
    return plan


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
    return make_plan(vals, n_resamples=n_resamples, seed=seed, unit=u)


def warn_few_clusters(plan: ResamplePlan) -> None:
    """Warn (:class:`FewClustersWarning`) when the plan has fewer than 30 clusters."""
    if plan.few_clusters:
        warn(
            f"the resample plan has {plan.n_clusters} {plan.unit}s (< {MIN_CLUSTERS}); "
            "bootstrap intervals are unreliable with so few clusters (rows carry "
            "few_clusters=true)",
            FewClustersWarning,
        )
