"""``peira.adapters:Inspect``: every provider Inspect AI supports, through its model API.

Inspect AI (``pip install 'peira[inspect]'``) reaches Anthropic, Google,
Mistral, Bedrock, Azure, Groq, Together, local Hugging Face and vLLM models
and more behind one call, ``inspect_ai.model.get_model("provider/model")``;
this bridge asks each request through it, so no provider needs Peira code::

    ANTHROPIC_API_KEY=... peira run --adapter peira.adapters:Inspect \\
        --adapter-arg model=anthropic/claude-sonnet-4-0 --dataset DIR --out run.parquet

The question and the reading of the answer are those of every Peira model
adapter (:mod:`peira.adapters._common`): a system and a user message, a JSON
schema as Inspect's ``response_schema`` (``structured="json_schema"``, the
default; ``"text"`` asks for plain text), JSON answers read directly and
other text through :mod:`peira.parse`. A ``content_filter`` stop or a
refusal content part is an abstention with ``refusal_reason``.

Inspect's own retries are off (``max_retries=0``): the runner retries what
the provider says is worth retrying (Inspect's ``should_retry`` of the
provider: rate limits, overload, 5xx), with its ``Retry-After`` when the
error carries the HTTP response; other errors are
:class:`~peira.adapters.ProviderError` (never retried). Credentials stay
where Inspect reads them — the provider's environment variables — and are
refused as arguments.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from typing import Any

from ..errors import PeiraError
from ..run.protocol import Decision, Request
from ._common import (
    DEFAULT_SYSTEM,
    Prices,
    ProviderError,
    RetryableError,
    decision_schema,
    estimate_tokens,
    read_answer,
    refusal_text,
    retry_after_seconds,
    system_message,
    user_message,
    with_usage,
)

__all__ = ["Inspect"]

_SECRET_ARGS = ("api_key", "key", "token", "password", "secret")


def _import_inspect() -> Any:
    try:
        import inspect_ai.model as im
    except ImportError as exc:
        raise PeiraError(
            "the Inspect adapter needs inspect_ai: pip install 'peira[inspect]'"
        ) from exc
    return im


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return f"<{type(v).__module__}.{type(v).__qualname__}>"


class Inspect:
    """A model reached through Inspect AI's ``get_model`` (async).

    Parameters
    ----------
    model
        ``provider/model`` as Inspect spells it (``openai/gpt-4o``,
        ``anthropic/claude-sonnet-4-0``, ``hf/…``, ``mockllm/model``).
    structured
        ``json_schema`` (default) or ``text``.
    system
        The system message's opening (the answer format is appended).
    temperature, max_tokens, seed
        Sampling parameters, sent when given; ``seed`` is offset by the
        request's ``sample``.
    base_url
        The provider's API root, when not its default.
    model_args
        Further arguments of the provider (``device``, ``api_version``…);
        credentials are refused here — set the provider's environment variable.
    price_in, price_out
        USD per million input / output tokens (both or neither).
    parser
        The :mod:`peira.parse` parser for plain-text answers.
    timeout
        Seconds per call (Inspect's ``timeout``).
    name, version
        The log's ``model`` and ``model_version`` (default: ``model`` and
        ``"unpinned"``).
    """

    def __init__(
        self,
        model: str,
        *,
        structured: str = "json_schema",
        system: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        base_url: str | None = None,
        model_args: dict[str, Any] | None = None,
        price_in: float | None = None,
        price_out: float | None = None,
        parser: Any = "auto",
        timeout: int | None = None,
        name: str | None = None,
        version: str | None = None,
        **unknown: Any,
    ) -> None:
        args = dict(model_args or {})
        secret = sorted(k for k in (*unknown, *args) if k.lower() in _SECRET_ARGS)
        if secret:
            raise PeiraError(
                f"Inspect takes no credentials as arguments ({', '.join(secret)}): set the "
                "provider's environment variable (e.g. ANTHROPIC_API_KEY)"
            )
        if unknown:
            raise PeiraError(f"Inspect: unknown argument(s) {sorted(unknown)}")
        if not isinstance(model, str) or "/" not in model:
            raise PeiraError(f"Inspect: model must be 'provider/model', got {model!r}")
        if structured not in ("json_schema", "text"):
            raise PeiraError(f"structured must be 'json_schema' or 'text', got {structured!r}")
        self._im = _import_inspect()
        self.model = model
        self.name = name or model
        self.version = version or "unpinned"
        self.structured = structured
        self.system = system
        self.sampling = {
            k: v
            for k, v in (("temperature", temperature), ("max_tokens", max_tokens))
            if v is not None
        }
        self.seed = seed
        self.base_url = base_url
        self.model_args = args
        self.prices = Prices(price_in, price_out)
        self.parser = parser
        self.timeout = timeout
        # one Inspect model per event loop: provider clients bind to the loop
        # they first ran on, and each peira run has a loop of its own
        self._models: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def config(self) -> dict[str, Any]:
        """What determines the answers (no credentials)."""
        return {
            "model": self.model,
            "structured": self.structured,
            "system": DEFAULT_SYSTEM if self.system is None else self.system,
            "sampling": self.sampling,
            "seed": self.seed,
            "base_url": self.base_url,
            "model_args": {k: _jsonable(v) for k, v in sorted(self.model_args.items())},
            "parser": self.parser,
            "prices": [self.prices.price_in, self.prices.price_out],
            "name": self.name,
            "version": self.version,
        }

    def _model(self) -> Any:
        loop = asyncio.get_running_loop()
        m = self._models.get(loop)
        if m is None:
            m = self._im.get_model(
                self.model, base_url=self.base_url, memoize=False, **self.model_args
            )
            self._models[loop] = m
        return m

    def _messages(self, request: Request) -> list[Any]:
        im = self._im
        structured = self.structured == "json_schema"
        return [
            im.ChatMessageSystem(
                content=system_message(request, structured=structured, system=self.system)
            ),
            im.ChatMessageUser(content=user_message(request)),
        ]

    def _config(self, request: Request) -> Any:
        im = self._im
        kw: dict[str, Any] = {"max_retries": 0, **self.sampling}
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        if self.seed is not None:
            kw["seed"] = self.seed + request.sample
        if self.structured == "json_schema":
            from inspect_ai.util import JSONSchema

            kw["response_schema"] = im.ResponseSchema(
                name="decision",
                json_schema=JSONSchema.model_validate(decision_schema(request)),
                strict=True,
            )
        return im.GenerateConfig(**kw)

    def estimate(self, request: Request) -> Decision:
        """A generous estimate of one call's tokens and cost (no call is made)."""
        text = system_message(
            request, structured=self.structured == "json_schema", system=self.system
        ) + user_message(request)
        tokens_in = estimate_tokens(text)
        tokens_out = int(self.sampling.get("max_tokens", 100))
        return Decision(
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self.prices.cost(tokens_in, tokens_out),
        )

    async def decide(self, request: Request) -> Decision:
        """Ask the model through Inspect; read its answer."""
        model = self._model()
        t0 = time.perf_counter()
        try:
            out = await model.generate(self._messages(request), config=self._config(request))
        except Exception as exc:
            raise self._error(model, exc) from None
        latency = (time.perf_counter() - t0) * 1000.0
        usage = out.usage
        tin = usage.input_tokens if usage is not None else None
        tout = usage.output_tokens if usage is not None else None
        d = self._read(out, request)
        return with_usage(d, tokens_in=tin, tokens_out=tout, prices=self.prices, latency_ms=latency)

    def _read(self, out: Any, request: Request) -> Decision:
        if not out.choices:
            return Decision(
                error=f"provider returned no choices{': ' + out.error if out.error else ''}"
            )
        message = out.message
        refusal = None
        content = message.content
        if isinstance(content, list):
            for part in content:
                if getattr(part, "refusal", None):
                    refusal = getattr(part, "text", None) or "refusal"
        if refusal is not None:
            return Decision(abstained=True, refusal_reason=refusal, raw_text=refusal_text(refusal))
        if out.stop_reason == "content_filter":
            return Decision(
                abstained=True,
                refusal_reason="content_filter",
                raw_text=refusal_text("content_filter"),
            )
        d = read_answer(out.completion, request, parser=self.parser)
        if d.error is not None and out.stop_reason in ("max_tokens", "model_length"):
            from dataclasses import replace

            d = replace(d, error=f"{d.error} (output cut at the token limit)")
        return d

    @staticmethod
    def _error(model: Any, exc: Exception) -> Exception:
        retry = False
        try:
            verdict = model.api.should_retry(exc)
            retry = bool(getattr(verdict, "retry", verdict))
        except Exception:  # a provider whose check itself fails: do not retry
            retry = False
        status = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        if status is None and response is not None:
            status = getattr(response, "status_code", None)
        label = f"{type(exc).__name__}: {exc}"[:500]
        if isinstance(exc, TimeoutError):
            retry = True
        if retry:
            headers = getattr(response, "headers", None)
            return RetryableError(label, status=status, retry_after=retry_after_seconds(headers))
        return ProviderError(label)


Inspect.__module__ = "peira.adapters"
