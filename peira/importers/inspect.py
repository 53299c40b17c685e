"""Inspect eval logs (``.eval`` and ``.json``) → cases, variants, responses, published figures.

Logs are read by Peira's own reader (:mod:`peira.importers._inspect_log`), which
streams the samples and keeps only the fields mapped here; a log it does not
know (another format version, a shape outside Inspect's schema) is read through
``inspect_ai.log.read_eval_log`` (``pip install 'peira[inspect]'``), with a
note. Both give the same objects to one mapping (docs/spec/eval-logs.md,
"Inspect logs"):

- each log is a run: ``run_id`` = ``<model>:<task>@<eval id>`` (the first eight
  characters of the eval id), ``model`` = the log's model,
  ``model_version`` = the model name the provider reported in the outputs;
- each sample is a case (``<task>/<sample id>``, family = the task), each
  epoch a repeated sample (``sample`` = epoch − 1);
- the sample's input and choices are the variant; the output is the response
  (``raw_text`` = the completion, ``decision`` = the scorer's extracted answer,
  else the completion);
- the value of the chosen scorer is the verdict: Inspect's ``value_to_float``
  turns C/I/P/N, booleans and numbers into a score in [0, 1]
  (``verdict_score``), correct when it reaches ``threshold`` (default 1: partial
  credit is not full credit); a scorer whose value is a dictionary (AgentHarm's
  ``{score, refusal}``) gives the entry ``score_key`` names, and the whole
  value is kept; the other scorers' values, the scorer's explanation and the
  sample metadata are kept in ``extras``;
- a sample that failed (``error``) or has no value from the scorer is a
  malformed answer; a provider refusal (stop reason ``content_filter``) or a
  scorer's "no answer" (``N``) is an abstention;
- when a log has several scorers, each is a judge (docs/spec/judges.md),
  ``inspect/<scorer>`` like the ``verdict_source`` of its decisions: its
  verdict on every sample that did not fail is a row of the **judgements**
  table: the expected answer when its value reaches ``threshold``; when it
  does not, the scorer's answer if that is another option, else the only
  other option (``<other>`` of a free-text item); ``undetermined`` when it
  gave no value, the value ``N``, or a wrong answer among several options
  none of which it names. A scorer whose values are not single values
  (a dictionary score other than the chosen ``score_key``) is no judge. The
  chosen scorer (``scorer``) still gives the decision and the verdict.

Without pairing options every run is clean-only (``arms = "benign"``). Pairs of
benign and attacked samples come either from sample metadata (``pair_by`` names
the field shared by the two samples of a pair, ``arm_field`` the field whose
value is ``benign`` or ``attacked``) or from two logs of the same model
(``pairs=[(benign_log, attacked_log)]``, samples matched by id and epoch).

For a log that finished (status ``success``) the header's accuracy and standard
error of the scorer become ``published`` rows (``benign_accuracy``, or
``accuracy_under_attack`` for an attacked log). A cancelled or errored log, or
one holding fewer samples than it planned (the dataset's samples after
``--limit``/``--sample-id``, times the epochs), contributes the samples it
holds, with a warning, no published figure and a row of the ``runs`` table
(status, samples held, samples planned), which ``validate``, ``score`` and
``leaderboard`` show.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from ..errors import DataFileError, InputFormatError, warn
from ..schema import JUDGEMENTS_SCHEMA, UNDETERMINED
from . import _inspect_log as _direct
from ._bundle import Imported
from ._evallog import (
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

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

__all__ = ["read_inspect"]

PathLike = str | os.PathLike[str]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _inspect_log() -> Any:
    try:
        import inspect_ai.log as ilog
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise InputFormatError(
            "reading Inspect logs needs inspect_ai: pip install 'peira[inspect]'"
        ) from exc
    return ilog


#: Which reader opens a log: ``auto`` (Peira's own, else Inspect's for a log it does
#: not know), ``direct`` (Peira's own only), ``inspect_ai`` (``read_eval_log``).
ENGINES = ("auto", "direct", "inspect_ai")


def _read_log(path: PathLike, engine: str = "auto", notes: list[str] | None = None) -> EvalLog:
    p = Path(path)
    if not p.exists():
        raise DataFileError(f"{p}: no such file")
    if p.is_dir():
        raise DataFileError(f"{p}: is a directory, expected an Inspect log (.eval or .json)")
    if p.suffix not in (".eval", ".json"):
        raise InputFormatError(f"{p}: not an Inspect log (expected a .eval or .json file)")
    log: Any = None
    if engine != "inspect_ai":
        try:
            log = _direct.read_log(p)
        except _direct.Unsupported as exc:
            if engine == "direct":
                raise InputFormatError(f"{p}: not a log Peira's reader knows: {exc}") from exc
            if notes is not None:
                notes.append(
                    f"{p}: read through inspect_ai's read_eval_log ({exc}: not a log "
                    "Peira's own reader knows)"
                )
    if log is None:
        log = _read_with_inspect(p)
    if log.samples is None:
        raise InputFormatError(f"{p}: the log holds no samples (written with log_samples=False?)")
    if not log.samples:
        status = getattr(log, "status", None)
        raise InputFormatError(
            f"{p}: the log holds no samples (status {status!r}: a run stopped before its first "
            "sample?); there is nothing to import from it"
        )
    return cast("EvalLog", log)


def _read_with_inspect(p: Path) -> EvalLog:
    ilog = _inspect_log()
    try:
        return cast("EvalLog", ilog.read_eval_log(str(p)))
    except RecursionError as exc:  # nesting deeper than the JSON decoder follows
        raise InputFormatError(f"{p}: not a readable Inspect log: JSON nested too deep") from exc
    except Exception as exc:  # Inspect raises zip, JSON and pydantic errors alike
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputFormatError(f"{p}: not a readable Inspect log: {first}") from exc


def _text(content: Any) -> str:
    """The text of a sample input: a string, or its chat messages as ``role: text`` lines."""
    if isinstance(content, str):
        return content
    return "\n\n".join(f"{m.role}: {m.text}" for m in content)


def _input_json(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [{"role": m.role, "content": m.text} for m in content]


def _targets(target: Any) -> list[str]:
    if isinstance(target, str):
        return [target]
    return [str(t) for t in target]


def _where(path: Path, sample: EvalSample) -> str:
    return f"{path}: sample {sample.id!r} (epoch {sample.epoch})"


def _scorer_name(log: EvalLog, path: Path, scorer: str | None) -> str:
    """The scorer whose value is the verdict: ``scorer``, or the log's only one."""
    names: list[str] = []
    for s in log.samples or []:
        for k in s.scores or {}:
            if k not in names:
                names.append(k)
    if not names and log.results is not None:
        # no sample scored: the header's scorers (a dictionary score's per-key
        # figures are named after the key, their scorer is the scorer)
        for score in log.results.scores:
            if score.scorer not in names:
                names.append(score.scorer)
    if scorer is not None:
        if scorer not in names:
            raise InputFormatError(
                f"{path}: no scorer {scorer!r} in this log (scorers: {', '.join(names) or 'none'})"
            )
        return scorer
    if not names:
        raise InputFormatError(f"{path}: the log has no scores (was it run with a scorer?)")
    if len(names) > 1:
        raise InputFormatError(
            f"{path}: the log has {len(names)} scorers ({', '.join(names)}); "
            "choose the verdict with --scorer NAME"
        )
    return names[0]


