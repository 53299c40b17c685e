"""A release gate: a candidate run against a baseline, on stated requirements and guards.

``peira gate --baseline A --candidate B --require robustness:better --guard
benign_accuracy:non-inferior:0.02`` passes when every check holds
(docs/spec/comparison.md#a-release-gate). A check is ``METRIC:better`` (the
paired test shows the candidate better than the baseline),
``METRIC:non-inferior:MARGIN`` (the candidate is shown non-inferior at the
margin) or ``METRIC:equivalent:MARGIN`` (TOST shows the two equivalent).
``--require`` and ``--guard`` take the same checks; they differ in what the
report calls them (what the release must achieve; what it must not break).

Every check is one head-to-head comparison of the two runs on the same
reduction of the log and the same resample plan
(:func:`peira.ranking.head_to_head` with the family of just the two runs).
The gate passes only when all of them hold: an intersection–union test, so
each check runs at α = 1 − level with no adjustment and the gate's chance of
passing a candidate that fails any claim is at most α (Berger 1982). A check
whose statistic is undefined (no eligible pair, a run without the arms) does
not hold.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from .bootstrap import ResamplePlan
from .bootstrap.adjust import tost_level
from .errors import PeiraValueError, UnknownNameError
from .metrics.ratios import RATIO_METRICS
from .metrics.summary import RunSums
from .ranking import Support, head_to_head

__all__ = [
    "CLAIMS",
    "Check",
    "GateSpecError",
    "evaluate",
    "junit_xml",
    "parse_check",
    "summary_markdown",
]

Claim = Literal["better", "non-inferior", "equivalent"]
#: The claims a check can make, and whether each needs a margin.
CLAIMS: dict[str, bool] = {"better": False, "non-inferior": True, "equivalent": True}
_SPEC = re.compile(
    r"^(?P<metric>[A-Za-z_][A-Za-z0-9_]*):(?P<claim>[a-z-]+)(?::(?P<margin>[^:]+))?$"
)


class GateSpecError(PeiraValueError):
    """A ``--require``/``--guard`` check that does not parse (exit 2)."""


@dataclass(frozen=True)
class Check:
    """One requirement or guard of a gate.

    Attributes
    ----------
    kind : {"require", "guard"}
    metric : str
        A ratio metric (:data:`peira.metrics.RATIO_METRICS`); its direction
        says which way is better.
    claim : {"better", "non-inferior", "equivalent"}
    margin : float or None
        The margin on the metric's scale, in (0, 1), for the claims that
        need one.
    """

    kind: Literal["require", "guard"]
    metric: str
    claim: Claim
    margin: float | None = None

    @property
    def spec(self) -> str:
        """The check as written on the command line (``benign_accuracy:non-inferior:0.02``)."""
        tail = "" if self.margin is None else f":{self.margin:g}"
        return f"{self.metric}:{self.claim}{tail}"


def parse_check(text: str, kind: Literal["require", "guard"] = "require") -> Check:
    """The check of ``text`` (``METRIC:better``, ``METRIC:non-inferior:M``,
    ``METRIC:equivalent:M``).

    Raises
    ------
    GateSpecError
        The text does not parse, a claim is unknown, a margin is missing,
        given where none is taken, or outside (0, 1).
    UnknownNameError
        The metric is not a ratio metric (with the close matches).
    """
    where = f"--{kind} {text!r}"
    shapes = "METRIC:better, METRIC:non-inferior:MARGIN or METRIC:equivalent:MARGIN"
    m = _SPEC.match(text.strip())
    if m is None:
        raise GateSpecError(f"{where}: does not parse; expected {shapes}")
    metric, claim, margin_text = m["metric"], m["claim"], m["margin"]
    if claim not in CLAIMS:
        raise GateSpecError(f"{where}: unknown claim {claim!r}; expected {shapes}")
    if metric not in RATIO_METRICS:
        from .metrics.registry import METRICS

        if metric in METRICS:  # a metric, but not a ratio of paired counts
            raise GateSpecError(
                f"{where}: {metric!r} is a metric of kind {METRICS[metric].kind!r}; a gate compares "
                "ratio metrics (peira metrics lists them, kind ratio)"
            )
        raise UnknownNameError("ratio metric", metric, RATIO_METRICS)
    if not CLAIMS[claim]:
        if margin_text is not None:
            raise GateSpecError(f"{where}: {claim!r} takes no margin; expected {metric}:{claim}")
        return Check(kind, metric, claim)  # type: ignore[arg-type]
    if margin_text is None:
        raise GateSpecError(f"{where}: {claim!r} needs a margin, e.g. {metric}:{claim}:0.02")
    try:
        margin = float(margin_text)
    except ValueError:
        raise GateSpecError(f"{where}: margin {margin_text!r} is not a number") from None
    if not 0.0 < margin < 1.0:
        raise GateSpecError(f"{where}: margin {margin_text} is outside (0, 1), the metric's scale")
    return Check(kind, metric, claim, margin)  # type: ignore[arg-type]


_BETTER = {"a": "better", "b": "worse", "tie": "tie", "n/a": "n/a"}


def evaluate(
    sums: RunSums,
    cases: pl.DataFrame,
    plan: ResamplePlan,
    *,
    baseline: str,
    candidate: str,
    checks: Sequence[Check],
    level: float = 0.95,
    support: Support = "common",
) -> pl.DataFrame:
    """Every check of a gate: one row each, in the order given.

    Returns
    -------
    polars.DataFrame
        ``check`` (require or guard), ``spec``, ``metric``, ``claim``,
        ``margin``, ``baseline``, ``candidate``, ``estimate_baseline``,
        ``estimate_candidate``, ``diff`` (candidate − baseline), ``lo``,
        ``hi`` (the interval the verdict rests on: the paired interval at
        ``level`` for ``better``, the (1 − 2α) interval for a margin),
        ``interval_level``, ``p_value`` (the test's, unadjusted: see the
        module notes), ``verdict`` (``better``/``worse``/``tie``,
        ``non-inferior``/``inferior``/``inconclusive``,
        ``equivalent``/``not equivalent``/``inconclusive``, or ``n/a``),
        ``passed``, ``note``, ``n_common``, ``n_both``, ``fingerprint``.
    """
    if not checks:
        raise GateSpecError("a gate needs at least one --require or --guard check")
    if baseline == candidate:
        raise GateSpecError(f"the baseline and the candidate are the same run ({baseline!r})")
    rows = []
    seen: dict[tuple[str, float | None], dict[str, object]] = {}
    for check in checks:
        key = (check.metric, check.margin)
        if key not in seen:
            seen[key] = head_to_head(
                sums, plan, candidate, baseline, metric=check.metric, level=level,
                family=[candidate, baseline], cases=cases, support=support,
                adjust="none", margin=check.margin,
            )  # fmt: skip
        r = seen[key]
        if check.claim == "better":
            verdict = _BETTER[str(r["paired_verdict"])]
            lo, hi, p, at = r["diff_lo"], r["diff_hi"], r["p_value"], float(level)
            passed = verdict == "better"
        elif check.claim == "non-inferior":
            verdict, p = str(r["noninferiority"]), r["p_noninferiority"]
            lo, hi, at = r["tost_lo"], r["tost_hi"], tost_level(level)
            passed = verdict == "non-inferior"
        else:
            verdict, p = str(r["equivalence"]), r["p_equivalence"]
            lo, hi, at = r["tost_lo"], r["tost_hi"], tost_level(level)
            passed = verdict == "equivalent"
        note = r["note"]
        if verdict == "n/a" and note is None:
            note = "the statistic is undefined for a run (no pair in its denominator)"
        rows.append(
            {
                "check": check.kind,
                "spec": check.spec,
                "metric": check.metric,
                "claim": check.claim,
                "margin": check.margin,
                "baseline": baseline,
                "candidate": candidate,
                "estimate_baseline": r["estimate_b"],
                "estimate_candidate": r["estimate_a"],
                "diff": r["diff"],
                "lo": lo,
                "hi": hi,
                "interval_level": at,
                "p_value": p,
                "verdict": verdict,
                "passed": passed,
                "note": note,
                "n_common": r["n_common"],
                "n_both": r["n_both"],
                "fingerprint": r["fingerprint"],
            }
        )
    return pl.DataFrame(rows, schema=_SCHEMA)


_SCHEMA = {
    "check": pl.String, "spec": pl.String, "metric": pl.String, "claim": pl.String,
    "margin": pl.Float64, "baseline": pl.String, "candidate": pl.String,
    "estimate_baseline": pl.Float64, "estimate_candidate": pl.Float64, "diff": pl.Float64,
    "lo": pl.Float64, "hi": pl.Float64, "interval_level": pl.Float64, "p_value": pl.Float64,
    "verdict": pl.String, "passed": pl.Boolean, "note": pl.String, "n_common": pl.Int64,
    "n_both": pl.Int64, "fingerprint": pl.String,
}  # fmt: skip


def _num(x: object, digits: int = 4) -> str:
    return "n/a" if x is None else f"{float(x):.{digits}f}"  # type: ignore[arg-type]


def describe(row: dict[str, object]) -> str:
    """One line of numbers for a check's row (a JUnit failure message, a log line)."""
    level = float(row["interval_level"])  # type: ignore[arg-type]
    margin = "" if row["margin"] is None else f", margin {row['margin']:g}"
    return (
        f"{row['spec']}: {row['verdict']} — {row['candidate']} {_num(row['estimate_candidate'])} "
        f"vs {row['baseline']} {_num(row['estimate_baseline'])}, diff {_num(row['diff'])} "
        f"[{level:.0%} {_num(row['lo'])}, {_num(row['hi'])}]{margin}, p {_num(row['p_value'])}"
        + (f"; {row['note']}" if row["note"] else "")
    )


