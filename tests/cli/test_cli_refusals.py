"""Options that once ended in a traceback: each is now a one-line error with exit
code 2 naming the value, or, inside the documented range, a command that works.

Every command runs through :func:`peira.cli.main` on the bundled demo data
(which has a holdout split); the PySpark case runs ``peira`` in a fresh
interpreter in which PySpark cannot be imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import peira
from peira.api import MAX_SEED
from peira.bootstrap.plan import SEED_LIMIT, holdout_seed
from peira.cli import main

# The demo named explicitly: a command given no dataset says on stderr that it uses the demo.
B = ["--resamples", "60", "--dataset", str(peira.demo_dir())]


def _divergence() -> list[str]:
    d = peira.demo_dir()
    return [
        "holdout",
        "divergence",
        "--dataset",
        str(d),
        "--responses",
        str(d / "responses.parquet"),
    ]


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main([*argv, *B]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if not x.startswith("peira: warning:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["score", "--by", "sample"], "by sample: a key of the pair table"),
        (["score", "--by", "run_id"], "by run_id: a key of the pair table"),
        (["score", "--by", "family", "--by", "family"], "by family: given twice"),
        (["score", "--by", "nope", "--ratio-only"], "by nope: not a column of the pair table"),
        ([*_divergence(), "--by", "nope"], "by nope: not a column of the pair table"),
    ],
)
def test_a_bad_breakdown_is_one_line_exit_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line_error(capsys, argv)
    assert line.startswith(
        f"peira {' '.join(argv[:2]) if argv[0] == 'holdout' else argv[0]}: error:"
    )
    assert said in line


@pytest.mark.parametrize(
    "argv",
    [["leaderboard", "--format", "json"], ["tables", "--out", "{tmp}"], _divergence()],
    ids=["leaderboard", "tables", "divergence"],
)
def test_the_largest_seed_works(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path / "out")) for a in argv]
    assert main([*argv, *B, "--seed", str(MAX_SEED)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_holdout_seed_stays_in_range() -> None:
    assert SEED_LIMIT == MAX_SEED
    assert holdout_seed(0) == 1 and holdout_seed(MAX_SEED - 1) == MAX_SEED
    assert holdout_seed(MAX_SEED) == 0


@pytest.mark.parametrize(
    "argv",
    [["leaderboard"], ["tables", "--out", "{tmp}"], _divergence()],
    ids=["leaderboard", "tables", "divergence"],
)
def test_a_level_the_divergence_flag_cannot_use_names_the_level_given(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = [a.replace("{tmp}", str(out)) for a in argv]
    line = _one_line_error(capsys, [*argv, "--level", "0.3"])
    assert "level 0.3:" in line and "one-sided" in line and "(0.5, 1)" in line
    assert "-0.4" not in line
    assert not out.exists()  # nothing written on refusal


def test_score_accepts_a_low_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", *B, "--level", "0.3", "--format", "json"]) == 0


_NO_PYSPARK = """
import sys


class NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoPySpark())
sys.argv = ["peira", *sys.argv[1:]]
from peira.cli import console

console()
"""


def test_spark_without_pyspark_says_which_extra_to_install() -> None:
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-c", _NO_PYSPARK, "score", "--engine", "spark", *B],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [
        "peira score: error: the spark engine needs PySpark: pip install 'peira[spark]'"
    ]
