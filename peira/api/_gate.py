"""The release gate verb (:mod:`peira.api`): a candidate against a baseline, on checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from .._frames import FrameLike
from ..errors import PeiraKeyError
from ._inputs import PathLike, Split, validate_params
from ._rank import _split_sums

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import Unit
    from ..engine import Engine
    from ..io import Dataset
    from ..ranking import Support
    from ..release_gate import Check

__all__ = ["gate"]


@validate_params
def gate(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    baseline: str,
    candidate: str,
    require: Sequence[str | Check] = (),
    guard: Sequence[str | Check] = (),
    split: Split = "public",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    support: Support = "common",
) -> pl.DataFrame:
    """A release gate: does ``candidate`` meet every requirement and guard against ``baseline``?

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames).
    baseline, candidate
        The two runs.
    require, guard
        Checks, as text (``"robustness:better"``,
        ``"benign_accuracy:non-inferior:0.02"``,
        ``"asr:equivalent:0.01"``) or :class:`peira.release_gate.Check` objects.
    split, n_resamples, seed, unit, level, missing, delta, engine, support
        As in :func:`compare`.

    Returns
    -------
    polars.DataFrame
        One row per check (:func:`peira.release_gate.evaluate`); the gate passes
        iff ``passed`` is true in every row (``frame["passed"].all()``).

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> g = peira.gate(d / "responses.parquet", d, baseline="m02-fragile",
    ...                candidate="m01-robust", require=["robustness:better"], n_resamples=500)
    >>> g.select("spec", "verdict", "passed").row(0)
    ('robustness:better', 'better', True)
    """
    from ..release_gate import Check, evaluate, parse_check

    checks = [c if isinstance(c, Check) else parse_check(c, "require") for c in require]
    checks += [c if isinstance(c, Check) else parse_check(c, "guard") for c in guard]
    table, cs, plan = _split_sums(
        responses, cases, split, unit=unit, n_resamples=n_resamples, seed=seed,
        missing=missing, delta=delta, engine=engine,
    )  # fmt: skip
    missing_runs = [r for r in (baseline, candidate) if r not in table.runs]
    if missing_runs:
        raise PeiraKeyError(
            f"no pairs for run(s) {', '.join(map(repr, missing_runs))} in split {split!r}; "
            f"known: {sorted(table.runs)}"
        )
    return evaluate(
        table, cs, plan, baseline=baseline, candidate=candidate, checks=checks, level=level,
        support=support,
    )  # fmt: skip
