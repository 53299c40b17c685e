"""The response cache: a rerun makes no call it has made before.

``run(..., cache=DIR)`` (``peira run --cache DIR``) keeps every answer an
adapter *returned* — a :class:`~peira.run.Decision`, one with ``error`` set
included (that is the model's answer too) — under a content address: the SHA-256 of

    the canonical JSON of {adapter ``module:Class``, ``name``, ``version``,
    the digests of its configuration (:func:`~peira.run.adapter_identity`)},
    then the request's ``primitive``, ``prompt``, ``options``, ``input``
    (each length-prefixed) and ``sample``.

The ``variant_id`` is left out: it is a pseudonym that changes with the
key, while the content it names does not, so a rerun under a fresh
ephemeral key still hits. Calls that raised (timeouts, transient errors,
provider errors) are not kept: a rerun calls them again.

Each entry is one small JSON file, ``DIR/v1/ab/<hash>.json``, written to a
temporary name and renamed into place, so concurrent runs sharing a cache
never see half an entry (two runs racing on one key both write the same
answer; the last rename wins). A file that cannot be read is a miss and is
rewritten. An entry holds the answer only — no request text, no case id, no
key — and the runner marks rows served from the cache (``cached`` column).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import PeiraError
from .protocol import Decision, Request

__all__ = ["ResponseCache", "cache_identity"]

_FORMAT = "peira-response-cache/v1"
_FIELDS = tuple(f.name for f in dataclasses.fields(Decision))


def cache_identity(adapter: Any, identity: Mapping[str, Any]) -> dict[str, Any]:
    """What keys an adapter's cache entries: class, configuration digests, name, version."""
    return {**identity, "name": adapter.name, "version": adapter.version}


class ResponseCache:
    """A content-addressed store of adapter answers in a directory (module notes).

    Parameters
    ----------
    directory
        Created when missing.
    identity
        What identifies the adapter: ``{"adapter", "adapter_config", "name",
        "version"}``; part of every key.
    """

    def __init__(
        self, directory: str | os.PathLike[str], identity: dict[str, Any], *, create: bool = True
    ) -> None:
        self.root = Path(directory)
        self.dir = self.root / "v1"
        self._dir = str(self.dir)
        if not create:  # look-ups only (a dry run): a missing directory is all misses
            self._prefix = self._identity(identity)
            self.hits = self.stores = 0
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PeiraError(f"{self.root}: cannot create the response cache: {exc}") from exc
        if not self.dir.is_dir():
            raise PeiraError(f"{self.root}: not a directory")
        self._prefix = self._identity(identity)
        self.hits = 0
        self.stores = 0

    @staticmethod
    def _identity(identity: dict[str, Any]) -> bytes:
        return json.dumps(
            {"format": _FORMAT, **identity}, sort_keys=True, separators=(",", ":"),
            ensure_ascii=False, default=repr,
        ).encode("utf-8")  # fmt: skip

    def key(self, request: Request) -> str:
        """The content address of a request's answer (hex SHA-256).

        Fields are length-prefixed, so no two requests share an encoding.
        """
        h = hashlib.sha256(self._prefix)
        for part in (request.primitive, request.prompt, *request.options, request.input):
            b = part.encode("utf-8")
            h.update(b"%d:" % len(b))
            h.update(b)
        h.update(b"#%d/%d" % (len(request.options), request.sample))
        return h.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self._dir, key[:2], key + ".json")

    def has(self, key: str) -> bool:
        """Whether an entry is stored under ``key`` (not whether it is readable)."""
        return os.path.exists(self._path(key))

    def get(self, key: str) -> Decision | None:
        """The stored answer, or None (a missing or unreadable entry)."""
        try:
            with open(self._path(key), "rb") as f:
                stored = json.loads(f.read())["decision"]
            d = Decision(**{k: stored[k] for k in _FIELDS if k in stored})
        except (OSError, ValueError, TypeError, KeyError):
            return None
        self.hits += 1
        return d

    def put(self, key: str, decision: Decision, latency_ms: float) -> None:
        """Store an answer (its measured latency kept when it reports none)."""
        fields = dataclasses.asdict(decision)
        if fields.get("latency_ms") is None:
            fields["latency_ms"] = latency_ms
        try:
            data = json.dumps({"format": _FORMAT, "decision": fields}, ensure_ascii=False)
        except (TypeError, ValueError):
            return  # an answer with values JSON cannot hold is not cached
        path = self._path(key)
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(tmp, path)
            self.stores += 1
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
