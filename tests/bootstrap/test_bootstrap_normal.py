"""BCa's order statistics without scipy (peira.bootstrap._normal) against scipy.special."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from scipy.special import ndtr, ndtri

from peira.bootstrap import _normal
from peira.bootstrap._normal import bca_positions
from tests.fresh import FreshPython


def _scipy_positions(
    p: npt.NDArray[np.float64], a: npt.NDArray[np.float64], q: float, n: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The BCa positions as scipy.special's ndtri and ndtr define them."""
    last = np.maximum(n - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        z0 = ndtri(p)
        za = float(ndtri(q))
        ends = [ndtr(z0 + (z0 + z) / (1.0 - a * (z0 + z))) for z in (za, -za)]
    finite = np.isfinite(z0) & np.isfinite(ends[0]) & np.isfinite(ends[1])
    lo = np.clip(np.floor(np.nan_to_num(ends[0]) * n), 0, last).astype(np.int64)
    hi = np.clip(np.floor(np.nan_to_num(ends[1]) * n), 0, last).astype(np.int64)
    return finite, lo, hi


def _check(p: np.ndarray, a: np.ndarray, q: float, n: np.ndarray) -> None:
    got = bca_positions(p, a, q, n, np.maximum(n - 1, 0))
    want = _scipy_positions(p, a, q, n)
    assert np.array_equal(got[0], want[0])
    ok = want[0]
    assert np.array_equal(got[1][ok], want[1][ok]) and np.array_equal(got[2][ok], want[2][ok])


@pytest.mark.parametrize("q", [0.025, 0.05, 0.005, 0.05 / 14, 0.5 - 1e-9])
def test_positions_equal_scipys_on_random_rows(q: float) -> None:
    rng = np.random.default_rng(7)
    rows = 20_000
    n = rng.choice([1, 2, 7, 100, 999, 2_000, 10_000, 100_000, 1_000_000], rows)
    below = np.floor(rng.random(rows) * (n + 1))
    p = below / np.maximum(n, 1)
    a = rng.normal(0, 0.05, rows) * rng.choice([0.0, 1.0, 10.0], rows)
    _check(p, a, q, n.astype(np.int64))


def test_positions_equal_scipys_where_they_sit_on_an_integer() -> None:
    """z0 = 0 and a = 0 put n·Φ(±z) on 0.025·n exactly: scipy decides those."""
    n = np.array([10_000, 2_000, 40, 10_000, 10_000], dtype=np.int64)
    p = np.array([0.5, 0.5, 0.5, 0.0, 1.0])
    a = np.zeros(5)
    _check(p, a, 0.025, n)
    # a pole of t / (1 − a·t): 1 − a·t = 0 exactly
    z = float(ndtri(0.025))
    _check(np.array([0.5, 0.5]), np.array([1.0 / z, -1.0 / z]), 0.025, np.array([10_000] * 2))


def test_undefined_rows_stay_undefined() -> None:
    n = np.array([0, 10, 10, 10], dtype=np.int64)
    p = np.array([0.0, 0.0, 1.0, np.nan])
    got = bca_positions(p, np.zeros(4), 0.025, n, np.maximum(n - 1, 0))
    assert not got[0].any()


def test_scipy_is_called_only_near_an_integer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Away from integers the positions come from the fast Φ and Φ⁻¹ alone, and agree
    with scipy's; a position on an integer goes to scipy."""
    rng = np.random.default_rng(3)
    n = np.full(5_000, 10_000, dtype=np.int64)
    p = (np.floor(rng.random(5_000) * 5_000) * 2 + 1) / 10_000  # odd / 10,000: never 0.5
    a = rng.normal(0, 0.05, 5_000)
    calls: list[int] = []
    real = _normal._scipy_ends

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_normal, "_scipy_ends", counted)
    _check(p, a, 0.025, n)
    assert calls == []  # random positions: never within the bound of an integer
    _check(np.array([0.5]), np.zeros(1), 0.025, np.array([10_000]))
    assert calls == [1]  # 250 exactly: scipy decides


def test_an_interval_command_imports_no_scipy(fresh_python: FreshPython) -> None:
    code = (
        "import sys, peira; d = peira.demo_dir(); "
        "t = peira.leaderboard(d / 'responses.parquet', d, n_resamples=2000); "
        "assert (t['method'] == 'bca').any(), t['method']; "
        "print('scipy.special' in sys.modules)"
    )
    out = fresh_python.run(code, check=True)
    assert out.stdout.strip() == "False"
