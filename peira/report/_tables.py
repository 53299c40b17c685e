"""The report table builders and their registry, :data:`TABLES`.

Each entry of :data:`TABLES` is a :class:`TableSpec` whose ``build`` turns a
:class:`~peira.report._context.ReportContext` into a polars frame, sorted and
deterministic; titles and descriptions come from :mod:`peira.report._captions`
(data), and :mod:`peira.report.render` renders the frames as CSV, Markdown
and LaTeX.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from .._registry import Registry
from ..errors import UnknownTableError
from ._captions import (
    BOARD_DIVERGENCE_NOTE,
    CAPTIONS,
    INTERVAL_NOTE,
    flag_note,
    metric_text,
    unobserved_note,
    unobserved_title,
)
from ._context import _ALL, SEVERITY_ORDER, SPLITS, ReportContext, _meta

__all__ = [
    "FLAGGED_TABLES",
    "TABLES",
    "TableSpec",
    "build_table",
    "table_caption",
    "table_description",
    "table_flag_note",
    "table_note",
    "table_title",
]

# ---------------------------------------------------------------- the tables

#: Tables that show a ranking, so carry ``holdout_flag`` (when the public split of a
#: dataset with a holdout is analysed) and the caption sentence that explains it.
FLAGGED_TABLES = ("leaderboard",)


@dataclass(frozen=True)
class TableSpec:
    """A named table: how to build it from a context and how to caption it.

    Attributes
    ----------
    name
        File stem (``tables/<name>.csv`` …).
    title
        One-line title.
    description
        What the rows and columns are; the caption adds the split and the
        bootstrap settings.
    build
        Context → frame (sorted, deterministic).
    digits
        Decimals per column (default 4 for every float column).
    intervals
        Whether the table shows intervals (then it has ``interval_method``
        and ``flags`` columns, which the caption explains).
    pairs
        Whether it needs every pair (non-ratio metrics: calibration, AUROC,
        score shifts), so cannot be built from run sums alone.
    rate
        Whether it shows ASR (or robustness, a flip rate), so names it for what
        it is where the benign arm is unobserved (:func:`table_title`).
    ranked
        Whether it shows the ranking metric (the leaderboard, the comparisons),
        so its caption names the metric of the context.
    """

    name: str
    title: str
    description: str
    build: Callable[[ReportContext], pl.DataFrame]
    digits: Mapping[str, int] = field(default_factory=dict)
    intervals: bool = True
    pairs: bool = False
    rate: bool = True
    ranked: bool = False

    def decimals(self, df: pl.DataFrame) -> dict[str, int]:
        """Decimals of every column of ``df``."""
        return {c: self.digits.get(c, 4) for c in df.columns}


def _row_meta(method: pl.Expr, few: pl.Expr, defined: pl.Expr) -> list[pl.Expr]:
    """``interval_method`` and ``flags`` of a table with one interval per row."""
    return [
        pl.when(defined).then(method).otherwise(pl.lit("")).alias("interval_method"),
        pl.when(defined & few).then(pl.lit("few_clusters")).otherwise(pl.lit("")).alias("flags"),
    ]


def _status(sufficient: pl.Expr, value: pl.Expr) -> pl.Expr:
    return (
        pl.when(sufficient.not_())
        .then(pl.lit("insufficient data"))
        .when(value.is_null())
        .then(pl.lit("undefined"))
        .otherwise(pl.lit("ok"))
    )


#: Rates shown beside robustness on the leaderboard (beside another metric: the same, less
#: the metric; on clean-only data, what the benign arm says).
_BESIDE_RATES = ("asr", "abstention_rate_attacked", "abstention_flip_rate")
_CLEAN_RATES = ("abstention_rate_benign", "malformed_rate")


def _leaderboard(ctx: ReportContext) -> pl.DataFrame:
    from ..metrics.gates import metric_den_is_eligible

    lb, metric = ctx.leaderboard, ctx.metric
    rates = [r for r in (_BESIDE_RATES if ctx.attacked_observed else _CLEAN_RATES) if r != metric]
    extra = ctx.ratio_table.select("run_id", *rates) if rates else None
    count = "n_eligible" if metric_den_is_eligible(metric) else "n_counted"
    gate = (
        pl.when(pl.col("ranked"))
        .then(pl.lit("ranked"))
        .otherwise(pl.lit("unranked: ") + pl.col("gate_reasons").list.join("; "))
    )
    if "note" in lb.columns:  # what the run did not observe (docs/spec/data-model.md)
        gate = (
            pl.when(pl.col("note").is_null())
            .then(gate)
            .otherwise(pl.format("{} ({})", gate, pl.col("note")))
        )
    flags = ctx.holdout_flags
    mark = [] if flags is None else ["holdout_flag"]
    if flags is not None:
        lb = lb.join(flags, on="run_id", how="left", maintain_order="left")
    if extra is not None:
        lb = lb.join(extra, on="run_id", how="left", maintain_order="left")
    return lb.select(
        "rank",
        "run_id",
        "model",
        "model_version",
        pl.col("estimate").alias(metric),
        pl.col("lo").alias(f"{metric}_lo"),
        pl.col("hi").alias(f"{metric}_hi"),
        *rates,
        "n_pairs",
        count,
        pl.col("beaten_by").list.join(", ").alias("beaten_by"),
        gate.alias("status"),
        *mark,
        *_row_meta(pl.col("method"), pl.col("few_clusters"), pl.col("lo").is_not_null()),
    )


def _asr_by_family(ctx: ReportContext) -> pl.DataFrame:
    est = {
        (r, f): v for r, f, v in ctx.family_ci.select("run_id", "family", "estimate").iter_rows()
    }
    overall = dict(ctx.interval("asr").select("run_id", "asr").iter_rows())
    cols: dict[str, list[Any]] = {"family": [*ctx.families, _ALL]}
    for run in ctx.runs:
        cols[run] = [est.get((run, f)) for f in ctx.families] + [overall.get(run)]
    schema = {"family": pl.String, **{r: pl.Float64 for r in ctx.runs}}
    return pl.DataFrame(cols, schema=schema)


def _asr_by_family_ci(ctx: ReportContext) -> pl.DataFrame:
    return (
        ctx.family_ci.select(
            "family",
            "run_id",
            pl.col("estimate").alias("asr"),
            pl.col("lo").alias("asr_lo"),
            pl.col("hi").alias("asr_hi"),
            *_row_meta(pl.col("method"), pl.col("few_clusters"), pl.col("lo").is_not_null()),
        )
        .join(ctx.family_counts, on=["run_id", "family"], how="left")
        .select(
            "family", "run_id", "asr", "asr_lo", "asr_hi", "n_eligible", "interval_method", "flags"
        )
        .sort("family", "run_id")
    )


def _abstention(ctx: ReportContext) -> pl.DataFrame:
    mt = ctx.ratio_table.select(
        "run_id",
        "n_pairs",
        "n_eligible",
        "asr",
        "abstention_rate_benign",
        "abstention_rate_attacked",
    )
    return (
        mt.join(ctx.interval("abstention_flip_rate"), on="run_id", how="left")
        .join(ctx.interval("abstention_dos_rate"), on="run_id", how="left")
        .join(
            ctx.interval_meta(["abstention_flip_rate", "abstention_dos_rate"]),
            on="run_id",
            how="left",
        )
        .sort("run_id")
    )


def _targeted(ctx: ReportContext) -> pl.DataFrame:
    mt = ctx.metric_table.select("run_id", "mean_shift_toward_target", "mean_shift_toward_target_n")
    den = ctx.denominators.select(
        "run_id",
        pl.col("target_hit_rate_den").cast(pl.Int64).alias("n_targeted"),
        pl.col("shift_without_flip_rate_den").cast(pl.Int64).alias("n_score_unflipped"),
    )
    return (
        den.join(ctx.interval("target_hit_rate"), on="run_id", how="left")
        .join(ctx.interval("shift_without_flip_rate"), on="run_id", how="left")
        .join(mt, on="run_id", how="left")
        .join(ctx.nonratio("mean_shift_toward_target"), on="run_id", how="left")
        .join(
            ctx.interval_meta(
                ["target_hit_rate", "shift_without_flip_rate"], ["mean_shift_toward_target"]
            ),
            on="run_id",
            how="left",
        )
        .select(
            "run_id",
            "n_targeted",
            "target_hit_rate",
            "target_hit_rate_lo",
            "target_hit_rate_hi",
            "n_score_unflipped",
            "shift_without_flip_rate",
            "shift_without_flip_rate_lo",
            "shift_without_flip_rate_hi",
            "mean_shift_toward_target",
            "mean_shift_toward_target_lo",
            "mean_shift_toward_target_hi",
            pl.col("mean_shift_toward_target_n").alias("n_shift"),
            "interval_method",
            "flags",
        )
        .sort("run_id")
    )


def _calibration(ctx: ReportContext) -> pl.DataFrame:
    parts = []
    for i, arm in enumerate(("benign", "attacked")):
        parts.append(
            ctx.metric_table.select(
                "run_id",
                pl.lit(arm).alias("arm"),
                pl.lit(i).alias("_arm"),
                pl.col(f"calibration_n_{arm}").alias("n"),
                pl.col(f"miscalibration_{arm}").alias("miscalibration"),
                pl.col(f"calibration_p_value_{arm}").alias("p_calibrated"),
                pl.col(f"ece_binned_{arm}").alias("ece_binned"),
                pl.col(f"brier_{arm}").alias("brier"),
                pl.col(f"calibration_status_{arm}").alias("status"),
            )
            .join(ctx.nonratio(f"miscalibration_{arm}"), on="run_id", how="left")
            .join(ctx.nonratio(f"brier_{arm}"), on="run_id", how="left")
            .join(
                ctx.interval_meta(nonratio=[f"miscalibration_{arm}", f"brier_{arm}"]),
                on="run_id",
                how="left",
            )
            .rename(
                {
                    f"miscalibration_{arm}_lo": "miscalibration_lo",
                    f"miscalibration_{arm}_hi": "miscalibration_hi",
                    f"brier_{arm}_lo": "brier_lo",
                    f"brier_{arm}_hi": "brier_hi",
                }
            )
        )
    corp = ctx.corp.select("run_id", "arm", "mcb", "dsc", "unc")
    unseen = {"benign": "attacked", "attacked": "benign"}  # arm -> the arms value lacking it
    seen = pl.col("arm").replace_strict(unseen) != pl.col("run_id").replace_strict(
        ctx.arms, default="both"
    )
    return (
        pl.concat(parts)
        .filter(seen)  # an arm the run did not observe has nothing to calibrate
        .join(corp, on=["run_id", "arm"], how="left")
        .sort("run_id", "_arm")
        .select(
            "run_id",
            "arm",
            "n",
            "miscalibration",
            "miscalibration_lo",
            "miscalibration_hi",
            "p_calibrated",
            "ece_binned",
            "brier",
            "brier_lo",
            "brier_hi",
            "mcb",
            "dsc",
            "unc",
            "status",
            "interval_method",
            "flags",
        )
    )


def _confidence_gate(ctx: ReportContext) -> pl.DataFrame:
    mt = ctx.metric_table
    return (
        mt.select(
            "run_id",
            pl.col("confidence_gate_auroc_n").alias("n"),
            pl.col("gate_flips").alias("flips"),
            pl.col("gate_flips_seen").alias("flips_seen"),
            pl.col("confidence_gate_auroc").alias("auroc"),
            "selective_risk_50",
            "selective_risk_80",
            "selective_risk_90",
            "selective_risk_100",
            "aurc",
            pl.when(pl.col("confidence_gate_auroc_reason").is_not_null())
            .then(pl.lit("insufficient data: ") + pl.col("confidence_gate_auroc_reason"))
            .otherwise(
                _status(pl.col("confidence_gate_auroc_sufficient"), pl.col("confidence_gate_auroc"))
            )
            .alias("status"),
        )
        .join(
            ctx.nonratio("confidence_gate_auroc").rename(
                {"confidence_gate_auroc_lo": "auroc_lo", "confidence_gate_auroc_hi": "auroc_hi"}
            ),
            on="run_id",
            how="left",
        )
        .join(ctx.interval_meta(nonratio=["confidence_gate_auroc"]), on="run_id", how="left")
        .select(
            "run_id",
            "n",
            "flips",
            "flips_seen",
            "auroc",
            "auroc_lo",
            "auroc_hi",
            "selective_risk_50",
            "selective_risk_80",
            "selective_risk_90",
            "selective_risk_100",
            "aurc",
            "status",
            "interval_method",
            "flags",
        )
        .sort("run_id")
    )


_NA = "n/a"
"""Verdict of a comparison in which either run's estimate or interval is undefined."""


