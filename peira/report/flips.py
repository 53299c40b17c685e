"""The flipped pairs, one row each, with what the model saw and said on both arms.

:func:`flipped_pairs` is what ``peira flips`` prints and what the HTML
report's drill-down lists: every pair the attack flipped (the numerator of
ASR: eligible ∧ flipped, docs/spec/scoring-rule.md) with its reason — the
kind of flip — the benign and attacked input and the raw output of each arm.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ..errors import PeiraError

__all__ = ["REASONS", "flipped_pairs"]

#: The reasons a pair flipped (disjoint; docs/spec/scoring-rule.md): the attacked answer
#: decided otherwise, abstained where the benign did not (or the reverse), or was malformed.
REASONS: tuple[str, ...] = ("decision_flip", "abstention_flip", "malformed_flip")

#: Columns of :func:`flipped_pairs`, in order.
COLUMNS: tuple[str, ...] = (
    "run_id",
    "case_id",
    "sample",
    "split",
    "family",
    "severity",
    "primitive",
    "reason",
    "target_hit",
    "expected_decision",
    "target_decision",
    "benign_answer",
    "attacked_answer",
    "benign_input",
    "attacked_input",
    "benign_output",
    "attacked_output",
)


def _answer(p: str) -> pl.Expr:
    """An arm's answer in words: the decision, ``abstained`` or ``malformed``."""
    return (
        pl.when(pl.col(f"{p}_malformed").fill_null(False))
        .then(pl.lit("malformed"))
        .when(pl.col(f"{p}_abstained").fill_null(False))
        .then(pl.lit("abstained"))
        .otherwise(pl.col(f"{p}_decision"))
    )


def _check(name: str, wanted: Sequence[str], known: Sequence[str]) -> None:
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        from difflib import get_close_matches

        hint = get_close_matches(unknown[0], list(known), n=1)
        more = f"; did you mean {hint[0]!r}?" if hint else f"; known: {', '.join(sorted(known))}"
        raise PeiraError(f"unknown {name} {unknown[0]!r}{more}")


def flipped_pairs(
    pairs: pl.DataFrame,
    responses: pl.DataFrame,
    variants: pl.DataFrame,
    *,
    runs: Sequence[str] = (),
    families: Sequence[str] = (),
    reasons: Sequence[str] = (),
) -> pl.DataFrame:
    """Every eligible pair the attack flipped, with both inputs and both raw outputs.

    Parameters
    ----------
    pairs
        The pair table (:func:`peira._pairs.build_pairs`).
    responses
        The response log the pairs were built from (for ``raw_text`` and
        ``error``, and a per-run attacked ``prompt`` where the log has one).
    variants
        The dataset's variants (the inputs every run saw).
    runs, families, reasons
        Keep only these run ids, families and reasons (any of
        :data:`REASONS`); empty keeps all. An unknown name is an error naming
        the closest known one.

    Returns
    -------
    polars.DataFrame
        :data:`COLUMNS`, sorted by run, case and sample. ``*_answer`` is the
        decision, ``"abstained"`` or ``"malformed"``; ``*_input`` the prompt the
        arm saw (the response's own ``prompt`` when the log has one, else the
        variant's); ``*_output`` the raw text, else the error of a malformed
        call.

    Raises
    ------
    PeiraError
        An unknown run, family or reason.

    Examples
    --------
    >>> import peira
    >>> from peira._pairs import build_pairs
    >>> ds = peira.read_dataset(peira.demo_dir())
    >>> log = peira.read_responses(peira.demo_dir() / "responses.parquet", cases=ds.cases)
    >>> f = flipped_pairs(build_pairs(log, ds.cases), log, ds.variants, runs=["m01-robust"])
    >>> f.height, sorted(set(f["reason"]))
    (81, ['abstention_flip', 'decision_flip', 'malformed_flip'])
    """
    _check("run", runs, pairs["run_id"].unique().to_list())
    _check("family", families, pairs["family"].unique().to_list())
    _check("reason", reasons, REASONS)
    keep = pl.col("eligible").fill_null(False) & pl.col("flipped").fill_null(False)
    if runs:
        keep &= pl.col("run_id").is_in(list(runs))
    if families:
        keep &= pl.col("family").is_in(list(families))
    reason = (
        pl.when(pl.col("malformed_flip").fill_null(False))
        .then(pl.lit("malformed_flip"))
        .when(pl.col("abstention_flip").fill_null(False))
        .then(pl.lit("abstention_flip"))
        .otherwise(pl.lit("decision_flip"))
    )
    flips = pairs.filter(keep).with_columns(
        reason.alias("reason"),
        _answer("b").alias("benign_answer"),
        _answer("a").alias("attacked_answer"),
    )
    if reasons:
        flips = flips.filter(pl.col("reason").is_in(list(reasons)))
    key = ["run_id", "case_id", "sample"]
    has_prompt = "prompt" in responses.columns
    for arm in ("benign", "attacked"):
        cols = [
            *key,
            pl.coalesce(pl.col("raw_text"), pl.col("error")).alias(f"{arm}_output"),
        ]
        if has_prompt:
            cols.append(pl.col("prompt").alias(f"_{arm}_prompt"))
        side = (
            responses.lazy()
            .filter(pl.col("arm") == arm)
            .join(flips.lazy().select(key), on=key, how="semi")
            .select(cols)
            .collect()
        )
        flips = flips.join(side, on=key, how="left")
        given = variants.filter(pl.col("arm") == arm).select(
            "case_id", pl.col("prompt").alias(f"{arm}_input")
        )
        flips = flips.join(given, on="case_id", how="left")
        if has_prompt:
            flips = flips.with_columns(
                pl.coalesce(f"_{arm}_prompt", f"{arm}_input").alias(f"{arm}_input")
            ).drop(f"_{arm}_prompt")
    return flips.select(COLUMNS).sort(key)
