"""The compiled bootstrap kernels against plain-numpy and plain-Python references.

The references are the numpy formulas the kernels replace (docs/spec/uncertainty.md#the-plan):
the same numbers are expected bit for bit, not approximately.
"""

from __future__ import annotations

import numpy as np
import pytest

from peira.bootstrap._kernels import (
    _compiled,
    auroc_block,
    auroc_sorted_block,
    count_block,
    count_types_block,
    dyadic_precision,
    ece_mass_block,
    pcg_state,
    raw_draws,
    tie_groups,
    transpose_block,
)
from tests.fresh import FreshPython


def numpy_raw(seed: int, skip: int, n: int) -> np.ndarray:
    bg = np.random.PCG64(np.random.SeedSequence(seed))
    bg.advance(skip)
    return bg.random_raw(n)


def numpy_counts(raw: np.ndarray, c: int, rows: int) -> np.ndarray:
    idx = ((raw >> np.uint64(32)) * np.uint64(c)) >> np.uint64(32)
    idx = idx.astype(np.int64).reshape(rows, c) + (np.arange(rows) * c)[:, None]
    return np.bincount(idx.ravel(), minlength=rows * c).reshape(rows, c)


@pytest.mark.parametrize(("seed", "skip"), [(0, 0), (1, 1), (7, 12345), (2**40 + 3, 10**12)])
def test_generator_is_numpys_pcg64(seed: int, skip: int) -> None:
    want = numpy_raw(seed, skip, 5_000)
    assert np.array_equal(raw_draws(pcg_state(seed, skip), 5_000), want)


@pytest.mark.parametrize("c", [1, 7, 1000, 65_537])
def test_counts_are_the_plan_rule(c: int) -> None:
    rows = 5
    got = count_block(pcg_state(c, 3 * c), c, rows)
    assert got.dtype == np.uint8
    assert np.array_equal(got, numpy_counts(numpy_raw(c, 3 * c, rows * c), c, rows))
    assert (got.sum(axis=1) == c).all()


def test_a_full_uint8_count_asks_for_int64() -> None:
    """The kernel refuses to pass 255; count_block then counts in int64."""
    count = _compiled()["count"]
    out = np.full((1, 3), 255, dtype=np.uint8)
    assert count(pcg_state(0, 0), 3, out) is False
    wide = np.full((1, 3), 255, dtype=np.int64)
    assert count(pcg_state(0, 0), 3, wide) is True
    assert wide.sum() == 3 * 255 + 3


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("skip", [0, 13])
def test_counts_per_type(rows: int, skip: int) -> None:
    """One row and several, and a block that does not start at the stream's beginning."""
    c = 500
    types = np.random.default_rng(2).integers(0, 6, c)
    full = numpy_counts(numpy_raw(1, skip, rows * c), c, rows)
    want = np.stack([np.bincount(types, weights=r, minlength=6) for r in full]).astype(np.int64)
    got = count_types_block(pcg_state(1, skip), c, rows, types.astype(np.uint8), 6)
    assert np.array_equal(got, want)


def brute_auroc(w: np.ndarray, ci: np.ndarray, conf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    out = []
    for row in w:
        u = 0.0
        p_tot = n_tot = 0
        for i in np.flatnonzero(pos):
            p_tot += row[ci[i]]
        for j in np.flatnonzero(~pos):
            n_tot += row[ci[j]]
        for i in np.flatnonzero(pos):
            for j in np.flatnonzero(~pos):
                k = 1.0 if conf[j] > conf[i] else 0.5 if conf[j] == conf[i] else 0.0
                u += row[ci[i]] * row[ci[j]] * k
        out.append(u / (p_tot * n_tot) if p_tot * n_tot else np.nan)
    return np.array(out)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int64])
def test_auroc_against_all_pairs(dtype: type) -> None:
    rng = np.random.default_rng(3)
    n, c = 60, 12
    ci = rng.integers(0, c, n)
    conf = np.round(rng.random(n), 1)  # many ties
    pos = rng.random(n) < 0.4
    w = rng.integers(0, 4, (9, c)).astype(dtype)
    w[0] = 0  # no weight at all: undefined
    neg = np.flatnonzero(~pos)
    order = neg[np.argsort(conf[neg], kind="stable")]
    lo = np.searchsorted(conf[order], conf[pos], "left")
    hi = np.searchsorted(conf[order], conf[pos], "right")
    u2, den = auroc_block(w, ci[order], ci[pos], lo, hi)
    got = np.full(u2.size, np.nan)
    np.divide(u2 * 0.5, den.astype(float), out=got, where=den > 0)
    want = brute_auroc(w.astype(np.int64), ci, conf, pos)
    assert np.isnan(got[0]) and np.isnan(want[0])
    assert got[1:] == pytest.approx(want[1:], abs=1e-14)