@dataclass(frozen=True)
class _Item:
    """What defines a case: its options, expected answer, labels kept in extras."""

    options: list[str]
    expected: str
    extras: dict[str, Any]


def _item(sample: EvalSample, where: str) -> _Item:
    targets = _targets(sample.target)
    extras: dict[str, Any] = {"target": sample.target}
    if sample.choices:
        n = len(sample.choices)
        if n > len(_LETTERS):
            raise InputFormatError(f"{where}: field 'choices': {n} choices, at most 26 supported")
        letters = list(_LETTERS[:n])
        bad = [t for t in targets if t not in letters]
        if bad or not targets:
            raise InputFormatError(
                f"{where}: field 'target': {sample.target!r} is not a choice letter "
                f"({', '.join(letters)})"
            )
        extras["choices"] = list(sample.choices)
        return _Item(letters, targets[0], extras)
    options = option_list(targets)
    return _Item(options, options[0], extras)


@dataclass(frozen=True)
class _Options:
    scorer: str | None
    threshold: float
    cluster_by: str | None
    score_key: str | None = None


def _meta(sample: EvalSample, field: str, where: str) -> str:
    md = sample.metadata or {}
    if field not in md:
        raise InputFormatError(f"{where}: metadata has no field {field!r}")
    value = md[field]
    if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
        raise InputFormatError(
            f"{where}: metadata field {field!r} must be a non-empty string or integer, "
            f"got {value!r}"
        )
    return str(value)


