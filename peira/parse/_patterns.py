"""Regex builders of the parsing rules: escaped phrases on word boundaries, negation
prefixes, and one pattern per distinct option set (built once, not per row)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import polars as pl

__all__ = [
    "NUM",
    "PhraseSettings",
    "bounded_alt",
    "escape",
    "extract_by_pattern",
    "matched_text",
    "mention_patterns",
    "negation_prefix",
    "option_patterns",
    "regex_flags",
]


class PhraseSettings(Protocol):
    """What the rules read of a parser configuration (:class:`peira.parse.ParserConfig`)."""

    @property
    def abstain_phrases(self) -> tuple[str, ...]: ...
    @property
    def refusal_phrases(self) -> tuple[str, ...]: ...
    @property
    def negations(self) -> tuple[str, ...]: ...
    @property
    def negation_window(self) -> int: ...
    @property
    def refusal_decision(self) -> str | None: ...
    @property
    def case_sensitive(self) -> bool: ...


_S = pl.String()
#: A decimal number as written: ``0.82``, ``1``, ``.5``.
NUM = r"(\d+(?:\.\d+)?|\.\d+)"


def option_patterns(opts: pl.DataFrame, cfg: PhraseSettings) -> pl.DataFrame:
    """Per options id, ``_pat``: one regex capturing the first option named
    (longest option first, on word boundaries). Built once per distinct option
    set, not per row."""
    oids, pats = [], []
    for oid, options in opts.select("_oid", "_options").iter_rows():
        named = [o for o in (options or []) if o]
        oids.append(oid)
        pats.append(regex_flags(cfg) + "(" + bounded_alt(named) + ")" if named else None)
    return pl.DataFrame({"_oid": oids, "_pat": pats}, schema={"_oid": pl.UInt32, "_pat": _S})


_MAX_PATTERN_GROUPS = 256


def extract_by_pattern(df: pl.DataFrame, text: str, pat: str, name: str) -> pl.DataFrame:
    """``df`` with ``name`` = first group of the per-row regex ``pat`` in ``text``.

    polars compiles a per-row (expression) pattern row by row, so rows are
    grouped by pattern (one per distinct option set) and each group uses a
    literal pattern; beyond 256 distinct patterns, the per-row form is used.
    """
    distinct = df[pat].drop_nulls().unique()
    if distinct.len() > _MAX_PATTERN_GROUPS:
        return df.with_columns(pl.col(text).str.extract(pl.col(pat), 1).alias(name))
    idx = df.with_row_index("_k")
    parts = [
        idx.filter(pl.col(pat) == p).select("_k", pl.col(text).str.extract(p, 1).alias(name))
        for p in distinct.to_list()
    ]
    got = pl.concat(parts) if parts else pl.DataFrame(schema={"_k": pl.UInt32, name: _S})
    return idx.join(got, on="_k", how="left", maintain_order="left").drop("_k")


def negation_prefix(cfg: PhraseSettings) -> str:
    words = "|".join(escape(w) for w in cfg.negations)
    neg = r"(?:\b(?:" + words + r")\b|\b\w+n't\b)" if words else r"(?:\b\w+n't\b)"
    return neg + r"\s+(?:[\w']+\s+){0," + str(cfg.negation_window) + "}"


def escape(s: str) -> str:
    special = set(r"\.+*?()|[]{}^$#&-~")
    return "".join("\\" + c if c in special else c for c in s).replace(" ", r"\s+")


def regex_flags(cfg: PhraseSettings) -> str:
    return "" if cfg.case_sensitive else "(?i)"


def matched_text(t: pl.Expr) -> pl.Expr:
    return t.str.replace_all("’", "'", literal=True)


def bounded_alt(phrases: Sequence[str]) -> str:
    """A regex group matching any phrase, on word boundaries where it has word characters."""
    parts = []
    for p in sorted(phrases, key=len, reverse=True):
        lb = r"\b" if (p[0].isalnum() or p[0] == "_") else ""
        rb = r"\b" if (p[-1].isalnum() or p[-1] == "_") else ""
        parts.append(lb + escape(p) + rb)
    return "(?:" + "|".join(parts) + ")"


def mention_patterns(opts: pl.DataFrame, cfg: PhraseSettings) -> pl.DataFrame:
    """Per (options id, option): ``_pa``, a regex for the option *or* any longer
    option of the set that contains it (longest first), and ``_pl``, the same
    without the option itself (null when no longer option contains it).

    With leftmost-first alternation, matches of ``_pa`` minus matches of
    ``_pl`` count the option's mentions that are not part of a longer
    option's mention (``review`` in ``human review``): the longer options are
    matched first and their spans masked. Built once per distinct option set.
    """
    flags = 0 if cfg.case_sensitive else re.IGNORECASE
    rows: list[tuple[int, str, str, str | None]] = []
    for oid, options in opts.select("_oid", "_options").iter_rows():
        named = list(dict.fromkeys(o for o in (options or []) if o))
        for o in named:
            own = re.compile(bounded_alt([o]), flags)
            longer = [x for x in named if len(x) > len(o) and own.search(x)]
            rows.append(
                (oid, o, bounded_alt([o, *longer]), bounded_alt(longer) if longer else None)
            )
    return pl.DataFrame(
        rows, schema={"_oid": pl.UInt32, "_opt": _S, "_pa": _S, "_pl": _S}, orient="row"
    )
