"""A direct reader of Inspect logs: the fields the import maps, without Inspect's models.

``inspect_ai.log.read_eval_log`` validates every sample into pydantic models,
its events and messages included; on a log of tens of thousands of samples
that takes longer and far more memory than the import itself. This reader
opens the log's JSON (the ``samples/<id>_epoch_<n>.json`` members of a
``.eval`` zip, one after the other; the ``samples`` array of a ``.json`` log,
one sample at a time through ijson) and keeps only what
:mod:`peira.importers.inspect` maps (docs/spec/eval-logs.md): ids, epoch,
input, choices, target, metadata, the scores, the output's completion, usage,
time, model and stop reason, the error and the limit; and the header's eval
spec, status and results.

It yields light objects with the attribute names of Inspect's own
(``sample.output.usage.input_tokens``, ``log.eval.dataset.sample_ids``, …), so
one mapping turns either into Peira's rows and the two paths cannot drift.
It applies what Inspect's reading does to these fields (defaults of absent
fields, the completion taken from the first choice when empty, the message
text as Inspect's ``ChatMessage.text``, a ``.eval``'s samples sorted by epoch
then id and a ``.json``'s in the file's order, the dataset's sample ids taken
from the samples when the header has none) and nothing else.

What it does not understand it does not guess: a log version other than
:data:`VERSIONS`, a log without ``header.json``, deprecated field names that
Inspect migrates, or a field of a type outside Inspect's schema raise
:class:`Unsupported`, and the importer reads that log through
``read_eval_log`` instead (with a note). Input that is broken for any reader
(a truncated zip, a member that is not JSON, a sample without an id) is an
:class:`~peira.errors.InputFormatError` of one line.
"""

from __future__ import annotations

import functools
import json
import math
import os
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from ..errors import InputFormatError

__all__ = ["VERSIONS", "Unsupported", "read_log", "value_to_float"]

#: The log format versions (the header's ``version``) this reader knows.
VERSIONS = (2,)

#: Inspect's placeholder scorer name, renamed by its reader.
_PLACEHOLDER = "88F74D2C"

_SAMPLES = "samples/"

_CHOSEN = (True,)

_ROLES = ("system", "user", "assistant", "tool")


class Unsupported(Exception):
    """The log is valid for Inspect, perhaps, but not a shape this reader knows."""


def value_to_float(value: Any) -> float:
    """Inspect's default ``value_to_float()``: C/P/I/N, yes/no, true/false, numbers.

    Examples
    --------
    >>> [value_to_float(v) for v in ("C", "P", "I", "N", True, 0.25, "Yes", "0.5", "x")]
    [1.0, 0.5, 0.0, 0.0, 1.0, 0.25, 1.0, 0.5, 0.0]
    """
    if value == "C":
        return 1.0
    if value == "P":
        return 0.5
    if value == "I" or value == "N":
        return 0.0
    if isinstance(value, int | float | bool):
        return float(value)
    if isinstance(value, str):
        low = value.lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            number = float(low)
        except ValueError:
            return 0.0
        return number if math.isfinite(number) else 0.0
    return 0.0


# --- light objects (Inspect's attribute names) ----------------------------------------


class _Obj:
    __slots__: tuple[str, ...] = ()

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)


class Message(_Obj):
    __slots__ = ("role", "text")
    role: str
    text: str


class Usage(_Obj):
    __slots__ = ("input_tokens", "output_tokens", "total_cost")
    input_tokens: int
    output_tokens: int
    total_cost: float | None


class Output(_Obj):
    __slots__ = ("choices", "completion", "model", "stop_reason", "time", "usage")
    model: str
    completion: str
    usage: Usage | None
    time: float | None
    choices: tuple[bool, ...]
    stop_reason: str | None


class Score(_Obj):
    __slots__ = ("answer", "explanation", "value")
    value: Any
    answer: str | None
    explanation: str | None


class Error(_Obj):
    __slots__ = ("message",)
    message: str