def _value(raw: Any, scorer: str, score_key: str | None, where: str) -> Any:
    """The verdict value of a score: the value itself, or its ``score_key`` entry."""
    if isinstance(raw, Mapping):
        keys = ", ".join(map(str, raw)) or "none"
        if score_key is None:
            raise InputFormatError(
                f"{where}: scorer {scorer!r}: value {raw!r} is a dictionary (keys: {keys}); "
                "choose the entry that is the verdict with --score-key KEY"
            )
        if score_key not in raw:
            raise InputFormatError(
                f"{where}: scorer {scorer!r}: no key {score_key!r} in the score "
                f"(keys: {keys}); --score-key names one of them"
            )
        raw = raw[score_key]
    elif score_key is not None and raw is not None:
        raise InputFormatError(
            f"{where}: scorer {scorer!r}: value {raw!r} is not a dictionary, so it has no "
            f"key {score_key!r} (--score-key is for dictionary-valued scores)"
        )
    if isinstance(raw, Mapping | list | tuple):
        raise InputFormatError(
            f"{where}: scorer {scorer!r}: value {raw!r} is not a single value; "
            "a verdict needs one value (C/I/P/N, a boolean or a number)"
        )
    return raw


def _response(
    sample: EvalSample,
    *,
    scorer: str,
    threshold: float,
    where: str,
    score_key: str | None = None,
) -> dict[str, Any]:
    """The response row of one sample: decision, verdict, usage, extras."""
    to_float = _to_float()
    output = sample.output
    completion = output.completion if output is not None else ""
    scores = sample.scores or {}
    score = scores.get(scorer)
    row: dict[str, Any] = {
        "decision": None,
        "abstained": False,
        "refusal_reason": None,
        "malformed": False,
        "error": None,
        "raw_text": completion if completion else None,
        "latency_ms": None,
        "tokens_in": None,
        "tokens_out": None,
        "cost_usd": None,
    }
    if output is not None and output.usage is not None:
        row["tokens_in"] = output.usage.input_tokens
        row["tokens_out"] = output.usage.output_tokens
        row["cost_usd"] = output.usage.total_cost
    if output is not None and output.time is not None:
        row["latency_ms"] = float(output.time) * 1000.0
    value: float | None = None
    raw: Any = None
    if score is not None:
        raw = _value(score.value, scorer, score_key, where)
        value = to_float(raw)
        if not (0.0 <= value <= 1.0):
            raise InputFormatError(
                f"{where}: scorer {scorer!r}: value {raw!r} maps to {value}, outside [0, 1]"
            )
    if sample.error is not None:
        row.update(malformed=True, error=f"error: {sample.error.message}")
        value = None
    elif score is None:
        row.update(malformed=True, error=f"no value from scorer {scorer!r}")
    elif _stop_reason(output) == "content_filter":
        row.update(abstained=True, refusal_reason="content_filter")  # a provider refusal
    elif raw == "N":
        row.update(abstained=True)  # the scorer found no answer
    else:
        row["decision"] = score.answer if score.answer is not None else completion
    row.update(verdict_columns(value, threshold, f"inspect/{scorer}"))
    others = {k: v.value for k, v in scores.items() if k != scorer}
    row["extras"] = extras_json(
        {
            "epoch": sample.epoch,
            "value": score.value if score is not None and score_key is not None else None,
            "answer": score.answer if score is not None else None,
            "explanation": score.explanation if score is not None else None,
            "scores": others,
            "stop_reason": _stop_reason(output),
            "limit": sample.limit.type if sample.limit is not None else None,
        }
    )
    return row


def _scalar(raw: Any) -> bool:
    return raw is None or not isinstance(raw, Mapping | list | tuple)


def _panel(log: EvalLog, scorer: str) -> tuple[list[str], list[str]]:
    """The judges of a log: ``scorer`` (the chosen one, read as its verdict is) and every
    other scorer whose every value is a single value in [0, 1]; and the scorers left out."""
    to_float = _to_float()
    names: list[str] = [scorer]
    for smp in log.samples or []:
        for k in smp.scores or {}:
            if k not in names:
                names.append(k)
    judges: list[str] = [scorer]
    left_out: list[str] = []
    for name in names[1:]:
        values = [
            smp.scores[name].value for smp in log.samples or [] if smp.scores and name in smp.scores
        ]
        ok = all(_scalar(v) for v in values) and all(
            v is None or v == "N" or 0.0 <= to_float(v) <= 1.0 for v in values
        )
        (judges if ok else left_out).append(name)
    return judges, left_out


