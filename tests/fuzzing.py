"""A fuzz harness for the ``peira`` command: bad inputs for every subcommand and writer.

Each :class:`Case` is one command line (run in-process through
``peira.cli.main``) against a small workspace of valid inputs (a dataset with
its log, reference-format files, a sealed artifact, a blinded export, a key,
a user's own files), after an optional ``setup`` that plants the bad input in
the case's scratch directory. :func:`run_case` checks what every case must
satisfy, whatever the input:

- no traceback and no raw library message on stderr, and an error is one
  line (``peira …: error: …``);
- the documented exit code (0 ok, 1 the data break the model, 2 unreadable
  input, bad arguments or a refused output);
- no file outside the command's own outputs changed — every file of the
  workspace is hashed before and after — and, when the command fails, no
  file at all appeared or changed (no partial output, no litter);
- an output that was written is complete (Parquet reads, a directory has
  its manifest or artifact).

:func:`all_cases` generates the cases by class (the classes of bad input the
project promises to handle); :func:`sample` draws a stratified,
deterministic subset for the default suite. ``python -m tests.fuzzing``
prints the counts per class.

A new subcommand needs cases (``tests/cli/test_fuzz.py`` fails until every
subcommand and import format has some): a writer gets a row in
:data:`WRITERS` (its argv with ``{out}``, ``"file"`` or ``"dir"``, and the
inputs it must never overwrite), which brings every bad-output-path case;
its numeric options a row in :data:`FLAGS` or ``_OTHER_FLAGS``; a reader of a
new format rows like :func:`released_cases`; anything else a row in
:func:`usage_cases`.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import signal
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

#: Text that only a leaked library exception puts on stderr.
RAW_MARKERS = (
    "Traceback (most recent call last)",
    "polars.exceptions",
    "ComputeError",
    "SchemaError:",
    "InvalidOperationError",
    "ColumnNotFoundError",
    "ShapeError",
    "JSONDecodeError",
    "Expecting value",
    "Expecting property name",
    "OverflowError",
    "RecursionError",
    "maximum recursion depth",
    "pyarrow.lib",
    "ArrowInvalid",
    "ArrowTypeError",
    "UnicodeEncodeError",
    "UnicodeDecodeError",
    "[Errno",
    "(os error",
    "Exceeds the limit",
    "object of type",
    "NoneType",
    "unhashable type",
    "object has no attribute",
)

OK, VIOLATION, UNUSABLE = 0, 1, 2
RESAMPLES = ("--resamples", "20")


def has_command(*words: str) -> bool:
    """Whether ``peira`` has the subcommand ``words`` (cases of a command that is being
    added elsewhere apply once it exists)."""
    import argparse

    from peira.cli import build_parser

    parser = build_parser()
    for w in words:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or w not in sub.choices:
            return False
        parser = sub.choices[w]
    return True


@dataclass(frozen=True)
class Case:
    """One command line and what it must do."""

    klass: str
    name: str
    argv: tuple[str, ...]
    expect: tuple[int, ...]
    outputs: tuple[str, ...] = ()  # workspace-relative paths the command may write
    setup: Callable[[Path], None] | None = None  # plants bad input (gets the workspace)
    check: Callable[[Path, Result], str | None] | None = None  # extra check → failure text
    calls: int | None = None  # adapter calls allowed (None: not checked)
    writes_on: tuple[int, ...] = (0,)  # exit codes under which the outputs may be written

    @property
    def id(self) -> str:
        return f"{self.klass}:{self.name}"


@dataclass
class Result:
    code: int | None
    stdout: str
    stderr: str
    crash: str | None = None  # a traceback that escaped main
    problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- workspace


class CaseTimeout(BaseException):
    """A case ran past its time limit (a hang, or work sized by an unchecked argument)."""


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def _cli(argv: Sequence[str], limit: int = 30) -> tuple[int | None, str, str, str | None]:
    from peira.cli import main

    out, err = io.StringIO(), io.StringIO()
    crash = None
    code: int | None
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except CaseTimeout:
                code = None
                crash = f"CaseTimeout: still running after {limit} s"
            except BaseException:
                code = None
                crash = traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue(), crash


def build_workspace(root: Path) -> Path:
    """Valid inputs for every command, built with the command itself; returns ``root``."""
    from peira.io import write_parquet
    from peira.synth import generate
    from tests.builders import reference_dir

    ws = root
    ws.mkdir(parents=True, exist_ok=True)
    bench = generate(24, 2, seed=3)
    bench.write(ws / "ds")
    runs = bench.models["run_id"].to_list()
    (ws / "runs.txt").write_text("\n".join(runs) + "\n")
    (ws / "key").write_bytes(b"fuzz-key-0123456789abcdef0123456789\n")
    steps = [
        ["export", "cases", str(ws / "ds"), "--split", "public", "--out", str(ws / "cases.jsonl")],
        ["seal", "--dataset", str(ws / "ds"), "--responses", str(ws / "ds/responses.parquet"),
         "--run", runs[0], "--out", str(ws / "sealed"), "--resamples", "20"],
        ["holdout", "blind", "--dataset", str(ws / "ds"), "--key-file", str(ws / "key"),
         "--out", str(ws / "blinded.parquet")],
    ]  # fmt: skip
    for argv in steps:
        code, _, err, crash = _cli(argv)
        if code != 0:
            raise RuntimeError(f"workspace step {argv} failed ({code}): {err}{crash or ''}")
    blinded = pl.read_parquet(ws / "blinded.parquet")
    answers = [
        {
            "variant_id": v,
            "decision": opts[0],
            "abstained": False,
            "malformed": False,
            "run_id": "blind-run",
            "model": "m",
            "model_version": "1",
        }
        for v, opts in zip(blinded["variant_id"], blinded["options"], strict=True)
    ]
    (ws / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    parity = (reference_dir() / "lock_parity.jsonl").read_text(encoding="utf-8").splitlines()
    (ws / "artifact.json").write_text(json.dumps(json.loads(parity[0])["artifact"]))
    (ws / "transcript.jsonl").write_text(_transcript_text())
    logs = ws / "logs" / f"run_id={runs[0]}"
    logs.mkdir(parents=True)
    log = pl.read_parquet(ws / "ds/responses.parquet")
    write_parquet(log.filter(pl.col("run_id") == runs[0]).drop("run_id"), logs / "part-0.parquet")
    (ws / "foreign").mkdir()
    (ws / "foreign" / "notes.txt").write_text("a user's notes\n")
    log.head(3).write_parquet(ws / "foreign.parquet")  # written by polars: not Peira's
    (ws / "notes.txt").write_text("precious\n")
    _released_inputs(ws / "released")
    (ws / "scratch").mkdir()
    return ws


FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: lm-eval names its files ``samples_<task>_<time>.jsonl`` and ``results_<time>.json``.
LM_TIME = "2026-11-30T20-51-58.821061"
LM_SAMPLES = f"samples_arith_add_{LM_TIME}.jsonl"
LM_RESULTS = f"results_{LM_TIME}.json"
#: ``peira import table`` of ``released/table.csv``: the mapping of its columns.
TABLE_MAP = ("--map", "case_id=id", "--map", "expected=label", "--map", "benign_decision=benign",
             "--map", "attacked_decision=attacked", "--run", "r1")  # fmt: skip
#: ``peira import table`` of ``released/jc.csv.gz`` (JailbreakBench's judge comparison):
#: two judges, one of them gold, and no decision column (the first judge gives it).
JC_MAP = ("--map", "case_id=Index", "--map", "attacked_raw_text=target_response",
          "--set", "expected=refuse", "--set", "target=comply",
          "--map", "verdict:llama3=llama3_cf", "--map", "verdict:gold=human_majority",
          "--values", "verdict=1:comply,0:refuse")  # fmt: skip


def _released_inputs(r: Path) -> None:
    """Small released results and eval logs (copies of tests/fixtures, see their NOTICE)."""
    r.mkdir()
    shutil.copy(FIXTURES / "textattack" / "bert-mr-greedy.csv.gz", r / "ta.csv.gz")
    jbb = FIXTURES / "jailbreakbench" / "PAIR-black_box-llama-2-7b-chat-hf.json.gz"
    shutil.copy(jbb, r / "jbb.json.gz")
    (r / "jbb.json").write_bytes(gzip.decompress(jbb.read_bytes()))
    shutil.copy(FIXTURES / "inspect" / "mc_alpha.eval", r / "mc.eval")
    shutil.copy(FIXTURES / "inspect" / "two_scorers.json", r / "two_scorers.json")
    shutil.copy(FIXTURES / "jailbreakbench" / "judge_comparison" / "judge-comparison.csv.gz",
                r / "jc.csv.gz")  # fmt: skip
    (r / "lm").mkdir()
    src = FIXTURES / "lm_eval" / "alpha" / "mkm8wwzn"
    for name in (LM_RESULTS, LM_SAMPLES, f"samples_arith_add_perturbed_{LM_TIME}.jsonl"):
        shutil.copy(src / name, r / "lm" / name)
    rows = ["id,label,benign,attacked"] + [
        f"c{i},{'pos' if i % 2 else 'neg'},{'pos' if i % 3 else 'neg'},{'neg' if i % 4 else 'pos'}"
        for i in range(12)
    ]
    (r / "table.csv").write_text("\n".join(rows) + "\n")


def _transcript_text() -> str:
    prov = {"adapter_name": "acme", "adapter_version": "2.1", "model": "acme-large"}
    lines = []
    for i, (case, variant, decision) in enumerate(
        [
            ("t-1", "benign", "deny"),
            ("t-1", "attacked", "approve"),
            ("t-2", "benign", "deny"),
            ("t-2", "attacked", "deny"),
        ]
    ):
        lines.append(
            {
                "dispatch_index": i,
                "case_id": case,
                "variant": variant,
                "primitive": "choice",
                "request": {"input": {"prompt": "p", "options": ["approve", "deny"]}},
                "response": {
                    "kind": "output",
                    "output": {"decision": decision, "confidence": 0.9, "abstained": False},
                },
                "provider": prov,
                "seed": 0,
                "dispatch_limit": 1,
                "max_concurrency": 8,
            }
        )
    return "".join(json.dumps(x) + "\n" for x in lines)


def snapshot(ws: Path) -> dict[str, str]:
    """Relative path → sha256 (or ``<dir>``, ``-> target``) of every entry under ``ws``."""
    out: dict[str, str] = {}
    for root, dirs, files in os.walk(ws):
        for d in dirs:
            p = Path(root) / d
            rel = str(p.relative_to(ws))
            out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else "<dir>"
        for f in files:
            p = Path(root) / f
            rel = str(p.relative_to(ws))
            if p.is_symlink():
                out[rel] = f"-> {os.readlink(p)}"
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "<special>"
    return out


# ---------------------------------------------------------------- running a case


def _is_output(rel: str, outputs: Iterable[str], kind: str = "") -> bool:
    for o in outputs:
        o = o.rstrip("/")
        if rel == o or rel.startswith(o + "/") or rel.startswith(o + ".parts"):
            return True
        if kind == "<dir>" and (o + "/").startswith(rel + "/"):
            return True  # a parent directory made for the output
    return False


def _fill(arg: str, ws: Path) -> str:
    return arg.replace("{ws}", str(ws))


def run_case(case: Case, ws: Path, pristine: Path) -> Result:
    """Run one case in ``ws`` (restored from ``pristine`` afterwards if it changed)."""
    from tests import fuzz_adapters

    scratch = ws / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    if case.setup is not None:
        case.setup(ws)
    before = snapshot(ws)
    fuzz_adapters.CALLS["n"] = 0
    code, stdout, stderr, crash = _cli([_fill(a, ws) for a in case.argv])
    res = Result(code, stdout, stderr, crash)
    after = snapshot(ws)
    p = res.problems
    if crash is not None:
        last = crash.strip().splitlines()[-1]
        p.append(f"{'hang' if last.startswith('CaseTimeout') else 'traceback'}: {last}")
    if code not in case.expect and crash is None:
        p.append(f"exit {code}, expected {'/'.join(map(str, case.expect))}")
    for marker in RAW_MARKERS:
        if marker in stderr:
            p.append(f"raw message on stderr ({marker!r})")
            break
    errors = [ln for ln in stderr.splitlines() if ": error:" in ln]
    reports = case.argv[0] == "verify"  # verify reports each artifact's findings instead
    if code not in (0, None) and code != VIOLATION and not errors and not reports and not crash:
        p.append("failed without an error line")
    if errors and any(not ln.startswith("peira") for ln in errors):
        p.append("error line not from peira")
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    wrote = code in case.writes_on
    stray = (
        [c for c in changed if not _is_output(c, case.outputs, after.get(c, ""))]
        if wrote
        else changed
    )
    if stray:
        what = "changed outside its outputs" if wrote else "left files behind on failure"
        p.append(f"{what}: {', '.join(stray[:4])}{' …' if len(stray) > 4 else ''}")
    if wrote:
        for o in case.outputs:
            problem = _complete(ws / o)
            if problem:
                p.append(problem)
    if case.calls is not None and fuzz_adapters.CALLS["n"] > case.calls:
        p.append(f"{fuzz_adapters.CALLS['n']} adapter calls made before refusing")
    if case.check is not None and crash is None:
        extra = case.check(ws, res)
        if extra:
            p.append(extra)
    if changed:
        restore(ws, pristine)
    return res


def _complete(path: Path) -> str | None:
    if not path.exists():
        return None  # an optional output (e.g. --failures-out of a valid dataset)
    if path.suffix == ".parquet" and path.is_file():
        try:
            pl.read_parquet(path)
        except Exception as exc:
            return f"incomplete output {path.name}: {type(exc).__name__}"
    if path.is_dir():
        names = {p.name for p in path.iterdir()}
        if not names & {"manifest.json", "artifact.json", "cases.parquet"}:
            return f"incomplete output directory {path.name}: {sorted(names)[:5]}"
    return None


def restore(ws: Path, pristine: Path) -> None:
    for entry in list(ws.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in pristine.iterdir():
        dst = ws / entry.name
        if entry.is_dir():
            shutil.copytree(entry, dst, symlinks=True)
        else:
            shutil.copy2(entry, dst)


# ---------------------------------------------------------------- generators


def _writer(path: str, data: bytes | str) -> Callable[[Path], None]:
    def setup(ws: Path) -> None:
        p = ws / path
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            p.write_text(data, encoding="utf-8", errors="surrogatepass")
        else:
            p.write_bytes(data)

    return setup


def _deep(n: int, open_: str = "[", close: str = "]") -> str:
    return open_ * n + close * n


def _deep_obj(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


HOSTILE_JSON: dict[str, tuple[bytes, int]] = {
    # name: (file content, exit code)
    "deep-array": (_deep(3000).encode(), UNUSABLE),
    "deep-object": (_deep_obj(3000).encode(), UNUSABLE),
    "deep-100k": (_deep(100_000).encode(), UNUSABLE),
    "int-10e400": (b'{"case_id": ' + b"1" + b"0" * 400 + b"}", UNUSABLE),
    "int-5000-digits": (b'{"x": ' + b"9" * 5000 + b"}", UNUSABLE),
    "float-1e400": (b'{"x": 1e400}', UNUSABLE),
    "float--1e400": (b'{"x": -1e400}', UNUSABLE),
    "nan": (b'{"x": NaN}', UNUSABLE),
    "infinity": (b'{"x": Infinity}', UNUSABLE),
    "truncated": (b'{"case_id": "c1", "benign": {', UNUSABLE),
    "not-json": (b"this is not json\n", UNUSABLE),
    "empty": (b"", UNUSABLE),
    "whitespace": (b"   \n\n  ", UNUSABLE),
    "invalid-utf8": (b'{"case_id": "\xff\xfe"}', UNUSABLE),
    "lone-surrogate": (b'{"case_id": "\\ud800"}', UNUSABLE),
    "duplicate-keys": (b'{"case_id": "a", "case_id": "b"}', UNUSABLE),
    "top-array": (b"[1, 2, 3]", UNUSABLE),
    "top-null": (b"null", UNUSABLE),
    "top-string": (b'"case"', UNUSABLE),
    "nul-byte": (b'{"case_id": "a\x00"}', UNUSABLE),
    "huge-string": (b'{"case_id": "' + b"x" * 3_000_000 + b'"}', UNUSABLE),  # (unblind: 1)
}

#: JSON consumers: (command name, argv with {f} for the file, outputs, expected override)
JSON_CONSUMERS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("import-cases", ("import", "cases", "{f}", "--out", "{ws}/scratch/out-ds"),
     ("scratch/out-ds",)),
    ("import-artifact", ("import", "artifact", "{f}", "--out", "{ws}/scratch/o.parquet"),
     ("scratch/o.parquet",)),
    ("import-transcript", ("import", "transcript", "{f}", "--out", "{ws}/scratch/o.parquet"),
     ("scratch/o.parquet",)),
    ("verify", ("verify", "{f}"), ()),
    ("rescore-parser", ("rescore", "{ws}/ds/responses.parquet", "--dataset", "{ws}/ds",
                        "--parser", "{f}"), ()),
    ("unblind", ("holdout", "unblind", "{f}", "--dataset", "{ws}/ds", "--key-file", "{ws}/key",
                 "--out", "{ws}/scratch/u.parquet"), ("scratch/u.parquet",)),
]  # fmt: skip


def json_cases() -> list[Case]:
    cases = []
    for cname, argv, outputs in JSON_CONSUMERS:
        suffix = ".jsonl" if cname in ("import-cases", "import-transcript", "unblind") else ".json"
        for jname, (content, code) in HOSTILE_JSON.items():
            f = f"scratch/bad{suffix}"
            if cname == "verify":  # an artifact directory whose artifact.json is hostile
                f = "scratch/art/artifact.json"

                def setup(ws: Path, content: bytes = content) -> None:
                    shutil.copytree(ws / "sealed", ws / "scratch" / "art")
                    (ws / "scratch" / "art" / "artifact.json").write_bytes(content)

                target = "{ws}/scratch/art"
                expect: tuple[int, ...] = (UNUSABLE, VIOLATION)  # unreadable, or tampered
            else:
                setup = _writer(f, content)
                target = "{ws}/" + f
                expect = (code,)
                if cname == "unblind" and jname == "huge-string":
                    expect = (VIOLATION,)  # valid JSON lines naming an unknown variant
            full = tuple(a.replace("{f}", target) for a in argv)
            cases.append(Case("json", f"{cname}/{jname}", full, expect, outputs, setup))
    # inline JSON for --parser and --adapter-arg
    for jname in ("deep-array", "int-10e400", "float-1e400", "nan", "truncated"):
        text = HOSTILE_JSON[jname][0].decode()
        cases.append(
            Case("json", f"rescore-inline/{jname}",
                 ("rescore", "{ws}/ds/responses.parquet", "--dataset", "{ws}/ds", "--parser",
                  text if jname != "truncated" else '{"rules": ["json"'), (UNUSABLE,))
        )  # fmt: skip
        cases.append(
            Case("json", f"adapter-arg/{jname}",
                 ("run", "--adapter", "tests.fuzz_adapters:TakesArgs", "--dataset", "{ws}/ds",
                  "--out", "{ws}/scratch/run.parquet", "--adapter-arg", f"endpoint={text}"),
                 (OK, UNUSABLE), ("scratch/run.parquet",))
        )  # fmt: skip
    # the JSON readers of released results and eval logs
    out_ds = ("import", "--out", "{ws}/scratch/out-ds")
    released: list[tuple[str, str, tuple[str, ...]]] = [
        ("import-jailbreakbench", "scratch/bad.json", ("jailbreakbench", "{f}")),
        ("import-inspect", "scratch/bad.json", ("inspect", "{f}")),
        ("import-lm-eval-samples", "scratch/lm1/" + LM_SAMPLES, ("lm-eval", "{f}")),
        ("import-table-jsonl", "scratch/bad.jsonl", ("table", "{f}", *TABLE_MAP)),
    ]
    for jname, (content, _code) in HOSTILE_JSON.items():
        for cname, f, args in released:
            full = (out_ds[0], *(a.replace("{f}", "{ws}/" + f) for a in args), *out_ds[1:])
            cases.append(Case("json", f"{cname}/{jname}", full, (UNUSABLE,), ("scratch/out-ds",),
                              _writer(f, content)))  # fmt: skip
        cases.append(
            Case("json", f"import-lm-eval-results/{jname}",
                 ("import", "lm-eval", "{ws}/scratch/lm", "--attacked-task",
                  "arith_add=arith_add_perturbed", "--out", "{ws}/scratch/out-ds"),
                 (UNUSABLE,), ("scratch/out-ds",), _lm_dir(results=content))
        )  # fmt: skip
    # a BOM is accepted everywhere JSON is read
    for cname, argv, outputs in JSON_CONSUMERS:
        if cname in ("verify", "rescore-parser"):
            continue
        src = {"import-cases": "cases.jsonl", "import-artifact": "artifact.json",
               "import-transcript": "transcript.jsonl", "unblind": "answers.jsonl"}[cname]  # fmt: skip

        def bom(ws: Path, src: str = src) -> None:
            (ws / "scratch" / ("bom" + Path(src).suffix)).write_bytes(
                b"\xef\xbb\xbf" + (ws / src).read_bytes()
            )

        f = "{ws}/scratch/bom" + Path(src).suffix
        full = tuple(a.replace("{f}", f) for a in argv)
        cases.append(Case("json", f"{cname}/bom-accepted", full, (OK,), outputs, bom))
    return cases


# --- numeric flags: (flag, commands taking it, bad values)
_NUM = ["nan", "inf", "-inf", "-1", "1e400", "99999999999999999999999", "abc", ""]
_INT_EXTRA = ["1.5", "0x10"]

_DATA_CMDS: dict[str, tuple[str, ...]] = {
    "score": ("score", "--dataset", "{ws}/ds"),
    "leaderboard": ("leaderboard", "--dataset", "{ws}/ds"),
    "compare": ("compare", "--dataset", "{ws}/ds"),
    "tables": ("tables", "--dataset", "{ws}/ds", "--no-figures", "--out", "{ws}/scratch/t"),
    "report": ("report", "--dataset", "{ws}/ds", "--no-figures", "--out", "{ws}/scratch/r.html"),
    "publish": ("publish", "--dataset", "{ws}/ds", "--no-figures", "--out", "{ws}/scratch/p"),
    "seal": ("seal", "--dataset", "{ws}/ds", "--responses", "{ws}/ds/responses.parquet",
             "--run", "{run0}", "--out", "{ws}/scratch/s"),
    "divergence": ("holdout", "divergence", "--dataset", "{ws}/ds", "--responses",
                   "{ws}/ds/responses.parquet"),
}  # fmt: skip
_DATA_OUTS = {"tables": ("scratch/t",), "report": ("scratch/r.html",),
              "publish": ("scratch/p",), "seal": ("scratch/s",)}  # fmt: skip

FLAGS: list[tuple[str, tuple[str, ...], list[str], str]] = [
    # (flag, commands, bad values, kind)
    ("--resamples", tuple(_DATA_CMDS), [*_NUM, "0", *_INT_EXTRA], "int"),
    ("--seed", tuple(_DATA_CMDS), [*_NUM, *_INT_EXTRA], "int"),
    ("--level", ("score", "leaderboard", "compare", "tables", "report", "publish"),
     [*_NUM, "0", "1", "1.5"], "float"),
    ("--delta", tuple(_DATA_CMDS), [*_NUM, "1.5"], "float"),
]  # fmt: skip

_RUN = ("run", "--adapter", "tests.fuzz_adapters:Counting", "--dataset", "{ws}/ds", "--out",
        "{ws}/scratch/run.parquet")  # fmt: skip
_OTHER_FLAGS: list[tuple[str, tuple[str, ...], list[str], tuple[str, ...]]] = [
    ("run --samples", _RUN, [*_NUM, "0", *_INT_EXTRA], ("scratch/run.parquet",)),
    ("run --concurrency", _RUN, [*_NUM, "0", *_INT_EXTRA], ("scratch/run.parquet",)),
    ("run --timeout", _RUN, _NUM, ("scratch/run.parquet",)),
    ("run --retries", _RUN, [*_NUM, *_INT_EXTRA], ("scratch/run.parquet",)),
    ("run --backoff", _RUN, _NUM, ("scratch/run.parquet",)),
    ("run --checkpoint-every", _RUN, [*_NUM, "0", *_INT_EXTRA], ("scratch/run.parquet",)),
    ("run --checkpoint-seconds", _RUN, _NUM, ("scratch/run.parquet",)),
    ("synth --cases", ("synth", "--out", "{ws}/scratch/y", "--models", "1"),
     [*_NUM, "0", *_INT_EXTRA], ("scratch/y",)),
    ("synth --models", ("synth", "--out", "{ws}/scratch/y", "--cases", "4"),
     [*_NUM, "0", *_INT_EXTRA], ("scratch/y",)),
    ("synth --seed", ("synth", "--out", "{ws}/scratch/y", "--cases", "4", "--models", "1"),
     [*_NUM, *_INT_EXTRA], ("scratch/y",)),
    ("synth --samples", ("synth", "--out", "{ws}/scratch/y", "--cases", "4", "--models", "1"),
     [*_NUM, "0", *_INT_EXTRA], ("scratch/y",)),
    ("validate --examples", ("validate", "{ws}/ds"), ["nan", "-1", "abc", "1.5"], ()),
    ("blind --digits", ("holdout", "blind", "--dataset", "{ws}/ds", "--key-file", "{ws}/key",
                        "--out", "{ws}/scratch/b.parquet"),
     ["nan", "-1", "0", "7", "65", "abc", "99999999999999999999999"], ("scratch/b.parquet",)),
    ("unblind --digits", ("holdout", "unblind", "{ws}/answers.jsonl", "--dataset", "{ws}/ds",
                          "--key-file", "{ws}/key", "--out", "{ws}/scratch/u.parquet"),
     ["nan", "-1", "0", "7", "65", "abc"], ("scratch/u.parquet",)),
    ("divergence --resamples", _DATA_CMDS["divergence"], [*_NUM, "0"], ()),
    ("compare --quorum", (*_DATA_CMDS["compare"], "--judges", "all"),
     [*_NUM, "0", "10001", *_INT_EXTRA], ()),
    ("leaderboard --quorum", (*_DATA_CMDS["leaderboard"], "--judges", "all"),
     [*_NUM, "0", "10001", *_INT_EXTRA], ()),
]  # fmt: skip


def flag_cases() -> list[Case]:
    cases = []
    for flag, commands, values, _kind in FLAGS:
        for cmd in commands:
            base = _DATA_CMDS[cmd]
            for v in values:
                extra = () if flag == "--resamples" else RESAMPLES
                argv = (*base, *extra, f"{flag}={v}")
                cases.append(
                    Case("flags", f"{cmd} {flag}={v}", argv, (UNUSABLE,), _DATA_OUTS.get(cmd, ()))
                )
    for label, base, values, outputs in _OTHER_FLAGS:
        flag = label.split()[-1]
        for v in values:
            calls = 0 if base is _RUN else None
            cases.append(
                Case("flags", f"{label}={v}", (*base, f"{flag}={v}"), (UNUSABLE,), outputs,
                     calls=calls)
            )  # fmt: skip
    if has_command("flips"):
        for flag, values in (("--limit", [*_NUM, *_INT_EXTRA]), ("--delta", [*_NUM, "1.5"])):
            for v in values:
                cases.append(Case("flags", f"flips {flag}={v}",
                                  ("flips", "--dataset", "{ws}/ds", f"{flag}={v}"), (UNUSABLE,)))  # fmt: skip
    if has_command("plan"):
        for flag, values in (
            ("--mde", [*_NUM, "0", "1"]),
            ("--power", [*_NUM, "0", "1"]),
            ("--asr", [*_NUM, "0", "1"]),
            ("--icc", [*_NUM, "1"]),
            ("--eligibility", [*_NUM, "0"]),
            ("--rho", [v for v in _NUM if v != "-1"] + ["2"]),
            ("--cases-per-cluster", [*_NUM, "0.5"]),
            ("--samples", [*_NUM, "0"]),
            ("--family", [*_NUM, "0", *_INT_EXTRA]),
            ("--clusters", [*_NUM, "0", *_INT_EXTRA]),
        ):
            for v in values:
                base = () if flag == "--asr" else ("--asr", "0.1")
                cases.append(Case("flags", f"plan {flag}={v}", ("plan", *base, f"{flag}={v}"),
                                  (UNUSABLE,)))  # fmt: skip
    if has_command("holdout", "keygen"):
        for v in [*_NUM, "0", "15", *_INT_EXTRA]:
            cases.append(Case("flags", f"keygen --bytes={v}",
                              ("holdout", "keygen", "--out", "{ws}/scratch/k", f"--bytes={v}"),
                              (UNUSABLE,), ("scratch/k",)))  # fmt: skip
    # the documented edges are accepted
    for label, argv, outputs in [
        ("run --timeout=0 (no limit)", (*_RUN, "--timeout=0"), ("scratch/run.parquet",)),
        ("run --backoff=0", (*_RUN, "--backoff=0", "--retries=0"), ("scratch/run.parquet",)),
        ("score --delta=0", (*_DATA_CMDS["score"], *RESAMPLES, "--delta=0"), ()),
        ("score --seed=2**63-1", (*_DATA_CMDS["score"], *RESAMPLES, f"--seed={2**63 - 1}"), ()),
        ("score --level=0.999", (*_DATA_CMDS["score"], *RESAMPLES, "--level=0.999"), ()),
    ]:
        cases.append(Case("flags", f"accepted: {label}", argv, (OK,), outputs))
    return cases


# --- output paths (every writer)

#: writer: (argv with {out}, kind, inputs that must never be overwritten, has --force)
WRITERS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    "run": (("run", "--adapter", "tests.fuzz_adapters:Counting", "--dataset", "{ws}/ds",
             "--out", "{out}"), "file", ("ds/cases.parquet", "ds/variants.parquet")),
    "import-cases": (("import", "cases", "{ws}/cases.jsonl", "--out", "{out}"), "dir",
                     ("cases.jsonl",)),
    "import-artifact": (("import", "artifact", "{ws}/artifact.json", "--out", "{out}"), "file",
                        ("artifact.json",)),
    "import-transcript": (("import", "transcript", "{ws}/transcript.jsonl", "--out", "{out}"),
                          "file", ("transcript.jsonl",)),
    "export": (("export", "cases", "{ws}/ds", "--split", "public", "--out", "{out}"), "file",
               ("ds/cases.parquet", "ds/variants.parquet")),
    "blind": (("holdout", "blind", "--dataset", "{ws}/ds", "--key-file", "{ws}/key", "--out",
               "{out}"), "file", ("ds/cases.parquet", "key")),
    "unblind": (("holdout", "unblind", "{ws}/answers.jsonl", "--dataset", "{ws}/ds",
                 "--key-file", "{ws}/key", "--out", "{out}"), "file",
                ("answers.jsonl", "ds/variants.parquet")),
    "failures-out": (("validate", "{ws}/ds", "--responses", "{ws}/foreign.parquet",
                      "--failures-out", "{out}"), "file", ("foreign.parquet",)),
    "changes-out": (("rescore", "{ws}/ds/responses.parquet", "--dataset", "{ws}/ds",
                     "--changes-out", "{out}"), "file", ("ds/responses.parquet",)),
    "responses-out": (("rescore", "{ws}/ds/responses.parquet", "--dataset", "{ws}/ds",
                       "--responses-out", "{out}"), "file", ("ds/responses.parquet",)),
    "report": (("report", "--dataset", "{ws}/ds", "--no-figures", *RESAMPLES, "--out", "{out}"),
               "file", ("ds/responses.parquet",)),
    "tables": (("tables", "--dataset", "{ws}/ds", "--no-figures", *RESAMPLES, "--out", "{out}"),
               "dir", ("ds/responses.parquet",)),
    "publish": (("publish", "--dataset", "{ws}/ds", "--no-figures", *RESAMPLES, "--out",
                 "{out}"), "dir", ("ds/responses.parquet",)),
    "seal": (("seal", "--dataset", "{ws}/ds", "--responses", "{ws}/ds/responses.parquet",
              "--run", "{run0}", *RESAMPLES, "--out", "{out}"), "dir",
             ("ds/responses.parquet",)),
    "synth": (("synth", "--cases", "4", "--models", "1", "--out", "{out}"), "dir", ()),
    "import-textattack": (("import", "textattack", "{ws}/released/ta.csv.gz", "--out", "{out}"),
                          "dir", ("released/ta.csv.gz",)),
    "import-jailbreakbench": (("import", "jailbreakbench", "{ws}/released/jbb.json.gz", "--out",
                               "{out}"), "dir", ("released/jbb.json.gz",)),
    "import-table": (("import", "table", "{ws}/released/table.csv", *TABLE_MAP, "--out", "{out}"),
                     "dir", ("released/table.csv",)),
    "import-inspect": (("import", "inspect", "{ws}/released/mc.eval", "--out", "{out}"), "dir",
                       ("released/mc.eval",)),
    "import-lm-eval": (("import", "lm-eval", "{ws}/released/lm", "--attacked-task",
                        "arith_add=arith_add_perturbed", "--out", "{out}"), "dir",
                       ("released/lm",)),
}  # fmt: skip

if has_command("holdout", "keygen"):
    WRITERS["keygen"] = (("holdout", "keygen", "--out", "{out}"), "file", ())

_VIOLATING_WRITERS = {"failures-out"}  # exit 1 on success (the violations are the output)
_NO_FORCE = {"keygen"}  # never replaces a file: no --force (argparse refuses it, exit 2)
_NO_PARENTS = {"keygen"}  # may refuse to create missing parent directories (a secret's place)


def output_cases() -> list[Case]:
    cases = []
    for w, (argv, kind, inputs) in WRITERS.items():
        ok_code = VIOLATION if w in _VIOLATING_WRITERS else OK
        calls = 0 if w == "run" else None

        def mk(name: str, out: str, expect: tuple[int, ...], *, force: bool = False,
               setup: Callable[[Path], None] | None = None, outputs: tuple[str, ...] = (),
               w: str = w, argv: tuple[str, ...] = argv, ok_code: int = ok_code,
               calls: int | None = calls) -> Case:  # fmt: skip
            full = tuple(a.replace("{out}", out) for a in argv) + (("--force",) if force else ())
            if force and w in _NO_FORCE:
                expect, outputs = (UNUSABLE,), ()
            if name == "new-path" and w in _NO_PARENTS:
                expect = (ok_code, UNUSABLE)
            return Case("output", f"{w}/{name}", full, expect, outputs, setup,
                        calls=calls if ok_code not in expect else None,
                        writes_on=(ok_code,))  # fmt: skip

        ext = {"report": ".html", "export": ".jsonl", "keygen": ".key"}.get(w, ".parquet")
        # 1. a directory where a file goes, or a file where a directory goes
        if kind == "file":
            cases.append(mk("existing-directory", "{ws}/foreign", (UNUSABLE,)))
            cases.append(mk("existing-directory+force", "{ws}/foreign", (UNUSABLE,), force=True))
        else:
            cases.append(mk("existing-file", "{ws}/notes.txt", (UNUSABLE,)))
            cases.append(mk("existing-file+force", "{ws}/notes.txt", (UNUSABLE,), force=True))
        # 2. under a regular file
        cases.append(mk("under-a-file", "{ws}/notes.txt/out" + ext, (UNUSABLE,)))
        cases.append(mk("deep-under-a-file", "{ws}/notes.txt/a/b/out" + ext, (UNUSABLE,)))
        # 3. virtual and unwritable places
        cases.append(mk("proc", "/proc/peira-fuzz" + ext, (UNUSABLE,)))
        cases.append(mk("proc-self", "/proc/self/peira/out" + ext, (UNUSABLE,)))
        cases.append(mk("sys", "/sys/peira-fuzz" + ext, (UNUSABLE,)))
        cases.append(mk("empty-path", "", (UNUSABLE,)))
        cases.append(mk("nul-in-path", "{ws}/scratch/a\x00b" + ext, (UNUSABLE,)))
        cases.append(mk("name-too-long", "{ws}/scratch/" + "n" * 300 + ext, (UNUSABLE,)))
        cases.append(
            mk("dangling-symlink", "{ws}/scratch/link" + ext, (UNUSABLE,),
               setup=lambda ws, e=ext: (ws / "scratch" / ("link" + e)).symlink_to(
                   ws / "scratch" / "nowhere" / "x"))
        )  # fmt: skip
        # 4. what Peira did not make
        if kind == "file":
            cases.append(mk("foreign-file", "{ws}/foreign.parquet", (UNUSABLE,)))
            cases.append(mk("notes-file", "{ws}/notes.txt", (UNUSABLE,)))
            cases.append(
                mk("foreign-file+force", "{ws}/scratch/f" + ext, (ok_code,), force=True,
                   setup=_writer("scratch/f" + ext, "user content\n"), outputs=("scratch/f" + ext,))
            )  # fmt: skip
        else:
            cases.append(mk("foreign-dir", "{ws}/foreign", (UNUSABLE,)))
            cases.append(mk("foreign-dir+force", "{ws}/foreign", (UNUSABLE,), force=True))
        # 5. an input of the same command (even with --force)
        for i in inputs:
            for alias in ("{ws}/" + i, "{ws}/scratch/../" + i):
                tag = "input" if "scratch" not in alias else "input-alias"
                cases.append(mk(f"{tag}:{i}", alias, (UNUSABLE,)))
                cases.append(mk(f"{tag}:{i}+force", alias, (UNUSABLE,), force=True))
            if kind == "dir":
                parent = str(Path(i).parent)
                if parent != ".":
                    cases.append(mk(f"input-dir:{parent}+force", "{ws}/" + parent, (UNUSABLE,),
                                    force=True))  # fmt: skip
        # the output inside a log directory the command reads
        # 6. fine: a new path, missing parents
        new = "{ws}/scratch/new/deeper/out" + ("" if kind == "dir" else ext)
        rel = new.removeprefix("{ws}/")
        cases.append(mk("new-path", new, (ok_code,), outputs=(rel,)))
    # two writes to one path: the second replaces Peira's own output without --force
    for w in ("import-artifact", "tables", "seal", "import-cases", "report"):
        argv, kind, _ = WRITERS[w]
        out = "{ws}/scratch/again" + (
            "" if kind == "dir" else (".html" if w == "report" else ".parquet")
        )
        first = tuple(a.replace("{out}", out) for a in argv)

        def twice(ws: Path, first: tuple[str, ...] = first) -> None:
            code, _, err, crash = _cli([_fill(a, ws).replace("{run0}", _run0(ws)) for a in first])
            assert code == 0, err + (crash or "")

        force = ("--force",) if w == "seal" else ()
        cases.append(Case("output", f"{w}/replace-own-output", first + force, (OK,),
                          (out.removeprefix("{ws}/"),), twice))  # fmt: skip
    # the output inside the log directory a command reads
    cases.append(
        Case("output", "tables/inside-input-log-dir",
             ("tables", "--dataset", "{ws}/ds", "--responses", "{ws}/logs", "--no-figures",
              *RESAMPLES, "--out", "{ws}/logs/tables"), (UNUSABLE,))
    )  # fmt: skip
    cases.append(
        Case("output", "rescore/responses-out-inside-log-dir",
             ("rescore", "{ws}/logs", "--dataset", "{ws}/ds", "--responses-out",
              "{ws}/logs/run_id=x/p.parquet"), (UNUSABLE, VIOLATION))
    )  # fmt: skip
    return cases


def _run0(ws: Path) -> str:
    return (ws / "runs.txt").read_text().split()[0]


# --- bad data files


def _mutate_parquet(rel: str, fn: Callable[[pl.DataFrame], pl.DataFrame]) -> Callable[[Path], None]:
    def setup(ws: Path) -> None:
        src = ws / "ds"
        dst = ws / "scratch" / "ds"
        shutil.copytree(src, dst)
        df = pl.read_parquet(dst / rel)
        (dst / rel).unlink()
        fn(df).write_parquet(dst / rel)

    return setup


def _mutate_bytes(rel: str, fn: Callable[[bytes], bytes | None]) -> Callable[[Path], None]:
    def setup(ws: Path) -> None:
        dst = ws / "scratch" / "ds"
        shutil.copytree(ws / "ds", dst)
        data = (dst / rel).read_bytes()
        (dst / rel).unlink()
        new = fn(data)
        if new is None:
            (dst / rel).mkdir()  # a directory where the file should be
        else:
            (dst / rel).write_bytes(new)

    return setup


def _first(col: str, value: Any) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def fn(df: pl.DataFrame) -> pl.DataFrame:
        idx = pl.int_range(pl.len())
        return df.with_columns(
            pl.when(idx == 0).then(pl.lit(value, dtype=df.schema[col])).otherwise(pl.col(col))
            .alias(col)
        )  # fmt: skip

    return fn


def _cast_first(col: str, value: Any) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def fn(df: pl.DataFrame) -> pl.DataFrame:
        s = df[col].to_list()
        s[0] = value
        return df.with_columns(pl.Series(col, s, strict=False))

    return fn


def _options_differ(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        pl.when(pl.int_range(pl.len()) == 1)
        .then(pl.col("options").list.reverse().list.concat(pl.lit(["extra"])))
        .otherwise(pl.col("options"))
        .alias("options")
    )


def _drop_half_cases_of_first_run(df: pl.DataFrame) -> pl.DataFrame:
    run0 = df["run_id"].sort()[0]
    cases = df["case_id"].unique().sort()
    drop = cases.head(len(cases) // 2)
    return df.filter(~((pl.col("run_id") == run0) & pl.col("case_id").is_in(drop)))


def _rename_first_run(suffix: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def fn(df: pl.DataFrame) -> pl.DataFrame:
        run0 = df["run_id"].sort()[0]
        return df.with_columns(
            pl.when(pl.col("run_id") == run0).then(pl.col("run_id") + suffix)
            .otherwise(pl.col("run_id")).alias("run_id")
        )  # fmt: skip

    return fn


#: name: (setup, exit code of validate, exit code of the other commands)
DATA_MUTATIONS: dict[str, tuple[Callable[[Path], None], tuple[int, ...], tuple[int, ...]]] = {
    "cases-truncated": (_mutate_bytes("cases.parquet", lambda b: b[: len(b) // 2]),
                        (UNUSABLE,), (UNUSABLE,)),
    "cases-empty-file": (_mutate_bytes("cases.parquet", lambda b: b""), (UNUSABLE,), (UNUSABLE,)),
    "cases-garbage": (_mutate_bytes("cases.parquet", lambda b: os.urandom(2000)),
                      (UNUSABLE,), (UNUSABLE,)),
    "cases-is-a-directory": (_mutate_bytes("cases.parquet", lambda b: None),
                             (UNUSABLE,), (UNUSABLE,)),
    "variants-truncated": (_mutate_bytes("variants.parquet", lambda b: b[:100]),
                           (UNUSABLE,), (UNUSABLE,)),
    "responses-truncated": (_mutate_bytes("responses.parquet", lambda b: b[:-50]),
                            (UNUSABLE,), (UNUSABLE,)),
    "responses-csv": (_mutate_bytes("responses.parquet", lambda b: b"run_id,case_id\nm,c\n"),
                      (UNUSABLE,), (UNUSABLE,)),
    "cases-missing-column": (_mutate_parquet("cases.parquet", lambda d: d.drop("split")),
                             (VIOLATION,), (VIOLATION,)),
    "cases-wrong-dtype": (_mutate_parquet("cases.parquet", lambda d: d.with_columns(
        pl.col("split").cast(pl.Categorical))), (OK, VIOLATION), (OK, VIOLATION)),
    "cases-zero-rows": (_mutate_parquet("cases.parquet", lambda d: d.head(0)),
                        (VIOLATION, UNUSABLE), (VIOLATION, UNUSABLE)),
    "cases-duplicate-id": (_mutate_parquet("cases.parquet", lambda d: pl.concat([d, d.head(1)])),
                           (VIOLATION,), (VIOLATION,)),
    "cases-null-id": (_mutate_parquet("cases.parquet", _first("case_id", None)),
                      (VIOLATION,), (VIOLATION,)),
    "cases-esc-in-id": (_mutate_parquet("cases.parquet", _first("case_id", "c\x1b[2Jx")),
                        (VIOLATION,), (VIOLATION,)),
    "cases-newline-in-id": (_mutate_parquet("cases.parquet", _first("case_id", "c1\nm01 0.99")),
                            (VIOLATION,), (VIOLATION,)),
    "cases-esc-in-family": (_mutate_parquet("cases.parquet", _first("family", "fam\x1b[31mily")),
                            (VIOLATION,), (VIOLATION,)),
    "responses-cr-in-whole-run-id": (_mutate_parquet("responses.parquet",
                                                     _rename_first_run("\r0.99 m99")),
                                     (VIOLATION,), (VIOLATION,)),
    "responses-nul-in-model": (_mutate_parquet("responses.parquet",
                                               lambda d: d.with_columns(
                                                   pl.col("model") + "\x00")),
                               (VIOLATION,), (VIOLATION,)),
    "variants-options-differ": (_mutate_parquet("variants.parquet", _options_differ),
                                (VIOLATION,), (VIOLATION,)),
    "responses-cr-in-run-id": (_mutate_parquet("responses.parquet", _first("run_id", "m\rX")),
                               (VIOLATION,), (VIOLATION,)),
    "responses-score-2": (_mutate_parquet("responses.parquet", _cast_first("score", 2.0)),
                          (VIOLATION,), (VIOLATION,)),
    "responses-score-nan": (_mutate_parquet("responses.parquet", _cast_first("score", float("nan"))),
                            (VIOLATION,), (VIOLATION,)),
    "responses-confidence-inf": (_mutate_parquet("responses.parquet",
                                                 _cast_first("confidence", float("inf"))),
                                 (VIOLATION,), (VIOLATION,)),
    "responses-latency-negative": (_mutate_parquet("responses.parquet",
                                                   _cast_first("latency_ms", -5.0)),
                                   (VIOLATION,), (VIOLATION,)),
    "responses-unknown-case": (_mutate_parquet("responses.parquet", _first("case_id", "nope")),
                               (VIOLATION,), (VIOLATION,)),
    "responses-duplicate-row": (_mutate_parquet("responses.parquet",
                                                lambda d: pl.concat([d, d.head(1)])),
                                (VIOLATION,), (VIOLATION,)),
    "responses-missing-arm": (_mutate_parquet("responses.parquet", lambda d: d.slice(1)),
                              (VIOLATION,), (VIOLATION,)),
    "responses-zero-rows": (_mutate_parquet("responses.parquet", lambda d: d.head(0)),
                            (UNUSABLE, VIOLATION), (UNUSABLE, VIOLATION)),
    "responses-no-columns": (_mutate_parquet("responses.parquet", lambda d: d.select("run_id")),
                             (VIOLATION,), (VIOLATION,)),
}  # fmt: skip

#: commands reading a dataset (and the log when they score): argv with {d} = dataset dir
DATA_READERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "validate": (("validate", "{d}", "--responses", "{d}/responses.parquet"), ()),
    "score": (("score", "--dataset", "{d}", *RESAMPLES), ()),
    "leaderboard": (("leaderboard", "--dataset", "{d}", *RESAMPLES), ()),
    "compare": (("compare", "--dataset", "{d}", *RESAMPLES), ()),
    "tables": (("tables", "--dataset", "{d}", "--no-figures", *RESAMPLES, "--out",
                "{ws}/scratch/t"), ("scratch/t",)),
    "report": (("report", "--dataset", "{d}", "--no-figures", *RESAMPLES, "--out",
                "{ws}/scratch/r.html"), ("scratch/r.html",)),
    "publish": (("publish", "--dataset", "{d}", "--no-figures", *RESAMPLES, "--out",
                 "{ws}/scratch/p"), ("scratch/p",)),
    "seal": (("seal", "--dataset", "{d}", "--responses", "{d}/responses.parquet", "--run",
              "{run0}", *RESAMPLES, "--out", "{ws}/scratch/s"), ("scratch/s",)),
    "divergence": (("holdout", "divergence", "--dataset", "{d}", "--responses",
                    "{d}/responses.parquet", "--resamples", "20"), ()),
    "rescore": (("rescore", "{d}/responses.parquet", "--dataset", "{d}"), ()),
    "export": (("export", "cases", "{d}", "--split", "public", "--out", "{ws}/scratch/e.jsonl"),
               ("scratch/e.jsonl",)),
    "blind": (("holdout", "blind", "--dataset", "{d}", "--key-file", "{ws}/key", "--out",
               "{ws}/scratch/b.parquet"), ("scratch/b.parquet",)),
    "run": (("run", "--adapter", "tests.fuzz_adapters:Counting", "--dataset", "{d}", "--out",
             "{ws}/scratch/run.parquet"), ("scratch/run.parquet",)),
    "verify-rederive": (("verify", "{ws}/sealed", "--rederive", "--dataset", "{d}"), ()),
}  # fmt: skip

_READS_LOG = {"validate", "score", "leaderboard", "compare", "tables", "report", "publish", "seal",
              "divergence", "rescore"}  # fmt: skip
if has_command("flips"):
    DATA_READERS["flips"] = (("flips", "--dataset", "{d}"), ())
    _READS_LOG.add("flips")
if has_command("plan"):
    DATA_READERS["plan"] = (("plan", "--pilot", "{d}/responses.parquet", "--dataset", "{d}"), ())
    _READS_LOG.add("plan")


def data_cases() -> list[Case]:
    cases = []
    for mname, (setup, v_code, code) in DATA_MUTATIONS.items():
        log_only = mname.startswith("responses-")
        for cmd, (argv, outputs) in DATA_READERS.items():
            if log_only and cmd not in _READS_LOG:
                continue
            expect = v_code if cmd == "validate" else code
            if cmd == "verify-rederive":
                expect = (*expect, VIOLATION, UNUSABLE)  # a changed dataset: tampered/unusable
            full = tuple(a.replace("{d}", "{ws}/scratch/ds") for a in argv)
            calls = 0 if cmd == "run" else None
            if cmd == "run" and mname == "cases-wrong-dtype":
                calls = None
            cases.append(Case("data", f"{cmd}/{mname}", full, expect, outputs, setup, calls=calls))
    return cases


# --- partitions and identifiers


def partition_cases() -> list[Case]:
    def relabel(ws: Path) -> None:
        d = ws / "scratch" / "log" / "run_id=other"
        d.mkdir(parents=True)
        log = pl.read_parquet(ws / "ds/responses.parquet")
        log.filter(pl.col("run_id") == _run0(ws)).write_parquet(d / "part-0.parquet")

    def agree(ws: Path) -> None:
        log = pl.read_parquet(ws / "ds/responses.parquet")
        for run in log["run_id"].unique().to_list():
            d = ws / "scratch" / "log" / f"run_id={run}"
            d.mkdir(parents=True)
            log.filter(pl.col("run_id") == run).write_parquet(d / "part-0.parquet")

    def checkpoint_beside(ws: Path) -> None:  # a run's LOG.parts/ inside a log directory
        shutil.copytree(ws / "logs", ws / "scratch" / "log")
        parts = ws / "scratch" / "log" / "x.parquet.parts"
        parts.mkdir()
        shutil.copy(ws / "logs" / f"run_id={_run0(ws)}" / "part-0.parquet",
                    parts / "part-00001.parquet")  # fmt: skip

    cases = []
    for cmd in ("validate", "score", "leaderboard", "tables"):
        argv, outputs = DATA_READERS[cmd]
        argv = tuple(a.replace("{d}/responses.parquet", "{ws}/scratch/log") for a in argv)
        argv = tuple(a.replace("{d}", "{ws}/ds") for a in argv)
        if "--responses" not in argv:
            argv = (*argv, "--responses", "{ws}/scratch/log")
        cases.append(Case("partition", f"{cmd}/relabelled", argv, (VIOLATION, UNUSABLE),
                          outputs, relabel))  # fmt: skip
        cases.append(Case("partition", f"{cmd}/agreeing", argv, (OK,), outputs, agree,
                          check=_no_warning_check if cmd != "validate" else None))  # fmt: skip
    cases.append(Case("partition", "score/checkpoint-dir-ignored",
                      ("score", "--dataset", "{ws}/ds", "--responses", "{ws}/scratch/log",
                       *RESAMPLES, "--split", "all"), (OK, VIOLATION), (), checkpoint_beside))  # fmt: skip
    return cases


def _no_warning_check(ws: Path, res: Result) -> str | None:
    return None


# --- adapters


def adapter_cases() -> list[Case]:
    base = ("run", "--dataset", "{ws}/ds", "--out", "{ws}/scratch/run.parquet")
    out = ("scratch/run.parquet",)
    cases = []
    for spec, name in [
        ("tests.no_such_module:X", "missing-module"),
        ("tests.fuzz_adapters:Missing", "missing-class"),
        ("tests.fuzz_adapters:NoDecide", "no-decide"),
        ("tests.fuzz_adapters:BadInit", "constructor-raises"),
        ("tests.fuzz_adapters:TakesArgs", "missing-argument"),
        ("tests.fuzz_adapters:NoName", "no-name"),
        ("tests.fuzz_adapters:not_a_class", "not-a-class"),
        ("no-colon", "no-colon"),
        (":", "empty"),
        ("os:system", "builtin-function"),
    ]:
        cases.append(Case("adapter", f"load/{name}", (*base, "--adapter", spec), (UNUSABLE,), out,
                          calls=0))  # fmt: skip
    cases.append(Case("adapter", "load/unknown-argument",
                      (*base, "--adapter", "tests.fuzz_adapters:Counting", "--adapter-arg",
                       "nope=1"), (UNUSABLE,), out, calls=0))  # fmt: skip
    cases.append(Case("adapter", "load/bad-adapter-arg",
                      (*base, "--adapter", "tests.fuzz_adapters:Counting", "--adapter-arg",
                       "=1"), (UNUSABLE,), out, calls=0))  # fmt: skip
    from tests.fuzz_adapters import _BAD

    for mode in ("long-raw", "nul-raw"):  # odd but storable: kept as they are
        cases.append(
            Case("adapter", f"output/{mode}",
                 (*base, "--adapter", "tests.fuzz_adapters:Hostile", "--adapter-arg",
                  f"mode={mode}", "--concurrency", "1"), (OK,), out,
                 check=_stored_rows_check)
        )  # fmt: skip
    for mode in [m for m in _BAD if m not in ("long-raw", "nul-raw")] + ["raise", "none", "string"]:
        cases.append(
            Case("adapter", f"output/{mode}",
                 (*base, "--adapter", "tests.fuzz_adapters:Hostile", "--adapter-arg",
                  f"mode={mode}", "--concurrency", "1"), (OK,), out,
                 check=_malformed_rows_check)
        )  # fmt: skip
    return cases


def _stored_rows_check(ws: Path, res: Result) -> str | None:
    log = pl.read_parquet(ws / "scratch" / "run.parquet")
    if log["malformed"].any():
        return "a storable output was marked malformed"
    return None


def _malformed_rows_check(ws: Path, res: Result) -> str | None:
    p = ws / "scratch" / "run.parquet"
    if not p.exists():
        return "no response log written"
    log = pl.read_parquet(p)
    variants = pl.read_parquet(ws / "ds" / "variants.parquet").height
    if log.height != variants:
        return f"{log.height} rows, expected {variants} (one per call)"
    bad = log.filter(pl.col("malformed"))
    if bad.height != variants // 3:
        return f"{bad.height} malformed rows, expected {variants // 3}"
    if bad["error"].null_count():
        return "a malformed row without its reason"
    return None


# --- verdicts (compare applies the leaderboard's gates), leaks, messages


def keep_only_unflipped(log: pl.DataFrame, cases: pl.DataFrame, run: str) -> pl.DataFrame:
    """``run``'s log without every case it flipped (a run that 'lost' its failures)."""
    from peira._pairs import build_pairs

    pairs = build_pairs(log.filter(pl.col("run_id") == run), cases)
    flipped = pairs.filter(pl.col("flipped"))["case_id"].unique()
    return log.filter(~((pl.col("run_id") == run) & pl.col("case_id").is_in(flipped.implode())))


