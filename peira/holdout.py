"""The blind holdout (docs/spec/holdout.md): pseudonymous variants, the blinded export, unblinding.

A secret key pseudonymises every *variant* (case × arm)::

    variant_id = "v-" + hex(HMAC-SHA256(key, f"{case_id}|{arm}"))[:20]

(UTF-8 bytes; ``arm`` never contains ``|``, so the message is unambiguous.)
Without the key a pseudonym carries no order, family, split or arm: the two
arms of a case get unrelated ids, and sorting by ``variant_id`` shuffles
public and holdout, benign and attacked together.

The *blinded export* a model sees holds only ``variant_id, primitive,
prompt, options, input``, sorted by ``variant_id``. Responses keyed by
``variant_id`` are mapped back to a standard response log (docs/spec/data-model.md#responses) by
recomputing the pseudonyms from the dataset and the key. The key is read
from a file or from ``PEIRA_HOLDOUT_KEY`` (:func:`peira.integrity.load_key`) and
never appears in any output or message; pseudonym maps are never written.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from .errors import (
    PeiraError,
    PeiraTypeError,
    PeiraValueError,
    PseudonymCollisionError,
    UnblindError,
)
from .integrity.keys import MIN_KEY_BYTES
from .io import Dataset, write_parquet
from .metrics.keys import check_by
from .schema import ARMS, RESPONSES_SCHEMA, validate_responses

if TYPE_CHECKING:
    from .bootstrap import ResamplePlan, Unit

__all__ = [
    "BLIND_COLUMNS",
    "HOLDOUT_KEY_ENV",
    "ID_HEX_DIGITS",
    "PREFIX",
    "PseudonymCollisionError",
    "UnblindError",
    "blind",
    "divergence",
    "pseudonym",
    "pseudonyms",
    "unblind",
    "write_blinded",
]

PathLike = str | os.PathLike[str]

HOLDOUT_KEY_ENV = "PEIRA_HOLDOUT_KEY"
PREFIX = "v-"
ID_HEX_DIGITS = 20
BLIND_COLUMNS = ("variant_id", "primitive", "prompt", "options", "input")
_RUN_COLUMNS = ("run_id", "model", "model_version")
_SHOW = 10


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes | bytearray):
        raise PeiraTypeError("the holdout key must be bytes")
    if len(key) < MIN_KEY_BYTES:
        raise PeiraError(
            f"the holdout key is {len(key)} bytes; at least {MIN_KEY_BYTES} bytes are required"
        )


def _check_digits(digits: int) -> None:
    if isinstance(digits, bool) or not isinstance(digits, int) or not 8 <= digits <= 64:
        raise PeiraValueError(f"digits must be an integer in [8, 64], not {digits!r}")


def pseudonym(
    key: bytes, case_id: str, arm: str, *, prefix: str = PREFIX, digits: int = ID_HEX_DIGITS
) -> str:
    """The pseudonymous id of one variant.

    Parameters
    ----------
    key
        Secret key (at least 16 bytes).
    case_id, arm
        The variant.
    prefix
        Prepended to the hex digest (default ``"v-"``).
    digits
        Hex digits of HMAC-SHA256 kept (default 20, i.e. 80 bits).

    Examples
    --------
    >>> pseudonym(b"0123456789abcdef", "c1", "benign")
    'v-ec73dc4ef00db5375d9b'
    """
    _check_key(key)
    _check_digits(digits)
    if arm not in ARMS:
        raise PeiraValueError(f"arm must be one of {ARMS}, not {arm!r}")
    mac = hmac.new(bytes(key), f"{case_id}|{arm}".encode(), hashlib.sha256).hexdigest()
    return prefix + mac[:digits]


def pseudonyms(
    variants: pl.DataFrame,
    key: bytes,
    *,
    prefix: str = PREFIX,
    digits: int = ID_HEX_DIGITS,
) -> pl.DataFrame:
    """The pseudonym map of a variants table: ``case_id, arm, variant_id``.

    Parameters
    ----------
    variants
        A frame with ``case_id`` and ``arm`` (the variants table).
    key, prefix, digits
        As in :func:`pseudonym`.

    Returns
    -------
    polars.DataFrame
        One row per variant, sorted by ``variant_id``. Keep it in memory: the
        map is secret (it unblinds the holdout) and is never written.

    Raises
    ------
    PseudonymCollisionError
        Two variants share an id (the message names both and suggests more digits).
    """
    _check_key(key)
    _check_digits(digits)
    cids = variants["case_id"].to_list()
    arms = variants["arm"].to_list()
    k = bytes(key)
    ids = [
        prefix + hmac.new(k, f"{c}|{a}".encode(), hashlib.sha256).hexdigest()[:digits]
        for c, a in zip(cids, arms, strict=True)
    ]
    out = pl.DataFrame(
        {"case_id": cids, "arm": arms, "variant_id": ids},
        schema={"case_id": pl.String, "arm": pl.String, "variant_id": pl.String},
    ).sort("variant_id")
    dup = out.filter(pl.col("variant_id").is_duplicated())
    if dup.height:
        first = dup.filter(pl.col("variant_id") == dup["variant_id"][0])
        who = ", ".join(f"({c!r}, {a!r})" for c, a in first.select("case_id", "arm").iter_rows())
        raise PseudonymCollisionError(
            f"{dup['variant_id'].n_unique()} pseudonym collision(s) with {digits} hex digits "
            f"(first: variants {who}); use more digits (e.g. digits={min(64, digits + 8)})"
        )
    return out


def blind(
    dataset: Dataset, key: bytes, *, prefix: str = PREFIX, digits: int = ID_HEX_DIGITS
) -> pl.DataFrame:
    """The blinded export of a dataset: what a model may see, keyed by pseudonym.

    Parameters
    ----------
    dataset
        The dataset (public and holdout cases alike are exported).
    key, prefix, digits
        As in :func:`pseudonym`.

    Returns
    -------
    polars.DataFrame
        Exactly the columns ``variant_id, primitive, prompt, options, input``,
        one row per variant, sorted by ``variant_id``. No case_id, arm,
        family, suite, split or scenario.

    Notes
    -----
    Blinding hides identities, not content: a prompt or input that itself
    names its case, split or arm leaks it, and the two arms of a case share
    their benign text by construction.
    """
    ids = pseudonyms(dataset.variants, key, prefix=prefix, digits=digits)
    prim = dataset.cases.select("case_id", "primitive")
    return (
        ids.join(dataset.variants, on=["case_id", "arm"], how="left")
        .join(prim, on="case_id", how="left")
        .select(*BLIND_COLUMNS)
        .sort("variant_id")
    )


def write_blinded(
    dataset: Dataset,
    key: bytes,
    out: PathLike,
    *,
    prefix: str = PREFIX,
    digits: int = ID_HEX_DIGITS,
) -> Path:
    """Write :func:`blind` to a Parquet file (atomically) and return its path."""
    return write_parquet(blind(dataset, key, prefix=prefix, digits=digits), out)


def _listing(values: Sequence[Any]) -> str:
    shown = ", ".join(repr(v) for v in values[:_SHOW])
    return shown + (f", … ({len(values) - _SHOW} more)" if len(values) > _SHOW else "")


def unblind(
    responses: pl.DataFrame,
    dataset: Dataset,
    key: bytes,
    *,
    run_id: str | None = None,
    model: str | None = None,
    model_version: str | None = None,
    prefix: str = PREFIX,
    digits: int = ID_HEX_DIGITS,
    source: str = "responses",
) -> pl.DataFrame:
    """Map responses keyed by ``variant_id`` back to a standard response log.

    Parameters
    ----------
    responses
        One row per model call: ``variant_id`` plus response columns of docs/spec/data-model.md#responses (``decision``, ``abstained``, ``malformed``, …); no ``case_id``
        or ``arm``. Optional columns absent are filled with their defaults.
    dataset
        The dataset that was blinded.
    key, prefix, digits
        The key and pseudonym settings used for the export.
    run_id, model, model_version
        Fill (or confirm) these columns; each is required when the responses
        lack the column.
    source
        Name of the responses in messages.

    Returns
    -------
    polars.DataFrame
        A validated response log, sorted by ``run_id, case_id, arm, sample``.

    Raises
    ------
    UnblindError
        No ``variant_id`` matches (wrong key, or another dataset), some ids
        are unknown (listed) or null, the responses carry ``case_id``/``arm``,
        or run columns are missing or contradict the arguments.
    ValidationError
        The unblinded log breaks docs/spec/data-model.md#responses.
    """
    if "variant_id" not in responses.columns:
        raise UnblindError(f"{source}: no variant_id column (responses to a blinded export)")
    leaked = [c for c in ("case_id", "arm") if c in responses.columns]
    if leaked:
        raise UnblindError(
            f"{source}: blinded responses must not carry {leaked}; only variant_id identifies a row"
        )
    if responses.height == 0:
        raise UnblindError(f"{source}: no rows")
    n_null = responses["variant_id"].null_count()
    if n_null:
        raise UnblindError(f"{source}: {n_null} row(s) have a null variant_id")
    ids = pseudonyms(dataset.variants, key, prefix=prefix, digits=digits)
    seen = responses.select(pl.col("variant_id").cast(pl.String).unique().sort())
    unknown = seen.join(ids, on="variant_id", how="anti")["variant_id"].to_list()
    if len(unknown) == seen.height:
        raise UnblindError(
            f"{source}: none of the {seen.height} variant_id(s) matches a pseudonym of the "
            f"dataset under this key (first: {unknown[0]!r}); the key is wrong, or the "
            "responses answer another dataset's export. Nothing was written."
        )
    if unknown:
        raise UnblindError(
            f"{source}: {len(unknown)} of {seen.height} variant_id(s) are not pseudonyms of "
            f"this dataset under this key: {_listing(unknown)}"
        )
    out = responses.join(ids, on="variant_id", how="left").drop("variant_id")
    given = {"run_id": run_id, "model": model, "model_version": model_version}
    for col, value in given.items():
        if value is None:
            if col not in out.columns:
                flag = "--" + col.replace("_", "-")
                raise UnblindError(f"{source}: no {col} column; pass {col}= ({flag})")
            continue
        if col in out.columns:
            other = out.filter(pl.col(col).cast(pl.String).ne_missing(value))[col]
            if other.len():
                raise UnblindError(
                    f"{source}: column {col} holds {other[0]!r} but {col}={value!r} was given"
                )
        out = out.with_columns(pl.lit(value, dtype=pl.String).alias(col))
    if "sample" not in out.columns:
        out = out.with_columns(pl.lit(0, dtype=pl.Int32).alias("sample"))
    extra = [c for c in out.columns if c not in RESPONSES_SCHEMA]
    if extra:
        raise UnblindError(
            f"{source}: unknown column(s) {extra} (docs/spec/data-model.md#responses lists the columns)"
        )
    checked = validate_responses(out, cases=dataset.cases, source=source)
    return checked.select(list(RESPONSES_SCHEMA)).sort("run_id", "case_id", "arm", "sample")


# ---------------------------------------------------------------- divergence


def _percentile(
    d: npt.NDArray[np.float64], estimate: npt.NDArray[np.float64], level: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Percentile interval per row of ``d`` (the bootstrap's order-statistic rule)."""
    from .bootstrap.intervals import intervals

    r = intervals(d.copy(), estimate, level, "percentile")
    return r.lo, r.hi, r.n_defined


