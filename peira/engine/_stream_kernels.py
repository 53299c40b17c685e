"""The compiled kernels of the streaming engine (:mod:`peira.engine._stream`): coding
each row's answer, filing rows in the key table by region, checking the value
rules on Arrow buffers, and the final sweep that turns answer pairs into sums.

They run on NumPy views of Arrow buffers, with the GIL released (``nogil``),
and are compiled once and cached by Numba.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

#: Shift classes: 0 no shift (a score missing, or not a score case), 1 below δ, 2 at least δ.
_NO_SHIFT, _BELOW, _ABOVE = 0, 1, 2

# outcomes of the compiled pass
_OK, _BAD, _FULL = 0, 1, 2

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _code_rows(
    run_i: Any,
    run_lut: Any,
    model_i: Any,
    model_lut: Any,
    version_i: Any,
    version_lut: Any,
    case_i: Any,
    case_lut: Any,
    arm_i: Any,
    arm_lut: Any,
    dec_i: Any,
    dec_lut: Any,
    sample: Any,
    abst: Any,
    mal: Any,
    score: Any,
    score_bits: Any,
    score_off: Any,
    n_cases: Any,
    samples: Any,
    score_case: Any,
    n_score: Any,
    allowed: Any,
    n_opt: Any,
    model_of: Any,
    version_of: Any,
    out_slot: Any,
    out_sk: Any,
    out_raw: Any,
    out_score: Any,
    at: Any,
) -> Any:  # pragma: no cover
    """Check each row's rules on its codes (each string column as dictionary indices
    and the codes of the dictionary's values) and stage it from position ``at``:
    its slot in the key table, its score key (-1 outside score cases), its answer
    code, its score. Returns _OK or _BAD (a rule broken)."""
    n = sample.shape[0]
    for i in range(n):
        r = run_lut[run_i[i]]
        c = case_lut[case_i[i]]
        arm = arm_lut[arm_i[i]]  # 0 attacked, 1 benign
        s = sample[i]
        if r < 0 or c < 0 or arm < 0 or s < 0 or s >= samples:
            return _BAD  # unprintable or empty run, unknown case, other arm, negative sample
        m = model_lut[model_i[i]]
        v = version_lut[version_i[i]]
        if m < 0 or v < 0:
            return _BAD
        if model_of[r] < 0:
            model_of[r] = m
            version_of[r] = v
        elif model_of[r] != m or version_of[r] != v:
            return _BAD  # model or model_version not constant within the run
        a = abst[i]
        f = mal[i]
        d = dec_lut[dec_i[i]]  # -2 null, -1 not an option of any case
        if (d == -2) != (a or f):
            return _BAD  # decision null iff abstained or malformed
        if d != -2 and (d < 0 or not allowed[c * n_opt + d]):
            return _BAD  # decision outside the case's options
        j = at + i
        out_slot[j] = 2 * ((r * n_cases + c) * samples + s) + arm
        k = score_case[c]
        out_sk[j] = (r * n_score + k) * samples + s if k >= 0 else -1
        has = _valid(score_bits, score_off, i)
        out_raw[j] = 1 + a + 2 * f + 4 * (not has) + 8 * (d + 2)
        out_score[j] = score[i] if has else np.nan
    return _OK


@_jit
def _file_rows(
    slot: Any,
    sk: Any,
    raw: Any,
    score: Any,
    threshold: Any,
    tab: Any,
    scores: Any,
    state_id: Any,
    state_raw: Any,
) -> Any:  # pragma: no cover
    """File staged rows in the key table, in their order; returns _OK, _BAD (a
    duplicate key) or _FULL (more than 255 distinct answer codes).

    A score case's first arm leaves its score; the second records the pair's
    shift class in its answer code."""
    for i in range(slot.shape[0]):
        t = slot[i]
        if tab[t] != 0:
            return _BAD  # (run_id, case_id, arm, sample) not unique
        x = raw[i]
        k = sk[i]
        if k >= 0:
            if tab[t ^ 1] == 0:
                scores[k] = score[i]
            else:
                other = scores[k]
                cls = _NO_SHIFT
                if not np.isnan(score[i]) and not np.isnan(other):
                    shift = score[i] - other if t % 2 == 0 else other - score[i]
                    cls = _ABOVE if abs(shift) >= threshold else _BELOW
                x += 1024 * cls
        code = state_id[x]
        if code == 0:
            nxt = state_raw[0] + 1
            if nxt > 255:
                return _FULL
            state_raw[0] = nxt
            state_raw[nxt] = x
            state_id[x] = nxt
            code = nxt
        tab[t] = code
    return _OK


@_jit
def _partition(
    slot: Any, sk: Any, raw: Any, score: Any, bits: Any, out: Any
) -> Any:  # pragma: no cover
    """Whether the staged rows are far from key order; if so they are reordered by
    region of the key table (``slot >> bits``, stable) into ``out``, so that the
    rows filed one after the other touch a region that stays in cache."""
    n = slot.shape[0]
    descents = 0
    top = 0
    for i in range(n):
        if i and slot[i] < slot[i - 1]:
            descents += 1
        top = max(top, slot[i] >> bits)
    if descents * 64 <= n:
        return False
    start = np.zeros(top + 2, np.int64)
    for i in range(n):
        start[(slot[i] >> bits) + 1] += 1
    for p in range(top + 1):
        start[p + 1] += start[p]
    o_slot, o_sk, o_raw, o_score = out
    for i in range(n):
        p = slot[i] >> bits
        j = start[p]
        start[p] = j + 1
        o_slot[j] = slot[i]
        o_sk[j] = sk[i]
        o_raw[j] = raw[i]
        o_score[j] = score[i]
    return True


@_jit
def _valid(bitmap: Any, offset: Any, i: Any) -> Any:  # pragma: no cover
    """Whether row ``i`` of an Arrow array holds a value (no bitmap: every row does)."""
    if bitmap.shape[0] == 0:
        return True
    j = offset + i
    return (bitmap[j >> 3] >> (j & 7)) & 1 == 1


@_jit
def _in_range(x: Any, bitmap: Any, offset: Any, hi: Any, closed: Any) -> Any:  # pragma: no cover
    """Every value (null rows aside) in [0, hi] (``closed``) or [0, hi)."""
    for i in range(x.shape[0]):
        if _valid(bitmap, offset, i):
            v = x[i]
            if not (0.0 <= v <= hi if closed else 0.0 <= v < hi):
                return False
    return True


@_jit
def _sweep(
    tab: Any, n_runs: Any, n_cases: Any, samples: Any, complete: Any
) -> Any:  # pragma: no cover
    """Count the keys of each (run, case) per pair of answer codes (attacked × 256 +
    benign). Returns the records (run, case, pair code, count) and their number, or
    -1 when ``complete`` and some pair lacks an arm."""
    cap = max(1024, n_runs * n_cases)
    rec_r = np.empty(cap, np.int32)
    rec_c = np.empty(cap, np.int32)
    rec_p = np.empty(cap, np.int32)
    rec_n = np.empty(cap, np.int64)
    cnt = np.zeros(65536, np.int64)
    touched = np.empty(65536, np.int32)
    m = 0
    for r in range(n_runs):
        for c in range(n_cases):
            base = 2 * (r * n_cases + c) * samples
            nt = 0
            for s in range(samples):
                a = tab[base + 2 * s]
                b = tab[base + 2 * s + 1]
                if a == 0 or b == 0:
                    if a == 0 and b == 0:
                        continue
                    if complete:
                        return rec_r, rec_c, rec_p, rec_n, -1
                p = np.int32(a) * 256 + np.int32(b)
                if cnt[p] == 0:
                    touched[nt] = p
                    nt += 1
                cnt[p] += 1
            if m + nt > cap:
                cap = 2 * (m + nt)
                rec_r2 = np.empty(cap, np.int32)
                rec_c2 = np.empty(cap, np.int32)
                rec_p2 = np.empty(cap, np.int32)
                rec_n2 = np.empty(cap, np.int64)
                rec_r2[:m] = rec_r[:m]
                rec_c2[:m] = rec_c[:m]
                rec_p2[:m] = rec_p[:m]
                rec_n2[:m] = rec_n[:m]
                rec_r, rec_c, rec_p, rec_n = rec_r2, rec_c2, rec_p2, rec_n2
            for t in range(nt):
                p = touched[t]
                rec_r[m] = r
                rec_c[m] = c
                rec_p[m] = p
                rec_n[m] = cnt[p]
                cnt[p] = 0
                m += 1
    return rec_r, rec_c, rec_p, rec_n, m


@_jit
def _accumulate(
    rec_r: Any, rec_g: Any, combo: Any, rec_n: Any, terms: Any, n_groups: Any
) -> Any:  # pragma: no cover
    """Per (run, group) in order of the records (by run): the pair count and every
    term's sum, Σ count × term of the record's combination."""
    m = rec_r.shape[0]
    stamp = np.full(n_groups, -1, np.int64)
    rows = 0
    for i in range(m):
        g = rec_g[i]
        if stamp[g] != rec_r[i]:
            stamp[g] = rec_r[i]
            rows += 1
    n_terms = terms.shape[1]
    out = np.zeros((rows, n_terms), np.float64)
    n_pairs = np.zeros(rows, np.int64)
    out_r = np.empty(rows, np.int64)
    out_g = np.empty(rows, np.int64)
    row_of = np.empty(n_groups, np.int64)
    stamp[:] = -1
    k = 0
    for i in range(m):
        g = rec_g[i]
        if stamp[g] != rec_r[i]:
            stamp[g] = rec_r[i]
            row_of[g] = k
            out_r[k] = rec_r[i]
            out_g[k] = g
            k += 1
        j = row_of[g]
        n = rec_n[i]
        n_pairs[j] += n
        for t in range(n_terms):
            out[j, t] += n * terms[combo[i], t]
    return out_r, out_g, n_pairs, out
