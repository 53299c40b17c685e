"""lm-evaluation-harness outputs (``--log_samples``) → cases, variants, responses, published figures.

``lm_eval run ... --log_samples --output_path DIR`` writes, per run,
``results_<time>.json`` and one ``samples_<task>_<time>.jsonl`` per task beside
it (in a subdirectory named after the model). Each JSONL line is one document:
``doc_id``, ``doc``, ``target``, ``arguments`` (the prompts), ``resps`` and
``filtered_resps`` (the model's answers before and after the task's filter),
``filter``, ``metrics`` (the names of the metric fields on the line), each
metric's value, and ``doc_hash`` / ``prompt_hash`` / ``target_hash``.

The mapping (docs/spec/eval-logs.md, "lm-evaluation-harness outputs"):

- a run is one ``results_<time>.json`` with its sample files (or sample files
  sharing a time stamp, when the results file is absent): ``model`` = the
  ``pretrained``/``model`` model argument, else ``<model type>:<model args>``;
  ``run_id`` = ``<model>@<time>``;
- a task is a family; its group (``group_subtasks`` of the results file, as
  ``mmlu_stem`` holds its subjects) is the suite, and the chain of groups is
  kept in the case's ``extras``;
- a document is a case ``<task>/<doc_id>``, shared by every run that saw it,
  so two models on the same documents share cases and compare pairwise;
  ``doc_hash`` checks that another run's document under that id is the same
  one (a different one is kept apart, ``<task>/<doc_id>#<hash>``, with a note)
  and never joins two documents of one run: MMLU repeats questions under other
  doc_ids, and each is its own case, with one note per task;
- the task's metric (``acc``, ``exact_match`` …; ``metric`` chooses) is the
  verdict: its value is ``verdict_score``, correct from ``threshold`` on;
- a multiple-choice answer is the choice with the highest log-likelihood (or
  length-normalised, for ``acc_norm``), among options named by the choice
  continuations; a generated answer is ``filtered_resps[0]``, with the
  generation itself as ``raw_text``; ``filtered_resps`` is kept as a column;
- the results file's own figures (``<metric>,<filter>`` and its ``_stderr``)
  of each task become ``published`` rows (family = the task) with lm-eval's
  ``n`` (``n-samples.effective``); a group's figure (its size-weighted mean)
  becomes the run's row (family null) when the group is the whole run, as
  ``--tasks mmlu`` makes it (:mod:`._lm_eval_results`); tasks the results file
  scored without a sample file are named in a note.

Runs are clean-only (``arms = "benign"``) unless a task is paired with its
perturbed twin on the same documents (``attacked_tasks={"clean": "perturbed"}``):
then the twin's answers are the attacked arm of the clean task's cases, in a
run of their own (``<run_id>+attacked``, ``arms = "both"``), since the arms a
run observed are the same for all its rows.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataFileError, InputFormatError, warn
from ._bundle import Imported
from ._evallog import (
    OTHER,
    CaseBook,
    EvalLogWarning,
    bundle,
    check_threshold,
    extras_json,
    json_text,
    no_gc,
    option_list,
    verdict_columns,
)
from ._lm_eval_results import (
    check_results,
    groups,
    model_name,
    number,
    published_rows,
    tasks_without_samples,
)
from .cases import iter_jsonl, json_kind, load_json_file

__all__ = ["read_lm_eval"]

PathLike = str | os.PathLike[str]

_STAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<stamp>{_STAMP})\.jsonl$")
_RESULTS = re.compile(rf"^results_(?P<stamp>{_STAMP})\.json$")
#: Metrics tried in order when none is chosen.
_DEFAULT_METRICS = ("acc", "exact_match")
#: How many doc_ids a note lists before "…".
_LISTED = 12


@dataclass
class _Run:
    """One lm-eval invocation: its results file (if any) and its per-task sample files."""

    directory: Path
    stamp: str
    results: Path | None = None
    samples: dict[str, Path] = field(default_factory=dict)


def _discover(inputs: Sequence[PathLike]) -> list[_Run]:
    """Group the given files and directories into runs (directory, time stamp)."""
    runs: dict[tuple[Path, str], _Run] = {}

    def add(p: Path, *, explicit: bool) -> None:
        m_s, m_r = _SAMPLES.match(p.name), _RESULTS.match(p.name)
        if m_s is None and m_r is None:
            if explicit:
                raise InputFormatError(
                    f"{p}: not an lm-eval output (expected results_<time>.json or "
                    "samples_<task>_<time>.jsonl)"
                )
            return
        stamp = (m_s or m_r).group("stamp")  # type: ignore[union-attr]
        run = runs.setdefault((p.parent, stamp), _Run(p.parent, stamp))
        if m_r is not None:
            run.results = p
        else:
            assert m_s is not None
            run.samples[m_s.group("task")] = p
        if explicit:  # a single file brings its run's other files along
            for q in sorted(p.parent.iterdir()):
                if q != p and q.name.endswith(f"_{stamp}.jsonl" if m_s else ".jsonl"):
                    add_sibling(q, stamp)
                if q != p and m_s is not None and q.name == f"results_{stamp}.json":
                    run.results = q

    def add_sibling(q: Path, stamp: str) -> None:
        m = _SAMPLES.match(q.name)
        if m is not None and m.group("stamp") == stamp:
            runs[(q.parent, stamp)].samples.setdefault(m.group("task"), q)

    for raw in inputs:
        p = Path(raw)
        if not p.exists():
            raise DataFileError(f"{p}: no such file or directory")
        if p.is_dir():
            for q in sorted(p.rglob("*")):
                if q.is_file():
                    add(q, explicit=False)
        else:
            add(p, explicit=True)
    found = [r for r in runs.values() if r.samples]
    if not found:
        where = ", ".join(str(Path(x)) for x in inputs)
        raise InputFormatError(
            f"{where}: no lm-eval sample files (samples_<task>_<time>.jsonl; run lm_eval "
            "with --log_samples)"
        )
    return sorted(found, key=lambda r: (str(r.directory), r.stamp))


def _choice_answers(resps: Any) -> list[Any] | None:
    """``resps`` when it holds multiple-choice answers, else None."""
    return resps if _is_choice_answers(resps) else None


def _is_choice_answers(resps: Any) -> bool:
    """``filtered_resps`` of a multiple-choice document: ``[[loglik, is_greedy], …]``."""
    if not isinstance(resps, list) or len(resps) < 2:
        return False
    for r in resps:
        if not (isinstance(r, list) and len(r) == 2):
            return False
        try:
            float(r[0])
        except (TypeError, ValueError):
            return False
    return True


def _continuations(arguments: Any) -> list[str] | None:
    """The continuation scored by each log-likelihood request (``arg_1``), in order."""
    if isinstance(arguments, Mapping):
        items = [arguments[k] for k in sorted(arguments, key=_arg_index)]
        out = []
        for it in items:
            if not isinstance(it, Mapping) or not isinstance(it.get("arg_1"), str):
                return None
            out.append(it["arg_1"])
        return out
    if isinstance(arguments, list):  # older files: [[context, continuation], …]
        out = []
        for it in arguments:
            if not (isinstance(it, list) and len(it) >= 2 and isinstance(it[1], str)):
                return None
            out.append(it[1])
        return out
    return None


@functools.lru_cache(maxsize=4096)
def _arg_index(key: str) -> int:
    """The request number a key ends in (``gen_args_3`` → 3; the same few keys recur on
    every line of a file, hence the cache)."""
    m = _TRAILING_DIGITS.search(key)
    return int(m.group(1)) if m else 0


_TRAILING_DIGITS = re.compile(r"(\d+)$")


def _prompt(arguments: Any) -> str | None:
    """The prompt the model was given (the context of the first request)."""
    if isinstance(arguments, Mapping) and arguments:
        first = arguments[min(arguments, key=_arg_index)]
        if isinstance(first, Mapping) and isinstance(first.get("arg_0"), str):
            return str(first["arg_0"])
    if isinstance(arguments, list) and arguments:
        first = arguments[0]
        if isinstance(first, list) and first and isinstance(first[0], str):
            return first[0]
    return None


def _gold_index(gold: Any, continuations: Sequence[str] | None) -> int | None:
    """The right choice's index from a multiple-choice ``target``, or None.

    lm-eval writes the task's ``doc_to_target``: an index (``2``, ``"2"``) or
    the text of the right choice (COPA's ``" the cook grilled it."``), which it
    finds among the choices itself (``choices.index(gold)``). A choice's
    continuation in ``arguments`` is the task's target delimiter followed by
    the choice, so a text names the one continuation equal to it once the
    surrounding whitespace is set aside.
    """
    try:
        return int(gold)
    except (TypeError, ValueError):
        pass
    if not isinstance(gold, str) or not gold.strip() or continuations is None:
        return None
    hits = [i for i, c in enumerate(continuations) if c.strip() == gold.strip()]
    return hits[0] if len(hits) == 1 else None


def _pair_keys(docs: Sequence[_Doc]) -> list[Any]:
    """What pairs a clean task's documents with its twin's: ``doc_hash``, else ``doc_id``.

    A hash that several documents of the task share (a repeated question) pairs
    by hash and ``doc_id`` together, so repeats stay apart.
    """
    count = Counter(d.doc_hash for d in docs if d.doc_hash is not None)
    return [
        d.doc_id if d.doc_hash is None
        else d.doc_hash if count[d.doc_hash] == 1
        else (d.doc_hash, d.doc_id)
        for d in docs
    ]  # fmt: skip


def _generated(resps: Any) -> str | None:
    """The first generation in ``resps`` (``[[text]]`` or ``[text]``)."""
    while isinstance(resps, list) and resps:
        resps = resps[0]
    return resps if isinstance(resps, str) else None


@dataclass(frozen=True)
class _Doc:
    """One line of a samples file, checked."""

    line: int
    doc_id: int
    doc_hash: str | None
    record: Mapping[str, Any]


class _Reader:
    def __init__(
        self,
        *,
        metric: tuple[str, ...],
        filter_name: str | None,
        threshold: float,
        attacked_tasks: Mapping[str, str],
    ) -> None:
        self.metric = metric
        self.filter = filter_name
        self.threshold = threshold
        self.attacked = dict(attacked_tasks)
        self.twins = {v: k for k, v in self.attacked.items()}
        self.book = CaseBook()
        self.hash_of_case: dict[str, str | None] = {}
        #: task → the doc_ids of one run that share a doc_hash (in any run)
        self.repeats: dict[str, set[tuple[int, ...]]] = {}
        self.rows: list[dict[str, Any]] = []
        self.published: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.run_ids: dict[str, str] = {}
        self.tasks_seen: set[str] = set()
        self.filters_seen: set[str] = set()

    def _note(self, text: str) -> None:
        self.notes.append(text)
        warn(text, EvalLogWarning)

    # ------------------------------------------------------------ reading

    def _docs(self, path: Path) -> Iterator[_Doc]:
        for lineno, rec in iter_jsonl(path):
            at = f"{path}:{lineno}"
            doc_id = rec.get("doc_id")
            if isinstance(doc_id, bool) or not isinstance(doc_id, int) or doc_id < 0:
                raise InputFormatError(
                    f"{at}: field 'doc_id' must be an integer >= 0, got {json_kind(doc_id)} "
                    f"{doc_id!r}"
                )
            h = rec.get("doc_hash")
            if h is not None and not (isinstance(h, str) and h):
                raise InputFormatError(f"{at} (doc_id {doc_id}): field 'doc_hash' must be a string")
            yield _Doc(lineno, doc_id, h, rec)

    def _filtered(self, path: Path, task: str) -> list[_Doc]:
        """The documents of one filter: the only one, or the chosen ``filter``."""
        docs = list(self._docs(path))
        filters: dict[str, None] = {}
        for d in docs:
            filters.setdefault(str(d.record.get("filter", "none")))
        self.filters_seen.update(filters)
        if len(filters) > 1:
            if self.filter is None or self.filter not in filters:
                what = "choose one with --filter NAME" if self.filter is None else (
                    f"no filter {self.filter!r}"
                )  # fmt: skip
                raise InputFormatError(
                    f"{path}: task {task!r} scores each document under {len(filters)} filters "
                    f"({', '.join(filters)}); {what}"
                )
            docs = [d for d in docs if str(d.record.get("filter", "none")) == self.filter]
        seen: dict[int, int] = {}
        for d in docs:
            if d.doc_id in seen:
                raise InputFormatError(
                    f"{path}:{d.line}: a second record for doc_id {d.doc_id} (the first is on "
                    f"line {seen[d.doc_id]})"
                )
            seen[d.doc_id] = d.line
        return docs

    def _metric(self, path: Path, task: str, docs: Sequence[_Doc]) -> str:
        listed: list[str] = []
        for d in docs[:1]:
            names = d.record.get("metrics")
            if isinstance(names, list):
                listed = [str(n) for n in names]
        present = [m for m in listed if m in docs[0].record] if docs else []
        if not present and docs:
            present = [m for m in _DEFAULT_METRICS if m in docs[0].record]
        if self.metric:
            first = docs[0].record if docs else {}
            for m in self.metric:
                if m in first:
                    return m
            wanted = " or ".join(repr(m) for m in self.metric)
            raise InputFormatError(
                f"{path}:{docs[0].line if docs else 1}: task {task!r} has no metric {wanted} "
                f"(its metrics: {', '.join(present) or 'none'})"
            )
        for m in _DEFAULT_METRICS:
            if m in present:
                return m
        if present:
            return present[0]
        raise InputFormatError(
            f"{path}:{docs[0].line if docs else 1}: no metric field on the records of task "
            f"{task!r} (name one with --metric)"
        )

    # ------------------------------------------------------------ mapping

    def _case_id(self, task: str, doc: _Doc, changed: list[int]) -> str:
        """The case of a document: ``<task>/<doc_id>``, shared by every run that saw it.

        ``doc_hash`` checks that another run's document under the same id is the
        same document; one that is not is kept apart (``<task>/<doc_id>#<hash>``)
        and its id added to ``changed``. Two documents of one run are never one
        case, even when lm-eval hashes them alike (MMLU repeats questions).
        """
        cid = f"{task}/{doc.doc_id}"
        if cid in self.hash_of_case and self.hash_of_case[cid] != doc.doc_hash:
            changed.append(doc.doc_id)
            cid = f"{task}/{doc.doc_id}#{(doc.doc_hash or 'nohash')[:12]}"
        self.hash_of_case.setdefault(cid, doc.doc_hash)
        return cid

    def _note_changed(self, path: Path, task: str, changed: Sequence[int]) -> None:
        if not changed:
            return
        ids = ", ".join(str(i) for i in changed[:_LISTED]) + (
            ", …" if len(changed) > _LISTED else ""
        )
        self._note(
            f"{path}: task {task!r}: {len(changed)} doc_id(s) name a different document "
            f"(doc_hash) from the one another run saw under the same id (doc_id {ids}); "
            f"kept apart as <task>/<doc_id>#<doc_hash>, so they pair with no other run"
        )

    def _repeats(self, task: str, docs: Sequence[_Doc]) -> None:
        """Keep the doc_ids of one run's task that share a doc_hash (a repeated document)."""
        ids: dict[str, list[int]] = {}
        for d in docs:
            if d.doc_hash is not None:
                ids.setdefault(d.doc_hash, []).append(d.doc_id)
        for same in ids.values():
            if len(same) > 1:
                self.repeats.setdefault(task, set()).add(tuple(sorted(same)))

    def _note_repeats(self) -> None:
        """One note per task whose documents repeat under other doc_ids (same doc_hash)."""
        for task in sorted(self.repeats):
            merged: list[set[int]] = []  # runs with different --limit see parts of a group
            for group in self.repeats[task]:
                hit = [m for m in merged if m & set(group)]
                merged = [m for m in merged if not m & set(group)] + [set(group).union(*hit)]
            same = sorted(sorted(m) for m in merged)
            count = sum(len(ids) - 1 for ids in same)
            pairs = "; ".join(
                ", ".join(str(i) for i in ids[1:]) + f" = {ids[0]}" for ids in same[:_LISTED]
            ) + ("; …" if len(same) > _LISTED else "")  # fmt: skip
            self._note(
                f"task {task!r}: {count} document(s) repeat another document of the task (same "
                f"doc_hash, other doc_id: {pairs}); each doc_id is a case of its own"
            )

    def _answer(self, doc: _Doc, metric: str, at: str) -> dict[str, Any]:
        """Options, expected answer, decision, raw text of one document."""
        rec = doc.record
        filtered = rec.get("filtered_resps")
        target = rec.get("target")
        if filtered is not None and not isinstance(filtered, list):
            raise InputFormatError(
                f"{at}: field 'filtered_resps' must be a list (one answer per request), "
                f"not {json_kind(filtered)}"
            )
        for t in target if isinstance(target, list) else [target]:
            if isinstance(t, dict | list):
                raise InputFormatError(
                    f"{at}: field 'target' must be a text, a number or a list of them, "
                    f"not one holding {json_kind(t)}"
                )
        choice = _choice_answers(filtered)
        if choice is not None:
            conts = _continuations(rec.get("arguments"))
            n = len(choice)
            options = [c.strip() for c in conts] if conts and len(conts) == n else []
            if len(set(options)) != n or "" in options:
                options = [str(i) for i in range(n)]
            gold = target[0] if isinstance(target, list) and target else target
            g = _gold_index(gold, conts if conts and len(conts) == n else None)
            if g is None:
                raise InputFormatError(
                    f"{at}: field 'target' must be the index or the text of the right choice, "
                    f"got {target!r}"
                )
            if not 0 <= g < n:
                raise InputFormatError(f"{at}: field 'target' {g} is not one of {n} choices")
            ll = [float(r[0]) for r in choice]
            if metric == "acc_norm" and conts and len(conts) == n:
                ll = [x / max(len(c), 1) for x, c in zip(ll, conts, strict=True)]
            pick = max(range(n), key=lambda i: (ll[i], -i))  # first maximum, as numpy.argmax
            return {
                "options": options,
                "expected": options[g],
                "decision": options[pick],
                "raw_text": None,
                "kind": "multiple_choice",
            }
        targets = target if isinstance(target, list) else [target]
        accepted = [str(t) for t in targets if t is not None]
        options = option_list(accepted)
        answer = _generated(filtered)
        if answer is None and isinstance(filtered, list) and filtered:
            answer = json_text(filtered[0]) if not isinstance(filtered[0], str) else filtered[0]
        return {
            "options": options,
            "expected": options[0],
            "decision": answer if answer is not None else OTHER,
            "raw_text": _generated(rec.get("resps")),
            "kind": "generate",
        }

    def _row(
        self,
        doc: _Doc,
        metric: str,
        path: Path,
        *,
        ident: Mapping[str, Any],
        case_id: str,
        arm: str,
        task: str,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        at = f"{path}:{doc.line} (doc_id {doc.doc_id})"
        rec = doc.record
        value = number(rec.get(metric))
        if value is None:
            raise InputFormatError(
                f"{at}: field {metric!r} must be a number or a boolean, got "
                f"{json_kind(rec.get(metric))} {rec.get(metric)!r}"
            )
        if not 0.0 <= value <= 1.0:
            raise InputFormatError(
                f"{at}: field {metric!r} is {value}; a verdict needs a score in [0, 1]"
            )
        ans = self._answer(doc, metric, at)
        names = rec.get("metrics")
        listed = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
        row: dict[str, Any] = {
            **ident,
            "case_id": case_id,
            "arm": arm,
            "sample": 0,
            "decision": ans["decision"],
            "abstained": False,
            "refusal_reason": None,
            "malformed": False,
            "error": None,
            "raw_text": ans["raw_text"],
            **verdict_columns(value, self.threshold, f"lm-eval/{task}/{metric}"),
            "filtered_resps": json_text(rec.get("filtered_resps")),
            "extras": extras_json(
                {
                    "doc_id": doc.doc_id,
                    "filter": rec.get("filter"),
                    "metrics": {m: rec.get(m) for m in listed if m in rec},
                    "prompt_hash": rec.get("prompt_hash"),
                    "target_hash": rec.get("target_hash"),
                }
            ),
        }
        return row, ans

    # ------------------------------------------------------------ runs

    def read_run(self, run: _Run) -> None:
        results: Mapping[str, Any] | None = None
        if run.results is not None:
            loaded = load_json_file(run.results)
            if not isinstance(loaded, Mapping):
                raise InputFormatError(f"{run.results}: expected a JSON object")
            check_results(loaded, run.results)
            results = loaded
        else:
            self._note(
                f"{run.directory}: no results_{run.stamp}.json beside the sample files; "
                "no published figures, no groups, model named after the directory"
            )
        model = model_name(results, run.directory.name)
        run_id = f"{model}@{run.stamp}"
        where = str(run.results or next(iter(run.samples.values())))
        if run_id in self.run_ids:
            raise InputFormatError(
                f"{where}: run {run_id!r} was already read from {self.run_ids[run_id]}"
            )
        self.run_ids[run_id] = where
        chains = groups(results)
        self.tasks_seen.update(run.samples)
        for clean, perturbed in self.attacked.items():
            if (clean in run.samples) != (perturbed in run.samples):
                have, missing = (clean, perturbed) if clean in run.samples else (perturbed, clean)
                raise InputFormatError(
                    f"{run.samples[have]}: task {have!r} is paired with {missing!r} "
                    f"(--attacked-task), which this run has no samples of"
                )
        version = results.get("versions", {}) if results else {}
        clean_ident = {"run_id": run_id, "model": model, "model_version": model, "arms": "benign"}
        paired_id = f"{run_id}+attacked"
        both_ident = {**clean_ident, "run_id": paired_id, "arms": "both"}
        metrics_used: dict[str, str] = {}
        filters_used: dict[str, str] = {}
        for task, path in sorted(run.samples.items()):
            if task in self.twins:
                continue  # read with its clean task
            docs = self._filtered(path, task)
            metric = self._metric(path, task, docs)
            metrics_used[task] = metric
            filters_used[task] = str(docs[0].record.get("filter", "none")) if docs else "none"
            chain = chains.get(task, [])
            twin: str | None = self.attacked.get(task)
            ident = both_ident if twin else clean_ident
            twin_docs: dict[Any, _Doc] = {}
            if twin is not None:
                tpath = run.samples[twin]
                tlist = self._filtered(tpath, twin)
                tmetric = self._metric(tpath, twin, tlist)
                metrics_used[twin] = tmetric
                filters_used[twin] = str(tlist[0].record.get("filter", "none")) if tlist else "none"
                twin_docs = {k: d for k, d in zip(_pair_keys(tlist), tlist, strict=True)}
                keys = set(_pair_keys(docs))
                extra = [d for k, d in twin_docs.items() if k not in keys]
                if extra:
                    raise InputFormatError(
                        f"{tpath}:{extra[0].line}: doc_id {extra[0].doc_id} of the perturbed task "
                        f"{twin!r} has no document in {task!r} (twins pair on the same documents)"
                    )
            self._repeats(task, docs)
            changed: list[int] = []
            for d, key in zip(docs, _pair_keys(docs), strict=True):
                cid = self._case_id(task, d, changed)
                row, ans = self._row(
                    d, metric, path, ident=ident, case_id=cid, arm="benign", task=task
                )
                self._add_case(task, d, cid, ans, chain, version.get(task), path)
                self._add_variant(cid, "benign", d, ans)
                self.rows.append(row)
                if twin is not None:
                    t = twin_docs.get(key)
                    if t is None:
                        raise InputFormatError(
                            f"{path}:{d.line}: doc_id {d.doc_id} has no document in the perturbed "
                            f"task {twin!r} (twins pair on the same documents)"
                        )
                    trow, tans = self._row(
                        t, metrics_used[twin], run.samples[twin], ident=ident, case_id=cid,
                        arm="attacked", task=twin,
                    )  # fmt: skip
                    if tans["expected"] != ans["expected"] or tans["options"] != ans["options"]:
                        raise InputFormatError(
                            f"{run.samples[twin]}:{t.line} (doc_id {t.doc_id}): field 'target' "
                            f"gives {tans['expected']!r} among {tans['options']}, the clean task "
                            f"{ans['expected']!r} among {ans['options']}; twins share the answer"
                        )
                    self._add_variant(cid, "attacked", t, tans)
                    self.rows.append(trow)
            self._note_changed(path, task, changed)
        if results is not None:
            self.published += published_rows(
                results, path=run.results, stamp=run.stamp, tasks=run.samples, run_id=run_id,
                paired_id=paired_id, metrics=metrics_used, filters=filters_used,
                attacked=self.attacked,
            )  # fmt: skip
            unsampled = tasks_without_samples(results, run.samples)
            if unsampled:
                self._note(
                    f"{run.results}: {len(unsampled)} task(s) scored in the results file have no "
                    f"samples_<task>_{run.stamp}.jsonl beside it, so neither their documents nor "
                    f"their figures are imported: {', '.join(unsampled)}"
                )
        credit = {
            r["verdict_score"]
            for r in self.rows
            if r["run_id"] in (run_id, paired_id) and 0.0 < r["verdict_score"] < 1.0
        }
        if credit:
            self._note(
                f"{where}: metric values between 0 and 1 ({len(credit)} distinct); an answer "
                f"counts as correct from {self.threshold:g} on, so Peira's accuracy can differ "
                "from lm-eval's mean"
            )

    def _add_case(
        self,
        task: str,
        d: _Doc,
        cid: str,
        ans: Mapping[str, Any],
        chain: list[str],
        version: Any,
        path: Path,
    ) -> None:
        self.book.add_case(
            {
                "case_id": cid,
                "scenario_id": cid,
                "split": "public",
                "suite": chain[-1] if chain else task,
                "family": task,
                "primitive": "choice",
                "severity": None,
                "options": ans["options"],
                "expected_decision": ans["expected"],
                "positive_decision": None,
                "target_decision": None,
                "expected_score": None,
                "dataset_version": f"lm-eval:{task}/v{version if version is not None else '?'}",
                "extras": extras_json(
                    {
                        "lm_eval": {
                            "doc_id": d.doc_id,
                            "doc_hash": d.doc_hash,
                            "doc": d.record.get("doc"),
                            "target": d.record.get("target"),
                            "groups": chain,
                        }
                    }
                ),
            },
            f"{path}:{d.line}",
        )

    def _add_variant(self, cid: str, arm: str, d: _Doc, ans: Mapping[str, Any]) -> None:
        prompt = _prompt(d.record.get("arguments")) or ""
        self.book.add_variant(
            {
                "case_id": cid,
                "arm": arm,
                "prompt": prompt,
                "options": ans["options"],
                "input": json_text(
                    {"arguments": d.record.get("arguments"), "doc": d.record.get("doc")}
                ),
            }
        )

    def result(self, source: str) -> Imported:
        # an option that matched nothing is a mistake, not a no-op
        known = ", ".join(sorted(self.tasks_seen)) or "none"
        for clean, twin in self.attacked.items():
            if clean not in self.tasks_seen:
                raise InputFormatError(
                    f"{source}: attacked task pairing {clean}={twin}: no run has samples of "
                    f"task {clean!r} (tasks: {known})"
                )
        if self.filter is not None and self.filter not in self.filters_seen:
            have = ", ".join(sorted(self.filters_seen)) or "none"
            raise InputFormatError(f"{source}: no filter {self.filter!r} in the samples ({have})")
        self._note_repeats()
        return bundle(self.book, self.rows, self.published, self.notes, source)


def read_lm_eval(
    inputs: Sequence[PathLike],
    *,
    metric: str | Sequence[str] | None = None,
    filter_name: str | None = None,
    threshold: float = 1.0,
    attacked_tasks: Mapping[str, str] | None = None,
) -> Imported:
    """Read lm-evaluation-harness outputs into Peira's tables (mapping: module docstring).

    Parameters
    ----------
    inputs
        Output directories (searched recursively), ``results_<time>.json``
        files or ``samples_<task>_<time>.jsonl`` files; a file brings the other
        files of its run (same directory and time stamp) along.
    metric
        The per-document metric that is the verdict (``acc``, ``acc_norm``,
        ``exact_match`` …), or several in order of preference (each task uses
        the first it has; a task with none of them is an error); default
        ``acc``, else ``exact_match``, else the first metric the records list.
    filter_name
        The filter whose records to read, for tasks that score each document
        under several (gsm8k's ``strict-match`` / ``flexible-extract``).
    threshold
        A metric value from this on counts as correct (default 1).
    attacked_tasks
        ``{clean task: perturbed twin}``: the twin's answers on the same
        documents are the attacked arm of the clean task's cases.

    Returns
    -------
    Imported
        ``cases``, ``variants``, ``responses``, ``published`` and the notes,
        validated against the data model; :meth:`Imported.write` writes them.

    Raises
    ------
    DataFileError
        An input does not exist.
    InputFormatError
        No sample files, invalid JSON, a record breaking the format (missing
        ``doc_id``, a metric that is no number in [0, 1], several filters and
        none chosen, an unmatched twin document …); the message names the file,
        the line and the field.

    Warns
    -----
    EvalLogWarning
        A run without its results file, tasks of the results file without a
        samples file, a document that differs between runs under the same id,
        documents of a task that repeat another (same ``doc_hash``), metric
        values between 0 and 1.
    """
    attacked = dict(attacked_tasks or {})
    for clean, twin in attacked.items():
        if not clean or not twin or clean == twin:
            raise InputFormatError(
                f"attacked task pairing {clean!r}={twin!r}: give CLEAN=PERTURBED, two different tasks"
            )
    wanted = (metric,) if isinstance(metric, str) else tuple(metric or ())
    reader = _Reader(
        metric=wanted,
        filter_name=filter_name,
        threshold=check_threshold(threshold),
        attacked_tasks=attacked,
    )
    with no_gc():
        for run in _discover(inputs):
            reader.read_run(run)
        return reader.result(f"{Path(inputs[0])} (lm-eval import)")
