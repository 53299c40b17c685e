"""Every table and figure from one command (``peira tables``, ``report``, ``publish``).

- :mod:`.tables` — :class:`ReportContext` (data, configuration, shared
  results) and the registry :data:`TABLES` of named tables;
- :mod:`.render` — CSV, Markdown and LaTeX renderers (deterministic number
  formatting, escaping);
- :mod:`.figures` — the registry :data:`FIGURES` of matplotlib figures,
  byte-identical from run to run;
- :mod:`.html` — one self-contained HTML page;
- :mod:`.build` — orchestration: build in memory, manifest, atomic writes,
  and the publication guard.
"""

from .build import (
    MANIFEST,
    OutputExistsError,
    PublicationLeakError,
    ReportOutputs,
    build_outputs,
    check_publication,
    publish,
    report_html,
    write_report,
    write_tables,
    write_tree,
)
from .figures import FIGURES, FigureSpec, render_figure
from .render import format_cell, latex_escape, markdown_escape, to_csv, to_latex, to_markdown
from .tables import (
    TABLES,
    ReportConfig,
    ReportContext,
    TableSpec,
    UnknownTableError,
    build_table,
    table_caption,
)

__all__ = [
    "FIGURES",
    "MANIFEST",
    "TABLES",
    "FigureSpec",
    "OutputExistsError",
    "PublicationLeakError",
    "ReportConfig",
    "ReportContext",
    "ReportOutputs",
    "TableSpec",
    "UnknownTableError",
    "build_outputs",
    "build_table",
    "check_publication",
    "format_cell",
    "latex_escape",
    "markdown_escape",
    "publish",
    "render_figure",
    "report_html",
    "table_caption",
    "to_csv",
    "to_latex",
    "to_markdown",
    "write_report",
    "write_tables",
    "write_tree",
]
