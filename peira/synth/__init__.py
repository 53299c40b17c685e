"""Deterministic synthetic benchmark generator: cases, variants and simulated runs.

:func:`generate` builds an adversarial-robustness benchmark and the response
logs of simulated decision models whose behaviour is known exactly, so that
every metric can be checked against the parameters that generated the data.
The same arguments always give the same tables and, through
:meth:`SynthBenchmark.write`, byte-identical Parquet files. The benchmark,
the archetypes (:data:`ARCHETYPES`), the generative process, the ``models``
frame and the ``raw_text`` grammar are described in ``docs/synth.md``.

This package is a face; the parts live in :mod:`~peira.synth.catalog` (the
text tables), :mod:`~peira.synth.cases`, :mod:`~peira.synth.models`,
:mod:`~peira.synth.simulate`, :mod:`~peira.synth.benchmark` (:func:`generate`)
and :mod:`~peira.synth._rng` (the random streams).

Examples
--------
>>> from peira.synth import generate
>>> bench = generate(60, 3, seed=1)
>>> bench.models["run_id"].to_list()
['m01-robust', 'm02-fragile', 'm03-abstain-dos']
>>> bench.responses.height
360
"""

from __future__ import annotations

from .benchmark import GENERATOR_VERSION, SynthBenchmark, generate
from .catalog import FAMILIES
from .models import ARCHETYPES

__all__ = ["ARCHETYPES", "FAMILIES", "GENERATOR_VERSION", "SynthBenchmark", "generate"]
