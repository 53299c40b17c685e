"""Cases in the reference JSONL format (docs/spec/formats.md#cases-jsonl): import and export.

One case per line::

    {"case_id": ..., "family": ..., "primitive": ..., "severity": ...,
     "benign": {"input": {"prompt": ..., "options": [...], ...},
                "expected_decision": ..., "expected_score": ...?,
                "positive_decision": ...?},
     "attacked": {"input": {...}, "target_decision": ...?},
     "notes": ..., <any other field>}

:func:`read_cases_jsonl` turns such a file into validated ``cases`` and
``variants`` tables (docs/spec/data-model.md#cases, docs/spec/data-model.md#variants); :func:`write_cases_jsonl` writes them
back. Every field the tables have no column for (``notes``, provenance, flags,
unknown fields inside ``benign`` / ``attacked``) is kept in ``cases.extras``,
so import followed by export gives back equal JSON objects, line by line.

The generic JSON helpers of the importers (:func:`canonical_json`,
:func:`iter_jsonl`, :func:`load_json_file`) live here too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import unicodedata
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from .. import _json
from ..canonical import canonical_text
from ..errors import DataFileError, InputFormatError, ValidationError
from ..io import Dataset, atomic_path
from ..schema import CASES_SCHEMA, VARIANTS_SCHEMA, collect_failures, failures_frame, raise_if

__all__ = [
    "INFERRED_KEY",
    "canonical_json",
    "iter_jsonl",
    "load_json_file",
    "read_cases_jsonl",
    "scenario_id",
    "write_cases_jsonl",
]

PathLike = str | os.PathLike[str]

#: Key of ``cases.extras`` recording labels the importer inferred rather than read.
INFERRED_KEY = "peira:inferred"

_TOP_KNOWN = frozenset({"case_id", "family", "primitive", "severity", "benign", "attacked"})
_BENIGN_KNOWN = frozenset({"input", "expected_decision", "expected_score", "positive_decision"})
_ATTACKED_KNOWN = frozenset({"input", "target_decision"})
_BOM = b"\xef\xbb\xbf"
_LOC_SCHEMA = {"file": pl.String(), "row": pl.Int64()}

# ---------------------------------------------------------------- JSON helpers


#: Canonical JSON as text (:func:`peira.canonical.canonical_text`), under the importers' name.
canonical_json = canonical_text


def _loads(text: str) -> Any:
    return _json.loads(text)  # bounded: depth, 64-bit numbers, duplicate keys, Unicode


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise DataFileError(f"{path}: no such file")
    if path.is_dir():
        raise DataFileError(f"{path}: is a directory, expected a file")
    data = path.read_bytes()
    if path.suffix == ".gz":  # a gzip-compressed file reads as its content
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                data = gz.read(_json.MAX_BYTES + 1)  # bounded: a small file may inflate hugely
        except (OSError, EOFError, zlib.error) as exc:
            raise InputFormatError(f"{path}: not a readable gzip file: {exc}") from exc
        if len(data) > _json.MAX_BYTES:
            raise InputFormatError(
                f"{path}: decompresses to more than the {_json.MAX_BYTES:,} bytes a JSON file "
                "may have"
            )
    if not data.strip():
        raise InputFormatError(f"{path}: empty file")
    return data


def _utf8_error(path: Path, data: bytes, exc: UnicodeDecodeError) -> InputFormatError:
    line = data.count(b"\n", 0, exc.start) + 1
    col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return InputFormatError(
        f"{path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {col})"
    )


def _read_text(p: Path) -> str:
    """The file's UTF-8 text (a byte-order mark dropped); errors name file and line."""
    try:
        _json.check_size(p)
    except _json.JSONLimitError as exc:
        raise InputFormatError(f"{p}: {exc}") from None
    data = _read_bytes(p)
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(p, data, exc) from exc


def _parse(text: str, p: Path, lineno: int | None = None) -> Any:
    """:func:`_loads`, failing with an :class:`InputFormatError` that names where.

    ``lineno`` is the line of a JSONL file that ``text`` is; without it
    ``text`` is the whole file and the message names the error's line and column.
    """
    where = f"{p}" if lineno is None else f"{p}:{lineno}"
    try:
        return _loads(text)
    except json.JSONDecodeError as exc:
        if lineno is None:
            at = f"{p}:{exc.lineno}:{exc.colno}: invalid JSON: {_json.describe(exc)}"
        else:
            at = f"{where}: invalid JSON: {_json.describe(exc)} (column {exc.colno})"
        raise InputFormatError(at) from None
    except ValueError as exc:
        raise InputFormatError(f"{where}: invalid JSON: {exc}") from exc