class Limit(_Obj):
    __slots__ = ("type",)
    type: str


class Sample(_Obj):
    __slots__ = (
        "choices",
        "epoch",
        "error",
        "id",
        "input",
        "limit",
        "metadata",
        "output",
        "scores",
        "target",
    )
    id: int | str
    epoch: int
    input: str | list[Message]
    choices: list[str] | None
    target: str | list[str]
    metadata: dict[str, Any]
    scores: dict[str, Score] | None
    output: Output
    error: Error | None
    limit: Limit | None


class Dataset(_Obj):
    __slots__ = ("sample_ids", "samples")
    samples: int | None
    sample_ids: list[Any] | None


class Config(_Obj):
    __slots__ = ("epochs", "limit")
    limit: int | tuple[int, int] | None
    epochs: int | None


class Spec(_Obj):
    __slots__ = ("config", "dataset", "eval_id", "model", "task", "task_version")
    eval_id: str
    model: str
    task: str
    task_version: int | str
    dataset: Dataset
    config: Config


class Metric(_Obj):
    __slots__ = ("name", "value")
    name: str
    value: float


class EvalScore(_Obj):
    __slots__ = ("metrics", "name", "scored_samples", "scorer")
    name: str
    scorer: str
    scored_samples: int | None
    metrics: dict[str, Metric]


class Results(_Obj):
    __slots__ = ("scores",)
    scores: list[EvalScore]


class Log(_Obj):
    __slots__ = ("eval", "results", "samples", "status", "version")
    version: int
    status: str
    eval: Spec
    results: Results | None
    samples: list[Sample] | None


# --- field checks: a type outside Inspect's schema is not ours to read ---------------


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise Unsupported(what)


def _opt_str(d: Mapping[str, Any], key: str) -> str | None:
    v = d.get(key)
    _need(v is None or isinstance(v, str), f"field {key!r} is not a string")
    return v


def _int(v: Any, what: str) -> int:
    _need(isinstance(v, int) and not isinstance(v, bool), f"{what} is not an integer")
    return int(v)


def _opt_int(v: Any, what: str) -> int | None:
    return None if v is None else _int(v, what)


def _opt_float(v: Any, what: str) -> float | None:
    if v is None:
        return None
    _need(isinstance(v, int | float) and not isinstance(v, bool), f"{what} is not a number")
    return float(v)


def _content_text(content: Any, what: str) -> str:
    """``ChatMessage.text``: the string, or the text parts joined by newlines."""
    if isinstance(content, str):
        return content
    _need(isinstance(content, list), f"{what}: content is neither text nor a list")
    parts: list[str] = []
    for c in content:
        _need(isinstance(c, dict) and isinstance(c.get("type"), str), f"{what}: content part")
        if c["type"] == "text":
            _need(isinstance(c.get("text"), str), f"{what}: text part without text")
            parts.append(c["text"])
    return "\n".join(parts)


def _messages(value: Any) -> str | list[Message]:
    if isinstance(value, str):
        return value
    _need(isinstance(value, list), "field 'input' is neither text nor messages")
    out: list[Message] = []
    for m in value:
        _need(isinstance(m, dict) and m.get("role") in _ROLES, "an input message")
        out.append(Message(role=m["role"], text=_content_text(m.get("content"), "input")))
    return out


