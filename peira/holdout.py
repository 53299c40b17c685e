"""The blind holdout (SPEC §8): pseudonymous variants, the blinded export, unblinding.

A secret key pseudonymises every *variant* (case × arm)::

    variant_id = "v-" + hex(HMAC-SHA256(key, f"{case_id}|{arm}"))[:20]

(UTF-8 bytes; ``arm`` never contains ``|``, so the message is unambiguous.)
Without the key a pseudonym carries no order, family, split or arm: the two
arms of a case get unrelated ids, and sorting by ``variant_id`` shuffles
public and holdout, benign and attacked together.

The *blinded export* a model sees holds only ``variant_id, primitive,
prompt, options, input``, sorted by ``variant_id``. Responses keyed by
``variant_id`` are mapped back to a standard response log (SPEC §2.3) by
recomputing the pseudonyms from the dataset and the key. The key is read
from a file or from ``PEIRA_HOLDOUT_KEY`` (:func:`peira.integrity.load_key`) and
never appears in any output or message; pseudonym maps are never written.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from .errors import PeiraError
from .integrity.keys import MIN_KEY_BYTES
from .io import Dataset, write_parquet
from .metrics.keys import group_keys
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


class PseudonymCollisionError(PeiraError, ValueError):
    """Two variants got the same pseudonym (choose more hex digits or another key)."""


class UnblindError(PeiraError, ValueError):
    """Blinded responses cannot be mapped back (wrong key, unknown or missing ids)."""

    exit_code = 1  # the data do not match (a violation), not an unreadable input


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes | bytearray):
        raise TypeError("the holdout key must be bytes")
    if len(key) < MIN_KEY_BYTES:
        raise PeiraError(
            f"the holdout key is {len(key)} bytes; at least {MIN_KEY_BYTES} bytes are required"
        )


def _check_digits(digits: int) -> None:
    if isinstance(digits, bool) or not isinstance(digits, int) or not 8 <= digits <= 64:
        raise ValueError(f"digits must be an integer in [8, 64], not {digits!r}")


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
        raise ValueError(f"arm must be one of {ARMS}, not {arm!r}")
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
        One row per model call: ``variant_id`` plus response columns of SPEC
        §2.3 (``decision``, ``abstained``, ``malformed``, …); no ``case_id``
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
        The unblinded log breaks SPEC §2.3.
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
        raise UnblindError(f"{source}: unknown column(s) {extra} (SPEC §2.3 lists the columns)")
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
) -> pl.DataFrame:
    """Holdout − public value of a metric per run (and group), with a bootstrap CI.

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
        public split and ``seed + 1`` for the holdout.
    by
        Grouping columns besides ``run_id`` (e.g. ``"family"``); each run's
        overall row (group columns null) is always included.
    metric
        A ratio metric of :data:`peira.metrics.RATIO_METRICS` (default ``"asr"``).
    level
        Confidence level (default 0.95).
    n_resamples, seed, unit
        Used to make the default plans.
    adjust
        Multiplicity control of the flag across the k rows reported:
        ``"bonferroni"`` (default) flags on the interval at level
        1 − (1 − level)/k, so that among honest runs a false flag anywhere has
        probability ≤ 1 − level; ``"none"`` flags on the reported interval.

    Returns
    -------
    polars.DataFrame
        One row per run (× group) with pairs in both splits, sorted by
        ``run_id`` and the group columns (overall rows first): ``metric``,
        ``public``, ``holdout``, ``difference`` (holdout − public), ``lo``,
        ``hi``, ``level``, ``method`` ("percentile"), ``n_defined``,
        ``n_resamples``, ``seed_public``, ``seed_holdout``,
        ``fingerprint_public``, ``fingerprint_holdout``, ``few_clusters``,
        ``flag_level``, ``flag_lo``, ``flag_hi`` (the interval the flag is
        decided on) and ``suspected_hill_climbing``.

    Notes
    -----
    d_b = θ_holdout,b − θ_public,b, where the two replicate vectors come from
    independent cluster bootstraps of each split (resamples where either is
    undefined are dropped); the interval is the percentile interval of d. A
    row is flagged as suspected public-set hill-climbing when the flag
    interval (Bonferroni-adjusted across the rows reported, by default)
    excludes 0 on the side where the run does *worse* on the holdout (for
    ASR, where higher is worse: flag_lo > 0). A scenario with cases in both splits
    would make the bootstraps dependent; keep scenarios within one split.

    Raises
    ------
    ValueError
        Plans with different B or the same seed, or no cases in a split.
    KeyError
        Unknown metric.
    """
    from .bootstrap import plan_for_cases, replicates
    from .metrics import RATIO_METRICS

    if metric not in RATIO_METRICS:
        raise KeyError(f"unknown ratio metric {metric!r}; known: {', '.join(RATIO_METRICS)}")
    higher_is_better = RATIO_METRICS[metric].higher_is_better
    pp = plan_public or plan_for_cases(
        cases, split="public", unit=unit, n_resamples=n_resamples, seed=seed
    )
    ph = plan_holdout or plan_for_cases(
        cases, split="holdout", unit=unit, n_resamples=n_resamples, seed=seed + 1
    )
    if pp.n_resamples != ph.n_resamples:
        raise ValueError(
            f"the plans differ in B ({pp.n_resamples} public, {ph.n_resamples} holdout)"
        )
    if pp.seed == ph.seed:
        raise ValueError(
            f"both plans use seed {pp.seed}: their draws would be correlated; give the "
            "holdout plan another seed (default: public seed + 1)"
        )
    keys = group_keys(by)
    groups = keys[1:]
    lf = pairs.lazy()
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
    lo, hi, n_def = _percentile(d, est_h - est_p, level)
    n = joined.height
    if adjust not in ("bonferroni", "none"):
        raise ValueError(f"adjust must be 'bonferroni' or 'none', not {adjust!r}")
    k = max(int(np.count_nonzero(n_def)), 1)
    flag_level = 1 - (1 - level) / k if adjust == "bonferroni" else level
    flo, fhi, _ = _percentile(d, est_h - est_p, flag_level)
    worse = (fhi < 0) if higher_is_better else (flo > 0)
    out = joined.select(keys).with_columns(
        pl.lit(metric).alias("metric"),
        pl.Series("public", est_p, dtype=pl.Float64),
        pl.Series("holdout", est_h, dtype=pl.Float64),
        pl.Series("difference", est_h - est_p, dtype=pl.Float64),
        pl.Series("lo", lo, dtype=pl.Float64),
        pl.Series("hi", hi, dtype=pl.Float64),
        pl.lit(float(level)).alias("level"),
        pl.lit("percentile").alias("method"),
        pl.Series("n_defined", n_def, dtype=pl.Int64),
        pl.lit(pp.n_resamples, dtype=pl.Int64).alias("n_resamples"),
        pl.lit(pp.seed, dtype=pl.Int64).alias("seed_public"),
        pl.lit(ph.seed, dtype=pl.Int64).alias("seed_holdout"),
        pl.lit(pp.fingerprint).alias("fingerprint_public"),
        pl.lit(ph.fingerprint).alias("fingerprint_holdout"),
        pl.lit(pp.few_clusters or ph.few_clusters).alias("few_clusters"),
        pl.lit(float(flag_level)).alias("flag_level"),
        pl.Series("flag_lo", flo, dtype=pl.Float64),
        pl.Series("flag_hi", fhi, dtype=pl.Float64),
        pl.Series("suspected_hill_climbing", worse & ~np.isnan(flo), dtype=pl.Boolean),
    )
    out = out.with_columns(
        pl.col("public", "holdout", "difference", "lo", "hi", "flag_lo", "flag_hi").fill_nan(None)
    )
    assert out.height == n
    return out
