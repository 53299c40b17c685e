"""Grouping keys shared by every frame-level helper."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["group_keys"]


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
