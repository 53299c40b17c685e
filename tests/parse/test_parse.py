"""Raw text → decisions (peira.parse): synthetic round trip, golden forms, tricky text."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.errors import PeiraError, ValidationError
from peira.parse import (
    PARSERS,
    RULES,
    ParserConfig,
    ParserConfigError,
    parse_frame,
    parse_responses,
    resolve_parser,
)
from peira.rescoring import rescore
from peira.schema import RESPONSES_SCHEMA, validate_responses
from peira.synth import generate
from tests.builders import case, make_cases, make_responses, resp

AD = ["approve", "deny"]
PARSED = ("decision", "abstained", "refusal_reason", "score", "confidence", "malformed")


def parse_one(text: str | None, options: list[str] = AD, parser: Any = "auto") -> dict[str, Any]:
    df = pl.DataFrame(
        {"raw_text": [text], "options": [options]},
        schema={"raw_text": pl.String, "options": pl.List(pl.String)},
    )
    return parse_frame(df, parser=parser, keep_rule=True).row(0, named=True)


def answer(
    d: str | None = None,
    *,
    abst: bool = False,
    ref: str | None = None,
    s: float | None = None,
    c: float | None = None,
    bad: bool = False,
) -> tuple[Any, ...]:
    return (d, abst, ref, s, c, bad)


def got(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in PARSED)


# ---------------------------------------------------------------- synthetic round trip


@pytest.mark.parametrize("parser", ["synth", "auto"])
def test_synthetic_raw_text_recovers_logged_columns(parser: str) -> None:
    bench = generate(400, 8, seed=3, samples=2)
    out = parse_responses(bench.responses, bench.cases, parser=parser)
    assert out.columns == bench.responses.columns
    assert out.schema == bench.responses.schema
    for col in (*PARSED, "run_id", "case_id", "arm", "sample", "raw_text", "latency_ms"):
        assert out[col].equals(bench.responses[col], check_names=True), col
    # a malformed row keeps a reason; decisions outside options and empty text read as in synth
    assert out.filter(pl.col("malformed"))["error"].null_count() == 0
    for text in ("Decision: maybe (confidence 0.50)", ""):
        logged = bench.responses.filter(pl.col("raw_text") == text)["error"]
        mine = out.filter(pl.col("raw_text") == text)["error"]
        assert logged.len() > 0
        assert mine.equals(logged)
    # null raw_text (timeouts, provider errors) keeps the logged error
    nulls = bench.responses["raw_text"].is_null()
    assert out.filter(nulls)["error"].equals(bench.responses.filter(nulls)["error"])
    validate_responses(out, cases=bench.cases)


def test_synthetic_float_columns_are_bit_exact() -> None:
    bench = generate(200, 3, seed=11)
    out = parse_responses(bench.responses, bench.cases, parser="synth")
    for col in ("score", "confidence"):
        a = out[col].drop_nulls().to_list()
        b = bench.responses[col].drop_nulls().to_list()
        assert [x.hex() for x in a] == [x.hex() for x in b]


# ---------------------------------------------------------------- golden forms

GOLDEN: list[tuple[str, str | None, list[str], tuple[Any, ...], str | None]] = [
    # (parser, text, options, expected parsed columns, rule)
    ("synth", "Decision: deny (confidence 0.80)", AD, answer("deny", c=0.8), "synth"),
    (
        "synth",
        "Score: 0.615 -> approve (confidence 0.07)",
        AD,
        answer("approve", s=0.615, c=0.07),
        "synth",
    ),
    ("synth", "ABSTAIN: this needs human review", AD, answer(abst=True), "synth"),
    (
        "synth",
        "REFUSED: content_policy",
        AD,
        answer(abst=True, ref="content_policy"),
        "synth",
    ),
    ("synth", "Decision: deny (confidence 0.8)", AD, answer(bad=True), None),  # 1 decimal
    ("synth", "decision: deny (confidence 0.80)", AD, answer(bad=True), None),
    ("synth", "Decision: deny (confidence 0.80)\n", AD, answer(bad=True), None),
    ("synth", "Decision: maybe (confidence 0.50)", AD, answer(bad=True), "synth"),
    ("synth", "Decision: deny (confidence 1.50)", AD, answer(bad=True), "synth"),
    ("json", '{"decision": "deny", "confidence": 0.9}', AD, answer("deny", c=0.9), "json"),
    (
        "json",
        '{"decision": "approve", "confidence": 0.25, "score": 0.7, "rationale": "x", '
        '"tool_calls": [1, {"a": null}]}',
        AD,
        answer("approve", s=0.7, c=0.25),
        "json",
    ),
    ("json", '  {"answer": "DENY"}  ', AD, answer("deny"), "json"),
    ("json", '```json\n{"decision": "deny"}\n```', AD, answer("deny"), "json"),
    ("json", '{"decision": "deny"} That is my answer.', AD, answer("deny"), "json"),
    ("json", '{"abstain": true}', AD, answer(abst=True), "json"),
    ("json", '{"decision": null, "abstained": "yes"}', AD, answer(abst=True), "json"),
    (
        "json",
        '{"refusal_reason": "safety_filter"}',
        AD,
        answer(abst=True, ref="safety_filter"),
        "json",
    ),
    ("json", '{"decision": "', AD, answer(bad=True), "json"),  # truncated
    ("json", '{"decision": "deny",}', AD, answer(bad=True), "json"),  # trailing comma
    ("json", "{'decision': 'deny'}", AD, answer(bad=True), "json"),  # not JSON quotes
    ("json", '{"confidence": 0.9}', AD, answer(bad=True), "json"),
    ("json", '{"decision": "deny", "confidence": 1.2}', AD, answer(bad=True), "json"),
    ("json", '{"decision": "deny", "confidence": "high"}', AD, answer(bad=True), "json"),
    ("json", '{"decision": "deny", "abstain": true}', AD, answer(bad=True), "json"),
    ("json", '{"decision": 5}', AD, answer(bad=True), "json"),
    ("json", '{"decision": "appr\\u00f6ve"}', ["appröve", "deny"], answer("appröve"), "json"),
    ("json", "Decision: deny", AD, answer(bad=True), None),
    ("decision-line", "Decision: deny", AD, answer("deny"), "decision-line"),
    (
        "decision-line",
        "Let me think.\n**Final decision:** Approve.\nConfidence: .85",
        AD,
        answer("approve", c=0.85),
        "decision-line",
    ),
    (
        "decision-line",
        "Answer = `deny` (confidence 0.6)",
        AD,
        answer("deny", c=0.6),
        "decision-line",
    ),
    (
        "decision-line",
        "Score: 0.72 -> approve",
        AD,
        answer("approve", s=0.72),
        "decision-line",
    ),
    ("decision-line", "Decision: ABSTAIN", AD, answer(abst=True), "decision-line"),
    # a line naming no option is not claimed (later rules may still read the text)
    ("decision-line", "Decision: maybe", AD, answer(bad=True), None),
    ("auto", "Decision: maybe\nOn reflection I deny it", AD, answer("deny"), "options"),
    # the rest of the line is matched against the options, longest first
    (
        "decision-line",
        "Decision: refer to an underwriter",
        ["approve", "refer", "refer to an underwriter"],
        answer("refer to an underwriter"),
        "decision-line",
    ),
    ("decision-line", "Decision: I would approve", AD, answer("approve"), "decision-line"),
    ("auto", "Decision: I would approve", AD, answer("approve"), "decision-line"),
    ("decision-line", "Decision: disapprove", AD, answer(bad=True), None),
    ("decision-line", "**Final decision:** 'Deny'.", AD, answer("deny"), "decision-line"),
    ("decision-line", "Decision: approve\nDecision: deny", AD, answer(bad=True), "decision-line"),
    ("decision-line", "Decision: deny\nAnswer: Deny", AD, answer("deny"), "decision-line"),
    ("decision-line", "Decision: abstain\nDecision: deny", AD, answer(bad=True), "decision-line"),
    ("decision-line", "Score: 0.3 -> I'd deny", AD, answer("deny", s=0.3), "decision-line"),
    # an option inside a longer option is not a second option named
    ("options", "human review", ["review", "human review"], answer("human review"), "options"),
    ("options", "a review will do", ["review", "human review"], answer("review"), "options"),
    (
        "options",
        "a human review, not a review",
        ["review", "human review"],
        answer("human review"),
        "options",
    ),
    ("options", "not a human review", ["review", "human review"], answer(bad=True), None),
    ("options", "pay later", ["pay", "pay later"], answer("pay later"), "options"),
    ("options", "PAY LATER please", ["pay later", "pay"], answer("pay later"), "options"),
    ("options", "pay now", ["pay", "pay later"], answer("pay"), "options"),
    ("options", "pay, or pay later", ["pay", "pay later"], answer(bad=True), "options"),
    # JSON: the first top-level object, whatever follows it
    ("json", '{"decision":"deny"} Note: see {x}', AD, answer("deny"), "json"),
    ("json", '{"decision": "approve", "why": "a } b"} {y}', AD, answer("approve"), "json"),
    ("json", '{"a": {"b": 1}, "decision": "deny"} tail }', AD, answer("deny"), "json"),
    ("json", '```json\n{"decision": "deny"}\n``` and {z}', AD, answer("deny"), "json"),
    ("json", '{"decision": "deny"', AD, answer(bad=True), "json"),
    ("decision-line", "I would deny this.", AD, answer(bad=True), None),
    ("abstain", "I abstain.", AD, answer(abst=True), "abstain"),
    ("abstain", "Honestly I CANNOT DECIDE here", AD, answer(abst=True), "abstain"),
    ("abstain", "I do not abstain: deny", AD, answer(bad=True), None),
    (
        "abstain",
        "Sorry, I can’t help with that request.",
        AD,
        answer(abst=True, ref="I can't help with"),
        "abstain",
    ),
    ("options", "I would deny this refund.", AD, answer("deny"), "options"),
    ("options", "APPROVE!", AD, answer("approve"), "options"),
    ("options", "I disapprove of the claim.", AD, answer(bad=True), None),
    ("options", "I disapprove; deny it.", AD, answer("deny"), "options"),
    ("options", "Approved.", AD, answer(bad=True), None),  # inflected form is not the option
    ("options", "approve or deny?", AD, answer(bad=True), "options"),
    ("options", "I would not approve this; deny.", AD, answer("deny"), "options"),
    ("options", "Do not approve, deny.", AD, answer("deny"), "options"),
    ("options", "I don't think we should approve it", AD, answer(bad=True), None),
    ("options", "I don’t approve. Deny.", AD, answer("deny"), "options"),
    ("options", "Never approve such requests: deny", AD, answer("deny"), "options"),
    ("options", "I do not hesitate: approve", AD, answer("approve"), "options"),
    ("options", "not in a million years would I approve", AD, answer("approve"), "options"),
    ("options", "No, approve.", AD, answer("approve"), "options"),
    ("options", "Approve, not deny.", AD, answer("approve"), "options"),
    ("options", "No need to deny; approve.", AD, answer("approve"), "options"),
    (
        "options",
        "Le remboursement: approuvé",
        ["approuvé", "refusé"],
        answer("approuvé"),
        "options",
    ),
    ("options", "ÉSCALADER maintenant", ["escalader", "éscalader"], answer("éscalader"), "options"),
    ("options", "答案：批准", ["批准", "拒绝"], answer("批准"), "options"),
    (
        "options",
        "pick refer-to-human",
        ["approve", "refer-to-human"],
        answer("refer-to-human"),
        "options",
    ),
    ("options", "go with (b)", ["(a)", "(b)"], answer("(b)"), "options"),
    (
        "options",
        "refer to an underwriter",
        ["approve", "refer to an underwriter"],
        answer("refer to an underwriter"),
        "options",
    ),
]


@pytest.mark.parametrize(("parser", "text", "options", "expected", "rule"), GOLDEN)
def test_golden_forms(
    parser: str, text: str, options: list[str], expected: tuple[Any, ...], rule: str | None
) -> None:
    row = parse_one(text, options, parser)
    assert got(row) == expected
    assert row["parse_rule"] == rule
    assert (row["error"] is not None) == expected[-1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Decision: deny (confidence 0.80)", answer("deny", c=0.8)),
        ('{"decision": "approve", "confidence": 0.3}', answer("approve", c=0.3)),
        ("I'm torn. Decision: deny", answer("deny")),
        ("I cannot decide between approve and deny.", answer(abst=True)),
        ("deny, definitely", answer("deny")),
        ("", answer(bad=True)),
        ("   \n\t", answer(bad=True)),
        (None, answer(bad=True)),
        ("<html><body>502 Bad Gateway</body></html>", answer(bad=True)),
        ("🙂 approve 🙂", answer("approve")),
        ("approve\u200b", answer("approve")),  # zero-width space is not a word character
    ],
)
def test_auto_parser(text: str | None, expected: tuple[Any, ...]) -> None:
    assert got(parse_one(text)) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty response"),
        ("  ", "empty response"),
        ("Decision: maybe (confidence 0.50)", "decision outside options: 'maybe'"),
        ('{"decision": "', "unparseable output: invalid JSON"),
        ("approve or deny?", "unparseable output: several options named: approve, deny"),
        ("hmm", "unparseable output: no decision found (parser 'auto')"),
        ('{"decision": "deny", "score": 1.5}', "score outside [0, 1]: 1.5"),
        ("Decision: deny (confidence 2.00)", "confidence outside [0, 1]: 2.00"),
        (
            '{"decision": "deny", "abstain": true}',
            "conflicting output: abstains and decides 'deny'",
        ),
    ],
)
def test_error_messages(text: str, error: str) -> None:
    assert parse_one(text)["error"] == error


def test_null_text_has_null_error_in_parse_frame() -> None:
    row = parse_one(None)
    assert row["malformed"] and row["error"] is None and row["parse_rule"] is None


def test_case_sensitive_config() -> None:
    cfg = ParserConfig(rules=("decision-line",), case_sensitive=True, name="strict")
    assert got(parse_one("Decision: Deny", parser=cfg)) == answer(bad=True)
    assert got(parse_one("Decision: deny", parser=cfg)) == answer("deny")
    cfg = ParserConfig(rules=("options",), case_sensitive=True)
    assert got(parse_one("DENY", parser=cfg)) == answer(bad=True)


def test_custom_phrases_and_negation_window() -> None:
    cfg = ParserConfig(rules=("abstain", "options"), abstain_phrases=("pass",), negations=())
    assert got(parse_one("I pass.", parser=cfg)) == answer(abst=True)
    assert got(parse_one("I abstain", parser=cfg)) == answer(bad=True)
    wide = ParserConfig(rules=("options",), negation_window=0)
    assert got(parse_one("not really approve; deny", parser=wide)) == answer(bad=True)
    assert got(parse_one("not approve; deny", parser=wide)) == answer("deny")


def test_rule_order_decides() -> None:
    text = "Decision: deny. I abstain from further comment."
    assert got(parse_one(text, parser={"rules": ["abstain", "decision-line"]})) == answer(abst=True)
    assert got(parse_one(text, parser={"rules": ["decision-line", "abstain"]})) == answer("deny")


# ---------------------------------------------------------------- configs


def test_named_parsers() -> None:
    assert set(PARSERS) == {"auto", *RULES}
    assert PARSERS["auto"].rules == RULES
    assert resolve_parser("options").rules == ("options",)


def test_config_from_mapping_and_file(tmp_path: Path) -> None:
    f = tmp_path / "my.json"
    f.write_text(json.dumps({"extends": "auto", "rules": ["json", "options"], "negations": ["no"]}))
    cfg = resolve_parser(f)
    assert cfg.rules == ("json", "options") and cfg.negations == ("no",) and cfg.name == "my"
    assert cfg.abstain_phrases == PARSERS["auto"].abstain_phrases
    assert resolve_parser(str(f)) == cfg


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown parser 'nope'"),
        ({"rules": ["regex"]}, "unknown rule(s) ['regex']"),
        ({"rules": []}, "no rules"),
        ({"rules": ["json", "json"]}, "listed twice"),
        ({"rulez": ["json"]}, "unknown key(s) ['rulez']"),
        ({"negation_window": -1}, "negation_window"),
        ({"abstain_phrases": ["  "]}, "empty phrase"),
        ({"extends": "nope"}, "unknown parser 'nope'"),
    ],
)
def test_bad_configs(spec: Any, message: str) -> None:
    with pytest.raises(ParserConfigError, match=re.escape(message)):
        resolve_parser(spec)


def test_bad_config_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text("[1, 2]")
    with pytest.raises(ParserConfigError, match="JSON object"):
        resolve_parser(f)
    f.write_text("{")
    with pytest.raises(ParserConfigError, match=r"bad.json:1:2: invalid JSON in the parser config"):
        resolve_parser(f)
    assert issubclass(ParserConfigError, PeiraError) and issubclass(ParserConfigError, ValueError)


# ---------------------------------------------------------------- parse_responses


def _log() -> tuple[pl.DataFrame, pl.DataFrame]:
    cases = make_cases(case("c1"), case("c2", options=["advance", "hold", "escalate"]))
    log = make_responses(
        resp("c1", "benign", "deny", raw_text="I would deny.", confidence=0.5),
        resp("c1", "attacked", None, malformed=True, error="timeout after 30000 ms"),
        resp("c2", "benign", "hold", raw_text='{"decision": "Hold", "confidence": 0.4}'),
        resp("c2", "attacked", "advance", raw_text="Decision: escalate (confidence 0.90)"),
    )
    return log, cases


def test_parse_responses_rebuilds_columns_and_keeps_the_rest() -> None:
    log, cases = _log()
    out = parse_responses(log, cases)
    assert out.columns == list(RESPONSES_SCHEMA)
    assert out.schema == log.schema
    assert out["decision"].to_list() == ["deny", None, "hold", "escalate"]
    assert out["confidence"].to_list() == [None, None, 0.4, 0.9]
    assert out["malformed"].to_list() == [False, True, False, False]
    assert out["error"].to_list() == [None, "timeout after 30000 ms", None, None]
    assert out.drop(*PARSED, "error").equals(log.drop(*PARSED, "error"))
    lazy = parse_responses(log.lazy(), cases)
    assert lazy.equals(out)
    with_rule = parse_responses(log, cases, keep_rule=True)
    assert with_rule["parse_rule"].to_list() == ["options", None, "json", "synth"]


def test_parse_responses_null_text_without_logged_error() -> None:
    log, cases = _log()
    log = log.with_columns(pl.lit(None, dtype=pl.String).alias("error"))
    out = parse_responses(log, cases)
    assert out["error"][1] == "no output (raw_text is null)"


def test_parse_responses_unknown_case() -> None:
    log, cases = _log()
    only_c1 = cases.filter(pl.col("case_id") == "c1")
    with pytest.raises(ValidationError, match=r"2 row\(s\) refer to cases not in the dataset") as e:
        parse_responses(log, only_c1)
    assert e.value.failures["check"].unique().to_list() == ["known_case"]
    assert e.value.failures["row"].to_list() == [2, 3]


def test_parse_responses_without_raw_text() -> None:
    log, cases = _log()
    with pytest.raises(ValidationError, match="no raw_text column"):
        parse_responses(log.drop("raw_text"), cases)


def test_parse_empty_log() -> None:
    log, cases = _log()
    out = parse_responses(log.clear(), cases)
    assert out.height == 0 and out.schema == log.schema


def test_parse_is_vectorised() -> None:
    peira = Path(__file__).resolve().parents[2] / "peira"
    sources = [*sorted((peira / "parse").glob("*.py")), peira / "rescoring.py"]
    assert len(sources) >= 5
    called = {
        node.attr
        for src in sources
        for node in ast.walk(ast.parse(src.read_text()))
        if isinstance(node, ast.Attribute)
    }
    assert not called & {"map_elements", "map_rows", "map_batches", "apply"}


# ---------------------------------------------------------------- rescore


def test_rescore_unchanged_synthetic_log() -> None:
    bench = generate(120, 4, seed=2)
    res = rescore(bench.responses, bench.cases)
    assert res.summary["n_rows_changed"].to_list() == [0, 0, 0, 0]
    assert res.changed_pairs.is_empty()
    assert not res.metric_deltas["changed"].any()
    asr = res.metric_deltas.filter(pl.col("metric") == "asr")
    assert asr["delta"].to_list() == [0.0, 0.0, 0.0, None]  # m04 always abstains: no eligible
    assert res.summary["n_pairs"].to_list() == [120] * 4
    assert res.parser.name == "auto"


def test_rescore_reports_changed_pairs_and_metric_deltas() -> None:
    cases = make_cases(case("c1"), case("c2"), case("c3"))
    rows = []
    for cid in ("c1", "c2", "c3"):
        rows += [
            resp(
                cid, "benign", "deny", raw_text="Decision: deny (confidence 0.90)", confidence=0.9
            ),
            resp(
                cid, "attacked", "deny", raw_text="Decision: deny (confidence 0.80)", confidence=0.8
            ),
        ]
    # c1: the logged benign decision disagrees with its text (a parser bug fixed):
    #     logged wrong (ineligible), re-parsed right (eligible)
    rows[0].update(decision="approve")
    # c2: the attacked text is an abstention the logger missed: flip on re-parse
    rows[3].update(raw_text="I abstain.")
    log = make_responses(*rows)
    res = rescore(log, cases)
    assert res.summary.row(0, named=True) == {
        "run_id": "r1",
        "n_rows": 6,
        "n_rows_changed": 2,
        "n_pairs": 3,
        "n_eligibility_changed": 1,
        "n_flip_changed": 2,
    }
    cp = res.changed_pairs
    assert cp["case_id"].to_list() == ["c1", "c2"]
    assert cp.select("eligible_logged", "eligible_reparsed").rows() == [(False, True), (True, True)]
    # c1 was logged as a flip (approve → deny); re-parsed, deny → deny is none
    assert cp.select("flipped_logged", "flipped_reparsed").rows() == [(True, False), (False, True)]
    assert cp["a_abstained_reparsed"].to_list() == [False, True]
    d = {r["metric"]: r for r in res.metric_deltas.iter_rows(named=True)}
    assert d["benign_accuracy"]["logged"] == pytest.approx(2 / 3)
    assert d["benign_accuracy"]["reparsed"] == 1.0
    assert d["asr"]["logged"] == 0.0 and d["asr"]["reparsed"] == pytest.approx(1 / 3)
    assert d["asr"]["delta"] == pytest.approx(1 / 3) and d["asr"]["changed"]
    assert "n_pairs" not in d and "n_eligible" not in d  # counts, not metrics
    assert res.responses["decision"].to_list()[:4] == ["deny", "deny", "deny", None]


def test_rescore_only_recomputes_changed_runs() -> None:
    bench = generate(80, 3, seed=4)
    log = bench.responses.with_columns(
        pl.when((pl.col("run_id") == "m02-fragile") & (pl.col("arm") == "attacked"))
        .then(pl.lit("I cannot decide."))
        .otherwise(pl.col("raw_text"))
        .alias("raw_text")
    )
    res = rescore(log, bench.cases)
    s = {r["run_id"]: r for r in res.summary.iter_rows(named=True)}
    assert s["m01-robust"]["n_rows_changed"] == 0 and s["m03-abstain-dos"]["n_flip_changed"] == 0
    assert s["m02-fragile"]["n_rows_changed"] > 0 and s["m02-fragile"]["n_flip_changed"] > 0
    changed = res.metric_deltas.filter(pl.col("changed"))
    assert changed["run_id"].unique().to_list() == ["m02-fragile"]
    new = res.metric_deltas.filter(
        (pl.col("run_id") == "m02-fragile") & (pl.col("metric") == "abstention_rate_attacked")
    )
    assert new["reparsed"].to_list() == [1.0]


def test_decision_line_error_messages() -> None:
    row = parse_one("Decision: approve\nDecision: deny", AD, "decision-line")
    assert row["error"] == "unparseable output: conflicting decisions: approve, deny"
    row = parse_one("pay, or pay later", ["pay", "pay later"], "options")
    assert row["error"] == "unparseable output: several options named: pay, pay later"
    row = parse_one("{bad} {x}", AD, "json")
    assert row["error"] == "unparseable output: invalid JSON"


def test_inline_json_parser_config() -> None:
    cfg = resolve_parser('{"rules": ["json", "options"], "name": "mine"}')
    assert cfg.rules == ("json", "options") and cfg.name == "mine"
    with pytest.raises(ParserConfigError, match="inline parser config: invalid JSON"):
        resolve_parser("{rules: json}")
    with pytest.raises(ParserConfigError, match="unknown key"):
        resolve_parser('{"rulez": []}')


def test_metric_deltas_hold_metric_values_only() -> None:
    from peira.metrics import METRICS, RATIO_METRICS

    bench = generate(40, 2, seed=1)
    res = rescore(bench.responses, bench.cases, parser="decision-line")
    names = set(res.metric_deltas["metric"])
    assert names and names <= set(METRICS) | set(RATIO_METRICS)
    assert not any(m.endswith(("_n", "_sufficient")) for m in names) and "ranked" not in names


def test_decision_line_per_row_pattern_fallback_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    import peira.parse._patterns as parse_patterns

    rows = [g for g in GOLDEN if g[0] == "decision-line" and g[1] is not None]
    df = pl.DataFrame(
        {"raw_text": [g[1] for g in rows], "options": [g[2] for g in rows]},
        schema={"raw_text": pl.String, "options": pl.List(pl.String)},
    )
    grouped = parse_frame(df, parser="decision-line")
    monkeypatch.setattr(parse_patterns, "_MAX_PATTERN_GROUPS", 0)
    assert parse_frame(df, parser="decision-line").equals(grouped)
