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


# ---------------------------------------------------------------- inputs of the wrong type


def _copy_demo(tmp_path: Path) -> Path:
    import shutil

    d = tmp_path / "ds"
    shutil.copytree(peira.demo_dir(), d)
    return d


def test_validate_refuses_options_stored_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import polars as pl

    d = _copy_demo(tmp_path)
    cases = pl.read_parquet(d / "cases.parquet")
    cases.with_columns(pl.col("options").list.join("|")).write_parquet(d / "cases.parquet")
    assert main(["validate", str(d), "--responses", str(d / "responses.parquet")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "cases.parquet: 1 violation(s) of dtype('List(String)') in column 'options'" in err


def test_a_decision_column_of_integers_is_a_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the local engine; tests/engine/test_engine_spark_ranking.py checks Spark."""
    check_integer_decisions(tmp_path, capsys, "local")


def check_integer_decisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str
) -> None:
    """``validate`` and ``score --engine ENGINE`` on a log whose decisions are integers:
    exit 1, the dtype violation named, no traceback."""
    import polars as pl

    d = _copy_demo(tmp_path)
    log = tmp_path / "ints.parquet"
    r = pl.read_parquet(d / "responses.parquet")
    r.with_columns(
        pl.col("decision").cast(pl.Categorical).to_physical().cast(pl.Int64)
    ).write_parquet(log)
    said = "ints.parquet: 1 violation(s) of dtype('String') in column 'decision': decision: Int64"
    assert main(["validate", str(d), "--responses", str(log)]) == 1
    assert said in capsys.readouterr().err
    argv = ["score", "--dataset", str(d), "--responses", str(log), "--engine", engine]
    assert main([*argv, "--resamples", "60"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and said in err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[" * 50_000 + "]" * 50_000, "nested deeper than"),
        ("nope{", "not JSON (line 1, column 1"),
        (b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
        ('{"case_id": "a", "case_id": "b"}', "duplicate key"),
    ],
    ids=["deep", "not-json", "binary", "duplicate-key"],
)
def test_a_bad_mapping_file_is_one_line_exit_2(
    content: str | bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = tmp_path / "map.json"
    if isinstance(content, bytes):
        m.write_bytes(content)
    else:
        m.write_text(content)
    t = tmp_path / "t.csv"
    t.write_text("run,case,arm,decision\nr,c,benign,approve\n")
    out = tmp_path / "out"
    assert main(["import", "table", str(t), "--map", str(m), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"--map {m}: " in err and said in err
    assert not out.exists()


def test_a_field_mapped_twice_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = tmp_path / "t.csv"
    t.write_text("a,b\n1,2\n")
    out = tmp_path / "out"
    argv = ["import", "table", str(t), "--map", "case_id=a", "--map", "case_id=b"]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("field 'case_id' is mapped twice, to 'a' and 'b'; map each field once")
    assert not out.exists()


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ('raise RuntimeError("boom at import")\n', "importing 'badmod' raised RuntimeError: boom"),
        ("def (:\n", "cannot import 'badmod': syntax error in "),
    ],
    ids=["raises", "syntax"],
)
def test_an_adapter_module_that_fails_to_import_is_one_line_exit_2(
    source: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "badmod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "badmod", raising=False)
    out = tmp_path / "log.parquet"
    argv = ["run", "--adapter", "badmod:X", "--dataset", str(peira.demo_dir()), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert said in err and not out.exists()


class _Bare:
    name, version = "bare", "1"

    def decide(self, request: object) -> object:
        raise BaseException("bare")


def test_an_adapter_raising_a_bare_base_exception_fails_its_rows(tmp_path: Path) -> None:
    from peira.run import run

    res = run(_Bare(), peira.demo_dir(), tmp_path / "log.parquet", progress=False)
    log = res.responses
    assert log.height == res.n_total and log["malformed"].all()
    assert set(log["error"].unique().to_list()) == {"adapter error: BaseException: bare"}


def test_a_log_of_more_runs_than_the_bound_is_refused_before_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import polars as pl

    from peira.schema import MAX_RUNS

    d = peira.demo_dir()
    r = pl.read_parquet(d / "responses.parquet")
    one = r.filter(pl.col("run_id") == r["run_id"][0])
    pair = one.filter(pl.col("case_id") == one["case_id"][0])  # its two arms
    n = MAX_RUNS + 1
    runs = pl.DataFrame({"i": range(n)}).join(pair.drop("run_id", "model"), how="cross")
    log = tmp_path / "many.parquet"
    runs.with_columns(
        ("r" + pl.col("i").cast(pl.String)).alias("run_id"),
        ("m" + pl.col("i").cast(pl.String)).alias("model"),
    ).select(r.columns).write_parquet(log)
    said = f"many.parquet: {n:,} runs (distinct run_id) in one log, more than the {MAX_RUNS:,}"
    for argv in (
        ["validate", str(d), "--responses", str(log)],
        ["score", "--dataset", str(d), "--responses", str(log), "--ratio-only"],
        ["leaderboard", "--dataset", str(d), "--responses", str(log)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert said in err


def _truncated_gzip(tmp_path: Path) -> Path:
    src = Path(__file__).parents[1] / "fixtures" / "textattack" / "bert-mr-greedy.csv.gz"
    f = tmp_path / "cut.csv.gz"
    f.write_bytes(src.read_bytes()[:1500])
    return f


@pytest.mark.parametrize("fmt", ["textattack", "table"])
@pytest.mark.parametrize("which", ["truncated-gzip", "device"])
def test_a_truncated_gzip_or_a_device_names_the_file(
    fmt: str, which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _truncated_gzip(tmp_path) if which == "truncated-gzip" else Path("/dev/null")
    if not f.exists():
        pytest.skip("no /dev/null here")
    out = tmp_path / "out"
    extra = ["--map", "case_id=original_text"] if fmt == "table" else []
    assert main(["import", fmt, str(f), *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    if which == "device":
        assert err.endswith(f"{f}: not a regular file (a directory or a device)")
    else:
        assert f"{f}: " in err and "unexpected end of file" in err
    assert not out.exists()
