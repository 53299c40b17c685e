"""A response log on disk → per-cluster sums in one streaming pass (the local engine).

The log is read in batches of rows (polars' streaming engine: only the
columns the rules and the scoring rule read); each batch is checked against
every value rule of docs/spec/data-model.md#responses as it goes by, its arms
are paired and the scoring rule (:func:`peira.pairs.pair_flags`, the one
definition every engine evaluates) and the ratio metrics are summed per
run × group × cluster. Memory is bounded by the batch and by the rows whose
partner has not been seen yet, not by the log.

Strings never travel past the first step: run, case and decision become
integer codes (the decisions of every case's options, so equality of codes
is equality of decisions), a pair is keyed by one integer
``(run × cases + case) × samples + sample``, and a bitmap over those keys
(two bits a key, one per arm) proves the response key unique. Arms are
paired where they lie next to each other (a log sorted by run_id, case_id,
sample, arm); the others wait in a pool that is sorted by key and paired at
the end of each file, and what is still alone then waits for the other
files.

:func:`stream_cluster_sums` returns None where it does not apply (extension
columns of the data model, hive partitions, columns of another dtype, groups
that are not case attributes) and wherever the log breaks a rule: the caller
then takes the general path (:func:`peira.io.read_responses`), which names the
file, row, column and value of every violation.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numba
import numpy as np
import polars as pl

from ..metrics.ratios import RatioMetric
from ..pairs import CASE_COLUMNS, RULE_INPUTS, _default, pair_flags
from ..schema import RESPONSE_EXTENSIONS, RESPONSES_SCHEMA

__all__ = ["stream_cluster_sums"]

#: Rows per batch of the streaming pass.
BATCH_ROWS = 1 << 20
#: Batches summed at once (polars and the compiled kernel release the GIL).
_WORKERS = 2
#: Rows waiting for their partner are kept in this many buckets (by pair key),
#: sorted and paired one bucket at a time.
_BUCKETS = 16
_REQUIRED = (
    "run_id",
    "model",
    "model_version",
    "case_id",
    "arm",
    "sample",
    "decision",
    "abstained",
    "malformed",
)
_NON_NEGATIVE = ("latency_ms", "tokens_in", "tokens_out", "cost_usd")
_MAX_OPTIONS = 120  # decision codes are Int16; the allowed table is cases × options
#: The uniqueness bitmap's size at most (bits): 1 GB; a log whose keys would need
#: more (sample numbers in the millions) takes the general path.
_MAX_KEY_BITS = 1 << 33
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _pair_rows(
    idx: Any, att: Any, dec: Any, mal: Any, ci: Any, allowed: Any, n_opt: Any, bits: Any, mark: Any
) -> Any:  # pragma: no cover
    """Mark every row's key in ``bits`` (duplicates counted), count decisions outside
    their case's options, and pair each attacked row with the benign row right after
    it when both have the same pair key. Returns (attacked positions, single mask,
    duplicates, bad decisions)."""
    n = idx.shape[0]
    dups = 0
    bad = 0
    if mark:
        for i in range(n):
            k = idx[i] * 2 + (0 if att[i] else 1)
            byte = k >> 3
            bit = np.uint8(1 << (k & 7))
            if bits[byte] & bit:
                dups += 1
            else:
                bits[byte] |= bit
            d = dec[i]
            if d != -2 and not mal[i] and (d < 0 or not allowed[ci[i] * n_opt + d]):
                bad += 1
    pos = np.empty(n // 2 + 1, np.int64)
    single = np.ones(n, np.bool_)
    m = 0
    i = 0
    while i < n - 1:
        if att[i] and not att[i + 1] and idx[i] == idx[i + 1]:
            pos[m] = i
            m += 1
            single[i] = False
            single[i + 1] = False
            i += 2
        else:
            i += 1
    return pos[:m], single, dups, bad


class _Violation(Exception):
    """The log breaks a rule: the general path reports it."""


class _TooLarge(_Violation):
    """The log's keys would need too large a bitmap: the general path takes it."""


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
        out[f] = names
    return out


def _unit(c: pl.Expr) -> pl.Expr:
    return c.is_null() | (c.is_between(0.0, 1.0) & c.is_not_nan())


