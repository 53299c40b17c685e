"""Property-based fuzzing of every importer and of the numeric and name options of
the data commands: random, often hostile, inputs drawn by Hypothesis.

Each example runs the ``peira`` command in this process and must end with a
documented exit code (0, 1 or 2) and a one-line error on refusal, raise nothing
(an unexpected exception is a traceback on the command line) and, on refusal,
write nothing. The draws come from one seed, printed with any failure::

    PEIRA_FUZZ_SEED=$RANDOM PEIRA_FUZZ_EXAMPLES=300 python -m pytest -q tests/fuzz

Without the variables the seed is 0 and each test draws 12 examples, so the
default suite is deterministic and quick.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import peira
from peira.cli import main

SEED = int(os.environ.get("PEIRA_FUZZ_SEED", "0"))
EXAMPLES = int(os.environ.get("PEIRA_FUZZ_EXAMPLES", "12"))
DOCUMENTED = {0, 1, 2}

fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    print_blob=True,
)


# ---------------------------------------------------------------- value pools

WORDS = ["", " ", "approve", "deny", "aprove", "0", "1", "-1", "2", "1.5", "NaN", "inf",
         "1e400", "true", "False", "null", "[]", "{}", "é", "\u202e", "a,b", 'q"uote',
         "line\nbreak", "\x00", "x" * 300, "[[word]]"]  # fmt: skip
text = st.one_of(st.sampled_from(WORDS), st.text(max_size=12))
scalar = st.one_of(
    text,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
json_value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(WORDS), inner, max_size=4)
    ),
    max_leaves=12,
)


def _csv(header: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue()


def _run(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> int:
    capsys.readouterr()  # what an earlier example left (one that failed) is not this one's
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a malformed option value: usage, exit 2
        code = exc.code if isinstance(exc.code, int) else 2
    err = capsys.readouterr().err
    assert code in DOCUMENTED, (code, err)
    assert "Traceback" not in err, err
    if code != 0:
        errors = [x for x in err.splitlines() if ": error:" in x]
        assert len(errors) == 1, err
        assert not out.exists(), f"{out} written by a refused command: {err}"
    return code


def _fresh(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    return d


# ---------------------------------------------------------------- importers
#
# Each importer reads a real file from tests/fixtures with a few random changes:
# a value replaced by a random JSON value or text, a key or a cell removed, an
# entry repeated. Most examples stay close enough to the source to reach the
# importer's deep checks (and some import cleanly).

FIX = Path(__file__).parents[1] / "fixtures"


def _paths(doc: Any, at: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every path to a value of ``doc`` (dict keys, list indices), at most 6 deep."""
    out = [at]
    if depth >= 6:
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*at, k), depth + 1)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            out += _paths(v, (*at, i), depth + 1)
    return out


def _mutate(doc: Any, data: st.DataObject, n_max: int = 3) -> Any:
    """``doc`` with up to ``n_max`` random changes (it is changed in place)."""
    for _ in range(data.draw(st.integers(0, n_max), label="changes")):
        paths = _paths(doc)
        path = data.draw(st.sampled_from(paths[1:] or paths), label="path")
        if not path:
            return data.draw(json_value, label="whole document")
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        how = data.draw(st.sampled_from(["replace", "delete", "repeat"]), label="how")
        if how == "replace":
            parent[key] = data.draw(json_value, label="value")
        elif how == "delete":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(parent[key])))
        else:
            parent[f"{key}"] = json.loads(json.dumps(parent[key]))
    return doc


def _load(path: Path) -> Any:
    import gzip

    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


_JBB = _load(FIX / "jailbreakbench" / "PAIR-black_box-llama-2-7b-chat-hf.json.gz")
_JBB["jailbreaks"] = _JBB["jailbreaks"][:6]
_INSPECT = _load(FIX / "inspect" / "epochs.json")
_INSPECT["samples"] = _INSPECT["samples"][:4]
_SCORERS = _load(FIX / "inspect" / "two_scorers.json")
_SCORERS["samples"] = _SCORERS["samples"][:4]


def _copy(doc: Any) -> Any:
    return json.loads(json.dumps(doc))


