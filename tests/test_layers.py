"""The layers of the package, held by its import graph (pure ``ast``; no import, no subprocess).

Every ``import`` and ``from … import`` statement under ``peira/`` counts,
wherever it stands: at module level, inside a function (lazy) or under
``if TYPE_CHECKING:``. From them this test builds the graph of peira modules
and checks four things:

(a) imports point down :data:`LAYERS` (a room imports only rooms of lower layers,
    and itself);
(b) no cycle among peira modules;
(c) no private name (``_x``, a module or an attribute) is reached from outside
    the module or package that owns it (``peira._pairs`` is private to
    ``peira``, so every peira module may use it; a ``_helper`` of
    ``peira.io`` is private to ``peira.io``);
(d) every name in every peira module's ``__all__`` is defined there
    (scikit-learn's ``test_import_all_consistency``).

A *room* is a top-level module or subpackage of ``peira`` (``metrics``,
``_pairs``, ``cli`` …); ``peira/__init__.py``, the face, is the room ``peira``.
docs/extending.md#the-layers describes the same table.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "peira"

#: The layer table, bottom to top. A room may import the rooms of the layers
#: below its own (and itself), never a room of its own layer or above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_version", "_pandera"),  # the error tree, the version, pandera loader
    (
        "_registry",
        "_frames",
        "_writes",
        "_json",
        "_redaction",
        "canonical",
    ),  # registries, frames, writes, JSON, redaction
    ("schema",),  # the data model: table schemas and their checks
    ("io", "integrity"),  # reading and writing tables; manifests and hashes
    ("_pairs", "importers", "synth"),  # the scoring rule; log importers; synthetic benchmarks
    (
        "metrics",
        "parse",
        "bounds",
    ),  # metric expressions and tables; raw text to decisions; completing undetermined verdicts
    ("engine", "bootstrap", "rescoring"),  # engines; intervals; re-parse and re-score
    (
        "ranking",
        "holdout",
        "published",
        "plot",
        "planning",
        "changes",
        "panel_verdicts",
    ),  # ranking; holdout; published; plots; plans; what changed; verdicts of a judge panel
    (
        "run",
        "report",
        "release_gate",
    ),  # running a model; the report and its tables; the release gate
    ("adapters", "seal", "testing"),  # model adapters; sealed releases; test helpers
    ("api",),  # the flat API
    ("peira",),  # the face (peira/__init__.py)
    ("cli",),  # the command line
    ("__main__",),  # python -m peira
)

#: Edges (importer room, imported room) that point up, each pending a rewrite.
PENDING_UPWARD: dict[tuple[str, str], str] = {}

#: Cycles among modules, each pending a rewrite.
PENDING_CYCLES: dict[frozenset[str], str] = {}

#: Modules allowed to reach private names of other modules, each pending a rewrite.
PENDING_PRIVATE: dict[str, str] = {}


@dataclass
class Module:
    """One peira module: its dotted name, whether it is a package, what it imports."""

    name: str
    path: Path
    is_package: bool
    imports: set[str] = field(default_factory=set)
    reaches: set[str] = field(default_factory=set)  # dotted targets, names and attributes


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


class _ImportVisitor(ast.NodeVisitor):
    """Collects every peira target an import names, and attributes read off imported modules."""

    def __init__(self, module: Module, known: set[str]) -> None:
        self.module, self.known = module, known
        self.aliases: dict[str, str] = {}

    def _base(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.module.name.split(".")
        if not self.module.is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join([*parts, *([node.module] if node.module else [])])

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "peira" or alias.name.startswith("peira."):
                self.module.reaches.add(alias.name)
                self.aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._base(node)
        if base != "peira" and not base.startswith("peira."):
            return
        for alias in node.names:
            target = f"{base}.{alias.name}"
            self.module.reaches.add(target)
            if target in self.known:
                self.aliases[alias.asname or alias.name] = target

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.aliases:
            self.module.reaches.add(f"{self.aliases[node.value.id]}.{node.attr}")
        self.generic_visit(node)


def _owner(target: str, known: set[str]) -> str:
    """The deepest peira module a dotted target lies in."""
    while target not in known:
        target = target.rsplit(".", 1)[0]
    return target


@cache
def graph() -> dict[str, Module]:
    """Every peira module with the modules it imports (module-level, lazy, TYPE_CHECKING)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        name, is_package = _module_name(path)
        modules[name] = Module(name, path, is_package)
    known = set(modules)
    for module in modules.values():
        _ImportVisitor(module, known).visit(ast.parse(module.path.read_text(encoding="utf-8")))
        module.imports = {_owner(t, known) for t in module.reaches} - {module.name}
    return modules


