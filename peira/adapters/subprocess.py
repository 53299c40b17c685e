"""``peira.adapters:Subprocess``: any program, in any language, as a model.

The program reads one JSON request per line on stdin and writes one JSON
answer per line on stdout, in order::

    → {"variant_id": "v-3f…", "primitive": "choice", "prompt": "…",
       "options": ["approve", "deny"], "input": "{…}", "sample": 0}
    ← {"decision": "deny", "confidence": 0.8}

An answer holds the fields of :class:`~peira.run.Decision` — ``decision``,
``abstained`` (or ``abstain``), ``refusal_reason``, ``score``,
``confidence``, ``raw_text``, ``tokens_in``, ``tokens_out``, ``cost_usd``,
``latency_ms``, ``error`` — or only ``raw_text``, which is then read as a
model's text (a JSON object directly, other text through
:mod:`peira.parse`). Unknown keys are ignored. An answer may echo
``variant_id`` and ``sample``; when it does they must match the request.
stderr is the program's own (its last lines are quoted in errors, with
secret values redacted: :mod:`peira._redaction`).

Failures become malformed rows with their reasons, and the run goes on:

- a line that is not a JSON object: ``subprocess protocol error: …`` (the
  line is kept as ``raw_text``);
- a child that exits (crashes) or closes stdout: ``subprocess exited with
  code N (stderr: …); restarted``;
- a child silent for ``timeout`` seconds: it is killed —
  ``subprocess silent for 30 s; killed and restarted``.

A crashed or killed child is restarted for the next request. ``processes``
children run side by side (give ``peira run`` the same ``--concurrency``);
each answers one request at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import shlex
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from typing import IO, Any

from .._redaction import Redactor
from ..errors import PeiraError
from ..run.protocol import Decision, Request
from ._common import read_answer

__all__ = ["Subprocess", "SubprocessError"]

_FIELDS = tuple(f.name for f in dataclasses.fields(Decision))
_ANSWERS = ("decision", "abstained", "abstain", "refusal_reason", "error")


class SubprocessError(PeiraError, RuntimeError):
    """The child crashed or fell silent (the row is malformed with this reason)."""


class _Child:
    """One running child with reader threads for its stdout and stderr."""

    def __init__(self, argv: Sequence[str], cwd: str | None, env: dict[str, str] | None) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
        self.answered = False  # its first answer may also wait for its start-up
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=5)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=target, args=(stream,), daemon=True)
            for target, stream in (
                (self._read_out, self.proc.stdout),
                (self._read_err, self.proc.stderr),
            )
        ]
        for t in self._readers:
            t.start()

    def _read_out(self, stream: IO[str]) -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                self.lines.put(line)
        self.lines.put(None)  # EOF

    def _read_err(self, stream: IO[str]) -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                self.stderr.append(line.rstrip("\n")[:300])

    def tail(self) -> str:
        """The last stderr lines; of an exited child, all it wrote (up to 1 s to read)."""
        if self.proc.poll() is not None:
            self._readers[1].join(1.0)
        return " | ".join(self.stderr)

    def stop(self) -> int | None:
        """Kill the child (if alive) and reap it; its exit code."""
        with contextlib.suppress(OSError):
            if self.proc.poll() is None:
                self.proc.kill()
        try:
            rc = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            rc = None
        for s in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                if s is not None:
                    s.close()
        return rc


def _stop_all(children: list[_Child | None]) -> None:
    for c in children:
        if c is not None:
            c.stop()


class Subprocess:
    """A model that is a program speaking JSON lines (module notes). Sync; thread-safe.

    Parameters
    ----------
    command
        The program and its arguments: a list, or a string split like a shell
        would (``"python my_model.py --temperature 0"``).
    processes
        Children run side by side (default 1).
    timeout
        Seconds a child may take to answer one request (default 30).
    startup_timeout
        Extra seconds a freshly started child may take for its first answer
        (loading a model; default 60).
    cwd, env
        Working directory and extra environment variables of the children
        (added to this process's environment).
    parser
        The :mod:`peira.parse` parser for answers given as ``raw_text`` only.
    name, version
        The log's ``model`` and ``model_version`` (default: the program's
        file name and ``"1"``).
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        processes: int = 1,
        timeout: float = 30.0,
        startup_timeout: float = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        parser: Any = "auto",
        name: str | None = None,
        version: str = "1",
    ) -> None:
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise PeiraError("Subprocess: command is empty")
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise PeiraError(f"Subprocess: processes must be an integer >= 1, got {processes!r}")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise PeiraError(f"Subprocess: timeout must be > 0 seconds, got {timeout!r}")
        self.argv = argv
        self.processes = processes
        self.timeout = float(timeout)
        if not (isinstance(startup_timeout, int | float) and startup_timeout >= 0):
            raise PeiraError(f"Subprocess: startup_timeout must be >= 0 s, got {startup_timeout!r}")
        self.startup_timeout = float(startup_timeout)
        self.cwd = cwd
        self.env_extra = {str(k): str(v) for k, v in (env or {}).items()}
        self._redactor = Redactor((), self.env_extra.values())  # for direct calls too
        self.parser = parser
        self.name = name or os.path.basename(argv[-1] if len(argv) > 1 else argv[0]) or "subprocess"
        self.version = version
        self.restarts = 0
        self._slots: list[_Child | None] = [None] * processes
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(processes):
            self._free.put(i)
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_all, self._slots)

    @property
    def secret_values(self) -> tuple[str, ...]:
        """The extra variables' values: redacted from every text a run writes
        (:mod:`peira._redaction`)."""
        return tuple(self.env_extra.values())

    def config(self) -> dict[str, Any]:
        """What determines the answers: the command, its directory, extra variables' names."""
        return {
            "command": self.argv,
            "cwd": self.cwd,
            "env": sorted(self.env_extra),  # names only: values may be credentials
            "parser": self.parser,
            "name": self.name,
            "version": self.version,
        }

    def close(self) -> None:
        """Stop every child (they are started again on the next request)."""
        with self._lock:
            for i, c in enumerate(self._slots):
                if c is not None:
                    c.stop()
                    self._slots[i] = None

    def _child(self, i: int) -> _Child:
        c = self._slots[i]
        if c is None or c.proc.poll() is not None:
            if c is not None:
                c.stop()
                self.restarts += 1
            env = {**os.environ, **self.env_extra} if self.env_extra else None
            try:
                c = _Child(self.argv, self.cwd, env)
            except OSError as exc:
                raise SubprocessError(f"cannot start {self.argv[0]!r}: {exc}") from exc
            self._slots[i] = c
        return c

    def decide(self, request: Request) -> Decision:
        """Send the request to a free child; read its answer line."""
        i = self._free.get()
        try:
            return self._ask(i, request)
        finally:
            self._free.put(i)

    def _ask(self, i: int, request: Request) -> Decision:
        child = self._child(i)
        stale = 0
        while True:  # lines left over from an earlier answer are not this one's
            try:
                line = child.lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                return self._died(i, child, "closed its stdout")
            stale += 1
        msg = {
            "variant_id": request.variant_id,
            "primitive": request.primitive,
            "prompt": request.prompt,
            "options": list(request.options),
            "input": request.input,
            "sample": request.sample,
        }
        t0 = time.perf_counter()
        try:
            assert child.proc.stdin is not None
            child.proc.stdin.write(json.dumps(msg, ensure_ascii=False) + "\n")
            child.proc.stdin.flush()
        except (OSError, ValueError):
            return self._died(i, child, "could not be written to")
        wait = self.timeout + (0.0 if child.answered else self.startup_timeout)
        try:
            got = child.lines.get(timeout=wait)
        except queue.Empty:
            self._slots[i] = None
            child.stop()
            self.restarts += 1
            raise SubprocessError(
                f"subprocess silent for {wait:g} s; killed and restarted"
            ) from None
        if got is None:
            return self._died(i, child, "closed its stdout")
        child.answered = True
        latency = (time.perf_counter() - t0) * 1000.0
        return self._read(got.rstrip("\r\n"), request, latency)

    def _died(self, i: int, child: _Child, what: str) -> Decision:
        try:
            rc = child.proc.wait(2)
        except subprocess.TimeoutExpired:
            rc = None
        tail = self._redactor.text(child.tail())
        self._slots[i] = None
        child.stop()
        self.restarts += 1
        how = f"exited with code {rc}" if rc is not None else what
        raise SubprocessError(f"subprocess {how}{f' (stderr: {tail})' if tail else ''}; restarted")

    def _read(self, line: str, request: Request, latency_ms: float) -> Decision:
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            shown = line if len(line) <= 80 else line[:77] + "..."
            return Decision(
                raw_text=line,
                latency_ms=latency_ms,
                error=f"subprocess protocol error: answer is not a JSON object: {shown!r}",
            )
        echo = [
            k
            for k, want in (("variant_id", request.variant_id), ("sample", request.sample))
            if k in obj and obj[k] != want
        ]
        if echo:
            return Decision(
                raw_text=line,
                latency_ms=latency_ms,
                error=f"subprocess protocol error: answer is for another request ({', '.join(echo)} differ)",
            )
        if "abstain" in obj and "abstained" not in obj:
            obj["abstained"] = obj["abstain"]
        fields = {k: obj[k] for k in _FIELDS if k in obj}
        fields.setdefault("latency_ms", latency_ms)
        if not any(k in obj for k in _ANSWERS) and isinstance(obj.get("raw_text"), str):
            from dataclasses import replace

            d = read_answer(obj["raw_text"], request, parser=self.parser)
            usage = {
                k: fields[k]
                for k in ("latency_ms", "tokens_in", "tokens_out", "cost_usd")
                if k in fields
            }
            return replace(d, **usage)
        fields.setdefault("abstained", False)
        fields.setdefault("raw_text", line)  # the answer line: re-parsed alike by peira.parse
        try:
            return Decision(**fields)
        except TypeError as exc:  # pragma: no cover - _FIELDS are Decision's fields
            return Decision(raw_text=line, error=f"subprocess protocol error: {exc}")


Subprocess.__module__ = "peira.adapters"
