"""Engines: where a response log is reduced to per-cluster sums (docs/spec/uncertainty.md).

The seam between a log of any size and the statistics is
:meth:`Engine.cluster_sums`: raw log → pair table → one row per run (× group)
× cluster with ``n_pairs`` and every ratio metric's ``<name>__num`` and
``<name>__den``. That frame is small (runs × groups × clusters), and everything
above it, the ratio estimates, the cluster bootstrap and the ranking, runs
locally on it, whichever engine made it.

Built-in engines (:data:`ENGINES`):

``local``
    polars on this machine, streaming (:class:`peira.engine.local.LocalEngine`).
``spark``
    Apache Spark through PySpark, for logs beyond one machine
    (:class:`peira.engine.spark.SparkEngine`; ``pip install 'peira[spark]'``).

Both evaluate the same definitions, :func:`peira._pairs.pair_flags` and
:data:`peira.metrics.RATIO_METRICS`: Spark runs Peira's polars pairing and sums
on each partition of the log, then adds the partial sums up.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .._registry import Registry

if TYPE_CHECKING:
    from .base import Engine

__all__ = ["ENGINES", "EngineSpec", "get_engine"]


@dataclass(frozen=True)
class EngineSpec:
    """A registered engine: its name, the class that implements it and what it is for."""

    name: str
    target: str  # "module:Class", imported on first use
    summary: str

    def load(self) -> type[Any]:
        """The engine class (imports its module)."""
        module, _, attr = self.target.partition(":")
        cls: type[Any] = getattr(import_module(module), attr)
        return cls


#: Every engine, by name; ``"polars"`` is another name of ``"local"``.
ENGINES: Registry[EngineSpec] = Registry(
    "engine",
    [
        EngineSpec("local", "peira.engine.local:LocalEngine", "polars on this machine, streaming"),
        EngineSpec(
            "spark",
            "peira.engine.spark:SparkEngine",
            "Apache Spark via PySpark (pip install 'peira[spark]'), for logs beyond one machine",
        ),
    ],
)

_ALIASES = {"polars": "local"}


def get_engine(engine: str | Engine = "local", **options: Any) -> Engine:
    """An engine by name (``"local"``, ``"spark"``), or ``engine`` itself if it is one.

    ``options`` go to the engine's constructor (``SparkEngine(session=...,
    master=...)``).

    Raises
    ------
    UnknownNameError
        An unknown name (with the close matches).
    PeiraError
        ``"spark"`` without PySpark installed (``pip install 'peira[spark]'``).

    Examples
    --------
    >>> get_engine("local").name
    'local'
    >>> get_engine("sparc")
    Traceback (most recent call last):
    ...
    peira.errors.UnknownNameError: unknown engine 'sparc'; did you mean 'spark'? known engines: local, spark
    """
    if not isinstance(engine, str):
        return engine
    spec = ENGINES[_ALIASES.get(engine, engine)]
    made: Engine = spec.load()(**options)
    return made
