"""A worker process of :class:`peira.run.workers.ProcessCalls` (its :func:`main`).

It reads length-prefixed pickles on stdin — first the pickled adapter, then
one ``(call id, Request)`` per call — and writes one ``(kind, call id,
payload)`` per message on its original stdout: ``ready``
(or ``init-error`` with the reason) once the adapter is rebuilt, then
``done`` with ``(value, exception)`` for every call, in the order the calls
finish. Calls run on threads, one per call in flight, reused from call to
call. File descriptor 1 is pointed at stderr before the adapter is rebuilt,
so that nothing an adapter prints can corrupt the replies. End of input (the
runner closed the pipe, or died) ends the process at once; SIGINT is
ignored (a Ctrl-C reaches the runner, which stops its workers).
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import threading
from typing import Any

__all__ = ["main", "portable_error"]

HEADER = 4  # bytes of the little-endian length of each message


def frame(obj: Any) -> bytes:
    """One message: its pickle, length-prefixed."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(HEADER, "little") + data


def portable_error(exc: BaseException) -> BaseException:
    """``exc`` itself when it survives a pickle round trip with its type, else a stand-in.

    The stand-in has the same class name, message and ``retry_after``/``status``
    attributes, and is a :class:`~peira.errors.TransientError`,
    ``TimeoutError``, ``KeyboardInterrupt``, ``SystemExit`` or plain
    ``Exception`` as the original was, so that the runner treats it alike.
    """
    from ..errors import TransientError

    try:
        back = pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:
        pass
    base: type[BaseException] = Exception
    for kind in (TransientError, TimeoutError, KeyboardInterrupt, SystemExit):
        if isinstance(exc, kind):
            base = kind
            break
    return _StandIn(type(exc).__name__, base.__name__, str(exc),
                    getattr(exc, "retry_after", None), getattr(exc, "status", None))  # fmt: skip


class _StandIn(Exception):
    """An unpicklable exception of a worker, as sent to the runner (rebuilt by :meth:`build`)."""

    def __init__(self, name: str, base: str, text: str, retry_after: Any, status: Any) -> None:
        super().__init__(name, base, text, retry_after, status)

    def build(self) -> BaseException:
        from ..errors import TransientError

        name, base, text, retry_after, status = self.args
        bases = {
            "TransientError": TransientError,
            "TimeoutError": TimeoutError,
            "KeyboardInterrupt": KeyboardInterrupt,
            "SystemExit": SystemExit,
        }
        cls = type(name, (bases.get(base, Exception),), {})
        exc = cls(text)
        exc.retry_after = retry_after
        exc.status = status
        return exc


class _Replies:
    """The reply pipe, written whole message by whole message from any thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, obj: Any) -> None:
        data = memoryview(frame(obj))
        with self._lock:
            try:
                while data:
                    data = data[os.write(self._fd, data) :]
            except OSError:  # the runner is gone
                os._exit(0)


class _Requests:
    """The request pipe, read in large chunks and split into messages."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()
        self._pos = 0

    def next(self) -> Any:
        """The next message, or None at the end of input."""
        while True:
            buf, pos = self._buf, self._pos
            if len(buf) - pos >= HEADER:
                n = int.from_bytes(buf[pos : pos + HEADER], "little")
                if len(buf) - pos - HEADER >= n:
                    self._pos = pos + HEADER + n
                    return pickle.loads(buf[pos + HEADER : self._pos])
            del buf[:pos]
            self._pos = 0
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                return None
            buf += chunk


def _serve(adapter: Any, tasks: queue.SimpleQueue[Any], replies: _Replies, idle: list[int],
           lock: threading.Lock) -> None:  # fmt: skip
    while True:
        call_id, req = tasks.get()
        value: Any = None
        exc: BaseException | None = None
        try:
            value = adapter.decide(req)
        except BaseException as e:  # every failure goes back to the runner
            exc = portable_error(e)
        with lock:
            idle[0] += 1
        try:
            replies.send(("done", call_id, (value, exc)))
        except Exception as e:  # an answer that cannot be pickled
            what = f"the adapter's answer cannot be sent from its worker process: {e}"
            replies.send(("done", call_id, (None, portable_error(TypeError(what)))))


def main() -> None:
    """Serve calls until the end of input (module notes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = _Replies(os.dup(1))
    os.dup2(2, 1)  # an adapter's prints go to stderr, never into the replies
    requests = _Requests(0)
    init = requests.next()
    if init is None:
        return
    try:
        adapter = pickle.loads(init)
    except BaseException as exc:
        replies.send(("init-error", 0, f"{type(exc).__name__}: {exc}"))
        return
    replies.send(("ready", 0, None))
    tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
    lock = threading.Lock()
    idle = [0]
    while True:
        msg = requests.next()
        if msg is None:
            os._exit(0)  # the runner closed the pipe or died: calls in flight are abandoned
        with lock:
            spawn = idle[0] == 0
            if not spawn:
                idle[0] -= 1
        if spawn:
            threading.Thread(
                target=_serve, args=(adapter, tasks, replies, idle, lock), daemon=True
            ).start()
        tasks.put(msg)