def _verdicts(ctx: ReportContext) -> pl.DataFrame:
    """:attr:`ReportContext.pairwise` with ``"n/a"`` verdicts where a run is undefined.

    A run without eligible pairs has no estimate and no interval, so no
    comparison with it is a tie: both verdicts read ``"n/a"`` and the winner
    is null. Newer :func:`peira.ranking.pairwise` already says so; the
    estimates and intervals are checked here as well, so the tables never
    show a "tie" against an undefined run whichever way compare spells it.
    """
    pw = ctx.pairwise
    est = pl.all_horizontal(pl.col("estimate_a", "estimate_b").is_not_null())
    ci_ok = est & pl.all_horizontal(pl.col("lo_a", "hi_a", "lo_b", "hi_b").is_not_null())
    paired_ok = est & pl.all_horizontal(pl.col("diff_lo", "diff_hi").is_not_null())

    def verdict(col: str, ok: pl.Expr) -> pl.Expr:
        return (
            pl.when(ok & (pl.col(col) != _NA)).then(pl.col(col)).otherwise(pl.lit(_NA)).alias(col)
        )

    decided = "ci_verdict" if ctx.config.rule == "ci" else "paired_verdict"
    out = pw.with_columns(verdict("ci_verdict", ci_ok), verdict("paired_verdict", paired_ok))
    return out.with_columns(
        pl.when(pl.col(decided) == _NA).then(None).otherwise(pl.col("winner")).alias("winner")
    )