def verdict_cases() -> list[Case]:
    def incomplete(ws: Path) -> None:
        from peira.synth import generate

        bench = generate(400, 3, seed=11)
        d = ws / "scratch" / "ds"
        bench.write(d)
        worst = bench.models.sort("run_id")["run_id"][-1]  # the weakest archetype
        (d / "worst.txt").write_text(worst)
        log = keep_only_unflipped(bench.responses, bench.cases, worst)
        (d / "responses.parquet").unlink()
        log.write_parquet(d / "responses.parquet")

    def no_winner(ws: Path, res: Result) -> str | None:
        worst = (ws / "scratch" / "ds" / "worst.txt").read_text()
        try:
            rows = [json.loads(x) for x in res.stdout.splitlines() if x.strip()]
        except ValueError:
            return "compare --format json printed something else"
        if not rows:
            return "compare printed no rows"
        for r in rows:
            if r.get("winner") == worst:
                return f"an incomplete run ({worst}) declared the winner"
        return None

    def set_aside_said(ws: Path, res: Result) -> str | None:
        worst = (ws / "scratch" / "ds" / "worst.txt").read_text()
        try:
            rows = [json.loads(x) for x in res.stdout.splitlines() if x.strip()]
        except ValueError:
            return "compare --format json printed something else"
        for r in rows:
            if r.get("support") != "common":
                return f"support {r.get('support')!r}, not the default 'common'"
            aside = r["n_set_aside_a"] + r["n_set_aside_b"]
            if worst not in (r["run_a"], r["run_b"]) and aside == 0:
                return "the pairs the incomplete run lacks were not set aside for the others"
        return None

    cases = []
    for rule in ("ci", "paired"):
        for split in ("public", "all"):
            # each run on its own support: the completeness gate withholds the verdict
            cases.append(
                Case("verdict", f"compare-incomplete/{rule}/{split}",
                     ("compare", "--dataset", "{ws}/scratch/ds", "--rule", rule, "--split",
                      split, "--format", "json", "--resamples", "200", "--support", "own"),
                     (OK,), (), incomplete, check=no_winner)
            )  # fmt: skip
    # on the common support every run is compared on what the incomplete run kept,
    # and every row says what was set aside
    cases.append(
        Case("verdict", "compare-incomplete/common",
             ("compare", "--dataset", "{ws}/scratch/ds", "--format", "json",
              "--resamples", "200"),
             (OK,), (), incomplete, check=set_aside_said)
    )  # fmt: skip
    return cases


