"""Grouping keys shared by every frame-level helper, and the check of a breakdown.

A breakdown (``by``) is a column of the pair table that groups a run's pairs:
``family``, ``primitive``, ``severity``, ``suite`` …, each named once.
:data:`NOT_BREAKDOWNS` are the pair table's keys and the columns a score
computes itself; :func:`check_by` refuses them, and unknown names, with one
sentence, before any data is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import PeiraValueError

__all__ = ["NOT_BREAKDOWNS", "check_by", "group_keys"]

#: The pair table's keys and the score's own columns: never a breakdown.
NOT_BREAKDOWNS = (
    "run_id",
    "case_id",
    "sample",
    "scenario_id",
    "arms",
    "verdict_source",
    "eligible",
)

_CHOICES = "one that groups a run's cases, e.g. family, primitive, severity, suite"


def check_by(by: str | Sequence[str] | None, columns: Sequence[str]) -> list[str]:
    """The breakdown columns ``by`` as a list, each checked against ``columns``.

    Raises
    ------
    PeiraValueError
        A name given twice, one of :data:`NOT_BREAKDOWNS`, or not in ``columns``.

    >>> check_by("family", ["family", "severity"])
    ['family']
    """
    names = [by] if isinstance(by, str) else list(by or [])
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise PeiraValueError(f"by {name}: given twice; name each breakdown column once")
        seen.add(name)
        if name in NOT_BREAKDOWNS:
            raise PeiraValueError(
                f"by {name}: a key of the pair table or a column the score computes, "
                f"not a breakdown; choose {_CHOICES}"
            )
        if name not in columns:
            raise PeiraValueError(f"by {name}: not a column of the pair table; choose {_CHOICES}")
    return names


def group_keys(by: str | Sequence[str] | None, *, reserved: Sequence[str] = ()) -> list[str]:
    """``["run_id", *by]``: the keys of a per-run (× group) result.

    ``by`` may be a column name, a sequence of names or None; ``run_id`` and
    any ``reserved`` names (columns the caller adds itself) are not repeated.

    >>> group_keys("family")
    ['run_id', 'family']
    >>> group_keys(["run_id", "arm", "split"], reserved=["arm"])
    ['run_id', 'split']
    """
    extra = [by] if isinstance(by, str) else list(by or [])
    skip = {"run_id", *reserved}
    return ["run_id", *[k for k in extra if k not in skip]]
