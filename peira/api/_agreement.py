"""The agreement verb: how far the judges of a log agree (:mod:`peira.api`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from .._frames import FrameLike, as_polars, is_frame
from ..errors import DataFileError, PeiraValueError, UnknownNameError
from ._data import resample_plan
from ._inputs import PathLike, Split, as_dataset, as_responses, split_cases, validate_params

if TYPE_CHECKING:
    from ..bootstrap import Unit
    from ..io import Dataset

__all__ = ["JUDGEMENT_COLUMNS", "agreement", "read_judgements_file"]

#: The columns of the judgements table (docs/spec/agreement.md#items).
JUDGEMENT_COLUMNS = ("run_id", "case_id", "arm", "sample", "judge", "verdict")
_FILE = "judgements.parquet"


def read_judgements_file(path: PathLike) -> pl.DataFrame:
    """The judgements of ``path``: a ``judgements.parquet`` file, or a dataset directory
    holding one."""
    p = Path(path)
    if p.is_dir():
        p = p / _FILE
    if not p.is_file():
        raise DataFileError(
            f"{p}: no such judgements file (pass --judgements FILE, or judgements=)"
        )
    try:
        frame = pl.read_parquet(p)
    except Exception as exc:  # polars' errors are not OSErrors
        raise DataFileError(f"{p}: not a Parquet file ({type(exc).__name__})") from None
    return _checked(frame, str(p))


def _checked(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """The judgements validated by the data model's rules (docs/spec/data-model.md#judgements:
    columns, types, nulls, the arm, the key), typed; the first violation in one line."""
    from ..errors import InputFormatError, ValidationError
    from ..schema import validate_judgements
    from ._data import _first_violation

    try:
        return validate_judgements(frame, source=source)
    except ValidationError as exc:  # refused in one line, as scoring does (validate lists all)
        raise InputFormatError(_first_violation(exc)) from None


@validate_params
def agreement(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    judgements: PathLike | FrameLike | None = None,
    by: str | None = None,
    judges: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    with_gold: bool = False,
    split: Split = "public",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
) -> pl.DataFrame:
    """Agreement between the judges of a log: every pair, and the panel, per run.

    Computed on the attacked answers (docs/spec/agreement.md): the items a
    pair of judges both judged with a determined verdict give Cohen's κ and
    raw agreement; the panel gives Fleiss' κ (items every judge judged) and
    Krippendorff's α (nominal; items with at least two determined verdicts).
    Items whose attack produced nothing (``no_attack``), items a judge left
    ``undetermined`` and items judged by only some of the judges are left out
    and counted.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames).
    judgements
        The judgements table (a ``judgements.parquet`` file, a directory
        holding one, or a frame); default: the one in the ``cases`` directory.
    by
        None (per run) or ``"family"``.
    judges
        The panel (default: every judge of the table but ``gold``).
    runs
        The runs (default: every run with judgements).
    with_gold
        Put the human labels (judge ``gold``) in the default panel.
    split, n_resamples, seed, unit, level
        As in :func:`score`: the cluster bootstrap over the split's scenarios.

    Returns
    -------
    polars.DataFrame
        One row per run × group × judge set (every pair; the panel when it
        has three or more judges): ``judges``, ``n_judges``, ``n``,
        ``n_undetermined``, ``n_partial``, ``n_no_attack``, ``n_pairable``,
        ``agreement``, ``cohen_kappa``, ``fleiss_kappa``,
        ``krippendorff_alpha`` (each with ``_lo``/``_hi``) and the plan's
        provenance.
    """
    from ..bootstrap.agreement import agreement_intervals
    from ..metrics.agreement import GOLD

    if by not in (None, "family"):
        raise PeiraValueError(f"by must be None or 'family', not {by!r}")
    ds = as_dataset(cases)
    table = _judgements(judgements, cases)
    att = table.filter(pl.col("arm") == "attacked")
    known = sorted(set(att["judge"].unique().to_list()))
    if judges is None:
        panel = [j for j in known if with_gold or j != GOLD]
    else:
        panel = list(dict.fromkeys(judges))
        for j in panel:
            if j not in known:
                raise UnknownNameError("judge", j, known)
    if len(panel) < 2:
        raise PeiraValueError(
            f"agreement needs a panel of at least 2 judges; the judgements give "
            f"{len(panel)} ({', '.join(panel) or 'none'})"
            + (
                "; pass with_gold to add the human labels"
                if GOLD in known and not with_gold
                else ""
            )
        )
    all_runs = sorted(set(att["run_id"].unique().to_list()))
    if runs is not None:
        for r in runs:
            if r not in all_runs:
                raise UnknownNameError("run", r, all_runs)
        att = att.filter(pl.col("run_id").is_in(list(runs)))
    att = att.filter(pl.col("judge").is_in(panel))
    log = as_responses(responses, ds.cases)
    cs = split_cases(ds, split)
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed)
    answered = log.filter(pl.col("arm") == "attacked").select(
        "run_id", "case_id", "sample",
        (pl.col("no_attack") if "no_attack" in log.columns else pl.lit(False))
        .fill_null(False).alias("no_attack"),
        pl.lit(True).alias("_answered"),
    )  # fmt: skip
    joined = att.join(answered, on=["run_id", "case_id", "sample"], how="left")
    lost = joined.filter(pl.col("_answered").is_null())
    if lost.height:
        first = lost.row(0, named=True)
        raise PeiraValueError(
            f"judgements: {lost.height} verdict(s) judge no attacked response of the log "
            f"(first: run {first['run_id']!r}, case {first['case_id']!r}, "
            f"sample {first['sample']})"
        )
    keep = ["case_id", "scenario_id", "family"]
    joined = joined.drop("_answered").join(cs.select(keep), on="case_id", how="inner")
    if joined.is_empty():
        raise PeiraValueError(f"judgements: no attacked verdict on a case of split {split!r}")
    for r in sorted(set(joined["run_id"].unique().to_list())):
        have = sorted(set(joined.filter(pl.col("run_id") == r)["judge"].unique().to_list()))
        if len(have) < 2:
            raise PeiraValueError(
                f"run {r!r}: the verdicts of one judge only ({', '.join(have)}); agreement "
                "needs two (leave the run out with runs=)"
            )
    items = joined.pivot(
        on="judge", index=["run_id", "case_id", "sample", "scenario_id", "family", "no_attack"],
        values="verdict",
    )  # fmt: skip
    for j in panel:
        if j not in items.columns:
            items = items.with_columns(pl.lit(None, pl.String).alias(j))
    return agreement_intervals(items, panel, plan, by=() if by is None else (by,), level=level)


def _judgements(
    judgements: PathLike | FrameLike | None, cases: PathLike | Dataset | FrameLike
) -> pl.DataFrame:
    """The judgements table given, or the one in the dataset directory of ``cases``."""
    if judgements is not None:
        if is_frame(judgements):
            return _checked(as_polars(judgements, name="judgements"), "judgements")
        if isinstance(judgements, str | os.PathLike):
            return read_judgements_file(judgements)
        raise PeiraValueError(
            f"judgements: expected a path or a frame, not {type(judgements).__name__}"
        )
    held = getattr(cases, "judgements", None)  # a dataset in memory, e.g. an importer's result
    if held is not None:
        return _checked(held, "judgements")
    where = getattr(cases, "path", None) if not isinstance(cases, str | os.PathLike) else cases
    if where is None:
        raise PeiraValueError("judgements: none given and the cases are not a dataset directory")
    return read_judgements_file(where)
