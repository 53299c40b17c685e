"""The products of ratio bootstraps: per-cluster sums times every resample, in one GEMM.

A ratio metric of a run (× group) per resample b is
θ_b = (W_b · num) / (W_b · den) over its per-cluster sums
(:func:`peira.metrics.frame.cluster_sums`). Every (run, metric) numerator
and denominator column of a group goes into one matrix S (clusters ×
columns), identical columns are merged (many metrics share ``eligible`` or
"all pairs", and "all pairs" is the same for every run), and one GEMM
``S_uniqueᵀ · Wᵀ`` gives every replicate of the group. The sums are exact:
values that are integers (or multiples of 2^-p) run in float32 while every
partial sum stays below 2^24 — so θ_b is bit-identical to recomputing the
ratio from the resampled pairs in float64 — and in float64 otherwise.

:mod:`peira.bootstrap.ratio` turns these products into intervals,
replicates and paired differences.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import PeiraKeyError, PeiraValueError
from ..metrics.frame import cluster_sums
from ..metrics.ratios import RATIO_METRICS, RatioMetric
from .intervals import F64, I64, Method, RowIntervals, intervals, ratio
from .plan import ResamplePlan

_F32_EXACT = float(1 << 24)
_MAX_DYADIC = 8  # values k·2^-p with p <= 8 may use float32
_NUMPY_VALUES = 1 << 21  # sums checked for their precision with numpy up to this many
_POST_ROWS = 128  # replicate rows per worker task (bounds memory: rows × B float64)
_PROD_BYTES = 1 << 28  # products (K × B float64) formed per pass over the plan
_TYPE_GAIN = 4  # count draws per type of cluster when there are C / 4 types or fewer
_ABS_ROWS = 1 << 16  # clusters per slice when bounding the sums


def _keys(by: str | Sequence[str] | None) -> list[str]:
    extra = [by] if isinstance(by, str) else list(by or [])
    return [k for k in extra if k != "run_id"]


def _resolve_metrics(metrics: Sequence[str | RatioMetric] | None) -> list[RatioMetric]:
    if metrics is None:
        return list(RATIO_METRICS.values())
    out = []
    for m in metrics:
        if isinstance(m, RatioMetric):
            out.append(m)
        else:
            out.append(RATIO_METRICS[m])  # UnknownNameError: "unknown ratio metric …"
    return out


def _sums_input(
    data: pl.DataFrame | pl.LazyFrame,
    plan: ResamplePlan,
    by: list[str],
    metrics: Sequence[str | RatioMetric] | None,
) -> tuple[pl.DataFrame, list[str]]:
    """Per-cluster sums and metric names, from a pair table or a cluster-sums frame."""
    cols = data.collect_schema().names()
    if "eligible" in cols or not any(c.endswith("__num") for c in cols):
        ms = _resolve_metrics(metrics)
        return cluster_sums(data, by, metrics=ms, cluster=plan.column), [m.name for m in ms]
    names = [c[:-5] for c in cols if c.endswith("__num") and f"{c[:-5]}__den" in cols]
    if metrics is not None:
        wanted = [m.name if isinstance(m, RatioMetric) else m for m in metrics]
        missing = [w for w in wanted if w not in names]
        if missing:
            raise PeiraKeyError(f"cluster sums lack the __num/__den columns of {missing}")
        names = wanted
    absent = [c for c in ["run_id", *by, plan.column] if c not in cols]
    if absent:
        raise PeiraKeyError(
            f"cluster sums lack column(s) {absent}; compute them with "
            f"cluster_sums(pairs, by, cluster={plan.column!r})"
        )
    return data.lazy().collect(), names


@dataclass
class _Block:
    """Per-cluster sums of one group: every (run, metric) numerator and denominator."""

    key: tuple[Any, ...] | None  # group values; None = overall
    supp: I64  # plan indices of the clusters with rows
    s: F64  # len(supp) × (R·2M); column 2(r·M + m) = numerator, + 1 = denominator
    present: npt.NDArray[np.bool_]  # (R,) runs with rows in the group


@dataclass
class _Products:
    """W-products of a block's unique columns, and how metric columns map onto them."""

    uniq: F64  # K_u × len(supp): the distinct columns, one per row
    inv_num: I64  # (k,) row of prod of each metric column's numerator
    inv_den: I64
    estimate: F64  # (k,)
    jack: F64 | None  # k × C
    prod: F64 = field(default_factory=lambda: np.empty((0, 0)))  # K_u × B, float64
    zero_den: npt.NDArray[np.bool_] = field(default_factory=lambda: np.empty(0, bool))


def _dedupe(cols: F64) -> tuple[F64, I64]:
    """Unique rows of ``cols`` (k × n) and the inverse index; exact."""
    found = _distinct(cols, None)
    assert found is not None
    return found