def _judgement(
    sample: EvalSample,
    scorer: str,
    item: _Item,
    threshold: float,
    score_key: str | None,
) -> str | None:
    """A scorer's verdict on a sample as one of the item's options, ``undetermined``, or
    None (the sample failed: there is no answer to judge)."""
    if sample.error is not None:
        return None
    score = (sample.scores or {}).get(scorer)
    if score is None:
        return UNDETERMINED
    raw: Any = score.value
    if score_key is not None and isinstance(raw, Mapping):
        raw = raw.get(score_key)
    if raw is None or raw == "N" or not _scalar(raw):
        return UNDETERMINED
    value = _to_float()(raw)
    if not 0.0 <= value <= 1.0:
        return UNDETERMINED
    if value >= threshold:
        return item.expected
    answer = score.answer
    if answer in item.options and answer != item.expected:
        return str(answer)
    others = [o for o in item.options if o != item.expected]
    return others[0] if len(others) == 1 else UNDETERMINED


def _to_float() -> Any:
    """Inspect's own mapping of score values (C/I/P/N, bools, numbers) to [0, 1]: its
    default ``value_to_float()``, restated (tests check it against Inspect's)."""
    return _direct.value_to_float


def _stop_reason(output: Any) -> str | None:
    """The output's stop reason (None for an output without choices, e.g. a failed call)."""
    if output is None or not output.choices:
        return None
    return str(output.stop_reason)


def _model_version(log: EvalLog) -> str:
    """The model name the provider reported most often, else the log's model."""
    seen = Counter(
        s.output.model for s in log.samples or [] if s.output is not None and s.output.model
    )
    return seen.most_common(1)[0][0] if seen else log.eval.model


def _planned(log: EvalLog) -> int | None:
    """The samples the run set out to produce: its sample ids (the dataset after
    ``--limit`` and ``--sample-id``) times the epochs; None when the log does not say."""
    ds, cfg = log.eval.dataset, log.eval.config
    if ds.sample_ids is not None:
        n = len(ds.sample_ids)
    elif ds.samples is not None:
        n = ds.samples
        if isinstance(cfg.limit, int):
            n = min(n, cfg.limit)
        elif isinstance(cfg.limit, tuple | list) and len(cfg.limit) == 2:
            n = max(0, min(n, cfg.limit[1]) - cfg.limit[0])
    else:
        return None
    return n * (cfg.epochs or 1)


def _unfinished(log: EvalLog, path: Path, run_id: str, held: int) -> dict[str, Any] | None:
    """The ``runs`` row of a log that did not finish or holds fewer samples than planned."""
    planned = _planned(log)
    if log.status == "success" and (planned is None or held >= planned):
        return None
    return {
        "run_id": run_id,
        "status": str(log.status),
        "samples": held,
        "planned": planned,
        "source": path.name,
    }


def _status_note(log: EvalLog, path: Path, held: int) -> str | None:
    planned = _planned(log)
    if log.status == "success":
        if planned is None or held >= planned:
            return None
        return (
            f"{path}: the log holds {held} of the {planned} sample(s) it planned; "
            "the run is marked partial"
        )
    header = ""
    if log.results is not None and log.results.scores:
        parts = [
            f"{s.name} {m.name} {m.value:.4g} over {s.scored_samples}"
            for s in log.results.scores
            for m in s.metrics.values()
            if m.name == "accuracy"
        ]
        if parts:
            header = f"; its partial header ({'; '.join(parts)}) is not carried over"
    of = f" of {planned} planned" if planned is not None else ""
    return (
        f"{path}: the run did not finish (status {log.status}): imported the {held} "
        f"sample(s) it holds{of}, no published figure{header}"
    )


