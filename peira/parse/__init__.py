"""Raw model text → decisions: vectorised, configurable parsers.

A response log keeps each call's ``raw_text``; re-parsing it re-scores a run
without calling the model. :func:`parse_responses` rebuilds ``decision``,
``abstained``, ``refusal_reason``, ``score``, ``confidence``, ``malformed``
and ``error`` of every row from ``raw_text`` with polars string and JSON
expressions only (no ``map_elements``, no Python loop over rows).

This package is a face; the parts live in

- :mod:`~peira.parse.rules`: the rules (``synth``, ``json``,
  ``decision-line``, ``abstain``, ``options``), what each recognises, and
  :data:`PARSER_RULES` (a registry; :data:`RULES` are its names);
- :mod:`~peira.parse.config`: :class:`ParserConfig`, the named
  :data:`PARSERS` and :func:`resolve_parser`;
- :mod:`~peira.parse.assemble`: the first rule that recognises a text wins,
  the common checks, :func:`parse_frame` and :func:`parse_responses`;
- :mod:`~peira.parse._patterns`: the regex builders.

:func:`peira.rescore` and :class:`~peira.rescoring.RescoreResult` live in
:mod:`peira.rescoring`, above this package (they need the metrics, which
parsing does not).
"""

from __future__ import annotations

from .assemble import parse_frame, parse_responses
from .config import (
    DEFAULT_ABSTAIN_PHRASES,
    DEFAULT_NEGATIONS,
    DEFAULT_REFUSAL_PHRASES,
    PARSERS,
    ParserConfig,
    ParserConfigError,
    resolve_parser,
)
from .rules import PARSER_RULES, RULES, ParserRule

__all__ = [
    "DEFAULT_ABSTAIN_PHRASES",
    "DEFAULT_NEGATIONS",
    "DEFAULT_REFUSAL_PHRASES",
    "PARSERS",
    "PARSER_RULES",
    "RULES",
    "ParserConfig",
    "ParserConfigError",
    "ParserRule",
    "parse_frame",
    "parse_responses",
    "resolve_parser",
]