def junit_xml(table: pl.DataFrame) -> bytes:
    """The gate as JUnit XML: one test case per check, a failure (with its numbers) per
    check that does not hold."""
    n, failed = table.height, int((~table["passed"]).sum())
    name = "peira gate"
    if n:
        name += f": {table['candidate'][0]} vs {table['baseline'][0]}"
    suites = ET.Element("testsuites", name="peira gate", tests=str(n), failures=str(failed))
    suite = ET.SubElement(
        suites, "testsuite", name=name, tests=str(n), failures=str(failed), errors="0",
        skipped="0",
    )  # fmt: skip
    for row in table.iter_rows(named=True):
        case = ET.SubElement(suite, "testcase", classname=f"peira.gate.{row['check']}",
                             name=str(row["spec"]))  # fmt: skip
        line = describe(row)
        if not row["passed"]:
            ET.SubElement(case, "failure", message=line, type=str(row["verdict"])).text = line
        else:
            ET.SubElement(case, "system-out").text = line
    ET.indent(suites)
    from ._version import __version__
    from ._writes import XML_STAMP

    head = (
        b'<?xml version="1.0" encoding="utf-8"?>\n' + XML_STAMP + f" {__version__} -->\n".encode()
    )
    return head + ET.tostring(suites, encoding="utf-8") + b"\n"


def summary_markdown(table: pl.DataFrame) -> str:
    """The gate as a Markdown section (a GitHub job summary)."""
    ok = bool(table["passed"].all())
    head = f"### peira gate: {'PASS' if ok else 'FAIL'}"
    if table.height:
        head += f" — {table['candidate'][0]} against {table['baseline'][0]}"
    lines = [head, "", "| check | spec | verdict | diff | interval | p | passed |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in table.iter_rows(named=True):
        level = float(r["interval_level"])
        lines.append(
            f"| {r['check']} | `{r['spec']}` | {r['verdict']} | {_num(r['diff'])} | "
            f"{level:.0%} [{_num(r['lo'])}, {_num(r['hi'])}] | {_num(r['p_value'])} | "
            f"{'yes' if r['passed'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n\n"