def iter_jsonl(path: PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Lines are numbered from 1. A UTF-8 byte-order mark and CR-LF line ends are
    accepted; blank lines are skipped.

    Raises
    ------
    DataFileError
        The file does not exist or is a directory.
    InputFormatError
        Empty file, invalid UTF-8, invalid JSON (including duplicate keys and
        NaN/Infinity) or a line that is not a JSON object; the message names
        ``file:line``.
    """
    p = Path(path)
    text = _read_text(p)
    seen = False
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        obj = _parse(line, p, lineno)
        if not isinstance(obj, dict):
            raise InputFormatError(f"{p}:{lineno}: expected a JSON object, got {json_kind(obj)}")
        seen = True
        yield lineno, obj
    if not seen:
        raise InputFormatError(f"{p}: empty file (no JSON objects)")


def load_json_file(path: PathLike) -> Any:
    """Parse a whole file as one JSON value, with errors naming ``file:line:column``.

    Raises
    ------
    DataFileError
        The file does not exist or is a directory.
    InputFormatError
        Empty file, invalid UTF-8 or invalid JSON (including duplicate keys and
        NaN/Infinity).
    """
    p = Path(path)
    return _parse(_read_text(p), p)


def json_kind(value: Any) -> str:
    """How a JSON value reads in a message: 'null', 'a boolean', 'a number', …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


# ---------------------------------------------------------------- scenario ids


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFC", value).split())
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def scenario_id(benign_input: Mapping[str, Any]) -> str:
    """The scenario id of a benign input: ``"sc-"`` + 12 hex digits of a SHA-256.

    Notes
    -----
    The hash is taken over the canonical JSON of the *normalised* benign
    input object (all of it, not only prompt and options): every string is
    NFC-normalised with runs of whitespace collapsed to one space and ends
    stripped, and the ``options`` list is sorted. Cases whose benign inputs
    differ only in spacing or in the order of the options therefore share a
    scenario; reordering options does not make a new situation, and erring
    towards coarser clusters keeps the bootstrap conservative.

    Examples
    --------
    >>> a = scenario_id({"prompt": "Approve  the refund?", "options": ["yes", "no"]})
    >>> b = scenario_id({"prompt": "Approve the refund? ", "options": ["no", "yes"]})
    >>> a == b, a.startswith("sc-"), len(a)
    (True, True, 15)
    """
    norm = _normalise(dict(benign_input))
    opts = norm.get("options")
    if isinstance(opts, list) and all(isinstance(o, str) for o in opts):
        norm["options"] = sorted(opts)
    digest = hashlib.sha256(canonical_json(norm).encode("utf-8")).hexdigest()
    return "sc-" + digest[:12]


# ---------------------------------------------------------------- import


def _fail(where: str, message: str) -> InputFormatError:
    return InputFormatError(f"{where}: {message}")


def _required(obj: Mapping[str, Any], key: str, field: str, where: str, kind: type) -> Any:
    """``obj[key]``, present, not null and of ``kind`` (``str`` or ``dict``)."""
    if key not in obj or obj[key] is None:
        raise _fail(where, f"missing required field '{field}'")
    value = obj[key]
    if not isinstance(value, kind):
        noun = "a string" if kind is str else "an object"
        raise _fail(where, f"field '{field}' must be {noun}, got {json_kind(value)}")
    return value


def _req_str(obj: Mapping[str, Any], key: str, field: str, where: str) -> str:
    value: str = _required(obj, key, field, where, str)
    return value


def _opt_str(obj: Mapping[str, Any], key: str, field: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(where, f"field '{field}' must be a string or null, got {json_kind(value)}")
    return value


def _req_obj(obj: Mapping[str, Any], key: str, field: str, where: str) -> dict[str, Any]:
    value: dict[str, Any] = _required(obj, key, field, where, dict)
    return value


def _input(arm_obj: Mapping[str, Any], arm: str, where: str) -> tuple[str, list[str], str]:
    inp = _req_obj(arm_obj, "input", f"{arm}.input", where)
    prompt = _req_str(inp, "prompt", f"{arm}.input.prompt", where)
    if "options" not in inp or inp["options"] is None:
        raise _fail(where, f"missing required field '{arm}.input.options'")
    options = inp["options"]
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise _fail(where, f"field '{arm}.input.options' must be a list of strings")
    return prompt, list(options), canonical_json(inp)


def _unknown(obj: Mapping[str, Any], known: frozenset[str], nullable: tuple[str, ...]) -> dict:
    """Fields to keep in extras: unknown ones, and explicit nulls of optional known ones."""
    out = {k: v for k, v in obj.items() if k not in known}
    out.update({k: None for k in nullable if k in obj and obj[k] is None})
    return out


def _parse_case(
    obj: dict[str, Any], where: str
) -> tuple[dict[str, Any], tuple[str, list[str], str], tuple[str, list[str], str]]:
    """One reference case → (cases row without split/suite/version, benign, attacked)."""
    cid = _req_str(obj, "case_id", "case_id", where)
    if not cid:
        raise _fail(where, "field 'case_id' is empty")
    where = f"{where} (case_id={cid!r})"
    family = _req_str(obj, "family", "family", where)
    primitive = _req_str(obj, "primitive", "primitive", where)
    severity = _req_str(obj, "severity", "severity", where)
    benign = _req_obj(obj, "benign", "benign", where)
    attacked = _req_obj(obj, "attacked", "attacked", where)
    b_var = _input(benign, "benign", where)
    a_var = _input(attacked, "attacked", where)
    expected = _req_str(benign, "expected_decision", "benign.expected_decision", where)

    raw_score = benign.get("expected_score")
    if raw_score is not None and (
        isinstance(raw_score, bool) or not isinstance(raw_score, int | float)
    ):
        raise _fail(
            where,
            f"field 'benign.expected_score' must be a number or null, got {json_kind(raw_score)}",
        )
    expected_score = None if raw_score is None else float(raw_score)
    target = _opt_str(attacked, "target_decision", "attacked.target_decision", where)

    inferred: dict[str, str] = {}
    positive = _opt_str(benign, "positive_decision", "benign.positive_decision", where)
    top_positive = _opt_str(obj, "positive_decision", "positive_decision", where)
    if positive is not None and top_positive is not None and positive != top_positive:
        raise _fail(
            where,
            f"conflicting positive_decision: benign has {positive!r}, top level has "
            f"{top_positive!r}",
        )
    if positive is None and top_positive is not None:
        # Older reference layout: positive_decision at the top level. The
        # field itself stays in extras (so it is exported where it was).
        positive = top_positive
        inferred["positive_decision"] = "top-level"
    elif positive is None and primitive == "score":
        if expected_score is not None:
            raise _fail(
                where,
                "score case has 'benign.expected_score' but no 'benign.positive_decision'; "
                "a score is P(positive_decision), so the positive class must be given "
                "(the reference requires it too)",
            )
        b_options = b_var[1]
        if not b_options:
            raise _fail(
                where,
                "score case has no 'benign.positive_decision' and no options to take the "
                "reference default (options[0]) from",
            )
        positive = b_options[0]
        inferred["positive_decision"] = "options[0]"

    extras = _unknown(obj, _TOP_KNOWN, ())
    if INFERRED_KEY in extras:
        raise _fail(where, f"field {INFERRED_KEY!r} is reserved by Peira")
    b_extra = _unknown(benign, _BENIGN_KNOWN, ("expected_score", "positive_decision"))
    a_extra = _unknown(attacked, _ATTACKED_KNOWN, ("target_decision",))
    if b_extra:
        extras["benign"] = b_extra
    if a_extra:
        extras["attacked"] = a_extra
    if inferred:
        extras[INFERRED_KEY] = inferred
    row = {
        "case_id": cid,
        "scenario_id": scenario_id(json.loads(b_var[2])),
        "family": family,
        "primitive": primitive,
        "severity": severity,
        "options": b_var[1],
        "expected_decision": expected,
        "positive_decision": positive,
        "target_decision": target,
        "expected_score": expected_score,
        "extras": canonical_json(extras) if extras else None,
    }
    return row, b_var, a_var


def read_cases_jsonl(
    path: PathLike,
    *,
    dataset_version: str | None = None,
    split: str = "public",
    suite: str = "main",
) -> Dataset:
    """Read cases in the reference JSONL format into validated tables.

    Parameters
    ----------
    path
        A JSONL file, one case per line (docs/spec/formats.md#cases-jsonl).
    dataset_version
        Stored in every case. Default: the file name without its extension
        (``trial-demo-cases.jsonl`` → ``"trial-demo-cases"``); pass the real
        version when there is one.
    split
        ``"public"`` (default) or ``"holdout"``, for every case.
    suite
        Suite label for every case (default ``"main"``).

    Returns
    -------
    Dataset
        ``cases`` (in file order) and ``variants`` (benign then attacked per
        case), validated; ``path`` is None (nothing is written).

    Raises
    ------
    DataFileError
        The file does not exist.
    InputFormatError
        Empty file, invalid UTF-8 or JSON, or a case lacking something the
        tables require (``expected_decision``, an input with ``prompt`` and
        ``options``, …); the message names ``file:line`` and the case_id.
    ValidationError
        A rule of docs/spec/data-model.md#cases is broken (unknown primitive, target equal to the
        expected decision, duplicate case_id, …); ``source`` is the file and
        ``row`` the line number.

    Notes
    -----
    - ``scenario_id`` is derived from the benign input (see :func:`scenario_id`).
    - ``options`` of a case are the benign input's options; each variant keeps
      its own options and its whole input object as canonical JSON.
    - ``cases.extras`` holds, as canonical JSON, every top-level field other
      than case_id, family, primitive, severity, benign and attacked (e.g.
      ``notes``); under ``"benign"`` / ``"attacked"`` the unknown fields of
      those objects and explicit nulls of their optional fields; and under
      ``"peira:inferred"`` the labels that were not read from the case.
    - Score cases without ``positive_decision``: the reference format lets a
      score case omit it when it carries no ``expected_score`` (all three
      score cases of the reference ``trial-demo`` file do), and the reference
      implementation documented the default ``options[0]`` (its
      ``Case.positive_decision_or_default``; tests/test_score_contract.py:
      "positive_decision defaults to options[0] with warning if omitted").
      Our schema requires a positive class for score cases, so that default
      is applied and recorded as ``{"peira:inferred": {"positive_decision":
      "options[0]"}}``; export omits the inferred value again. The default is
      the reference's convention, not a reading of the prompt: check it
      before relying on score calibration or ``shift_toward_target``. A score
      case that has ``expected_score`` but no ``positive_decision`` is
      rejected (the reference rejects it too). A ``positive_decision`` at the
      top level (older reference layout) is used and recorded as inferred
      from ``"top-level"``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> line = ('{"case_id": "c1", "family": "f", "primitive": "choice", '
    ...         '"severity": "high", "benign": {"input": {"prompt": "p", '
    ...         '"options": ["a", "b"]}, "expected_decision": "a"}, '
    ...         '"attacked": {"input": {"prompt": "p!", "options": ["a", "b"]}, '
    ...         '"target_decision": "b"}, "notes": "n"}')
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "demo.jsonl").write_text(line + "\\n")
    >>> ds = read_cases_jsonl(d / "demo.jsonl")
    >>> ds.cases.select("case_id", "dataset_version", "extras").row(0)
    ('c1', 'demo', '{"notes":"n"}')
    >>> ds.variants["arm"].to_list()
    ['benign', 'attacked']
    """
    p = Path(path)
    version = p.stem if dataset_version is None else dataset_version
    rows: list[dict[str, Any]] = []
    variants: list[dict[str, Any]] = []
    lines: list[int] = []
    for lineno, obj in iter_jsonl(p):
        row, b_var, a_var = _parse_case(obj, f"{p}:{lineno}")
        row.update(split=split, suite=suite, dataset_version=version)
        rows.append(row)
        lines.append(lineno)
        for arm, (prompt, options, inp) in (("benign", b_var), ("attacked", a_var)):
            variants.append(
                {
                    "case_id": row["case_id"],
                    "arm": arm,
                    "prompt": prompt,
                    "options": options,
                    "input": inp,
                }
            )
    cases = pl.DataFrame(rows, schema=CASES_SCHEMA)
    var = pl.DataFrame(variants, schema=VARIANTS_SCHEMA)
    src = str(p)
    # Violations are reported with the file and its line number as the row.
    case_loc = pl.DataFrame({"file": [src] * len(lines), "row": lines}, schema=_LOC_SCHEMA)
    cases, failures = collect_failures(cases, "cases", source=src, locations=case_loc)
    raise_if(failures, src)
    var_lines = [n for n in lines for _ in ("benign", "attacked")]
    var_loc = pl.DataFrame({"file": [src] * len(var_lines), "row": var_lines}, schema=_LOC_SCHEMA)
    var, failures = collect_failures(var, "variants", source=src, cases=cases, locations=var_loc)
    raise_if(failures, src)
    return Dataset(cases, var, None)


# ---------------------------------------------------------------- export


def _extras_of(raw: str | None, case_id: str) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        extras = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputFormatError(f"case {case_id!r}: extras is not valid JSON: {exc.msg}") from exc
    if not isinstance(extras, dict):
        # Extras written by something other than this importer: keep them whole.
        return {"extras": extras}
    for arm in ("benign", "attacked"):
        if arm in extras and not isinstance(extras[arm], dict):
            raise InputFormatError(
                f"case {case_id!r}: extras[{arm!r}] must be an object of {arm} fields, "
                f"got {json_kind(extras[arm])}"
            )
    return extras


def _case_object(case: Mapping[str, Any], inputs: Mapping[str, str]) -> dict[str, Any]:
    cid = case["case_id"]
    extras = _extras_of(case["extras"], cid)
    inferred = extras.pop(INFERRED_KEY, {})
    benign: dict[str, Any] = {
        "input": json.loads(inputs["benign"]),
        "expected_decision": case["expected_decision"],
    }
    if case["expected_score"] is not None:
        benign["expected_score"] = case["expected_score"]
    if case["positive_decision"] is not None and "positive_decision" not in inferred:
        benign["positive_decision"] = case["positive_decision"]
    attacked: dict[str, Any] = {"input": json.loads(inputs["attacked"])}
    if case["target_decision"] is not None:
        attacked["target_decision"] = case["target_decision"]
    benign.update(extras.pop("benign", {}))
    attacked.update(extras.pop("attacked", {}))
    out: dict[str, Any] = {
        "case_id": cid,
        "family": case["family"],
        "primitive": case["primitive"],
        "severity": case["severity"],
        "benign": benign,
        "attacked": attacked,
    }
    out.update(extras)
    return out


def write_cases_jsonl(dataset: Dataset, path: PathLike) -> Path:
    """Write a dataset's cases in the reference JSONL format, atomically.

    One line per case, in the order of ``dataset.cases``, written with
    Python's default ``json.dumps`` (as the reference files are). Fields kept
    in ``extras`` on import are put back where they came from, and labels the
    importer inferred are left out, so ``write_cases_jsonl(read_cases_jsonl(f))``
    reproduces the objects of ``f``.

    Parameters
    ----------
    dataset
        Validated cases and variants.
    path
        Output file; written via a temporary file and a rename.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValidationError
        The dataset holds holdout cases, which are never published (docs/spec/holdout.md#what-is-never-published;
        filter ``dataset.cases`` to ``split == "public"`` first), or a case
        lacks its benign or attacked variant.

    Notes
    -----
    The reference format has no place for ``scenario_id``, ``split``,
    ``suite`` or ``dataset_version``; they are not written (scenario ids
    are re-derived on import).
    """
    cases = dataset.cases
    holdout = cases.filter(pl.col("split") == "holdout")["case_id"].to_list()
    if holdout:
        raise ValidationError(
            f"refusing to export {len(holdout)} holdout case(s) (first: {holdout[0]!r}): "
            "holdout cases are never published (docs/spec/holdout.md#what-is-never-published); filter dataset.cases to "
            "split == 'public' first",
            failures_frame(
                [
                    {
                        "table": "cases",
                        "source": "cases",
                        "row": None,
                        "key": f"case_id={cid!r}",
                        "column": "split",
                        "check": "holdout_not_published",
                        "value": "'holdout'",
                    }
                    for cid in holdout
                ]
            ),
        )
    inputs: dict[str, dict[str, str]] = {}
    for cid, arm, inp in dataset.variants.select("case_id", "arm", "input").iter_rows():
        inputs.setdefault(cid, {})[arm] = inp
    missing = [
        {
            "table": "variants",
            "source": "variants",
            "row": None,
            "key": f"case_id={cid!r}",
            "column": "arm",
            "check": "both_arms",
            "value": f"(no {arm} variant)",
        }
        for cid in cases["case_id"].to_list()
        for arm in ("benign", "attacked")
        if arm not in inputs.get(cid, {})
    ]
    if missing:
        first = missing[0]
        raise ValidationError(
            f"cannot export: {len(missing)} variant(s) missing (first: {first['key']} "
            f"{first['value']})",
            failures_frame(missing),
        )
    lines = [
        json.dumps(_case_object(case, inputs[case["case_id"]])) + "\n"
        for case in cases.iter_rows(named=True)
    ]
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(lines)
    return Path(path)
