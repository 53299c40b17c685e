"""Importers: files in other formats → Peira tables (docs/spec/formats.md).

:data:`IMPORTERS` is the one table of formats. Each row is an
:class:`Importer`: the name ``peira import`` and :func:`importer_for` take,
what it produces (a dataset, or a response log), the file suffixes it reads,
and a lazy ``"module:function"`` target, imported on first use only.
Formats outside Peira register through the entry-point group
``peira.importers`` (an entry point loads to an :class:`Importer`).

To add a format: write ``peira/importers/<format>.py`` with a reader
``read_<format>(path, **options)`` and add one row below
(``docs/extending.md`` walks through it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._registry import Registry
from ..errors import InputFormatError, PeiraValueError

if TYPE_CHECKING:
    from ._bundle import Imported

__all__ = ["IMPORTERS", "Imported", "Importer", "importer_for"]

Produces = Literal["dataset", "responses", "benchmark"]


@dataclass(frozen=True)
class Importer:
    """One input format.

    Attributes
    ----------
    name
        What ``peira import`` and ``importer_for(format=...)`` take.
    produces
        ``"dataset"`` (the reader returns a :class:`peira.io.Dataset`),
        ``"responses"`` (a response log as a polars frame) or ``"benchmark"``
        (released results: the reader returns an ``Imported`` — cases,
        variants, responses and the source's published figures — written as
        one dataset directory).
    suffixes
        File name endings of the format (lower case, with the dot, e.g.
        ``".csv.gz"``), used to tell the format from a path.
    target
        ``"module:function"`` of the reader; a module starting with ``.`` is
        relative to :mod:`peira.importers`.
    description
        One line for ``peira import --help``.
    options
        Keyword options the reader takes (``run_id`` for response logs).

    The reader's first argument is a path, or a list of paths for the readers
    of released results that take one file per run.
    """

    name: str
    produces: Produces
    suffixes: tuple[str, ...]
    target: str
    description: str
    options: tuple[str, ...] = ()

    def reader(self) -> Any:
        """The reader function (imports its module)."""
        module, _, func = self.target.partition(":")
        return getattr(import_module(module, __package__), func)

    def read(self, path: str | os.PathLike[str], **options: Any) -> Any:
        """Read ``path``; ``options`` are the reader's keyword options (None ones are dropped).

        Raises
        ------
        PeiraValueError
            An option this importer does not take.
        """
        given = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            takes = ", ".join(self.options) or "no options"
            raise PeiraValueError(f"importer {self.name!r} takes {takes}, not {', '.join(unknown)}")
        return self.reader()(path, **given)


#: The importers, one row per format (built-ins here; plugins via entry points).
IMPORTERS: Registry[Importer] = Registry(
    "importer",
    (
        Importer(
            "cases", "dataset", (".jsonl",), ".cases:read_cases_jsonl",
            "cases JSONL of the earlier Peira harness (v2) → a dataset directory",
        ),
        Importer(
            "artifact", "responses", (".json",), ".artifact:read_artifact",
            "run artifact JSON of the earlier harness → a response log", ("run_id",),
        ),
        Importer(
            "transcript", "responses", (".jsonl",), ".transcript:read_transcript",
            "call transcript JSONL of the earlier harness → a response log", ("run_id",),
        ),
        Importer(
            "textattack", "benchmark", (".csv", ".csv.gz"), ".textattack:read_textattack",
            "TextAttack --log-to-csv files, one run each → a dataset directory with responses",
            ("run_ids", "labels", "family", "dataset_version", "summaries"),
        ),
        Importer(
            "jailbreakbench", "benchmark", (".json", ".json.gz"),
            ".jailbreakbench:read_jailbreakbench",
            "JailbreakBench attack artifacts, one run each → a dataset directory with responses",
            ("judge", "run_ids", "dataset_version"),
        ),
        Importer(
            "table", "benchmark", (".csv", ".tsv", ".json", ".jsonl", ".parquet"),
            ".table:read_table",
            "any CSV, TSV, JSON, JSONL or Parquet table of results, with --map FIELD=COLUMN",
            ("mapping", "format", "layout", "run", "options", "arms", "threshold",
             "verdict_source", "family", "records", "constants", "values", "sample",
             "published"),
        ),
        Importer(
            "inspect", "benchmark", (".eval",), ".inspect:read_inspect",
            "Inspect eval logs (.eval, .json), one run each → a dataset directory with responses",
            ("scorer", "pair_by", "arm_field", "pairs", "threshold", "cluster_by"),
        ),
        Importer(
            "lm-eval", "benchmark", (), ".lm_eval:read_lm_eval",
            "lm-eval --log_samples outputs (directories or files) → a dataset directory",
            ("metric", "filter_name", "threshold", "attacked_tasks"),
        ),
    ),
    entry_points="peira.importers",
)  # fmt: skip


def importer_for(path: str | os.PathLike[str], format: str | None = None) -> Importer:
    """The importer of ``format``, or the one importer whose suffixes match ``path``.

    Raises
    ------
    UnknownNameError
        ``format`` is not registered (the message offers close matches).
    InputFormatError
        No format given, and the suffix matches no importer or several.

    Examples
    --------
    >>> importer_for("results.tsv").name
    'table'
    >>> importer_for("calls.jsonl", "transcript").produces
    'responses'
    """
    if format is not None:
        return IMPORTERS[format]
    name = Path(path).name.lower()
    hits = [imp for imp in IMPORTERS.values() if name.endswith(imp.suffixes)]
    suffix = Path(path).suffix.lower()
    if len(hits) == 1:
        return hits[0]
    choose = [imp.name for imp in hits or IMPORTERS.values()]
    why = "several formats use" if hits else "no importer reads"
    raise InputFormatError(
        f"{path}: cannot tell the format: {why} {suffix or 'no suffix'!r}; "
        f"pass the format, one of {', '.join(choose)}"
    )


def __getattr__(name: str) -> Any:
    """:class:`Imported` (the result of a reader of released results), loaded on first use."""
    if name == "Imported":
        from ._bundle import Imported

        return Imported
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