def _output(d: Any) -> Output:
    if d is None:
        d = {}
    _need(isinstance(d, dict), "field 'output' is not an object")
    choices = d.get("choices") or []
    _need(isinstance(choices, list), "field 'output.choices' is not a list")
    completion = d.get("completion") or ""
    _need(isinstance(completion, str), "field 'output.completion' is not a string")
    stop = None
    if choices:
        first = choices[0]
        _need(isinstance(first, dict), "an output choice is not an object")
        msg = first.get("message")
        _need(isinstance(msg, dict), "an output choice has no message")
        if not completion:
            completion = _content_text(msg.get("content"), "output")
        stop = first.get("stop_reason", "unknown")
        _need(isinstance(stop, str), "a stop reason is not a string")
    usage = d.get("usage")
    u: Usage | None = None
    if usage is not None:
        _need(isinstance(usage, dict), "field 'output.usage' is not an object")
        u = Usage(
            input_tokens=_int(usage.get("input_tokens", 0), "usage.input_tokens"),
            output_tokens=_int(usage.get("output_tokens", 0), "usage.output_tokens"),
            total_cost=_opt_float(usage.get("total_cost"), "usage.total_cost"),
        )
    model = d.get("model") or ""
    _need(isinstance(model, str), "field 'output.model' is not a string")
    return Output(
        model=model,
        completion=completion,
        usage=u,
        time=_opt_float(d.get("time"), "output.time"),
        choices=_CHOSEN if choices else (),  # whether there are choices, not the choices
        stop_reason=stop,
    )