def _check_flag_level(level: float) -> None:
    """The flag's one-sided bound is the end of a two-sided interval at
    1 − 2α (α = 1 − level), so it needs α < 1/2: a level above 0.5."""
    if not 0.5 < level < 1:
        alpha = 1 - Fraction(repr(float(level)))
        raise PeiraValueError(
            f"level {level!r}: the holdout divergence flag is a one-sided test at "
            f"alpha = 1 - level = {float(alpha):g}, which needs a level in (0.5, 1)"
        )


#: The range a one-sided p-value of the divergence test is reported in.
P_FLOOR, P_CEILING = 1e-12, 0.5


def _one_sided_p(flags_at: Any, iterations: int = 48) -> float:
    """inf {a : ``flags_at(a)``} over [:data:`P_FLOOR`, :data:`P_CEILING`), by bisection
    on log a (``flags_at`` is monotone: a test at a larger α flags more).

    Returns the smallest a found to flag (the upper end of the final bracket),
    :data:`P_FLOOR` when the floor already flags and :data:`P_CEILING` when
    no a below 1/2 does.
    """
    if flags_at(P_FLOOR):
        return P_FLOOR
    top = P_CEILING * (1 - 1e-9)
    if not flags_at(top):
        return P_CEILING
    lo, hi = np.log(P_FLOOR), np.log(top)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if flags_at(float(np.exp(mid))):
            hi = mid
        else:
            lo = mid
    return float(np.exp(hi))