def numpy_ece_gaps(w: np.ndarray, ci: np.ndarray, d: np.ndarray, k: int) -> np.ndarray:
    """The searchsorted formulation: G(e) at e_j = floor(j n' / K), per resample row."""
    n = d.size
    m = w.shape[0]
    wr = w[:, ci].astype(np.int64)
    cw = np.cumsum(wr, axis=1)
    cd = np.cumsum(wr * d, axis=1)
    total = cw[:, -1]
    span = int(total.max()) + 1
    flat = (cw + (np.arange(m) * span)[:, None]).ravel()
    edges = (np.arange(k + 1)[None, :] * total[:, None]) // k
    pos = np.searchsorted(flat, (edges + (np.arange(m) * span)[:, None]).ravel(), "right")
    r = np.minimum(pos.reshape(m, k + 1) - np.arange(m)[:, None] * n, n - 1)
    rows = np.arange(m)[:, None]
    prev_w = np.where(r > 0, cw[rows, np.maximum(r - 1, 0)], 0)
    prev_d = np.where(r > 0, cd[rows, np.maximum(r - 1, 0)], 0.0)
    return prev_d + (edges - prev_w) * d[r]


@pytest.mark.parametrize(("n", "c", "k"), [(1, 1, 15), (2, 2, 15), (300, 40, 15), (500, 500, 7)])
def test_ece_mass_gaps_bit_identical(n: int, c: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    ci = rng.integers(0, c, n)
    d = rng.integers(0, 2, n) - rng.random(n)
    w = rng.integers(0, 3, (11, c)).astype(np.uint8)
    w[1] = 0
    g, total = ece_mass_block(w, ci, d, k)
    want = numpy_ece_gaps(w, ci, d, k)
    ok = total > 0
    assert np.array_equal(total, w[:, ci].astype(np.int64).sum(axis=1))
    assert np.array_equal(g[ok], want[ok])  # bit for bit


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([0.0, 1.0, 7.0, -3.0], 0),
        ([0.5, 2.0], 1),
        ([0.25, 0.5, 1.0, 0.75], 2),
        ([1 / 256, 3.0], 8),
        ([1 / 512], None),
        ([0.1], None),
        ([2.0**60, 0.125], 3),
        ([], 0),
    ],
)
def test_dyadic_precision_is_the_smallest_power(values: list[float], want: int | None) -> None:
    v = np.array(values, dtype=np.float64)

    def reference(x: np.ndarray) -> int | None:  # the numpy formula it replaces
        for p in range(9):
            scaled = x * float(1 << p)
            if np.array_equal(scaled, np.round(scaled)):
                return p
        return None

    assert dyadic_precision(v, 8) == reference(v) == want
    rng = np.random.default_rng(len(values))
    mixed = rng.integers(-50, 50, (40, 7)) / np.array([1, 2, 4, 8, 16, 1, 1], dtype=np.float64)
    assert dyadic_precision(mixed, 8) == reference(mixed) == 4


@pytest.mark.parametrize(
    ("n", "c", "rows", "decimals", "dtype"),
    [
        (60, 12, 9, 1, np.uint8),
        (240, 30, 20, 1, np.uint8),
        (5, 3, 1, 1, np.uint8),
        (300, 300, 40, None, np.uint8),  # continuous: no tie, single-observation clusters
        (240, 30, 20, 1, np.int64),  # wide counts: the 64-bit products
        (300, 300, 40, None, np.int64),
    ],
)
def test_auroc_one_pass_over_transposed_weights(
    n: int, c: int, rows: int, decimals: int | None, dtype: type
) -> None:
    """The same integers as the two-loop kernel and as all pairs, ties across clusters."""
    rng = np.random.default_rng(n)
    ci = rng.integers(0, c, n) if decimals is not None else rng.permutation(c)[:n]
    conf = rng.random(n) if decimals is None else np.round(rng.random(n), decimals)
    pos = rng.random(n) < 0.4
    w = rng.integers(0, 4, (rows, c)).astype(dtype)
    w[0] = 0
    wt = transpose_block(w)
    assert np.array_equal(wt, w.T) and wt.flags.c_contiguous
    order = np.lexsort((pos, conf))
    starts = np.ones(n, dtype=np.uint8)
    starts[1:] = conf[order][1:] != conf[order][:-1]
    groups = tie_groups(pos[order], starts)
    mixed = {
        i
        for i in range(n)
        if starts[i] and len(set(pos[order][conf[order] == conf[order][i]])) == 2
    }
    assert {int(i) for i in np.flatnonzero(groups == 1)} == mixed
    assert np.array_equal(groups > 0, starts == 1)
    got = auroc_sorted_block(wt, ci[order], pos[order].astype(np.uint8), groups)
    neg = np.flatnonzero(~pos)
    by = neg[np.argsort(conf[neg], kind="stable")]
    lo = np.searchsorted(conf[by], conf[pos], "left")
    hi = np.searchsorted(conf[by], conf[pos], "right")
    want = auroc_block(w, ci[by], ci[pos], lo, hi)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    theta = np.full(rows, np.nan)
    np.divide(got[0] * 0.5, got[1].astype(float), out=theta, where=got[1] > 0)
    brute = brute_auroc(w.astype(np.int64), ci, conf, pos)
    assert np.allclose(theta, brute, equal_nan=True, rtol=0, atol=1e-12)