def _scalar_ok(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _scores(d: Any) -> dict[str, Score] | None:
    if d is None:
        return None
    _need(isinstance(d, dict), "field 'scores' is not an object")
    out: dict[str, Score] = {}
    for name, s in d.items():
        _need(name != _PLACEHOLDER, "a placeholder scorer name")
        _need(isinstance(s, dict) and "value" in s, f"score {name!r} has no value")
        v = s["value"]
        if isinstance(v, list):
            _need(all(_scalar_ok(x) and x is not None for x in v), "a list score value")
        elif isinstance(v, dict):
            _need(all(isinstance(k, str) and _scalar_ok(x) for k, x in v.items()),
                  "a dictionary score value")  # fmt: skip
        else:
            _need(isinstance(v, str | int | float | bool), "a score value")
        out[name] = Score(value=v, answer=_opt_str(s, "answer"),
                          explanation=_opt_str(s, "explanation"))  # fmt: skip
    return out


def _sample(d: Any, where: str) -> Sample:
    if not isinstance(d, dict):
        raise InputFormatError(f"{where}: a sample is not a JSON object")
    if "id" not in d or d["id"] is None:
        raise InputFormatError(f"{where}: the sample has no 'id'")
    if "epoch" not in d:
        raise InputFormatError(f"{where}: sample {d['id']!r} has no 'epoch'")
    _need("score" not in d, "the deprecated field 'score'")
    sid = d["id"]
    _need(isinstance(sid, str | int) and not isinstance(sid, bool), "field 'id'")
    _need("input" in d and "target" in d, "a sample without input or target")
    target = d["target"]
    _need(isinstance(target, str) or (isinstance(target, list) and all(
        isinstance(t, str) for t in target)), "field 'target'")  # fmt: skip
    choices = d.get("choices")
    _need(choices is None or (isinstance(choices, list) and all(
        isinstance(c, str) for c in choices)), "field 'choices'")  # fmt: skip
    metadata = d.get("metadata", {})
    _need(isinstance(metadata, dict), "field 'metadata' is not an object")
    error = d.get("error")
    err: Error | None = None
    if error is not None:
        _need(isinstance(error, dict) and isinstance(error.get("message"), str), "'error'")
        err = Error(message=error["message"])
    limit = d.get("limit")
    lim: Limit | None = None
    if limit is not None:
        _need(isinstance(limit, dict) and isinstance(limit.get("type"), str), "'limit'")
        lim = Limit(type=limit["type"])
    return Sample(
        id=sid,
        epoch=_int(d["epoch"], "field 'epoch'"),
        input=_messages(d["input"]),
        choices=choices,
        target=target,
        metadata=metadata,
        scores=_scores(d.get("scores")),
        output=_output(d.get("output")),
        error=err,
        limit=lim,
    )


def _header(h: Any) -> tuple[Log, bool]:
    """The light log of a header (no samples yet); True when it names its sample ids."""
    _need(isinstance(h, dict), "the header is not an object")
    version = h.get("version")
    _need(version in VERSIONS, f"log format version {version!r}")
    ev = h.get("eval")
    _need(isinstance(ev, dict), "no eval spec")
    ds = ev.get("dataset") or {}
    cfg = ev.get("config") or {}
    _need(isinstance(ds, dict) and isinstance(cfg, dict), "dataset or config")
    ids = ds.get("sample_ids")
    _need(ids is None or (isinstance(ids, list) and all(
        isinstance(i, str | int) and not isinstance(i, bool) for i in ids)), "sample_ids")  # fmt: skip
    limit = cfg.get("limit")
    if isinstance(limit, list):
        _need(len(limit) == 2 and all(isinstance(x, int) for x in limit), "config.limit")
        limit = tuple(limit)
    else:
        _opt_int(limit, "config.limit")
    for key in ("eval_id", "model", "task"):
        _need(isinstance(ev.get(key), str), f"eval.{key}")
    task_version = ev.get("task_version", 0)
    _need(isinstance(task_version, int | str) and not isinstance(task_version, bool),
          "eval.task_version")  # fmt: skip
    spec = Spec(
        eval_id=ev["eval_id"],
        model=ev["model"],
        task=ev["task"],
        task_version=task_version,
        dataset=Dataset(samples=_opt_int(ds.get("samples"), "dataset.samples"), sample_ids=ids),
        config=Config(limit=limit, epochs=_opt_int(cfg.get("epochs"), "config.epochs")),
    )
    status = h.get("status", "started")
    _need(isinstance(status, str), "status")
    res = h.get("results")
    results: Results | None = None
    if res is not None:
        _need(isinstance(res, dict), "results")
        _need("scorer" not in res, "the deprecated results field 'scorer'")
        scores = []
        for s in res.get("scores") or []:
            _need(isinstance(s, dict) and isinstance(s.get("name"), str), "a results score")
            _need(isinstance(s.get("scorer"), str), "a results scorer")
            metrics = s.get("metrics") or {}
            _need(isinstance(metrics, dict), "results metrics")
            ms: dict[str, Metric] = {}
            for k, m in metrics.items():
                _need(isinstance(m, dict) and isinstance(m.get("name"), str), "a metric")
                val = m.get("value")
                _need(isinstance(val, int | float) and not isinstance(val, bool), "a metric value")
                ms[k] = Metric(name=m["name"], value=val)
            scores.append(EvalScore(name=s["name"], scorer=s["scorer"], metrics=ms,
                                    scored_samples=_opt_int(s.get("scored_samples"), "n")))  # fmt: skip
        results = Results(scores=scores)
    log = Log(version=version, status=status, eval=spec, results=results, samples=None)
    return log, ids is not None


def _finish(log: Log, samples: list[Sample], has_ids: bool, *, order: bool = True) -> Log:
    """The samples into the log as Inspect's reader leaves them: a ``.eval``'s sorted by
    epoch then id (``order``), a ``.json``'s in the file's order."""
    if order:
        samples.sort(
            key=lambda s: (s.epoch, s.id if isinstance(s.id, str) else str(s.id).zfill(20))
        )
    log.samples = samples
    if not has_ids:
        log.eval.dataset.sample_ids = list(dict.fromkeys(s.id for s in samples))
    return log


def _loads(data: bytes | str, where: str) -> Any:
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise InputFormatError(
            f"{where}: not a readable Inspect log: JSON nested too deep"
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputFormatError(
            f"{where}: not a readable Inspect log: not JSON ({_first(exc)})"
        ) from exc


def _zstd() -> None:
    """Teach ``zipfile`` the zstd compression Inspect writes (before Python 3.14)."""
    if not hasattr(zipfile, "ZIP_ZSTANDARD"):
        try:
            import zipfile_zstd  # noqa: F401
        except ImportError as exc:  # pragma: no cover - installed with inspect_ai
            raise Unsupported("zstd-compressed members need zipfile-zstd") from exc


_SAMPLE_FIELDS = ("id", "epoch", "input", "choices", "target", "metadata", "scores",
                  "output", "error", "limit", "score")  # fmt: skip


@functools.cache
def _sample_decoder() -> Any:
    """A msgspec decoder of the sample fields the import maps; the rest of a sample (its
    events and messages, most of its bytes) is skipped unbuilt. None without msgspec."""
    try:
        import msgspec
    except ImportError:  # pragma: no cover - installed with peira[inspect]
        return None
    fields = [(f, Any, msgspec.UNSET) for f in _SAMPLE_FIELDS]
    struct = msgspec.defstruct("InspectSample", fields)
    unset = msgspec.UNSET
    decoder = msgspec.json.Decoder(struct)

    def decode(data: bytes) -> dict[str, Any]:
        got = decoder.decode(data)
        return {f: v for f in _SAMPLE_FIELDS if (v := getattr(got, f)) is not unset}

    return decode, msgspec.DecodeError


def _sample_json(data: bytes, where: str) -> Any:
    """The fields of a sample member: msgspec where it reads the member as Python's json
    would, else (NaN, numbers out of range, a member that is no object) ``json.loads``."""
    fast = _sample_decoder()
    if fast is not None:
        decode, error = fast
        try:
            return decode(data)
        except error:
            pass
    return _loads(data, where)


class _Members:
    """The members of a zip, read by offset with one decompressor: zipfile's own ``read``
    opens a file object and a new zstd decompressor per member, several times the cost
    of the reading on tens of thousands of small members. A member this does not read
    itself (another compression, a bad local header, sizes or CRC that disagree) is
    read by zipfile, whose error is the one reported."""

    def __init__(self, zf: zipfile.ZipFile, fd: int) -> None:
        self.zf, self.fd = zf, fd
        self.zstd: Any = None

    def fast(self, info: zipfile.ZipInfo) -> bytes | None:
        head = os.pread(self.fd, 30, info.header_offset)
        if len(head) < 30 or head[:4] != b"PK\x03\x04" or info.flag_bits & 0x1:
            return None
        start = info.header_offset + 30 + int.from_bytes(head[26:28], "little")
        data = os.pread(self.fd, info.compress_size, start + int.from_bytes(head[28:30], "little"))
        if len(data) != info.compress_size:
            return None
        if info.compress_type == zipfile.ZIP_STORED:
            out = data
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            out = zlib.decompress(data, -15)
        elif info.compress_type == 93:  # zstd, as Inspect writes
            if self.zstd is None:
                import zstandard

                self.zstd = zstandard.ZstdDecompressor()
            out = self.zstd.decompress(data, max_output_size=info.file_size)
        else:
            return None
        if len(out) != info.file_size or zlib.crc32(out) != info.CRC:
            return None
        return bytes(out)


def _read_eval(path: Path) -> Log:
    _zstd()
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise InputFormatError(f"{path}: not a readable Inspect log: {_first(exc)}") from exc
    fd = os.open(path, os.O_RDONLY)
    try:
        with zf:
            infos = {i.filename: i for i in zf.infolist()}  # the last of a repeated name wins
            members = _Members(zf, fd)

            def read(name: str) -> bytes:
                try:
                    raw = members.fast(infos[name])
                except Exception:  # zipfile below reports the member's fault
                    raw = None
                if raw is not None:
                    return raw
                try:
                    return zf.read(infos[name])
                except NotImplementedError as exc:
                    raise Unsupported(f"member {name}: {_first(exc)}") from exc
                except Exception as exc:  # zip, zlib and zstd errors alike
                    raise InputFormatError(
                        f"{path}: not a readable Inspect log: member {name}: {_first(exc)}"
                    ) from exc

            if "header.json" not in infos:
                raise Unsupported("no header.json (a log still being written)")
            log, has_ids = _header(_loads(read("header.json"), f"{path}: member header.json"))
            samples = []
            for name in infos:
                if name.startswith(_SAMPLES) and name.endswith(".json"):
                    where = f"{path}: member {name}"
                    samples.append(_sample(_sample_json(read(name), where), where))
    finally:
        os.close(fd)
    return _finish(log, samples, has_ids)


def _json_samples(f: IO[bytes], path: Path) -> Iterator[Any]:
    """The samples of a ``.json`` log, one at a time (ijson's C backend builds each)."""
    import ijson

    try:
        yield from ijson.items(f, "samples.item", use_float=True)
    except RecursionError as exc:
        raise InputFormatError(f"{path}: not a readable Inspect log: JSON nested too deep") from exc
    except ijson.common.JSONError as exc:
        raise _ijson_error(exc, path) from exc


_MAX_DEPTH = 1000  # as deep as Python's json follows

_HEAD = ("version", "status", "eval", "results")


def _first(exc: BaseException) -> str:
    """The first line of an exception's message (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def _ijson_error(exc: Exception, path: Path) -> Exception:
    # NaN/Infinity are Python's JSON (Inspect reads them), not ijson's: leave those to Inspect
    text = str(exc).lower()
    if "nan" in text or "infinity" in text or "lexical" in text:
        return Unsupported(f"JSON that ijson does not read ({_first(exc)})")
    return InputFormatError(f"{path}: not a readable Inspect log: {_first(exc)}")


def _json_header(f: IO[bytes], path: Path) -> dict[str, Any]:
    """The header fields of a ``.json`` log: those before ``samples`` (Inspect writes the
    header first) are read in one go; any still missing, by a pass of its own."""
    import ijson

    head: dict[str, Any] = {}
    try:
        # basic_parse: events without prefixes, whose building is quadratic in the depth
        events = ijson.basic_parse(f, use_float=True)
        first = next(events, None)
        if first is None or first[0] != "start_map":
            raise InputFormatError(f"{path}: not a readable Inspect log: not a JSON object")
        for event, key in events:
            if event != "map_key" or key == "samples":
                break
            builder = ijson.ObjectBuilder()
            depth = 0
            for ev, v in events:
                builder.event(ev, v)
                if ev in ("start_map", "start_array"):
                    depth += 1
                    if depth > _MAX_DEPTH:
                        raise RecursionError
                elif ev in ("end_map", "end_array"):
                    depth -= 1
                if depth == 0:
                    break
            head[key] = builder.value
        for key in _HEAD:
            if key not in head:
                f.seek(0)
                for value in ijson.items(f, key, use_float=True):
                    head[key] = value
                    break
    except RecursionError as exc:
        raise InputFormatError(f"{path}: not a readable Inspect log: JSON nested too deep") from exc
    except ijson.common.JSONError as exc:
        raise _ijson_error(exc, path) from exc
    return head


def _read_json(path: Path) -> Log:
    try:
        f = path.open("rb")
    except OSError as exc:
        raise InputFormatError(f"{path}: not a readable Inspect log: {_first(exc)}") from exc
    with f:
        head = _json_header(f, path)
        log, has_ids = _header(head)
        f.seek(0)
        samples = [
            _sample(d, f"{path}: sample #{i + 1}") for i, d in enumerate(_json_samples(f, path))
        ]
    if not samples and "samples" not in head:
        # no samples array at all (log_samples=False), as Inspect reads it; the
        # header pass stops at the array, so look for its key once more
        f2 = path.open("rb")
        with f2:
            import ijson

            found = any(p == "" and e == "map_key" and v == "samples"
                        for p, e, v in ijson.parse(f2))  # fmt: skip
        if not found:
            log.samples = None
            return log
    return _finish(log, samples, has_ids, order=False)


def read_log(path: Path) -> Log:
    """The light log of ``path`` (``.eval`` or ``.json``).

    Raises
    ------
    Unsupported
        The log is not a shape this reader knows: read it with Inspect.
    InputFormatError
        The log is broken (no zip, a member that is not JSON, a sample
        without an id); the message names the file and the member.
    """
    if path.suffix == ".eval":
        return _read_eval(path)
    return _read_json(path)