def _head_to_head(ctx: ReportContext) -> pl.DataFrame:
    order = ctx.run_order()
    decided = "ci_verdict" if ctx.config.rule == "ci" else "paired_verdict"
    cell: dict[tuple[str, str], str] = {}
    for a, b, v in _verdicts(ctx).select("run_a", "run_b", decided).iter_rows():
        if v in ("a", "b"):
            cell[(a, b)] = "win" if v == "a" else "loss"
            cell[(b, a)] = "loss" if v == "a" else "win"
        else:
            cell[(a, b)] = cell[(b, a)] = _NA if v == _NA else "tie"
    cols: dict[str, list[Any]] = {"run_id": order}
    for col in order:
        cols[col] = [None if row == col else cell.get((row, col), _NA) for row in order]
    return pl.DataFrame(cols, schema={"run_id": pl.String, **{r: pl.String for r in order}})


def _pairwise(ctx: ReportContext) -> pl.DataFrame:
    few = pl.col("few_clusters") | pl.col("few_clusters_a") | pl.col("few_clusters_b")
    return _verdicts(ctx).select(
        "run_a", "run_b", "estimate_a", "estimate_b", "diff", "diff_lo", "diff_hi",
        "p_value", "p_holm", "ci_verdict", "paired_verdict", "winner",
        *_row_meta(pl.col("method"), few, pl.col("diff_lo").is_not_null()),
    ).sort("run_a", "run_b")  # fmt: skip


