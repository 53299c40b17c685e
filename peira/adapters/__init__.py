"""Adapters: what :func:`peira.run.run` calls to get a model's decisions.

Offline doubles (no model is called; :mod:`peira.adapters.offline`):

:class:`Constant`, :class:`AsyncConstant`
    Always the same option position, instantly (runner benchmarks).
:class:`Simulated`
    A simulated decision model answering in the synthetic raw-text grammar.
:class:`Replay`
    Replays an existing response log row for row.

Real models (each imports its client library on first use only):

:class:`OpenAICompatible` (:mod:`peira.adapters.openai_compat`, extra ``peira[openai]``)
    The Chat Completions API of any OpenAI-compatible server (OpenAI, vLLM,
    SGLang, Ollama, llama.cpp, OpenRouter, gateways) through the official
    ``openai`` SDK, with structured output and a plain-text fallback.
:class:`Inspect` (:mod:`peira.adapters.inspect_bridge`, extra ``peira[inspect]``)
    Every provider Inspect AI supports, through ``inspect_ai.model.get_model``.
:class:`Subprocess` (:mod:`peira.adapters.subprocess`)
    Any program that reads one JSON request per line on stdin and writes one
    JSON decision per line on stdout.

Third-party adapters register under the entry-point group ``peira.adapters``
(see :func:`available`); ``peira adapters check module:Class`` runs the
conformance kit :func:`peira.testing.check_adapter` on one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._common import ProviderError, RetryableError
from .offline import (
    ARCHETYPES,
    AsyncConstant,
    Constant,
    Replay,
    SimParams,
    Simulated,
    content_key,
)
from .registry import AdapterInfo, available

if TYPE_CHECKING:  # imported lazily at run time (optional client libraries)
    from .inspect_bridge import Inspect
    from .openai_compat import OpenAICompatible
    from .subprocess import Subprocess

__all__ = [
    "ARCHETYPES",
    "AdapterInfo",
    "AsyncConstant",
    "Constant",
    "Inspect",
    "OpenAICompatible",
    "ProviderError",
    "Replay",
    "RetryableError",
    "SimParams",
    "Simulated",
    "Subprocess",
    "available",
    "content_key",
]

# The offline doubles keep their public home: a checkpoint manifest records
# ``peira.adapters:Simulated``, whichever file defines it.
for _cls in (AsyncConstant, Constant, Replay, SimParams, Simulated):
    _cls.__module__ = __name__

_LAZY = {
    "OpenAICompatible": ".openai_compat",
    "Inspect": ".inspect_bridge",
    "Subprocess": ".subprocess",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
