"""The documentation pages run as written: every ``bash`` and ``python`` block of every
page under docs/, page by page, as the README's (tests/docs/codeblocks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .codeblocks import ROOT, page_blocks, workspace
from .tour import passed_already, run_page, runnable_pages

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
RUNNABLE = runnable_pages()


def _name(page: Path) -> str:
    return str(page.relative_to(DOCS))


def test_blocks_of_pages_are_parsed() -> None:
    text = "1. a row:\n\n   ```python\n   x = 1\n   ```\n\n```bash\necho 1\n```\n"
    assert page_blocks(text) == [("python", 3, "x = 1\n"), ("bash", 7, "echo 1\n")]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_block_is_tagged_by_the_convention(page: Path) -> None:
    """Run (bash, python) or shown (console, text, …): no other shell tag, so nobody adds
    an ``sh`` block believing it is tested."""
    for lang, line, _ in page_blocks(page.read_text(encoding="utf-8")):
        assert lang not in ("sh", "shell", "zsh", "bash-session", "py", "python3"), (
            f"{_name(page)} line {line}: use ```bash or ```python (run) or ```console (shown)"
        )


def test_the_getting_started_pages_run_something() -> None:
    started = [p for p in RUNNABLE if p.parent.name == "getting-started"]
    assert len(started) == 3, started


@pytest.mark.skipif(passed_already(), reason="ran in command 1's environment (.ci/run)")
@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    problems = run_page(page, workspace(tmp_path))
    assert not problems, "\n".join(problems)
