"""The documentation site builds with warnings as errors (``mkdocs build --strict``),
and its generated references hold what the code has: every name of the flat API with
its parameters, every command of the ``peira`` parser with its options."""

from __future__ import annotations

import argparse
import html
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [m for m in NEEDED if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        reason = f"the docs extra is not installed (pip install -e '.[docs]'): no {missing}"
        if os.environ.get("CI"):  # .ci/run installs .[dev], which pulls .[docs]
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("PYTHONPATH", None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.perf_counter() - start
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-5000:]}"
    assert "WARNING" not in proc.stderr, proc.stderr[-5000:]
    print(f"mkdocs build --strict: {took:.1f} s")
    return out


def _text(page: Path) -> str:
    """The page's article as text."""
    raw = page.read_text(encoding="utf-8")
    article = raw[raw.index("<article") : raw.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", article))


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    for page in ("index.html", "getting-started/analyst/index.html", "spec/index.html",
                 "spec/scoring-rule/index.html", "extending/index.html",
                 "reference/api/index.html", "reference/cli/index.html"):  # fmt: skip
        assert (site / page).is_file(), page


def test_the_api_page_of_score_has_its_parameters(site: Path) -> None:
    import peira

    page = site / "reference/api/score/index.html"
    assert "peira.api.score" in _ids(page)
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(
            r'<tr class="doc-section-item">\s*<td>\s*<code>(\w+)</code>.*?</tr>',
            page.read_text(encoding="utf-8"),
            re.S,
        )
    }
    params = inspect.signature(peira.score).parameters
    assert set(params) <= set(rows), sorted(set(params) - set(rows))
    for name, param in params.items():  # each with its own default, grouped or not
        cell = "required" if param.default is param.empty else f"<code>{param.default!r}</code>"
        assert html.unescape(cell) in html.unescape(rows[name]), (name, rows[name][-300:])


def test_every_name_of_the_face_has_an_api_entry(site: Path) -> None:
    import peira
    import peira.api

    ids: set[str] = set()
    for page in (site / "reference/api").rglob("index.html"):
        ids |= _ids(page)
    documented = {i.rsplit(".", 1)[-1] for i in ids if i.startswith("peira.")}
    face = (set(peira.__all__) - {"__version__"}) | set(peira.api.__all__)
    assert face <= documented, sorted(face - documented)


def test_roles_and_citations_become_links(site: Path) -> None:
    for page in (site / "reference/api").rglob("index.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r":(func|class|data|mod|meth|attr|exc):", text), page
    score = (site / "reference/api/score/index.html").read_text(encoding="utf-8")
    assert re.search(r'<a [^>]*href="[^"]*pairs/#peira\.api\.pairs"', score), (
        ":func:`pairs` in score's docstring links to the pairs page"
    )
    assert 'href="../../../spec/uncertainty/#splits"' in score, (
        "the docstring's citation docs/spec/uncertainty.md#splits links to that section"
    )


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*words, name), sub
                yield from _commands(sub, (*words, name))


def test_the_cli_page_has_every_command_and_option(site: Path) -> None:
    from peira.cli import build_parser

    page = site / "reference/cli/index.html"
    ids, text = _ids(page), _text(page)
    found = list(_commands(build_parser()))
    assert len(found) > 20 and ("holdout", "blind") in [w for w, _ in found]
    for words, sub in found:
        assert f"peira-{'-'.join(words)}" in ids, f"peira {' '.join(words)}: no section"
        assert f"usage: peira {' '.join(words)}" in " ".join(text.split())
        for action in sub._actions:
            for option in action.option_strings:
                assert option in text, f"peira {' '.join(words)} {option}: not on the page"