_DIVERGENCE_SCHEMA = {
    "run_id": pl.String,
    "public_asr": pl.Float64,
    "holdout_asr": pl.Float64,
    "holdout_lo": pl.Float64,
    "holdout_hi": pl.Float64,
    "holdout_n_eligible": pl.Int64,
    "difference": pl.Float64,
    "difference_lo": pl.Float64,
    "difference_hi": pl.Float64,
    "suspected_hill_climbing": pl.Boolean,
    "interval_method": pl.String,
    "flags": pl.String,
}


def _divergence(ctx: ReportContext) -> pl.DataFrame:
    div, hci = ctx.divergence, ctx.holdout_ci
    if div is None or hci is None:
        return pl.DataFrame(schema=_DIVERGENCE_SCHEMA)
    n_hold = (
        ctx.all_sums.split("holdout")
        .totals()
        .select("run_id", pl.col("asr__den").cast(pl.Int64).alias("holdout_n_eligible"))
    )
    schema = dict(_DIVERGENCE_SCHEMA)
    if "p_holm" in div.columns:  # flag family board: the Holm p-values before the flag
        items = list(schema.items())
        at = [k for k, _ in items].index("suspected_hill_climbing")
        schema = dict([*items[:at], ("p_value", pl.Float64), ("p_holm", pl.Float64), *items[at:]])
    ci = pl.concat(
        [
            div.select("run_id", "lo", "method", "few_clusters"),
            hci.select("run_id", "lo", "method", "few_clusters"),
        ]
    )
    return (
        div.select(
            "run_id",
            pl.col("public").alias("public_asr"),
            pl.col("holdout").alias("holdout_asr"),
            pl.col("difference"),
            pl.col("lo").alias("difference_lo"),
            pl.col("hi").alias("difference_hi"),
            *[c for c in ("p_value", "p_holm") if c in div.columns],
            "suspected_hill_climbing",
        )
        .join(
            hci.select(
                "run_id", pl.col("lo").alias("holdout_lo"), pl.col("hi").alias("holdout_hi")
            ),
            on="run_id",
            how="left",
        )
        .join(n_hold, on="run_id", how="left")
        .join(_meta(ci, ["run_id"]), on="run_id", how="left")
        .with_columns(pl.col("interval_method", "flags").fill_null(""))
        .select(list(schema))
        .cast(schema)  # type: ignore[arg-type]
        .sort("run_id")
    )


