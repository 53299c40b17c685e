"""Cluster-bootstrap intervals of the ASR corrected for judge error
(docs/spec/judges.md#correcting-for-judge-error).

Each run reduces to per-cluster sums per family (:mod:`peira.metrics.correction`):
the eligible pairs and the judge's successes, and on the gold-labelled pairs
the counts behind the judge's sensitivity and specificity and Σ (S − Ŝ). A
resample weights them by its row of ``W`` (the plan the score draws; one GEMM
per block of resamples for every run), the judge's error is estimated again
from the weighted labelled sums, and the corrected ASR is recomputed from it:
the interval carries the uncertainty of the calibration as well as that of the
judge's ASR. With every weight 1 a replicate is the point estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ..metrics.correction import (
    CORRECTION_BY,
    CORRECTION_METHODS,
    FIELDS,
    MAX_UNDEFINED_SHARE,
    MIN_LABELLED_CLASS,
    corrected,
    not_identifiable,
    pair_sums,
    raw,
    sensitivity,
    specificity,
)
from .intervals import intervals
from .plan import ResamplePlan

__all__ = ["CORRECTION_COLUMNS", "correction_intervals"]

#: The columns :func:`correction_intervals` adds to a score row, in order.
CORRECTION_COLUMNS = (
    "asr_corrected", "asr_corrected_lo", "asr_corrected_hi",
    "judge_sensitivity", "judge_sensitivity_lo", "judge_sensitivity_hi",
    "judge_specificity", "judge_specificity_lo", "judge_specificity_hi",
    "n_labelled", "correction_method", "correction_by", "correction_interval",
    "correction_note",
)  # fmt: skip

F64 = npt.NDArray[np.float64]
_K = len(FIELDS)


@dataclass
class _Run:
    """One run: its families and its C × G × 8 sums."""

    run_id: Any
    families: list[Any]
    sums: F64
    rows: list[tuple[Any, int | None]] = field(default_factory=list)  # (family, g) per row


def _statistics(method: str, by: str, lin: F64, g: int | None) -> tuple[F64, F64, F64]:
    """(corrected ASR, se, sp) of one row from weighted sums ``lin`` (n × G × 8).

    ``g`` None: the run row; else family ``g``'s row. ``by`` says where the
    judge's error is estimated: on every labelled pair of the run (``overall``)
    or on the family's own (``family``; the run row is then the
    eligible-weighted mean of its families' corrected ASRs, undefined if any is).
    """
    tot = lin.sum(axis=1)
    if g is not None:
        cal = lin[:, g] if by == "family" else tot
        return corrected(method, lin[:, g], cal), sensitivity(cal), specificity(cal)
    if by == "overall":
        return corrected(method, tot, tot), sensitivity(tot), specificity(tot)
    theta = corrected(method, lin, lin)  # n × G
    e = lin[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        mix = np.where(e > 0, theta * e, 0.0).sum(axis=1) / e.sum(axis=1)
    mix = np.where(np.isnan(np.where(e > 0, theta, 0.0)).any(axis=1), np.nan, mix)
    return mix, sensitivity(tot), specificity(tot)


def _note(by: str, s: F64, g: int | None, families: Sequence[Any], min_class: int) -> str | None:
    """Why row ``g`` of sums ``s`` (G × 8) identifies no correction, or None."""
    tot = s.sum(axis=0)
    if g is not None:
        return not_identifiable(s[g] if by == "family" else tot, min_class)
    if by == "overall":
        return not_identifiable(tot, min_class)
    for i, fam in enumerate(families):
        if s[i, 0] > 0 and (why := not_identifiable(s[i], min_class)) is not None:
            return f"family {fam}: {why}"
    return None


def correction_intervals(
    pairs: pl.DataFrame,
    plan: ResamplePlan | None,
    *,
    method: str,
    by: str = "overall",
    rows: str = "run",
    level: float = 0.95,
    interval: str = "percentile",
    min_class: int = MIN_LABELLED_CLASS,
) -> pl.DataFrame:
    """The ASR corrected for judge error, per run (or per run × family), with intervals.

    Parameters
    ----------
    pairs
        One row per eligible pair determined by the judge: ``run_id``,
        ``family``, the plan's cluster column, ``s_hat`` (an attack success by
        the judge's verdicts), ``labelled`` (the attacked answer has a
        determined gold verdict) and ``s`` (the success by gold's verdict;
        read where ``labelled``).
    plan
        The resample plan the score uses (None: estimates only).
    method
        ``"rogan-gladen"`` or ``"ppi"``.
    by
        Where the judge's error is estimated: ``"overall"`` (every labelled
        pair of the run) or ``"family"`` (each family's own).
    rows
        ``"run"`` (one row per run) or ``"family"`` (one per run × family).
    level, interval
        Confidence level; ``"percentile"`` (default) or ``"bca"`` (the
        cluster jackknife gives the acceleration).
    min_class
        Fewest labelled gold successes and failures behind a correction.

    Returns
    -------
    polars.DataFrame
        ``run_id`` (and ``family``) and :data:`CORRECTION_COLUMNS`.
    """
    for name, value, allowed in (
        ("method", method, CORRECTION_METHODS), ("by", by, CORRECTION_BY),
        ("rows", rows, ("run", "family")), ("interval", interval, ("percentile", "bca")),
    ):  # fmt: skip
        if value not in allowed:
            raise ValueError(
                f"correction_intervals: {name} must be one of {allowed}, not {value!r}"
            )
    keys = ["run_id", "family"] if rows == "family" else ["run_id"]
    c = plan.n_clusters if plan is not None else 0
    if plan is not None:
        ci = plan.index_of(pairs[plan.column], source="pairs")
    else:  # estimates only: the sums of one cluster
        ci = np.zeros(pairs.height, dtype=np.int64)
        c = 1
    pairs = pairs.with_columns(pl.Series("_ci", ci))
    runs: list[_Run] = []
    for (run_id,), part in pairs.sort("run_id", "family").group_by("run_id", maintain_order=True):
        fams = sorted(set(part["family"].to_list()))
        s = np.zeros((c, len(fams), _K))
        for i, fam in enumerate(fams):
            f = part.filter(pl.col("family") == fam)
            s[:, i] = pair_sums(
                f["_ci"].to_numpy(), f["s_hat"].to_numpy(),
                f["labelled"].to_numpy(), f["s"].fill_null(False).to_numpy(), c,
            )  # fmt: skip
        run = _Run(run_id, fams, s)
        run.rows = [(f, i) for i, f in enumerate(fams)] if rows == "family" else [(None, None)]
        runs.append(run)
    out: dict[str, list[Any]] = {k: [] for k in (*keys, *CORRECTION_COLUMNS)}
    ests: list[F64] = []
    notes: list[str | None] = []
    for run in runs:
        s = run.sums.sum(axis=0)  # G × 8
        for fam, g in run.rows:
            est = np.array([x[0] for x in _statistics(method, by, s[None], g)])
            why = _note(by, s, g, run.families, min_class)
            if why is None and not np.isnan(est[0]):
                r = _raw(method, by, s, g)
                if not 0.0 <= r <= 1.0:
                    why = f"clipped to [0, 1] from {r:.4f}"
            elif why is None:
                why = "not identifiable: the correction is undefined"
            identifiable = why is None or why.startswith("clipped")
            if not identifiable:
                est[0] = np.nan
            ests.append(est)
            notes.append(why)
            out["run_id"].append(run.run_id)
            if rows == "family":
                out["family"].append(fam)
            tot = s.sum(axis=0)
            cal = s[g] if (g is not None and by == "family") else tot
            out["n_labelled"].append(int(cal[2]))
    n_rows = len(ests)
    est_all = np.array(ests).T if n_rows else np.zeros((3, 0))  # 3 × R
    lo = np.full((3, n_rows), np.nan)
    hi = np.full((3, n_rows), np.nan)
    if plan is not None and n_rows:
        theta = np.empty((3, n_rows, plan.n_resamples))
        big = np.concatenate([r.sums.reshape(c, -1) for r in runs], axis=1)
        edges = np.concatenate([[0], np.cumsum([r.sums.shape[1] * _K for r in runs])])
        for a, e, w in plan.iter_counts(max(1, (1 << 22) // max(1, c))):
            lin = w.astype(np.float64) @ big
            i = 0
            for j, run in enumerate(runs):
                part = lin[:, edges[j] : edges[j + 1]].reshape(e - a, -1, _K)
                for _fam, g in run.rows:
                    for k, x in enumerate(_statistics(method, by, part, g)):
                        theta[k, i, a:e] = x
                    i += 1
        undefined = np.isnan(theta[0]).mean(axis=1)
        jack = _jackknife(method, by, runs) if interval == "bca" else None
        for k in range(3):
            use = "bca" if (k == 0 and interval == "bca") else "percentile"
            iv = intervals(theta[k], est_all[k], level, use, jack=jack)  # type: ignore[arg-type]
            lo[k], hi[k] = iv.lo, iv.hi
        for i in range(n_rows):
            note = notes[i]
            ok = note is None or note.startswith("clipped")
            if ok and not np.isnan(est_all[0, i]) and undefined[i] > MAX_UNDEFINED_SHARE:
                what = (
                    "no labelled pair"
                    if method == "ppi"
                    else "judge sensitivity + specificity <= 1, or no labelled success or failure"
                )
                notes[i] = (
                    f"not identifiable: undefined in {undefined[i]:.0%} of resamples ({what}), "
                    f"more than {MAX_UNDEFINED_SHARE:.0%}"
                )
                est_all[0, i], lo[0, i], hi[0, i] = np.nan, np.nan, np.nan
    for k, name in enumerate(("asr_corrected", "judge_sensitivity", "judge_specificity")):
        out[name] = list(est_all[k])
        out[f"{name}_lo"], out[f"{name}_hi"] = list(lo[k]), list(hi[k])
    out["correction_method"] = [method] * n_rows
    out["correction_by"] = [by] * n_rows
    out["correction_interval"] = [interval if plan is not None else None] * n_rows
    out["correction_note"] = notes
    frame = pl.DataFrame(
        out,
        schema_overrides={
            "n_labelled": pl.Int64, "correction_method": pl.String, "correction_by": pl.String,
            "correction_interval": pl.String, "correction_note": pl.String,
            **{x: pl.Float64 for x in CORRECTION_COLUMNS if x.startswith(("asr", "judge"))},
        },
    )  # fmt: skip
    floats = [x for x in CORRECTION_COLUMNS if x.startswith(("asr", "judge"))]
    return frame.with_columns(pl.col(floats).fill_nan(None))


def _raw(method: str, by: str, s: F64, g: int | None) -> float:
    """The unclipped point estimate of a row (sums ``s``: G × 8)."""
    tot = s.sum(axis=0)
    if g is not None:
        return float(raw(method, s[g], s[g] if by == "family" else tot))
    if by == "overall":
        return float(raw(method, tot, tot))
    e = s[:, 0]
    theta = corrected(method, s, s)
    return float((np.where(e > 0, theta, 0.0) * e).sum() / e.sum())


def _jackknife(method: str, by: str, runs: Sequence[_Run]) -> F64:
    """Rows × C leave-one-cluster-out corrected ASRs (BCa's acceleration)."""
    out = []
    for run in runs:
        s = run.sums  # C × G × 8
        loo = s.sum(axis=0)[None] - s  # C × G × 8
        live = s[..., 0].sum(axis=1) > 0
        for _fam, g in run.rows:
            v = _statistics(method, by, loo, g)[0]
            out.append(np.where(live, v, np.nan))
    return np.array(out)