def leak_cases() -> list[Case]:
    secret = "holdout-only-version-7f3a"

    def holdout_version(ws: Path) -> None:
        shutil.copytree(ws / "ds", ws / "scratch" / "ds")
        cases = pl.read_parquet(ws / "scratch/ds/cases.parquet")
        cases = cases.with_columns(
            pl.when(pl.col("split") == "holdout").then(pl.lit(secret))
            .otherwise(pl.col("dataset_version")).alias("dataset_version")
        )  # fmt: skip
        (ws / "scratch/ds/cases.parquet").unlink()
        cases.write_parquet(ws / "scratch/ds/cases.parquet")

    def no_secret(ws: Path, res: Result) -> str | None:
        for p in (ws / "scratch").rglob("*"):
            if p.is_file() and p.parts[-2:-1] != ("ds",) and secret.encode() in p.read_bytes():
                return f"the holdout-only dataset_version leaked into {p.name}"
        if secret in res.stdout:
            return "the holdout-only dataset_version leaked to stdout"
        return None

    return [
        Case("leak", "publish/holdout-dataset-version",
             ("publish", "--dataset", "{ws}/scratch/ds", "--no-figures", *RESAMPLES, "--out",
              "{ws}/scratch/p"), (OK, UNUSABLE), ("scratch/p",), holdout_version,
             check=no_secret),
        Case("leak", "report-publication/holdout-dataset-version",
             ("report", "--publication", "--dataset", "{ws}/scratch/ds", "--no-figures",
              *RESAMPLES, "--out", "{ws}/scratch/r.html"), (OK, UNUSABLE),
             ("scratch/r.html",), holdout_version, check=no_secret),
    ]  # fmt: skip


