"""The pandera models of the data model (docs/spec/data-model.md), imported on demand.

:mod:`peira.schema` validates with its own one-pass reading of these rules and
imports this module (and pandera) only to report the violations of a table that
fails, or when a model is asked for (``peira.schema.Cases`` …). Every check
calls the function :mod:`peira.schema` runs itself.
"""

from __future__ import annotations

import polars as pl

from . import schema as S
from ._pandera import load as _load_pandera

_load_pandera()  # first, so that pandera skips its pyspark probe (peira/_pandera.py)
import pandera.polars as pa  # noqa: E402
from pandera.api.polars.types import PolarsData  # noqa: E402

__all__ = ["MODELS", "Cases", "Published", "Responses", "Variants"]


class Cases(pa.DataFrameModel):
    """Gold labels and metadata of each case (docs/spec/data-model.md#cases)."""

    case_id: str = pa.Field(unique=True, str_length={"min_value": 1})
    scenario_id: str = pa.Field(str_length={"min_value": 1})
    split: str = pa.Field(isin=S.SPLITS)
    suite: str
    family: str = pa.Field(str_length={"min_value": 1})
    primitive: str = pa.Field(isin=S.PRIMITIVES)
    severity: str = pa.Field(isin=S.SEVERITIES, nullable=True)
    options: list[str]
    expected_decision: str
    positive_decision: str = pa.Field(nullable=True)
    target_decision: str = pa.Field(nullable=True)
    expected_score: float = pa.Field(nullable=True)
    dataset_version: str
    extras: str = pa.Field(nullable=True)

    class Config:
        strict = True
        ordered = False

    @pa.check("expected_score", name="in_unit_interval")
    def expected_score_unit(cls, data: PolarsData) -> pl.LazyFrame:
        return S._unit(data)

    @pa.check(
        "case_id", "scenario_id", "suite", "family", "dataset_version", name="no_control_characters"
    )
    def case_ids_printable(cls, data: PolarsData) -> pl.LazyFrame:
        return S._printable(data)

    @pa.dataframe_check(name="options_valid")
    def options_valid(cls, data: PolarsData) -> pl.LazyFrame:
        return S._options_valid(data)

    @pa.dataframe_check(name="expected_in_options")
    def expected_in_options(cls, data: PolarsData) -> pl.LazyFrame:
        return S._expected_in_options(data)

    @pa.dataframe_check(name="positive_in_options")
    def positive_in_options(cls, data: PolarsData) -> pl.LazyFrame:
        return S._positive_in_options(data)

    @pa.dataframe_check(name="target_in_options")
    def target_in_options(cls, data: PolarsData) -> pl.LazyFrame:
        return S._target_in_options(data)

    @pa.dataframe_check(name="target_not_expected")
    def target_not_expected(cls, data: PolarsData) -> pl.LazyFrame:
        return S._target_not_expected(data)

    @pa.dataframe_check(name="score_has_positive")
    def score_has_positive(cls, data: PolarsData) -> pl.LazyFrame:
        return S._score_has_positive(data)

    @pa.dataframe_check(name="scenario_in_one_split")
    def scenario_in_one_split(cls, data: PolarsData) -> pl.LazyFrame:
        return S._scenario_in_one_split(data)


class Variants(pa.DataFrameModel):
    """What a model may see: at most one row per (case_id, arm) (docs/spec/data-model.md).

    A case needs at least one variant; it may lack the attacked one when its
    attacked input is per run (each response carries its ``prompt``).
    """

    case_id: str = pa.Field(str_length={"min_value": 1})
    arm: str = pa.Field(isin=S.ARMS)
    prompt: str
    options: list[str]
    input: str

    class Config:
        strict = True
        ordered = False
        unique = ["case_id", "arm"]  # noqa: RUF012

    @pa.check("case_id", name="no_control_characters")
    def variant_ids_printable(cls, data: PolarsData) -> pl.LazyFrame:
        return S._printable(data)


