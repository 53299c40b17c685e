"""The data verbs: the pair table, the run sums, reading, flips, validation,
rescoring (:mod:`peira.api`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from .._frames import FrameLike, as_polars, is_frame
from ..errors import InputFormatError, PeiraValueError, ValidationError
from ..io import in_split
from ._inputs import (
    PathLike,
    Split,
    as_dataset,
    as_responses,
    check_engine,
    split_cases,
    validate_params,
)

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import ResamplePlan, Unit
    from ..engine import Engine
    from ..io import Dataset
    from ..metrics.summary import RunSums
    from ..parse import ParserConfig
    from ..rescoring import RescoreResult

__all__ = [
    "flips",
    "judge_panel",
    "judged_pairs",
    "judged_responses",
    "pairs",
    "pairs_and_cases",
    "read_log",
    "resample_plan",
    "rescore",
    "run_sums",
    "validate",
]


@validate_params
def pairs_and_cases(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    split: str = "public",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    judge: str | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pairs, cases) of ``split`` (every split when ``"all"``): the pair table and the
    cases a resample plan of that split is drawn over. With ``judge``, each decision is
    that judge's verdict and the undetermined pairs are left out (:func:`judged_pairs`)."""
    table, cs, _ = judged_pairs(
        responses, cases, split=split, missing=missing, delta=delta, engine=engine, judge=judge
    )
    return table, cs


