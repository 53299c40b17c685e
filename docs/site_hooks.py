"""MkDocs hooks of the documentation site (``mkdocs.yml``): pages generated at build time.

Nothing here is committed as Markdown: every build writes the pages from the code.

- **API reference** (``reference/api/``): one page per name of the flat API, listed from
  ``peira.api.__all__`` and ``peira.__all__`` (never by hand), rendered by mkdocstrings from
  the docstrings; an index with each name's one-line summary.
- **CLI reference** (``reference/cli.md``): every command and subcommand of
  :func:`peira.cli.build_parser`, with its help as ``peira COMMAND --help`` prints it.
- :class:`SphinxRoles`, a griffe extension: the docstrings cite names with Sphinx roles
  (``:func:`pairs```); on the site a role naming a documented object becomes a link to it,
  any other its name in code; a citation of the contract (``docs/spec/uncertainty.md#splits``)
  becomes a link to that page and section.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import griffe

API = "reference/api"
CLI = "reference/cli.md"
#: The nav entry that the generated API pages replace (``mkdocs.yml``).
API_NAV = "API reference"
#: Width of the CLI help on the site (argparse reads it from ``COLUMNS``).
HELP_WIDTH = 100


# ---------------------------------------------------------------- what the API pages hold


def api_groups() -> list[tuple[str, str, list[str]]]:
    """(page stem, title, identifiers) of every API page, in nav order.

    Each lazily loaded verb of ``peira.api`` (``peira.api._WHERE``) has a page of its
    own; the names ``peira.api`` defines eagerly (the parameter table and its checks),
    the files and errors of ``peira``, and the figures of ``peira.plot`` have one page
    per group.
    """
    import peira
    import peira.api as api
    import peira.plot as plot

    verbs = [n for n in api.__all__ if n in api._WHERE]
    groups = [(n, n, [f"peira.api.{n}"]) for n in verbs]
    params = [f"peira.api.{n}" for n in api.__all__ if n not in api._WHERE]
    groups.append(("parameters", "Parameters and constants", params))
    where = peira._WHERE
    files = [f"peira.io.{n}" for n in peira.__all__ if where.get(n) == ".io"]
    groups.append(("files", "Datasets and files", files))
    errors = [f"peira.errors.{n}" for n in peira.__all__ if where.get(n) == ".errors"]
    groups.append(("errors", "Errors", errors))
    figures = [f"peira.plot.{n}" for n in plot.__all__ if inspect.isfunction(getattr(plot, n))]
    groups.append(("plot", "Figures (peira.plot)", figures))
    return groups


def documented() -> dict[str, str]:
    """Every name an API page documents → its identifier (``score`` → ``peira.api.score``),
    with its dotted forms (``peira.score``, ``peira.api.score``, ``peira.io.Dataset``)."""
    names: dict[str, str] = {}
    for _, _, idents in api_groups():
        for ident in idents:
            short = ident.rsplit(".", 1)[1]
            names.setdefault(short, ident)
            names[ident] = ident
            names.setdefault(f"peira.{short}", ident)
    return names


def _summary(ident: str) -> str:
    import importlib

    module, name = ident.rsplit(".", 1)
    obj = getattr(importlib.import_module(module), name)
    doc = inspect.getdoc(obj) if callable(obj) else None
    first = (doc or "").split("\n\n", 1)[0].replace("\n", " ").strip()
    return sphinx_roles(first, documented()).replace("|", "\\|")


def api_index() -> str:
    """The index: the module's notes, then every name with its one-line summary."""
    import peira

    face = set(peira.__all__)
    lines = [
        "# API reference",
        "",
        "Each verb has a page; the other names are grouped. The verbs are defined in",
        "`peira.api`; those marked **peira** are also names of `peira` itself",
        "(`peira.score` is `peira.api.score`).",
        "",
        "::: peira.api",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "      show_root_toc_entry: false",
        "",
    ]
    groups = api_groups()
    verbs = [g for g in groups if len(g[2]) == 1 and g[0] == g[2][0].rsplit(".", 1)[1]]
    sections = [("Verbs", "", [(stem, ident) for stem, _, (ident,) in verbs])]
    sections += [(t, s, [(s, i) for i in ids]) for s, t, ids in groups if (s, t, ids) not in verbs]
    for title, stem, rows in sections:
        heading = f"[{title}]({stem}.md)" if stem else title
        lines += [f"## {heading}", "", "| name | | summary |", "|---|---|---|"]
        for page, ident in rows:
            short = ident.rsplit(".", 1)[1]
            mark = "**peira**" if short in face else ""
            anchor = "" if page == short else f"#{ident}"
            lines.append(f"| [`{short}`]({page}.md{anchor}) | {mark} | {_summary(ident)} |")
        lines.append("")
    return "\n".join(lines)


