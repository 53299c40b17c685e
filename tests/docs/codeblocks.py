"""Running the code blocks of the README and of the documentation pages.

The convention (README.md and every page under docs/): a fenced block tagged
``bash`` is run, all ``bash`` blocks of a file in order in one ``bash`` process
(``set -euo pipefail``) from the root of a fresh clone's layout; a block tagged
``python`` is run after them, each in a fresh interpreter of the same
environment, from the same directory; any other block (``console``, ``text``,
``toml``, none) is shown, not run. See tests/docs/test_readme.py and
tests/docs/test_pages.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
# a page's fences may be indented (a block inside a list item): the closing fence
# has the opening fence's indentation
_PAGE_FENCE = re.compile(r"^([ \t]*)```([\w+-]*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)


def blocks(text: str) -> list[tuple[str, int, str]]:
    """Every fenced block at the start of a line: (language tag, line of its fence, body)."""
    return [
        (m.group(1), text.count("\n", 0, m.start()) + 1, m.group(2)) for m in _FENCE.finditer(text)
    ]


def page_blocks(text: str) -> list[tuple[str, int, str]]:
    """Every fenced block, indented ones too (their body dedented): (tag, line, body)."""
    return [
        (m.group(2), text.count("\n", 0, m.start()) + 1, textwrap.dedent(m.group(3)))
        for m in _PAGE_FENCE.finditer(text)
    ]


def workspace(tmp: Path) -> Path:
    """A fresh clone's layout: data/ copied, the rest linked, .venv → this environment."""
    work = tmp / "clone"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (".git", ".venv", "out", "data") or entry.name.endswith(".egg-info"):
            continue
        if entry.name.startswith(".") and entry.name not in (".ci", ".gitignore"):
            continue
        (work / entry.name).symlink_to(entry)
    shutil.copytree(
        ROOT / "data", work / "data", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    (work / ".venv").symlink_to(Path(sys.prefix))
    return work


def env() -> dict[str, str]:
    """The user's environment: this one's variables, less Peira's, the virtual
    environment's and PYTHONPATH, and its ``bin`` off PATH (a block activates it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PEIRA_", "VIRTUAL_ENV"))}
    # the shell PATH without this environment: the tour must activate it itself
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bindir)
    env["COLUMNS"] = "100"
    env.pop("PYTHONPATH", None)
    return env


#: A line that installs an extra, as the README and the pages write it.
_EXTRA = re.compile(r"^(\s*)pip install -e '\.\[([\w,-]+)\]'(.*)$", re.M)


def extra_installed(extra: str) -> bool:
    """Every distribution the extra ``extra`` of pyproject.toml asks for is installed here."""
    import tomllib
    from importlib import metadata

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    wanted = [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0] for r in extras[extra]]
    for name in wanted:
        if name == "peira":  # an extra naming others: theirs are checked below
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return False
    nested = [x for r in extras[extra] if r.startswith("peira[") for x in r[6:-1].split(",")]
    return all(extra_installed(x) for x in nested)


def with_extras(body: str) -> str:
    """``body`` with each ``pip install -e '.[X]'`` line made to install the extra into
    this environment from the repository (a workspace is a temporary copy), or, when
    the extra is installed already (the development environment), left out: the line
    stays true for a user, and the tour does not reinstall the package under a run."""

    def one(m: re.Match[str]) -> str:
        indent, names, rest = m.group(1), m.group(2), m.group(3)
        if all(extra_installed(x) for x in names.split(",")):
            return f"{indent}: installed already: pip install -e '.[{names}]'{rest}"
        target = f"{ROOT}[{names}]"
        return f"{indent}python -m pip install --quiet -e '{target}'{rest}"

    return _EXTRA.sub(one, body)


def run_shell(
    found: list[tuple[int, str]], work: Path, label: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """The ``bash`` blocks (line, body) in one ``bash -euo pipefail`` in ``work``, traced:
    each traced line starts with ``+ LABEL: `` (the failing one is the last). A line
    installing an extra runs as :func:`with_extras` says."""
    script = ["set -euo pipefail", f"export PS4='+ {label}: '"]
    for line, body in found:
        script.append(f": {label} line {line}")
        script.append("set -x")
        script.append(with_extras(body))
        script.append("{ set +x; } 2>/dev/null")
    return subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def shell_failure(proc: subprocess.CompletedProcess[str], label: str) -> str:
    trace = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"+ {label}: ")]
    return (
        f"{label} line failed (exit {proc.returncode}): {trace[-1] if trace else '?'}\n"
        f"stderr (end):\n{proc.stderr[-3000:]}\nstdout (end):\n{proc.stdout[-2000:]}"
    )


def run_python(body: str, work: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """One ``python`` block in a fresh interpreter of this environment, in ``work``."""
    return subprocess.run(
        [str(work / ".venv" / "bin" / "python"), "-c", body],
        cwd=work,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