class Responses(pa.DataFrameModel):
    """The raw response log: one row per model call (docs/spec/data-model.md).

    Besides the columns below, the optional extension columns of
    :data:`RESPONSE_EXTENSIONS` are validated when present, and any other
    column is kept as it is.
    """

    run_id: str = pa.Field(str_length={"min_value": 1})
    model: str
    model_version: str
    case_id: str = pa.Field(str_length={"min_value": 1})
    arm: str = pa.Field(isin=S.ARMS)
    sample: pl.Int32 = pa.Field(ge=0)
    decision: str = pa.Field(nullable=True)
    abstained: bool
    refusal_reason: str = pa.Field(nullable=True)
    score: float = pa.Field(nullable=True)
    confidence: float = pa.Field(nullable=True)
    malformed: bool
    error: str = pa.Field(nullable=True)
    raw_text: str = pa.Field(nullable=True)
    latency_ms: float = pa.Field(nullable=True)
    tokens_in: pl.Int64 = pa.Field(nullable=True)
    tokens_out: pl.Int64 = pa.Field(nullable=True)
    cost_usd: float = pa.Field(nullable=True)
    prompt: str | None = pa.Field(nullable=True)
    no_attack: bool | None = pa.Field(nullable=True)
    arms: str | None = pa.Field(isin=S.ARMS_DECLARED, nullable=True)  # null: "both"
    correct: bool | None = pa.Field(nullable=True)
    verdict_score: float | None = pa.Field(nullable=True)
    verdict_threshold: float | None = pa.Field(nullable=True)
    verdict_source: str | None = pa.Field(nullable=True)
    extras: str | None = pa.Field(nullable=True)

    class Config:
        strict = False  # columns beyond the data model are kept, not rejected
        ordered = False
        unique = ["run_id", "case_id", "arm", "sample"]  # noqa: RUF012

    @pa.check("score", "confidence", name="in_unit_interval")
    def unit_interval(cls, data: PolarsData) -> pl.LazyFrame:
        return S._unit(data)

    @pa.check("run_id", "model", "model_version", "case_id", name="no_control_characters")
    def response_ids_printable(cls, data: PolarsData) -> pl.LazyFrame:
        return S._printable(data)

    @pa.check("latency_ms", "tokens_in", "tokens_out", "cost_usd", name="finite_non_negative")
    def finite_non_negative(cls, data: PolarsData) -> pl.LazyFrame:
        return S._finite_non_negative(data)

    @pa.check("verdict_score", "verdict_threshold", name="in_unit_interval")
    def verdict_unit_interval(cls, data: PolarsData) -> pl.LazyFrame:
        return S._unit(data)

    @pa.dataframe_check(name="decision_null_iff_no_answer")
    def decision_null_iff_no_answer(cls, data: PolarsData) -> pl.LazyFrame:
        return S._decision_null_iff_no_answer(data)

    @pa.dataframe_check(name="model_constant")
    def model_constant(cls, data: PolarsData) -> pl.LazyFrame:
        return S._model_constant(data)

    @pa.dataframe_check(name="model_version_constant")
    def model_version_constant(cls, data: PolarsData) -> pl.LazyFrame:
        return S._model_version_constant(data)

    @pa.dataframe_check(name="arms_constant")
    def arms_constant(cls, data: PolarsData) -> pl.LazyFrame:
        return S._arms_constant(data)

    @pa.dataframe_check(name="arm_observed")
    def arm_observed(cls, data: PolarsData) -> pl.LazyFrame:
        return S._arm_observed(data)

    @pa.dataframe_check(name="no_attack_is_attacked_answer")
    def no_attack_is_attacked_answer(cls, data: PolarsData) -> pl.LazyFrame:
        return S._no_attack_is_attacked_answer(data)

    @pa.dataframe_check(name="verdict_has_threshold")
    def verdict_has_threshold(cls, data: PolarsData) -> pl.LazyFrame:
        return S._verdict_has_threshold(data)

    @pa.dataframe_check(name="verdict_consistent")
    def verdict_consistent(cls, data: PolarsData) -> pl.LazyFrame:
        return S._verdict_consistent(data)


class Published(pa.DataFrameModel):
    """Figures a source publishes about its runs (docs/spec/data-model.md)."""

    run_id: str = pa.Field(str_length={"min_value": 1})
    family: str = pa.Field(nullable=True)
    metric: str = pa.Field(str_length={"min_value": 1})
    estimate: float = pa.Field(nullable=True)
    stderr: float = pa.Field(nullable=True, ge=0)
    n: pl.Int64 = pa.Field(nullable=True, ge=0)
    source: str

    class Config:
        strict = True
        ordered = False
        unique = ["run_id", "family", "metric"]  # noqa: RUF012


MODELS: dict[str, type[pa.DataFrameModel]] = {
    "cases": Cases,
    "variants": Variants,
    "responses": Responses,
    "published": Published,
}
