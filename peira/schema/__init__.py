"""The data model (docs/spec/data-model.md): column types, the rule table, validation.

Six tables are stored: ``cases`` (gold labels, never shown to a model),
``variants`` (what a model may see), ``responses`` (the raw response log),
``published`` (figures a source publishes), ``runs`` (runs a source reports
as unfinished) and ``judgements`` (each judge's verdict on a response). Each has an ordered dtype mapping
(``CASES_SCHEMA`` …), a pandera polars model (:class:`Cases` …, built from the
rule table on first use) and a ``validate_*`` function that conforms dtypes,
runs every check on materialised data and raises
:class:`~peira.errors.ValidationError` whose message names the file, row, key,
column and value of each violation.

This module is a face. The rules are declared once, in :mod:`._rules`; the
vocabularies and dtypes live in :mod:`._types`, the pandera models are built in
:mod:`._pandera`, conforming is :mod:`._conform`, failure formatting
:mod:`._failures` and validation :mod:`._validate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._conform import conform, empty
from ._failures import describe_failures, failures_frame, raise_if
from ._judgements import judgement_failures
from ._rules import (
    CASES_SCHEMA,
    CONTROL_CHARACTERS,
    EXTENSION_DEFAULTS,
    JUDGEMENTS_SCHEMA,
    KEYS,
    MAX_RUNS,
    PUBLISHED_SCHEMA,
    RESPONSE_EXTENSIONS,
    RESPONSES_SCHEMA,
    RUNS_SCHEMA,
    VARIANTS_SCHEMA,
    bounded,
    not_null,
)
from ._types import (
    ARMS,
    ARMS_DECLARED,
    GOLD,
    PRIMITIVES,
    RESPONSE_KEY,
    SEVERITIES,
    SPLITS,
    UNDETERMINED,
)
from ._validate import (
    collect_failures,
    shape_broken,
    validate_cases,
    validate_judgements,
    validate_published,
    validate_responses,
    validate_runs,
    validate_variants,
)

if TYPE_CHECKING:
    import pandera.polars as pa

    Cases: type[pa.DataFrameModel]
    Variants: type[pa.DataFrameModel]
    Responses: type[pa.DataFrameModel]
    Published: type[pa.DataFrameModel]
    Runs: type[pa.DataFrameModel]
    Judgements: type[pa.DataFrameModel]

__all__ = [
    "ARMS",
    "ARMS_DECLARED",
    "CASES_SCHEMA",
    "CONTROL_CHARACTERS",
    "EXTENSION_DEFAULTS",
    "GOLD",
    "JUDGEMENTS_SCHEMA",
    "KEYS",
    "MAX_RUNS",
    "PRIMITIVES",
    "PUBLISHED_SCHEMA",
    "RESPONSES_SCHEMA",
    "RESPONSE_EXTENSIONS",
    "RESPONSE_KEY",
    "RUNS_SCHEMA",
    "SEVERITIES",
    "SPLITS",
    "UNDETERMINED",
    "VARIANTS_SCHEMA",
    "Cases",
    "Judgements",
    "Published",
    "Responses",
    "Runs",
    "Variants",
    "bounded",
    "collect_failures",
    "conform",
    "describe_failures",
    "empty",
    "failures_frame",
    "judgement_failures",
    "not_null",
    "raise_if",
    "shape_broken",
    "validate_cases",
    "validate_judgements",
    "validate_published",
    "validate_responses",
    "validate_runs",
    "validate_variants",
]

_MODELS = ("Cases", "Variants", "Responses", "Published", "Runs", "Judgements")


def __getattr__(name: str) -> Any:
    """``Cases``, ``Variants``, ``Responses``, ``Published``, ``Runs``, ``Judgements``: the
    pandera models, on demand."""
    if name in _MODELS:
        from ._pandera import models

        return models()[name.lower()]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