def test_ratio_precision_numpy_and_compiled_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    from peira.bootstrap import _gemm

    rng = np.random.default_rng(9)
    for v in (rng.integers(0, 9, (50, 6)) / 4.0, rng.random((20, 3)), np.zeros((3, 2))):
        small = _gemm._dyadic_precision(v)
        monkeypatch.setattr(_gemm, "_NUMPY_VALUES", 0)
        assert _gemm._dyadic_precision(v) == small == dyadic_precision(v, 8)
        monkeypatch.undo()


# ---------------------------------------------------------------- loading on a thread

_LARGE = """
import sys, threading
import peira.bootstrap.plan as p
plan = p.make_plan([f"s{i:05d}" for i in range(40_000)], n_resamples=1_000, seed=3)
assert p._compiled(plan.n_clusters, plan.n_resamples)
loaders = [t for t in threading.enumerate() if t.name == "peira-kernels"]
print(len(p._LOADER), "numba" in sys.modules or bool(loaders))
for t in p._LOADER:
    t.join()
print("peira.bootstrap._kernels" in sys.modules)
print(sum(int(b.sum()) for _, _, b in plan.iter_counts(types=[i % 3 for i in range(40_000)])))
"""

_SMALL = """
import sys
import peira.bootstrap.plan as p
plan = p.make_plan([f"s{i:03d}" for i in range(300)], n_resamples=1_000, seed=3)
print(len(p._LOADER), "numba" in sys.modules, plan.fingerprint[:12])
"""

_BROKEN = """
import sys
sys.modules["numba"] = None  # as when numba cannot be imported
import peira.bootstrap.plan as p
plan = p.make_plan([f"s{i:05d}" for i in range(40_000)], n_resamples=1_000, seed=3)
for t in p._LOADER:
    t.join()
print(len(p._LOADER), "peira.bootstrap._kernels" in sys.modules)
try:
    next(plan.iter_counts(types=[i % 3 for i in range(40_000)]))
except ImportError as e:
    print("ImportError", "numba" in str(e))
"""


def _python(fresh: FreshPython, code: str) -> list[str]:
    done = fresh.run(code, timeout=300, check=True)
    return done.stdout.split("\n")


def test_a_large_plan_loads_the_kernels_on_a_thread(fresh_python: FreshPython) -> None:
    """Making a plan the compiled kernels will count starts loading them; counting after
    the thread is done gives every draw (B·C of them)."""
    out = _python(fresh_python, _LARGE)
    assert out[:3] == ["1 True", "True", str(40_000 * 1_000)]


def test_a_small_plan_imports_no_numba(fresh_python: FreshPython) -> None:
    out = _python(fresh_python, _SMALL)
    n, numba, fp = out[0].split()
    assert (n, numba) == ("0", "False")
    assert fp == _plan_fp(300, 1_000, 3)[:12]


def test_a_failed_load_surfaces_in_the_caller(fresh_python: FreshPython) -> None:
    """The thread keeps its failure to itself; the first kernel call imports again and
    raises where the caller sees it."""
    out = _python(fresh_python, _BROKEN)
    assert out[:2] == ["1 False", "ImportError True"]


def _plan_fp(c: int, b: int, seed: int) -> str:
    from peira.bootstrap import make_plan, plan_fingerprint

    plan = make_plan([f"s{i:03d}" for i in range(c)], n_resamples=b, seed=seed)
    return plan_fingerprint(plan.W[:32], b)