def _distinct(cols: F64, limit: int | None) -> tuple[F64, I64] | None:
    """:func:`_dedupe`, or None as soon as the rows are seen to have more than ``limit``
    distinct values (before any exact comparison)."""
    if cols.shape[0] == 0:
        return cols, np.empty(0, np.int64)
    probe = np.random.Generator(np.random.PCG64(0)).random(cols.shape[1])
    h = cols @ probe
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    if limit is not None and first.size > limit:
        return None
    uniq = cols[first]
    inv = np.asarray(inv, dtype=np.int64).ravel()
    step = max(1, (1 << 20) // max(1, cols.shape[1]))  # compared a slice at a time
    same = all(
        np.array_equal(uniq[inv[a : a + step]], cols[a : a + step])
        for a in range(0, cols.shape[0], step)
    )
    if not same:  # a hash collision: exact fallback
        uniq, inv = np.unique(cols, axis=0, return_inverse=True)
    return uniq, np.asarray(inv, dtype=np.int64).ravel()


def _dyadic_precision(v: F64) -> int | None:
    """Smallest p ≤ 8 with every value a multiple of 2^-p, or None.

    Large sums in one compiled pass; small ones with numpy, which spares a
    small job numba's start-up (the same p either way).
    """
    if v.size > _NUMPY_VALUES:
        from ._kernels import dyadic_precision  # numba, on first use

        return dyadic_precision(v, _MAX_DYADIC)
    for p in range(_MAX_DYADIC + 1):
        scaled = v * float(1 << p)
        if np.array_equal(scaled, np.round(scaled)):
            return p
    return None


class _Engine:
    """Blocks of per-cluster sums of one dataset and their products with a plan.

    Products W · s are formed block by block of resamples
    (:meth:`ResamplePlan.iter_counts`), never from a whole B × C matrix. Each
    product is exact when the sums are multiples of 2^-p (p ≤ 8): in float32
    while the block's partial sums stay below 2^24, else in float64; and when
    many clusters share one vector of sums (single-case clusters: a handful of
    flag patterns), the draws are counted per pattern instead of per cluster.
    Either way every θ_b is the same number, whatever the block size.
    """

    def __init__(
        self,
        data: pl.DataFrame | pl.LazyFrame,
        plan: ResamplePlan,
        by: list[str],
        metrics: Sequence[str | RatioMetric] | None,
        overall: bool,
    ) -> None:
        self.plan, self.by = plan, by
        sums, self.metrics = _sums_input(data, plan, by, metrics)
        if sums.height == 0:
            raise PeiraValueError("no pairs to bootstrap")
        nm = len(self.metrics)
        self.runs: list[str] = sorted(sums["run_id"].unique().to_list())
        r = len(self.runs)
        ci = plan.index_of(sums[plan.column], source="pairs")
        ri = sums["run_id"].rank("dense").to_numpy().astype(np.int64) - 1
        vcols = [f"{m}__{p}" for m in self.metrics for p in ("num", "den")]
        v = sums.select(pl.col(vcols).cast(pl.Float64).fill_null(0.0)).to_numpy()
        if not np.isfinite(v).all():
            raise PeiraValueError("cluster sums hold non-finite values")
        groups: list[_Block] = []
        if by:
            gt = sums.select(by).unique().sort(by, nulls_last=False)
            gi = (
                sums.select(by)
                .join(gt.with_row_index("_g"), on=by, how="left", nulls_equal=True)["_g"]
                .to_numpy()
            )
            order = np.argsort(gi, kind="stable")
            bounds = np.flatnonzero(np.diff(gi[order])) + 1
            for k, sl in enumerate(np.split(order, bounds)):
                groups.append(self._block(gt.row(k), ci[sl], ri[sl], v[sl], r, nm))
        else:
            groups.append(self._block(None, ci, ri, v, r, nm))
        self.blocks = list(groups)
        if by and overall:
            full = np.zeros((plan.n_clusters, r * 2 * nm))
            seen = np.zeros(plan.n_clusters, dtype=bool)
            for b in groups:
                full[b.supp] += b.s
                seen[b.supp] = True
            supp = np.flatnonzero(seen)
            present = np.logical_or.reduce([b.present for b in groups])
            self.blocks.append(_Block(None, supp, full[supp], present))
        # float32 is exact when every value is k·2^-p and every partial sum < 2^(24-p)
        self.precision = _dyadic_precision(v)
        bound = np.zeros(r * 2 * nm)
        for b in groups:  # a slice of clusters at a time: no temporary as large as the sums
            for a in range(0, b.s.shape[0], _ABS_ROWS):
                bound += np.abs(b.s[a : a + _ABS_ROWS]).sum(axis=0)
        self.abs_total = float(bound.max()) if bound.size else 0.0

    @staticmethod
    def _block(key: tuple[Any, ...] | None, ci: I64, ri: I64, v: F64, r: int, nm: int) -> _Block:
        if r == 1 and bool((ci[1:] > ci[:-1]).all()):  # one run, its clusters in order
            supp = ci.copy()
            s = np.array(v, dtype=np.float64, order="C")
        else:
            supp, loc = np.unique(ci, return_inverse=True)
            loc = loc.ravel()
            s = np.zeros((supp.size * r, 2 * nm))
            s[loc * r + ri] = v  # row (cluster, run) of the supp × R × 2M array
        present = np.zeros(r, dtype=bool)
        present[ri] = True
        return _Block(key, supp, s.reshape(supp.size, r * 2 * nm), present)

    def prepare(self, block: _Block, cols: I64 | None, jackknife: bool) -> _Products:
        """Unique columns and estimates for metric columns j (run, metric) = divmod(j, M)."""
        k_all = block.s.shape[1] // 2
        j = np.arange(k_all) if cols is None else cols
        sub = block.s[:, np.concatenate([2 * j, 2 * j + 1])]
        uniq, inv = _dedupe(np.ascontiguousarray(sub.T))
        n = j.size
        tot = sub.sum(axis=0)
        est = ratio(tot[:n], tot[n:])
        jack = None
        if jackknife:
            jack = self._jackknife(block, sub, tot, est)
        return _Products(uniq, inv[:n], inv[n:], est, jack)

    def _jackknife(self, block: _Block, sub: F64, tot: F64, est: F64) -> F64:
        """n × C leave-one-cluster-out values of the n metric columns of ``sub``
        (supp × 2n: numerators, then denominators), ``est`` where a cluster has no rows.

        The value without cluster c depends on c's row of sums only, so clusters
        that share one (single-case clusters: a handful of flag patterns) share
        it: computed once per distinct row and gathered, the same numbers.
        """
        n, c = est.size, self.plan.n_clusters
        found = _distinct(sub, sub.shape[0] // _TYPE_GAIN)
        rows, inv = (sub, None) if found is None else found
        vals = ratio(tot[:n] - rows[:, :n], tot[n:] - rows[:, n:]).T  # n × distinct rows
        if inv is not None:
            vals = np.take(vals, inv, axis=1)
        if block.supp.size == c:
            return np.ascontiguousarray(vals)
        jack = np.repeat(est[:, None], c, axis=1)
        jack[:, block.supp] = vals
        return jack

    def products(self, block: _Block, cols: I64 | None, jackknife: bool) -> _Products:
        """:meth:`prepare` and :meth:`fill` for one block."""
        p = self.prepare(block, cols, jackknife)
        self.fill([(block, p)])
        return p

    def _float32_exact(self, wmax: int) -> bool:
        p = self.precision
        return p is not None and self.abs_total * wmax * (1 << p) < _F32_EXACT

    def _types(self, items: Sequence[tuple[_Block, _Products]]) -> tuple[I64, list[F64]] | None:
        """Clusters grouped by their vector of sums over every item, if that pays.

        Returns the type of each plan cluster (type 0: in no item's support
        or all-zero) and, per item, its K_u × T matrix of sums per type.
        """
        c = self.plan.n_clusters
        z = np.zeros((c, len(items)), dtype=np.int64)
        local = []
        for i, (b, p) in enumerate(items):
            tv, tinv = _dedupe(np.ascontiguousarray(p.uniq.T))
            z[b.supp, i] = tinv + 1
            local.append(np.vstack([np.zeros((1, p.uniq.shape[0])), tv]))
            if tv.shape[0] > c // _TYPE_GAIN:
                return None
        zu, types = _dedupe(z.astype(np.float64))
        if zu.shape[0] > c // _TYPE_GAIN:
            return None
        zi = zu.astype(np.int64)
        return types, [np.ascontiguousarray(loc[zi[:, i]].T) for i, loc in enumerate(local)]

    def fill(self, items: Sequence[tuple[_Block, _Products]]) -> None:
        """Form ``prod`` = unique columns · Wᵀ of every item, streaming the plan once."""
        plan = self.plan
        take = self.begin(items, from_counts=False)
        typed = take.types is not None
        for s, e, w in plan.iter_counts(types=take.types) if typed else plan.iter_counts():
            take(s, e, w)
        self.end(items)

    def begin(self, items: Sequence[tuple[_Block, _Products]], *, from_counts: bool) -> _Take:
        """Allocate the products of ``items`` and return what adds a block of the plan to them.

        The returned :class:`_Take` is called with blocks ``(s, e, counts)`` covering
        every resample once, in any order and from any thread: rows × T counts per
        type when its ``types`` is set and ``from_counts`` is false, else rows × C
        rows of ``W`` (then summed per type here when the types pay).
        """
        plan = self.plan
        for _, p in items:
            p.prod = np.empty((p.uniq.shape[0], plan.n_resamples))
        typed = None
        if not plan.cached and self.precision is not None:
            typed = self._types(items)
        return _Take(self, list(items), typed, from_counts)

    def end(self, items: Sequence[tuple[_Block, _Products]]) -> None:
        """Mark the resamples whose denominator is empty, once every block is in."""
        for _, p in items:
            zero = np.zeros(p.prod.shape[0], dtype=bool)
            dens = np.unique(p.inv_den)
            zero[dens] = (p.prod[dens] == 0).any(axis=1)
            p.zero_den = zero

    def batches(self, blocks: Sequence[_Block]) -> list[list[_Block]]:
        """Blocks in batches whose products fit :data:`_PROD_BYTES` (one block at least)."""
        out: list[list[_Block]] = []
        size = 0
        for b in blocks:
            need = b.s.shape[1] * self.plan.n_resamples * 8
            if out and size + need <= _PROD_BYTES:
                out[-1].append(b)
                size += need
            else:
                out.append([b])
                size = need
        return out


class _Take:
    """Adds blocks of the plan to the products of a batch of items (:meth:`_Engine.begin`)."""

    def __init__(
        self,
        eng: _Engine,
        items: list[tuple[_Block, _Products]],
        typed: tuple[I64, list[F64]] | None,
        from_counts: bool,
    ) -> None:
        self.eng, self.items, self.from_counts = eng, items, from_counts
        self.types: npt.NDArray[Any] | None = None
        self.mats: list[F64] = []
        if typed is not None:
            self.types, self.mats = typed
            self.n_types = int(self.types.max()) + 1 if self.types.size else 0
            if from_counts:  # summed per type from rows of W: the smallest type that holds them
                n = self.n_types
                small = np.uint8 if n <= 1 << 8 else np.uint16 if n <= 1 << 16 else np.int64
                self.types = np.ascontiguousarray(self.types, dtype=small)
        self._cast: dict[Any, list[F64]] = {}
        self._lock = threading.Lock()

    def _uniq(self, dt: Any) -> list[F64]:
        with self._lock:
            if dt not in self._cast:
                self._cast[dt] = [q.uniq.astype(dt) for _, q in self.items]
            return self._cast[dt]

    def __call__(self, s: int, e: int, w: npt.NDArray[Any]) -> None:
        eng, items = self.eng, self.items
        if self.types is not None:
            if self.from_counts:
                from ._kernels import sum_types_block  # numba, on first use

                w = sum_types_block(w, self.types, self.n_types)
            nt = np.ascontiguousarray(w.T, dtype=np.float64)
            for (_, p), v in zip(items, self.mats, strict=True):
                np.matmul(v, nt, out=p.prod[:, s:e])
            return
        c = eng.plan.n_clusters
        dt = np.float32 if eng._float32_exact(int(w.max())) else np.float64
        for i, (b, p) in enumerate(items):
            wg = w if b.supp.size == c else w[:, b.supp]
            if eng.precision is None:
                # Inexact sums: one resample at a time through the same buffer, so
                # that the summation order does not depend on the block.
                buf = np.empty(wg.shape[1])
                for r in range(e - s):
                    buf[:] = wg[r]
                    p.prod[:, s + r] = p.uniq @ buf
            else:
                p.prod[:, s:e] = self._uniq(dt)[i] @ np.ascontiguousarray(wg.T, dtype=dt)


def _theta(p: _Products, sl: slice) -> tuple[F64, I64]:
    """Replicates (rows × B) of metric columns ``sl`` (float64, NaN = undefined) and B'."""
    inum, iden = p.inv_num[sl], p.inv_den[sl]
    b = p.prod.shape[1]
    out = np.empty((inum.size, b))
    n_def = np.full(inum.size, b, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(inum.size):
            np.divide(p.prod[inum[i]], p.prod[iden[i]], out=out[i], dtype=np.float64)
            if p.zero_den[iden[i]]:
                empty = p.prod[iden[i]] == 0
                out[i][empty] = np.nan
                n_def[i] = b - int(np.count_nonzero(empty))
    return out, n_def


def _post(p: _Products, sl: slice, level: float, method: Method) -> RowIntervals:
    jack = None if p.jack is None else p.jack[sl]
    theta, n_def = _theta(p, sl)
    return intervals(theta, p.estimate[sl], level, method, jack, n_def)
