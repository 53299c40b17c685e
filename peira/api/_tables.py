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
    cases: PathLike | Dataset | FrameLike | None = None,
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
    metric: str | None = None,
) -> dict[str, pl.DataFrame]:
    """The report's tables (:data:`peira.report.TABLES`) as frames, by name.

    ``peira tables`` writes the same tables as CSV, Markdown and LaTeX.

    By default only the tables that apply to the data are built, as ``peira
    tables`` writes them: a single run has no comparisons, clean-only runs
    (no attacked arm) no table of ASR, a dataset without a holdout no
    divergence, one without the source's figures (``published.parquet``
    beside the dataset) no ``published``; a table whose every value is
    undefined is left out too.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    names
        Tables to build (default: those that apply, in report order); unknown
        names raise :class:`peira.errors.UnknownTableError` with the close
        matches, a table that cannot be built on the data
        :class:`~peira.errors.PeiraValueError` saying why.
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
    metric
        The ratio metric the leaderboard ranks by and the comparisons compare
        (default: ``robustness``, or ``benign_accuracy`` on clean-only data);
        an unknown name raises :class:`peira.errors.UnknownNameError`.

    Returns
    -------
    dict of str to polars.DataFrame

    Raises
    ------
    PeiraValueError
        A table that needs every pair, asked for by name on a non-local engine;
        a table asked for by name that does not apply to the data.

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
    from ..report.tables import empty_reason, table_reason

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
        metric=metric,
    )
    wanted = list(TABLES) if names is None else list(names)
    for name in wanted:
        if name not in TABLES:
            raise UnknownTableError(name, TABLES)
    if local:
        ctx = ReportContext(ds, as_responses(responses, ds.cases), config)
    else:
        need = [n for n in wanted if TABLES[n].pairs]
        if names is not None and need:
            raise PeiraValueError(
                f"table(s) {', '.join(need)} need every pair (non-ratio metrics) and are built "
                f"on the local engine only; engine={engine_name(engine)!r} gives the log's run "
                "sums"
            )
        wanted = [n for n in wanted if not TABLES[n].pairs]
        sums = run_sums(responses, ds, unit=unit, missing=missing, delta=delta, engine=engine)
        ctx = ReportContext(ds, None, config, sums=sums, engine=engine_name(engine))
    out: dict[str, pl.DataFrame] = {}
    for name in wanted:
        why = table_reason(name, ctx)
        if why is not None:
            if names is None:
                continue
            raise PeiraValueError(f"table {name!r} does not apply to these data: {why}")
        df = build_table(name, ctx)
        if names is None and empty_reason(name, df) is not None:
            continue  # every value undefined: peira tables leaves it out too
        out[name] = df
    return out
