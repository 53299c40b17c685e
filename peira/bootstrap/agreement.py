"""Cluster-bootstrap intervals of agreement between judges (docs/spec/agreement.md).

Each row (a run, a group, a pair of judges or the panel) reduces to sums per
cluster (:mod:`peira.metrics.agreement`): contingency counts, Fleiss' sums,
coincidences. A resample weights them by its row of ``W``: one GEMM per block
of resamples for every row of a run, and each statistic is recomputed from
the weighted sums. Intervals are percentile intervals
(:func:`peira.bootstrap.intervals.intervals`); with every weight 1 a
replicate is the point estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ..metrics.agreement import (
    NOT_JUDGED,
    UNDETERMINED,
    UNDETERMINED_CODE,
    cohen_kappa,
    coincidences,
    fleiss_kappa,
    fleiss_sums,
    krippendorff_alpha,
    pair_table,
    raw_agreement,
)
from .intervals import intervals, warn_few_clusters_rows
from .plan import MIN_CLUSTERS, ResamplePlan

__all__ = [
    "AGREEMENT_STATISTICS",
    "AgreementRow",
    "agreement_intervals",
    "agreement_rows",
    "row_statistics",
]

#: The statistics of every row, each with ``_lo`` and ``_hi``.
AGREEMENT_STATISTICS = ("agreement", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha")

F64 = npt.NDArray[np.float64]


@dataclass
class AgreementRow:
    """One row: its keys, counts, and per-cluster sums (C × F) with their layout."""

    keys: dict[str, Any]
    judges: tuple[str, ...]
    counts: dict[str, int]
    sums: F64  # C × F
    k: int

    @property
    def pair(self) -> bool:
        return len(self.judges) == 2


def row_statistics(row: AgreementRow, lin: F64) -> F64:
    """(rows × 4) statistics (:data:`AGREEMENT_STATISTICS`) from weighted sums ``lin``
    (rows × F, the row's per-cluster sums weighted by resamples)."""
    k = row.k
    out = np.full((lin.shape[0], 4), np.nan)
    if row.pair:
        t = lin.reshape(-1, k, k)
        out[:, 0] = raw_agreement(t)
        out[:, 1] = cohen_kappa(t)
        s = np.concatenate(
            [t.sum(axis=(1, 2))[:, None], 2 * t.sum(axis=(1, 2))[:, None]
             + 2 * np.trace(t, axis1=1, axis2=2)[:, None], t.sum(axis=2) + t.sum(axis=1)],
            axis=1,
        )  # fmt: skip
        out[:, 2] = fleiss_kappa(s, 2)[0]
        out[:, 3] = krippendorff_alpha(t + np.swapaxes(t, 1, 2))
        return out
    m = len(row.judges)
    f = lin[:, : 2 + k]
    kappa, p_bar = fleiss_kappa(f, m)
    out[:, 0], out[:, 2] = p_bar, kappa
    out[:, 3] = krippendorff_alpha(lin[:, 2 + k :].reshape(-1, k, k))
    return out


def agreement_rows(
    keys: dict[str, Any],
    v: npt.NDArray[Any],
    no_attack: npt.NDArray[np.bool_],
    ci: npt.NDArray[Any],
    judges: Sequence[str],
    c: int,
    k: int,
) -> list[AgreementRow]:
    """Every pair of ``judges`` and (three or more) the panel, on one run × group."""
    rows = []
    sets = [tuple(p) for p in combinations(range(len(judges)), 2)]
    if len(judges) > 2:
        sets.append(tuple(range(len(judges))))
    live = ~no_attack
    for s in sets:
        sub = v[:, list(s)]
        judged = sub != NOT_JUDGED
        anyj, allj = judged.any(axis=1), judged.all(axis=1)
        det = (sub >= 0).all(axis=1)
        counts = {
            "n": int((live & det).sum()),
            "n_undetermined": int((live & allj & ~det).sum()),
            "n_partial": int((live & anyj & ~allj).sum()),
            "n_no_attack": int((no_attack & anyj).sum()),
        }
        sel = live & anyj
        if len(s) == 2:
            sums = pair_table(ci[sel], sub[sel, 0], sub[sel, 1], c, k).reshape(c, k * k)
            counts["n_pairable"] = counts["n"]
        else:
            fl = fleiss_sums(sub[sel], ci[sel], c, k)
            co = coincidences(sub[sel], ci[sel], c, k).reshape(c, k * k)
            sums = np.concatenate([fl, co], axis=1)
            counts["n_pairable"] = int((live & ((sub >= 0).sum(axis=1) >= 2)).sum())
        rows.append(AgreementRow(keys, tuple(judges[j] for j in s), counts, sums, k))
    return rows


def agreement_intervals(
    items: pl.DataFrame,
    judges: Sequence[str],
    plan: ResamplePlan,
    *,
    by: Sequence[str] = (),
    level: float = 0.95,
) -> pl.DataFrame:
    """Agreement of every pair of ``judges`` and of the panel, per run (× ``by``).

    Parameters
    ----------
    items
        One row per attacked item: ``run_id``, ``case_id``, ``sample``, the
        plan's cluster column, the ``by`` columns, ``no_attack`` and one
        String column per judge (its verdict; null where it did not judge).
    judges
        The panel (two or more column names of ``items``).
    plan
        The resample plan (its clusters cover ``items``).
    by, level
        Grouping columns and the confidence level.

    Returns
    -------
    polars.DataFrame
        Per run × group × judge set: ``judges`` (a list), ``n_judges``, the
        counts ``n``, ``n_undetermined``, ``n_partial``, ``n_no_attack``,
        ``n_pairable``, each statistic of :data:`AGREEMENT_STATISTICS` with
        ``_lo``/``_hi``, and the plan's provenance.
    """
    judges = list(judges)
    cats = sorted(
        {x for j in judges for x in items[j].drop_nulls().unique().to_list()} - {UNDETERMINED}
    )
    k = max(1, len(cats))
    code = {x: i for i, x in enumerate(cats)}
    coded = items.with_columns(
        pl.col(j)
        .replace_strict(
            {**code, UNDETERMINED: UNDETERMINED_CODE}, default=None, return_dtype=pl.Int64
        )
        .fill_null(NOT_JUDGED)
        .alias(j)
        for j in judges
    )
    keys = ["run_id", *by]
    rows: list[AgreementRow] = []
    c = plan.n_clusters
    for key, part in coded.sort(keys).group_by(keys, maintain_order=True):
        v = part.select(judges).to_numpy().astype(np.int64)
        ci = plan.index_of(part[plan.column], source="judgements")
        no_attack = part["no_attack"].fill_null(False).to_numpy().astype(bool)
        rows += agreement_rows(dict(zip(keys, key, strict=True)), v, no_attack, ci, judges, c, k)
    if not rows:
        raise ValueError("no rows")  # the caller refuses an empty input first
    est = np.concatenate([row_statistics(r, r.sums.sum(axis=0)[None]) for r in rows]).T  # 4 × R
    theta = np.empty((4, len(rows), plan.n_resamples))
    widths = [r.sums.shape[1] for r in rows]
    big = np.concatenate([r.sums for r in rows], axis=1)
    edges = np.concatenate([[0], np.cumsum(widths)])
    for a, e, w in plan.iter_counts(max(1, (1 << 22) // max(1, c))):
        lin = w.astype(np.float64) @ big
        for i, r in enumerate(rows):
            theta[:, i, a:e] = row_statistics(r, lin[:, edges[i] : edges[i + 1]]).T
    n_cl = np.array([int((r.sums.sum(axis=1) > 0).sum()) for r in rows], dtype=np.int64)
    out: dict[str, Any] = {k_: [r.keys[k_] for r in rows] for k_ in keys}
    out["judges"] = [list(r.judges) for r in rows]
    out["n_judges"] = [len(r.judges) for r in rows]
    for name in ("n", "n_undetermined", "n_partial", "n_no_attack", "n_pairable"):
        out[name] = [r.counts[name] for r in rows]
    pair = np.array([r.pair for r in rows])
    for s, name in enumerate(AGREEMENT_STATISTICS):
        iv = intervals(theta[s], est[s], level, "percentile")
        e_s, lo, hi = est[s].copy(), iv.lo, iv.hi
        if name == "cohen_kappa":  # Cohen's κ is a statistic of two judges
            e_s[~pair], lo[~pair], hi[~pair] = np.nan, np.nan, np.nan
        out[name], out[f"{name}_lo"], out[f"{name}_hi"] = e_s, lo, hi
    n = len(rows)
    out.update(
        level=[float(level)] * n, method=["percentile"] * n, n_resamples=[plan.n_resamples] * n,
        seed=[plan.seed] * n, unit=[plan.unit] * n, fingerprint=[plan.fingerprint] * n,
        n_clusters=n_cl, few_clusters=n_cl < MIN_CLUSTERS,
    )  # fmt: skip
    frame = pl.DataFrame(
        out,
        schema_overrides={"judges": pl.List(pl.String), "n_judges": pl.Int64, "seed": pl.Int64,
                          "n_resamples": pl.Int64, **{x: pl.Int64 for x in (
                              "n", "n_undetermined", "n_partial", "n_no_attack", "n_pairable")}},
    )  # fmt: skip
    stats = [f"{s}{x}" for s in AGREEMENT_STATISTICS for x in ("", "_lo", "_hi")]
    frame = frame.with_columns(pl.col(stats).cast(pl.Float64).fill_nan(None))
    warn_few_clusters_rows(
        n_cl, lambda i: f"run {rows[i].keys['run_id']}, judges {', '.join(rows[i].judges)}"
    )
    return frame
