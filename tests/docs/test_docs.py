"""The project documents itself: every citation of docs/ points at a page and a
section that exist, and every link between the pages resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CITATION = re.compile(r"docs/((?:spec/)?[\w-]+\.md)(?:#([\w-]+))?")
LINK = re.compile(r"\]\(([^)#\s]+\.md)?(?:#([\w-]+))?\)")
# pages the site writes at build time (docs/site_hooks.py); links to them are checked
# by the build itself (tests/docs/test_site.py: mkdocs build --strict)
GENERATED = DOCS / "reference"


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found = {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}
    found |= set(re.findall(r'<a id="([\w-]+)"></a>', text))
    return found


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *DOCS.rglob("*.md")]
    for folder in ("peira", "tests", "benchmarks", "notebooks"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".ipynb", ".md")]
    return sorted(files)


def test_slug_is_githubs() -> None:
    assert slug("`responses` — the raw response log, one row per model call") == (
        "responses--the-raw-response-log-one-row-per-model-call"
    )
    assert slug("Metrics (per run, optionally × family / severity)") == (
        "metrics-per-run-optionally--family--severity"
    )


def test_every_cited_page_and_section_exists() -> None:
    cited = 0
    for src in _sources():
        if src == Path(__file__).resolve():
            continue
        for m in CITATION.finditer(src.read_text(encoding="utf-8")):
            page, anchor = DOCS / m.group(1), m.group(2)
            where = f"{src.relative_to(ROOT)}: docs/{m.group(1)}"
            assert page.is_file(), f"{where}: no such page"
            if anchor:
                assert anchor in anchors(page), f"{where}#{anchor}: no such section"
            cited += 1
    assert cited > 50  # the library cites its contract throughout


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: p.name)
def test_links_between_pages_resolve(page: Path) -> None:
    for m in LINK.finditer(page.read_text(encoding="utf-8")):
        target = (page.parent / m.group(1)).resolve() if m.group(1) else page
        if target.is_relative_to(GENERATED):
            continue
        assert target.is_file(), f"{page.name}: link to missing {m.group(1)}"
        if m.group(2):
            assert m.group(2) in anchors(target), f"{page.name}: {m.group(1)}#{m.group(2)}"


def test_no_citation_of_the_old_numbering() -> None:
    for src in _sources():
        if src == Path(__file__).resolve():
            continue
        assert "SPEC §" not in src.read_text(encoding="utf-8"), src