def _published(
    log: EvalLog,
    path: Path,
    scorer: str,
    run_id: str,
    metric: str,
    score_key: str | None = None,
) -> list[dict[str, Any]]:
    """The header's accuracy and standard error of ``scorer`` (finished logs only).

    With ``score_key``, the figures Inspect reports for that entry of a
    dictionary score (its score named after the key, of this scorer): its
    ``accuracy`` or ``mean``, both the mean of the values.
    """
    if log.status != "success" or log.results is None:
        return []
    names: tuple[str, ...] = ("accuracy",) if score_key is None else ("accuracy", "mean")
    for s in log.results.scores:
        if score_key is None and s.name != scorer:
            continue
        if score_key is not None and (s.name != score_key or s.scorer != scorer):
            continue
        found = [(n, s.metrics[n]) for n in names if n in s.metrics]
        if not found:
            return []
        name, acc = found[0]
        err = s.metrics.get("stderr")
        what = scorer if score_key is None else f"{scorer}[{score_key}]"
        return [
            {
                "run_id": run_id,
                "family": None,
                "metric": metric,
                "estimate": float(acc.value),
                "stderr": float(err.value) if err is not None else None,
                "n": s.scored_samples,
                "source": f"inspect {log.eval.task} {what} {name} ({path.name})",
            }
        ]
    return []


def _let_go(log: EvalLog) -> Iterator[EvalSample]:
    """The log's samples in order, each dropped from the log once mapped: on a large log
    the samples read and the rows built need not all be held at once."""
    samples = log.samples or []
    samples.reverse()
    while samples:
        yield samples.pop()


