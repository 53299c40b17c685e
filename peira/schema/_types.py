"""The vocabularies and dtypes of the data model (docs/spec/data-model.md).

The allowed values of the enumerated columns, the key of a response-log row,
and the polars dtypes the rule table (:mod:`peira.schema._rules`) gives its
columns. Nothing here depends on another module of Peira.
"""

from __future__ import annotations

import polars as pl

__all__ = [
    "ARMS",
    "ARMS_DECLARED",
    "BOOL",
    "FLOAT",
    "GOLD",
    "INT32",
    "INT64",
    "PRIMITIVES",
    "RESPONSE_KEY",
    "SEVERITIES",
    "SPLITS",
    "STR",
    "STR_LIST",
    "UNDETERMINED",
]

SPLITS = ("public", "holdout")
PRIMITIVES = ("choice", "score", "abstain")
SEVERITIES = ("critical", "high", "medium", "low")
ARMS = ("benign", "attacked")
#: The key of a response-log row, and the order logs are sorted and hashed in.
RESPONSE_KEY = ("run_id", "case_id", "arm", "sample")
#: What a run observed (the ``arms`` response column): both arms, the benign arm
#: only (a clean-only run) or the attacked arm only (benign answers not observed).
ARMS_DECLARED = ("both", "benign", "attacked")
#: The verdict of a judge that refused, errored or could not be parsed
#: (``judgements``): never a success, never a failure.
UNDETERMINED = "undetermined"
#: The judge name reserved for human (gold) labels in ``judgements``.
GOLD = "gold"

STR = pl.String()
STR_LIST = pl.List(pl.String())
FLOAT = pl.Float64()
BOOL = pl.Boolean()
INT32 = pl.Int32()
INT64 = pl.Int64()
