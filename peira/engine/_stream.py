"""A response log on disk → per-cluster sums in one streaming pass (the local engine).

The log is read in batches of rows with pyarrow, only the columns the rules
and the scoring rule read, string columns as their Parquet dictionaries: a
batch's strings are looked at once per distinct value (run and model codes,
the case's row in the cases table, the arm, the decision's option), never per
row. Every batch is checked against every value rule of
docs/spec/data-model.md#responses as it goes by, in one compiled pass that
also files each row in a table addressed by its key: one byte per
``(run × cases + case) × samples + sample`` and arm, holding the row's answer
as a small code (decision, abstained, malformed, whether it has a score).
A second answer at the same address is a duplicate key. A score case keeps the
first arm's score until its partner arrives; the pair then records whether
``|score_shift| ≥ δ`` (docs/spec/scoring-rule.md). Rows are never sorted or
joined: a shuffled log is read like a sorted one.

At the end one sweep over the table counts the pairs per run, case and pair of
answer codes. The scoring rule (:func:`peira._pairs.pair_flags`, the one
definition every engine evaluates) and the ratio metrics' terms are
evaluated once per distinct (case labels, pair of answer codes), and the
counts weight them into the sums per run × group × cluster. Memory is the
key table (two bytes a key, plus eight a key of a score case), the staged rows
and a batch, not the log.

:func:`stream_cluster_sums` returns None where it does not apply (extension
columns of the data model, hive partitions, columns of another dtype, groups
that are not case attributes, a key table over :data:`MAX_TABLE_BYTES`) and
wherever the log breaks a rule: the caller then takes the general path
(:func:`peira.io.read_responses`), which names the file, row, column and value
of every violation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .._pairs import CASE_COLUMNS, RULE_INPUTS, SHIFT_TOL, column_default, pair_flags
from ..metrics.ratios import RatioMetric
from ..schema import (
    CONTROL_CHARACTERS,
    MAX_RUNS,
    RESPONSE_EXTENSIONS,
    RESPONSES_SCHEMA,
    bounded,
    not_null,
)
from ._stream_kernels import (
    _ABOVE,
    _OK,
    _accumulate,
    _code_rows,
    _file_rows,
    _in_range,
    _partition,
    _sweep,
)

__all__ = ["stream_cluster_sums"]

#: Rows per batch read.
BATCH_ROWS = 1 << 20
#: The key table's size at most; a log whose keys need more (sample numbers in
#: the millions, or hundreds of millions of keys) takes the general path.
MAX_TABLE_BYTES = 1 << 30
#: Rows staged before they are filed in the key table (reordered by region first
#: when they come in no key order: a shuffled log).
_STAGE_ROWS = 1 << 22
#: Keys swept at once at the end (a stretch of runs).
_SWEEP_KEYS = 1 << 24
#: A region of the key table: 2^16 slots (64 KB, and at most 256 KB of scores).
_REGION_BITS = 16
#: Columns no row may leave null (docs/spec/data-model.md), and with the decision the
#: columns a log must carry for this path (it reads them without conforming).
_NOT_NULL = not_null("responses")
_REQUIRED = tuple(c for c in RESPONSES_SCHEMA if c in _NOT_NULL or c == "decision")
_STRINGS = ("run_id", "model", "model_version", "case_id", "arm", "decision")
#: (upper bound, closed) of each bounded column: [0, 1] or finite non-negative
_BOUNDED = bounded("responses")
_MAX_OPTIONS = 120  # an answer's code holds the decision's option in 7 bits
_CONTROL = re.compile(CONTROL_CHARACTERS)
#: An answer's code: 1 + abstained + 2·malformed + 4·(no score) + 8·(option + 2 or 0),
#: plus 1024 · the pair's shift class on the arm filed second.
_RAW_STATES = 4096


def _numbers(col: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """An Arrow numeric array as its values (whatever a null row holds), its validity
    bitmap (empty: no nulls) and its offset in that bitmap, without copies."""
    validity, data = col.buffers()[:2]
    dtype = np.dtype(col.type.to_pandas_dtype())
    values = np.frombuffer(data, dtype=dtype)[col.offset : col.offset + len(col)]
    bits = (
        np.zeros(0, np.uint8)
        if validity is None or col.null_count == 0
        else np.frombuffer(validity, np.uint8)
    )
    return values, bits, col.offset


class _Violation(Exception):
    """The log breaks a rule, or this path does not take it: the general path does."""


def _eligible(files: Sequence[Path]) -> dict[Path, list[str]] | None:
    """Per file, the columns to read; None if some file needs the general path."""
    known = {**RESPONSES_SCHEMA, **RESPONSE_EXTENSIONS}
    out: dict[Path, list[str]] = {}
    for f in files:
        schema = pl.scan_parquet(f).collect_schema()
        names = schema.names()
        if any(c in names for c in RULE_INPUTS) or not all(c in names for c in _REQUIRED):
            return None
        for name, dtype in schema.items():
            if name in known and dtype != known[name]:
                return None  # the general path conforms (or reports) other dtypes
        out[f] = [*_REQUIRED, *[c for c in _BOUNDED if c in names]]
    return out


def _max_sample(files: Sequence[Path]) -> int | None:
    """The largest sample number of the log (from the Parquet statistics where every
    row group has them; the pass checks every row against it)."""
    import pyarrow.parquet as pq

    top: int | None = None
    for f in files:
        meta = pq.ParquetFile(f).metadata
        j = meta.schema.to_arrow_schema().get_field_index("sample")
        found: int | None = None
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            if rg.num_rows == 0:
                continue
            st = rg.column(j).statistics
            if st is None or not st.has_min_max:
                found = None
                break
            found = st.max if found is None else max(found, st.max)
        else:
            if found is None:
                continue  # no rows
            top = found if top is None else max(top, found)
            continue
        col = pl.scan_parquet(f).select(pl.col("sample").max()).collect().item()
        if col is not None:
            top = int(col) if top is None else max(top, int(col))
    return top


def _batches(files: Sequence[Path], names: dict[Path, list[str]], rows: int) -> Iterator[Any]:
    """Record batches of every file, string columns dictionary-encoded, the next one
    decoded in a thread while the current one is filed."""
    import pyarrow.parquet as pq

    def each() -> Iterator[Any]:
        for f in files:
            strings = [c for c in _STRINGS if c in names[f]]
            # pre_buffer would read the whole file ahead
            pf = pq.ParquetFile(f, read_dictionary=strings, pre_buffer=False)
            yield from pf.iter_batches(batch_size=rows, columns=names[f], use_threads=True)

    it = each()
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(next, it, None)
        while True:
            batch = ahead.result()
            if batch is None:
                return
            ahead = pool.submit(next, it, None)
            yield batch


class _Reducer:
    """The state of one streaming reduction."""

    def __init__(
        self,
        cases: pl.DataFrame,
        by: list[str],
        cluster: str,
        ms: Sequence[RatioMetric],
        delta: float,
        samples: int,
    ) -> None:
        self.cases = cases
        self.n_cases = cases.height
        self.samples = samples
        self.delta = delta
        self.ms = list(ms)
        opts = cases["options"].to_list()
        self.options = sorted({o for x in opts for o in (x or [])})
        code = {o: i for i, o in enumerate(self.options)}
        self.n_opt = max(len(self.options), 1)
        allowed = np.zeros(self.n_cases * self.n_opt, np.bool_)
        for i, x in enumerate(opts):
            for o in x or []:
                allowed[i * self.n_opt + code[o]] = True
        self.allowed = allowed
        self.option_code = code
        self.case_row = {c: i for i, c in enumerate(cases["case_id"].to_list())}
        is_score = (cases["primitive"] == "score").fill_null(False).to_numpy()
        self.score_case = np.where(is_score, np.cumsum(is_score) - 1, -1).astype(np.int64)
        self.n_score = int(is_score.sum())
        self.keys = [*by, cluster]
        groups = cases.select(self.keys).unique(maintain_order=True).with_row_index("_g")
        self.groups = groups
        self.group_of = (
            cases.select(self.keys)
            .join(groups, on=self.keys, how="left", nulls_equal=True, maintain_order="left")["_g"]
            .to_numpy()
            .astype(np.int64)
        )
        labels = ["primitive", "severity", "expected_decision", "target_decision"]
        labels.append("positive_decision")
        self.label_cols = labels
        lc = cases.select(labels).unique(maintain_order=True).with_row_index("_lc")
        self.label_classes = lc
        self.label_of = (
            cases.select(labels)
            .join(lc, on=labels, how="left", nulls_equal=True, maintain_order="left")["_lc"]
            .to_numpy()
            .astype(np.int64)
        )
        self.runs: list[str] = []
        self.run_code: dict[str, int] = {}
        self.models: dict[str, int] = {}
        self.versions: dict[str, int] = {}
        self.key_bytes = 2 * self.n_cases * samples + 8 * self.n_score * samples
        self.tab = np.zeros(0, np.uint8)
        self.scores = np.zeros(0, np.float64)
        self.model_of = np.full(0, -1, np.int64)
        self.version_of = np.full(0, -1, np.int64)
        self.state_id = np.zeros(_RAW_STATES, np.int64)
        self.state_raw = np.zeros(256, np.int64)  # [0]: codes in use
        self.threshold = float(delta - SHIFT_TOL)
        self.staged = 0
        self.stage_rows = 0
        # the terms of the (case labels, pair of answer codes) met, by sorted key
        self.known = np.zeros(0, np.int64)
        self.known_rows = np.zeros(0, np.int64)
        self.terms = np.zeros(0, np.float64)
        self.term_names: list[str] = []
        self._stage(_STAGE_ROWS)

    # ------------------------------------------------------------ per batch

    def _run(self, name: str | None) -> int:
        """A run's code, or -1 for a run_id the rules refuse (empty, control characters)."""
        if name is None:
            return -1
        code = self.run_code.get(name)
        if code is None:
            if not name or _CONTROL.search(name):
                return -1
            if (len(self.runs) + 1) * self.key_bytes > MAX_TABLE_BYTES or len(
                self.runs
            ) >= MAX_RUNS:
                raise _Violation  # the key table would be too large; past MAX_RUNS the
                # general path refuses the log
            code = self.run_code[name] = len(self.runs)
            self.runs.append(name)
        return code

    def _grow(self) -> None:
        """Room in the key table for every run seen (doubling)."""
        n = len(self.runs)
        if n <= self.model_of.shape[0]:
            return
        cap = max(n, min(2 * self.model_of.shape[0], MAX_TABLE_BYTES // self.key_bytes))
        per_run = 2 * self.n_cases * self.samples
        tab = np.zeros(cap * per_run, np.uint8)
        tab[: self.tab.shape[0]] = self.tab
        scores = np.zeros(cap * self.n_score * self.samples, np.float64)
        scores[: self.scores.shape[0]] = self.scores
        model_of = np.full(cap, -1, np.int64)
        model_of[: self.model_of.shape[0]] = self.model_of
        version_of = np.full(cap, -1, np.int64)
        version_of[: self.version_of.shape[0]] = self.version_of
        self.tab, self.scores, self.model_of, self.version_of = tab, scores, model_of, version_of

    @staticmethod
    def _printable(table: dict[str, int], name: str | None) -> int:
        if name is None or _CONTROL.search(name):
            return -1
        code = table.get(name)
        if code is None:
            code = table[name] = len(table)
        return code

    @staticmethod
    def _dictionary(col: Any, lut: list[int], null: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """A dictionary-encoded column's indices, and the codes of its values
        (``lut``; a null row indexes the code ``null`` at the end)."""
        import pyarrow.compute as pc

        idx = col.indices
        if col.null_count:
            idx = pc.fill_null(idx, len(lut))
            lut = [*lut, null]
        return idx.to_numpy(), np.array(lut, np.int64)

    def batch(self, b: Any) -> None:
        """Check one record batch and file its rows in the key table."""

        n = b.num_rows
        if n == 0:
            return
        col = {name: b.column(i) for i, name in enumerate(b.schema.names)}
        for name in _NOT_NULL:
            if col[name].null_count:
                raise _Violation
        for name, (hi, closed) in _BOUNDED.items():
            if name in col and not _in_range(*_numbers(col[name]), hi, closed):
                raise _Violation

        def values(name: str) -> list[Any]:
            return list(col[name].dictionary.to_pylist())

        run = self._dictionary(col["run_id"], [self._run(x) for x in values("run_id")])
        self._grow()
        model = self._dictionary(
            col["model"], [self._printable(self.models, x) for x in values("model")]
        )
        version = self._dictionary(
            col["model_version"],
            [self._printable(self.versions, x) for x in values("model_version")],
        )
        case = self._dictionary(
            col["case_id"], [self.case_row.get(x, -1) for x in values("case_id")]
        )
        arm = self._dictionary(
            col["arm"], [{"attacked": 0, "benign": 1}.get(x, -1) for x in values("arm")]
        )
        dec = self._dictionary(
            col["decision"], [self.option_code.get(x, -1) for x in values("decision")], null=-2
        )
        if "score" in col:
            score = _numbers(col["score"])
        else:  # no row has a score
            score = (np.zeros(n, np.float64), np.zeros(n, np.uint8), 0)
        if self.staged + n > self.stage_rows:
            self.flush()
        if self.staged + n > self.stage_rows:
            self._stage(n)
        done = _code_rows(
            *run, *model, *version, *case, *arm, *dec,
            col["sample"].to_numpy(),
            col["abstained"].to_numpy(zero_copy_only=False),
            col["malformed"].to_numpy(zero_copy_only=False),
            *score, self.n_cases, self.samples, self.score_case, self.n_score,
            self.allowed, self.n_opt, self.model_of, self.version_of, *self.stage[0],
            self.staged,
        )  # fmt: skip
        if done != _OK:
            raise _Violation
        self.staged += n

    def _stage(self, rows: int) -> None:
        """Room to stage ``rows`` rows (twice: the rows, and the rows reordered)."""
        self.stage_rows = max(rows, self.stage_rows)
        self.stage = [
            (
                np.empty(self.stage_rows, np.int32),  # slots < MAX_TABLE_BYTES
                np.empty(self.stage_rows, np.int32),
                np.empty(self.stage_rows, np.int16),
                np.empty(self.stage_rows, np.float64),
            )
            for _ in range(2)
        ]

    def flush(self) -> None:
        """File the staged rows in the key table (reordered by region of the table
        when they come in no key order)."""
        n = self.staged
        if n == 0:
            return
        slot, sk, raw, score = (x[:n] for x in self.stage[0])
        out = tuple(x[:n] for x in self.stage[1])
        if _partition(slot, sk, raw, score, _REGION_BITS, out):
            slot, sk, raw, score = out
        done = _file_rows(
            slot, sk, raw, score, self.threshold, self.tab, self.scores, self.state_id,
            self.state_raw,
        )  # fmt: skip
        if done != _OK:
            raise _Violation
        self.staged = 0

    # ------------------------------------------------------------ the sums

    def _answers(self, codes: np.ndarray, prefix: str) -> dict[str, Any]:
        """The arm columns the rule reads, for answer codes (0: the arm is absent),
        and, as numpy arrays, whether the score is null and the shift class."""
        present = codes != 0
        raw = self.state_raw[codes]
        base = raw % 1024 - 1
        dec = base // 8 - 2
        decision = [
            self.options[k] if p and k >= 0 else None for k, p in zip(dec, present, strict=True)
        ]
        return {
            f"{prefix}present": present,
            f"{prefix}decision": pl.Series(decision, dtype=pl.String),
            f"{prefix}abstained": pl.Series(base % 2 == 1).set(pl.Series(~present), None),
            f"{prefix}malformed": pl.Series(base // 2 % 2 == 1).set(pl.Series(~present), None),
            "_snull": ~present | (base // 4 % 2 == 1),
            "_cls": np.where(present, raw // 1024, 0),
        }

    def _terms(self, combos: pl.DataFrame, reps: tuple[float, float, float, float]) -> pl.DataFrame:
        """Every summed term of every metric, per combination of case labels and pair
        of answer codes; scores stand in for the shift class (``reps``: benign and
        attacked score below δ, then at least δ)."""
        a = combos["_p"].to_numpy() // 256
        b = combos["_p"].to_numpy() % 256
        cols: dict[str, Any] = {}
        arms = {"b_": self._answers(b, "b_"), "a_": self._answers(a, "a_")}
        cls = np.maximum(arms["b_"]["_cls"], arms["a_"]["_cls"])
        lo_b, lo_a, hi_b, hi_a = reps
        for prefix, lo, hi in (("b_", lo_b, hi_b), ("a_", lo_a, hi_a)):
            x = arms[prefix]
            cols.update({k: v for k, v in x.items() if not k.startswith("_")})
            value = np.where(cls == _ABOVE, hi, lo)
            cols[f"{prefix}score"] = pl.Series(value).set(pl.Series(x["_snull"]), None)
            cols[f"{prefix}confidence"] = pl.repeat(None, len(a), dtype=pl.Float64, eager=True)
        labels = self.label_classes.drop("_lc")[combos["_lc"].to_numpy()]
        frame = pl.concat([pl.DataFrame(cols), labels], how="horizontal").with_columns(
            combos["_lc"].alias("case_id"),
            pl.when(pl.col("b_present").not_())
            .then(pl.lit("benign"))
            .when(pl.col("a_present").not_())
            .then(pl.lit("attacked"))
            .otherwise(None)
            .alias("missing_arm"),
            *[column_default(n) for n in ("arms", "a_no_attack")],
        )
        lf = frame.lazy()
        for e in pair_flags(delta=self.delta, extended=False):
            lf = lf.with_columns(e)
        terms = [
            e.cast(pl.Float64).alias(f"{m.name}__{part}")
            for m in self.ms
            for part, e in (("num", m.numerator), ("den", m.denominator))
        ]
        return lf.select(terms).collect()

    def _combos(self, key: np.ndarray) -> np.ndarray:
        """Each record's row of ``self.terms`` (the terms of every (case labels, pair of
        answer codes) met so far, keyed ``label class × 65536 + pair code``); the
        terms of combinations not met before are evaluated now."""
        new = np.setdiff1d(np.unique(key), self.known)
        if new.shape[0]:
            combos = pl.DataFrame({"_lc": new // 65536, "_p": new % 65536})
            terms = self._terms(combos, (0.0, 0.0, 0.0, 1.0))
            # the terms read scores only through whether they are null and the shift class
            if not terms.equals(self._terms(combos, (0.7, 0.7, 1.0, 0.0))):
                raise _Violation
            self.term_names = terms.columns
            rows = np.arange(self.terms.shape[0], self.terms.shape[0] + new.shape[0])
            self.terms = np.vstack([self.terms.reshape(-1, terms.width), terms.to_numpy()])
            known = np.concatenate([self.known, new])
            order = np.argsort(known)
            self.known = known[order]
            self.known_rows = np.concatenate([self.known_rows, rows])[order]
        found: np.ndarray = self.known_rows[np.searchsorted(self.known, key)]
        return found

    def finish(self, missing: str) -> pl.DataFrame:
        """The sums per run × group: the key table swept a stretch of runs at a time."""
        self.flush()
        n_runs = len(self.runs)
        per_run = self.n_cases * self.samples
        step = max(1, _SWEEP_KEYS // per_run)
        parts = []
        for r0 in range(0, n_runs, step):
            r1 = min(n_runs, r0 + step)
            tab = self.tab[2 * r0 * per_run : 2 * r1 * per_run]
            rec_r, rec_c, rec_p, rec_n, m = _sweep(
                tab, r1 - r0, self.n_cases, self.samples, missing == "error"
            )
            if m < 0:
                raise _Violation  # a pair lacks an arm: the general path names it
            if m == 0:
                continue
            rec_c, rec_n = rec_c[:m], rec_n[:m]
            combo = self._combos(self.label_of[rec_c] * 65536 + rec_p[:m])
            out_r, out_g, n_pairs, sums = _accumulate(
                rec_r[:m], self.group_of[rec_c], combo, rec_n, self.terms, self.groups.height
            )
            parts.append(
                pl.DataFrame(
                    {
                        "_run": out_r + r0,
                        "_g": out_g,
                        "n_pairs": n_pairs,
                        **{c: sums[:, j] for j, c in enumerate(self.term_names)},
                    }
                )
            )
        value = self.term_names
        out = pl.concat(parts)
        runs = pl.DataFrame(
            {"_run": pl.Series(range(n_runs), dtype=out.schema["_run"]), "run_id": self.runs}
        )
        groups = self.groups.with_columns(pl.col("_g").cast(out.schema["_g"]))
        out = out.join(runs, on="_run").join(groups, on="_g")
        keys = ["run_id", *self.keys]
        return out.select(*keys, "n_pairs", *value).sort(keys)


def stream_cluster_sums(
    files: Sequence[Path],
    cases: pl.DataFrame,
    by: Sequence[str],
    *,
    cluster: str,
    metrics: Sequence[RatioMetric],
    delta: float,
    missing: str,
    batch_rows: int = BATCH_ROWS,
) -> pl.DataFrame | None:
    """Per run × ``by`` × ``cluster``: ``n_pairs`` and every metric's sums, streaming.

    ``cases`` is the validated cases table. None when the log needs the
    general path: a column or layout this path does not read (see the module
    notes), or any violation of the data model, or a pair lacking an arm
    with ``missing="error"`` (the general path raises, naming them).
    """
    cols = [*by, cluster]
    if any(c not in CASE_COLUMNS for c in cols) or len(set(cols)) != len(cols):
        return None
    if not (0 < delta - SHIFT_TOL <= 1):  # the shift class stands in for the scores
        return None
    names = _eligible(files)
    if names is None or not files:
        return None
    options = sorted({o for opts in cases["options"].to_list() for o in (opts or [])})
    if len(options) > _MAX_OPTIONS:
        return None
    top = _max_sample(files)
    if top is None:
        return None  # no rows
    samples = max(top, 0) + 1
    red = _Reducer(cases, list(by), cluster, metrics, delta, samples)
    if red.key_bytes > MAX_TABLE_BYTES:
        return None
    n_rows = 0
    try:
        for batch in _batches(files, names, batch_rows):
            n_rows += batch.num_rows
            red.batch(batch)
        if n_rows == 0:
            return None
        return red.finish(missing)
    except _Violation:
        return None
