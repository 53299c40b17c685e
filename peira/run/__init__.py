"""Running a decision model over a benchmark: the adapter protocol and the runner.

An *adapter* wraps a model: an object with ``name``, ``version`` and
``decide(request) -> Decision`` (sync or ``async``). It receives a
:class:`Request` — the blinded variant and the sample index, nothing that
names a case, arm, split or gold label — and :func:`run` turns every call,
failures included, into one row of a standard response log (docs/spec/data-model.md#responses).

This package is a face; the parts live in

- :mod:`~peira.run.protocol`: :class:`Request`, :class:`Decision`,
  :class:`Adapter` and the run errors;
- :mod:`~peira.run.loading`: ``module:Class`` specs → adapters, and the
  identity a checkpoint records;
- :mod:`~peira.run.rows`: requests in dispatch order; an adapter's output →
  a response row with its malformed reason;
- :mod:`~peira.run.checkpoint`: ``LOG.parts/`` and resuming;
- :mod:`~peira.run.progress`: the progress line;
- :mod:`~peira.run.runner`: dispatch (concurrency, timeouts, retries,
  signals) and :func:`run`.
"""

from __future__ import annotations

from .checkpoint import parts_dir
from .loading import accepts_argument, adapter_identity, adapter_target, load_adapter
from .protocol import (
    REQUEST_FIELDS,
    RESPONSE_KEY,
    Adapter,
    AdapterError,
    BudgetExceeded,
    Decision,
    Request,
    ResumeError,
    RunError,
    RunInterrupted,
    TransientError,
)
from .rows import requests_for
from .runner import RunOptions, RunResult, run, run_async
from .spend import RunPlan, plan_run

__all__ = [
    "REQUEST_FIELDS",
    "RESPONSE_KEY",
    "Adapter",
    "AdapterError",
    "BudgetExceeded",
    "Decision",
    "Request",
    "ResumeError",
    "RunError",
    "RunInterrupted",
    "RunOptions",
    "RunPlan",
    "RunResult",
    "TransientError",
    "accepts_argument",
    "adapter_identity",
    "adapter_target",
    "load_adapter",
    "parts_dir",
    "plan_run",
    "requests_for",
    "run",
    "run_async",
]
