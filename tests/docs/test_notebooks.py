"""The notebooks execute top to bottom, use the flat API and show their figures.

Their prose states what each result means; the ``assert`` lines beside it check
those statements against the results, so the text cannot drift from the data.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert images, "every notebook shows at least one figure"
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert ("import peira\n" in source and "peira.pairs(" in source) or "peira.rescore(" in source
    assert "from peira.pairs import" not in source  # the flat API, not submodule imports
    prose = [c for c in nb.cells if c.cell_type == "markdown"]
    assert len(prose) >= 4
