"""What ``--help`` prints beyond argparse's own: the examples of every command and
the help of one format of ``peira import``.

Every parser of the ``peira`` command is a :class:`HelpParser` (the root parser
is one, and argparse makes every subcommand's parser of its parent's class).
Its help ends with the command's examples, taken from the one table
:data:`peira.cli._examples.EXAMPLES` by the command's path (``("holdout",
"blind")`` for ``peira holdout blind``), with their line breaks kept while the
options above still wrap to the terminal.

``peira import FORMAT --help`` (:class:`ImportHelpParser`) shows that format
alone: its description, the options it takes (:data:`IMPORT_OPTIONS`), for
``table`` the fields ``--map`` names, generated from the table importer's own
field table (:func:`table_fields`), the parser's ``format_notes`` of the format
(``peira import table``'s worked example of each option) and its examples.

Nothing heavy is imported at module level: ``peira --help`` builds every
parser without loading polars.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ._examples import EXAMPLES, HEADER, Example

__all__ = [
    "IMPORT_COMMON",
    "IMPORT_OPTIONS",
    "HelpParser",
    "ImportHelpParser",
    "examples_block",
    "import_format_help",
    "map_fields_block",
    "table_fields",
]


def _indent(line: str, by: str) -> str:
    return "\n".join(by + part for part in line.splitlines())


def examples_block(path: Sequence[str], width: int = 100) -> str:
    """The ``examples:`` block of the command ``path`` ("" when it has none): each
    example's sentence wrapped to ``width``, its command line as written."""
    import textwrap

    found: Sequence[Example] = EXAMPLES.get(tuple(path), ())
    if not found:
        return ""
    width = max(width, 40)
    rows = textwrap.wrap(f"examples ({HEADER}):", width, subsequent_indent="  ")
    for ex in found:
        what = f"{ex.what}:"
        rows += textwrap.wrap(what, width, initial_indent="  ", subsequent_indent="  ")
        rows.append(_indent(ex.line, "    "))
    return "\n".join(rows) + "\n"


class _Help(argparse.Action):
    """``-h``/``--help``: the parser's help for what was parsed so far (the format of
    ``peira import table --help``), then exit 0."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> NoReturn:
        text = parser.format_help_for(namespace) if isinstance(parser, HelpParser) else None
        parser._print_message(text or parser.format_help(), sys.stdout)
        parser.exit()


class HelpParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help ends with the command's examples."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        add_help = kwargs.get("add_help", True)
        kwargs["add_help"] = False  # added below, as the action of _Help
        super().__init__(*args, **kwargs)
        self.register("action", "help", _Help)
        if add_help:
            self.add_argument("-h", "--help", action="help", help="show this help message and exit")

    def command_path(self) -> tuple[str, ...]:
        """The words after ``peira`` that name this command (``()`` for ``peira``)."""
        return tuple(self.prog.split()[1:])

    def format_help(self) -> str:
        text = super().format_help()
        block = examples_block(self.command_path(), self._get_formatter()._width)
        return f"{text.rstrip()}\n\n{block}" if block else text

    def format_help_for(self, namespace: argparse.Namespace) -> str | None:
        """The help for what ``namespace`` holds so far; None: the command's help."""
        return None


# ---------------------------------------------------------------- peira import FORMAT


#: The options every format of ``peira import`` takes (argparse ``dest``).
IMPORT_COMMON = ("help", "input", "out", "force")
#: The options each built-in format takes besides :data:`IMPORT_COMMON` (argparse
#: ``dest``; a test keeps this table in step with the parser and with the checks of
#: ``peira.cli.data``). A format missing here (a plug-in) is shown every option.
IMPORT_OPTIONS: dict[str, tuple[str, ...]] = {
    "cases": (),
    "artifact": ("run_id",),
    "transcript": ("run_id",),
    "textattack": ("run", "family", "labels", "summary"),
    "jailbreakbench": ("run", "judge"),
    "table": (
        "map",
        "judge",
        "run",
        "family",
        "layout",
        "table_format",
        "options",
        "arms",
        "threshold",
        "verdict_source",
        "records",
        "constants",
        "values",
        "sample",
        "published",
    ),
    "inspect": (
        "scorer",
        "score_key",
        "pair_by",
        "arm_field",
        "benign",
        "attacked",
        "cluster_by",
        "threshold",
    ),
    "lm-eval": ("metric", "filter_name", "attacked_task", "threshold"),
}

