"""Discovery: the built-in adapters and those registered under ``peira.adapters``.

A package makes its adapter discoverable by ``peira adapters list`` with an
entry point in its ``pyproject.toml``::

    [project.entry-points."peira.adapters"]
    my-model = "my_package.adapters:MyModel"

The name is what the list shows; the value is the ``module:Class`` spec that
``peira run --adapter`` takes. Nothing is imported until asked for, so a
broken third-party adapter cannot break ``peira``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

__all__ = ["BUILTIN", "GROUP", "AdapterInfo", "available", "describe"]

GROUP = "peira.adapters"

BUILTIN: dict[str, str] = {
    "constant": "peira.adapters:Constant",
    "async-constant": "peira.adapters:AsyncConstant",
    "simulated": "peira.adapters:Simulated",
    "replay": "peira.adapters:Replay",
    "openai": "peira.adapters:OpenAICompatible",
    "inspect": "peira.adapters:Inspect",
    "subprocess": "peira.adapters:Subprocess",
}
"""Adapters that ship with Peira: name → ``module:Class``."""


@dataclass(frozen=True)
class AdapterInfo:
    """One discoverable adapter."""

    name: str
    spec: str
    source: str  # "builtin" or the distribution that registered it


def available() -> list[AdapterInfo]:
    """The built-in adapters, then those of the entry-point group, by name.

    A registered name that shadows a built-in is listed under its own
    distribution too (the built-in keeps the plain name).
    """
    out = [AdapterInfo(n, s, "builtin") for n, s in BUILTIN.items()]
    seen = set(BUILTIN)
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "unknown"
        name = ep.name if ep.name not in seen else f"{dist}:{ep.name}"
        seen.add(name)
        out.append(AdapterInfo(name, ep.value, dist))
    return out


def resolve(name_or_spec: str) -> str:
    """A listed name → its ``module:Class`` spec; a spec is returned as it is.

    >>> resolve("simulated"), resolve("pkg.mod:Cls")
    ('peira.adapters:Simulated', 'pkg.mod:Cls')
    """
    if ":" in name_or_spec and name_or_spec not in {i.name for i in available()}:
        return name_or_spec
    for info in available():
        if info.name == name_or_spec:
            return info.spec
    return name_or_spec


def describe(spec: str) -> dict[str, Any]:
    """The configuration an adapter takes: its constructor's keyword arguments.

    Returns ``{"spec", "summary", "arguments": [{"name", "default"}…]}``, or
    ``{"spec", "error"}`` when it cannot be imported (a missing extra, say).
    """
    from ..run import adapter_target

    try:
        obj = adapter_target(spec)
    except Exception as exc:  # an uninstalled extra or a broken plugin: say so
        return {"spec": spec, "error": str(exc)}
    doc = inspect.getdoc(obj) or ""
    summary = doc.strip().splitlines()[0] if doc.strip() else ""
    args: list[dict[str, Any]] = []
    target = obj if inspect.isclass(obj) or callable(obj) else None
    try:
        params = inspect.signature(target).parameters if target is not None else {}
    except (TypeError, ValueError):
        params = {}
    for p in params.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            args.append({"name": ("*" if p.kind == p.VAR_POSITIONAL else "**") + p.name})
            continue
        default = None if p.default is p.empty else p.default
        args.append({"name": p.name, "default": default, "required": p.default is p.empty})
    return {"spec": spec, "summary": summary, "arguments": args}
