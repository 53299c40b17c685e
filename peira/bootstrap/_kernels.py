"""Compiled inner loops of the bootstrap (docs/spec/uncertainty.md#the-plan).

Each kernel is one pass over a block of resamples with the arithmetic the
plan and the statistics define, written as plain loops and compiled by
numba (``nogil``: blocks run on worker threads in parallel). Integer work
stays integer, so results do not depend on how the plan is cut into blocks;
floating-point work follows the order of the numpy formulas it replaces
(sequential cumulative sums, no fused multiply-add), so the numbers are the
same bit for bit. Plain-numpy references are in the tests.

The bootstrap modules import this one on first use, so ``import peira``
does not import numba; compiled code is cached beside this file (or in
``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._arrays import F64, I64

__all__ = [
    "auroc_block",
    "auroc_sorted_block",
    "count_block",
    "count_types_block",
    "dyadic_precision",
    "ece_mass_block",
    "pcg_state",
    "raw_draws",
    "sum_types_block",
    "tie_groups",
    "transpose_block",
    "warm",
]


_jit = numba.njit(cache=True, nogil=True)


_S58 = np.uint64(58)
_S63 = np.uint64(63)
_S64 = np.uint64(64)
_S32 = np.uint64(32)
_MULT = 0x2360ED051FC65DA44385DF649FCCF645  # PCG64's 128-bit LCG multiplier


@intrinsic
def _lcg(typingctx: Any, hi: Any, lo: Any, inc_hi: Any, inc_lo: Any) -> Any:
    """(hi:lo)·MULT + (inc_hi:inc_lo) mod 2^128 as (hi, lo): one 128-bit multiply-add."""
    u64 = types.uint64
    sig = types.UniTuple(u64, 2)(u64, u64, u64, u64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i128, i64 = ir.IntType(128), ir.IntType(64)
        shift = ir.Constant(i128, 64)

        def join(h: Any, lo_: Any) -> Any:
            return builder.or_(builder.shl(builder.zext(h, i128), shift), builder.zext(lo_, i128))

        state = join(args[0], args[1])
        new = builder.add(builder.mul(state, ir.Constant(i128, _MULT)), join(args[2], args[3]))
        parts = [builder.trunc(builder.lshr(new, shift), i64), builder.trunc(new, i64)]
        return context.make_tuple(builder, signature.return_type, parts)

    return sig, codegen


@_jit
def _step(hi: Any, lo: Any, inc_hi: Any, inc_lo: Any) -> tuple[Any, Any, Any]:  # pragma: no cover
    """PCG64 (XSL-RR 128/64): advance the 128-bit LCG, return (hi, lo, output)."""
    state: Any = _lcg(hi, lo, inc_hi, inc_lo)  # type: ignore[call-arg]  # numba supplies typingctx
    hi2, lo2 = state[0], state[1]
    x = hi2 ^ lo2
    rot = hi2 >> _S58
    return hi2, lo2, (x >> rot) | (x << ((_S64 - rot) & _S63))


@_jit
def _count_k(state: Any, n_clusters: int, out: Any) -> bool:  # pragma: no cover - compiled
    hi, lo, inc_hi, inc_lo = state[0], state[1], state[2], state[3]
    rows, c = out.shape
    cu = np.uint64(n_clusters)
    one = out.dtype.type(1)
    narrow = np.iinfo(out.dtype).max < (1 << 32)  # a count could wrap: check each row
    for r in range(rows):
        row = out[r]
        before: Any = 0
        if narrow:
            for i in range(c):
                before += np.int64(row[i])
        for _ in range(c):
            hi, lo, raw = _step(hi, lo, inc_hi, inc_lo)
            row[((raw >> _S32) * cu) >> _S32] += one
        if narrow:
            # a count that passed the top wrapped, and the row lost a multiple of 2^bits
            after: Any = 0
            for i in range(c):
                after += np.int64(row[i])
            if after != before + c:
                return False
    return True


@_jit
def _count_types_k(state: Any, n_clusters: int, types: Any, out: Any) -> None:  # pragma: no cover
    hi, lo, inc_hi, inc_lo = state[0], state[1], state[2], state[3]
    rows = out.shape[0]
    cu = np.uint64(n_clusters)
    for r in range(rows):
        for _ in range(n_clusters):
            hi, lo, raw = _step(hi, lo, inc_hi, inc_lo)
            out[r, types[((raw >> _S32) * cu) >> _S32]] += 1


@_jit
def _sum_types_k(w: Any, types: Any, out: Any) -> None:  # pragma: no cover - compiled
    rows, c = w.shape
    for r in range(rows):
        for i in range(c):
            out[r, types[i]] += w[r, i]


@_jit
def _dyadic_k(v: Any, p_max: int) -> int:  # pragma: no cover - compiled
    p = 0
    scale = 1.0
    for x in v:
        while p <= p_max:
            s = x * scale
            if s == np.floor(s):
                break
            p += 1
            scale *= 2.0
        if p > p_max:
            return -1
    return p


@_jit
def _raw_k(state: Any, out: Any) -> None:  # pragma: no cover - compiled
    hi, lo, inc_hi, inc_lo = state[0], state[1], state[2], state[3]
    for j in range(out.size):
        hi, lo, out[j] = _step(hi, lo, inc_hi, inc_lo)


@_jit
def _auroc_k(
    w: Any, neg_ci: Any, pos_ci: Any, pos_lo: Any, pos_hi: Any, u2: Any, den: Any
) -> None:  # pragma: no cover - compiled
    m = w.shape[0]
    nn = neg_ci.size
    cum = np.empty(nn + 1, np.int64)
    for b in range(m):
        acc = 0
        cum[0] = 0
        for j in range(nn):
            acc += w[b, neg_ci[j]]
            cum[j + 1] = acc
        u: Any = 0
        p: Any = 0
        for i in range(pos_ci.size):
            wi = np.int64(w[b, pos_ci[i]])
            if wi != 0:
                p += wi
                u += wi * (2 * acc - cum[pos_hi[i]] - cum[pos_lo[i]])
        u2[b] = u
        den[b] = p * acc


@_jit
def _auroc_t_k(
    wt: Any, ci: Any, pos: Any, groups: Any, narrow: bool, u2: Any, den: Any
) -> None:  # pragma: no cover - compiled
    n = ci.size
    m = wt.shape[1]
    acc = np.zeros(m, np.int64)  # negative weight so far: lower confidences, and the current
    low = np.zeros(m, np.int64)  # negative weight below the current confidence (mixed groups)
    s = np.zeros(m, np.int64)  # Σ w_i (2·below_i + tie_i) over positives
    p = np.zeros(m, np.int64)
    two = np.uint64(1)
    mixed = False
    for k in range(n):
        row = wt[ci[k]]
        g = groups[k]
        if g == 1:  # a confidence held by both classes: its negatives come first
            mixed = True
            for b in range(m):
                low[b] = acc[b]
        elif g == 2:
            mixed = False
        if pos[k]:
            if mixed:  # 2·below + tie = acc + low
                for b in range(m):
                    x = np.int64(row[b])
                    p[b] += x
                    s[b] += x * (acc[b] + low[b])
            elif narrow:  # no tie: 2·acc; acc < 2^32, so one 32 × 32-bit product
                for b in range(m):
                    y = np.uint64(row[b])
                    p[b] += np.int64(y)
                    s[b] += np.int64((y * np.uint64(np.uint32(acc[b]))) << two)
            else:
                for b in range(m):
                    x = np.int64(row[b])
                    p[b] += x
                    s[b] += 2 * x * acc[b]
        else:
            for b in range(m):
                acc[b] += row[b]
    for b in range(m):
        u2[b] = 2 * acc[b] * p[b] - s[b]
        den[b] = p[b] * acc[b]


@_jit
def _ece_mass_k(
    w: Any, ci: Any, d: Any, n_bins: int, g: Any, total: Any, supp: Any, cnt: Any
) -> None:  # pragma: no cover
    m = w.shape[0]
    n = ci.size
    for b in range(m):
        t = 0
        for j in range(supp.size):  # Σ weight · rows per cluster: n' without a gather per row
            t += np.int64(w[b, supp[j]]) * cnt[j]
        total[b] = t
        k = 0
        e = 0  # edge k, (k·t) // K: divided once per edge, not once per row
        cw: Any = 0
        cd = 0.0
        last_w = 0
        last_d = 0.0
        for i in range(n):
            if i == n - 1:
                last_w = cw
                last_d = cd
            wi = np.int64(w[b, ci[i]])
            new_w = cw + wi
            new_d = cd + wi * d[i]
            while k <= n_bins and e < new_w:
                g[b, k] = cd + (e - cw) * d[i]
                k += 1
                e = (k * t) // n_bins
            cw = new_w
            cd = new_d
        while k <= n_bins:  # edges at the very end: the last row, as searchsorted clips
            e = (k * t) // n_bins
            g[b, k] = last_d + (e - last_w) * d[n - 1]
            k += 1


_KERNELS = {
    "count": _count_k,
    "count_types": _count_types_k,
    "sum_types": _sum_types_k,
    "dyadic": _dyadic_k,
    "raw": _raw_k,
    "auroc": _auroc_k,
    "auroc_t": _auroc_t_k,
    "ece_mass": _ece_mass_k,
}


def _compiled() -> dict[str, Any]:
    return _KERNELS


def warm() -> None:
    """Load the machine code of every kernel, as the library calls them, from the cache.

    The first kernel called in a process pays for numba's start-up (its type
    registries, about half a second) and each further one a few milliseconds;
    :func:`peira.bootstrap.plan.preload_kernels` runs this on a background
    thread while the data are read, so that the first pass over a large plan
    does not wait for it. Calls on tiny inputs of the dtypes the library passes.
    """
    state = pcg_state(0, 0)
    w = np.ones((2, 3), dtype=np.uint8)
    i = np.zeros(1, dtype=np.int64)
    flags = np.zeros(1, dtype=np.uint8)
    for small in (np.uint8, np.uint16, np.int64):
        count_types_block(state, 3, 2, np.zeros(3, dtype=small), 1)
        sum_types_block(w, np.zeros(3, dtype=small), 1)
    count_block(state, 3, 2)
    dyadic_precision(np.ones(3), 8)
    auroc_block(w, i, i, i, i)
    auroc_sorted_block(transpose_block(w), i, flags, flags)  # groups: uint8 like flags
    ece_mass_block(w, i, np.zeros(1), 3)


def pcg_state(seed: int, skip: int) -> npt.NDArray[np.uint64]:
    """(state hi, state lo, increment hi, increment lo) of ``PCG64(SeedSequence(seed))``
    after ``skip`` draws: where a block of the plan starts."""
    bg = np.random.PCG64(np.random.SeedSequence(seed))
    if skip:
        bg.advance(skip)
    st = bg.state["state"]
    mask = (1 << 64) - 1
    parts = [st["state"] >> 64, st["state"] & mask, st["inc"] >> 64, st["inc"] & mask]
    return np.array(parts, dtype=np.uint64)


def raw_draws(state: npt.NDArray[np.uint64], n: int) -> npt.NDArray[np.uint64]:
    """The next ``n`` raw 64-bit outputs from ``state`` (= ``PCG64.random_raw(n)``)."""
    out = np.empty(n, dtype=np.uint64)
    if n:
        _compiled()["raw"](state, out)
    return out


def count_block(state: npt.NDArray[np.uint64], n_clusters: int, rows: int) -> npt.NDArray[Any]:
    """rows × C counts of the next rows·C draws from ``state`` (:func:`pcg_state`).

    Draw j of row r falls on cluster ((raw >> 32) · C) >> 32 (docs/spec/uncertainty.md#the-plan),
    raw being PCG64's output, generated here rather than stored. Counts are
    uint8 (a row of a 10^6-cluster plan is 1 MB and stays in cache); a count
    above 255 — possible in principle, never seen at random — recounts the
    block in int64.
    """
    for dtype in (np.uint8, np.int64):
        out = np.zeros((rows, n_clusters), dtype=dtype)
        if not rows or not n_clusters or _compiled()["count"](state, n_clusters, out):
            return out
    raise AssertionError("unreachable: int64 counts cannot overflow")  # pragma: no cover


def count_types_block(
    state: npt.NDArray[np.uint64],
    n_clusters: int,
    rows: int,
    types: npt.NDArray[Any],
    n_types: int,
) -> I64:
    """rows × T: the draws of each row that fall on a cluster of each type."""
    out = np.zeros((rows, n_types), dtype=np.int64)
    if rows and n_clusters:
        _compiled()["count_types"](state, n_clusters, types, out)
    return out


def dyadic_precision(v: npt.NDArray[np.float64], p_max: int) -> int | None:
    """Smallest p ≤ ``p_max`` with every (finite) value of ``v`` a multiple of 2^-p, or None.

    One pass, stopping at the first value no p ≤ ``p_max`` fits: what checking
    ``v·2^p`` for whole numbers for p = 0, 1, … finds.
    """
    flat = np.ravel(np.asarray(v, dtype=np.float64), order="K")  # a view of either layout
    p = int(_compiled()["dyadic"](flat, p_max)) if flat.size else 0
    return None if p < 0 else p


def sum_types_block(w: npt.NDArray[Any], types: npt.NDArray[Any], n_types: int) -> I64:
    """rows × T: each row of ``w`` (rows × C counts) summed over the clusters of each type,
    what :func:`count_types_block` counts from the draws."""
    out = np.zeros((w.shape[0], n_types), dtype=np.int64)
    if w.size:
        _compiled()["sum_types"](np.ascontiguousarray(w), types, out)
    return out


def auroc_block(
    w: npt.NDArray[Any], neg_ci: I64, pos_ci: I64, pos_lo: I64, pos_hi: I64
) -> tuple[I64, I64]:
    """Twice the weighted Mann–Whitney U and ΣP·ΣN of each row of ``w``.

    ``neg_ci``: clusters of the negatives in ascending confidence; per
    positive, its cluster and how many negatives lie below (``pos_lo``) and
    at or below (``pos_hi``) its confidence. A positive counts 1 per
    negative weight above it and 1/2 per tie.
    """
    m = w.shape[0]
    u2 = np.zeros(m, dtype=np.int64)
    den = np.zeros(m, dtype=np.int64)
    if m:
        _compiled()["auroc"](w, neg_ci, pos_ci, pos_lo, pos_hi, u2, den)
    return u2, den


def transpose_block(w: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``w.T`` as a C-contiguous array (C × rows): a cluster's weights in every resample
    of the block side by side."""
    return np.ascontiguousarray(w.T)


def tie_groups(pos: npt.NDArray[Any], starts: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """Per observation (ascending confidence, negatives first at a tie): 1 where a
    confidence value held by both classes begins, 2 where another value begins, else 0.

    ``starts``: 1 where a new confidence value begins (the first observation included).
    """
    n = pos.size
    out = np.zeros(n, dtype=np.uint8)
    if not n:
        return out
    first = np.flatnonzero(np.asarray(starts, dtype=bool))
    bounds = np.append(first, n)
    has_pos = np.logical_or.reduceat(np.asarray(pos, dtype=bool), first)
    has_neg = np.logical_or.reduceat(~np.asarray(pos, dtype=bool), first)
    out[bounds[:-1]] = np.where(has_pos & has_neg, 1, 2)
    return out


def auroc_sorted_block(
    wt: npt.NDArray[Any], ci: I64, pos: npt.NDArray[np.uint8], groups: npt.NDArray[np.uint8]
) -> tuple[I64, I64]:
    """:func:`auroc_block` from the transposed weights ``wt`` (C × rows), in one pass.

    The observations in ascending confidence, negatives before positives at
    equal confidence: ``ci`` their clusters, ``pos`` 1 for a positive,
    ``groups`` their :func:`tie_groups`. Per observation, the weights of its
    cluster in every resample of the block are adjacent, so the work per
    resample is a few vector operations: with ``acc`` the negative weight up
    to the current confidence (its own negatives included) and ``low`` the
    weight below it, each positive adds w_i (acc + low) = w_i (2·below_i + tie_i)
    — 2·w_i·acc where no negative shares its confidence — and
    2U = Σ_i w_i (2N − 2·below_i − tie_i), in integers.
    """
    m = wt.shape[1]
    u2 = np.zeros(m, dtype=np.int64)
    den = np.zeros(m, dtype=np.int64)
    if m and ci.size:
        top = np.iinfo(wt.dtype).max if wt.dtype.kind in "ui" else 1 << 62
        narrow = int(np.count_nonzero(pos == 0)) * int(top) < (1 << 32)  # acc fits 32 bits
        _compiled()["auroc_t"](wt, ci, pos, groups, narrow, u2, den)
    return u2, den


def ece_mass_block(
    w: npt.NDArray[Any],
    ci: I64,
    d: F64,
    n_bins: int,
    clusters: tuple[I64, I64] | None = None,
) -> tuple[F64, I64]:
    """Cumulative gaps G(e_k) at the equal-mass edges (rows × (K+1)) and n' per row.

    Rows (``ci``, ``d`` = label − forecast) sorted by (forecast, case_id,
    sample); row i stands for ``w[b, ci[i]]`` copies. G(e) is the weighted
    cumulative sum of ``d`` over the first e expanded positions, e_k = ⌊k·n'/K⌋.
    ``clusters``: the distinct clusters of ``ci`` and their row counts
    (``np.unique(ci, return_counts=True)``), when the caller has them.
    """
    m = w.shape[0]
    g = np.zeros((m, n_bins + 1))
    total = np.zeros(m, dtype=np.int64)
    if m and ci.size:
        supp, cnt = np.unique(ci, return_counts=True) if clusters is None else clusters
        _compiled()["ece_mass"](w, ci, d, n_bins, g, total, supp, cnt.astype(np.int64))
    return g, total