def room(module: str) -> str:
    """The top-level module or subpackage a module belongs to (``peira`` for the face)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "peira"


def _layer_of() -> dict[str, int]:
    return {r: i for i, rooms in enumerate(LAYERS) for r in rooms}


def _pending(module: str, table: dict[str, str]) -> bool:
    return any(module == m or module.startswith(m + ".") for m in table)


def _cycles(modules: dict[str, Module]) -> Iterator[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(sorted(modules[start].imports)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(modules[w].imports))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    yield frozenset(component)


def test_every_room_is_in_the_layer_table_once() -> None:
    rooms = [r for layer in LAYERS for r in layer]
    assert len(rooms) == len(set(rooms))
    assert {room(m) for m in graph()} == set(rooms)


def test_imports_point_down_the_layers() -> None:
    layer = _layer_of()
    upward = sorted(
        (m.name, target)
        for m in graph().values()
        for target in m.imports
        if room(target) != room(m.name)
        and layer[room(target)] >= layer[room(m.name)]
        and (room(m.name), room(target)) not in PENDING_UPWARD
    )
    assert upward == [], "imports that point up the layer table (LAYERS)"


def test_no_import_cycle() -> None:
    cycles = [sorted(c) for c in _cycles(graph()) if c not in PENDING_CYCLES]
    assert cycles == [], "import cycles among peira modules"


def _private_reaches(module: Module) -> list[str]:
    """The private targets a module reaches outside their owner."""
    known = set(graph())
    reaches = []
    for target in sorted(module.reaches):
        parts = target.split(".")
        private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
        if not private:
            continue
        owner = ".".join(parts[: private[0]])
        inside = module.name == owner or module.name.startswith(owner + ".")
        if not inside and _owner(target, known) != module.name:
            reaches.append(f"{module.name} -> {target}")
    return reaches


def test_no_private_name_crosses_its_owner() -> None:
    reaches = [
        r
        for m in graph().values()
        if not _pending(m.name, PENDING_PRIVATE)
        for r in _private_reaches(m)
    ]
    assert reaches == [], "private names reached from outside their module or package"


def test_pending_entries_are_still_needed() -> None:
    """An allow-list entry whose rewrite has landed must go."""
    modules = graph()
    assert all(set(c) <= set(modules) for c in PENDING_CYCLES)
    cycles = set(_cycles(modules))
    assert set(PENDING_CYCLES) <= cycles
    edges = {(room(m.name), room(t)) for m in modules.values() for t in m.imports}
    assert set(PENDING_UPWARD) <= edges
    for pending in PENDING_PRIVATE:
        assert any(
            _private_reaches(m) for m in modules.values() if _pending(m.name, {pending: ""})
        ), pending


def _all_names(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                return list(ast.literal_eval(node.value))
    return None


@cache
def _bindings(module: str) -> dict[str, str | None]:
    """Names a module binds: ``None`` when defined there, else the peira target imported."""
    m = graph()[module]
    visitor = _ImportVisitor(Module(m.name, m.path, m.is_package), set(graph()))
    names: dict[str, str | None] = {}
    for node in ast.walk(ast.parse(m.path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = None
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[node.id] = None
        elif isinstance(node, ast.Import):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, ast.ImportFrom):
            base = visitor._base(node)
            peira = base == "peira" or base.startswith("peira.")
            for a in node.names:
                names.setdefault(a.asname or a.name, f"{base}.{a.name}" if peira else None)
    return names


def _exists(target: str, depth: int = 0) -> bool:
    """Whether a dotted peira target (``peira.metrics.ratio_table``) is defined somewhere."""
    modules = graph()
    if target in modules:
        return True
    module, _, name = target.rpartition(".")
    if module not in modules or depth > 10:
        return False
    bound = _bindings(module)
    if name not in bound:
        return False
    source = bound[name]
    return source is None or _exists(source, depth + 1)


def test_every_name_in_all_exists() -> None:
    """Every ``__all__`` entry is defined in its module, by an import that resolves or by a
    submodule (a lazy face's ``TYPE_CHECKING`` imports name where each entry lives)."""
    missing = []
    for m in graph().values():
        names = _all_names(ast.parse(m.path.read_text(encoding="utf-8")))
        if names is None:
            continue
        assert len(names) == len(set(names)), f"{m.name}.__all__ repeats a name"
        missing += [f"{m.name}.{n}" for n in names if not _exists(f"{m.name}.{n}")]
    assert missing == [], "names in __all__ that the module does not define"


def test_docs_describe_the_same_layers() -> None:
    """docs/extending.md#the-layers lists the rooms of :data:`LAYERS`, layer by layer."""
    text = (ROOT.parent / "docs" / "extending.md").read_text(encoding="utf-8")
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    documented = tuple(
        tuple(name.strip().strip("`") for name in cells[2].split(","))
        for cells in rows
        if cells[1].strip().isdigit()
    )
    assert documented == LAYERS
