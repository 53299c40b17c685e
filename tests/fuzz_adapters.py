"""Adapters for the fuzz and kill tests (``--adapter tests.fuzz_adapters:Name``)."""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from peira.run import Decision, Request

#: Calls made by :class:`Counting` in this process (the fuzz suite checks that a
#: command refused for a bad output made none).
CALLS = {"n": 0}


class Counting:
    """Always the first option; counts its calls."""

    name, version = "counting", "1"

    def decide(self, request: Request) -> Decision:
        CALLS["n"] += 1
        return Decision(decision=request.options[0], raw_text=request.options[0])


class Slow:
    """The first option after ``delay`` seconds (kill tests interrupt it mid-run)."""

    name, version = "slow", "1"

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = float(delay)

    def config(self) -> dict[str, Any]:
        return {}  # the delay does not change the answers: a resume may use another

    def decide(self, request: Request) -> Decision:
        time.sleep(self.delay)
        # deterministic in the request (no wall clock): resumed == uninterrupted
        pick = sum(map(ord, request.prompt + str(request.sample))) % len(request.options)
        return Decision(
            decision=request.options[pick], raw_text=request.options[pick], latency_ms=1.0
        )


class Held(Slow):
    """:class:`Slow`, but after ``after`` calls it touches ``<hold>.reached`` and each
    further call waits until the file ``hold`` exists (at most two minutes): a test
    acts on a run that is certainly mid-way, however loaded the machine."""

    name, version = "held", "1"

    def __init__(self, hold: str, after: int = 5, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.hold, self.after, self.n = Path(hold), int(after), 0
        self.lock = threading.Lock()

    def decide(self, request: Request) -> Decision:
        with self.lock:
            self.n += 1
            n = self.n
        if n > self.after:
            Path(f"{self.hold}.reached").touch()
            deadline = time.monotonic() + 120
            while not self.hold.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().decide(request)


_BAD: dict[str, dict[str, Any]] = {
    "surrogate": {"raw_text": "bad \ud800 text"},
    "surrogate-decision": {"decision": "\udcff"},
    "huge-tokens": {"tokens_in": 10**30},
    "negative-tokens": {"tokens_out": -5},
    "float-tokens": {"tokens_in": 3.5},
    "inf-latency": {"latency_ms": math.inf},
    "nan-latency": {"latency_ms": math.nan},
    "negative-latency": {"latency_ms": -1.0},
    "huge-latency": {"latency_ms": 1e308 * 10},
    "inf-cost": {"cost_usd": math.inf},
    "negative-cost": {"cost_usd": -0.5},
    "nan-score": {"score": math.nan},
    "huge-score": {"score": 10**400},
    "nan-confidence": {"confidence": math.nan},
    "bytes-raw": {"raw_text": b"bytes"},
    "nul-raw": {"raw_text": "a\x00b"},
    "long-raw": {"raw_text": "x" * 2_000_000},
    "object-decision": {"decision": object()},
}


class Hostile:
    """Answers well, except every ``every``-th call returns the bad output ``mode``."""

    name, version = "hostile", "1"

    def __init__(self, mode: str = "surrogate", every: int = 3) -> None:
        if mode not in _BAD and mode not in ("raise", "exit", "none", "string"):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode, self.every = mode, int(every)
        self.n = 0

    def decide(self, request: Request) -> Any:
        self.n += 1
        if self.n % self.every:
            return Decision(decision=request.options[0])
        if self.mode == "raise":
            raise RuntimeError("adapter blew up")
        if self.mode == "none":
            return None
        if self.mode == "string":
            return "approve"
        fields: dict[str, Any] = {"decision": request.options[0], **_BAD[self.mode]}
        return Decision(**fields)


class NoDecide:
    """Lacks ``decide``."""

    name, version = "nodecide", "1"


class BadInit:
    """Its constructor fails."""

    name, version = "badinit", "1"

    def __init__(self) -> None:
        raise RuntimeError("cannot connect to the model server")

    def decide(self, request: Request) -> Decision:  # pragma: no cover - never built
        return Decision(decision=request.options[0])


class TakesArgs:
    """Needs an argument (``--adapter-arg`` missing or misspelt)."""

    name, version = "takesargs", "1"

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def decide(self, request: Request) -> Decision:
        return Decision(decision=request.options[0])


class NoName:
    """Lacks ``name``/``version``."""

    def decide(self, request: Request) -> Decision:
        return Decision(decision=request.options[0])


not_a_class = 42


def pid() -> int:  # pragma: no cover - helper for debugging kill tests
    return os.getpid()
