"""The flat API: paths or frames in, polars frames out.

``import peira`` then ``peira.score(...)``, ``peira.leaderboard(...)``,
``peira.compare(...)``, … Each function takes the response log and the cases
as paths or as frames (polars, pandas, Arrow), validates its parameters
against one constraint table (:data:`PARAMETERS`) before it reads any data,
validates the data at the boundary, and returns polars frames. They compute
what the ``peira`` command prints: the command line is a thin layer over
this package.

This package sits above every other one (schema, io, importers, pairs,
metrics, bootstrap, ranking, report); nothing in the library imports it.
Its modules: ``_inputs`` (the constraint table, the data inputs, the split
filter), ``_data`` (pairs, run sums, reading, flips, validation,
rescoring), ``_score``, ``_rank`` (leaderboard, compare), ``_changes`` (diff),
``_gate`` (the release gate), ``_plan`` (plan), ``_tables``, ``_agreement``
(agreement between judges), ``_bounds`` (bounds for undetermined verdicts on
``score`` and ``compare``).

Inputs
------
- ``responses``: a response log: a Parquet file, a directory of part files or a
  glob (:func:`peira.io.read_responses`), or a frame.
- ``cases``: a dataset directory (``cases.parquet`` + ``variants.parquet``), a
  :class:`peira.io.Dataset`, or a frame of cases.
- Or one input for both (``cases`` left out): an importer's result
  (:class:`peira.importers.Imported`: its log, and its cases, variants and
  judgements), or a dataset directory that holds its ``responses.parquet``
  (``peira.score("out/jbb")``).

Every interval comes from one deterministic cluster-bootstrap plan per split
(docs/spec/uncertainty.md): same inputs and seed, same intervals.

Names are loaded on first use (PEP 562): the command line reads
:data:`PARAMETERS` while it builds its parsers, without loading polars.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._inputs import (
    ENGINE_NAMES,
    MAX_RESAMPLES,
    MAX_SEED,
    PARAMETERS,
    SPLITS,
    Constraint,
    check_param,
    split_cases,
    validate_params,
)

if TYPE_CHECKING:
    from ..io import in_split
    from ._agreement import agreement
    from ._changes import diff
    from ._data import (
        flips,
        pairs,
        pairs_and_cases,
        read_log,
        resample_plan,
        rescore,
        run_sums,
        validate,
    )
    from ._gate import gate
    from ._inputs import as_dataset
    from ._plan import plan
    from ._rank import compare, leaderboard
    from ._score import score, score_pairs
    from ._tables import tables

__all__ = [
    "ENGINE_NAMES",
    "MAX_RESAMPLES",
    "MAX_SEED",
    "PARAMETERS",
    "SPLITS",
    "Constraint",
    "agreement",
    "as_dataset",
    "check_param",
    "compare",
    "diff",
    "flips",
    "gate",
    "in_split",
    "leaderboard",
    "pairs",
    "pairs_and_cases",
    "plan",
    "read_log",
    "resample_plan",
    "rescore",
    "run_sums",
    "score",
    "score_pairs",
    "split_cases",
    "tables",
    "validate",
    "validate_params",
]

#: Public name → the module that defines it (loaded on first use).
_WHERE = {
    **dict.fromkeys(
        (
            "flips",
            "pairs",
            "pairs_and_cases",
            "read_log",
            "resample_plan",
            "rescore",
            "run_sums",
            "validate",
        ),
        "._data",
    ),
    "agreement": "._agreement",
    "as_dataset": "._inputs",
    "compare": "._rank",
    "gate": "._gate",
    "diff": "._changes",
    "leaderboard": "._rank",
    "plan": "._plan",
    "score": "._score",
    "score_pairs": "._score",
    "tables": "._tables",
    "in_split": "..io",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'peira.api' has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value  # cached: __getattr__ runs once per name
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
