"""What an lm-eval ``results_<time>.json`` says about its run (peira.importers.lm_eval).

The results file names the model (``config.model_args``), the groups of the
run's tasks (``group_subtasks``), how many documents each task scored
(``n-samples``: ``original`` in the task, ``effective`` after ``--limit``) and
lm-eval's own figures (``results``: ``<metric>,<filter>`` and
``<metric>_stderr,<filter>`` per task and group). This module reads them; the
sample files are read by :mod:`peira.importers.lm_eval`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ..errors import InputFormatError

__all__ = ["groups", "model_name", "number", "published_rows", "tasks_without_samples"]


def number(value: Any) -> float | None:
    """A JSON number (or boolean) as a float, else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def model_name(results: Mapping[str, Any] | None, fallback: str) -> str:
    """The model of a run: its ``pretrained``/``model`` argument, else type and arguments."""
    if results is None:
        return fallback
    config = results.get("config")
    if isinstance(config, Mapping):
        args = config.get("model_args")
        if isinstance(args, str):
            args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
        if isinstance(args, Mapping):
            for key in ("pretrained", "model", "model_name", "engine"):
                if isinstance(args.get(key), str) and args[key]:
                    return str(args[key])
            kind = config.get("model")
            if isinstance(kind, str) and args:
                return f"{kind}:" + ",".join(f"{k}={args[k]}" for k in sorted(args))
            if isinstance(kind, str):
                return kind
    name = results.get("model_name")
    return str(name) if isinstance(name, str) and name else fallback


def check_results(results: Mapping[str, Any], path: Any) -> None:
    """Refuse a results file whose blocks have another shape than lm-eval writes, rather
    than read its figures, groups or counts from part of it.

    Raises
    ------
    InputFormatError
        ``group_subtasks`` not an object of arrays of task names; ``results``,
        ``n-samples`` or ``configs`` not an object of objects (the file and the
        field named).
    """
    from ..errors import InputFormatError
    from .cases import json_kind

    subtasks = results.get("group_subtasks")
    if subtasks is not None:
        if not isinstance(subtasks, Mapping):
            raise InputFormatError(
                f"{path}: field 'group_subtasks' must be an object, not {json_kind(subtasks)}"
            )
        for group, members in subtasks.items():
            if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                raise InputFormatError(
                    f"{path}: field 'group_subtasks.{group}' must be an array of task names"
                )
    for key in ("results", "n-samples", "configs"):
        block = results.get(key)
        if block is None:
            continue
        if not isinstance(block, Mapping):
            raise InputFormatError(
                f"{path}: field {key!r} must be an object, not {json_kind(block)}"
            )
        for task, entry in block.items():
            if not isinstance(entry, Mapping):
                raise InputFormatError(
                    f"{path}: field '{key}.{task}' must be an object, not {json_kind(entry)}"
                )


