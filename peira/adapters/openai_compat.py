"""``peira.adapters:OpenAICompatible``: any Chat Completions server, via the ``openai`` SDK.

One adapter reaches OpenAI and every server that speaks its Chat Completions
API — vLLM, SGLang, Ollama, the llama.cpp server, OpenRouter, LiteLLM and
other gateways — through the official SDK (install ``peira[openai]``)::

    OPENAI_API_KEY=... peira run --adapter peira.adapters:OpenAICompatible \\
        --adapter-arg model=gpt-4o-mini --adapter-arg price_in=0.15 \\
        --adapter-arg price_out=0.6 --dataset DIR --out run.parquet

How it asks, and reads the answer
---------------------------------
A system message and a user message (:mod:`peira.adapters._common`), with
structured output: ``response_format`` is a strict JSON schema whose
``decision`` enum is the request's own options (plus ``"abstain"`` in
``abstain`` cases), with ``confidence`` (and ``score`` in ``score`` cases) in
[0, 1]. ``structured`` chooses:

``"auto"`` (default)
    Ask for the schema; when the server rejects ``response_format`` (an HTTP
    400/422 naming it), switch to plain text for the rest of the run.
``"json_schema"``, ``"json_object"``, ``"text"``
    Always that.

The request goes through the SDK's client — its authentication, timeout,
connection pool and error types — by its low-level ``client.post`` with the
body as plain JSON and the answer as parsed JSON (``cast_to=object``):
``chat.completions.create`` would spend about as much CPU again converting
the body to its typed parameters and the answer to its response model,
which matters at hundreds of calls a second. ``extra_body`` fields are
merged into the body last, as the SDK merges its own ``extra_body``.

Whatever comes back, a JSON object is read directly and any other text goes
through :mod:`peira.parse` (``parser``, default ``auto``), so a server that
ignores the schema still gets its answers read. A ``refusal`` field or a
``content_filter`` finish is an abstention with ``refusal_reason``.

Credentials, retries, usage
---------------------------
The API key is read from the environment only — ``OPENAI_API_KEY``, or the
variable named by ``api_key_env`` — and never written: not in ``config()``
(hence not in a checkpoint manifest or a cache key), not in an error (the
server's messages are redacted), not in a row. Passing ``api_key=`` is
refused. The base URL is ``base_url``, else the SDK's ``OPENAI_BASE_URL``,
else OpenAI's.

The SDK's own retries are off (``max_retries=0``): the runner retries. HTTP
408, 409, 429 and 5xx, lost connections, timeouts and unreadable response
bodies raise :class:`~peira.adapters.RetryableError` with the server's
``Retry-After``; other 4xx raise :class:`~peira.adapters.ProviderError`
(never retried; the row is malformed with the status and the server's
message). Token counts come from the response's ``usage``; with a price
table (``price_in``, ``price_out``: USD per million tokens) each row
carries its ``cost_usd``.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from typing import Any

from .._redaction import Redactor
from ..errors import PeiraError
from ..run.protocol import Decision, Request
from ._common import (
    DEFAULT_SYSTEM,
    RETRYABLE_STATUS,
    Prices,
    ProviderError,
    RetryableError,
    decision_schema,
    estimate_tokens,
    read_answer,
    redact,
    refusal_text,
    retry_after_seconds,
    system_message,
    user_message,
    with_usage,
)

__all__ = ["OpenAICompatible"]

_MODES = ("auto", "json_schema", "json_object", "text")
_SCHEMA_WORDS = ("response_format", "json_schema", "schema", "structured")
_MEMO = 4096  # most option sets remembered (a dataset with more builds the rest per call)


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise PeiraError(
            "OpenAICompatible needs the openai package: pip install 'peira[openai]'"
        ) from exc
    return openai


def _safe_url(url: str) -> str:
    """A URL without credentials (``user:password@`` and query strings dropped)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class OpenAICompatible:
    """A model behind an OpenAI-compatible Chat Completions API (sync; thread-safe).

    Parameters
    ----------
    model
        The model name the server knows (``gpt-4o-mini``, ``meta-llama/…``).
    base_url
        The API root (``http://localhost:8000/v1``); default: the SDK's
        ``OPENAI_BASE_URL``, else OpenAI's.
    api_key_env
        The environment variable holding the key (default ``OPENAI_API_KEY``);
        servers without authentication need none.
    structured
        ``auto``, ``json_schema``, ``json_object`` or ``text`` (module notes).
    system
        The system message's opening (the answer format is appended).
    temperature, top_p, max_tokens, max_completion_tokens, seed
        Sampling parameters, sent when given; ``seed`` is offset by the
        request's ``sample`` so that repeated samples differ reproducibly.
    extra_body
        Further JSON fields of the request (server-specific options).
    price_in, price_out
        USD per million input / output tokens (both or neither).
    parser
        The :mod:`peira.parse` parser for plain-text answers.
    timeout
        Seconds per HTTP request (the SDK's own timeout).
    name, version
        The log's ``model`` and ``model_version`` (default: ``model`` and
        ``"unpinned"`` — pass the snapshot you pin).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        structured: str = "auto",
        system: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
        price_in: float | None = None,
        price_out: float | None = None,
        parser: Any = "auto",
        timeout: float = 60.0,
        name: str | None = None,
        version: str | None = None,
        **unknown: Any,
    ) -> None:
        if "api_key" in unknown:
            raise PeiraError(
                "OpenAICompatible takes no api_key argument: put the key in the environment "
                f"(${api_key_env}, or name another variable with api_key_env=)"
            )
        if unknown:
            raise PeiraError(f"OpenAICompatible: unknown argument(s) {sorted(unknown)}")
        if not isinstance(model, str) or not model:
            raise PeiraError(f"OpenAICompatible: model must be a non-empty string, got {model!r}")
        if structured not in _MODES:
            raise PeiraError(f"structured must be one of {list(_MODES)}, got {structured!r}")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise PeiraError(f"timeout must be > 0 seconds, got {timeout!r}")
        openai = _import_openai()
        self._openai = openai
        # what a worker process rebuilds it from (no key: it reads its own environment)
        self._init_args: dict[str, Any] = {
            "model": model, "base_url": base_url, "api_key_env": api_key_env,
            "structured": structured, "system": system, "temperature": temperature,
            "top_p": top_p, "max_tokens": max_tokens,
            "max_completion_tokens": max_completion_tokens, "seed": seed,
            "extra_body": extra_body, "price_in": price_in, "price_out": price_out,
            "parser": parser, "timeout": timeout, "name": name, "version": version,
        }  # fmt: skip
        self.model = model
        self.name = name or model
        self.version = version or "unpinned"
        self.structured = structured
        self.system = system
        self.sampling = {
            k: v
            for k, v in (
                ("temperature", temperature),
                ("top_p", top_p),
                ("max_tokens", max_tokens),
                ("max_completion_tokens", max_completion_tokens),
            )
            if v is not None
        }
        self.seed = seed
        self.extra_body = dict(extra_body) if extra_body else None
        self.prices = Prices(price_in, price_out)
        self.parser = parser
        self._key_env = api_key_env
        self.env_read = (api_key_env,)  # its value is redacted from a run's texts
        key = os.environ.get(api_key_env) or None
        self._secrets = (key,)
        self._redactor = Redactor(self.env_read)  # the shared rule, for direct calls too
        # the SDK reads OPENAI_BASE_URL itself when base_url is None
        self._client = openai.OpenAI(
            api_key=key or "no-key",
            base_url=base_url,
            max_retries=0,
            timeout=float(timeout),
        )
        self.base_url = str(self._client.base_url)
        self._text_only = structured == "text"
        self._lock = threading.Lock()
        # per (primitive, options): benchmarks have a few option sets, reused by every call
        self._systems: dict[tuple[Any, ...], str] = {}
        self._formats: dict[tuple[Any, ...], dict[str, Any]] = {}

    def close(self) -> None:
        """Close the HTTP client and its pooled connections (the command line does
        this after a run; ``with OpenAICompatible(...) as adapter:`` does it too)."""
        self._client.close()

    def __enter__(self) -> OpenAICompatible:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor arguments: the copy builds its own client and
        reads the key from its own environment (a worker process inherits it)."""
        return (_rebuild, (self._init_args,))

    # ------------------------------------------------------------ protocol

    def config(self) -> dict[str, Any]:
        """What determines the answers (no credentials): model, server, prompt, sampling."""
        return {
            "model": self.model,
            "base_url": _safe_url(self.base_url),
            "structured": self.structured,
            "system": DEFAULT_SYSTEM if self.system is None else self.system,
            "sampling": self.sampling,
            "seed": self.seed,
            "extra_body": self.extra_body,
            "parser": self.parser,
            "prices": [self.prices.price_in, self.prices.price_out],
            "name": self.name,
            "version": self.version,
        }

    def _mode(self) -> str:
        if self._text_only:
            return "text"
        return "json_schema" if self.structured == "auto" else self.structured

    def _params(self, request: Request, mode: str) -> dict[str, Any]:
        """The request body: messages, sampling, the answer format, ``extra_body`` last."""
        structured = mode != "text"
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self._system(request, structured)},
                {"role": "user", "content": user_message(request)},
            ],
            **self.sampling,
        }
        if self.seed is not None:
            params["seed"] = self.seed + request.sample
        if mode == "json_schema":
            params["response_format"] = self._schema_format(request)
        elif mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        if self.extra_body:
            params.update(self.extra_body)  # as the SDK merges extra_body: it wins
        return params

    def _system(self, request: Request, structured: bool) -> str:
        """The system message, built once per (primitive, options, format)."""
        key = (request.primitive, request.options, structured)
        text = self._systems.get(key)
        if text is None:
            text = system_message(request, structured=structured, system=self.system)
            if len(self._systems) < _MEMO:
                self._systems[key] = text
        return text

    def _schema_format(self, request: Request) -> dict[str, Any]:
        """The ``json_schema`` response format, built once per (primitive, options).

        The body is only serialised, never changed, so requests with the same
        options share one (read-only) dictionary.
        """
        key = (request.primitive, request.options)
        rf = self._formats.get(key)
        if rf is None:
            rf = {
                "type": "json_schema",
                "json_schema": {
                    "name": "decision",
                    "strict": True,
                    "schema": decision_schema(request),
                },
            }
            if len(self._formats) < _MEMO:
                self._formats[key] = rf
        return rf

    def estimate(self, request: Request) -> Decision:
        """A generous estimate of one call's tokens and cost (no call is made)."""
        params = self._params(request, self._mode())
        text = "".join(m["content"] for m in params["messages"])
        rf = params.get("response_format")
        tokens_in = estimate_tokens(text + (repr(rf) if rf else ""))
        tokens_out = int(
            self.sampling.get("max_completion_tokens") or self.sampling.get("max_tokens", 100)
        )
        return Decision(
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self.prices.cost(tokens_in, tokens_out),
        )

    def decide(self, request: Request) -> Decision:
        """Ask the server; read its answer (module notes)."""
        mode = self._mode()
        t0 = time.perf_counter()
        try:
            # the SDK's request path (auth, timeout, error mapping) without its
            # per-call typed-parameter transform and response model: the body is
            # plain JSON already, and the answer is read from the JSON below
            resp = self._client.post(
                "/chat/completions", body=self._params(request, mode), cast_to=object
            )
        except self._openai.APIStatusError as exc:
            if (
                self.structured == "auto"
                and mode == "json_schema"
                and exc.status_code in (400, 422)
                and any(w in str(exc).lower() for w in _SCHEMA_WORDS)
            ):
                with self._lock:
                    self._text_only = True  # the server has no structured output
                return self.decide(request)
            raise self._status_error(exc) from None
        except self._openai.APITimeoutError:
            raise RetryableError("request timed out (the SDK's timeout)") from None
        except self._openai.APIConnectionError as exc:
            raise RetryableError(f"connection error: {self._clean(str(exc))}") from None
        except self._openai.APIResponseValidationError as exc:
            raise RetryableError(
                f"unreadable response body (HTTP {exc.status_code})", status=exc.status_code
            ) from None
        except ValueError as exc:  # a 2xx body that is not JSON at all
            raise RetryableError(f"unreadable response body: {self._clean(str(exc))}") from None
        latency = (time.perf_counter() - t0) * 1000.0
        return self._answer(resp, request, latency)

    # ------------------------------------------------------------ reading

    def _answer(self, resp: Any, request: Request, latency_ms: float) -> Decision:
        """A Chat Completions response (its JSON) → a :class:`Decision` with usage."""
        body = resp if isinstance(resp, dict) else {}
        usage = _obj(body.get("usage"))
        tin = _count(usage.get("prompt_tokens"))
        tout = _count(usage.get("completion_tokens"))
        choices = body.get("choices")
        first = _obj(choices[0]) if isinstance(choices, list) and choices else None
        if first is None:
            d = Decision(error="provider returned no choices")
        else:
            message = _obj(first.get("message"))
            refusal = message.get("refusal")
            finish = first.get("finish_reason")
            content = message.get("content")
            if isinstance(refusal, str) and refusal.strip():
                reason = self._clean(refusal.strip())
                d = Decision(abstained=True, refusal_reason=reason, raw_text=refusal_text(reason))
            elif finish == "content_filter":
                d = Decision(
                    abstained=True,
                    refusal_reason="content_filter",
                    raw_text=refusal_text("content_filter"),
                )
            else:
                text = self._clean(content) if isinstance(content, str) else None
                d = read_answer(text, request, parser=self.parser)
                if d.error is not None and finish == "length":
                    from dataclasses import replace

                    d = replace(d, error=f"{d.error} (output cut at the token limit)")
        return with_usage(
            d, tokens_in=tin, tokens_out=tout, prices=self.prices, latency_ms=latency_ms
        )

    def _clean(self, text: str) -> str:
        return self._redactor.text(redact(text, self._secrets))

    def _status_error(self, exc: Any) -> Exception:
        status = int(exc.status_code)
        body = getattr(exc, "body", None)
        message = None
        if isinstance(body, dict):
            err = body.get("error", body)
            message = err.get("message") if isinstance(err, dict) else err
        if not isinstance(message, str) or not message:
            message = str(getattr(exc, "message", "") or exc)
        message = self._clean(message)[:500]
        host = urllib.parse.urlsplit(self.base_url).netloc.rpartition("@")[2]
        text = f"HTTP {status} from {host}: {message}"
        if status in RETRYABLE_STATUS or status >= 500:
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return RetryableError(text, status=status, retry_after=retry_after_seconds(headers))
        return ProviderError(text)


def _rebuild(kwargs: dict[str, Any]) -> OpenAICompatible:
    return OpenAICompatible(**kwargs)


def _obj(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty one for anything else (a server may send odd shapes)."""
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    """A token count: a JSON integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


OpenAICompatible.__module__ = "peira.adapters"
