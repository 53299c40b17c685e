"""The fuzz suite: hundreds of bad inputs for every subcommand and writer (tests/fuzzing.py).

Each case must end with the documented exit code, no traceback or raw
library message, no file changed outside the command's own output and, on
failure, nothing written at all. The default suite runs a stratified sample
of every class; ``pytest -m slow`` runs every generated case.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzzing import (
    DEFAULT_PER_CLASS,
    OK,
    UNUSABLE,
    Case,
    all_cases,
    prepare,
    resolve_argv,
    run_case,
    sample,
)

ALL = all_cases()
DEFAULT = sample(ALL, DEFAULT_PER_CLASS)
_DEFAULT_IDS = {c.id for c in DEFAULT}
REST = [c for c in ALL if c.id not in _DEFAULT_IDS]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    yield prepare(tmp_path_factory.mktemp("fuzz"))


def _check(case: Case, workspace: tuple[Path, Path]) -> None:
    ws, pristine = workspace
    res = run_case(resolve_argv(case, ws), ws, pristine)
    assert not res.problems, (
        f"{case.id}: {'; '.join(res.problems)}\nargv: {case.argv}\n"
        f"stderr: {res.stderr[-2000:]}\n{res.crash or ''}"
    )


def test_the_classes_are_covered() -> None:
    classes = {c.klass for c in ALL}
    assert classes == {"adapter", "data", "flags", "json", "leak", "output", "partition",
                       "released", "usage", "verdict"}  # fmt: skip
    assert len(ALL) >= 1000 and len(DEFAULT) >= 250
    assert {c.klass for c in DEFAULT} == classes
    writers = {c.argv[0] if c.argv[0] not in ("holdout", "import") else " ".join(c.argv[:2])
               for c in ALL if c.klass == "output"}  # fmt: skip
    assert writers >= {"run", "import cases", "import artifact", "import transcript", "export",
                       "holdout blind", "holdout unblind", "validate", "rescore", "report",
                       "tables", "publish", "seal", "synth", "import textattack",
                       "import jailbreakbench", "import table", "import inspect",
                       "import lm-eval"}  # fmt: skip
    # every subcommand of the command line, and every import format, meets cases
    import argparse

    from peira.cli import build_parser
    from peira.importers import IMPORTERS

    commands = {c.argv[0] for c in ALL} | {" ".join(c.argv[:2]) for c in ALL}

    def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
        out: set[str] = set()
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    below = subcommands(child, f"{prefix}{name} ")
                    out |= below or {prefix + name}
        return out

    missing = subcommands(build_parser()) - commands
    assert not missing, f"subcommands without fuzz cases: {sorted(missing)}"
    formats = {f"import {name}" for name in IMPORTERS.names()}
    assert formats <= commands, sorted(formats - commands)


def test_the_harness_catches_what_it_looks_for(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks can fail: a wrong exit code, a stray write, a traceback, a failed check."""
    ws, pristine = workspace
    export = ("export", "cases", "{ws}/ds", "--split", "public", "--out", "{ws}/scratch/e.jsonl")
    ok = run_case(Case("meta", "ok", export, (OK,), ("scratch/e.jsonl",)), ws, pristine)
    assert ok.problems == [] and ok.code == 0
    stray = run_case(Case("meta", "stray", export, (OK,), ()), ws, pristine)
    assert stray.problems == ["changed outside its outputs: scratch/e.jsonl"]
    wrong = run_case(Case("meta", "code", export, (UNUSABLE,), ("scratch/e.jsonl",)), ws, pristine)
    assert wrong.problems[0] == "exit 0, expected 2"

    def failing_check(ws: Path, res: object) -> str | None:
        return "extra check failed"

    extra = Case("meta", "check", export, (OK,), ("scratch/e.jsonl",), check=failing_check)
    assert run_case(extra, ws, pristine).problems == ["extra check failed"]

    import peira.cli.data

    def crash(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(peira.cli.data, "cmd_export", crash)
    crashed = run_case(Case("meta", "crash", export, (OK,), ()), ws, pristine)
    assert crashed.problems == ["traceback: RuntimeError: a bug"]
    assert snapshot_equal(ws, pristine)


def snapshot_equal(ws: Path, pristine: Path) -> bool:
    from tests.fuzzing import snapshot

    a, b = snapshot(ws), snapshot(pristine)
    a.pop("scratch", None)
    b.pop("scratch", None)
    return {k: v for k, v in a.items() if not k.startswith("scratch/")} == {
        k: v for k, v in b.items() if not k.startswith("scratch/")
    }


@pytest.mark.parametrize("case", DEFAULT, ids=[c.id for c in DEFAULT])
def test_fuzz(case: Case, workspace: tuple[Path, Path]) -> None:
    _check(case, workspace)


@pytest.mark.slow
@pytest.mark.parametrize("case", REST, ids=[c.id for c in REST])
def test_fuzz_more(case: Case, workspace: tuple[Path, Path]) -> None:
    _check(case, workspace)