def groups(results: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Task → chain of groups (outermost first), from ``group_subtasks``."""
    if results is None:
        return {}
    subtasks = results.get("group_subtasks")
    if not isinstance(subtasks, Mapping):
        return {}
    parent: dict[str, str] = {}
    for group, members in subtasks.items():
        if isinstance(members, list):
            for m in members:
                if isinstance(m, str) and m != group:
                    parent.setdefault(m, group)
    chains: dict[str, list[str]] = {}
    for task in parent:
        chain, seen = [], {task}
        g = parent.get(task)
        while g is not None and g not in seen:
            chain.append(g)
            seen.add(g)
            g = parent.get(g)
        chains[task] = chain[::-1]
    return chains


def _leaves(results: Mapping[str, Any], group: str) -> list[str]:
    """The tasks under ``group``, through nested groups."""
    subtasks = results.get("group_subtasks") or {}
    out: list[str] = []
    for m in subtasks.get(group, []):
        if m in subtasks and m != group:
            out += _leaves(results, m)
        else:
            out.append(m)
    return out


def _effective(counts: Any) -> int | None:
    """``n-samples.<task>.effective``: the documents lm-eval scored, or None."""
    n = counts.get("effective") if isinstance(counts, Mapping) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def tasks_without_samples(results: Mapping[str, Any], sampled: Collection[str]) -> list[str]:
    """The tasks the results file scored (not its groups) that have no sample file."""
    subtasks = results.get("group_subtasks")
    group_names = set(subtasks) if isinstance(subtasks, Mapping) else set()
    listed: set[str] = set()
    for key in ("results", "n-samples"):
        block = results.get(key)
        if isinstance(block, Mapping):
            listed.update(str(k) for k in block)
    return sorted(listed - group_names - set(sampled))


def published_rows(
    results: Mapping[str, Any],
    *,
    path: Path | None,
    stamp: str,
    tasks: Collection[str],
    run_id: str,
    paired_id: str,
    metrics: Mapping[str, str],
    filters: Mapping[str, str],
    attacked: Mapping[str, str],
) -> list[dict[str, Any]]:
    """The ``published`` rows of one run: lm-eval's figures for the tasks read.

    Each task's ``<metric>,<filter>`` (with the metric and filter its documents
    were read with) and its ``_stderr``; ``n`` is the documents lm-eval scored
    (``n-samples.effective``, else ``sample_len``). A perturbed twin's figure is
    the paired run's accuracy under attack. A group's figure (its size-weighted
    mean) is the run's row (family null) when the group is the whole clean-only
    run, as ``--tasks mmlu`` makes it.
    """
    table = results.get("results")
    if not isinstance(table, Mapping):
        raise InputFormatError(f"{path}: field 'results' must be an object")
    counts = results.get("n-samples")
    n_samples: Mapping[str, Any] = counts if isinstance(counts, Mapping) else {}
    src = path.name if path is not None else stamp
    twins = {v: k for k, v in attacked.items()}
    out: list[dict[str, Any]] = []

    def figure(name: str, rid: str, metric_out: str, family: str, of: str) -> None:
        """The results entry ``name`` read with the metric and filter used for task ``of``."""
        entry = table.get(name)
        key = f"{metrics[of]},{filters[of]}"
        if not isinstance(entry, Mapping):
            return
        est = number(entry.get(key))
        if est is None:
            return
        n, of_n = _effective(n_samples.get(name)), ""
        if n is not None:
            original = n_samples[name].get("original")
            if isinstance(original, int) and original != n:
                of_n = f", {n} of the task's {original} documents"
        elif isinstance(entry.get("sample_len"), int):
            n = entry["sample_len"]
        out.append(
            {
                "run_id": rid,
                "family": family,
                "metric": metric_out,
                "estimate": est,
                "stderr": number(entry.get(f"{metrics[of]}_stderr,{filters[of]}")),
                "n": n,
                "source": f"lm-eval {name} {key} ({src}{of_n})",
            }
        )

    for task in sorted(tasks):
        twin = attacked.get(task)
        if task in twins:
            continue
        if twin is None:
            figure(task, run_id, "benign_accuracy", task, task)
        else:
            figure(task, paired_id, "benign_accuracy", task, task)
            figure(twin, paired_id, "accuracy_under_attack", task, twin)
    # A group's figure is lm-eval's size-weighted mean of its tasks. ``published`` has a
    # row per run or per family (task), so a group's figure is kept when the group is the
    # whole clean-only run (``--tasks mmlu``): all its tasks, read with one metric and
    # filter, and no other task.
    subtasks = results.get("group_subtasks") or {}
    clean_tasks = {t for t in tasks if t not in attacked and t not in twins}
    for group in sorted(subtasks):
        leaves = _leaves(results, group)
        if set(leaves) != clean_tasks:
            continue
        used = {(metrics.get(t), filters.get(t)) for t in leaves}
        if not leaves or len(used) != 1 or None in next(iter(used)):
            continue
        metric, flt = next(iter(used))
        entry = table.get(group)
        if not isinstance(entry, Mapping):
            continue
        est = number(entry.get(f"{metric},{flt}"))
        if est is None:
            continue
        count = entry.get("sample_count")
        n = None
        if isinstance(count, Mapping) and isinstance(count.get(f"{metric},{flt}"), int):
            n = count[f"{metric},{flt}"]
        elif isinstance(entry.get("sample_len"), int):
            n = entry["sample_len"]
        else:  # lm-eval's weights: the documents each task scored
            sizes = [_effective(n_samples.get(t)) for t in leaves]
            known = [x for x in sizes if x is not None]
            if len(known) == len(sizes):
                n = sum(known)
        out.append(
            {
                "run_id": run_id,
                "family": None,
                "metric": "benign_accuracy",
                "estimate": est,
                "stderr": number(entry.get(f"{metric}_stderr,{flt}")),
                "n": n,
                "source": f"lm-eval group {group} {metric},{flt}, size-weighted over "
                f"{', '.join(leaves)} ({src})",
            }
        )
    return out
