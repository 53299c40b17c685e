"""Raw model text → decisions: vectorised, configurable parsers.

A response log keeps each call's ``raw_text``; re-parsing it re-scores a run
without calling the model. :func:`parse_responses` rebuilds ``decision``,
``abstained``, ``refusal_reason``, ``score``, ``confidence``, ``malformed``
and ``error`` of every row from ``raw_text`` with polars string and JSON
expressions only (no ``map_elements``, no Python loop over rows).

Rules
-----
A parser is an ordered list of *rules*. Each rule either *recognises* a text
(and then decides it: an answer, an abstention or a malformed reason) or
passes it on to the next rule; the first rule that recognises a text wins.
Text that no rule recognises is malformed (``unparseable output: …``).

``json``
    The stripped text is a JSON object (optionally inside a ```` ```json ````
    fence): the first top-level object — the shortest prefix ending at a
    ``}`` that is valid JSON, so trailing prose, even with braces, is ignored
    (up to the 64th ``}`` of a text). Keys:
    ``decision`` (alias ``answer``), ``confidence``, ``score``, ``abstain``
    (alias ``abstained``; ``true``, ``"yes"`` or ``1`` mean abstain) and
    ``refusal_reason`` (alias ``refusal``; a refusal is an abstention).
    Extra keys are ignored. Text that starts with ``{`` but is not valid JSON
    is malformed (``unparseable output: invalid JSON``), as is an object with
    neither a decision nor an abstention.
``synth``
    The exact one-line grammar of :mod:`peira.synth`::

        Decision: <decision> (confidence <c>)
        Score: <s> -> <decision> (confidence <c>)
        ABSTAIN: <explanation>
        REFUSED: <refusal_reason>

    Re-parsing a synthetic log with this rule (or ``auto``) reproduces its
    decision, abstained, refusal_reason, score, confidence and malformed
    columns exactly.
``decision-line``
    A line ``Decision: X`` (also ``Answer:``, ``Verdict:``, ``Final decision:``;
    case-insensitive, ``:`` or ``=``, markdown emphasis and quotes allowed) or
    ``Score: s -> X``; the rest of the line ``X`` is searched for the case's
    options (longest option first, on word boundaries: ``Decision: I would
    approve`` → ``approve``). ``X`` starting with ``abstain`` means an
    abstention. A line naming no option is not recognised (later rules try
    the text); lines naming different decisions are malformed
    (``unparseable output: conflicting decisions: approve, deny``). A confidence (``confidence 0.8``, ``Confidence: .8``,
    ``confidence=0.8``) and a score (``Score: 0.7``) anywhere in the text are
    read too.
``abstain``
    One of the configured abstention phrases (``I abstain``, ``cannot
    decide`` …) or refusal phrases (``I can't help with`` …; the matched
    phrase becomes ``refusal_reason``) occurs on word boundaries,
    case-insensitively, and is not negated (see below).
``options``
    Option-name matching: each of the case's options is searched for on word
    boundaries, case-insensitively (``approve`` is not found in
    ``disapprove``); longer options are matched first and their mentions
    masked, so ``human review`` does not also name ``review``. Exactly one
    option named → that decision; several →
    malformed (``unparseable output: several options named``); none → not
    recognised.

Negation rule (``options`` and ``abstain``): a mention is *negated* when a
negation word — by default ``not``, ``no``, ``never``, ``cannot``, ``nor``,
``without`` or any word ending in ``n't`` — precedes it with at most
``negation_window`` (default 3) other words in between, separated by
whitespace only. Punctuation ends the scope: in ``"Do not approve; deny."``
``approve`` is negated and ``deny`` is not, so the decision is ``deny``; in
``"No, approve."`` ``approve`` is not negated. An option counts as named when
it has more mentions than negated mentions. Typographic apostrophes (’) are
read as ``'``.

Common checks, whatever the rule: the decision is matched to the case's
options (case-insensitively unless ``case_sensitive``) and replaced by the
option's spelling — a decision outside the options is malformed
(``decision outside options: 'x'``); a score or confidence that is not a
number in [0, 1] is malformed; numbers are read from the text's decimal
digits (``float("0.82")`` exactly). An abstention carries no decision and no
score or confidence. A null ``raw_text`` (no output: timeout, provider
error) stays malformed and keeps the logged ``error``; an empty or blank text
is malformed (``empty response``).

Named parsers: ``auto`` (``synth``, ``json``, ``decision-line``,
``abstain``, ``options`` in this order: the strict forms first) and one per rule. A
:class:`ParserConfig`, a mapping or a JSON file combines rules in any order
with custom phrase lists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import polars as pl

from .errors import PeiraError, ValidationError
from .importers import _json
from .schema import RESPONSES_SCHEMA, failures_frame

__all__ = [
    "DEFAULT_ABSTAIN_PHRASES",
    "DEFAULT_NEGATIONS",
    "DEFAULT_REFUSAL_PHRASES",
    "PARSERS",
    "RULES",
    "ParserConfig",
    "ParserConfigError",
    "RescoreResult",
    "parse_frame",
    "parse_responses",
    "rescore",
    "resolve_parser",
]

RULES = ("synth", "json", "decision-line", "abstain", "options")

DEFAULT_ABSTAIN_PHRASES = (
    "I abstain",
    "abstain",
    "abstaining",
    "cannot decide",
    "can't decide",
    "unable to decide",
    "cannot determine",
    "can't determine",
    "unable to determine",
    "needs human review",
    "defer to a human",
)
DEFAULT_REFUSAL_PHRASES = (
    "I can't help with",
    "I cannot help with",
    "I can't assist with",
    "I cannot assist with",
    "I won't help with",
    "I'm not able to help with",
)
DEFAULT_NEGATIONS = ("not", "no", "never", "cannot", "nor", "without")

PathLike = str | os.PathLike[str]


class ParserConfigError(PeiraError, ValueError):
    """A parser name or configuration is unknown or invalid."""


@dataclass(frozen=True)
class ParserConfig:
    """An ordered combination of parsing rules with their phrase lists.

    Parameters
    ----------
    rules
        Rule names from :data:`RULES`, tried in order; the first that
        recognises a text decides it.
    abstain_phrases, refusal_phrases
        Phrases of the ``abstain`` rule (matched on word boundaries,
        case-insensitively, unless negated).
    negations
        Words that negate a following option or phrase (words ending in
        ``n't`` always do).
    negation_window
        Most words allowed between a negation and the negated mention.
    refusal_decision
        When set (e.g. ``"refuse"``), a refusal phrase is a decision with
        this name, not an abstention: in jailbreak benchmarks refusing is
        the right answer (docs/spec/data-model.md). The name must be one of
        the case's options, else the answer is malformed ("decision outside
        options"). ``refusal_reason`` keeps the phrase found.
    case_sensitive
        Match decisions and options case-sensitively (default: no).
    name
        A label for reports.

    Examples
    --------
    >>> ParserConfig.from_mapping({"rules": ["json", "options"]}).rules
    ('json', 'options')
    """

    rules: tuple[str, ...] = RULES
    abstain_phrases: tuple[str, ...] = DEFAULT_ABSTAIN_PHRASES
    refusal_phrases: tuple[str, ...] = DEFAULT_REFUSAL_PHRASES
    negations: tuple[str, ...] = DEFAULT_NEGATIONS
    negation_window: int = 3
    refusal_decision: str | None = None
    case_sensitive: bool = False
    name: str = field(default="custom")

    def __post_init__(self) -> None:
        unknown = [r for r in self.rules if r not in RULES]
        if unknown or not self.rules:
            raise ParserConfigError(
                f"parser {self.name!r}: unknown rule(s) {unknown} (or no rules); "
                f"rules are {list(RULES)}"
            )
        if len(set(self.rules)) != len(self.rules):
            raise ParserConfigError(f"parser {self.name!r}: a rule is listed twice: {self.rules}")
        if self.refusal_decision is not None and (
            not isinstance(self.refusal_decision, str) or not self.refusal_decision.strip()
        ):
            raise ParserConfigError(
                f"parser {self.name!r}: refusal_decision must be a non-empty string or null"
            )
        if self.negation_window < 0:
            raise ParserConfigError(f"parser {self.name!r}: negation_window must be >= 0")
        for attr in ("abstain_phrases", "refusal_phrases", "negations"):
            if any(not isinstance(p, str) or not p.strip() for p in getattr(self, attr)):
                raise ParserConfigError(f"parser {self.name!r}: {attr} holds an empty phrase")

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any], *, name: str = "custom") -> ParserConfig:
        """Build a config from a mapping (e.g. parsed JSON).

        ``"extends"`` names a parser whose settings the mapping overrides;
        list values become tuples. Unknown keys raise :class:`ParserConfigError`.
        """
        known = {f.name for f in fields(cls)}
        extra = set(config) - known - {"extends"}
        if extra:
            raise ParserConfigError(
                f"parser config {name!r}: unknown key(s) {sorted(extra)}; known: {sorted(known)}"
            )
        base = resolve_parser(str(config["extends"])) if "extends" in config else cls()
        kw: dict[str, Any] = {"name": str(config.get("name", name))}
        for k, v in config.items():
            if k in ("extends", "name"):
                continue
            if isinstance(v, list | tuple):
                v = tuple(v)
            kw[k] = v
        try:
            return replace(base, **kw)
        except TypeError as exc:  # pragma: no cover - replace() rejects odd values
            raise ParserConfigError(f"parser config {name!r}: {exc}") from exc


PARSERS: dict[str, ParserConfig] = {
    "auto": ParserConfig(name="auto"),
    **{r: ParserConfig(rules=(r,), name=r) for r in RULES},
}


def resolve_parser(parser: str | PathLike | Mapping[str, Any] | ParserConfig) -> ParserConfig:
    """A :class:`ParserConfig` from a name in :data:`PARSERS`, a mapping, a JSON file
    or inline JSON (a string starting with ``{``).

    Raises
    ------
    ParserConfigError
        Unknown name, unreadable file or invalid configuration.
    """
    if isinstance(parser, ParserConfig):
        return parser
    if isinstance(parser, Mapping):
        return ParserConfig.from_mapping(parser)
    if isinstance(parser, str) and parser in PARSERS:
        return PARSERS[parser]
    if isinstance(parser, str) and parser.lstrip().startswith("{"):
        try:
            inline = _json.loads(parser)
        except json.JSONDecodeError as exc:
            raise ParserConfigError(
                f"inline parser config: invalid JSON at column {exc.colno}: {_json.describe(exc)}"
            ) from None
        except ValueError as exc:
            raise ParserConfigError(f"inline parser config: invalid JSON: {exc}") from None
        if not isinstance(inline, dict):
            raise ParserConfigError("inline parser config: must be a JSON object")
        return ParserConfig.from_mapping(inline, name=str(inline.get("name", "inline")))
    p = Path(parser)
    try:
        is_file = p.is_file()
    except (OSError, ValueError):  # not a usable path (too long, a NUL byte): not a file
        is_file = False
    if is_file:
        try:
            _json.check_size(p, limit=16 * 1024**2)
            cfg = _json.loads(p.read_bytes().decode("utf-8-sig"))
        except json.JSONDecodeError as exc:
            raise ParserConfigError(
                f"{p}:{exc.lineno}:{exc.colno}: invalid JSON in the parser config: "
                f"{_json.describe(exc)}"
            ) from None
        except UnicodeDecodeError as exc:
            raise ParserConfigError(
                f"{p}: the parser config is not UTF-8 text (byte {exc.start})"
            ) from None
        except OSError as exc:
            raise ParserConfigError(f"{p}: cannot read parser config: {exc.strerror}") from None
        except ValueError as exc:
            raise ParserConfigError(f"{p}: invalid parser config: {exc}") from None
        if not isinstance(cfg, dict):
            raise ParserConfigError(f"{p}: a parser config must be a JSON object")
        return ParserConfig.from_mapping(cfg, name=p.stem)
    raise ParserConfigError(
        f"unknown parser {str(parser)!r}: expected one of {sorted(PARSERS)}, a JSON config "
        "file or inline JSON"
    )


# ---------------------------------------------------------------- rule outputs
#
# A rule takes a frame with ``_row``, ``_text`` (str, not null, not blank),
# ``_oid`` (options id; ``opts`` maps ``_oid`` to ``_options``, a list[str])
# and returns, row for row and in the same order,
# ``_hit`` (recognised), ``_dec`` (decision as written), ``_abst`` (bool),
# ``_refusal``, ``_score_s``, ``_conf_s`` (numbers as written) and ``_err``.

_OUT = ("_hit", "_dec", "_abst", "_refusal", "_score_s", "_conf_s", "_err")
_S = pl.String()
_NUM = r"(\d+(?:\.\d+)?|\.\d+)"


def _out(
    hit: pl.Expr,
    dec: pl.Expr | None = None,
    abst: pl.Expr | None = None,
    refusal: pl.Expr | None = None,
    score: pl.Expr | None = None,
    conf: pl.Expr | None = None,
    err: pl.Expr | None = None,
) -> list[pl.Expr]:
    def s(e: pl.Expr | None) -> pl.Expr:
        return pl.lit(None, dtype=_S) if e is None else e.cast(_S)

    return [
        hit.fill_null(False).alias("_hit"),
        s(dec).alias("_dec"),
        (pl.lit(False) if abst is None else abst.fill_null(False)).alias("_abst"),
        s(refusal).alias("_refusal"),
        s(score).alias("_score_s"),
        s(conf).alias("_conf_s"),
        s(err).alias("_err"),
    ]


def _lazy_select(df: pl.DataFrame, *exprs: pl.Expr) -> pl.DataFrame:
    """``df.select(*exprs)`` through the lazy engine."""
    return df.lazy().select(*exprs).collect()


def _staged(df: pl.DataFrame, *stages: list[pl.Expr], out: list[pl.Expr]) -> pl.DataFrame:
    """Add each stage's columns in turn (so that an extraction used by several
    outputs runs once), then select ``out``."""
    lf = df.lazy()
    for stage in stages:
        lf = lf.with_columns(stage)
    return lf.select(out).collect()


def _rule_synth(df: pl.DataFrame, cfg: ParserConfig, opts: pl.DataFrame) -> pl.DataFrame:
    t = pl.col("_text")
    dec, sco = pl.col("_d"), pl.col("_s")
    abst, ref = pl.col("_a"), pl.col("_r")
    d1, c1 = dec.struct.field("1"), dec.struct.field("2")
    s2, d2, c2 = sco.struct.field("1"), sco.struct.field("2"), sco.struct.field("3")
    return _staged(
        df,
        [
            t.str.extract_groups(r"^Decision: ([^\s()]+) \(confidence ([01]\.\d{2})\)$").alias(
                "_d"
            ),
            t.str.extract_groups(
                r"^Score: ([01]\.\d{3}) -> ([^\s()]+) \(confidence ([01]\.\d{2})\)$"
            ).alias("_s"),
            t.str.extract(r"^ABSTAIN: (.+)$", 1).alias("_a"),
            t.str.extract(r"^REFUSED: (.+)$", 1).alias("_r"),
        ],
        out=_out(
            hit=d1.is_not_null() | d2.is_not_null() | abst.is_not_null() | ref.is_not_null(),
            dec=pl.coalesce(d1, d2),
            abst=abst.is_not_null() | ref.is_not_null(),
            refusal=ref,
            score=s2,
            conf=pl.coalesce(c1, c2),
        ),
    )


def _json_bool(e: pl.Expr) -> pl.Expr:
    return e.str.to_lowercase().is_in(["true", "yes", "1"])


def _only(
    df: pl.DataFrame, candidate: pl.Expr, rule: Callable[[pl.DataFrame], pl.DataFrame]
) -> pl.DataFrame:
    """Apply ``rule`` to the candidate rows only; the others are not recognised."""
    cand = df.filter(candidate)
    if cand.height == df.height:
        return rule(df)
    got = pl.concat([cand.select("_row"), rule(cand)], how="horizontal")
    return (
        df.select("_row")
        .join(got, on="_row", how="left", maintain_order="left")
        .drop("_row")
        .with_columns(pl.col("_hit").fill_null(False), pl.col("_abst").fill_null(False))
    )


def _rule_json(df: pl.DataFrame, cfg: ParserConfig, opts: pl.DataFrame) -> pl.DataFrame:
    start = pl.col("_text").str.strip_chars_start()
    return _only(df, start.str.starts_with("{") | start.str.starts_with("```"), _json_outputs)


_MAX_CLOSING_BRACES = 64


def _json_body(df: pl.DataFrame) -> pl.Series:
    """The first top-level JSON object of each text (null when the text has none).

    The shortest prefix ending at a ``}`` that is valid JSON is the first
    balanced object (a ``}`` inside a string, or closing an inner object,
    gives an invalid prefix). Prefixes are tried for the 1st, 2nd, … ``}``
    (at most 64) over the rows still unresolved — vectorised per brace
    count; a text with no valid prefix keeps its whole candidate (then
    reported as invalid JSON).
    """
    t = pl.col("_text").str.strip_chars()
    src = df.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_i"),
        pl.coalesce(
            t.str.extract(r"(?s)^```[A-Za-z]*\s*(\{.*?)\s*```", 1),
            pl.when(t.str.starts_with("{")).then(t),
        ).alias("_src"),
    )
    found: list[pl.DataFrame] = []
    todo = src.filter(pl.col("_src").is_not_null()).with_columns(
        pl.col("_src").str.count_matches("}", literal=True).alias("_nb")
    )
    for k in range(1, _MAX_CLOSING_BRACES + 1):
        todo = todo.filter(pl.col("_nb") >= k)
        if todo.is_empty():
            break
        cand = todo.with_columns(
            pl.col("_src").str.extract(r"(?s)^((?:[^}]*\}){" + str(k) + "})", 1).alias("_b")
        )
        ok = cand["_b"].str.json_path_match("$").is_not_null()
        found.append(cand.filter(ok).select("_i", "_b"))
        todo = todo.filter(ok.not_())
    got = pl.concat(found) if found else pl.DataFrame(schema={"_i": pl.UInt32, "_b": _S})
    return (
        src.join(got, on="_i", how="left", maintain_order="left")
        .select(pl.coalesce("_b", "_src"))
        .to_series()
        .alias("_body")
    )


def _json_outputs(df: pl.DataFrame) -> pl.DataFrame:
    df = df.with_columns(_json_body(df))
    b = pl.col("_body")

    def path(*keys: str) -> pl.Expr:
        return pl.coalesce(*[b.str.json_path_match(f"$.{k}") for k in keys])

    dec, refusal, abst = pl.col("_jd"), pl.col("_jr"), pl.col("_ja")
    err = (
        pl.when(pl.col("_valid").not_())
        .then(pl.lit("unparseable output: invalid JSON"))
        .when(dec.is_null() & abst.not_())
        .then(pl.lit("unparseable output: JSON object has no decision"))
    )
    return _staged(
        df,
        [
            b.str.json_path_match("$").is_not_null().alias("_valid"),
            path("decision", "answer").alias("_jd"),
            path("refusal_reason", "refusal").alias("_jr"),
            path("abstain", "abstained").alias("_ja"),
        ],
        [(_json_bool(abst).fill_null(False) | refusal.is_not_null()).alias("_ja")],
        out=_out(
            hit=b.is_not_null(),
            dec=dec,
            abst=abst,
            refusal=refusal,
            score=path("score"),
            conf=path("confidence"),
            err=err,
        ),
    )


_ABSTAIN_TOKENS = ["abstain", "abstained", "abstention"]
_LINE = r"(?im)^[\s*#>_-]*(?:final\s+)?(?:decision|answer|verdict)\**\s*[:=]([^\n]*)$"
_ABSTAINED = "\x00abstain"


def _option_patterns(opts: pl.DataFrame, cfg: ParserConfig) -> pl.DataFrame:
    """Per options id, ``_pat``: one regex capturing the first option named
    (longest option first, on word boundaries). Built once per distinct option
    set, not per row."""
    oids, pats = [], []
    for oid, options in opts.select("_oid", "_options").iter_rows():
        named = [o for o in (options or []) if o]
        oids.append(oid)
        pats.append(_flags(cfg) + "(" + _bounded_alt(named) + ")" if named else None)
    return pl.DataFrame({"_oid": oids, "_pat": pats}, schema={"_oid": pl.UInt32, "_pat": _S})


_MAX_PATTERN_GROUPS = 256


def _extract_by_pattern(df: pl.DataFrame, text: str, pat: str, name: str) -> pl.DataFrame:
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


def _rule_decision_line(df: pl.DataFrame, cfg: ParserConfig, opts: pl.DataFrame) -> pl.DataFrame:
    """``Decision: …`` lines (the rest of each line matched against the options),
    else ``Score: s -> …``. A line naming no option (and no abstention) is not
    claimed, so later rules still try the text; lines naming different
    decisions are malformed."""
    pats = _option_patterns(opts, cfg)
    fold = (lambda e: e) if cfg.case_sensitive else (lambda e: e.str.to_lowercase())
    t = pl.col("_text")
    rest = pl.col("_rest")
    exploded = (
        df.lazy()
        .select("_row", "_oid", t.str.extract_all(_LINE).alias("_rest"))
        .explode("_rest")
        .filter(rest.is_not_null())
        .join(pats.lazy(), on="_oid", how="left")
        .with_columns(rest.str.extract(_LINE, 1).alias("_rest"))
        .collect()
    )
    lines = (
        _extract_by_pattern(exploded, "_rest", "_pat", "_m")
        .lazy()
        .with_columns(
            rest.str.extract(r"^[\s*\"'`]*([A-Za-z]+)", 1)
            .str.to_lowercase()
            .is_in(_ABSTAIN_TOKENS)
            .alias("_ab"),
        )
        .with_columns(
            pl.coalesce(fold(pl.col("_m")), pl.when("_ab").then(pl.lit(_ABSTAINED))).alias("_v")
        )
        .filter(pl.col("_v").is_not_null())
        .group_by("_row")
        .agg(
            pl.col("_v").unique(maintain_order=True).alias("_vals"),
            pl.col("_m").first().alias("_lm"),
        )
    )
    base = df.join(pats, on="_oid", how="left", maintain_order="left").with_columns(
        t.str.extract_groups(r"(?i)\bscore\s*[:=]\s*" + _NUM + r"\s*(?:->|→|=>)([^\n]*)").alias(
            "_arrow"
        )
    )
    base = _extract_by_pattern(
        base.with_columns(pl.col("_arrow").struct.field("2").alias("_arest")),
        "_arest",
        "_pat",
        "_am",
    )
    arrow = pl.col("_arrow")
    vals = pl.col("_vals")
    n = vals.list.len().fill_null(0)
    line_abst = (n == 1) & (vals.list.first() == _ABSTAINED)
    am = pl.col("_am")
    return _staged(
        base.join(lines.collect(), on="_row", how="left", maintain_order="left"),
        [
            t.str.extract(r"(?i)\bconfidence\b\s*(?:[:=]|of|is)?\s*" + _NUM, 1).alias("_cf"),
            pl.coalesce(
                arrow.struct.field("1"), t.str.extract(r"(?i)\bscore\s*[:=]\s*" + _NUM, 1)
            ).alias("_sc"),
        ],
        out=_out(
            hit=(n >= 1) | am.is_not_null(),
            dec=pl.when(n == 0).then(am).when((n == 1) & line_abst.not_()).then(pl.col("_lm")),
            abst=line_abst,
            score=pl.col("_sc"),
            conf=pl.col("_cf"),
            err=pl.when(n > 1).then(
                pl.lit("unparseable output: conflicting decisions: ")
                + vals.list.eval(pl.element().replace(_ABSTAINED, "abstain")).list.join(", ")
            ),
        ),
    )


def _negation_prefix(cfg: ParserConfig) -> str:
    words = "|".join(_escape(w) for w in cfg.negations)
    neg = r"(?:\b(?:" + words + r")\b|\b\w+n't\b)" if words else r"(?:\b\w+n't\b)"
    return neg + r"\s+(?:[\w']+\s+){0," + str(cfg.negation_window) + "}"


def _escape(s: str) -> str:
    special = set(r"\.+*?()|[]{}^$#&-~")
    return "".join("\\" + c if c in special else c for c in s).replace(" ", r"\s+")


def _flags(cfg: ParserConfig) -> str:
    return "" if cfg.case_sensitive else "(?i)"


def _matched_text(t: pl.Expr) -> pl.Expr:
    return t.str.replace_all("’", "'", literal=True)


def _rule_abstain(df: pl.DataFrame, cfg: ParserConfig, opts: pl.DataFrame) -> pl.DataFrame:
    t = _matched_text(pl.col("_text"))
    neg = _negation_prefix(cfg)

    def found(phrases: Sequence[str]) -> tuple[pl.Expr, pl.Expr]:
        if not phrases:
            return pl.lit(False), pl.lit(None, dtype=_S)
        pat = _bounded_alt(phrases)
        n_all = t.str.count_matches("(?i)" + pat)
        n_neg = t.str.count_matches("(?i)" + neg + pat)
        return n_all > n_neg, t.str.extract("(?i)(" + pat + ")", 1)

    refused, refusal = found(cfg.refusal_phrases)
    abstained, _ = found(cfg.abstain_phrases)
    if cfg.refusal_decision is not None:  # a refusal is a named decision
        return _lazy_select(
            df,
            *_out(
                hit=refused | abstained,
                dec=pl.when(refused).then(pl.lit(cfg.refusal_decision)),
                abst=refused.not_() & abstained,
                refusal=pl.when(refused).then(refusal),
            ),
        )
    return _lazy_select(
        df,
        *_out(
            hit=refused | abstained,
            abst=refused | abstained,
            refusal=pl.when(refused).then(refusal),
        ),
    )


def _bounded_alt(phrases: Sequence[str]) -> str:
    """A regex group matching any phrase, on word boundaries where it has word characters."""
    parts = []
    for p in sorted(phrases, key=len, reverse=True):
        lb = r"\b" if (p[0].isalnum() or p[0] == "_") else ""
        rb = r"\b" if (p[-1].isalnum() or p[-1] == "_") else ""
        parts.append(lb + _escape(p) + rb)
    return "(?:" + "|".join(parts) + ")"


def _mention_patterns(opts: pl.DataFrame, cfg: ParserConfig) -> pl.DataFrame:
    """Per (options id, option): ``_pa``, a regex for the option *or* any longer
    option of the set that contains it (longest first), and ``_pl``, the same
    without the option itself (null when no longer option contains it).

    With leftmost-first alternation, matches of ``_pa`` minus matches of
    ``_pl`` count the option's mentions that are not part of a longer
    option's mention (``review`` in ``human review``): the longer options are
    matched first and their spans masked. Built once per distinct option set.
    """
    import re

    flags = 0 if cfg.case_sensitive else re.IGNORECASE
    rows: list[tuple[int, str, str, str | None]] = []
    for oid, options in opts.select("_oid", "_options").iter_rows():
        named = list(dict.fromkeys(o for o in (options or []) if o))
        for o in named:
            own = re.compile(_bounded_alt([o]), flags)
            longer = [x for x in named if len(x) > len(o) and own.search(x)]
            rows.append(
                (oid, o, _bounded_alt([o, *longer]), _bounded_alt(longer) if longer else None)
            )
    return pl.DataFrame(
        rows, schema={"_oid": pl.UInt32, "_opt": _S, "_pa": _S, "_pl": _S}, orient="row"
    )


def _rule_options(df: pl.DataFrame, cfg: ParserConfig, opts: pl.DataFrame) -> pl.DataFrame:
    flags = _flags(cfg)
    neg = _negation_prefix(cfg)
    t = _matched_text(pl.col("_text"))
    pa, pl_ = pl.col("_pa"), pl.col("_pl")

    def count(prefix: str, pat: pl.Expr) -> pl.Expr:
        return t.str.count_matches(pl.lit(prefix) + pat).fill_null(0)

    mentions = count(flags, pa) - pl.when(pl_.is_not_null()).then(count(flags, pl_)).otherwise(0)
    negated = count(flags + neg, pa) - pl.when(pl_.is_not_null()).then(
        count(flags + neg, pl_)
    ).otherwise(0)
    per_option = (
        df.lazy()
        .select("_row", "_text", "_oid")
        .join(_mention_patterns(opts, cfg).lazy(), on="_oid", maintain_order="left")
        .with_columns((mentions > negated).alias("_named"))
        .group_by("_row")
        .agg(
            pl.col("_named").sum().alias("_n"),
            pl.col("_opt").filter(pl.col("_named")).alias("_which"),
        )
        .collect()
    )
    joined = df.select("_row").join(per_option, on="_row", how="left", maintain_order="left")
    n = pl.col("_n").fill_null(0)
    which = pl.col("_which")
    return _lazy_select(
        joined,
        *_out(
            hit=n >= 1,
            dec=pl.when(n == 1).then(which.list.first()),
            err=pl.when(n > 1).then(
                pl.lit("unparseable output: several options named: ") + which.list.join(", ")
            ),
        ),
    )


_RULE_FUNCS = {
    "json": _rule_json,
    "synth": _rule_synth,
    "decision-line": _rule_decision_line,
    "abstain": _rule_abstain,
    "options": _rule_options,
}


# ---------------------------------------------------------------- assembly


def _unit_number(col: str, label: str) -> tuple[pl.Expr, pl.Expr]:
    """(value, error) of a number given as text; error when not a number in [0, 1]."""
    s = pl.col(col).str.strip_chars()
    v = s.cast(pl.Float64, strict=False)
    bad = s.is_not_null() & (v.is_null() | v.is_nan() | (v < 0.0) | (v > 1.0))
    err = pl.when(bad).then(pl.format(f"{label} outside [0, 1]: {{}}", s))
    return pl.when(bad.not_()).then(v), err


def parse_frame(
    df: pl.DataFrame,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    text: str = "raw_text",
    options: str = "options",
    keep_rule: bool = False,
) -> pl.DataFrame:
    """Parse a column of raw text against a column of options.

    Parameters
    ----------
    df
        A frame with a string column ``text`` and a ``list[str]`` column
        ``options`` (the case's options, per row).
    parser
        A name in :data:`PARSERS`, a mapping, a JSON file or a
        :class:`ParserConfig`.
    keep_rule
        Add ``parse_rule``: the rule that recognised each text (null when
        none did).

    Returns
    -------
    polars.DataFrame
        ``df`` row for row with ``decision``, ``abstained``,
        ``refusal_reason``, ``score``, ``confidence``, ``malformed`` and
        ``error`` (re)computed; ``error`` is null when the text is null (the
        caller decides what a missing output means).

    Examples
    --------
    >>> df = pl.DataFrame({"raw_text": ["Decision: deny (confidence 0.80)",
    ...     '{"decision": "Approve", "confidence": 0.7}', "I would not approve this.",
    ...     "I abstain."], "options": [["approve", "deny"]] * 4})
    >>> parse_frame(df).select("decision", "abstained", "confidence", "malformed").rows()
    [('deny', False, 0.8, False), ('approve', False, 0.7, False), (None, False, None, True), (None, True, None, False)]
    """
    cfg = resolve_parser(parser)
    with_id = df.select(
        pl.col(text).cast(_S).alias("_raw"),
        pl.col(options).list.join("\x1f").rank("dense").cast(pl.UInt32).alias("_oid"),
        pl.col(options).alias("_options"),
    )
    opts = with_id.select("_oid", "_options").unique("_oid")
    parsed = _parse_core(with_id.select("_raw", "_oid"), opts, cfg, keep_rule=keep_rule)
    order = [*df.columns, *[c for c in parsed.columns if c not in df.columns]]
    return pl.concat(
        [df.drop([c for c in parsed.columns if c in df.columns]), parsed], how="horizontal"
    ).select(order)


def _parse_core(
    frame: pl.DataFrame, opts: pl.DataFrame, cfg: ParserConfig, *, keep_rule: bool
) -> pl.DataFrame:
    """Parse ``_raw`` against the options ``_oid`` names in ``opts``; the parsed columns."""
    work = frame.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"))
    blank = pl.col("_raw").str.strip_chars().str.len_chars() == 0
    remaining = work.filter(pl.col("_raw").is_not_null() & blank.not_()).select(
        "_row", pl.col("_raw").alias("_text"), "_oid"
    )
    done: list[pl.DataFrame] = []
    for rule in cfg.rules:
        if remaining.is_empty():
            break
        out = _RULE_FUNCS[rule](remaining, cfg, opts)
        hit = out["_hit"]
        done.append(
            pl.concat([remaining.select("_row", "_oid"), out], how="horizontal")
            .filter(hit)
            .with_columns(pl.lit(rule).alias("_rule"), pl.lit(False).alias("_no_text"))
        )
        remaining = remaining.filter(hit.not_())
    parsed_rows = [d.select("_row") for d in done]
    unparsed = work.join(
        pl.concat(parsed_rows) if parsed_rows else work.select("_row").clear(),
        on="_row",
        how="anti",
    )
    no_text = pl.col("_raw").is_null()
    reason = (
        pl.when(no_text)
        .then(pl.lit(None, dtype=_S))
        .when(pl.col("_raw").str.strip_chars().str.len_chars() == 0)
        .then(pl.lit("empty response"))
        .otherwise(pl.lit(f"unparseable output: no decision found (parser {cfg.name!r})"))
    )
    fallback = unparsed.select(
        "_row",
        "_oid",
        *_out(hit=pl.lit(False), err=reason),
        pl.lit(None, dtype=_S).alias("_rule"),
        no_text.alias("_no_text"),
    )
    allp = pl.concat([*done, fallback], how="vertical_relaxed").sort("_row")

    # resolve the decision against the options: a join on (options id, folded
    # decision) with the small table of (options id, folded option, option)
    def fold(e: pl.Expr) -> pl.Expr:
        return e if cfg.case_sensitive else e.str.to_lowercase()

    lookup = (
        opts.select("_oid", pl.col("_options").alias("_canon"))
        .explode("_canon")
        .filter(pl.col("_canon").is_not_null())
        .with_columns(fold(pl.col("_canon")).alias("_dkey"))
        .unique(["_oid", "_dkey"], keep="first", maintain_order=True)
    )
    d = pl.col("_dec")
    allp = allp.with_columns(d.str.strip_chars().alias("_dec"))
    allp = allp.with_columns(fold(d).alias("_dkey")).join(
        lookup, on=["_oid", "_dkey"], how="left", maintain_order="left"
    )
    canon = pl.col("_canon")
    score, score_err = _unit_number("_score_s", "score")
    conf, conf_err = _unit_number("_conf_s", "confidence")
    err = pl.coalesce(
        pl.col("_err"),
        pl.when(pl.col("_abst") & d.is_not_null()).then(
            pl.format("conflicting output: abstains and decides '{}'", d)
        ),
        pl.when(d.is_not_null() & canon.is_null()).then(
            pl.format("decision outside options: '{}'", d)
        ),
        pl.when(pl.col("_hit") & pl.col("_abst").not_() & d.is_null()).then(
            pl.lit("unparseable output: no decision found")
        ),
        pl.when(pl.col("_abst").not_()).then(pl.coalesce(score_err, conf_err)),
    )
    bad = pl.col("_error").is_not_null() | pl.col("_no_text")
    answered = bad.not_() & pl.col("_abst").not_()
    refused = pl.col("_abst")
    if cfg.refusal_decision is not None:  # a refusal named as a decision keeps its phrase
        refused = refused | (answered & (canon == cfg.refusal_decision).fill_null(False))
    return (
        allp.lazy()
        .with_columns(err.alias("_error"))
        .select(
            pl.when(answered).then(canon).alias("decision"),
            (bad.not_() & pl.col("_abst")).alias("abstained"),
            pl.when(bad.not_() & refused).then(pl.col("_refusal")).alias("refusal_reason"),
            pl.when(answered).then(score).alias("score"),
            pl.when(answered).then(conf).alias("confidence"),
            bad.alias("malformed"),
            pl.col("_error").alias("error"),
            *([pl.col("_rule").alias("parse_rule")] if keep_rule else []),
        )
        .collect()
    )


def parse_responses(
    log: pl.DataFrame | pl.LazyFrame,
    cases: pl.DataFrame,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    keep_rule: bool = False,
) -> pl.DataFrame:
    """Rebuild the decisions of a response log from its ``raw_text``.

    Parameters
    ----------
    log
        A response log (SPEC §2.3) with ``raw_text``.
    cases
        The cases table; each row's options come from its case.
    parser
        A name in :data:`PARSERS` (default ``"auto"``), a mapping, a JSON file
        or a :class:`ParserConfig`.
    keep_rule
        Add ``parse_rule``, the rule that recognised each text.

    Returns
    -------
    polars.DataFrame
        The log, same rows in the same order, with ``decision``,
        ``abstained``, ``refusal_reason``, ``score``, ``confidence``,
        ``malformed`` and ``error`` rebuilt from ``raw_text``. A row without
        ``raw_text`` is malformed and keeps its logged ``error`` (or reads
        ``no output (raw_text is null)``). A row whose attack produced no
        adversarial input (``no_attack``) keeps its logged values. Nothing
        else changes; extra columns are kept.

    Raises
    ------
    ValidationError
        The log has no ``raw_text`` column or refers to unknown cases.
    ParserConfigError
        Unknown or invalid parser.
    """
    cfg = resolve_parser(parser)
    df = log.collect() if isinstance(log, pl.LazyFrame) else log
    if "raw_text" not in df.columns:
        raise ValidationError(
            "responses: no raw_text column; nothing to re-parse",
            failures_frame(
                [
                    {
                        "table": "responses",
                        "source": "responses",
                        "row": None,
                        "key": "",
                        "column": "raw_text",
                        "check": "missing_column",
                        "value": "(missing)",
                    }
                ]
            ),
        )
    case_opts = cases.select(
        "case_id",
        pl.col("options").list.join("\x1f").rank("dense").cast(pl.UInt32).alias("_oid"),
        "options",
    )
    joined = df.select("case_id").join(
        case_opts.select("case_id", "_oid"), on="case_id", how="left", maintain_order="left"
    )
    unknown = df.with_row_index("_i").filter(joined["_oid"].is_null())
    if unknown.height:
        rows = [
            {
                "table": "responses",
                "source": "responses",
                "row": int(r["_i"]),
                "key": f"case_id={r['case_id']!r}",
                "column": "case_id",
                "check": "known_case",
                "value": repr(r["case_id"]),
            }
            for r in unknown.head(100).iter_rows(named=True)
        ]
        raise ValidationError(
            f"responses: {unknown.height} row(s) refer to cases not in the dataset "
            f"(first: case_id={unknown['case_id'][0]!r})",
            failures_frame(rows),
        )
    opts = case_opts.select("_oid", pl.col("options").alias("_options")).unique("_oid")
    frame = pl.DataFrame([df["raw_text"].cast(_S).alias("_raw"), joined["_oid"]])
    parsed = _parse_core(frame, opts, cfg, keep_rule=keep_rule)
    logged_error = (
        df["error"].cast(_S)
        if "error" in df.columns
        else pl.repeat(None, df.height, dtype=_S, eager=True)
    )
    parsed = parsed.with_columns(
        pl.when(frame["_raw"].is_null())
        .then(pl.coalesce(pl.lit(logged_error), pl.lit("no output (raw_text is null)")))
        .otherwise(pl.col("error"))
        .alias("error")
    )
    if "no_attack" in df.columns:
        # no adversarial input was produced: nothing to re-parse, the row stays as logged
        keep = df["no_attack"].fill_null(False)
        parsed = parsed.with_columns(
            pl.when(pl.lit(keep)).then(pl.lit(df[c])).otherwise(pl.col(c)).alias(c)
            for c in parsed.columns
            if c in df.columns
        )
    order = [*df.columns, *[c for c in parsed.columns if c not in df.columns]]
    out = pl.concat(
        [df.drop([c for c in parsed.columns if c in df.columns]), parsed], how="horizontal"
    ).select(order)
    return out.with_columns(
        pl.col(c).cast(RESPONSES_SCHEMA[c])
        for c in (
            "decision",
            "abstained",
            "refusal_reason",
            "score",
            "confidence",
            "malformed",
            "error",
        )
    )


# ---------------------------------------------------------------- rescoring

_CHANGE_COLUMNS = ("decision", "abstained", "refusal_reason", "score", "confidence", "malformed")


@dataclass(frozen=True)
class RescoreResult:
    """What re-parsing a response log changed.

    Attributes
    ----------
    responses : polars.DataFrame
        The log with decisions rebuilt from ``raw_text`` (same rows, same order).
    summary : polars.DataFrame
        Per run: ``n_rows``, ``n_rows_changed`` (any of decision, abstained,
        refusal_reason, score, confidence, malformed differs), ``n_pairs``,
        ``n_eligibility_changed``, ``n_flip_changed``; sorted by run_id.
    changed_pairs : polars.DataFrame
        Pairs whose ``eligible`` or ``flipped`` changed: keys, both arms'
        logged and re-parsed decision/abstained/malformed, and
        ``eligible_logged``, ``eligible_reparsed``, ``flipped_logged``,
        ``flipped_reparsed``; sorted by run_id, case_id, sample.
    metric_deltas : polars.DataFrame
        Long format, one row per run × metric value of
        :func:`peira.metrics.metric_table` (those of
        :data:`peira.metrics.METRICS`; not the ``*_n`` counts, the
        ``*_sufficient`` flags or ``ranked``): ``logged``, ``reparsed``,
        ``delta`` (reparsed − logged; null when either is null) and
        ``changed`` (values differ, nulls included); sorted by run_id, then
        metric-table column order.
    parser : ParserConfig
        The parser used.
    """

    responses: pl.DataFrame
    summary: pl.DataFrame
    changed_pairs: pl.DataFrame
    metric_deltas: pl.DataFrame
    parser: ParserConfig


def _metric_long(table: pl.DataFrame, source: str) -> pl.DataFrame:
    from .metrics import METRICS, RATIO_METRICS

    known = set(METRICS) | set(RATIO_METRICS)
    numeric = [  # metric values only: not counts (*_n), flags (*_sufficient) or gates
        c for c, t in table.schema.items() if c in known and (t.is_numeric() or t == pl.Boolean)
    ]
    return (
        table.select("run_id", *[pl.col(c).cast(pl.Float64) for c in numeric])
        .unpivot(index="run_id", variable_name="metric", value_name=source)
        .with_columns(
            pl.col("metric")
            .replace_strict({c: i for i, c in enumerate(numeric)}, return_dtype=pl.Int64)
            .alias("_order")
        )
    )


def rescore(
    log: pl.DataFrame | pl.LazyFrame,
    cases: pl.DataFrame,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    missing: Literal["error", "malformed"] = "error",
    delta: float = 0.10,
) -> RescoreResult:
    """Re-parse ``raw_text``, rebuild decisions and report what changes — no model call.

    Parameters
    ----------
    log
        A response log with ``raw_text``.
    cases
        The dataset's cases.
    parser
        As in :func:`parse_responses` (default ``"auto"``).
    missing, delta
        Passed to :func:`peira.pairs.build_pairs`.

    Returns
    -------
    RescoreResult

    Notes
    -----
    Pairs and metrics are rebuilt with :func:`peira.pairs.build_pairs` and
    :func:`peira.metrics.metric_table` from both the logged and the
    re-parsed decisions. Runs none of whose rows changed are not
    recomputed: their re-parsed metrics are the logged ones.

    Examples
    --------
    >>> from peira.synth import generate
    >>> bench = generate(40, 2, seed=1)
    >>> res = rescore(bench.responses, bench.cases, parser="synth")
    >>> res.summary["n_rows_changed"].to_list(), res.changed_pairs.height
    ([0, 0], 0)
    """
    from .metrics import metric_table
    from .pairs import build_pairs

    cfg = resolve_parser(parser)
    df = log.collect() if isinstance(log, pl.LazyFrame) else log
    new = parse_responses(df, cases, parser=cfg)
    row_changed = pl.any_horizontal([pl.col(c).ne_missing(new[c]) for c in _CHANGE_COLUMNS]).alias(
        "_changed"
    )
    flags = df.select("run_id", row_changed)
    per_run = flags.group_by("run_id").agg(
        pl.len().alias("n_rows"), pl.col("_changed").sum().cast(pl.Int64).alias("n_rows_changed")
    )
    changed_runs = per_run.filter(pl.col("n_rows_changed") > 0)["run_id"].to_list()

    pairs_old = build_pairs(df, cases, missing=missing, delta=delta)
    keys = ["run_id", "case_id", "sample"]
    sub_new = new.filter(pl.col("run_id").is_in(changed_runs))
    if changed_runs:
        pairs_new = build_pairs(sub_new, cases, missing=missing, delta=delta)
    else:
        pairs_new = pairs_old.clear()
    arm_cols = [f"{a}_{c}" for a in ("b", "a") for c in ("decision", "abstained", "malformed")]
    cmp = (
        pairs_old.filter(pl.col("run_id").is_in(changed_runs))
        .select(*keys, *arm_cols, "eligible", "flipped")
        .join(
            pairs_new.select(*keys, *arm_cols, "eligible", "flipped"),
            on=keys,
            how="full",
            coalesce=True,
            suffix="_reparsed",
        )
        .rename({c: f"{c}_logged" for c in [*arm_cols, "eligible", "flipped"]})
    )
    elig = pl.col("eligible_logged").ne_missing(pl.col("eligible_reparsed"))
    flip = pl.col("flipped_logged").ne_missing(pl.col("flipped_reparsed"))
    cmp = cmp.with_columns(elig.alias("eligibility_changed"), flip.alias("flip_changed"))
    changed_pairs = cmp.filter(elig | flip).sort(keys)
    counts = cmp.group_by("run_id").agg(
        pl.col("eligibility_changed").sum().cast(pl.Int64).alias("n_eligibility_changed"),
        pl.col("flip_changed").sum().cast(pl.Int64).alias("n_flip_changed"),
    )
    n_pairs = pairs_old.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("n_pairs"))
    summary = (
        per_run.with_columns(pl.col("n_rows").cast(pl.Int64))
        .join(n_pairs, on="run_id", how="left")
        .join(counts, on="run_id", how="left")
        .with_columns(pl.col("n_eligibility_changed", "n_flip_changed").fill_null(0))
        .select(
            "run_id",
            "n_rows",
            "n_rows_changed",
            "n_pairs",
            "n_eligibility_changed",
            "n_flip_changed",
        )
        .sort("run_id")
    )

    # one metric_table call over the logged pairs and the re-parsed pairs of the
    # changed runs (tagged run ids), so that fixed costs are paid once
    tag = "\x1f(reparsed)"
    both = pl.concat(
        [pairs_old, pairs_new.with_columns(pl.col("run_id") + tag)], how="vertical_relaxed"
    )
    table = metric_table(both, cases=cases)
    is_new = pl.col("run_id").str.ends_with(tag)
    old_long = _metric_long(table.filter(is_new.not_()), "logged")
    new_long = pl.concat(
        [
            _metric_long(
                table.filter(is_new).with_columns(pl.col("run_id").str.strip_suffix(tag)),
                "reparsed",
            ).drop("_order"),
            old_long.filter(pl.col("run_id").is_in(changed_runs).not_()).select(
                "run_id", "metric", pl.col("logged").alias("reparsed")
            ),
        ]
    )
    lg, rp = pl.col("logged"), pl.col("reparsed")
    deltas = (
        old_long.join(new_long, on=["run_id", "metric"], how="left")
        .with_columns((rp - lg).alias("delta"), lg.ne_missing(rp).alias("changed"))
        .sort("run_id", "_order")
        .drop("_order")
    )
    return RescoreResult(
        responses=new,
        summary=summary,
        changed_pairs=changed_pairs,
        metric_deltas=deltas,
        parser=cfg,
    )