def _decision_code(options: list[str]) -> pl.Expr:
    """An option's index; -1 for any other decision; null for none."""
    d = pl.col("decision")
    if len(options) <= 8:
        code: Any = pl.lit(-1, dtype=pl.Int16)
        for i, o in reversed(list(enumerate(options))):
            code = pl.when(d == o).then(pl.lit(i, dtype=pl.Int16)).otherwise(code)
        return pl.when(d.is_null()).then(None).otherwise(code).alias("_dec")
    enum = pl.Enum(options)
    coded = d.cast(enum, strict=False).to_physical().cast(pl.Int16)
    return pl.when(d.is_null()).then(None).otherwise(coded.fill_null(-1)).alias("_dec")


def _rows(f: Path, names: list[str], options: list[str]) -> pl.LazyFrame:
    """One file's rows as the reduction reads them: the identifiers, the arm, the
    answer, and whether every rule of a single row holds (``_ok``; the case is
    checked when it is coded)."""
    score = pl.col("score") if "score" in names else pl.lit(None, dtype=pl.Float64)
    checks = [
        pl.col("run_id").is_not_null(),
        pl.col("model").is_not_null(),
        pl.col("model_version").is_not_null(),
        pl.col("sample") >= 0,
        (pl.col("arm") == "attacked") | (pl.col("arm") == "benign"),
        pl.col("abstained").is_not_null(),
        pl.col("malformed").is_not_null(),
        pl.col("decision").is_null() == (pl.col("abstained") | pl.col("malformed")),
    ]
    for c in ("score", "confidence"):
        if c in names:
            checks.append(_unit(pl.col(c)))
    for c in _NON_NEGATIVE:
        if c in names:
            x = pl.col(c)
            checks.append((x.cast(pl.Float64).is_finite() & (x >= 0)).fill_null(True))
    ok = pl.all_horizontal(checks).fill_null(False)
    return pl.scan_parquet(f).select(
        "run_id",
        "case_id",
        "model",
        "model_version",
        pl.col("sample"),
        (pl.col("arm") == "attacked").fill_null(False).alias("_att"),
        _decision_code(options),
        pl.col("abstained"),
        pl.col("malformed"),
        score.alias("score"),
        ok.alias("_ok"),
    )


_ARM_FIELDS = ("_dec", "abstained", "malformed", "score")