class _Reader:
    def __init__(self, options: _Options, engine: str = "auto") -> None:
        self.opt = options
        self.engine = engine
        self.book = CaseBook()
        self.rows: list[dict[str, Any]] = []
        self.published: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.runs: dict[str, str] = {}
        self.unfinished: list[dict[str, Any]] = []
        self.judgements: list[dict[str, Any]] = []
        self.panels: dict[str, list[str]] = {}

    def _load(self, path: Path) -> EvalLog:
        return _read_log(path, self.engine, self.notes)

    def _judges(self, log: EvalLog, path: Path, scorer: str) -> list[str]:
        """The log's judges (``scorer`` first); notes the scorers that are none."""
        judges, left_out = _panel(log, scorer)
        if left_out:
            self.notes.append(
                f"{path}: scorer(s) {', '.join(left_out)} give no single value in [0, 1] "
                "on every sample: not kept as judges"
            )
        return judges

    def _judge(
        self, sample: EvalSample, judges: list[str], where: str, key: dict[str, Any]
    ) -> None:
        """The judgements of every judge of the log on one sample (none when it failed)."""
        item = _item(sample, where)
        for name in judges:
            verdict = _judgement(
                sample,
                name,
                item,
                self.opt.threshold,
                self.opt.score_key if name == judges[0] else None,
            )
            if verdict is not None:
                self.judgements.append({**key, "judge": f"inspect/{name}", "verdict": verdict})

    @property
    def _verdict(self) -> dict[str, Any]:
        return {"threshold": self.opt.threshold, "score_key": self.opt.score_key}

    def _note(self, text: str) -> None:
        self.notes.append(text)
        warn(text, EvalLogWarning)

    def _run_id(self, path: Path, *logs: EvalLog) -> str:
        """``<model>:<task>@<eval id, 8 characters>`` (``+`` the attacked log's, for a pair)."""
        ids = "+".join(log.eval.eval_id for log in logs)
        if ids in self.runs:
            raise InputFormatError(
                f"{path}: eval id {ids!r} was already imported from {self.runs[ids]}"
            )
        self.runs[ids] = str(path)
        first = logs[0].eval
        return f"{first.model}:{first.task}@" + "+".join(log.eval.eval_id[:8] for log in logs)

    def _case(
        self, log: EvalLog, sample: EvalSample, case_id: str, where: str, *, meta: dict[str, Any]
    ) -> None:
        item = _item(sample, where)
        task = log.eval.task
        scenario = case_id
        if self.opt.cluster_by is not None:
            scenario = f"{task}/{_meta(sample, self.opt.cluster_by, where)}"
        self.book.add_case(
            {
                "case_id": case_id,
                "scenario_id": scenario,
                "split": "public",
                "suite": "main",
                "family": task,
                "primitive": "choice",
                "severity": None,
                "options": item.options,
                "expected_decision": item.expected,
                "positive_decision": None,
                "target_decision": None,
                "expected_score": None,
                "dataset_version": f"inspect:{task}/v{log.eval.task_version}",
                "extras": extras_json({"inspect": {**item.extras, **meta}}),
            },
            where,
        )

    def _variant(self, sample: EvalSample, case_id: str, arm: str, where: str) -> None:
        item = _item(sample, where)
        body: dict[str, Any] = {"input": _input_json(sample.input)}
        if sample.choices:
            body["choices"] = list(sample.choices)
        self.book.add_variant(
            {
                "case_id": case_id,
                "arm": arm,
                "prompt": _text(sample.input),
                "options": item.options,
                "input": json_text(body),
            }
        )

    def _identity(self, log: EvalLog, run_id: str, arms: str) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "model": log.eval.model,
            "model_version": _model_version(log),
            "arms": arms,
        }

    def clean(self, path: Path) -> None:
        log = self._load(path)
        scorer = _scorer_name(log, path, self.opt.scorer)
        run_id = self._run_id(path, log)
        ident = self._identity(log, run_id, "benign")
        judges = self._judges(log, path, scorer)
        self.panels[run_id] = judges
        scores = [s.scores for s in log.samples or []]
        for s in _let_go(log):
            where = _where(path, s)
            case_id = f"{log.eval.task}/{s.id}"
            self._case(log, s, case_id, where, meta={"sample_id": s.id, "metadata": s.metadata})
            self._variant(s, case_id, "benign", where)
            row = _response(s, scorer=scorer, where=where, **self._verdict)
            key = {"run_id": run_id, "case_id": case_id, "arm": "benign", "sample": s.epoch - 1}
            self.rows.append({**ident, **key, **row})
            self._judge(s, judges, where, key)
        self._finish(log, path, scorer, run_id, "benign_accuracy", scores)

    def by_metadata(self, path: Path, pair_by: str, arm_field: str) -> None:
        log = self._load(path)
        scorer = _scorer_name(log, path, self.opt.scorer)
        run_id = self._run_id(path, log)
        ident = self._identity(log, run_id, "both")
        judges = self._judges(log, path, scorer)
        self.panels[run_id] = judges
        seen: dict[tuple[str, str, int], str] = {}
        arms_of: dict[tuple[str, int], set[str]] = {}
        for s in log.samples or []:
            where = _where(path, s)
            pair = _meta(s, pair_by, where)
            arm = _meta(s, arm_field, where)
            if arm not in ("benign", "attacked"):
                raise InputFormatError(
                    f"{where}: metadata field {arm_field!r} must be 'benign' or 'attacked', "
                    f"got {arm!r}"
                )
            key = (pair, arm, s.epoch)
            if key in seen:
                raise InputFormatError(
                    f"{where}: a second {arm} sample of pair {pair!r} (the first is sample "
                    f"{seen[key]!r})"
                )
            seen[key] = str(s.id)
            arms_of.setdefault((pair, s.epoch), set()).add(arm)
            case_id = f"{log.eval.task}/{pair}"
            meta = {"pair": pair, f"{arm}_sample_id": s.id, f"{arm}_metadata": s.metadata}
            if arm == "benign":
                self._case(log, s, case_id, where, meta=meta)
            self._variant(s, case_id, arm, where)
            row = _response(s, scorer=scorer, where=where, **self._verdict)
            rkey = {"run_id": run_id, "case_id": case_id, "arm": arm, "sample": s.epoch - 1}
            self.rows.append({**ident, **rkey, **row})
            self._judge(s, judges, where, rkey)
        for (pair, epoch), arms in sorted(arms_of.items()):
            if arms != {"benign", "attacked"}:
                (have,) = arms
                raise InputFormatError(
                    f"{path}: pair {pair!r} (epoch {epoch}) has a {have} sample and no "
                    f"{'attacked' if have == 'benign' else 'benign'} one "
                    f"(pairs by metadata {pair_by!r}, arms by {arm_field!r})"
                )
        self._finish(log, path, scorer, run_id, None)

    def by_logs(self, benign_path: Path, attacked_path: Path) -> None:
        benign, attacked = self._load(benign_path), self._load(attacked_path)
        if benign.eval.model != attacked.eval.model:
            raise InputFormatError(
                f"{attacked_path}: model {attacked.eval.model!r} differs from "
                f"{benign.eval.model!r} of the benign log {benign_path}; a run is one model"
            )
        scorer_b = _scorer_name(benign, benign_path, self.opt.scorer)
        scorer_a = _scorer_name(attacked, attacked_path, self.opt.scorer)
        run_id = self._run_id(benign_path, benign, attacked)
        ident = self._identity(benign, run_id, "both")
        judges_b = self._judges(benign, benign_path, scorer_b)
        judges_a = self._judges(attacked, attacked_path, scorer_a)
        self.panels[run_id] = list(dict.fromkeys([*judges_b, *judges_a]))
        task = benign.eval.task
        attacked_by_key = {(str(s.id), s.epoch): s for s in attacked.samples or []}
        benign_keys = {(str(s.id), s.epoch) for s in benign.samples or []}
        lonely = sorted(set(attacked_by_key) - benign_keys)
        if lonely:
            sid, epoch = lonely[0]
            raise InputFormatError(
                f"{attacked_path}: sample {sid!r} (epoch {epoch}) has no benign counterpart in "
                f"{benign_path} ({len(lonely)} such sample(s))"
            )
        for s in benign.samples or []:
            where = _where(benign_path, s)
            a = attacked_by_key.get((str(s.id), s.epoch))
            if a is None:
                raise InputFormatError(
                    f"{where}: no attacked counterpart in {attacked_path} "
                    f"({len(benign_keys - set(attacked_by_key))} such sample(s))"
                )
            a_where = _where(attacked_path, a)
            if _targets(a.target) != _targets(s.target):
                raise InputFormatError(
                    f"{a_where}: field 'target' is {a.target!r}, the benign sample's is "
                    f"{s.target!r}; the two arms of a pair share the expected answer"
                )
            case_id = f"{task}/{s.id}"
            meta = {"sample_id": s.id, "metadata": s.metadata, "attacked_task": attacked.eval.task}
            self._case(benign, s, case_id, where, meta=meta)
            if _item(a, a_where).options != _item(s, where).options:
                raise InputFormatError(
                    f"{a_where}: field 'choices' has {len(a.choices or [])} choices, the benign "
                    f"sample {len(s.choices or [])}; the two arms of a pair share the options"
                )
            self._variant(s, case_id, "benign", where)
            self._variant(a, case_id, "attacked", a_where)
            for arm, smp, scorer, w, judges in (
                ("benign", s, scorer_b, where, judges_b),
                ("attacked", a, scorer_a, a_where, judges_a),
            ):
                row = _response(smp, scorer=scorer, where=w, **self._verdict)
                key = {"run_id": run_id, "case_id": case_id, "arm": arm, "sample": smp.epoch - 1}
                self.rows.append({**ident, **key, **row})
                self._judge(smp, judges, w, key)
        self._finish(benign, benign_path, scorer_b, run_id, "benign_accuracy")
        self._finish(attacked, attacked_path, scorer_a, run_id, "accuracy_under_attack")

    def _finish(
        self,
        log: EvalLog,
        path: Path,
        scorer: str,
        run_id: str,
        metric: str | None,
        scores: list[Any] | None = None,
    ) -> None:
        """Notes, ``runs`` row and published figures of a log; ``scores`` are the samples'
        scores when the samples themselves were let go (default: the log's samples')."""
        if scores is None:
            scores = [s.scores for s in log.samples or []]
        note = _status_note(log, path, len(scores))
        if note is not None:
            self._note(note)
        row = _unfinished(log, path, run_id, len(scores))
        if row is not None:
            self.unfinished.append(row)
        if metric is not None and row is None:
            self.published += _published(log, path, scorer, run_id, metric, self.opt.score_key)
        key = self.opt.score_key
        values = [
            v[key] if key is not None and isinstance(v, Mapping) and key in v else v
            for v in (sc[scorer].value for sc in scores if sc and scorer in sc)
        ]  # fmt: skip
        to_float = _to_float()
        credit = sorted(
            {
                to_float(v)
                for v in values
                if not isinstance(v, Mapping | list | tuple)
                and v not in ("C", "I", "N")
                and 0.0 < to_float(v) < 1.0
            }
        )
        if credit:
            self._note(
                f"{path}: scorer {scorer!r} gives partial credit ({', '.join(f'{c:g}' for c in credit)}); "
                f"an answer counts as correct from {self.opt.threshold:g} on, so Peira's accuracy "
                "can differ from the log's mean score"
            )

    def result(self, source: str) -> Imported:
        table = None
        if any(len(judges) > 1 for judges in self.panels.values()):
            panel = sorted({f"inspect/{j}" for judges in self.panels.values() for j in judges})
            chosen = sorted({f"inspect/{judges[0]}" for judges in self.panels.values()})
            self.notes.append(
                f"scorers kept as judges in judgements.parquet: {', '.join(panel)}; the "
                f"decisions are {', '.join(chosen)}'s (peira score --judge NAME scores by "
                "another, --judge majority by their majority)"
            )
            table = pl.DataFrame(self.judgements, schema=JUDGEMENTS_SCHEMA).sort(
                "run_id", "case_id", "arm", "sample", "judge"
            )  # one scorer per log: its verdict is the decision, no panel
        return bundle(
            self.book, self.rows, self.published, self.notes, source, self.unfinished, table
        )


