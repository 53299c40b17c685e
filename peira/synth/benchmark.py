"""The public generator: :func:`generate` and the :class:`SynthBenchmark` it returns."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..io import write_dataset
from ..schema import validate_cases, validate_responses, validate_variants
from ._rng import STREAM_RESPONSES, stream_rng
from .cases import build_cases
from .models import ARCHETYPE_PARAMS, model_params
from .simulate import responses_frame, simulate_run

__all__ = ["GENERATOR_VERSION", "SynthBenchmark", "generate"]

GENERATOR_VERSION = "1.0"


@dataclass(frozen=True)
class SynthBenchmark:
    """A synthetic benchmark and the response logs of its simulated runs.

    Attributes
    ----------
    cases : polars.DataFrame
        ``CASES_SCHEMA``, validated, sorted by ``case_id``.
    variants : polars.DataFrame
        ``VARIANTS_SCHEMA``, validated against ``cases``, sorted by ``case_id, arm``.
    responses : polars.DataFrame
        ``RESPONSES_SCHEMA``, validated against ``cases``, sorted by
        ``run_id, case_id, arm, sample``.
    models : polars.DataFrame
        One row per run with its archetype and every generating parameter (see
        ``docs/synth.md``), sorted by ``run_id``.
    """

    cases: pl.DataFrame
    variants: pl.DataFrame
    responses: pl.DataFrame
    models: pl.DataFrame

    def write(self, out_dir: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write ``cases``, ``variants``, ``responses`` and ``models`` Parquet files.

        All four go through :func:`peira.io.write_dataset` (validated) in one
        atomic swap of the directory (``docs/spec/outputs.md``; ``force``
        replaces such files Peira did not write), and the same benchmark
        always gives byte-identical files.

        Returns
        -------
        Path
            ``out_dir``.
        """
        d = Path(out_dir)
        extra = {"responses.parquet": self.responses, "models.parquet": self.models}
        write_dataset(self.cases, self.variants, d, extra=extra, force=force)
        return d


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"generate: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"generate: {name} must be >= {minimum}, got {value}")
    return int(value)


def generate(
    n_cases: int = 1200, n_models: int = 8, *, seed: int = 0, samples: int = 1
) -> SynthBenchmark:
    """Generate a deterministic synthetic benchmark with simulated model runs.

    Parameters
    ----------
    n_cases
        Number of cases (each has a benign and an attacked variant).
    n_models
        Number of simulated runs; archetypes are assigned in the order of
        :data:`ARCHETYPES` and repeat, with jittered parameters, beyond eight.
    seed
        Non-negative seed of every random stream.
    samples
        Repeated samples per (run, case, arm): ``sample = 0 .. samples - 1``.

    Returns
    -------
    SynthBenchmark
        Validated ``cases``, ``variants`` and ``responses`` plus the ``models``
        frame of generating parameters. The same arguments give identical
        tables.

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``n_cases``, ``n_models`` or ``samples`` is below 1 or ``seed`` below 0.
    """
    n_cases = _check_int("n_cases", n_cases, 1)
    n_models = _check_int("n_models", n_models, 1)
    seed = _check_int("seed", seed, 0)
    samples = _check_int("samples", samples, 1)

    version = f"synth-{GENERATOR_VERSION}-seed{seed}-n{n_cases}"
    cases, variants, ca = build_cases(n_cases, seed)
    cases = cases.with_columns(pl.lit(version).alias("dataset_version"))
    case_ids = cases["case_id"]

    runs: list[pl.DataFrame] = []
    model_rows: list[dict[str, Any]] = []
    for j, p in enumerate(model_params(n_models, seed)):
        cycle = j // len(ARCHETYPE_PARAMS)
        run_id, model, mversion = (
            f"m{j + 1:02d}-{p.archetype}",
            f"synth-{p.archetype}",
            f"1.{cycle}",
        )
        arms, derived = simulate_run(p, ca, samples, stream_rng(seed, STREAM_RESPONSES, j))
        runs.append(responses_frame(arms, case_ids, run_id, model, mversion))
        m = p.malformed_rate
        row: dict[str, Any] = {
            "run_id": run_id,
            "model": model,
            "model_version": mversion,
            "archetype": p.archetype,
            "cycle": cycle,
        }
        row.update(asdict(p))
        row.update(asdict(derived))
        row.update(
            {
                "expected_asr": m + (1 - m) * p.flip_prob,
                "expected_asr_holdout": m + (1 - m) * p.flip_prob_holdout,
                "expected_abstention_dos_rate": (1 - m) * p.flip_prob * p.dos_share,
                "expected_target_hit_rate": (1 - m) * p.flip_prob * (1 - p.dos_share),
                "expected_malformed_pair_rate": 1 - (1 - m) ** 2,
                "expected_shift_without_flip_rate": p.score_shift_prob,
            }
        )
        model_rows.append(row)

    models = (
        pl.DataFrame(model_rows)
        .with_columns(
            pl.when(pl.col(pl.Float64).is_infinite())
            .then(None)
            .otherwise(pl.col(pl.Float64))
            .name.keep()
        )
        .sort("run_id")
    )
    cases = validate_cases(cases.sort("case_id"), source="synth cases")
    variants = validate_variants(
        variants.sort("case_id", "arm"), cases=cases, source="synth variants"
    )
    responses = validate_responses(
        pl.concat(runs).sort("run_id", "case_id", "arm", "sample"),
        cases=cases,
        source="synth responses",
    )
    return SynthBenchmark(cases=cases, variants=variants, responses=responses, models=models)
