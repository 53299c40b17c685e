"""The installed ``peira`` script (:func:`peira.cli.console`) and the early kernel preload.

``console`` ends a process that loaded numba with ``os._exit`` after waiting for
its threads, running the ``atexit`` handlers and flushing the streams: each test
runs it in a child process with numba imported and checks that nothing of that
is lost. The preload tests check which plans start loading the kernels before
the data are read, against the plan-size rule computed here from the cases table.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from peira.bootstrap.plan import NUMPY_DRAWS
from peira.cli import main
from peira.io import demo_dir
from tests.fresh import FreshPython

CONSOLE = """
import atexit, sys, threading, time
import numba  # the quick exit applies once numba is loaded
out = sys.argv[1]
def late():
    time.sleep(0.3)
    with open(out, "w") as f:
        f.write("thread done")
threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran", flush=False))
sys.argv = ["peira", *sys.argv[2:]]
from peira.cli import console
console()
"""


def _console(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    marker = tmp_path / "thread.txt"
    return subprocess.run(
        [sys.executable, "-c", CONSOLE, str(marker), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_console_keeps_output_threads_and_atexit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["leaderboard", "--format", "csv", "--resamples", "200", "--split", "all"]
    assert main(argv) == 0
    want = capsys.readouterr().out
    assert want.count("\n") > 5
    proc = _console(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr
    # the whole listing (buffered: stdout is a pipe), then what the atexit handler printed
    assert proc.stdout == want + "atexit ran\n"
    assert (tmp_path / "thread.txt").read_text() == "thread done"


def test_console_error_exit_code(tmp_path: Path) -> None:
    proc = _console(tmp_path, "score", "--dataset", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert (
        proc.stderr == f"peira score: error: --dataset {tmp_path / 'missing'}: no such directory\n"
    )
    assert proc.stdout == "atexit ran\n"
    assert (tmp_path / "thread.txt").read_text() == "thread done"


def test_python_m_peira_version() -> None:
    from peira import __version__

    proc = subprocess.run(
        [sys.executable, "-m", "peira", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"peira {__version__}"


PROBE = """
import sys
import peira.bootstrap.plan as plan
from peira.cli import build_parser
from peira.cli import _common
args = build_parser().parse_args(sys.argv[1:])
_common.dataset_and_log(args)
print(len(plan._LOADER))
"""


def _n_clusters(split: str, unit: str) -> int:
    cases = pl.read_parquet(demo_dir() / "cases.parquet")
    if split != "all":
        cases = cases.filter(pl.col("split") == split)
    col = "case_id" if unit == "case" else "scenario_id"
    return len(set(cases[col].to_list()))


@pytest.mark.parametrize(
    ("split", "unit", "b"),
    [
        ("public", "cluster", 10_000),  # the default: 285-odd clusters, numpy counts
        ("all", "cluster", 100_000),
        ("public", "case", 100_000),
        ("public", "case", 10_000),
    ],
)
def test_preload_follows_the_plan_size(
    split: str, unit: str, b: int, fresh_python: FreshPython
) -> None:
    argv = ["leaderboard", "--split", split, "--unit", unit, "--resamples", str(b)]
    proc = fresh_python.run(PROBE, *argv, timeout=120)
    assert proc.returncode == 0, proc.stderr
    want = _n_clusters(split, unit) * b > NUMPY_DRAWS
    assert proc.stdout.strip() == ("1" if want else "0")


def test_preload_cases_on_both_sides_of_the_rule() -> None:
    """The parametrised cases above test both answers, not one of them four times."""
    sizes = [
        _n_clusters("public", "cluster") * 10_000,
        _n_clusters("all", "cluster") * 100_000,
        _n_clusters("public", "case") * 100_000,
    ]
    assert sizes[0] <= NUMPY_DRAWS < min(sizes[1:])


def test_preload_ignores_an_unreadable_cases_table(
    tmp_path: Path, fresh_python: FreshPython
) -> None:
    (tmp_path / "responses.parquet").write_bytes(b"")
    (tmp_path / "cases.parquet").write_bytes(b"not parquet")
    argv = ["leaderboard", "--dataset", str(tmp_path), "--resamples", "100000"]
    proc = fresh_python.run(PROBE, *argv, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"
