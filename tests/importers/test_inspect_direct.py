"""Peira's own Inspect reader against Inspect's ``read_eval_log``: the same tables.

The import maps the samples of a log to Peira's rows by one mapping, fed either
by ``inspect_ai.log.read_eval_log`` (the oracle) or by Peira's direct reader
(peira/importers/_inspect_log.py). Every table (cases, variants, responses,
published, runs, judgements) and the notes must come out equal, on every
Inspect fixture and on logs written by Inspect itself from them: epochs,
several scorers, errored and cancelled samples, dictionary scores, chat inputs
with attachments, a log without sample ids. A log the reader does not know (a
newer format version) is read by Inspect, with a note; broken logs stop the
import with one line.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ContentText
from inspect_ai.scorer import Score, value_to_float

from peira.errors import InputFormatError
from peira.importers import _inspect_log
from peira.importers._bundle import Imported
from peira.importers._evallog import EvalLogWarning
from peira.importers.inspect import _import

FIX = Path(__file__).resolve().parents[1] / "fixtures"
INSPECT = FIX / "inspect"

TABLES = ("cases", "variants", "responses", "published", "runs", "judgements")


def _both(*args: Any, **kw: Any) -> tuple[Imported, Imported]:
    with _quiet():
        oracle = _import("inspect_ai", *args, **kw)
        direct = _import("direct", *args, **kw)
    return oracle, direct


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvalLogWarning)
        yield


def _assert_same(oracle: Imported, direct: Imported, extra_notes: int = 0) -> None:
    for name in TABLES:
        a, b = getattr(oracle, name), getattr(direct, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert isinstance(b, pl.DataFrame)
            assert a.schema == b.schema, name
            assert a.equals(b, null_equal=True), name
    assert oracle.notes == direct.notes[extra_notes:]


# (files, options) of every fixture, as the importer's own tests read them
CASES: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("inspect/mc_alpha.eval",), {}),
    (("inspect/mc_alpha.eval", "inspect/mc_beta.eval"), {}),
    (("inspect/suite_benign.eval",), {}),
    (("inspect/pairs_meta.eval",), {"pair_by": "pair", "arm_field": "arm"}),
    (("inspect/epochs.json",), {}),
    (("inspect/epochs.json",), {"threshold": 0.5}),
    (("inspect/two_scorers.eval",), {"scorer": "match"}),
    (("inspect/two_scorers.eval",), {"scorer": "includes"}),
    (("inspect/two_scorers.json",), {"scorer": "match"}),
    (("inspect/errored.eval",), {}),
    (("inspect/cancelled.eval",), {}),
    (("inspect_dict/scicode.json",), {"score_key": "Problem Correctness"}),
]


@pytest.mark.parametrize(("files", "opts"), CASES, ids=lambda x: str(x))
def test_every_fixture_gives_the_same_tables(files: tuple[str, ...], opts: dict[str, Any]) -> None:
    _assert_same(*_both([FIX / f for f in files], **opts))


def test_every_inspect_fixture_is_covered() -> None:
    listed = {f for files, _ in CASES for f in files}
    on_disk = {
        f"{p.parent.name}/{p.name}"
        for d in FIX.glob("inspect*")
        for p in d.iterdir()
        if p.suffix in (".eval", ".json")
    }
    assert on_disk <= listed | {"inspect/mc_beta.eval", "inspect/suite_attacked.eval"}


def test_a_pair_of_logs_gives_the_same_tables() -> None:
    pairs = [(INSPECT / "suite_benign.eval", INSPECT / "suite_attacked.eval")]
    _assert_same(*_both(pairs=pairs))


# ---------------------------------------------- logs written by Inspect from the fixtures


def _rewrite(src: Path, dst: Path, edit: Any) -> Path:
    log = read_eval_log(str(src))
    edit(log)
    write_eval_log(log, str(dst))
    return dst


YESES: list[str | bool] = ["yes", "No", True, "0.5", "C"]


def _dict_and_odd_scores(log: Any) -> None:
    for i, s in enumerate(log.samples or []):
        scores = s.scores or {}
        value = {k: scores[k].value for k in ("match", "includes")}
        s.scores = {
            "both": Score(value=value, answer=scores["match"].answer, explanation="e"),
            "num": Score(value=[0.25, 1.0, 0][i % 3], answer=None),
            "yes": Score(value=YESES[i % 5], answer="A"),
        }
    log.results = None


def _chat_inputs(log: Any) -> None:
    for i, s in enumerate(log.samples or []):
        text = s.input if isinstance(s.input, str) else "q"
        s.input = [
            ChatMessageSystem(content="Answer briefly."),
            ChatMessageUser(content=[ContentText(text=text), ContentText(text=f"part {i}")]),
        ]
        s.metadata = {**(s.metadata or {}), "n": i, "nested": {"a": [1, 2.5, None]}}
        s.attachments = {"abc": "a long shared passage"}
        if i % 4 == 0:
            s.output.completion = ""  # the completion comes from the first choice


def _reversed_two_models(log: Any) -> None:
    # a .json log keeps its samples in the file's order, a .eval's are sorted; the model
    # reported most often is a tie, which the first sample seen decides
    log.samples.reverse()
    for s in log.samples:
        s.output.model = ""
    log.samples[0].output.model = "provider-model-first"
    log.samples[-1].output.model = "provider-model-last"


def _no_sample_ids(log: Any) -> None:
    log.eval.dataset.sample_ids = None


@pytest.mark.parametrize(
    ("src", "edit", "opts"),
    [
        ("two_scorers.eval", _dict_and_odd_scores, {"scorer": "both", "score_key": "match"}),
        ("two_scorers.eval", _dict_and_odd_scores, {"scorer": "yes"}),
        ("mc_alpha.eval", _chat_inputs, {}),
        ("epochs.json", _chat_inputs, {}),
        ("errored.eval", _no_sample_ids, {}),
        ("two_scorers.eval", _reversed_two_models, {"scorer": "includes"}),
        ("cancelled.eval", _chat_inputs, {}),
    ],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
@pytest.mark.parametrize("fmt", [".eval", ".json"])
def test_logs_written_by_inspect_give_the_same_tables(
    src: str, edit: Any, opts: dict[str, Any], fmt: str, tmp_path: Path
) -> None:
    path = _rewrite(INSPECT / src, tmp_path / f"log{fmt}", edit)
    oracle, direct = _both([path], **opts)
    _assert_same(oracle, direct)
    assert not any("read through inspect_ai" in n for n in direct.notes)


def test_a_json_log_keeps_its_file_order(tmp_path: Path) -> None:
    # Inspect writes samples sorted, and sorts a .eval's on reading, but reads a .json's
    # in the file's order: the first sample seen breaks the tie of the reported models
    src = _rewrite(INSPECT / "epochs.json", tmp_path / "sorted.json", _reversed_two_models)
    doc = json.loads(src.read_text())
    doc["samples"].reverse()
    path = tmp_path / "reversed.json"
    path.write_text(json.dumps(doc))
    oracle, direct = _both([path])
    _assert_same(oracle, direct)
    assert set(direct.responses["model_version"]) == {"provider-model-first"}


def test_value_to_float_is_inspects() -> None:
    theirs = value_to_float()
    values: list[str | int | float | bool] = ["C", "I", "P", "N", "yes", "YES", "no", "True", "false", "0.5", "1e-1", "-2",
              "nan", "inf", "x", "", 0, 1, 0.5, True, False, 2, -1.5]  # fmt: skip
    for v in values:
        assert _inspect_log.value_to_float(v) == theirs(v), v


# ------------------------------------------------------------------------ the fallback


def _set_version(src: Path, dst: Path, version: int) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename in ("header.json", "_journal/start.json"):
                d = json.loads(data)
                d["version"] = version
                data = json.dumps(d).encode()
            zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    return dst


def test_a_log_version_the_reader_does_not_know_is_read_by_inspect(tmp_path: Path) -> None:
    path = _set_version(INSPECT / "mc_alpha.eval", tmp_path / "v3.eval", 3)
    got = _import("auto", [path])
    (note,) = [n for n in got.notes if "read through inspect_ai" in n]
    assert note.startswith(f"{path}: read through inspect_ai's read_eval_log (log format version 3")
    _assert_same(_import("inspect_ai", [path]), got, extra_notes=1)  # the oracle's import
    with pytest.raises(InputFormatError, match=r"v3.eval: not a log Peira's reader knows"):
        _import("direct", [path])


def test_a_known_log_needs_no_fallback() -> None:
    got = _import("auto", [INSPECT / "mc_alpha.eval"])
    assert not any("read through inspect_ai" in n for n in got.notes)


# ------------------------------------------------------------------------- bad input


def _members(src: Path, dst: Path, edit: Any) -> Path:
    _inspect_log._zstd()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        first = True
        for info in zin.infolist():
            data: bytes | None = zin.read(info.filename)
            if info.filename.startswith("samples/") and first:
                first = False
                data = edit(data)
            if data is not None:
                zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    return dst


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("truncated", lambda b: b[: len(b) // 2], r"bad.eval: not a readable Inspect log: "),
        ("garbage", None, r"bad.eval: member samples/\S+: not a readable Inspect log: not JSON"),
        ("no-id", None, r"bad.eval: member samples/\S+: the sample has no 'id'"),
    ],
)
def test_broken_logs_stop_with_one_line(name: str, make: Any, message: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.eval"
    if name == "truncated":
        bad.write_bytes(make((INSPECT / "mc_alpha.eval").read_bytes()))
    elif name == "garbage":
        _members(INSPECT / "mc_alpha.eval", bad, lambda b: b"\xff\xfe not json")
    else:
        _members(INSPECT / "mc_alpha.eval", bad,
                 lambda b: json.dumps({k: v for k, v in json.loads(b).items() if k != "id"}).encode())  # fmt: skip
    for engine in ("auto", "direct"):
        with pytest.raises(InputFormatError, match=message) as info:
            _import(engine, [bad])
        assert "\n" not in str(info.value)
    out = tmp_path / "out"
    assert not out.exists()


def test_json_log_truncated_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    text = (INSPECT / "epochs.json").read_bytes()
    bad.write_bytes(text[: len(text) // 2])
    with pytest.raises(InputFormatError, match=r"bad.json: not a readable Inspect log") as info:
        _import("auto", [bad])
    assert "\n" not in str(info.value)


def test_copied_fixture_reads_the_same(tmp_path: Path) -> None:
    # the path is part of the notes and sources: a copy elsewhere reads the same
    p = tmp_path / "copy.eval"
    shutil.copy(INSPECT / "two_scorers.eval", p)
    _assert_same(*_both([p], scorer="includes"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, r"deep.json: not a readable Inspect log: not a JSON object"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, r"deep.json: not a readable Inspect log: JSON nested too deep"),
    ],
    ids=["deep-array", "deep-object"],
)  # fmt: skip
def test_hostile_json_logs_are_one_line(content: bytes, message: str, tmp_path: Path) -> None:
    bad = tmp_path / "deep.json"
    bad.write_bytes(content)
    with pytest.raises(InputFormatError, match=message) as info:
        _import("auto", [bad])
    assert "\n" not in str(info.value)


def test_the_direct_path_does_not_import_inspect_ai() -> None:
    import subprocess
    import sys

    code = (
        "import sys, warnings; warnings.simplefilter('ignore');"
        "from peira.importers.inspect import read_inspect;"
        f"got = read_inspect([{str(INSPECT / 'two_scorers.eval')!r}], scorer='match');"
        "assert got.responses.height > 0;"
        "print('inspect_ai' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, env={"PYTHONPATH": str(root), "PATH": ""}, check=True)  # fmt: skip
    assert out.stdout.strip() == "False"