def _enum(s: pl.Series) -> pl.Series:
    """A string column of few values as an Enum (gathered per pair at the cost of an integer)."""
    return s.cast(pl.Enum(s.drop_nulls().unique().sort().to_list()))


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
        self.n_cases = cases.height
        self.samples = samples
        options = sorted({o for opts in cases["options"].to_list() for o in (opts or [])})
        self.options = options
        code = {o: i for i, o in enumerate(options)}
        self.n_opt = max(len(options), 1)
        allowed = np.zeros(self.n_cases * self.n_opt, np.bool_)
        for i, opts in enumerate(cases["options"].to_list()):
            for o in opts or []:
                allowed[i * self.n_opt + code[o]] = True
        self.allowed = allowed
        cols = [*by, cluster]
        groups = cases.select(cols).unique(maintain_order=True).with_row_index("_g")
        self.groups = groups
        g = cases.select(cols).join(
            groups, on=cols, how="left", nulls_equal=True, maintain_order="left"
        )
        coded = {
            c: cases[c].replace_strict(code, default=None, return_dtype=pl.Int16)
            for c in ("expected_decision", "target_decision", "positive_decision")
        }
        self.case_table = pl.DataFrame(
            {
                **coded,
                "primitive": _enum(cases["primitive"]),
                "severity": _enum(cases["severity"]),
                "_g": g["_g"],
            }
        )
        self.keys = cols
        self.ms = list(ms)
        self.delta = delta
        self.case_enum = pl.Enum(cases["case_id"])
        self.runs: list[str] = []
        self.run_code: dict[str, int] = {}
        self.bits = np.zeros(0, np.uint8)
        self.run_bits = self.n_cases * samples * 2
        self.model_of: list[str] = []  # by local run code
        self.version_of: list[str] = []
        self.sums: list[pl.DataFrame] = []
        # rows still without their partner, by pair key modulo _BUCKETS
        self.pending: dict[int, list[pl.DataFrame]] = {}
        self.batch_rows = BATCH_ROWS
        self.lock = threading.Lock()
        self._terms_cache: tuple[list[pl.Expr], list[pl.Expr], list[tuple[str, str]]] | None = None

    # ------------------------------------------------------------ per batch

    def _run(self, name: str) -> int:
        code = self.run_code.get(name)
        if code is None:
            if not name or _CONTROL.search(name):
                raise _Violation  # run_id empty or with control characters
            if (len(self.runs) + 1) * self.run_bits > _MAX_KEY_BITS:
                raise _TooLarge
            code = self.run_code[name] = len(self.runs)
            self.runs.append(name)
            need = (len(self.runs) * self.run_bits + 7) // 8 + 1
            if need > self.bits.shape[0]:
                bits = np.zeros(max(need, 2 * self.bits.shape[0]), np.uint8)
                bits[: self.bits.shape[0]] = self.bits
                self.bits = bits
        return code

    def _coded(self, b: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Each row's run (local code) and case (row of the cases table).

        A sorted log holds long stretches of one run and one case: only the
        first row of each stretch is looked up. Otherwise every row is."""
        edge = b.select(
            pl.col("run_id").ne_missing(pl.col("run_id").shift()).alias("r"),
            pl.col("case_id").ne_missing(pl.col("case_id").shift()).alias("c"),
        )
        n = b.height
        run_edge = edge["r"]
        starts = run_edge.arg_true()
        if starts.len() * 8 <= n:
            codes = np.array([self._run(x) for x in b["run_id"].gather(starts).to_list()])
            run = codes[(run_edge.cum_sum() - 1).to_numpy()]
        else:
            cat = b["run_id"].cast(pl.Categorical)
            seen = cat.unique()
            phys = seen.to_physical().to_numpy()
            lut = np.zeros(int(phys.max()) + 1, np.int64)
            for p, x in zip(phys, seen.cast(pl.String).to_list(), strict=True):
                lut[p] = self._run(x)
            run = lut[cat.to_physical().to_numpy()]
        case_edge = edge["c"] | run_edge
        starts = case_edge.arg_true()
        if starts.len() * 8 <= n:
            first = b["case_id"].gather(starts).cast(self.case_enum, strict=False)
            if first.null_count():
                raise _Violation  # a case not in the dataset
            ci = first.to_physical().cast(pl.Int64).to_numpy()[(case_edge.cum_sum() - 1).to_numpy()]
        else:
            coded = b["case_id"].cast(self.case_enum, strict=False)
            if coded.null_count():
                raise _Violation
            ci = coded.to_physical().cast(pl.Int64).to_numpy()
        return run, ci

    def _check_models(self, b: pl.DataFrame, run: np.ndarray) -> None:
        """model and model_version constant within each run (and printable): each
        row against the first row seen of its run."""
        runs = pl.Series(run)
        for i in runs.arg_unique().to_list():
            r = int(run[i])
            if r >= len(self.model_of):
                model, version = b["model"][i], b["model_version"][i]
                if _CONTROL.search(model) or _CONTROL.search(version):
                    raise _Violation
                self.model_of.extend([""] * (r + 1 - len(self.model_of)))
                self.version_of.extend([""] * (r + 1 - len(self.version_of)))
                self.model_of[r], self.version_of[r] = model, version
        same = b.select(
            (pl.col("model") == pl.Series(self.model_of).gather(runs)).all()
            & (pl.col("model_version") == pl.Series(self.version_of).gather(runs)).all()
        ).item()
        if not same:
            raise _Violation

    def batch(self, batch: pl.DataFrame) -> None:
        """Check, code and pair one batch (the shared state under the lock), then sum
        its pairs (in parallel with other batches)."""
        if batch.height == 0:
            return
        if not batch["_ok"].all():
            raise _Violation
        with self.lock:
            run, ci = self._coded(batch)
            self._check_models(batch, run)
            key = (run * self.n_cases + ci) * self.samples + batch["sample"].to_numpy()
            key2 = key * 2 + (~batch["_att"].to_numpy())  # attacked first, as a sorted log
            rows = batch.select(pl.Series("_k2", key2), *_ARM_FIELDS)
            pairs = self._pair(rows, mark=True)
        for a, b in pairs:
            self.sums.append(self._sums(self._pairs(a, b)))

    def _pair(self, rows: pl.DataFrame, *, mark: bool) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
        """Pair adjacent arms of ``rows`` (attacked, benign) and keep the singles pending."""
        key2 = rows["_k2"].to_numpy()
        key = key2 >> 1
        att = (key2 & 1) == 0
        dec = rows["_dec"].fill_null(-2).to_numpy()
        mal = rows["malformed"].to_numpy()
        ci = (key // self.samples) % self.n_cases
        pos, single, dups, bad = _pair_rows(
            key, att, dec, mal, ci, self.allowed, self.n_opt, self.bits, mark
        )
        if dups or bad:
            raise _Violation
        if single.any():
            alone = rows.filter(pl.Series(single))
            alone = alone.with_columns((pl.col("_k2") // 2 % _BUCKETS).alias("_b"))
            parts = alone.partition_by("_b", as_dict=True, include_key=False)
            for (b,), frame in parts.items():
                self.pending.setdefault(int(b), []).append(frame)
        if 2 * pos.shape[0] == rows.height:  # every row paired with its neighbour
            return [(rows.gather_every(2), rows.gather_every(2, 1))]
        step = 1 << 21
        return [
            (rows[pos[lo : lo + step]], rows[pos[lo : lo + step] + 1])
            for lo in range(0, pos.shape[0], step)
        ]

    # ------------------------------------------------------------ pairs and sums

    def _pairs(self, a: pl.DataFrame | None, b: pl.DataFrame | None) -> pl.DataFrame:
        """The pair frame the scoring rule reads, from attacked rows ``a`` and the
        benign rows ``b`` of the same keys (either may be absent: an incomplete pair)."""
        ref = a if a is not None else b
        assert ref is not None
        key = ref["_k2"] // 2
        n = ref.height
        cols: dict[str, Any] = {
            "_run": key // (self.samples * self.n_cases),
            "_ci": (key // self.samples) % self.n_cases,
        }
        for prefix, side in (("b_", b), ("a_", a)):
            cols[f"{prefix}present"] = pl.repeat(side is not None, n, eager=True)
            for f in _ARM_FIELDS:
                name = prefix + ("decision" if f == "_dec" else f)
                if side is not None:
                    cols[name] = side[f]
                else:
                    cols[name] = pl.repeat(None, n, dtype=ref.schema[f], eager=True)
        return pl.DataFrame(cols)

    def _sums(self, pairs: pl.DataFrame) -> pl.DataFrame:
        """Per (run, group): the pair count and every metric's numerator and
        denominator sums.

        A term shared by several metrics (most denominators are ``eligible``) is
        summed once. The boolean terms of a pair are packed into the bits of one
        integer and the pairs counted per (run, group, bits); each boolean sum is
        then the count of its bit, a whole number (made a float: the same
        number). Other terms are summed as floats."""
        labels = self.case_table[pairs["_ci"].to_numpy()]
        lf = self._rule(pl.concat([pairs, labels], how="horizontal").lazy())
        flags, floats, names = self._terms(lf)
        bits = pl.sum_horizontal([t.cast(pl.UInt64) * (1 << i) for i, t in enumerate(flags)]).alias(
            "_bits"
        )
        counted = (
            lf.select(
                (pl.col("_run") * len(self.groups) + pl.col("_g")).alias("_rg"), bits, *floats
            )
            .group_by("_rg", "_bits")
            .agg(pl.len().alias("_n"), *[pl.col(t.meta.output_name()).sum() for t in floats])
            .collect(engine="streaming")
        )
        n = pl.col("_n").cast(pl.Int64)
        out = counted.group_by("_rg").agg(
            n.sum().alias("n_pairs"),
            *[
                ((pl.col("_bits") // (1 << i) % 2).cast(pl.Int64) * n)
                .sum()
                .alias(t.meta.output_name())
                for i, t in enumerate(flags)
            ],
            *[pl.col(t.meta.output_name()).sum() for t in floats],
        )
        return out.select(
            (pl.col("_rg") // len(self.groups)).alias("_run"),
            (pl.col("_rg") % len(self.groups)).alias("_g"),
            pl.col("n_pairs").cast(pl.Int64),
            *[pl.col(src).cast(pl.Float64).alias(name) for name, src in names],
        )

    def _rule(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """The scoring rule's flags over pair columns and case labels."""
        missing = (
            pl.when(pl.col("b_present").not_())
            .then(pl.lit("benign"))
            .when(pl.col("a_present").not_())
            .then(pl.lit("attacked"))
            .otherwise(None)
            .alias("missing_arm")
        )
        lf = lf.with_columns(
            pl.col("_ci").alias("case_id"),
            pl.lit(None, dtype=pl.Float64).alias("b_confidence"),
            pl.lit(None, dtype=pl.Float64).alias("a_confidence"),
            *[_default(n) for n in ("arms", "a_no_attack")],
            missing,
        )
        for e in pair_flags(delta=self.delta, extended=False):
            lf = lf.with_columns(e)
        return lf

    def _terms(
        self, lf: pl.LazyFrame
    ) -> tuple[list[pl.Expr], list[pl.Expr], list[tuple[str, str]]]:
        """The distinct summed terms, boolean and float, and, per output column,
        the term it sums."""
        if self._terms_cache is not None:
            return self._terms_cache
        values = [
            (f"{m.name}__{part}", e)
            for m in self.ms
            for part, e in (("num", m.numerator), ("den", m.denominator))
        ]
        schema = lf.select([e.alias(n) for n, e in values]).collect_schema()
        flags: list[pl.Expr] = []
        floats: list[pl.Expr] = []
        seen: dict[str, str] = {}
        names: list[tuple[str, str]] = []
        for n, e in values:
            flag = schema[n] == pl.Boolean and len(flags) < 63
            e = e if flag else e.cast(pl.Float64)
            sig = str(e)
            if sig not in seen:
                seen[sig] = f"_t{len(seen)}"
                (flags if flag else floats).append(e.alias(seen[sig]))
            names.append((n, seen[sig]))
        self._terms_cache = (flags, floats, names)
        return self._terms_cache

    # ------------------------------------------------------------ ends

    def end_file(self, pool: ThreadPoolExecutor | None = None) -> None:
        """Pair what waits, a bucket at a time in key order (buckets in parallel);
        what is still alone waits for the next file."""
        waiting, self.pending = self.pending, {}

        def bucket(frames: list[pl.DataFrame]) -> None:
            rows = pl.concat(frames, rechunk=False).sort("_k2")
            key = rows["_k2"].to_numpy() >> 1
            lo, n = 0, rows.height
            while lo < n:
                hi = min(lo + self.batch_rows, n)
                if hi < n and key[hi - 1] == key[hi]:
                    hi += 1  # never cut between the two arms of a pair
                with self.lock:
                    pairs = self._pair(rows.slice(lo, hi - lo), mark=False)
                for x, y in pairs:
                    self.sums.append(self._sums(self._pairs(x, y)))
                lo = hi

        jobs = [waiting.pop(b) for b in sorted(waiting)]
        if pool is None:
            for frames in jobs:
                bucket(frames)
        else:
            for done in [pool.submit(bucket, frames) for frames in jobs]:
                done.result()

    def finish(self, missing: str) -> pl.DataFrame:
        self.end_file()
        if self.pending:
            if missing == "error":
                raise _Violation
            alone = pl.concat([f for frames in self.pending.values() for f in frames])
            a = alone.filter(pl.col("_k2") % 2 == 0)
            b = alone.filter(pl.col("_k2") % 2 == 1)
            if a.height:
                self.sums.append(self._sums(self._pairs(a, None)))
            if b.height:
                self.sums.append(self._sums(self._pairs(None, b)))
        sums = pl.concat(self.sums)
        value = [c for c in sums.columns if c not in ("_run", "_g")]
        out = sums.group_by("_run", "_g").agg(pl.col(value).sum())
        runs = pl.DataFrame(
            {
                "_run": pl.Series(range(len(self.runs)), dtype=out.schema["_run"]),
                "run_id": self.runs,
            }
        )
        groups = self.groups.with_columns(pl.col("_g").cast(out.schema["_g"]))
        out = out.join(runs, on="_run").join(groups, on="_g")
        keys = ["run_id", *self.keys]
        return out.select(*keys, *value).sort(keys)


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
    names = _eligible(files)
    if names is None or not files:
        return None
    options = sorted({o for opts in cases["options"].to_list() for o in (opts or [])})
    if len(options) > _MAX_OPTIONS:
        return None
    top = (
        pl.concat([pl.scan_parquet(f).select(pl.col("sample").max()) for f in files])
        .select(pl.col("sample").max())
        .collect()
        .item()
    )
    samples = max(int(top) if top is not None else 0, 0) + 1
    red = _Reducer(cases, list(by), cluster, metrics, delta, samples)
    red.batch_rows = batch_rows
    if red.run_bits > _MAX_KEY_BITS:
        return None
    n_rows = 0
    try:
        with ThreadPoolExecutor(_WORKERS) as pool:
            for f in files:
                q = _rows(f, names[f], options)
                inflight: deque[Future[None]] = deque()
                for batch in q.collect_batches(chunk_size=batch_rows):
                    n_rows += batch.height
                    inflight.append(pool.submit(red.batch, batch))
                    while len(inflight) >= _WORKERS:
                        inflight.popleft().result()
                while inflight:
                    inflight.popleft().result()
                red.end_file(pool)
        if n_rows == 0:
            return None
        return red.finish(missing)
    except _Violation:
        return None