@seed(SEED)
@fuzz
@given(data=st.data())
def test_import_jailbreakbench(
    data: st.DataObject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _fresh(tmp_path, "jbb")
    f = d / "PAIR-black_box-m.json"
    f.write_text(json.dumps(_mutate(_copy(_JBB), data)))
    _run(["import", "jailbreakbench", str(f), "--out", str(d / "out")], d / "out", capsys)


@seed(SEED)
@fuzz
@given(data=st.data(), score_key=st.sampled_from([None, None, "value", "x"]))
def test_import_inspect(
    data: st.DataObject,
    score_key: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = _fresh(tmp_path, "inspect")
    f = d / "log.json"
    f.write_text(json.dumps(_mutate(_copy(_INSPECT), data)))
    argv = ["import", "inspect", str(f), "--out", str(d / "out")]
    if score_key is not None:
        argv += ["--score-key", score_key]
    _run(argv, d / "out", capsys)


@seed(SEED)
@fuzz
@given(data=st.data(), scorer=st.sampled_from(["match", "includes", "nope"]))
def test_import_inspect_scorers(
    data: st.DataObject, scorer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log with two scorers: both are judges of judgements.parquet."""
    d = _fresh(tmp_path, "scorers")
    f = d / "log.json"
    f.write_text(json.dumps(_mutate(_copy(_SCORERS), data)))
    _run(["import", "inspect", str(f), "--scorer", scorer, "--out", str(d / "out")], d / "out",
         capsys)  # fmt: skip


@seed(SEED)
@fuzz
@given(data=st.data())
def test_import_lm_eval(
    data: st.DataObject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _fresh(tmp_path, "lm")
    run = d / "alpha"
    shutil.copytree(FIX / "lm_eval" / "alpha", run)
    files = sorted(run.rglob("*.json*"))
    f = data.draw(st.sampled_from(files), label="file")
    if f.suffix == ".jsonl":
        lines = [json.loads(x) for x in f.read_text().splitlines()[:6]]
        f.write_text("".join(json.dumps(x) + "\n" for x in _mutate(lines, data)))
    else:
        f.write_text(json.dumps(_mutate(json.loads(f.read_text()), data)))
    argv = ["import", "lm-eval", str(run), "--filter", "strict-match", "--out", str(d / "out")]
    _run(argv, d / "out", capsys)


def _cells(rows: list[list[str]], data: st.DataObject) -> list[list[str]]:
    """A few cells of ``rows`` (header excluded) changed, removed or repeated."""
    for _ in range(data.draw(st.integers(0, 3), label="changes")):
        if len(rows) < 2:
            break
        i = data.draw(st.integers(1, len(rows) - 1), label="row")
        how = data.draw(st.sampled_from(["cell", "cell", "row-twice", "short-row"]), label="how")
        if how == "cell":
            j = data.draw(st.integers(0, len(rows[i]) - 1), label="column")
            rows[i][j] = data.draw(text, label="value")
        elif how == "row-twice":
            rows.insert(i, list(rows[i]))
        else:
            rows[i] = rows[i][:-1]
    return rows


def _ta_rows() -> list[list[str]]:
    import gzip

    raw = gzip.decompress((FIX / "textattack" / "bert-mr-greedy.csv.gz").read_bytes()).decode()
    return list(csv.reader(io.StringIO(raw)))[:9]


_TA = _ta_rows()


@seed(SEED)
@fuzz
@given(data=st.data(), drop=st.sampled_from([None, None, None, *range(9)]))
def test_import_textattack(
    data: st.DataObject, drop: int | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _fresh(tmp_path, "ta")
    rows = _cells([list(r) for r in _TA], data)
    if drop is not None:
        rows = [[c for j, c in enumerate(r) if j != drop] for r in rows]
    f = d / "log.csv"
    f.write_text(_csv(rows[0], rows[1:]), encoding="utf-8", errors="surrogatepass")
    _run(["import", "textattack", str(f), "--out", str(d / "out")], d / "out", capsys)


_TABLE = [["id", "gold", "pred", "adv", "model", "conf", "fam"]] + [
    [f"c{i}", g, p, a, m, c, f]
    for i, (g, p, a, m, c, f) in enumerate(
        [("approve", "approve", "deny", "m1", "0.9", "x"), ("deny", "deny", "deny", "m1", "0.6", "y"),
         ("approve", "approve", "approve", "m1", "0.8", "x"), ("deny", "approve", "approve", "m1", "0.5", "y"),
         ("approve", "approve", "deny", "m2", "0.7", "x"), ("deny", "deny", "approve", "m2", "0.4", "y")]
    )
]  # fmt: skip
_TABLE_MAP = ["case_id=id", "expected=gold", "benign_decision=pred", "attacked_decision=adv",
              "run_id=model", "benign_confidence=conf", "family=fam"]  # fmt: skip
_TABLE_EXTRA = [["--sample", "auto"], ["--set", "severity=high"], ["--options", "approve,deny"],
                ["--values", "benign_decision=approve:approve,deny:deny"], ["--set", "nope=1"],
                ["--map", "case_id=gold"], ["--layout", "long"], ["--records", "rows"]]  # fmt: skip


@seed(SEED)
@fuzz
@given(
    data=st.data(),
    fmt=st.sampled_from(["csv", "json", "jsonl", "tsv"]),
    drop=st.sets(st.sampled_from(_TABLE_MAP), max_size=2),
    extra=st.lists(st.sampled_from(_TABLE_EXTRA), max_size=2),
)
def test_import_table(
    data: st.DataObject,
    fmt: str,
    drop: set[str],
    extra: list[list[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = _fresh(tmp_path, "table")
    rows = _cells([list(r) for r in _TABLE], data)
    header, body = rows[0], rows[1:]
    f = d / f"t.{fmt}"
    if fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        f.write_text(
            "".join(sep.join(r) + "\n" for r in rows) if fmt == "tsv" else _csv(header, body),
            encoding="utf-8",
            errors="surrogatepass",
        )
    else:
        records = [dict(zip(header, r, strict=False)) for r in body]
        f.write_text(
            json.dumps(records) if fmt == "json" else "".join(json.dumps(r) + "\n" for r in records)
        )
    argv = ["import", "table", str(f)]
    for m in _TABLE_MAP:
        if m not in drop:
            argv += ["--map", m]
    for e in extra:
        argv += e
    _run([*argv, "--out", str(d / "out")], d / "out", capsys)


def _jc_rows() -> list[list[str]]:
    import gzip

    path = FIX / "jailbreakbench" / "judge_comparison" / "judge-comparison.csv.gz"
    raw = gzip.decompress(path.read_bytes()).decode("utf-8")
    return list(csv.reader(io.StringIO(raw, newline="")))[:7]


_JC = _jc_rows()
#: The judge-comparison set as a table of judges (its human majority the gold labels).
_JC_MAP = ["case_id=Index", "attacked_raw_text=target_response", "verdict:llama3=llama3_cf",
           "verdict:gpt4=gpt4_cf", "verdict:gold=human_majority"]  # fmt: skip
_JC_EXTRA = [["--judge", "gpt4"], ["--judge", "gold"], ["--judge", "nope"],
             ["--values", "verdict:gold=1:comply,0:undetermined"], ["--map", "verdict:h=human1"],
             ["--map", "attacked_decision=human2"], ["--options", "refuse,comply"]]  # fmt: skip


@seed(SEED)
@fuzz
@given(
    data=st.data(),
    drop=st.sets(st.sampled_from(_JC_MAP), max_size=2),
    extra=st.lists(st.sampled_from(_JC_EXTRA), max_size=2),
)
def test_import_table_judges(
    data: st.DataObject,
    drop: set[str],
    extra: list[list[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = _fresh(tmp_path, "jc")
    rows = _cells([list(r) for r in _JC], data)
    f = d / "jc.csv"
    f.write_text(_csv(rows[0], rows[1:]), encoding="utf-8", errors="surrogatepass")
    argv = ["import", "table", str(f), "--set", "expected=refuse", "--set", "target=comply",
            "--values", "verdict=1:comply,0:refuse"]  # fmt: skip
    for m in _JC_MAP:
        if m not in drop:
            argv += ["--map", m]
    for e in extra:
        argv += e
    _run([*argv, "--out", str(d / "out")], d / "out", capsys)


# ---------------------------------------------------------------- options of the data commands

NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "x", "0x10", "1_000", "1e3", "-0", "  5 "]),
)
NAMES = {
    "--by": st.sampled_from(["family", "nope", "", "run_id", "sample", "severity", "é"]),
    "--metric": st.sampled_from(["robustness", "asr", "benign_accuracy", "nope", "", "f1_benign"]),
    "--split": st.sampled_from(["all", "public", "holdout", "x", ""]),
}
#: Each data command and its options to fuzz; ``out`` is where it may write.
COMMANDS: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    "score": (lambda out: ["score", "--format", "json"], ("--by", "--split")),
    "leaderboard": (lambda out: ["leaderboard", "--format", "json"], ("--metric", "--split")),
    "tables": (lambda out: ["tables", "--out", str(out)], ("--metric", "--split")),
}


@seed(SEED)
@fuzz
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_command_options(
    command: str, data: st.DataObject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, names = COMMANDS[command]
    option = data.draw(st.sampled_from(["--seed", "--level", "--resamples", *names]))
    value = data.draw(NAMES.get(option, NUMBER))
    d = _fresh(tmp_path, "opt")
    out = d / "out"
    argv = [*make(out), "--dataset", str(peira.demo_dir())]
    if option != "--resamples":
        argv += ["--resamples", "40"]
    _run([*argv, f"{option}={value}"], out, capsys)
