"""The report's tables as frames (:mod:`peira.api`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

from .._frames import FrameLike
from ..errors import PeiraValueError
from ._data import run_sums
from ._inputs import (
    PathLike,
    Split,
    as_dataset,
    as_responses,
    check_engine,
    engine_name,
    validate_params,
)

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import Unit
    from ..engine import Engine
    from ..io import Dataset
    from ..metrics.gates import GateThresholds
    from ..ranking import Rule, Support

__all__ = ["tables"]


@validate_params
def tables(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    names: Sequence[str] | None = None,
    split: Split = "public",
    rule: Rule = "ci",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    support: Support = "common",
    gates: GateThresholds | Mapping[str, float | int | bool] | None = None,
) -> dict[str, pl.DataFrame]:
    """The report's tables (:data:`peira.report.TABLES`) as frames, by name.

    ``peira tables`` writes the same tables as CSV, Markdown and LaTeX.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    names
        Tables to build (default: all, in report order); unknown names raise
        :class:`peira.errors.UnknownTableError` with the close matches.
    split, rule, n_resamples, seed, unit, level
        As in :func:`leaderboard` (the holdout plan of the divergence table
        uses ``seed + 1``).
    missing, delta
        As in :func:`pairs`.
    engine
        Where the log is reduced: ``"local"`` (default) or ``"spark"`` (or an
        engine object). On Spark the log is reduced to its run sums
        (:func:`run_sums`) and every table built from ratio metrics, the
        gates, the leaderboard, the comparisons and the divergence comes from
        them, the same as on the local engine; the tables that need every
        pair (``targeted``: the mean score shift; ``calibration``;
        ``confidence_gate``: AUROC and selective risk) are left out of the
        default set, and asking for one by name is an error saying so.
    support, gates
        As in :func:`leaderboard`: the leaderboard's and the comparisons'.

    Returns
    -------
    dict of str to polars.DataFrame

    Raises
    ------
    PeiraValueError
        A table that needs every pair, asked for by name on a non-local engine.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> t = peira.tables(d / "responses.parquet", d, names=["gates"], n_resamples=200)
    >>> list(t), t["gates"].height
    (['gates'], 8)
    """
    from ..errors import UnknownTableError
    from ..metrics.gates import GateThresholds
    from ..report import TABLES, ReportConfig, ReportContext, build_table

    ds = as_dataset(cases)
    local = check_engine(engine)
    config = ReportConfig(
        split=split,
        n_resamples=n_resamples,
        seed=seed,
        unit=unit,
        level=level,
        rule=rule,
        delta=delta,
        missing=missing,
        thresholds=GateThresholds.of(gates),
        support=support,
    )
    wanted = list(TABLES) if names is None else list(names)
    for name in wanted:
        if name not in TABLES:
            raise UnknownTableError(name, TABLES)
    if local:
        ctx = ReportContext(ds, as_responses(responses, ds.cases), config)
        return {name: build_table(name, ctx) for name in wanted}
    need = [n for n in wanted if TABLES[n].pairs]
    if names is not None and need:
        raise PeiraValueError(
            f"table(s) {', '.join(need)} need every pair (non-ratio metrics) and are built on "
            f"the local engine only; engine={engine_name(engine)!r} gives the log's run sums"
        )
    sums = run_sums(responses, ds, unit=unit, missing=missing, delta=delta, engine=engine)
    ctx = ReportContext(ds, None, config, sums=sums, engine=engine_name(engine))
    return {name: build_table(name, ctx) for name in wanted if not TABLES[name].pairs}
