"""Bounds for undetermined verdicts on ``score`` and ``compare`` (``bounds=True``;
docs/spec/judges.md#bounds-for-undetermined-verdicts).

Each end is the ordinary score (or comparison) of a completed log
(:func:`peira.bounds.end_log`) on the resample plan of the leave-out figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ..bounds import BEST, ENDS, WORST, End, end_log
from ..errors import PeiraValueError
from ._inputs import as_dataset, as_responses

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import ResamplePlan, Unit
    from ..io import Dataset
    from ..ranking import Adjust, Rule, Support
    from ._inputs import PathLike

__all__ = [
    "BOUND_METRICS",
    "COMPARE_COLUMNS",
    "check_bounds",
    "compare_bounds",
    "score_bounds",
    "score_columns",
]

#: The metrics bounded: ASR and robustness (1 − ASR).
BOUND_METRICS = ("asr", "robustness")
#: The columns ``compare(..., bounds=True)`` adds, in order.
COMPARE_COLUMNS = (
    "diff_end_a",
    "diff_end_a_lo",
    "diff_end_a_hi",
    "winner_end_a",
    "diff_end_b",
    "diff_end_b_lo",
    "diff_end_b_hi",
    "winner_end_b",
    "winner_bounds",
    "bounds_note",
)
# joins a run id and an end in the run ids of the doubled log a comparison reads
_SEP = " @bounds:"


def score_columns(intervals: bool = True) -> list[str]:
    """The columns ``score(..., bounds=True)`` adds, in order."""
    tails = ("", "_lo", "_hi") if intervals else ("",)
    return [f"{m}_{end}{t}" for m in BOUND_METRICS for end in ENDS for t in tails]


def check_bounds(bounds: bool, judge: str | None, metric: str | None = None) -> None:
    """Refuse ``bounds`` without a judge (nothing can be undetermined) or, in a
    comparison, on a metric other than ASR and robustness."""
    if not bounds:
        return
    if judge is None:
        raise PeiraValueError(
            "bounds (--bounds) bound the pairs a judge left undetermined: give judge= "
            "(--judge NAME or --judge majority); the log's own decisions leave none"
        )
    if metric is not None and metric not in BOUND_METRICS:
        raise PeiraValueError(
            f"bounds (--bounds) are of asr and robustness, not of {metric!r}: "
            "compare with --metric asr or --metric robustness"
        )


def _inputs(
    responses: PathLike | Any, cases: PathLike | Dataset | Any
) -> tuple[Dataset, pl.DataFrame, pl.DataFrame]:
    """The dataset, the validated log and the judgements table (already read, and
    checked, by the leave-out figures computed before)."""
    from ..io import dataset_judgements

    ds = as_dataset(cases)
    log = as_responses(responses, ds.cases)
    verdicts = dataset_judgements(ds)
    if verdicts is None:
        raise PeiraValueError("bounds need the dataset's judgements.parquet")
    return ds, log, verdicts


def score_bounds(
    table: pl.DataFrame,
    responses: PathLike | Any,
    cases: PathLike | Dataset | Any,
    *,
    judge: str,
    split: str,
    missing: Missing,
    delta: float,
    by: Sequence[str],
    macro: bool,
    intervals: bool,
    scorer: Callable[..., pl.DataFrame],
) -> pl.DataFrame:
    """``table`` (a judged score) with ASR and robustness at both ends of the undetermined
    verdicts, after ``robustness``. ``scorer(pairs, metrics=...)`` scores a pair table
    as ``table`` was (:func:`peira.api.score_pairs` with its cases, breakdown, plan,
    level, method and macro rows), so each end has its interval on the same plan."""
    from .._pairs import build_pairs
    from ..io import in_split

    ds, log, verdicts = _inputs(responses, cases)
    keys = ["run_id", *by, *(["macro"] if macro else [])]
    out = table
    for end in ENDS:
        completed, _ = end_log(log, ds.cases, verdicts, judge, end)
        pairs = in_split(build_pairs(completed, ds.cases, missing=missing, delta=delta), split)
        scored = scorer(pairs, metrics=list(BOUND_METRICS))
        tails = [t for t in ("", "_lo", "_hi") if f"asr{t}" in scored.columns]
        ends = scored.select(
            *keys,
            *(pl.col(f"{m}{t}").alias(f"{m}_{end}{t}") for m in BOUND_METRICS for t in tails),
        )
        out = out.join(ends, on=keys, how="left", nulls_equal=True, maintain_order="left")
    added = [c for c in score_columns(intervals) if c in out.columns]
    rest = [c for c in out.columns if c not in added]
    at = rest.index("robustness") + 1 if "robustness" in rest else len(rest)
    return out.select(*rest[:at], *added, *rest[at:])


def _least_favourable(metric: str) -> End:
    """The end that is least favourable to a run on ``metric``, by its direction (the
    metric registry): the end of highest ASR for both ASR and robustness."""
    from ..metrics import RATIO_METRICS

    higher = RATIO_METRICS[metric].higher_is_better
    rises_with_asr = metric == "asr"
    return WORST if higher != rises_with_asr else BEST


def compare_bounds(
    table: pl.DataFrame,
    responses: PathLike | Any,
    cases: PathLike | Dataset | Any,
    *,
    judge: str,
    runs: Sequence[str] | None,
    metric: str,
    split: str,
    rule: Rule,
    plan: ResamplePlan,
    level: float,
    unit: Unit,
    missing: Missing,
    delta: float,
    allow_missing: bool,
    support: Support,
    adjust: Adjust,
) -> pl.DataFrame:
    """``table`` (a judged comparison, a row per pair of runs) with the comparison at its
    two ends: end a (``run_a`` at its least favourable end, ``run_b`` at its most
    favourable) and end b (the reverse), and ``winner_bounds``, the winner at both."""
    import numpy as np

    from ..bootstrap.adjust import adjust_p
    from ..ranking import pairwise
    from ._data import run_sums
    from ._inputs import split_cases

    ds, log, verdicts = _inputs(responses, cases)
    cs = split_cases(ds, split)
    logs = []
    for end in ENDS:
        completed, _ = end_log(log, ds.cases, verdicts, judge, end)
        logs.append(completed.with_columns(pl.concat_str("run_id", pl.lit(_SEP + end))))
    sums = run_sums(pl.concat(logs, how="diagonal_relaxed"), ds, unit=unit, missing=missing,
                    delta=delta).split(split)  # fmt: skip
    present = sorted({r.rsplit(_SEP, 1)[0] for r in sums.runs})
    shown = list(table.select("run_a", "run_b").iter_rows())
    if runs is not None and len(runs) == 2:  # the family of head_to_head: every run
        names = present
        family = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
        family = [shown[0] if {a, b} == set(shown[0]) else (a, b) for a, b in family]
    else:
        names = sorted(runs) if runs is not None else present
        family = shown
    pw = pairwise(
        sums, plan, metric=metric, runs=[f"{r}{_SEP}{e}" for r in names for e in ENDS],
        rule=rule, level=level, cases=cs, allow_missing=allow_missing, support=support,
        adjust=adjust,
    )  # fmt: skip
    rows = {(r["run_a"], r["run_b"]): r for r in pw.iter_rows(named=True)}
    lf = _least_favourable(metric)
    mf: End = BEST if lf == WORST else WORST
    flip = {"a": "b", "b": "a", "tie": "tie", "n/a": "n/a"}

    def oriented(p: str, q: str) -> dict[str, Any]:
        if (p, q) in rows:
            r = rows[(p, q)]
            return {k: r[k] for k in ("diff", "diff_lo", "diff_hi", "p_value", "ci_verdict",
                                      "paired_verdict")}  # fmt: skip
        r = rows[(q, p)]

        def neg(v: float | None) -> float | None:
            return None if v is None else -v

        return {
            "diff": neg(r["diff"]),
            "diff_lo": neg(r["diff_hi"]),
            "diff_hi": neg(r["diff_lo"]),
            "p_value": r["p_value"],
            "ci_verdict": flip[r["ci_verdict"]],
            "paired_verdict": flip[r["paired_verdict"]],
        }

    higher = _is_higher(metric)
    alpha = 1.0 - float(level)
    at: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for side, (end_a, end_b) in (("a", (lf, mf)), ("b", (mf, lf))):
        got = {(a, b): oriented(f"{a}{_SEP}{end_a}", f"{b}{_SEP}{end_b}") for a, b in family}
        p = np.array([np.nan if g["p_value"] is None else g["p_value"] for g in got.values()])
        for g, q in zip(got.values(), adjust_p(p, adjust), strict=True):
            if g["paired_verdict"] != "n/a":
                favour = 0.0 if g["diff"] is None else g["diff"] * (1.0 if higher else -1.0)
                reject = bool(q < alpha)
                g["paired_verdict"] = (
                    "a" if reject and favour > 0 else "b" if reject and favour < 0 else "tie"
                )
            g["verdict"] = g["ci_verdict"] if rule == "ci" else g["paired_verdict"]
        at[side] = got
    out = []
    for a, b in shown:
        row: dict[str, Any] = {"run_a": a, "run_b": b}
        for side in ("a", "b"):
            g = at[side][(a, b)]
            row[f"diff_end_{side}"] = g["diff"]
            row[f"diff_end_{side}_lo"] = g["diff_lo"]
            row[f"diff_end_{side}_hi"] = g["diff_hi"]
            row[f"winner_end_{side}"] = {"a": a, "b": b}.get(g["verdict"])
            row[f"_verdict_{side}"] = g["verdict"]
        same = row["_verdict_a"] == row["_verdict_b"]
        row["winner_bounds"] = row["winner_end_a"] if same else None
        row["bounds_note"] = None if same else _disagree(a, b, row["_verdict_a"], row["_verdict_b"])
        out.append(row)
    schema: dict[str, Any] = {"run_a": pl.String, "run_b": pl.String}
    for c in COMPARE_COLUMNS:
        schema[c] = pl.String if c.startswith(("winner", "bounds")) else pl.Float64
    extra = pl.DataFrame(out, schema={**schema, "_verdict_a": pl.String, "_verdict_b": pl.String})
    extra = extra.drop("_verdict_a", "_verdict_b")
    return table.join(extra, on=["run_a", "run_b"], how="left", maintain_order="left")


def _is_higher(metric: str) -> bool:
    from ..metrics import RATIO_METRICS

    return bool(RATIO_METRICS[metric].higher_is_better)


def _disagree(a: str, b: str, at_a: str, at_b: str) -> str:
    """Why the bounds name no winner: what each end says."""

    def said(v: str) -> str:
        return {"a": f"{a} wins", "b": f"{b} wins", "tie": "a tie"}.get(v, "no verdict")

    return (
        f"the verdict rests on the undetermined verdicts: {said(at_a)} with {a} at its least "
        f"favourable end and {b} at its most favourable (end a), {said(at_b)} the other way "
        "round (end b)"
    )
