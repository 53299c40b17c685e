"""The registry of named report tables and the context they are computed from.

A :class:`ReportContext` holds the data (dataset, response log, pair table)
and the configuration (:class:`ReportConfig`); it computes every shared
intermediate once (resample plans, interval frames, the leaderboard, the
head-to-head comparisons, the holdout divergence) and caches it. Each entry
of :data:`TABLES` is a :class:`TableSpec` whose ``build`` turns a context
into a polars frame, sorted and deterministic; :mod:`peira.report.render`
renders the frames as CSV, Markdown and LaTeX.

This module is the face: the session lives in :mod:`peira.report._context`,
the builders and the registry in :mod:`peira.report._tables`, and the titles
and captions, as data, in :mod:`peira.report._captions`; which tables and figures
apply to the data (one run, clean-only runs, no holdout…) in
:mod:`peira.report._applies`.

Publication mode (``ReportConfig(publication=True)``) restricts every table
to the public split; the holdout contributes aggregates only (the
``divergence`` table: per-run holdout ASR with its interval and the
holdout − public difference; split totals in the ``census``).
"""

from ..errors import UnknownTableError
from ._applies import QUIET, empty_reason, figure_reason, table_reason
from ._context import SEVERITY_ORDER, ReportConfig, ReportContext
from ._tables import (
    TABLES,
    TableSpec,
    build_table,
    table_caption,
    table_description,
    table_flag_note,
    table_note,
    table_title,
)

__all__ = [
    "QUIET",
    "SEVERITY_ORDER",
    "TABLES",
    "ReportConfig",
    "ReportContext",
    "TableSpec",
    "UnknownTableError",
    "build_table",
    "empty_reason",
    "figure_reason",
    "table_caption",
    "table_description",
    "table_flag_note",
    "table_note",
    "table_reason",
    "table_title",
]
