"""JailbreakBench attack artifacts (JSON) → a dataset, a response log and the published ASR.

An artifact holds ``parameters`` (``method``, ``model``, ``attack_type``,
``attack_success_rate``, …) and ``jailbreaks``: one entry per behaviour with
``index, goal, behavior, category, prompt, response, jailbroken, …``. The
mapping to docs/spec/data-model.md:

- a **case** per behaviour (``jbb-<index>``; artifacts of one benchmark share
  them): family = ``category``, options ``refuse`` / ``comply``, expected
  ``refuse``, target ``comply``; the goal is the benign variant;
- only attacked answers are published, so every run declares
  ``arms = "attacked"``: its pairs are eligible by declaration and its benign
  accuracy is null (no benign row is invented);
- the judge's verdict (``jailbroken``, or ``--judge COLUMN``) is the
  attacked **decision**: ``comply`` when jailbroken, else ``refuse``; the
  judge is recorded in ``verdict_source``;
- every judge the artifact carries (each ``jailbroken*`` field holding true,
  false or null: ``jailbroken``, ``jailbroken_llama_guard1``, …) gives a row
  per response of the **judgements** table: ``comply`` when jailbroken,
  ``refuse`` when not, ``undetermined`` when the value is null or the entry
  lacks it (``peira score --judge NAME`` scores by any of them);
- a behaviour with no submitted prompt (``prompt: null``) is **the attack
  found nothing** (``no_attack``), not a malformed answer;
- ``attack_success_rate`` becomes the ``published`` table; Peira's ASR equals
  it (ASR over all behaviours, as JailbreakBench defines it).

Other fields (query and token counts, other judges' verdicts) are kept in
``extras``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputFormatError
from ..schema import (
    CASES_SCHEMA,
    JUDGEMENTS_SCHEMA,
    PUBLISHED_SCHEMA,
    RESPONSE_EXTENSIONS,
    RESPONSES_SCHEMA,
    UNDETERMINED,
)
from ._bundle import Imported, input_files, variants_of
from .cases import canonical_json, json_kind, load_json_file

__all__ = ["OPTIONS", "read_jailbreakbench"]

PathLike = str | os.PathLike[str]

#: The options of every behaviour: refusing is right, complying is the attack's goal.
OPTIONS = ("refuse", "comply")
_MAPPED = {"index", "goal", "behavior", "category", "prompt", "response"}


def _fail(path: Path, where: str, message: str) -> InputFormatError:
    return InputFormatError(f"{path}: {where}: {message}")


def _judges(path: Path, entries: list[dict[str, Any]], judge: str) -> list[str]:
    """The judge fields of an artifact: the primary ``judge`` first, then every other
    ``jailbroken*`` field whose values are all true, false or null (in name order).

    A judge that finds a behaviour jailbroken without a submitted prompt is refused,
    as for the primary judge: there was no answer to judge.
    """
    names = sorted({k for e in entries for k in e if k.startswith("jailbroken") and k != judge})
    found = [judge]
    for name in names:
        if all(e.get(name) is None or isinstance(e.get(name), bool) for e in entries):
            found.append(name)
    for i, e in enumerate(entries):
        for name in found:
            if e.get("prompt") is None and e.get(name) is True:
                raise _fail(
                    path, f"jailbreaks[{i}].{name}", "jailbroken without a submitted prompt"
                )
    return found


def _verdict(value: Any) -> str:
    if value is None:
        return UNDETERMINED
    return "comply" if value else "refuse"


def _run_id(params: Mapping[str, Any], path: Path) -> str:
    parts = [params.get(k) for k in ("method", "attack_type", "model")]
    if all(isinstance(p, str) and p for p in parts):
        return "-".join(str(p) for p in parts)
    return path.stem


def _entries(path: Path, data: Any, judge: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(data, dict):
        raise InputFormatError(f"{path}: an artifact is a JSON object, not {json_kind(data)}")
    if "jailbreaks" not in data:
        raise InputFormatError(
            f"{path}: no 'jailbreaks' field; a JailbreakBench artifact has 'parameters' and "
            "'jailbreaks'"
        )
    params = data.get("parameters")
    if not isinstance(params, dict):
        raise InputFormatError(f"{path}: field 'parameters' must be an object")
    entries = data["jailbreaks"]
    if not isinstance(entries, list) or not entries:
        raise InputFormatError(f"{path}: field 'jailbreaks' must be a non-empty array")
    for i, e in enumerate(entries):
        where = f"jailbreaks[{i}]"
        if not isinstance(e, dict):
            raise _fail(path, where, f"an entry is an object, not {json_kind(e)}")
        for key, kinds in (("index", int), ("goal", str), ("category", str)):
            if not isinstance(e.get(key), kinds) or isinstance(e.get(key), bool):
                raise _fail(path, f"{where}.{key}", f"missing or not a {kinds.__name__}")
        if judge not in e:
            raise _fail(path, f"{where}.{judge}", "no such field (the judge column)")
        if not isinstance(e[judge], bool):
            raise _fail(
                path, f"{where}.{judge}", f"must be true or false, not {json_kind(e[judge])}"
            )
        prompt = e.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise _fail(
                path, f"{where}.prompt", f"must be a string or null, not {json_kind(prompt)}"
            )
        response = e.get("response")
        if response is not None and not isinstance(response, str):
            raise _fail(
                path, f"{where}.response", f"must be a string or null, not {json_kind(response)}"
            )
        if prompt is None and e[judge]:
            raise _fail(path, f"{where}.{judge}", "jailbroken without a submitted prompt")
    return params, entries


def read_jailbreakbench(
    paths: Sequence[PathLike],
    *,
    judge: str = "jailbroken",
    run_ids: Sequence[str] | None = None,
    dataset_version: str = "jailbreakbench",
) -> Imported:
    """Read JailbreakBench artifacts (docs/spec/data-model.md; mapping in the module notes).

    Parameters
    ----------
    paths
        Artifact JSON files; each is a run.
    judge
        The boolean field whose verdict is the attacked decision (default
        ``jailbroken``; e.g. ``jailbroken_llama_guard1``).
    run_ids
        Run ids, one per file (default ``<method>-<attack_type>-<model>`` from
        ``parameters``, else the file's stem).
    dataset_version
        Written into every case.

    Returns
    -------
    Imported
        Cases, variants (the goals), responses (attacked only), the
        published ``attack_success_rate`` of each artifact and the verdicts of
        every judge the artifacts carry (``judgements``), validated.

    Raises
    ------
    InputFormatError
        Not an artifact (no ``jailbreaks``), an entry lacking a field or the
        judge column, a judge verdict that is not a boolean, a behaviour
        whose category differs between artifacts (a reworded goal or a renamed
        behaviour is kept, see the notes), two files with one run id: the
        message names the file, the entry and the field.
    """
    files = input_files(paths, run_ids, "JailbreakBench artifact")
    behaviours: dict[int, dict[str, Any]] = {}
    responses: list[dict[str, Any]] = []
    published: list[dict[str, Any]] = []
    notes: list[str] = []
    seen: dict[str, Path] = {}
    reworded: set[int] = set()
    judgements: list[dict[str, Any]] = []
    panels: dict[str, list[str]] = {}
    for k, f in enumerate(files):
        params, entries = _entries(f, load_json_file(f), judge)
        judges = _judges(f, entries, judge)
        run = run_ids[k] if run_ids is not None else _run_id(params, f)
        if run in seen:
            raise InputFormatError(
                f"{f}: run id {run!r} is also the run id of {seen[run]}; name the runs with --run"
            )
        seen[run] = f
        given = params.get("model")
        if given is not None and not isinstance(given, str):
            raise _fail(f, "parameters.model", f"expected a string, not {json_kind(given)}")
        model = given or run
        indices = [e["index"] for e in entries]
        if len(set(indices)) != len(indices):
            dup = next(i for i in indices if indices.count(i) > 1)
            pos = [i for i, x in enumerate(indices) if x == dup]
            raise _fail(f, f"jailbreaks[{pos[1]}].index", f"behaviour {dup} appears twice")
        for i, e in enumerate(entries):
            b = behaviours.setdefault(
                e["index"],
                {"goal": e["goal"], "behavior": e.get("behavior"), "category": e["category"]},
            )
            if b["category"] != e["category"]:
                raise _fail(
                    f,
                    f"jailbreaks[{i}].category",
                    f"behaviour {e['index']} is in {e['category']!r} here but in "
                    f"{b['category']!r} in an earlier artifact",
                )
            extras = {k2: v for k2, v in e.items() if k2 not in _MAPPED and k2 != judge}
            # JBB-Behaviors revised some wordings and names between releases: kept, noted
            for key in ("goal", "behavior"):
                if e.get(key) != b[key]:
                    extras[key] = e.get(key)
                    reworded.add(e["index"])

            prompt = e.get("prompt")
            response = e.get("response")
            judgements += [
                {"run_id": run, "case_id": f"jbb-{e['index']:03d}", "arm": "attacked",
                 "sample": 0, "judge": name, "verdict": _verdict(e.get(name))}
                for name in judges
            ]  # fmt: skip
            responses.append(
                {
                    "run_id": run,
                    "model": model,
                    "model_version": "",
                    "case_id": f"jbb-{e['index']:03d}",
                    "arm": "attacked",
                    "sample": 0,
                    "decision": None if prompt is None else ("comply" if e[judge] else "refuse"),
                    "abstained": False,
                    "malformed": False,
                    "raw_text": response if isinstance(response, str) else None,
                    "prompt": prompt,
                    "no_attack": prompt is None,
                    "arms": "attacked",
                    "verdict_source": judge,
                    "extras": canonical_json(extras) if extras else None,
                }
            )
        asr = params.get("attack_success_rate")
        if isinstance(asr, int | float) and not isinstance(asr, bool):
            published.append(
                {
                    "run_id": run,
                    "family": None,
                    "metric": "asr",
                    "estimate": float(asr),
                    "stderr": None,
                    "n": len(entries),
                    "source": f"jailbreakbench artifact ({f.name}: parameters.attack_success_rate)",
                }
            )
        else:
            notes.append(f"{f.name}: no parameters.attack_success_rate; nothing to compare with")
        panels[run] = judges
        n_none = sum(e.get("prompt") is None for e in entries)
        if n_none:
            notes.append(
                f"{run}: {n_none} of {len(entries)} behaviours have no submitted prompt "
                "(the attack found nothing: no_attack)"
            )
    if reworded:
        notes.append(
            f"{len(reworded)} behaviour(s) are worded or named differently in some artifacts "
            "(revisions of JBB-Behaviors): a case is its index and category; the first "
            "wording is the benign variant and the others are kept in the responses' extras"
        )
    notes.append(
        "only attacked answers are published: every run declares arms='attacked' (eligible "
        "by declaration, benign accuracy undefined)"
    )
    panel = sorted({name for names in panels.values() for name in names})
    notes.append(
        f"judges kept in judgements.parquet: {', '.join(panel)}; the decision is {judge}'s "
        "(peira score --judge NAME scores by another, --judge majority by their majority)"
    )
    cases = pl.DataFrame(
        [
            {
                "case_id": f"jbb-{idx:03d}",
                "scenario_id": f"jbb-{idx:03d}",
                "split": "public",
                "suite": "main",
                "family": b["category"],
                "primitive": "choice",
                "severity": None,
                "options": list(OPTIONS),
                "expected_decision": "refuse",
                "positive_decision": None,
                "target_decision": "comply",
                "expected_score": None,
                "dataset_version": dataset_version,
                "extras": canonical_json({"behavior": b["behavior"]})
                if b["behavior"] is not None
                else None,
            }
            for idx, b in sorted(behaviours.items())
        ],
        schema=CASES_SCHEMA,
    )
    prompts = pl.DataFrame(
        {
            "case_id": [f"jbb-{idx:03d}" for idx in sorted(behaviours)],
            "arm": ["benign"] * len(behaviours),
            "prompt": [behaviours[idx]["goal"] for idx in sorted(behaviours)],
        }
    )
    schema: dict[str, pl.DataType] = {
        **RESPONSES_SCHEMA,
        **{c: RESPONSE_EXTENSIONS[c] for c in ("prompt", "no_attack", "arms", "verdict_source")},
        "extras": RESPONSE_EXTENSIONS["extras"],
    }
    log = pl.DataFrame(responses, schema=schema).sort("run_id", "case_id", "arm", "sample")
    pub = pl.DataFrame(published, schema=PUBLISHED_SCHEMA) if published else None
    label = ", ".join(str(f) for f in files[:3]) + (" …" if len(files) > 3 else "")
    verdicts = pl.DataFrame(judgements, schema=JUDGEMENTS_SCHEMA).sort(
        "run_id", "case_id", "arm", "sample", "judge"
    )
    return Imported(
        cases, variants_of(prompts, cases), log, pub, tuple(notes), judgements=verdicts
    ).validated(label)
