"""LaTeX tables compile: ``tables.tex`` of ``peira tables`` in a minimal document, run
through ``pdflatex`` (Debian's ``texlive-latex-base`` and ``texlive-latex-recommended``,
for ``booktabs``; ``.ci/run`` installs them).

Without ``pdflatex`` the test is skipped on a developer's machine and fails under CI
(``CI`` set). The table data carry every LaTeX special (``&``, ``%``, ``$``, ``_``) in
run ids and families, so escaping is compiled, not only compared as text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from peira.report import TABLES, build_outputs, write_tree
from tests.report.test_report import context

# the fixture benchmark is small: its intervals rest on few clusters (tests/report/test_report.py)
pytestmark = pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")

DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs}
\begin{document}
\input{tables.tex}
\end{document}
"""


def _pdflatex() -> str:
    exe = shutil.which("pdflatex")
    if exe is None:
        msg = "pdflatex not found (apt-get install texlive-latex-base texlive-latex-recommended)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def test_tables_tex_compiles_with_pdflatex(tmp_path: Path) -> None:
    exe = _pdflatex()
    outputs = build_outputs(context(b=200), figures=False)
    out = write_tree(outputs.files, tmp_path / "out")
    inputs = (out / "tables.tex").read_text(encoding="utf-8")
    # the bench has no published figures and too few scored answers for calibration
    left = outputs.not_applicable["tables"]
    assert sorted(left) == ["calibration", "published"]
    written = [n for n in TABLES if n not in left]
    assert re.findall(r"\\input\{tables/(\w+)\.tex\}", inputs) == written
    floats = [(out / "tables" / f"{n}.tex").read_text(encoding="utf-8") for n in written]
    for name, tex in zip(written, floats, strict=True):
        assert tex.startswith("\\begin{table}[htbp]\n\\centering\n\\caption{"), name
        assert f"\\label{{tab:peira-{name}}}" in tex and tex.endswith("\\end{table}\n")
        assert "\\toprule" in tex and "\\bottomrule" in tex
    lb = floats[written.index("leaderboard")]
    assert "robustness [lo, hi]" in lb and "\\textbf{1}" in lb and "B=200" in lb
    (out / "main.tex").write_text(DOCUMENT, encoding="utf-8")
    env = {**os.environ, "TEXMFOUTPUT": str(out), "openin_any": "p", "openout_any": "p"}
    proc = subprocess.run(
        [exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "main.tex"],
        cwd=out, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = (out / "main.log").read_text(encoding="latin-1")
    assert proc.returncode == 0, log[-3000:]
    assert (out / "main.pdf").stat().st_size > 0
    assert "Undefined control sequence" not in log and "Missing $ inserted" not in log
    # one caption per table, every one numbered in order
    assert len(re.findall(r"\\caption\{", "".join(floats))) == len(written)
