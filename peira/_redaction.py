"""Redaction: no secret from the environment in any text a run writes or prints.

Every text that comes from outside Peira on the run path — an adapter's
error, a child's stderr, a server's message, an exception's text, a model's
``raw_text`` and ``refusal_reason`` — passes through one :class:`Redactor`
before it reaches a row (the log, its checkpoint parts, the response
cache). It replaces with ``[redacted]`` the values of

- the environment variables the adapter reads (its optional ``env_read``
  attribute: a sequence of variable names, e.g. ``("OPENAI_API_KEY",)``),
  and the values it names itself (its optional ``secret_values``: e.g. the
  extra variables a :class:`~peira.adapters.Subprocess` gives its children);
- every environment variable whose *name* looks like a secret:
  ``*_KEY``, ``*_TOKEN``, ``*_SECRET`` or ``*PASSWORD*``, case-insensitive.

Values shorter than :data:`MIN_LENGTH` (8) characters are left alone: a
short value (``1``, ``true``, ``dev``) would mangle ordinary text and is no
credential worth the name. Longer values are replaced longest first, so a
secret that contains another is redacted whole.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

#: A frozen dataclass with text fields, such as :class:`peira.run.Decision`.
D = TypeVar("D")

__all__ = ["MARK", "MIN_LENGTH", "Redactor", "looks_secret"]

MARK = "[redacted]"
MIN_LENGTH = 8
"""Values shorter than this are not redacted (they would mangle ordinary text)."""

_SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
_TEXT_FIELDS = ("error", "raw_text", "refusal_reason")


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name looks like a secret's.

    >>> [looks_secret(n) for n in ("OPENAI_API_KEY", "gh_token", "DB_PASSWORD_FILE", "PATH")]
    [True, True, True, False]
    """
    return _SECRET_NAME.search(name) is not None


class Redactor:
    """Replaces secret values in texts with ``[redacted]`` (module notes).

    Parameters
    ----------
    names
        Environment variables whose values are secret whatever their names.
    values
        Further secret values.
    environ
        The environment (default ``os.environ``), read once, here.

    Examples
    --------
    >>> r = Redactor(["MY_URL"], environ={"MY_URL": "https://u:pw@host", "A_TOKEN": "tok-12345678",
    ...                                   "SHORT_KEY": "abc", "HOME": "/home/me"})
    >>> r.text("tok-12345678 at https://u:pw@host, abc, /home/me")
    '[redacted] at [redacted], abc, /home/me'
    """

    def __init__(
        self,
        names: Iterable[str] = (),
        values: Iterable[str] = (),
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        wanted = set(names)
        found = {v for k, v in env.items() if k in wanted or looks_secret(k)}
        found.update(v for v in values if isinstance(v, str))
        self.secrets = tuple(
            sorted((v for v in found if len(v) >= MIN_LENGTH), key=lambda v: (-len(v), v))
        )

    @classmethod
    def for_adapter(cls, adapter: Any, *, environ: Mapping[str, str] | None = None) -> Redactor:
        """The redactor of a run of ``adapter`` (its ``env_read`` and ``secret_values``)."""
        names = getattr(adapter, "env_read", None) or ()
        values = getattr(adapter, "secret_values", None) or ()
        return cls(
            [n for n in names if isinstance(n, str)],
            [v for v in values if isinstance(v, str)],
            environ=environ,
        )

    def text(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[redacted]``."""
        for s in self.secrets:
            if s in text:
                text = text.replace(s, MARK)
        return text

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        """A response row with its outside texts (error, raw_text, refusal_reason) redacted."""
        if not self.secrets:
            return row
        out = dict(row)
        for k in _TEXT_FIELDS:
            if isinstance(out.get(k), str):
                out[k] = self.text(out[k])
        return out

    def decision(self, d: D) -> D:
        """A decision (:class:`peira.run.Decision`) with its texts redacted (what the response cache keeps)."""
        if not self.secrets:
            return d
        changes: dict[str, Any] = {
            k: self.text(v) for k in _TEXT_FIELDS if isinstance(v := getattr(d, k), str)
        }
        return replace(d, **changes) if changes else d  # type: ignore[type-var]