def api_page(title: str, idents: list[str]) -> str:
    if len(idents) == 1:  # the object's heading is the page's title
        return f"::: {idents[0]}\n    options:\n      heading_level: 1\n"
    lines = [f"# {title}", ""]
    for ident in idents:
        lines += [f"::: {ident}", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the CLI reference


@contextmanager
def _columns(width: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every subcommand below ``parser``, depth first in the order ``--help`` lists
    them: (its words after ``peira``, its one-line help, its parser)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        seen: set[int] = set()
        for name, sub in action.choices.items():
            if id(sub) in seen:  # an alias
                continue
            seen.add(id(sub))
            words = (*path, name)
            yield words, helps.get(name, ""), sub
            yield from commands(sub, words)


def cli_reference() -> str:
    """The CLI reference page: a table of every command, then each one's help."""
    from peira.cli import build_parser

    with _columns(HELP_WIDTH):
        parser = build_parser()
        found = list(commands(parser))
        lines = [
            "# CLI reference",
            "",
            "Every command of `peira` and its help, as `peira COMMAND --help` prints it",
            "(written from the command's parser when the site is built).",
            "",
            "| command | what it does |",
            "|---|---|",
        ]
        for words, help_, _ in found:
            lines.append(f"| [`peira {' '.join(words)}`](#{_anchor(words)}) | {_cell(help_)} |")
        lines += ["", "## peira", "", "```text", parser.format_help().rstrip(), "```", ""]
        for words, help_, sub in found:
            level = "#" * min(len(words) + 1, 6)
            lines += [f"{level} peira {' '.join(words)} {{#{_anchor(words)}}}", ""]
            if help_:
                lines += [_cell(help_), ""]
            lines += ["```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def _anchor(words: tuple[str, ...]) -> str:
    return "peira-" + "-".join(words)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# ---------------------------------------------------------------- Sphinx roles


ROLE = re.compile(r":(?:py:)?(func|class|data|mod|meth|attr|exc|obj|const):`~?\.?([^`<>]+?)`")


def sphinx_roles(text: str, names: dict[str, str]) -> str:
    """``text`` with each Sphinx role a Markdown cross-reference to the documented
    object it names (autorefs' ``[`name`][identifier]``) or else the name in code."""

    def replace(m: re.Match[str]) -> str:
        target = m.group(2).strip().removesuffix("()")
        ident = names.get(target)
        return f"[`{target}`][{ident}]" if ident else f"`{target}`"

    return ROLE.sub(replace, text)


CITATION = re.compile(r"(?<![\w/\[])(?<!\]\()docs/((?:spec/)?[\w-]+)\.md(#[\w-]+)?")


def contract_links(text: str) -> str:
    """Each citation of a page of docs/ (``docs/spec/uncertainty.md#splits``, as the
    docstrings cite the contract) a link to it, from a page of ``reference/api/``."""

    def replace(m: re.Match[str]) -> str:
        return f"[{m.group(0)}](../../{m.group(1)}.md{m.group(2) or ''})"

    return CITATION.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring before mkdocstrings parses it."""

    def __init__(self) -> None:
        super().__init__()
        self.names = documented()
        self.functions = _defined_at(self.names.values())

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        obj.docstring.value = contract_links(sphinx_roles(obj.docstring.value, self.names))
        if isinstance(obj, griffe.Function) and obj.path in self.functions:
            _signature_types(obj)


def _defined_at(idents: Iterable[str]) -> set[str]:
    """Where each documented function is defined (``peira.api._score.score``)."""
    import importlib

    found = set()
    for ident in idents:
        module, name = ident.rsplit(".", 1)
        obj = getattr(importlib.import_module(module), name)
        if inspect.isfunction(obj):
            found.add(f"{obj.__module__}.{obj.__qualname__}")
    return found


def _signature_types(func: griffe.Function) -> None:
    """Each documented parameter with its own type and default from the signature.

    The docstrings document related parameters together (``n_resamples, seed, level``)
    and give no types; griffe's numpy parser would give every name of such a group the
    type and default of its first.
    """
    assert func.docstring is not None
    for section in func.docstring.parsed:  # parsed once, here; mkdocstrings reuses it
        if section.kind is not griffe.DocstringSectionKind.parameters:
            continue
        for param in section.value:
            if param.name in func.parameters:
                real = func.parameters[param.name]
                param.annotation = real.annotation
                param.value = real.default


# ---------------------------------------------------------------- the MkDocs hooks


def on_config(config: Any) -> Any:
    """The API reference's nav: the index, then one entry per generated page."""
    entries: list[Any] = [{"Overview": f"{API}/index.md"}]
    entries += [{title: f"{API}/{stem}.md"} for stem, title, _ in api_groups()]
    nav = config["nav"]
    for i, item in enumerate(nav):
        if isinstance(item, dict) and API_NAV in item:
            nav[i] = {API_NAV: entries}
            break
    else:
        raise ValueError(f"mkdocs.yml: the nav has no {API_NAV!r} entry for the API pages")
    return config


def on_files(files: Any, config: Any) -> Any:
    """Adds the generated pages to the site."""
    from mkdocs.structure.files import File

    pages = {f"{API}/index.md": api_index(), CLI: cli_reference()}
    for stem, title, idents in api_groups():
        pages[f"{API}/{stem}.md"] = api_page(title, idents)
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    return files
