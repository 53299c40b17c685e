"""``--help``: every command lists examples, every example runs, every choice is explained,
and ``peira import FORMAT --help`` is that format's own help (peira/cli/_help.py,
peira/cli/_examples.py)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from peira.cli import build_parser, main
from peira.cli._examples import EXAMPLES, Example
from peira.cli._help import IMPORT_COMMON, IMPORT_OPTIONS, table_fields
from tests.docs.test_readme import _env, _workspace

RESAMPLES = "200"  # the examples run with few resamples: the same code, faster


def parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) of the ``peira`` command, groups and root included."""
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, child in a.choices.items():
                yield from parsers(child, (*path, name))


def _import_formats() -> tuple[str, ...]:
    from peira.importers import IMPORTERS

    return IMPORTERS.names()


def command_paths() -> list[tuple[str, ...]]:
    """Every command path, and ``import FORMAT`` for every registered format."""
    paths = [path for path, _ in parsers(build_parser())]
    return paths + [("import", fmt) for fmt in _import_formats()]


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    out: str = capsys.readouterr().out
    return out


def test_every_command_has_examples() -> None:
    paths = command_paths()
    missing = [" ".join(("peira", *p)) for p in paths if not EXAMPLES.get(p)]
    assert not missing, f"commands without examples (peira/cli/_examples.py): {missing}"
    stale = [p for p in EXAMPLES if p not in paths]
    assert not stale, f"examples of no command: {stale}"
    for path, found in EXAMPLES.items():
        for ex in found:
            assert ex.what and ex.line.startswith(("peira ", "echo ", "python ")), (path, ex)
        command = " ".join(("peira", *path)) + " "
        assert any(command in ex.line + " " for ex in found), f"no example calls {command}"