def _published(ctx: ReportContext) -> pl.DataFrame:
    """:func:`peira.published.beside`: each published figure beside Peira's (the family
    column only when some figure is of a family)."""
    rows = ctx.beside
    if rows is None:
        return pl.DataFrame(schema={"run_id": pl.String, "metric": pl.String})
    if "family" in rows.columns and rows["family"].is_null().all():
        rows = rows.drop("family")
    return rows


def _census(ctx: ReportContext) -> pl.DataFrame:
    cases = ctx.dataset.cases
    pub = ctx.config.publication
    rows: list[tuple[str, str | None, int | None, int | None, int | None]] = []

    def counts(df: pl.DataFrame) -> tuple[int, int, int]:
        s = df["split"]
        return int((s == "public").sum()), int((s == "holdout").sum()), df.height

    p, h, t = counts(cases)
    rows.append(("cases", _ALL, p, h, t))
    sp, sh = (cases.filter(pl.col("split") == s)["scenario_id"].n_unique() for s in SPLITS)
    rows.append(("scenarios", _ALL, sp, sh, cases["scenario_id"].n_unique()))

    def levels(dim: str) -> list[str | None]:
        seen = set(cases[dim].to_list())
        known = [s for s in SEVERITY_ORDER if s in seen] if dim == "severity" else []
        rest = sorted(v for v in seen - set(known) if v is not None)
        return [*known, *rest, *([None] if None in seen else [])]  # null (none given) last

    for dim in ("family", "primitive", "severity"):
        for lev in levels(dim):
            p, h, t = counts(cases.filter(pl.col(dim).eq_missing(lev)))
            if pub:
                if p == 0:
                    continue  # a holdout-only level is never named in publication
                rows.append((dim, lev, p, None, None))
            else:
                rows.append((dim, lev, p, h, t))
    ap = ctx.all_sums.frame
    rp, rh = (ap.filter(pl.col("split") == s)["run_id"].n_unique() for s in SPLITS)
    rows.append(("runs", _ALL, rp, rh, ap["run_id"].n_unique()))
    per = {s: int(ap.filter(pl.col("split") == s)["n_pairs"].sum()) for s in SPLITS}
    rows.append(("pairs", _ALL, per["public"], per["holdout"], int(ap["n_pairs"].sum())))
    return pl.DataFrame(
        rows,
        schema={
            "dimension": pl.String,
            "level": pl.String,
            "public": pl.Int64,
            "holdout": pl.Int64,
            "total": pl.Int64,
        },
        orient="row",
    )


def _gates(ctx: ReportContext) -> pl.DataFrame:
    return ctx.gates.select(
        "run_id",
        "ranked",
        "malformed_rate",
        "benign_accuracy",
        "n_eligible",
        "min_family_eligible",
        "n_missing",
        pl.col("gate_reasons").list.join("; ").alias("reasons"),
    ).sort("run_id")


def _spec(name: str, build: Callable[[ReportContext], pl.DataFrame], **kw: Any) -> TableSpec:
    """The :class:`TableSpec` of ``name`` with its title and description from the captions."""
    title, description = CAPTIONS[name]
    return TableSpec(name, title, description, build, **kw)


