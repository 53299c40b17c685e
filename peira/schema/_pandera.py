"""The pandera models of the data model, built from the rule table at first use.

:func:`models` turns each table of :data:`peira.schema._rules.RULES` into a
pandera polars ``DataFrameModel`` (:class:`Cases` …): a field per column with
its dtype, nullability, uniqueness and pandera's built-in checks
(``str_length``, ``isin``, ``ge``), a registered check per other column rule,
a dataframe check per table rule, and the table's strictness and unique key.
Importing this module imports nothing heavy; pandera is imported (through
:mod:`peira._pandera`, without its pyspark side effects) when :func:`models`
first runs. :mod:`peira.schema` validates with its own one-pass reading of the
same rules and asks for the models only to report a table that fails.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional

import polars as pl

from ._rules import RULES, Column, Rule, Table

if TYPE_CHECKING:
    import pandera.polars as pa

__all__ = ["models"]

#: The annotation a pandera field takes for each dtype of the rule table.
_ANNOTATIONS: dict[pl.DataType, Any] = {
    pl.String(): str,
    pl.Float64(): float,
    pl.Boolean(): bool,
    pl.List(pl.String()): list[str],
    pl.Int32(): pl.Int32,
    pl.Int64(): pl.Int64,
}


def _method(fn: Rule) -> Any:
    """A check method of a model that runs the rule ``fn``."""

    def check(cls: Any, data: Any) -> pl.LazyFrame:
        return fn(data)

    return check


def _field(pa: Any, col: Column) -> Any:
    kw: dict[str, Any] = {}
    for check in col.checks:
        if check.builtin is not None:
            kw[check.builtin[0]] = check.builtin[1]
    if col.nullable:
        kw["nullable"] = True
    if col.unique:
        kw["unique"] = True
    return pa.Field(**kw)


def _annotation(col: Column) -> Any:
    ann = _ANNOTATIONS[col.dtype]
    return ann if col.required else Optional[ann]  # noqa: UP045  (pandera: not required)


def _model(pa: Any, table: Table) -> type[pa.DataFrameModel]:
    """The pandera model of one table of the rule table."""
    ns: dict[str, Any] = {"__doc__": table.doc, "__module__": "peira.schema", "__annotations__": {}}
    for name, col in table.columns.items():
        ns["__annotations__"][name] = _annotation(col)
        ns[name] = _field(pa, col)
    for name, col in table.columns.items():
        for check in col.checks:
            if check.builtin is None:
                ns[f"_check_{name}_{check.name}"] = pa.check(name, name=check.name)(
                    _method(check.fn)
                )
    for check in table.checks:
        ns[f"_check_{check.name}"] = pa.dataframe_check(name=check.name)(_method(check.fn))
    config: dict[str, Any] = {"strict": table.strict, "ordered": False}
    if table.unique is not None:
        config["unique"] = list(table.unique)
    ns["Config"] = type("Config", (), config)
    return type(table.name, (pa.DataFrameModel,), ns)


@functools.cache
def models() -> dict[str, type[pa.DataFrameModel]]:
    """The pandera models by table name (importing pandera on first use)."""
    from .._pandera import load

    pa = load()  # pandera.polars, without its pyspark probe (peira/_pandera.py)
    return {name: _model(pa, table) for name, table in RULES.items()}