def read_inspect(
    logs: Sequence[PathLike] = (),
    *,
    scorer: str | None = None,
    pair_by: str | None = None,
    arm_field: str | None = None,
    pairs: Sequence[tuple[PathLike, PathLike]] = (),
    threshold: float = 1.0,
    cluster_by: str | None = None,
    score_key: str | None = None,
) -> Imported:
    """Read Inspect eval logs into Peira's tables (see the module docstring for the mapping).

    Parameters
    ----------
    logs
        ``.eval`` or ``.json`` logs; each is a run. Without ``pair_by`` they
        are clean-only runs (``arms = "benign"``).
    scorer
        The scorer whose value is the verdict; required when a log has several.
    pair_by, arm_field
        Pair benign and attacked samples of each log by these metadata fields
        (given together).
    pairs
        ``(benign_log, attacked_log)`` tuples: two logs of one model on the
        same sample ids; each tuple is one run with both arms.
    threshold
        A verdict score from this value on counts as correct (default 1).
    cluster_by
        A metadata field grouping samples into bootstrap clusters (e.g. the
        passage several questions are about); default: each case its own.
    score_key
        For a scorer whose value is a dictionary (AgentHarm's ``{score,
        refusal}``): the entry that is the verdict. A score without that key
        is an input error naming the file, the sample and the keys it has.

    Returns
    -------
    Imported
        ``cases``, ``variants``, ``responses``, ``published``, ``runs`` (the
        logs that did not finish) and the notes, validated against the data
        model; :meth:`Imported.write` writes them.

    Raises
    ------
    DataFileError
        A log does not exist.
    InputFormatError
        A log cannot be read, or a sample breaks the mapping (unknown scorer,
        a target that is no choice letter, an incomplete pair, a dictionary
        score without ``score_key`` or without that key, …); the message
        names the file, the sample and the field.

    Warns
    -----
    EvalLogWarning
        A log that did not finish, or a scorer giving partial credit.
    """
    return _import(
        "auto",
        logs,
        scorer=scorer,
        pair_by=pair_by,
        arm_field=arm_field,
        pairs=pairs,
        threshold=threshold,
        cluster_by=cluster_by,
        score_key=score_key,
    )


