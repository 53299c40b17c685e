"""The parsing rules, one function each, and :data:`PARSER_RULES`, the one table of them.

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
    ``refusal_reason`` (alias ``refusal``; a refusal is an abstention). A
    decision ``"abstain"`` (or ``abstained``, ``abstention``) that is not one
    of the case's options is an abstention, as in a decision line.
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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from .._registry import Registry
from ._patterns import (
    NUM,
    PhraseSettings,
    bounded_alt,
    extract_by_pattern,
    matched_text,
    mention_patterns,
    negation_prefix,
    option_patterns,
    regex_flags,
)

__all__ = ["PARSER_RULES", "RULES", "ParserRule", "RuleFunc", "rule_outputs"]

# A rule takes a frame with ``_row``, ``_text`` (str, not null, not blank),
# ``_oid`` (options id; ``opts`` maps ``_oid`` to ``_options``, a list[str])
# and returns, row for row and in the same order,
# ``_hit`` (recognised), ``_dec`` (decision as written), ``_abst`` (bool),
# ``_refusal``, ``_score_s``, ``_conf_s`` (numbers as written) and ``_err``.

_OUT = ("_hit", "_dec", "_abst", "_refusal", "_score_s", "_conf_s", "_err")
_S = pl.String()


def rule_outputs(
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


def _rule_synth(df: pl.DataFrame, cfg: PhraseSettings, opts: pl.DataFrame) -> pl.DataFrame:
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
        out=rule_outputs(
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


def _rule_json(df: pl.DataFrame, cfg: PhraseSettings, opts: pl.DataFrame) -> pl.DataFrame:
    start = pl.col("_text").str.strip_chars_start()
    out = _only(df, start.str.starts_with("{") | start.str.starts_with("```"), _json_outputs)
    # "abstain" as the decision is an abstention (as in a decision line),
    # unless one of the case's options is spelt so
    fold = (lambda e: e) if cfg.case_sensitive else (lambda e: e.str.to_lowercase())
    d = pl.col("_dec").str.strip_chars()
    token = d.str.to_lowercase().is_in(_ABSTAIN_TOKENS).fill_null(False)
    if not out.select(token.any()).item():
        return out
    is_option = pl.col("_options").list.eval(fold(pl.element())).list.contains(fold(d))
    flip = token & is_option.fill_null(False).not_()
    return (
        pl.concat([out, df.select("_oid")], how="horizontal")
        .join(opts, on="_oid", how="left", maintain_order="left")
        .with_columns(
            pl.when(flip).then(pl.lit(None, dtype=_S)).otherwise(pl.col("_dec")).alias("_dec"),
            (pl.col("_abst") | flip).alias("_abst"),
        )
        .select(out.columns)
    )


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
        out=rule_outputs(
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


def _rule_decision_line(df: pl.DataFrame, cfg: PhraseSettings, opts: pl.DataFrame) -> pl.DataFrame:
    """``Decision: …`` lines (the rest of each line matched against the options),
    else ``Score: s -> …``. A line naming no option (and no abstention) is not
    claimed, so later rules still try the text; lines naming different
    decisions are malformed."""
    pats = option_patterns(opts, cfg)
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
        extract_by_pattern(exploded, "_rest", "_pat", "_m")
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
        t.str.extract_groups(r"(?i)\bscore\s*[:=]\s*" + NUM + r"\s*(?:->|→|=>)([^\n]*)").alias(
            "_arrow"
        )
    )
    base = extract_by_pattern(
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
            t.str.extract(r"(?i)\bconfidence\b\s*(?:[:=]|of|is)?\s*" + NUM, 1).alias("_cf"),
            pl.coalesce(
                arrow.struct.field("1"), t.str.extract(r"(?i)\bscore\s*[:=]\s*" + NUM, 1)
            ).alias("_sc"),
        ],
        out=rule_outputs(
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


def _rule_abstain(df: pl.DataFrame, cfg: PhraseSettings, opts: pl.DataFrame) -> pl.DataFrame:
    t = matched_text(pl.col("_text"))
    neg = negation_prefix(cfg)

    def found(phrases: Sequence[str]) -> tuple[pl.Expr, pl.Expr]:
        if not phrases:
            return pl.lit(False), pl.lit(None, dtype=_S)
        pat = bounded_alt(phrases)
        n_all = t.str.count_matches("(?i)" + pat)
        n_neg = t.str.count_matches("(?i)" + neg + pat)
        return n_all > n_neg, t.str.extract("(?i)(" + pat + ")", 1)

    refused, refusal = found(cfg.refusal_phrases)
    abstained, _ = found(cfg.abstain_phrases)
    if cfg.refusal_decision is not None:  # a refusal is a named decision
        return _lazy_select(
            df,
            *rule_outputs(
                hit=refused | abstained,
                dec=pl.when(refused).then(pl.lit(cfg.refusal_decision)),
                abst=refused.not_() & abstained,
                refusal=pl.when(refused).then(refusal),
            ),
        )
    return _lazy_select(
        df,
        *rule_outputs(
            hit=refused | abstained,
            abst=refused | abstained,
            refusal=pl.when(refused).then(refusal),
        ),
    )


def _rule_options(df: pl.DataFrame, cfg: PhraseSettings, opts: pl.DataFrame) -> pl.DataFrame:
    flags = regex_flags(cfg)
    neg = negation_prefix(cfg)
    t = matched_text(pl.col("_text"))
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
        .join(mention_patterns(opts, cfg).lazy(), on="_oid", maintain_order="left")
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
        *rule_outputs(
            hit=n >= 1,
            dec=pl.when(n == 1).then(which.list.first()),
            err=pl.when(n > 1).then(
                pl.lit("unparseable output: several options named: ") + which.list.join(", ")
            ),
        ),
    )


#: What a rule is: (texts, parser config, options table) → the outputs above, row for row.
RuleFunc = Callable[[pl.DataFrame, PhraseSettings, pl.DataFrame], pl.DataFrame]


@dataclass(frozen=True)
class ParserRule:
    """A named parsing rule: the function that recognises and decides texts."""

    name: str
    parse: RuleFunc


#: Every rule by name, in the order of the ``auto`` parser (the strict forms
#: first). This is the one place the rules are listed: :data:`RULES`, the
#: named parsers and the rule check of ``ParserConfig`` all derive from it.
PARSER_RULES: Registry[ParserRule] = Registry(
    "parser rule",
    (
        ParserRule("synth", _rule_synth),
        ParserRule("json", _rule_json),
        ParserRule("decision-line", _rule_decision_line),
        ParserRule("abstain", _rule_abstain),
        ParserRule("options", _rule_options),
    ),
)

#: Rule names, in the order of the ``auto`` parser.
RULES: tuple[str, ...] = PARSER_RULES.names()
