"""The README runs as written: every shell and Python block of it, in order.

Convention for README code blocks (anyone adding a section follows it):

- a fenced block tagged ``bash`` is **run** by :func:`test_readme_runs_as_written`,
  as a user would paste it into one terminal at the root of a fresh clone
  after command 1: all ``bash`` blocks of the README, in order, in one
  ``bash`` process (``set -euo pipefail``, so the first failing line fails
  the test and is named), with the installed ``peira`` reached through
  ``.venv`` (the tour starts with ``source .venv/bin/activate``);
- a fenced block tagged ``python`` is run too, after the shell blocks, each
  in a fresh interpreter of the same environment, from the same directory;
- any other block is **shown, not run**: ``console`` for commands that need
  the network, credentials or a cluster (say why in a comment on its first
  line), an untagged or ``text`` block for output. The two install commands
  at the top are a ``console`` block: ``.ci/run`` runs them (and the slow
  :func:`test_command_1_on_a_fresh_clone` runs command 1 on a clone);
- a line that needs an extra installs it first, as a user would
  (``pip install -e '.[inspect]'``): ``.ci/run`` runs the whole tour in the
  environment command 1 makes (``python -m tests.docs.tour``), where that
  line installs the extra, and the lines before it run without it; here, in
  the development environment, such a line is left out when the extra is
  installed already (tests/docs/codeblocks.py, ``with_extras``).

The copy the blocks run in is a temporary directory holding a fresh copy of
``data/`` (the demo data and the samples), so writes stay there; the other
top-level entries of the repository (``tests``, ``docs``, …) are linked
read-only in place, and ``.venv`` links to the environment running the test.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .codeblocks import blocks
from .codeblocks import env as _env
from .codeblocks import workspace as _workspace
from .tour import passed_already, run_readme

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUN = ("bash", "python")


def test_blocks_are_parsed() -> None:
    text = "a\n```bash\necho 1\n```\nb\n```\nout\n```\n```console\npip install x\n```\n"
    assert blocks(text) == [
        ("bash", 2, "echo 1\n"),
        ("", 6, "out\n"),
        ("console", 9, "pip install x\n"),
    ]


def test_every_block_is_tagged_by_the_convention() -> None:
    """A block is run (bash, python) or shown (console, text, none); no other shell tag,
    so nobody adds an ``sh`` or ``shell`` block believing it is tested."""
    found = blocks(README.read_text(encoding="utf-8"))
    assert found, "the README has no code blocks"
    bad = [
        (lang, line) for lang, line, _ in found if lang in ("sh", "shell", "zsh", "bash-session")
    ]
    assert not bad, f"use ```bash (run) or ```console (shown only), not {bad}"
    assert any(lang == "bash" for lang, _, _ in found)
    first = found[0]
    assert first[0] == "console" and "pip install -e ." in first[2], (
        "the README starts with the two install commands"
    )


@pytest.mark.skipif(passed_already(), reason="ran in command 1's environment (.ci/run)")
def test_readme_runs_as_written(tmp_path: Path) -> None:
    """Every bash block in one shell, then every python block; what the tour promises is
    there (tests/docs/tour.py, which .ci/run also runs in command 1's environment)."""
    problems = run_readme(_workspace(tmp_path))
    assert not problems, "\n".join(problems)


def test_samples_are_what_their_builder_writes() -> None:
    """``data/samples/build.py`` rewrites the samples from the demo data byte for byte."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("samples_build", ROOT / "data/samples/build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.build()
    assert set(built) == {"cases.jsonl", "run.json", "calls.jsonl", "results.csv"}
    for name, data in built.items():
        assert (ROOT / "data" / "samples" / name).read_bytes() == data, name


@pytest.mark.slow
def test_command_1_on_a_fresh_clone(tmp_path: Path) -> None:
    """Command 1 of the README, verbatim, in a clone of this repository (installs from
    the package index: slow, and needs it reachable)."""
    text = README.read_text(encoding="utf-8")
    install = blocks(text)[0][2]
    command_1 = next(ln for ln in install.splitlines() if ln.strip() and not ln.startswith("#"))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    proc = subprocess.run(
        ["bash", "-c", command_1], cwd=clone, env=_env(), capture_output=True, text=True,
        timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "m01-robust" in proc.stdout
    proc = subprocess.run(
        ["bash", "-c", ".venv/bin/peira tables --out out/tables"],
        cwd=clone, env=_env(), capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((clone / "out/tables/figures").glob("*.png"))) >= 5