def _import(
    engine: str,
    logs: Sequence[PathLike] = (),
    *,
    scorer: str | None = None,
    pair_by: str | None = None,
    arm_field: str | None = None,
    pairs: Sequence[tuple[PathLike, PathLike]] = (),
    threshold: float = 1.0,
    cluster_by: str | None = None,
    score_key: str | None = None,
) -> Imported:
    """:func:`read_inspect` with the reader ``engine`` (one of :data:`ENGINES`)."""
    if (pair_by is None) != (arm_field is None):
        raise InputFormatError(
            "pair_by and arm_field go together (--pair-by FIELD --arm-field FIELD)"
        )
    if not logs and not pairs:
        raise InputFormatError("no Inspect log given")
    if score_key is not None and (not isinstance(score_key, str) or not score_key):
        raise InputFormatError(f"score_key must be a non-empty string, got {score_key!r}")
    with no_gc():
        reader = _Reader(
            _Options(scorer, check_threshold(threshold), cluster_by, score_key), engine
        )
        for path in logs:
            if pair_by is not None and arm_field is not None:
                reader.by_metadata(Path(path), pair_by, arm_field)
            else:
                reader.clean(Path(path))
        for benign, attacked in pairs:
            reader.by_logs(Path(benign), Path(attacked))
        first = next(iter([*logs, *(b for b, _ in pairs)]))
        return reader.result(f"{first} (Inspect import)")