# --- released results and eval logs: peira import textattack|jailbreakbench|table|inspect|lm-eval

_OUT_DS = ("scratch/out-ds",)


def _imp(fmt: str, *args: str) -> tuple[str, ...]:
    return ("import", fmt, *args, "--out", "{ws}/scratch/out-ds")


def _gz(rel: str, data: bytes) -> Callable[[Path], None]:
    return _writer(rel, gzip.compress(data, mtime=0))


def _derived(src: str, dst: str, fn: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Write ``fn(bytes of released/src)`` to ``scratch/dst``."""

    def setup(ws: Path) -> None:
        p = ws / "scratch" / dst
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(fn((ws / "released" / src).read_bytes()))

    return setup


def _lm_dir(samples: bytes | None = None, results: bytes | None = None) -> Callable[[Path], None]:
    """``scratch/lm``: the released lm-eval directory with one file replaced."""

    def setup(ws: Path) -> None:
        d = ws / "scratch" / "lm"
        shutil.copytree(ws / "released" / "lm", d)
        if samples is not None:
            (d / LM_SAMPLES).write_bytes(samples)
        if results is not None:
            (d / LM_RESULTS).write_bytes(results)

    return setup


def _csv_edit(fn: Callable[[list[list[str]]], list[list[str]]]) -> Callable[[bytes], bytes]:
    """Edit a gzipped CSV (TextAttack's) row by row; the result is gzipped again."""
    import csv

    def edit(data: bytes) -> bytes:
        rows = list(csv.reader(io.StringIO(gzip.decompress(data).decode("utf-8"))))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(fn(rows))
        return gzip.compress(buf.getvalue().encode("utf-8"), mtime=0)

    return edit


def _ta_cell(column: str, value: str, row: int = 1) -> Callable[[bytes], bytes]:
    def fn(rows: list[list[str]]) -> list[list[str]]:
        rows[row][rows[0].index(column)] = value
        return rows

    return _csv_edit(fn)


def _ta_drop(column: str) -> Callable[[bytes], bytes]:
    def fn(rows: list[list[str]]) -> list[list[str]]:
        i = rows[0].index(column)
        return [r[:i] + r[i + 1 :] for r in rows]

    return _csv_edit(fn)


def _jbb_edit(fn: Callable[[dict[str, Any]], Any]) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        doc = json.loads(gzip.decompress(data))
        return json.dumps(fn(doc)).encode()

    return edit


def _jbb_first(field_: str, value: Any) -> Callable[[bytes], bytes]:
    def fn(doc: dict[str, Any]) -> dict[str, Any]:
        doc["jailbreaks"][0][field_] = value
        return doc

    return _jbb_edit(fn)


def _zip_member(replace: bytes | None) -> Callable[[bytes], bytes]:
    """An Inspect .eval (a zip) whose first sample is replaced (None: removed)."""
    import zipfile

    def edit(data: bytes) -> bytes:
        src = zipfile.ZipFile(io.BytesIO(data))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as dst:
            first = next(n for n in src.namelist() if n.startswith("samples/"))
            for n in src.namelist():
                if n != first:
                    dst.writestr(n, src.read(n))
                elif replace is not None:
                    dst.writestr(n, replace)
        return buf.getvalue()

    return edit


def _lm_samples_edit(fn: Callable[[dict[str, Any]], Any]) -> bytes:
    """The released lm-eval samples with the first record edited."""
    lines = (FIXTURES / "lm_eval" / "alpha" / "mkm8wwzn" / LM_SAMPLES).read_text().splitlines()
    first = fn(json.loads(lines[0]))
    return ("\n".join([json.dumps(first), *lines[1:]]) + "\n").encode()


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    def fn(d: dict[str, Any]) -> Any:
        d[key] = value
        return d

    return fn


def _drop(key: str) -> Callable[[dict[str, Any]], Any]:
    def fn(d: dict[str, Any]) -> Any:
        d.pop(key, None)
        return d

    return fn


#: hostile text files for the CSV readers (textattack, table): name → bytes
HOSTILE_CSV: dict[str, bytes] = {
    "empty": b"",
    "header-only": b"id,label,benign,attacked\n",
    "garbage": bytes(random.Random(7).getrandbits(8) for _ in range(3000)),
    "invalid-utf8": b"id,label,benign,attacked\nc1,\xff\xfe,pos,neg\n",
    "nul-bytes": b"id,label,benign,attacked\nc1,pos\x00,pos,neg\n",
    "unbalanced-quote": b'id,label,benign,attacked\nc1,"pos,pos,neg\nc2,neg,neg,neg\n',
    "ragged-rows": b"id,label,benign,attacked\nc1,pos\nc2,neg,neg,neg,extra,more\n",
    "huge-field": b"id,label,benign,attacked\nc1," + b"p" * 3_000_000 + b",pos,neg\n",
    "control-chars": b"id,label,benign,attacked\nc\x1b[2J1,pos,pos,neg\n",
    "crlf": b"id,label,benign,attacked\r\nc1,pos,pos,neg\r\nc2,neg,neg,pos\r\n",
    "duplicate-columns": b"id,id,label,benign,attacked\nc1,c2,pos,pos,neg\n",
    "one-label": b"id,label,benign,attacked\nc1,pos,pos,pos\nc2,pos,pos,pos\n",
}
#: what ``import table`` may read (a label is any text; a duplicated column is kept in
#: extras); the others are unreadable: exit 2
_CSV_TABLE_OK = {"crlf", "nul-bytes", "huge-field", "duplicate-columns"}


def released_cases() -> list[Case]:
    """Bad released results and eval logs, and misused import options."""
    cases: list[Case] = []

    def add(name: str, argv: tuple[str, ...], expect: tuple[int, ...] = (UNUSABLE,),
            setup: Callable[[Path], None] | None = None) -> None:  # fmt: skip
        cases.append(Case("released", name, argv, expect, _OUT_DS, setup))

    # hostile CSV: TextAttack's reader and the table reader
    for name, data in HOSTILE_CSV.items():
        add(f"table/{name}", _imp("table", "{ws}/scratch/t.csv", *TABLE_MAP),
            (OK, UNUSABLE) if name in _CSV_TABLE_OK else (UNUSABLE,),
            _writer("scratch/t.csv", data))  # fmt: skip
        add(f"textattack/{name}", _imp("textattack", "{ws}/scratch/t.csv"), (UNUSABLE,),
            _writer("scratch/t.csv", data))  # fmt: skip
        add(f"textattack-gz/{name}", _imp("textattack", "{ws}/scratch/t.csv.gz"), (UNUSABLE,),
            _gz("scratch/t.csv.gz", data))  # fmt: skip
    # damaged and altered TextAttack files
    ta = "ta.csv.gz"
    for name, fn in [
        ("truncated-gzip", lambda b: b[: len(b) // 2]),
        ("gzip-header-only", lambda b: b[:10]),
        ("not-gzip", lambda b: gzip.decompress(b)[:5000]),
        ("missing-result-type", _ta_drop("result_type")),
        ("missing-perturbed-text", _ta_drop("perturbed_text")),
        ("label-nan", _ta_cell("ground_truth_output", "nan")),
        ("label-1e400", _ta_cell("ground_truth_output", "1e400")),
        ("label-empty", _ta_cell("ground_truth_output", "")),
        ("output-inf", _ta_cell("perturbed_output", "inf")),
        ("unknown-result-type", _ta_cell("result_type", "Exploded")),
        ("queries-negative", _ta_cell("num_queries", "-5")),
        ("queries-huge", _ta_cell("num_queries", "1" + "0" * 400)),
        ("score-nan", _ta_cell("original_score", "nan")),
        ("esc-in-text", _ta_cell("original_text", "benign \x1b[2J text")),
    ]:
        lenient = name in ("queries-negative", "queries-huge", "score-nan", "esc-in-text")
        add(f"textattack/{name}", _imp("textattack", "{ws}/scratch/" + ta),
            (OK, UNUSABLE) if lenient else (UNUSABLE,), _derived(ta, ta, fn))  # fmt: skip
    # JailbreakBench artifacts
    jbb = "jbb.json.gz"
    for name, fn, expect in [
        ("truncated-gzip", lambda b: b[: len(b) // 2], (UNUSABLE,)),
        ("jailbroken-text", _jbb_first("jailbroken", "yes"), (UNUSABLE,)),
        ("jailbroken-null", _jbb_first("jailbroken", None), (OK, UNUSABLE)),
        ("prompt-number", _jbb_first("prompt", 12), (UNUSABLE,)),
        ("response-object", _jbb_first("response", {"a": 1}), (UNUSABLE,)),
        ("jailbreaks-object", _jbb_edit(_set("jailbreaks", {"a": 1})), (UNUSABLE,)),
        ("jailbreaks-empty", _jbb_edit(_set("jailbreaks", [])), (UNUSABLE,)),
        ("no-parameters", _jbb_edit(_drop("parameters")), (OK, UNUSABLE)),
        ("asr-nan-text", _jbb_edit(lambda d: {**d, "parameters": {
            **d["parameters"], "attack_success_rate": "NaN"}}), (OK, UNUSABLE)),
        ("behavior-esc", _jbb_first("behavior", "x\x1b[31m"), (OK, UNUSABLE)),
    ]:  # fmt: skip
        out = jbb if name == "truncated-gzip" else "jbb.json"
        add(f"jailbreakbench/{name}", _imp("jailbreakbench", "{ws}/scratch/" + out), expect,
            _derived(jbb, out, fn))  # fmt: skip
    # Inspect logs
    for name, fn, expect in [
        ("truncated-zip", lambda b: b[: len(b) // 2], (UNUSABLE,)),
        ("zip-header-only", lambda b: b[:30], (UNUSABLE,)),
        ("sample-garbage", _zip_member(b"\xff\xfe not json"), (UNUSABLE,)),
        ("sample-deep", _zip_member(_deep(5000).encode()), (UNUSABLE,)),
        ("sample-nan", _zip_member(b'{"id": "q01", "epoch": 1, "score": NaN}'), (UNUSABLE,)),
        ("sample-missing", _zip_member(None), (OK, UNUSABLE)),
        ("not-a-zip", lambda b: b"PK\x03\x04" + b"\x00" * 100, (UNUSABLE,)),
    ]:
        add(f"inspect/{name}", _imp("inspect", "{ws}/scratch/bad.eval"), expect,
            _derived("mc.eval", "bad.eval", fn))  # fmt: skip
    for name, opts in [
        ("unknown-scorer", ("--scorer", "nope")),
        ("pair-by-unknown-field", ("--pair-by", "nope", "--arm-field", "nope")),
        ("benign-without-attacked", ("--benign", "{ws}/released/mc.eval")),
        ("attacked-log-missing", ("--benign", "{ws}/released/mc.eval", "--attacked",
                                  "{ws}/nope.eval")),
        ("input-missing", ("{ws}/nope.eval",)),
        ("input-is-dir", ("{ws}/foreign",)),
        ("labels-not-an-option", ("{ws}/released/mc.eval", "--labels", "a,b")),
        ("threshold-nan", ("{ws}/released/mc.eval", "--threshold", "nan")),
    ]:  # fmt: skip
        argv = opts if opts[0].startswith("{") else ("{ws}/released/mc.eval", *opts)
        add(f"inspect/{name}", _imp("inspect", *argv))
    add("inspect/two-scorers-are-judges",
        _imp("inspect", "{ws}/released/two_scorers.json", "--scorer", "match"), (OK,))  # fmt: skip
    add("inspect/judge-is-not-an-option",
        _imp("inspect", "{ws}/released/two_scorers.json", "--judge", "match"))  # fmt: skip
    # lm-eval outputs
    for name, setup in [
        ("samples-deep", _lm_dir(samples=_deep(3000).encode())),
        ("samples-doc-id-negative", _lm_dir(samples=_lm_samples_edit(_set("doc_id", -1)))),
        ("samples-doc-id-huge", _lm_dir(samples=_lm_samples_edit(_set("doc_id", 2**70)))),
        ("samples-doc-id-text", _lm_dir(samples=_lm_samples_edit(_set("doc_id", "a")))),
        ("samples-target-object", _lm_dir(samples=_lm_samples_edit(_set("target", {"x": 1})))),
        ("samples-duplicate-doc", _lm_dir(samples=_lm_samples_edit(_set("doc_id", 1)))),
        ("results-garbage", _lm_dir(results=b"\x00\x01garbage")),
        ("results-no-results", _lm_dir(results=b'{"configs": {}}')),
        ("samples-empty", _lm_dir(samples=b"")),
    ]:
        add(f"lm-eval/{name}", _imp("lm-eval", "{ws}/scratch/lm", "--attacked-task",
                                    "arith_add=arith_add_perturbed"), (UNUSABLE,), setup)  # fmt: skip
    add("lm-eval/samples-without-doc-kept", _imp("lm-eval", "{ws}/scratch/lm", "--attacked-task",
        "arith_add=arith_add_perturbed"), (OK,), _lm_dir(samples=_lm_samples_edit(_drop("doc"))))  # fmt: skip
    for name, opts in [
        ("empty-dir", ("{ws}/scratch",)),
        ("unknown-metric", ("{ws}/released/lm", "--metric", "nope")),
        ("unknown-filter", ("{ws}/released/lm", "--filter", "nope")),
        ("attacked-task-malformed", ("{ws}/released/lm", "--attacked-task", "arith_add")),
        ("attacked-task-unknown", ("{ws}/released/lm", "--attacked-task", "a=b")),
        ("attacked-task-itself", ("{ws}/released/lm", "--attacked-task", "arith_add=arith_add")),
        ("scorer-not-an-option", ("{ws}/released/lm", "--scorer", "x")),
        ("threshold-inf", ("{ws}/released/lm", "--threshold", "inf")),
        ("input-missing", ("{ws}/nope",)),
    ]:
        add(f"lm-eval/{name}", _imp("lm-eval", *opts))
    # table options
    t = "{ws}/released/table.csv"
    for name, opts in [
        ("no-map", ()),
        ("map-unknown-field", (*TABLE_MAP, "--map", "nope=id")),
        ("map-missing-column", ("--map", "case_id=nope", "--map", "expected=label")),
        ("map-malformed", ("--map", "case_id")),
        ("map-file-not-object", ("--map", "{ws}/released/jbb.json")),
        ("two-runs", (*TABLE_MAP, "--run", "r2")),
        ("threshold-nan", (*TABLE_MAP, "--threshold", "nan")),
        ("threshold-text", (*TABLE_MAP, "--threshold", "high")),
        ("layout-long-without-arm", (*TABLE_MAP, "--layout", "long")),
        ("options-missing-label", (*TABLE_MAP, "--options", "pos")),
        ("table-format-wrong", (*TABLE_MAP, "--table-format", "parquet")),
        ("two-inputs", (*TABLE_MAP, t)),
        ("judge-values-without-judge", (*TABLE_MAP, "--values", "verdict=1:pos,0:neg")),
        ("judge-name-empty", (*TABLE_MAP, "--map", "verdict:=attacked")),
        ("judge-over-a-mapped-decision", (*TABLE_MAP, "--map", "verdict:j=attacked",
                                          "--judge", "j")),
        ("judge-verdict-outside-options", (*TABLE_MAP, "--map", "verdict:j=id")),
    ]:  # fmt: skip
        add(f"table/{name}", _imp("table", t, *opts))
    add("table/judge-beside-a-decision", _imp("table", t, *TABLE_MAP, "--map", "verdict:j=attacked"),
        (OK,))  # fmt: skip
    jc = "{ws}/released/jc.csv.gz"
    add("table/judges-and-gold", _imp("table", jc, *JC_MAP), (OK,))
    for name, opts in [
        ("judge-unknown", ("--judge", "llama")),
        ("judge-reserved-name", ("--map", "verdict:majority=human1")),
        ("judge-raw-value-unmapped", ("--map", "verdict:h=goal")),
        ("judge-arm-unknown", ("--map", "verdicts:h=human1")),
        ("judge-gold-primary-of-a-subset", ("--judge", "gold", "--values",
                                            "verdict:gold=1:comply,0:")),
    ]:  # fmt: skip
        add(f"table/{name}", _imp("table", jc, *JC_MAP, *opts))
    add("textattack/judge-not-an-option",
        _imp("textattack", "{ws}/released/ta.csv.gz", "--judge", "x"))  # fmt: skip
    # options of one format given to another
    add("textattack/judge-is-jailbreakbench-only",
        _imp("textattack", "{ws}/released/ta.csv.gz", "--scorer", "x"))  # fmt: skip
    add("jailbreakbench/labels-unknown-judge",
        _imp("jailbreakbench", "{ws}/released/jbb.json.gz", "--judge", "nope"))  # fmt: skip
    add("textattack/labels-too-few",
        _imp("textattack", "{ws}/released/ta.csv.gz", "--labels", "neg"))  # fmt: skip
    add("textattack/runs-mismatch",
        _imp("textattack", "{ws}/released/ta.csv.gz", "--run", "a", "--run", "b"))  # fmt: skip
    # a BOM is accepted like in the other importers
    add("table/bom-accepted", _imp("table", "{ws}/scratch/t.csv", *TABLE_MAP), (OK,),
        _derived("table.csv", "t.csv", lambda b: b"\xef\xbb\xbf" + b))  # fmt: skip
    add("jailbreakbench/bom-accepted", _imp("jailbreakbench", "{ws}/scratch/j.json"), (OK,),
        _derived("jbb.json", "j.json", lambda b: b"\xef\xbb\xbf" + b))  # fmt: skip
    # every format imports its valid file (the baseline of the cases above)
    for w in ("import-textattack", "import-jailbreakbench", "import-table", "import-inspect",
              "import-lm-eval"):  # fmt: skip
        argv = tuple(a.replace("{out}", "{ws}/scratch/out-ds") for a in WRITERS[w][0])
        add(f"{w.removeprefix('import-')}/valid", argv, (OK,))
    return cases


# --- peira adapters list|check


def adapters_command_cases() -> list[Case]:
    cases = [
        Case("adapter", "adapters-list", ("adapters", "list"), (OK,)),
        Case("adapter", "adapters-check/conforming",
             ("adapters", "check", "tests.fuzz_adapters:Counting"), (OK,)),
        Case("adapter", "adapters-check/nondeterministic-is-a-finding",
             ("adapters", "check", "tests.fuzz_adapters:Hostile"), (VIOLATION,)),
    ]  # fmt: skip
    for spec, name in [
        ("tests.no_such_module:X", "missing-module"),
        ("tests.fuzz_adapters:Missing", "missing-class"),
        ("tests.fuzz_adapters:NoDecide", "no-decide"),
        ("tests.fuzz_adapters:BadInit", "constructor-raises"),
        ("tests.fuzz_adapters:TakesArgs", "missing-argument"),
        ("tests.fuzz_adapters:NoName", "no-name"),
        ("tests.fuzz_adapters:not_a_class", "not-a-class"),
        ("no-colon", "no-colon"),
        (":", "empty"),
        ("", "empty-string"),
        ("os:system", "builtin-function"),
        ("nope", "unknown-name"),
    ]:
        cases.append(Case("adapter", f"adapters-check/{name}", ("adapters", "check", spec),
                          (UNUSABLE,), calls=0))  # fmt: skip
    cases.append(Case("adapter", "adapters-check/bad-adapter-arg",
                      ("adapters", "check", "tests.fuzz_adapters:Counting", "--adapter-arg",
                       "nope=1"), (UNUSABLE,), calls=0))  # fmt: skip
    for v in [*_NUM, "0", *_INT_EXTRA]:
        cases.append(Case("flags", f"adapters check --concurrency={v}",
                          ("adapters", "check", "tests.fuzz_adapters:Counting",
                           f"--concurrency={v}"), (UNUSABLE,), calls=0))  # fmt: skip
    return cases


def usage_cases() -> list[Case]:
    """Bad arguments that are not numbers: unknown runs, metrics, columns, missing files."""
    r = RESAMPLES
    rows: list[tuple[str, tuple[str, ...], tuple[int, ...]]] = [
        (
            "compare/unknown-run",
            ("compare", "nope", "{run0}", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        ("compare/one-run", ("compare", "{run0}", "--dataset", "{ws}/ds", *r), (UNUSABLE,)),
        (
            "compare/same-run",
            ("compare", "{run0}", "{run0}", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "compare/unknown-metric",
            ("compare", "--metric", "nope", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "compare/judges-without-judgements",
            ("compare", "--judges", "all", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "compare/quorum-without-judges",
            ("compare", "--quorum", "1", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "compare/judge-and-judges",
            ("compare", "--judge", "a", "--judges", "all", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "leaderboard/judges-without-judgements",
            ("leaderboard", "--judges", "a,b", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        ("score/unknown-by", ("score", "--by", "nope", "--dataset", "{ws}/ds", *r), (UNUSABLE,)),
        (
            "score/bounds-without-judge",
            ("score", "--bounds", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "score/bounds-without-judgements",
            ("score", "--bounds", "--judge", "j", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "compare/bounds-without-judge",
            ("compare", "--bounds", "--dataset", "{ws}/ds", *r),
            (UNUSABLE,),
        ),
        (
            "compare/bounds-of-another-metric",
            (
                "compare",
                "--bounds",
                "--judge",
                "j",
                "--metric",
                "benign_accuracy",
                "--dataset",
                "{ws}/ds",
                *r,
            ),
            (UNUSABLE,),
        ),
        (
            "score/correct-without-judge",
            ("score", "--dataset", "{ws}/ds", *r, "--correct", "ppi"),
            (UNUSABLE,),
        ),
        (
            "score/correct-judge-gold",
            ("score", "--dataset", "{ws}/ds", *r, "--judge", "gold", "--correct", "ppi"),
            (UNUSABLE,),
        ),
        (
            "score/correct-no-judgements",
            ("score", "--dataset", "{ws}/ds", *r, "--judge", "a", "--correct", "rogan-gladen"),
            (UNUSABLE,),
        ),
        (
            "score/correct-unknown-method",
            ("score", "--dataset", "{ws}/ds", *r, "--judge", "a", "--correct", "nope"),
            (UNUSABLE,),
        ),
        (
            "score/correct-by-without-correct",
            ("score", "--dataset", "{ws}/ds", *r, "--correct-by", "family"),
            (UNUSABLE,),
        ),
        (
            "score/correct-by-unknown",
            (
                "score",
                "--dataset",
                "{ws}/ds",
                *r,
                "--judge",
                "a",
                "--correct",
                "ppi",
                "--correct-by",
                "nope",
            ),
            (UNUSABLE,),
        ),
        (
            "score/correct-by-severity",
            (
                "score",
                "--dataset",
                "{ws}/ds",
                *r,
                "--judge",
                "a",
                "--correct",
                "ppi",
                "--by",
                "severity",
            ),
            (UNUSABLE,),
        ),
        ("score/missing-dataset", ("score", "--dataset", "{ws}/nope", *r), (UNUSABLE,)),
        ("score/dataset-is-file", ("score", "--dataset", "{ws}/notes.txt", *r), (UNUSABLE,)),
        (
            "score/responses-glob-empty",
            ("score", "--dataset", "{ws}/ds", "--responses", "{ws}/*.nothing", *r),
            (UNUSABLE,),
        ),
        (
            "seal/unknown-run",
            (
                "seal",
                "--dataset",
                "{ws}/ds",
                "--responses",
                "{ws}/ds/responses.parquet",
                "--run",
                "nope",
                *r,
                "--out",
                "{ws}/scratch/s",
            ),
            (UNUSABLE, VIOLATION),
        ),
        (
            "seal/short-key",
            (
                "seal",
                "--dataset",
                "{ws}/ds",
                "--responses",
                "{ws}/ds/responses.parquet",
                "--run",
                "{run0}",
                *r,
                "--key-file",
                "{ws}/notes.txt",
                "--out",
                "{ws}/scratch/s",
            ),
            (UNUSABLE,),
        ),
        (
            "seal/key-is-dir",
            (
                "seal",
                "--dataset",
                "{ws}/ds",
                "--responses",
                "{ws}/ds/responses.parquet",
                "--run",
                "{run0}",
                *r,
                "--key-file",
                "{ws}/foreign",
                "--out",
                "{ws}/scratch/s",
            ),
            (UNUSABLE,),
        ),
        ("verify/missing", ("verify", "{ws}/nope"), (UNUSABLE,)),
        ("verify/a-file", ("verify", "{ws}/notes.txt"), (UNUSABLE,)),
        ("verify/rederive-without-dataset", ("verify", "{ws}/sealed", "--rederive"), (UNUSABLE,)),
        (
            "unblind/wrong-key",
            (
                "holdout",
                "unblind",
                "{ws}/answers.jsonl",
                "--dataset",
                "{ws}/ds",
                "--key-file",
                "{ws}/scratch/k",
                "--out",
                "{ws}/scratch/u.parquet",
            ),
            (VIOLATION,),
        ),
        (
            "unblind/parquet-garbage",
            (
                "holdout",
                "unblind",
                "{ws}/notes.txt",
                "--dataset",
                "{ws}/ds",
                "--key-file",
                "{ws}/key",
                "--out",
                "{ws}/scratch/u.parquet",
            ),
            (UNUSABLE,),
        ),
        (
            "rescore/unknown-parser",
            ("rescore", "{ws}/ds/responses.parquet", "--dataset", "{ws}/ds", "--parser", "nope"),
            (UNUSABLE,),
        ),
        (
            "rescore/report-all-json",
            (
                "rescore",
                "{ws}/ds/responses.parquet",
                "--dataset",
                "{ws}/ds",
                "--report",
                "all",
                "--format",
                "json",
            ),
            (UNUSABLE,),
        ),
        (
            "import/missing-input",
            ("import", "cases", "{ws}/nope.jsonl", "--out", "{ws}/scratch/o"),
            (UNUSABLE,),
        ),
        (
            "import/input-is-dir",
            ("import", "transcript", "{ws}/foreign", "--out", "{ws}/scratch/o.parquet"),
            (UNUSABLE,),
        ),
        (
            "export/missing-dataset",
            ("export", "cases", "{ws}/nope", "--split", "public", "--out", "{ws}/scratch/e.jsonl"),
            (UNUSABLE,),
        ),
        ("validate/missing-dataset", ("validate", "{ws}/nope"), (UNUSABLE,)),
        (
            "import/unknown-format",
            ("import", "nope", "{ws}/cases.jsonl", "--out", "{ws}/scratch/o"),
            (UNUSABLE,),
        ),
        (
            "import/option-of-another-format",
            ("import", "cases", "{ws}/cases.jsonl", "--metric", "acc", "--out", "{ws}/scratch/o"),
            (UNUSABLE,),
        ),
        ("metrics/unknown-format", ("metrics", "--format", "nope"), (UNUSABLE,)),
        (
            "validate/missing-log",
            ("validate", "{ws}/ds", "--responses", "{ws}/nope.parquet"),
            (UNUSABLE,),
        ),
        (
            "leaderboard/empty-split",
            ("leaderboard", "--dataset", "{ws}/scratch/ds", *r),
            (UNUSABLE, VIOLATION),
        ),
    ]

    def short_key(ws: Path) -> None:
        (ws / "scratch" / "k").write_bytes(b"another-key-0123456789abcdef")

    def public_only(ws: Path) -> None:
        shutil.copytree(ws / "ds", ws / "scratch" / "ds")
        c = pl.read_parquet(ws / "scratch/ds/cases.parquet").with_columns(
            pl.lit("holdout").alias("split")
        )
        (ws / "scratch/ds/cases.parquet").unlink()
        c.write_parquet(ws / "scratch/ds/cases.parquet")

    if has_command("plan"):
        pilot = ("plan", "--pilot", "{ws}/ds/responses.parquet", "--dataset", "{ws}/ds")
        rows += [
            ("plan/unknown-run", (*pilot, "--runs", "{run0}", "nope"), (UNUSABLE,)),
            ("plan/same-run", (*pilot, "--runs", "{run0}", "{run0}"), (UNUSABLE,)),
            ("plan/no-asr", ("plan", "--mde", "0.03"), (UNUSABLE,)),
            ("plan/runs-without-pilot", ("plan", "--asr", "0.1", "--runs", "a", "b"), (UNUSABLE,)),
            ("plan/asr-plus-mde", ("plan", "--asr", "0.95", "--mde", "0.1"), (UNUSABLE,)),
            ("plan/missing-pilot", ("plan", "--pilot", "{ws}/nope.parquet"), (UNUSABLE,)),
        ]
    if has_command("diff"):
        rows += [
            ("diff/unknown-run", ("diff", "nope", "{run0}", "--dataset", "{ws}/ds", *r),
             (UNUSABLE,)),
            ("diff/same-run", ("diff", "{run0}", "{run0}", "--dataset", "{ws}/ds", *r),
             (UNUSABLE,)),
            ("diff/one-run", ("diff", "{run0}", "--dataset", "{ws}/ds", *r), (UNUSABLE,)),
            ("diff/unknown-metric", ("diff", "nope", "{run0}", "--metric", "nope", "--dataset",
                                     "{ws}/ds", *r), (UNUSABLE,)),
            ("diff/weighted-metric", ("diff", "nope", "{run0}", "--metric",
                                      "severity_weighted_asr", "--dataset", "{ws}/ds", *r),
             (UNUSABLE,)),
            ("diff/bad-resamples", ("diff", "nope", "{run0}", "--dataset", "{ws}/ds",
                                    "--resamples=nan"), (UNUSABLE,)),
        ]  # fmt: skip
    if has_command("gate"):
        g = ("gate", "--dataset", "{ws}/ds", "--junit", "{ws}/scratch/g.xml", *r)
        ok = ("--require", "robustness:better")
        rows += [
            ("gate/unknown-run", (*g, "--baseline", "nope", "--candidate", "{run0}", *ok),
             (UNUSABLE,)),
            ("gate/same-run", (*g, "--baseline", "{run0}", "--candidate", "{run0}", *ok),
             (UNUSABLE,)),
            ("gate/no-check", (*g, "--baseline", "nope", "--candidate", "{run0}"), (UNUSABLE,)),
            ("gate/unparsed-check", (*g, "--baseline", "nope", "--candidate", "{run0}",
                                     "--guard", "robustness"), (UNUSABLE,)),
            ("gate/margin-out-of-range", (*g, "--baseline", "nope", "--candidate", "{run0}",
                                          "--guard", "asr:non-inferior:2"), (UNUSABLE,)),
            ("gate/unknown-metric", (*g, "--baseline", "nope", "--candidate", "{run0}",
                                     "--require", "nope:better"), (UNUSABLE,)),
            ("gate/record-over-a-file", (*g, "--baseline", "nope", "--candidate", "{run0}", *ok,
                                         "--record", "{ws}/cases.jsonl"), (UNUSABLE,)),
        ]  # fmt: skip

    def judgements(ws: Path, judges: tuple[str, ...] = ("a",)) -> None:
        log = pl.read_parquet(ws / "ds/responses.parquet").filter(pl.col("arm") == "attacked")
        keys = log.select("run_id", "case_id", "arm", pl.col("sample").cast(pl.Int32))
        pl.concat(
            keys.with_columns(pl.lit(j).alias("judge"), pl.lit("undetermined").alias("verdict"))
            for j in judges
        ).write_parquet(ws / "scratch" / "j.parquet")

    if has_command("agreement"):
        a = ("agreement", "--dataset", "{ws}/ds", *r)
        j = ("--judgements", "{ws}/scratch/j.parquet")
        rows += [
            ("agreement/no-judgements", a, (UNUSABLE,)),
            ("agreement/missing-judgements", (*a, "--judgements", "{ws}/nope.parquet"),
             (UNUSABLE,)),
            ("agreement/one-judge", (*a, *j), (UNUSABLE,)),
            ("agreement/two-judges-unknown-judge", (*a, *j, "--judges", "a,nope"), (UNUSABLE,)),
            ("agreement/two-judges-unknown-run", (*a, *j, "--runs", "nope"), (UNUSABLE,)),
            ("agreement/bad-resamples", (*a, *j, "--resamples=0"), (UNUSABLE,)),
        ]  # fmt: skip
    cases = []
    for name, argv, expect in rows:
        setup: Callable[[Path], None] | None = (
            short_key if "wrong-key" in name else public_only if "empty-split" in name else None
        )
        if name.startswith("agreement/"):
            two = "two-judges" in name
            setup = partial(judgements, judges=("a", "b") if two else ("a",))
        outs = tuple(
            a.removeprefix("{ws}/")
            for a in argv
            if a.startswith("{ws}/scratch/") and a != "{ws}/scratch/ds"
        )
        cases.append(Case("usage", name, argv, expect, outs, setup))
    return cases


def all_cases() -> list[Case]:
    """Every generated case (the slow suite runs them all)."""
    cases = [
        *json_cases(),
        *flag_cases(),
        *output_cases(),
        *data_cases(),
        *partition_cases(),
        *adapter_cases(),
        *verdict_cases(),
        *leak_cases(),
        *usage_cases(),
        *released_cases(),
        *adapters_command_cases(),
    ]
    seen: set[str] = set()
    out = []
    for c in cases:
        if c.id not in seen:
            seen.add(c.id)
            out.append(c)
    return out


def sample(cases: Sequence[Case], per_class: dict[str, int], seed: int = 13) -> list[Case]:
    """A deterministic stratified sample: up to ``per_class[k]`` cases of each class."""
    by: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by[c.klass].append(c)
    rng = random.Random(seed)
    out = []
    for k, items in sorted(by.items()):
        n = per_class.get(k, len(items))
        out.extend(items if n >= len(items) else rng.sample(items, n))
    return out


#: The default suite: every class, a few hundred cases.
DEFAULT_PER_CLASS = {"json": 45, "flags": 60, "output": 70, "data": 60, "adapter": 14,
                     "partition": 9, "verdict": 2, "leak": 2, "usage": 24,
                     "released": 30}  # fmt: skip


def prepare(root: Path) -> tuple[Path, Path]:
    """(workspace, pristine copy) under ``root``."""
    pristine = build_workspace(root / "pristine")
    ws = root / "ws"
    shutil.copytree(pristine, ws, symlinks=True)
    return ws, pristine


def resolve_argv(case: Case, ws: Path) -> Case:
    run0 = _run0(ws)
    return Case(
        case.klass, case.name, tuple(a.replace("{run0}", run0) for a in case.argv), case.expect,
        case.outputs, case.setup, case.check, case.calls, case.writes_on,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - a report for people
    import argparse
    import tempfile
    import time
    import warnings

    p = argparse.ArgumentParser(description="run the fuzz cases and count outcomes per class")
    p.add_argument("--all", action="store_true", help="every case (default: the default sample)")
    p.add_argument("--show", type=int, default=3, help="failures shown per class")
    p.add_argument("--verbose", action="store_true", help="one line per case")
    p.add_argument("--only", help="only cases whose id contains this")
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    cases = all_cases() if a.all else sample(all_cases(), DEFAULT_PER_CLASS)
    if a.only:
        cases = [c for c in cases if a.only in c.id]
    with tempfile.TemporaryDirectory(prefix="peira-fuzz-") as tmp:
        ws, pristine = prepare(Path(tmp))
        t0 = time.perf_counter()
        tally: dict[str, Counter[str]] = defaultdict(Counter)
        shown: dict[str, list[str]] = defaultdict(list)
        for c in cases:
            t1 = time.perf_counter()
            res = run_case(resolve_argv(c, ws), ws, pristine)
            if a.verbose:
                print(f"{time.perf_counter() - t1:6.2f} s {c.id} {res.code} {res.problems}",
                      flush=True)  # fmt: skip
            kinds = {pr.split(":")[0].split(" (")[0] for pr in res.problems}
            tally[c.klass]["cases"] += 1
            tally[c.klass]["ok" if not res.problems else "failed"] += 1
            for k in kinds:
                tally[c.klass][_kind(k)] += 1
            if res.problems and len(shown[c.klass]) < a.show:
                shown[c.klass].append(f"  {c.id}: {'; '.join(res.problems)}")
        print(f"{len(cases)} cases in {time.perf_counter() - t0:.1f} s")
        for k in sorted(tally):
            t = tally[k]
            extra = ", ".join(f"{n} {what}" for what, n in sorted(t.items())
                              if what not in ("cases", "ok", "failed"))  # fmt: skip
            print(f"{k:10} {t['cases']:4} cases, {t['ok']:4} ok, {t['failed']:4} failed"
                  + (f" ({extra})" if extra else ""))  # fmt: skip
            for line in shown[k]:
                print(line)
    return 0


def _kind(problem: str) -> str:
    if problem.startswith("traceback"):
        return "traceback"
    if problem.startswith("hang"):
        return "hang"
    if problem.startswith("exit"):
        return "wrong exit code"
    if problem.startswith("raw message"):
        return "raw message"
    if "changed outside" in problem or "left files" in problem:
        return "files changed/left"
    if "adapter calls" in problem:
        return "work before refusing"
    if "incomplete output" in problem:
        return "partial output"
    return "wrong result"


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
