"""The README's tour and the documentation pages, run as written, in this environment.

``tests/docs/test_readme.py`` and ``tests/docs/test_pages.py`` run them in the
development environment; ``.ci/run`` runs this module first in the environment
README command 1 makes (``pip install -e .``, no extra), so every line is true
there: a line that needs an extra installs it, as the README says
(``pip install -e '.[inspect]'``), and the lines before it run without it
(tests/docs/codeblocks.py: :func:`~tests.docs.codeblocks.with_extras`)::

    .venv/bin/python -m tests.docs.tour            # the README, then every page
    .venv/bin/python -m tests.docs.tour --readme   # the README only

It needs nothing but the standard library and an installed ``peira``, so it
runs before the development extras are installed. Exit 0 when every block
passed and the tour wrote what it promises; else 1, naming the failing line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .codeblocks import (
    ROOT,
    blocks,
    page_blocks,
    run_python,
    run_shell,
    shell_failure,
    workspace,
)

README = ROOT / "README.md"

#: Set by .ci/run once this module passed in command 1's environment: the tests that run
#: the same blocks in the development environment are then skipped, not run twice.
PASSED = "PEIRA_TOUR_PASSED"


def passed_already() -> bool:
    """This CI run's tour passed in command 1's environment (``.ci/run``)."""
    import os

    return os.environ.get(PASSED) == "1"


DOCS = ROOT / "docs"

#: What the README's tour writes (out/…), checked after it ran.
TOUR_OUTPUTS = (
    "tables/manifest.json", "tables/tables.tex", "report.html", "public/manifest.json", "m01",
    "blinded.parquet", "run.parquet", "my-dataset/cases.parquet", "cases.jsonl",
    "ta/responses.parquet", "jbb/responses.parquet", "mine/responses.parquet", "mine.parquet",
)  # fmt: skip


def run_readme(work: Path) -> list[str]:
    """Every ``bash`` block of the README in one shell, then every ``python`` block, in
    ``work`` (:func:`~tests.docs.codeblocks.workspace`); what failed, or what the tour
    should have written and did not (empty when all is well)."""
    found = blocks(README.read_text(encoding="utf-8"))
    shell = [(line, body) for lang, line, body in found if lang == "bash"]
    proc = run_shell(shell, work, "README", timeout=1500)
    if proc.returncode != 0:
        return [shell_failure(proc, "README")]
    out = work / "out"
    problems = [
        f"the tour should have written out/{p}" for p in TOUR_OUTPUTS if not (out / p).exists()
    ]
    if len(list((out / "tables" / "figures").glob("*.png"))) < 5:
        problems.append("command 1 draws figures: fewer than 5 in out/tables/figures")
    if (work / "KEY").stat().st_mode & 0o077:
        problems.append("the key file is readable by others")
    if (out / "cases.jsonl").read_bytes() != (
        work / "data" / "samples" / "cases.jsonl"
    ).read_bytes():
        problems.append("import cases then export cases does not give the sample back")
    for line, body in ((line, body) for lang, line, body in found if lang == "python"):
        py = run_python(body, work, timeout=600)
        if py.returncode != 0:
            problems.append(f"README.md line {line} (python):\n{py.stderr[-3000:]}")
    if not problems and not (out / "forest.png").is_file():
        problems.append("the peira.plot block did not save its figure")
    return problems


def runnable_pages() -> list[Path]:
    """The pages under docs/ with a block to run."""
    return [
        p
        for p in sorted(DOCS.rglob("*.md"))
        if any(t in ("bash", "python") for t, _, _ in page_blocks(p.read_text("utf-8")))
    ]


def run_page(page: Path, work: Path) -> list[str]:
    """A page's ``bash`` blocks in one shell, then its ``python`` blocks, in ``work``."""
    found = page_blocks(page.read_text(encoding="utf-8"))
    label = f"docs/{page.relative_to(DOCS)}"
    shell = [(line, body) for lang, line, body in found if lang == "bash"]
    if shell:
        proc = run_shell(shell, work, label, timeout=900)
        if proc.returncode != 0:
            return [shell_failure(proc, label)]
    problems = []
    for line, body in ((line, body) for lang, line, body in found if lang == "python"):
        py = run_python(body, work, timeout=600)
        if py.returncode != 0:
            problems.append(f"{label} line {line} (python):\n{py.stderr[-3000:]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.docs.tour", description=__doc__)
    p.add_argument("--readme", action="store_true", help="the README only, not the pages")
    args = p.parse_args(argv)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="peira-tour-") as tmp:
        base = Path(tmp)
        (base / "readme").mkdir()
        problems += run_readme(workspace(base / "readme"))
        print(f"README.md: {'ok' if not problems else 'FAILED'}", flush=True)
        if not args.readme:
            for i, page in enumerate(runnable_pages()):
                (base / f"page{i}").mkdir()
                found = run_page(page, workspace(base / f"page{i}"))
                print(f"docs/{page.relative_to(DOCS)}: {'ok' if not found else 'FAILED'}")
                problems += found
    for text in problems:
        print(text, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
