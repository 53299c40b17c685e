"""A Chat Completions server on loopback, for testing adapters against real HTTP.

:class:`ChatServer` speaks enough of the OpenAI Chat Completions API
(``POST /v1/chat/completions``) for any client — the official ``openai``
SDK included — to be tested end to end without a network: it listens on
``127.0.0.1`` only, on a free port, in a background thread (or, with
``python -m peira.testing.chat_server``, in a process of its own).

Its default *model* is deterministic: it reads the options from the
request's JSON schema (``decision`` enum) or from the user message's
``Options:`` list, and picks one by a hash of the user message and the
seed, with a confidence from the same hash. With a schema it answers JSON,
without one plain text (``Decision: …`` / ``Confidence: …``).

Faults are scripted: ``script`` is a callable ``(body, n) -> Reply | None``
(``n`` counts requests from 0; None: the default answer) and ``faults`` a
queue of :class:`Reply` objects served first, one per request, in order.
A :class:`Reply` can be an HTTP error with headers (429 with
``Retry-After``, 500s), a malformed body, a delay, a hang (no answer until
the server stops), a refusal (``refusal`` field) or a ``finish_reason``
such as ``content_filter``. ``schema_support=False`` makes the server
reject ``json_schema`` response formats with HTTP 400, as servers without
structured output do. With ``api_key`` set, requests without
``Authorization: Bearer <api_key>`` get HTTP 401 — whose message echoes the
key that was sent, as careless servers do (so redaction can be tested).

Every request body is kept in :attr:`ChatServer.requests` (memory only), its
arrival time in :attr:`ChatServer.times`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import http.server
import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self

__all__ = ["ChatServer", "FastChatServer", "Reply", "completion", "default_answer"]


@dataclass
class Reply:
    """One scripted response of :class:`ChatServer`.

    Parameters
    ----------
    status
        HTTP status (non-2xx: an OpenAI-style error body with ``message``).
    content
        The message content (None: the default model's answer).
    refusal
        A ``refusal`` field on the message (content null).
    finish_reason
        ``stop``, ``length``, ``content_filter``…
    headers
        Extra response headers (``Retry-After``…).
    body
        Raw response bytes, sent as they are (a malformed body).
    delay
        Seconds to wait before answering.
    hang
        Never answer (until the server stops).
    message
        The error message of a non-2xx reply.
    usage
        (prompt_tokens, completion_tokens); default from the text lengths.
    """

    status: int = 200
    content: str | None = None
    refusal: str | None = None
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay: float = 0.0
    hang: bool = False
    message: str = "scripted error"
    usage: tuple[int, int] | None = None


_OPTION_LINE = re.compile(r"^- (.+)$", re.M)


def _options(body: dict[str, Any]) -> tuple[list[str], bool]:
    """(options, schema requested) of a request body."""
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema") or {}
        enum = ((schema.get("properties") or {}).get("decision") or {}).get("enum")
        if isinstance(enum, list) and enum:
            return [str(e) for e in enum], True
    user = _user_text(body)
    part = user.rpartition("Options:")[2]
    return _OPTION_LINE.findall(part), rf.get("type") == "json_object"


def _user_text(body: dict[str, Any]) -> str:
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


def default_answer(body: dict[str, Any]) -> str:
    """The default model's answer to a request body (deterministic).

    >>> default_answer({"messages": [{"role": "user", "content": "x\\n\\nOptions:\\n- a\\n- b"}]})
    'Decision: a\\nConfidence: 0.98'
    """
    options, as_json = _options(body)
    seed = body.get("seed")
    h = hashlib.sha256((_user_text(body) + f"|{seed}").encode("utf-8")).digest()
    if not options:
        return "I have no options to choose from."
    pick = options[h[0] % len(options)]
    conf = 50 + h[1] % 50
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    if as_json:
        out: dict[str, Any] = {"decision": pick, "confidence": conf / 100}
        if "score" in (schema.get("properties") or {}):
            out["score"] = (h[2] % 101) / 100
        return json.dumps(out)
    return f"Decision: {pick}\nConfidence: {conf / 100:.2f}"


def completion(
    body: dict[str, Any], reply: Reply | None = None, *, n: int = 0, model_id: str | None = None
) -> bytes:
    """The JSON of a Chat Completions answer to ``body`` (``reply``: scripted parts)."""
    reply = reply or Reply()
    content = reply.content
    if content is None and reply.refusal is None and reply.finish_reason != "content_filter":
        content = default_answer(body)
    prompt_tokens = (
        sum(
            len(str(m.get("content", "")))
            for m in body.get("messages") or []
            if isinstance(m, dict)
        )
        // 4
        + 1
    )
    usage = reply.usage or (prompt_tokens, len(content or reply.refusal or "") // 4 + 1)
    out = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model_id or str(body.get("model", "")),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": reply.refusal},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }
    return json.dumps(out).encode()


def error_body(message: str, kind: str = "server_error") -> bytes:
    """An OpenAI-style error body."""
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    ).encode()


class _Loopback:
    """A server on 127.0.0.1 that a background thread runs; a context manager."""

    @property
    def port(self) -> int:
        raise NotImplementedError

    @property
    def url(self) -> str:
        """The API root to give a client as ``base_url`` (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ChatServer(_Loopback):
    """A loopback Chat Completions server (module notes); a context manager.

    Parameters
    ----------
    latency
        Seconds every answer waits (a model's thinking time).
    api_key
        Require this bearer token (None: no authentication).
    schema_support
        False: reject ``json_schema`` response formats with HTTP 400.
    script
        ``(body, n) -> Reply | None`` for request number ``n`` (from 0).
    faults
        Replies served first, one per request, in order.
    model_id
        The ``model`` field of answers (default: the request's).
    port
        0: a free port.
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        api_key: str | None = None,
        schema_support: bool = True,
        script: Callable[[dict[str, Any], int], Reply | None] | None = None,
        faults: Iterable[Reply] = (),
        model_id: str | None = None,
        port: int = 0,
    ) -> None:
        self.latency = latency
        self.api_key = api_key
        self.schema_support = schema_support
        self.script = script
        self.faults: deque[Reply] = deque(faults)
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []  # time.monotonic() of each request's arrival
        self.statuses: list[int] = []
        self._n = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.app = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> ChatServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # releases hung handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def add_faults(self, *replies: Reply) -> None:
        """Queue replies to serve next, in order."""
        with self._lock:
            self.faults.extend(replies)

    # ------------------------------------------------------------ answering

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            n = self._n
            self._n += 1
            self.requests.append(body)
            self.times.append(time.monotonic())
            fault = self.faults.popleft() if self.faults else None
        if fault is not None:
            return fault
        if self.script is not None:
            got = self.script(body, n)
            if got is not None:
                return got
        return Reply()

    def respond(self, handler: _Handler, body: dict[str, Any]) -> None:
        if self.api_key is not None:
            auth = handler.headers.get("Authorization", "")
            if auth != f"Bearer {self.api_key}":
                sent = auth.removeprefix("Bearer ")
                self._send_error(
                    handler, 401, f"Incorrect API key provided: {sent}", {}, kind="invalid_api_key"
                )
                return
        rf = body.get("response_format") or {}
        if not self.schema_support and rf.get("type") == "json_schema":
            with self._lock:
                self.requests.append(body)
            self._send_error(
                handler, 400, "response_format type 'json_schema' is not supported by this server",
                {}, kind="invalid_request_error",
            )  # fmt: skip
            return
        reply = self._reply_for(body)
        wait = self.latency + reply.delay
        if reply.hang:
            self._stop.wait(3600)
            handler.close_connection = True
            return
        if wait > 0:
            time.sleep(wait)
        if reply.body is not None:
            self._send(handler, reply.status, reply.body, reply.headers)
            return
        if reply.status >= 300:
            self._send_error(handler, reply.status, reply.message, reply.headers)
            return
        with self._lock:
            n = len(self.requests)
        data = completion(body, reply, n=n, model_id=self.model_id)
        self._send(handler, 200, data, reply.headers)

    def _send_error(
        self,
        handler: _Handler,
        status: int,
        message: str,
        headers: dict[str, str],
        *,
        kind: str = "server_error",
    ) -> None:
        self._send(handler, status, error_body(message, kind), headers)

    def _send(self, handler: _Handler, status: int, data: bytes, headers: dict[str, str]) -> None:
        with self._lock:
            self.statuses.append(status)
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    app: ChatServer


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as API clients expect
    # One write per response (status, headers and body buffered, flushed by the
    # base class after each request) and no Nagle delay: a reply split in two
    # small writes would wait for the client's delayed ACK (~40 ms a request).
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.server.app._send_error(self, 404, f"no route {self.path}", {})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self.server.app._send_error(self, 400, "request body is not JSON", {})
            return
        self.server.app.respond(self, body if isinstance(body, dict) else {})

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            data = json.dumps({"object": "list", "data": []}).encode()
            self.server.app._send(self, 200, data, {})
            return
        self.server.app._send_error(self, 404, f"no route {self.path}", {})


_NO_SCHEMA = "response_format type 'json_schema' is not supported by this server"


class FastChatServer(_Loopback):
    """A lean loopback Chat Completions server on one asyncio event loop (for benchmarks).

    It answers like :class:`ChatServer`'s default model (:func:`completion`),
    after ``latency`` seconds, without scripts, faults, authentication or a
    request record: one event loop, no thread per connection, each response
    one write, so that a benchmark measures the client rather than the
    server. ``schema_support=False`` rejects ``json_schema`` formats with
    HTTP 400, as :class:`ChatServer` does. Runs in a background thread
    (:meth:`start`, or as a context manager) or in the foreground
    (:meth:`serve_forever`, as ``python -m peira.testing.chat_server`` does).
    """

    def __init__(self, *, latency: float = 0.0, schema_support: bool = True, port: int = 0):
        self.latency = latency
        self.schema_support = schema_support
        self.n = 0  # requests answered
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._conns: set[_FastProtocol] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "the server is not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: _FastProtocol(self), "127.0.0.1", self._port, backlog=1024
        )

    def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve in this thread until the loop is stopped (or the process ends)."""

        async def go() -> None:
            await self._open()
            assert self._server is not None
            if on_ready is not None:
                on_ready(self.url)
            self._ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._server.serve_forever()
            for conn in list(self._conns):  # close the clients' connections too
                if conn.transport is not None:
                    conn.transport.close()
            for _ in range(3):  # let the transports finish closing
                await asyncio.sleep(0)

        asyncio.run(go())

    def start(self) -> FastChatServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._server.close)
        if self._thread is not None:
            self._thread.join(5)

    def answer(self, method: str, path: str, raw: bytes) -> tuple[int, bytes, bool]:
        """(status, body, delayed) of one request."""
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            return 200, b'{"object": "list", "data": []}', False
        if method != "POST" or not route.endswith("/chat/completions"):
            return 404, error_body(f"no route {path}"), False
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return 400, error_body("request body is not JSON"), False
        if not isinstance(body, dict):
            body = {}
        rf = body.get("response_format") or {}
        if not self.schema_support and rf.get("type") == "json_schema":
            return 400, error_body(_NO_SCHEMA, "invalid_request_error"), False
        n = self.n
        self.n += 1
        return 200, completion(body, n=n), True


class _FastProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive over one connection: ``Content-Length`` bodies only."""

    def __init__(self, app: FastChatServer) -> None:
        self.app = app
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport  # asyncio sets TCP_NODELAY on TCP sockets
        self.app._conns.add(self)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                self._write(400, error_body("bad Content-Length"), close=True)
                return
            if len(self.buf) < end + 4 + length:
                return  # the rest of the body is on its way
            raw = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            close = headers.get("connection", "").lower() == "close"
            status, body, delayed = self.app.answer(method, path, raw)
            if delayed and self.app.latency > 0:
                asyncio.get_running_loop().call_later(
                    self.app.latency, self._write, status, body, close
                )
            else:
                self._write(status, body, close)

    def _write(self, status: int, body: bytes, close: bool) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n"
        )
        t.write(head.encode("latin-1") + body)
        if close:
            t.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.app._conns.discard(self)


def main(argv: list[str] | None = None) -> int:
    """Serve until killed (``--latency 0.05``: 50 ms an answer).

    Prints the API root (``http://127.0.0.1:PORT/v1``) on the first line of
    stdout. Serves with :class:`FastChatServer` (one event loop), or with
    ``--threaded`` with :class:`ChatServer` (a thread per connection).
    """
    p = argparse.ArgumentParser(prog="python -m peira.testing.chat_server")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    p.add_argument("--no-schema", action="store_true", help="reject json_schema formats")
    p.add_argument("--threaded", action="store_true", help="ChatServer: a thread per connection")
    args = p.parse_args(argv)
    if not args.threaded:
        fast = FastChatServer(
            latency=args.latency, schema_support=not args.no_schema, port=args.port
        )
        with contextlib.suppress(KeyboardInterrupt):
            fast.serve_forever(on_ready=lambda url: print(url, flush=True))
        return 0
    server = ChatServer(latency=args.latency, schema_support=not args.no_schema, port=args.port)
    print(server.url, flush=True)
    try:
        server._httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