def judged_pairs(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    split: str = "public",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    judge: str | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(pairs, cases, undetermined): :func:`pairs_and_cases`, and the pairs of ``split``
    whose verdict by ``judge`` is undetermined (docs/spec/judges.md), left out of the
    pair table and returned apart (every column of the pair table; empty without
    ``judge``).

    ``judge`` names a judge of the dataset's ``judgements.parquet`` or is
    ``"majority"``; None (default) scores the decisions in the log.
    """
    from .._pairs import PAIR_KEYS, build_pairs

    check_engine(engine, "the pair table")
    ds = as_dataset(cases)
    log = as_responses(responses, ds.cases)
    pending = None
    if judge is not None:
        log, pending = judged_responses(log, ds, judge)
    table = in_split(build_pairs(log, ds.cases, missing=missing, delta=delta), split)
    if pending is None:
        return table, split_cases(ds, split), table.head(0)
    keys = list(PAIR_KEYS)
    undetermined = table.join(pending, on=keys, how="semi", maintain_order="left")
    kept = table.join(pending, on=keys, how="anti", maintain_order="left")
    return kept, split_cases(ds, split), undetermined


def judged_responses(
    log: pl.DataFrame, ds: Dataset, judge: str, *, drop: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The validated ``log`` scored by ``judge`` (:func:`peira._pairs.judged_log`) with the
    verdicts of ``ds``'s ``judgements.parquet``, and its undetermined pairs' keys; with
    ``drop``, their rows are left out of the log (what a ranking reads).

    Raises
    ------
    InputFormatError
        The judgements table breaks a rule: its first violation, in one line.
    """
    from .._pairs import PAIR_KEYS, judged_log
    from ..io import dataset_judgements

    try:
        verdicts = dataset_judgements(ds)
    except ValidationError as exc:  # scoring refuses it in one line (peira validate lists all)
        raise InputFormatError(_first_violation(exc)) from None
    out, pending = judged_log(log, verdicts, judge)
    if drop:
        out = out.join(pending, on=list(PAIR_KEYS), how="anti", maintain_order="left")
    return out, pending


def judge_panel(ds: Dataset, judges: str | Sequence[str]) -> list[str]:
    """The panel ``judges`` names on ``ds``'s ``judgements.parquet``: ``"all"`` is every
    judge of the table but ``gold`` (sorted; name ``gold`` to add the human labels),
    otherwise the names given (a judge of the table or ``"majority"``; repeats dropped).

    Raises
    ------
    PeiraValueError
        No judgements table; a panel of fewer than two judges.
    UnknownNameError
        A name that is neither a judge of the table nor ``majority``.
    InputFormatError
        The judgements table breaks a rule (its first violation).
    """
    from .._pairs import MAJORITY
    from ..errors import UnknownNameError
    from ..io import dataset_judgements
    from ..schema import GOLD

    try:
        verdicts = dataset_judgements(ds)
    except ValidationError as exc:
        raise InputFormatError(_first_violation(exc)) from None
    if verdicts is None:
        raise PeiraValueError(
            "judges: the dataset has no judgements table (judgements.parquet); a panel "
            "needs the verdicts of two judges or more"
        )
    known = sorted(set(verdicts["judge"].to_list()))
    if isinstance(judges, str):
        names = [j for j in known if j != GOLD] if judges == "all" else [judges]
    else:
        names = list(dict.fromkeys(judges))
        if "all" in names and len(names) > 1:
            raise PeiraValueError(
                f"judges: 'all' is the whole panel and stands alone, not among names: {names!r}"
            )
        names = [j for j in known if j != GOLD] if names == ["all"] else names
    for name in names:
        if name not in (*known, MAJORITY):
            raise UnknownNameError("judge", name, [*known, MAJORITY])
    if len(names) < 2:
        raise PeiraValueError(
            f"judges: a panel needs two judges or more, got {names!r} "
            f"(the table holds {', '.join(known)}); score by one judge with judge=NAME"
        )
    return names


def _first_violation(exc: ValidationError) -> str:
    """A validation error as one line: its first violation, with file, row, key and value."""
    f = exc.failures.row(0, named=True)
    where = ", ".join(str(x) for x in (f"row {f['row']}" if f["row"] is not None else None,
                                       f["key"]) if x)  # fmt: skip
    more = f" (and {exc.failures.height - 1} more)" if exc.failures.height > 1 else ""
    return f"{f['source']}: {where}: {f['column']} = {f['value']} breaks {f['check']}{more}"


@validate_params
def resample_plan(
    cases: pl.DataFrame, *, unit: Unit = "cluster", n_resamples: int = 10_000, seed: int = 0
) -> ResamplePlan:
    """The resample plan over ``cases`` (:func:`peira.bootstrap.plan_for_cases`)."""
    from ..bootstrap import plan_for_cases

    return plan_for_cases(cases, unit=unit, n_resamples=n_resamples, seed=seed)


@validate_params
def run_sums(
    responses: PathLike | FrameLike | Any,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    unit: Unit = "cluster",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    judge: str | None = None,
) -> RunSums:
    """The log's run sums, every split (:mod:`peira.metrics.summary`), on an engine.

    What the leaderboard, the comparisons, the ranking gates and the tables
    built from them read: ``peira.leaderboard``, ``peira.compare`` and
    ``peira.tables`` reduce the log to this on the engine asked for, then
    rank locally. ``unit`` picks the cluster column (``scenario_id``, or
    ``case_id`` for a case bootstrap). With ``judge`` (local engine only), the
    decisions are that judge's verdicts and the undetermined pairs are left out
    (docs/spec/judges.md).
    """
    from ..engine import get_engine
    from ..engine.base import Engine

    check_engine(engine, "" if judge is None else "judge=")
    ds = as_dataset(cases)
    if judge is not None:
        responses, _ = judged_responses(as_responses(responses, ds.cases), ds, judge, drop=True)
    eng = get_engine(engine)
    # An engine written against the protocol without subclassing it gets the
    # protocol's default (the local pair table, summed).
    reduce = eng.run_sums if hasattr(eng, "run_sums") else partial(Engine.run_sums, eng)
    if isinstance(responses, os.PathLike) and getattr(eng, "name", "") != "local":
        responses = os.fspath(responses)
    cluster = "scenario_id" if unit == "cluster" else "case_id"
    made: RunSums = reduce(responses, ds.cases, cluster=cluster, missing=missing, delta=delta)
    return made


@validate_params
def read_log(
    path: PathLike,
    *,
    cases: PathLike | Dataset | FrameLike | None = None,
    format: str | None = None,
    run_id: str | None = None,
) -> pl.DataFrame:
    """Read a response log: Parquet, or any registered format that produces one.

    Parameters
    ----------
    path
        A Parquet file, a directory of part files or a glob; or a file of a
        format in :data:`peira.importers.IMPORTERS` (``artifact``,
        ``transcript``, …), told by ``format`` or by its suffix.
    cases
        If given, every response must refer to a known case with a decision
        inside its options.
    format
        The importer to use (default: Parquet for ``.parquet`` files,
        directories and globs; else told from the suffix).
    run_id
        ``run_id`` of the imported responses (importers only).

    Returns
    -------
    polars.DataFrame
        The validated response log.

    Examples
    --------
    >>> import peira
    >>> log = peira.read_log(peira.demo_dir() / "responses.parquet")
    >>> log.select("run_id").n_unique()
    8
    """
    from ..importers import importer_for
    from ..io import read_responses
    from ..schema import validate_responses

    ds = as_dataset(cases) if cases is not None else None
    known = ds.cases if ds is not None else None
    p = Path(path)
    if format is None and (p.is_dir() or p.suffix == ".parquet" or any(c in str(p) for c in "*?[")):
        if run_id is not None:
            raise PeiraValueError("run_id applies to imported formats, not to Parquet logs")
        return read_responses(p, cases=known)
    imp = importer_for(p, format)
    if imp.produces != "responses":
        raise PeiraValueError(
            f"{p}: format {imp.name!r} gives a {imp.produces}, not a response log alone "
            f"(peira import {imp.name} writes it as a dataset directory)"
        )
    return validate_responses(imp.read(p, run_id=run_id), cases=known, source=str(p))


@validate_params
def pairs(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    split: Split = "public",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
) -> pl.DataFrame:
    """The pair table: one row per run × case × sample with every flag of the scoring rule.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    split
        ``"public"`` (default, as every command: docs/spec/uncertainty.md#splits),
        ``"holdout"`` or ``"all"``.
    missing
        A pair lacking an arm: ``"error"`` (default, :class:`peira.errors.MissingArmsError`)
        or ``"malformed"`` (scored as a malformed answer).
    delta
        Shift-without-flip threshold on score cases (default 0.10).
    engine
        Where the pairs are built: ``"local"`` (polars in this process; the
        pair table is held in memory, so this is the only engine here).

    Returns
    -------
    polars.DataFrame
        See docs/spec/data-model.md#pair-table and :func:`peira._pairs.build_pairs`.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> p = peira.pairs(d / "responses.parquet", d, split="public")
    >>> p.height, p["eligible"].dtype
    (7672, Boolean)
    """
    table, _ = pairs_and_cases(
        responses, cases, split=split, missing=missing, delta=delta, engine=engine
    )
    return table


@validate_params
def flips(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    split: Split = "public",
    runs: Sequence[str] = (),
    families: Sequence[str] = (),
    reasons: Sequence[str] = (),
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str = "polars",
) -> pl.DataFrame:
    """Every pair the attack flipped, with the benign and attacked input and raw output.

    What ``peira flips`` lists and the HTML report's drill-down shows: the
    pairs behind ASR's numerator (eligible ∧ flipped,
    docs/spec/scoring-rule.md), each with its ``reason`` (``decision_flip``,
    ``abstention_flip`` or ``malformed_flip``).

    Parameters
    ----------
    responses, cases
        The response log and the dataset (paths or frames; the dataset's
        variants give the inputs, so ``cases`` is a dataset directory or a
        :class:`~peira.io.Dataset`).
    split
        ``"public"`` (default), ``"holdout"`` or ``"all"``.
    runs, families, reasons
        Keep only these (empty keeps all); an unknown name is an error naming
        the closest known one.
    missing, delta, engine
        As in :func:`pairs`.

    Returns
    -------
    polars.DataFrame
        :func:`peira.report.flips.flipped_pairs`'s columns, sorted by run,
        case and sample.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> f = peira.flips(d / "responses.parquet", d, runs=["m03-abstain-dos"])
    >>> f.group_by("reason").len().sort("reason").rows()
    [('abstention_flip', 363), ('decision_flip', 31), ('malformed_flip', 6)]
    """
    from .._pairs import build_pairs
    from ..report.flips import flipped_pairs

    check_engine(engine)
    ds = as_dataset(cases)
    log = as_responses(responses, ds.cases)
    table = in_split(build_pairs(log, ds.cases, missing=missing, delta=delta), split)
    return flipped_pairs(table, log, ds.variants, runs=runs, families=families, reasons=reasons)


@validate_params
def validate(
    dataset: PathLike | Dataset | FrameLike,
    responses: PathLike | FrameLike | Sequence[PathLike | FrameLike] = (),
) -> pl.DataFrame:
    """Every violation of the data model, as a frame (empty when all is valid).

    Unlike the readers, which raise :class:`peira.errors.ValidationError` at
    the first file with violations, this lists every violation of every
    table at once.

    Parameters
    ----------
    dataset
        A dataset directory, a :class:`peira.io.Dataset` or a frame of cases.
    responses
        Response logs (paths or frames) to check against the cases.

    Returns
    -------
    polars.DataFrame
        One row per violation: ``table``, ``source``, ``row``, ``key``,
        ``column``, ``check``, ``value`` (docs/spec/data-model.md).

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> peira.validate(d, d / "responses.parquet").height
    0
    """
    from ..errors import ValidationError
    from ..io import Dataset, incomplete_pairs, read_responses, validate_files
    from ..schema import collect_failures

    logs = (
        [responses]
        if is_frame(responses) or isinstance(responses, str | os.PathLike)
        else responses
    )
    logs = list(logs)
    if isinstance(dataset, str | os.PathLike) and all(
        isinstance(r, str | os.PathLike) for r in logs
    ):
        return validate_files(dataset, logs)
    if isinstance(dataset, Dataset):
        cases_raw, variants_raw = dataset.cases, dataset.variants
    elif is_frame(dataset):
        cases_raw, variants_raw = as_polars(dataset, name="cases"), None
    else:
        ds = as_dataset(dataset)
        cases_raw, variants_raw = ds.cases, ds.variants
    cs, f_cases = collect_failures(cases_raw, "cases", source="cases")
    usable = cs if f_cases.filter(pl.col("check") == "missing_column").is_empty() else None
    parts = [f_cases]
    if variants_raw is not None:
        parts.append(collect_failures(variants_raw, "variants", source="variants", cases=usable)[1])
    for i, r in enumerate(logs):
        source = str(r) if isinstance(r, str | os.PathLike) else f"responses[{i}]"
        if isinstance(r, str | os.PathLike):
            try:
                log = read_responses(r, cases=usable)
            except ValidationError as exc:
                parts.append(exc.failures)
                continue
        else:
            log, failures = collect_failures(
                as_polars(r, name=source), "responses", source=source, cases=usable
            )
            if failures.height:
                parts.append(failures)
                continue
        parts.append(incomplete_pairs(log, source=source))
    return pl.concat(parts)


@validate_params
def rescore(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    missing: Missing = "error",
    delta: float = 0.10,
) -> RescoreResult:
    """Re-parse a log's ``raw_text`` with another parser and report what changes.

    No model is called. See :func:`peira.rescoring.rescore` for the parsers and
    docs/spec/scoring-rule.md for how decisions become pairs.

    Returns
    -------
    RescoreResult
        Frames: ``responses`` (re-parsed log), ``changed_pairs``, ``summary``
        (per run) and ``metric_deltas`` (re-parsed − logged, per metric).
    """
    from ..rescoring import rescore as _rescore

    ds = as_dataset(cases)
    log = as_responses(responses, ds.cases)
    return _rescore(log, ds.cases, parser=parser, missing=missing, delta=delta)