@pytest.mark.parametrize("path", command_paths(), ids=" ".join)
def test_every_help_lists_its_examples(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_text(list(path), capsys)
    assert "\nexamples (" in text
    for ex in EXAMPLES[path]:
        assert ex.line.splitlines()[0] in text


def test_the_root_help_lists_the_commands_and_the_flow(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text([], capsys)
    for name in ("leaderboard", "score", "import", "holdout", "report"):
        assert re.search(rf"^    {name}\s", text, re.M), name
    assert "peira import table data/samples/results.csv" in text
    assert "peira COMMAND --help" in text


def _choice_actions() -> Iterator[tuple[str, argparse.Action]]:
    for path, parser in parsers(build_parser()):
        for a in parser._actions:
            if a.choices is not None and not isinstance(a, argparse._SubParsersAction):
                yield " ".join(("peira", *path, *(a.option_strings[:1] or [a.dest]))), a


def test_every_choice_is_named_in_its_help() -> None:
    """Each choice of every option appears, with its meaning, in the option's help; the
    help's own words count, not a list argparse fills in (``%(choices)s``)."""
    bad = []
    seen = 0
    for where, a in _choice_actions():
        if a.dest == "format" and not a.option_strings:  # peira import FORMAT: listed below
            continue
        words = (a.help or "").replace("%(choices)s", "")
        for choice in a.choices:  # type: ignore[union-attr]
            seen += 1
            if not re.search(rf"(?<![\w-]){re.escape(str(choice))}(?![\w-])", words):
                bad.append(f"{where}: {choice!r}")
    assert seen > 100
    assert not bad, f"choices not named in their option's help: {bad}"


def test_import_help_lists_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["import"], capsys)
    for fmt in _import_formats():
        assert re.search(rf"^  {re.escape(fmt)} ", text, re.M), fmt
    assert "peira import table --help" in text


def test_the_import_options_table_is_the_parsers() -> None:
    """Every option of ``peira import`` belongs to a format (or to all), and the table
    agrees with the checks ``peira.cli.data`` makes of who takes what."""
    from peira.cli import data

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    dests = {a.dest for a in sub.choices["import"]._actions} - {"format"}
    listed = set(IMPORT_COMMON).union(*IMPORT_OPTIONS.values())
    assert dests == listed, (dests - listed, listed - dests)
    assert set(IMPORT_OPTIONS) == set(_import_formats())
    for fmt, takes in IMPORT_OPTIONS.items():
        if fmt != "table":
            assert not set(takes) & set(data._TABLE_ONLY), fmt
        for other, options in data._EVAL_OPTIONS.items():
            assert (set(options) <= set(takes)) == (fmt == other), fmt
        if fmt in data.EVAL_LOG_FORMATS:
            assert not set(takes) & set(data._NOT_EVAL), fmt


def _expand(names: str) -> set[str]:
    out = set()
    for name in names.split(","):
        name = name.strip()
        if name.startswith("[arm_]"):
            bare = name.removeprefix("[arm_]")
            out |= {bare, f"benign_{bare}", f"attacked_{bare}"}
        else:
            out.add(name)
    return out


def test_import_table_help_is_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    """Its options only, each --map field with its meaning (from the table importer's own
    field table, so a field added there appears), the worked examples."""
    from peira.importers import table

    text = help_text(["import", "table"], capsys)
    assert text.startswith("usage: peira import table ")
    for option in ("--map", "--records", "--set", "--values", "--sample", "--published"):
        assert f"\n  {option} " in text, option
    for option in ("--scorer", "--labels", "--attacked-task", "--run-id", "--summary"):
        assert option not in text.split("\n--map FIELD=COLUMN")[0], option
    rows = table_fields()
    assert all(meaning for _, meaning in rows), [n for n, m in rows if not m]
    shown = set().union(*(_expand(n) for n, _ in rows))
    wanted = {*table._fields("wide"), *table._fields("long")}
    assert wanted <= shown, f"fields of the table importer without a meaning: {wanted - shown}"
    for name, meaning in rows:
        assert f"  {name}" in text and meaning.split()[0] in text
    assert "the run (default: --run, else the file's stem)" in " ".join(text.split())
    assert "run=" not in text and "``" not in text
    assert "[arm_]verdict:NAME judge NAME's verdict" in " ".join(text.split())


def test_import_format_help_is_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    inspect = help_text(["import", "inspect"], capsys)
    assert inspect.startswith("usage: peira import inspect ")
    assert "--scorer" in inspect and "--map" not in inspect and "--labels" not in inspect
    ta = help_text(["import", "textattack", "x.csv"], capsys)  # after an input too
    assert "--labels" in ta and "--scorer" not in ta and "--map" not in ta
    generic = help_text(["import"], capsys)
    assert generic.startswith("usage: peira import ") and "--scorer" in generic


# ---------------------------------------------------------------- the examples run


def _has(extra: str) -> bool:
    return importlib.util.find_spec({"spark": "pyspark"}.get(extra, extra)) is not None


def _with_resamples() -> list[str]:
    """The command paths that take --resamples."""
    return [
        " ".join(path)
        for path, p in parsers(build_parser())
        if path and any("--resamples" in a.option_strings for a in p._actions)
    ]


def _script(examples: list[tuple[tuple[str, ...], Example]]) -> str:
    """One bash script running ``examples`` in order (each line once), ``peira`` given
    ``--resamples`` where it takes it and the line does not say."""
    paths = "|".join(f'"{p}"*' for p in sorted(_with_resamples(), key=len, reverse=True))
    script = [
        "set -euo pipefail",
        "export PS4='+ example: '",
        "peira() {",
        '  case " $* " in *" --resamples "*|*" --resamples="*) ;;',
        f'  *) case "$*" in {paths}) set -- "$@" --resamples {RESAMPLES};; esac;; esac',
        '  command peira "$@"',
        "}",
    ]
    done: set[str] = set()
    for path, ex in examples:
        if ex.line in done:
            continue
        done.add(ex.line)
        script += [f": {' '.join(('peira', *path))}: {ex.what[:60]!r}", "set -x", ex.line,
                   "{ set +x; } 2>/dev/null"]  # fmt: skip
    return "\n".join(script) + "\n"


_OUT = re.compile(r"\bout/([^/\s'\"]+)")
LANES = 2  # the examples run in two shells at once (the machine's two cores)


def lanes(examples: list[tuple[tuple[str, ...], Example]], n: int = LANES) -> list[list[Any]]:
    """``examples`` in ``n`` lanes, each in the table's order: examples that name one
    output under ``out/`` (one writes it, another reads it) share a lane."""
    group: dict[str, int] = {}
    members: dict[int, list[int]] = {}
    for i, (_, ex) in enumerate(examples):
        names = set(_OUT.findall(ex.line))
        joined = {group[x] for x in names if x in group} | {i}
        keep = min(joined)
        members[keep] = sorted({i, *[j for g in joined if g in members for j in members.pop(g)]})
        for j in members[keep]:
            for x in _OUT.findall(examples[j][1].line):
                group[x] = keep
    out: list[list[int]] = [[] for _ in range(n)]
    for g in sorted(members.values(), key=len, reverse=True):
        min(out, key=len).extend(g)
    return [[examples[i] for i in sorted(lane)] for lane in out if lane]


def _run_examples(tmp_path: Path, examples: list[tuple[tuple[str, ...], Example]]) -> float:
    work = _workspace(tmp_path)
    (work / "out").mkdir()
    env = _env()
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env["PATH"]))
    once: dict[str, tuple[tuple[str, ...], Example]] = {}
    for path, ex in examples:
        once.setdefault(ex.line, (path, ex))
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["bash", "-c", _script(lane)],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for lane in lanes(list(once.values()))
    ]
    ends = [p.communicate(timeout=900) for p in procs]
    took = time.perf_counter() - start
    for proc, (stdout, stderr) in zip(procs, ends, strict=True):
        trace = [ln for ln in stderr.splitlines() if ln.startswith("+ example: ")]
        assert proc.returncode == 0, (
            f"example failed (exit {proc.returncode}): {trace[-1] if trace else '?'}\n"
            f"stderr (end):\n{stderr[-3000:]}\nstdout (end):\n{stdout[-1500:]}"
        )
    return took


def test_every_example_runs(tmp_path: Path) -> None:
    """Every example of every help, in the table's order, in one shell at the root of a
    fresh clone's layout (tests/docs/test_readme.py): what an import writes, the commands
    after it read. Those that need an extra run in the slow test below."""
    todo = [(path, ex) for path, found in EXAMPLES.items() for ex in found if not ex.needs]
    took = _run_examples(tmp_path, todo)
    print(f"{len(todo)} examples in {took:.1f} s")
    out = tmp_path / "clone" / "out"
    for written in ("mine/responses.parquet", "long/responses.parquet", "refusal/published.parquet",
                    "holdout-answers.parquet", "m01", "decision", "tables", "report.html"):  # fmt: skip
        assert (out / written).exists(), written


@pytest.mark.slow
def test_the_examples_that_need_an_extra_run(tmp_path: Path) -> None:
    todo = [(path, ex) for path, found in EXAMPLES.items() for ex in found if ex.needs]
    assert todo
    missing = sorted({ex.needs for _, ex in todo if not _has(ex.needs)})
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (pip install 'peira[{missing[0]}]')")
    _run_examples(tmp_path, todo)