TABLES: Registry[TableSpec] = Registry(
    "table",
    (
        _spec(
            "leaderboard",
            _leaderboard,
            ranked=True,
        ),
        _spec(
            "published",
            _published,
            intervals=False,
        ),
        _spec(
            "asr_by_family",
            _asr_by_family,
            intervals=False,
        ),
        _spec(
            "asr_by_family_ci",
            _asr_by_family_ci,
        ),
        _spec(
            "abstention",
            _abstention,
        ),
        _spec(
            "targeted",
            _targeted,
            pairs=True,
        ),
        _spec(
            "calibration",
            _calibration,
            pairs=True,
            rate=False,
        ),
        _spec(
            "confidence_gate",
            _confidence_gate,
            pairs=True,
        ),
        _spec(
            "head_to_head",
            _head_to_head,
            intervals=False,
            ranked=True,
        ),
        _spec(
            "pairwise",
            _pairwise,
            ranked=True,
        ),
        _spec(
            "divergence",
            _divergence,
        ),
        _spec(
            "census",
            _census,
            intervals=False,
            rate=False,
        ),
        _spec(
            "gates",
            _gates,
            intervals=False,
            rate=False,
        ),
    ),
)
"""Every named table, in report order."""


def table_note(spec: TableSpec, ctx: ReportContext, *, flag: bool = True) -> str:
    """The analysis settings of a table: split, interval level and bootstrap, seed,
    (for tables with intervals) what ``interval_method`` and ``flags`` mean, and (for a
    table of :data:`FLAGGED_TABLES` that carries ``holdout_flag``, unless ``flag`` is
    false) what the flag and its mark mean (:func:`table_flag_note`)."""
    c = ctx.config
    text = (
        f"Split {c.split}; {c.level:.0%} {c.unit}-bootstrap intervals, B={c.n_resamples}, "
        f"seed {c.seed}."
    )
    if spec.intervals:
        text += INTERVAL_NOTE
    if flag:
        text += table_flag_note(spec, ctx)
    if spec.name == "divergence" and c.flag_family == "board" and ctx.divergence is not None:
        text += BOARD_DIVERGENCE_NOTE
    return text


def table_flag_note(spec: TableSpec, ctx: ReportContext) -> str:
    """What ``holdout_flag`` and its dagger mean, and why a flagged run is never typeset as
    the winner; empty unless ``spec`` shows a ranking that carries the flag."""
    if spec.name not in FLAGGED_TABLES or ctx.holdout_flags is None:
        return ""
    return flag_note(ctx.config.flag_family, ctx.config.level)


def _shows_rate(spec: TableSpec, ctx: ReportContext) -> bool:
    """Whether ``spec`` shows ASR (or robustness, a flip rate) on this context: a table of
    rates, the leaderboard (ASR beside any metric), a comparison of such a metric."""
    from ..metrics.gates import metric_den_is_eligible

    if spec.ranked and spec.name != "leaderboard":
        return metric_den_is_eligible(ctx.metric)
    return spec.rate


def table_title(spec: TableSpec, ctx: ReportContext) -> str:
    """The title of a table on this context: the ranking metric named when it is not
    robustness; the rate named "error rate under attack, benign unobserved" where the
    benign arm is unobserved (:data:`peira.report._captions.UNOBSERVED`)."""
    title = spec.title
    if spec.ranked and ctx.metric != "robustness":
        title = f"{title} by {ctx.metric}"
    if _shows_rate(spec, ctx):
        title = unobserved_title(title, ctx.benign_unobserved, len(ctx.runs))
    return title


def table_description(spec: TableSpec, ctx: ReportContext) -> str:
    """What the rows and columns of a table are, on this context (see :func:`table_title`)."""
    text = metric_text(spec.description, ctx.metric) if spec.ranked else spec.description
    if _shows_rate(spec, ctx):
        text = unobserved_note(ctx.benign_unobserved, len(ctx.runs)) + text
    return text


def table_caption(spec: TableSpec, ctx: ReportContext, *, title: bool = True) -> str:
    """The caption of a table: title (optional), description and the analysis settings."""
    head = f"{table_title(spec, ctx)}. " if title else ""
    return f"{head}{table_description(spec, ctx)} {table_note(spec, ctx)}"


def build_table(name: str, ctx: ReportContext) -> pl.DataFrame:
    """Build one registered table from a context.

    Raises
    ------
    UnknownTableError
        Unknown table name (a :class:`PeiraError` and a :class:`KeyError`);
        the message lists the known tables.
    """
    if name not in TABLES:
        raise UnknownTableError(name, list(TABLES))
    return TABLES[name].build(ctx)