_RULE = re.compile(r"^=+( +=+)+$")
_API_OPTION = re.compile(r"``(\w+)=``")


def table_fields() -> list[tuple[str, str]]:
    """(field names, meaning) of every row of the field table of
    :mod:`peira.importers.table` (its module notes: the one list of the fields
    ``--map`` names), with the library's keyword arguments (``run=``) said as the
    command's options (``--run``)."""
    from ..importers import table

    lines = (table.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(lines) if _RULE.match(line.strip())]
    if len(rules) < 3:
        return []
    rule = lines[rules[0]]
    col = len(rule) - len(rule.lstrip()) + rule.strip().index(" ")
    col = col + len(rule[col:]) - len(rule[col:].lstrip())  # where the meaning column starts
    rows: list[list[str]] = []
    for line in lines[rules[1] + 1 : rules[2]]:
        name, meaning = line[:col].strip(), line[col:].strip()
        if name and line[col - 1 : col] not in (" ", ""):  # a name running into the column
            name, meaning = line.strip(), ""
        if name:
            rows.append([name, meaning])
        elif rows and meaning:
            rows[-1][1] = f"{rows[-1][1]} {meaning}".strip()

    def said(text: str) -> str:
        text = _API_OPTION.sub(lambda m: "--" + m.group(1).replace("_", "-"), text)
        return text.replace("``", "")

    return [(said(name), said(meaning)) for name, meaning in rows]


def map_fields_block(width: int = 100) -> str:
    """The ``--map`` fields of ``peira import table``, each with its meaning."""
    import textwrap

    rows = table_fields()
    names = max((len(n) for n, _ in rows), default=0)
    pad = min(names, 22)
    out = textwrap.wrap(
        "--map FIELD=COLUMN: the Peira fields a column can hold (a JSON file of "
        '{"FIELD": "COLUMN"} maps several); [arm_]FIELD is benign_FIELD and attacked_FIELD '
        "in the wide layout, FIELD in the long one:",
        max(40, width),
    )
    for name, meaning in rows:
        body = textwrap.wrap(meaning, max(30, width - pad - 6)) or [""]
        if len(name) > pad:
            out.append(f"  {name}")
            out += [f"  {'':<{pad}}  {b}" for b in body]
        else:
            out.append(f"  {name:<{pad}}  {body[0]}")
            out += [f"  {'':<{pad}}  {b}" for b in body[1:]]
    return "\n".join(out) + "\n"


class ImportHelpParser(HelpParser):
    """``peira import``: ``peira import FORMAT --help`` shows that format's help."""

    def format_help_for(self, namespace: argparse.Namespace) -> str | None:
        fmt = getattr(namespace, "format", None)
        return import_format_help(self, fmt) if isinstance(fmt, str) else None


def import_format_help(parser: argparse.ArgumentParser, fmt: str) -> str:
    """The help of ``peira import FORMAT``: its description, the options it takes, the
    ``--map`` fields (``table``) and its examples."""
    from ..importers import IMPORTERS

    imp = IMPORTERS[fmt]
    takes = IMPORT_OPTIONS.get(fmt)
    actions = [
        a
        for a in parser._actions
        if a.dest != "format" and (takes is None or a.dest in (*IMPORT_COMMON, *takes))
    ]
    prog = f"{parser.prog} {fmt}"
    formatter = parser.formatter_class(prog=prog)
    formatter.add_usage(None, actions, [])
    suffixes = ", ".join(imp.suffixes)
    formatter.add_text(f"{imp.description}." + (f" Files: {suffixes}." if suffixes else ""))
    positionals = [a for a in actions if not a.option_strings]
    options = [a for a in actions if a.option_strings]
    for title, group in (("positional arguments", positionals), (f"options of {prog}", options)):
        if group:
            formatter.start_section(title)
            formatter.add_arguments(group)
            formatter.end_section()
    text = formatter.format_help().rstrip() + "\n"
    if fmt == "table":
        text += "\n" + map_fields_block(formatter._width)
    notes: dict[str, str] = getattr(parser, "format_notes", {})
    text += f"\n{notes[fmt]}" if fmt in notes else ""
    block = examples_block(("import", fmt), formatter._width)
    text += f"\n{block}" if block else ""
    text += f"\nevery format: {parser.prog} --help\n"
    return text