def divergence(
    pairs: pl.DataFrame | pl.LazyFrame,
    cases: pl.DataFrame,
    *,
    plan_public: ResamplePlan | None = None,
    plan_holdout: ResamplePlan | None = None,
    by: str | Sequence[str] | None = None,
    metric: str = "asr",
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    adjust: Literal["bonferroni", "none"] = "bonferroni",
    family: Literal["run", "board"] = "run",
) -> pl.DataFrame:
    """Holdout − public value of a metric per run (and group), with a bootstrap CI and a flag.

    Parameters
    ----------
    pairs
        The pair table of the runs over both splits (column ``split``).
    cases
        The dataset's cases (both splits): each split's clusters come from here.
    plan_public, plan_holdout
        Resample plans of each split (:func:`peira.bootstrap.plan_for_cases`
        with ``split=``). They must have the same B and different seeds, so
        that the two bootstraps are independent. Default: ``seed`` for the
        public split and ``seed + 1`` for the holdout
        (:func:`peira.bootstrap.plan.holdout_seed`: 0 after the largest seed).
    by
        Grouping columns besides ``run_id`` (e.g. ``"family"``); each run's
        overall row (group columns null) is always included.
    metric
        A ratio metric of :data:`peira.metrics.RATIO_METRICS` (default ``"asr"``).
    level
        Confidence level of the reported interval; the flag is a one-sided
        test at α = 1 − level per run (default 0.95: α = 0.05).
    n_resamples, seed, unit
        Used to make the default plans.
    adjust
        Multiplicity control *within each run*: ``"bonferroni"`` (default)
        tests each of the run's k rows (overall, plus one per group with
        ``by``) at α/k, so that an honest run is flagged anywhere with
        probability ≤ α; ``"none"`` tests every row at α. Used with
        ``family="run"`` only.
    family
        The family of tests the flag controls: ``"run"`` (default) — each
        run's own rows, as ``adjust`` says, so that an honest run is flagged
        with probability ≤ α; ``"board"`` — every row of every run analysed
        together (the board), with Holm's step-down: a row is flagged iff
        its Holm-adjusted one-sided p-value is below α, so that the chance
        that *some* run of an honest board is flagged is ≤ α.

    Returns
    -------
    polars.DataFrame
        One row per run (× group) with pairs in both splits, sorted by
        ``run_id`` and the group columns (overall rows first): ``metric``,
        ``public``, ``holdout``, ``difference`` (holdout − public), ``lo``,
        ``hi`` (two-sided interval at ``level``), ``level``, ``method``
        (``"mover (…)"`` with the interval methods of the two splits, e.g.
        ``"mover (bca)"`` or ``"mover (bca, korn-graubard)"``), ``n_defined``
        (resamples where both splits' statistics are defined), ``n_resamples``, ``seed_public``,
        ``seed_holdout``, ``fingerprint_public``, ``fingerprint_holdout``,
        ``n_clusters_public``, ``n_clusters_holdout`` (clusters behind the
        row's denominator in each split), ``few_clusters`` (either is below
        30), ``flag_family`` (k, the run's tests), ``flag_alpha`` (α/k or α),
        ``flag_bound`` (the one-sided bound the flag is decided on) and
        ``suspected_hill_climbing``. With ``family="board"``:
        ``flag_family`` is m, the tests of the board (the rows with a defined
        difference); ``flag_alpha`` is the row's Holm step level α/(m − j + 1),
        j its place among the p-values in ascending order (ties in row
        order); ``flag_bound`` the one-sided bound at that level; and two
        more columns follow ``flag_bound``: ``p_value`` (the one-sided
        p-value below) and ``p_holm`` (its Holm adjustment,
        min(1, max over i ≤ j of (m − i + 1)·p₍ᵢ₎)).

    Notes
    -----
    Each split has its own plan and its own interval, the library default
    (:func:`peira.bootstrap.ratio_intervals` with ``method="auto"``: BCa
    where the cluster bootstrap carries the row, Korn–Graubard where it does
    not); the difference's interval combines the two by MOVER
    (:func:`peira.bootstrap.smallcell.mover_difference`, Newcombe 1998), so
    it is never [0, 0] at 0 events in both splits. The bootstraps of the two
    splits are independent (different seeds).
    The flag is one-sided: the run does *worse* on the holdout. For ASR
    (higher is worse) a row is flagged iff the lower one-sided bound — the
    MOVER lower end at two-sided level 1 − 2α/k — is above 0; for a metric
    where higher is better, iff the upper end is below 0. The family of
    tests is the run's own rows, so a run's flag depends only on its own
    pairs and the two plans, never on which other runs are analysed.

    With ``family="board"`` a row's one-sided p-value is the inverse of the
    same test: the smallest a at which the bound at two-sided level 1 − 2a
    would flag it, p = inf {a : MOVER lower end at 1 − 2a > 0} (for ASR),
    found by bisection on log a to a relative precision below 1e-9, so that
    p < a' exactly when the row's test at a' flags it (to that precision).
    It is reported within [1e-12, 0.5]: 1e-12 when the row is flagged at
    every level tried, 0.5 when it is flagged at none below 1/2 (the test
    is one-sided and α is below 1/2, so no such row is ever flagged). Holm
    at α controls the board's family-wise false-flag rate; the flag of a
    run then depends on the other runs of the board.
    A scenario with cases in both splits would make the bootstraps
    dependent; validation rejects such datasets.

    Raises
    ------
    ValueError
        Plans with different B or the same seed, no cases in a split, or a
        ``level`` of 0.5 or less (the one-sided flag needs α = 1 − level < 0.5).
    KeyError
        Unknown metric.
    """
    from .bootstrap import plan_for_cases, replicates
    from .bootstrap.intervals import cell_intervals
    from .bootstrap.plan import MIN_CLUSTERS, holdout_seed
    from .bootstrap.smallcell import mover_difference
    from .metrics import RATIO_METRICS

    if adjust not in ("bonferroni", "none"):
        raise PeiraValueError(f"adjust must be 'bonferroni' or 'none', not {adjust!r}")
    if family not in ("run", "board"):
        raise PeiraValueError(f"family must be 'run' or 'board', not {family!r}")
    if family == "board" and adjust != "bonferroni":
        raise PeiraValueError(
            f"adjust={adjust!r} applies to family='run' only; family='board' adjusts by Holm"
        )
    _check_flag_level(level)
    higher_is_better = RATIO_METRICS[metric].higher_is_better
    pp = plan_public or plan_for_cases(
        cases, split="public", unit=unit, n_resamples=n_resamples, seed=seed
    )
    ph = plan_holdout or plan_for_cases(
        cases, split="holdout", unit=unit, n_resamples=n_resamples, seed=holdout_seed(seed)
    )
    if pp.n_resamples != ph.n_resamples:
        raise PeiraValueError(
            f"the plans differ in B ({pp.n_resamples} public, {ph.n_resamples} holdout)"
        )
    if pp.seed == ph.seed:
        raise PeiraValueError(
            f"both plans use seed {pp.seed}: their draws would be correlated; give the "
            "holdout plan another seed (default: public seed + 1)"
        )
    lf = pairs.lazy()
    keys = ["run_id", *check_by(by, lf.collect_schema().names())]
    groups = keys[1:]
    reps = {
        split: replicates(
            lf.filter(pl.col("split") == split).collect(),
            plan,
            metric,
            by=groups or None,
            overall=bool(groups),
        )
        for split, plan in (("public", pp), ("holdout", ph))
    }
    kp = reps["public"].keys.with_row_index("_p")
    kh = reps["holdout"].keys.with_row_index("_h")
    joined = kp.join(kh, on=keys, how="inner", nulls_equal=True).sort(keys, nulls_last=False)
    ip = joined["_p"].to_numpy().astype(np.int64)
    ih = joined["_h"].to_numpy().astype(np.int64)
    est_p = reps["public"].estimate[ip]
    est_h = reps["holdout"].estimate[ih]
    d = reps["holdout"].theta[ih] - reps["public"].theta[ip]
    diff = est_h - est_p
    _, _, n_def = _percentile(d, diff, level)
    n = joined.height
    cells_p, cells_h = reps["public"].cells, reps["holdout"].cells
    assert cells_p is not None and cells_h is not None
    cp, ch = cells_p.take(ip), cells_h.take(ih)

    def split_ci(split: str, rows: npt.NDArray[np.int64], cells: Any, lvl: float) -> Any:
        r = reps[split]
        return cell_intervals(r.theta[rows], r.estimate[rows], r.jackknife[rows], cells, lvl)

    def mover(lvl: float) -> tuple[Any, Any, Any, Any]:
        """MOVER of each split's interval (the default method: BCa or Korn-Graubard)."""
        h = split_ci("holdout", ih, ch, lvl)
        p = split_ci("public", ip, cp, lvl)
        mlo, mhi = mover_difference(est_h, h.lo, h.hi, est_p, p.lo, p.hi)
        return mlo, mhi, h.method, p.method

    lo, hi, used_h, used_p = mover(float(level))
    # the family of tests is each run's own rows with a defined difference
    runs = joined["run_id"].to_numpy()
    defined = (n_def > 0) & ~np.isnan(diff)
    tests = np.zeros(n, dtype=np.int64)
    for run in np.unique(runs):
        rows = runs == run
        tests[rows] = int(np.count_nonzero(defined & rows))
    base = 1 - Fraction(repr(float(level)))  # α as the decimal the level prints as
    alpha = np.array(
        [float(base / (max(int(k), 1) if adjust == "bonferroni" else 1)) for k in tests]
    )
    alpha = np.where(defined, alpha, np.nan)
    bound = np.full(n, np.nan)
    for a in np.unique(alpha[~np.isnan(alpha)]):
        rows = alpha == a
        mlo, mhi, _, _ = mover(float(1 - 2 * Fraction(repr(float(a)))))
        bound[rows] = (mhi if higher_is_better else mlo)[rows]
    method = [
        "mover (" + ", ".join(sorted({str(x), str(y)})) + ")"
        for x, y in zip(used_h, used_p, strict=True)
    ]
    worse = (bound < 0) if higher_is_better else (bound > 0)
    flagged = worse & ~np.isnan(bound)
    board: list[pl.Series] = []
    if family == "board":

        def flags_at(row: int, a: float) -> bool:
            """Whether row ``row``'s one-sided test at α = ``a`` flags it."""
            sel = np.array([row], dtype=np.int64)
            lvl = 1 - 2 * a
            rh, rp = reps["holdout"], reps["public"]
            h = cell_intervals(
                rh.theta[ih[sel]], est_h[sel], rh.jackknife[ih[sel]], ch.take(sel), lvl
            )
            p = cell_intervals(
                rp.theta[ip[sel]], est_p[sel], rp.jackknife[ip[sel]], cp.take(sel), lvl
            )
            mlo, mhi = mover_difference(est_h[sel], h.lo, h.hi, est_p[sel], p.lo, p.hi)
            b = float((mhi if higher_is_better else mlo)[0])
            return bool(b < 0) if higher_is_better else bool(b > 0)

        rows_def = np.flatnonzero(defined)
        m = rows_def.size
        pval = np.full(n, np.nan)
        for row in rows_def:
            pval[row] = _one_sided_p(lambda a, row=int(row): flags_at(row, a))
        order = rows_def[np.argsort(pval[rows_def], kind="stable")]
        adj = np.full(n, np.nan)
        step = np.full(n, np.nan)
        running = 0.0
        for j, row in enumerate(order):
            running = max(running, (m - j) * float(pval[row]))
            adj[row] = min(1.0, running)
            step[row] = float(base / (m - j))
        tests = np.where(defined, m, 0).astype(np.int64)
        alpha = step
        bound = np.full(n, np.nan)
        for a in np.unique(alpha[~np.isnan(alpha)]):
            rows = alpha == a
            mlo, mhi, _, _ = mover(float(1 - 2 * Fraction(repr(float(a)))))
            bound[rows] = (mhi if higher_is_better else mlo)[rows]
        flagged = defined & (np.nan_to_num(adj, nan=1.0) < float(base))
        board = [
            pl.Series("p_value", pval, dtype=pl.Float64),
            pl.Series("p_holm", adj, dtype=pl.Float64),
        ]
    cl_p = reps["public"].n_clusters
    cl_h = reps["holdout"].n_clusters
    assert cl_p is not None and cl_h is not None
    ncp, nch = cl_p[ip], cl_h[ih]
    out = joined.select(keys).with_columns(
        pl.lit(metric).alias("metric"),
        pl.Series("public", est_p, dtype=pl.Float64),
        pl.Series("holdout", est_h, dtype=pl.Float64),
        pl.Series("difference", diff, dtype=pl.Float64),
        pl.Series("lo", lo, dtype=pl.Float64),
        pl.Series("hi", hi, dtype=pl.Float64),
        pl.lit(float(level)).alias("level"),
        pl.Series("method", method, dtype=pl.String),
        pl.Series("n_defined", n_def, dtype=pl.Int64),
        pl.lit(pp.n_resamples, dtype=pl.Int64).alias("n_resamples"),
        pl.lit(pp.seed, dtype=pl.Int64).alias("seed_public"),
        pl.lit(ph.seed, dtype=pl.Int64).alias("seed_holdout"),
        pl.lit(pp.fingerprint).alias("fingerprint_public"),
        pl.lit(ph.fingerprint).alias("fingerprint_holdout"),
        pl.Series("n_clusters_public", ncp, dtype=pl.Int64),
        pl.Series("n_clusters_holdout", nch, dtype=pl.Int64),
        pl.Series("few_clusters", (ncp < MIN_CLUSTERS) | (nch < MIN_CLUSTERS), dtype=pl.Boolean),
        pl.Series("flag_family", tests, dtype=pl.Int64),
        pl.Series("flag_alpha", alpha, dtype=pl.Float64),
        pl.Series("flag_bound", bound, dtype=pl.Float64),
        *board,
        pl.Series("suspected_hill_climbing", flagged, dtype=pl.Boolean),
    )
    floats = ["public", "holdout", "difference", "lo", "hi", "flag_alpha", "flag_bound"]
    out = out.with_columns(pl.col(*floats, *(s.name for s in board)).fill_nan(None))
    assert out.height == n
    return out
