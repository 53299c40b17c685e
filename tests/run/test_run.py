"""The runner (peira.run), the built-in adapters and the run/rescore CLI."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.adapters import ARCHETYPES, AsyncConstant, Constant, Replay, Simulated
from peira.cli import main
from peira.cli.run import parse_adapter_args
from peira.errors import PeiraError, PeiraWarning
from peira.holdout import BLIND_COLUMNS, blind, pseudonyms
from peira.io import Dataset, read_parquet, write_dataset, write_parquet
from peira.parse import parse_responses
from peira.run import (
    REQUEST_FIELDS,
    AdapterError,
    Decision,
    Request,
    ResumeError,
    RunError,
    TransientError,
    load_adapter,
    parts_dir,
    run,
)
from peira.schema import RESPONSES_SCHEMA, validate_responses
from peira.synth import generate

KEY = b"0123456789abcdef-test-key"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> Any:
    return generate(60, 8, seed=5, samples=2)


@pytest.fixture
def ds(bench: Any, tmp_path: Path) -> Dataset:
    return write_dataset(bench.cases, bench.variants, tmp_path / "ds")


class Recorder:
    """Records every request (thread-safe append) and answers like ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.version = inner.name, inner.version
        self.seen: list[Request] = []

    def decide(self, request: Request) -> Decision:
        self.seen.append(request)
        out: Decision = self.inner.decide(request)
        return out

    def config(self) -> dict[str, Any]:
        """The inner adapter's configuration (the recording changes no answer)."""
        inner = getattr(self.inner, "config", None)
        return {"inner": type(self.inner).__qualname__, **(inner() if inner else {})}


class Interrupting(Recorder):
    """Raises ``exc`` on call number ``after + 1`` (and after); never when ``after`` is None.

    The same class resumes the run (``Interrupting(inner)``): a resume with
    another adapter class is refused.
    """

    def __init__(
        self,
        inner: Any,
        after: int | None = None,
        exc: type[BaseException] = KeyboardInterrupt,
        delay: float = 0.0,
    ) -> None:
        super().__init__(inner)
        self.after, self.exc, self.delay = after, exc, delay
        self.lock = threading.Lock()
        self.n = 0

    def decide(self, request: Request) -> Decision:
        with self.lock:
            self.n += 1
            n = self.n
        if self.after is not None and n > self.after:
            raise self.exc()
        if self.delay:
            time.sleep(self.delay)
        return super().decide(request)


def _run(adapter: Any, ds: Dataset, out: Path, **kw: Any) -> Any:
    kw.setdefault("progress", False)
    return run(adapter, ds, out, **kw)


# ---------------------------------------------------------------- blindness


def test_adapter_sees_only_the_blinded_fields(ds: Dataset, tmp_path: Path) -> None:
    rec = Recorder(Simulated(ds, archetype="fragile"))
    res = _run(rec, ds, tmp_path / "log.parquet", key=KEY, samples=2, concurrency=4)
    assert len(rec.seen) == res.n_total == 2 * ds.variants.height
    assert (*BLIND_COLUMNS, "sample") == REQUEST_FIELDS
    for req in rec.seen:
        assert type(req) is Request
        assert tuple(f.name for f in dataclasses.fields(req)) == REQUEST_FIELDS
        assert not hasattr(req, "__dict__")  # slots: nothing can be attached
        with pytest.raises(dataclasses.FrozenInstanceError):
            req.prompt = "x"  # type: ignore[misc]
    # the values are exactly the blinded export's rows, nothing else
    export = blind(ds, KEY)
    seen = pl.DataFrame(
        [
            {
                "variant_id": r.variant_id,
                "primitive": r.primitive,
                "prompt": r.prompt,
                "options": list(r.options),
                "input": r.input,
            }
            for r in rec.seen
            if r.sample == 0
        ]
    ).sort("variant_id")
    assert seen.equals(export)
    case_ids = set(ds.cases["case_id"].to_list())
    assert not any(r.variant_id in case_ids or "|" in r.variant_id for r in rec.seen)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_no_key_or_pseudonym_is_written(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "run" / "log.parquet"
    rec = Interrupting(Constant())
    with pytest.raises(KeyboardInterrupt):
        _run(Interrupting(Constant(), 40, KeyboardInterrupt), ds, out, key=KEY,
             checkpoint_every=7)  # fmt: skip
    _run(rec, ds, out, key=KEY, keep_parts=True, checkpoint_every=7)
    files = [f for f in (tmp_path / "run").rglob("*") if f.is_file()]
    assert len(files) > 3
    ids = [v.encode() for v in pseudonyms(ds.variants, KEY)["variant_id"].to_list()]
    for f in files:
        data = f.read_bytes()
        assert KEY not in data, f
        assert not any(v in data for v in ids), f
    # (Parquet pages are compressed, so check the decoded columns too)
    for f in parts_dir(out).glob("*.parquet"):
        assert set(read_parquet(f).columns) == set(RESPONSES_SCHEMA)


def test_ids_and_order_reveal_no_pairing_or_arm(ds: Dataset, tmp_path: Path) -> None:
    rec = Recorder(Constant())
    _run(rec, ds, tmp_path / "log.parquet", key=KEY, samples=2, concurrency=1)
    order = [(r.sample, r.variant_id) for r in rec.seen]
    assert order == sorted(order)  # dispatch: sample, then variant_id
    ids = pseudonyms(ds.variants, KEY)
    by_case = ids.group_by("case_id").agg(pl.col("variant_id").sort_by("arm"))
    prefixes = [
        _common_prefix(b[2:], a[2:]) for a, b in by_case["variant_id"].to_list()
    ]  # hex after "v-"
    # under independence P(prefix >= k) = 16^-k: the mean is 1/15, P(>= 3) < 1/4000
    assert sum(prefixes) / len(prefixes) < 0.4
    assert max(prefixes) <= 3
    # position in the dispatch order says nothing about the arm or the pair
    first = [r.variant_id for r in rec.seen if r.sample == 0]
    pos = {v: i for i, v in enumerate(first)}
    arm_of = dict(zip(ids["variant_id"], ids["arm"], strict=True))
    benign_pos = [pos[v] for v in first if arm_of[v] == "benign"]
    n = len(first)
    assert abs(sum(benign_pos) / len(benign_pos) - (n - 1) / 2) < n / 6
    gaps = [abs(pos[a] - pos[b]) for a, b in by_case["variant_id"].to_list()]
    assert sum(g == 1 for g in gaps) <= 5  # adjacent pairs: expected ~2 of 60


def test_ephemeral_key_changes_ids_not_results(ds: Dataset, tmp_path: Path) -> None:
    a, b = Recorder(Simulated(ds)), Recorder(Simulated(ds))
    ra = _run(a, ds, tmp_path / "a.parquet")
    rb = _run(b, ds, tmp_path / "b.parquet")
    assert {r.variant_id for r in a.seen}.isdisjoint({r.variant_id for r in b.seen})
    assert ra.responses.equals(rb.responses)
    assert not any(p.name.endswith(".parts") for p in tmp_path.iterdir())


# ---------------------------------------------------------------- results


def test_run_writes_a_valid_sorted_log(ds: Dataset, tmp_path: Path) -> None:
    res = _run(Simulated(ds, archetype="malformed"), ds, tmp_path / "log.parquet", samples=2)
    log = read_parquet(tmp_path / "log.parquet")
    assert log.equals(res.responses)
    assert log.schema == pl.Schema(RESPONSES_SCHEMA)
    assert log.height == 2 * ds.variants.height
    assert log.equals(log.sort("run_id", "case_id", "arm", "sample"))
    validate_responses(log, cases=ds.cases)
    assert res.run_id == "synth-malformed-sim-1" and res.n_resumed == 0
    assert res.n_called == log.height and res.n_malformed == int(log["malformed"].sum()) > 0
    assert not parts_dir(tmp_path / "log.parquet").exists()
    # the simulated raw text re-parses to the logged columns
    again = parse_responses(log, ds.cases, parser="synth")
    for c in ("decision", "abstained", "refusal_reason", "score", "confidence", "malformed"):
        assert again[c].equals(log[c]), c


def test_simulated_is_deterministic_across_concurrency_and_keys(
    ds: Dataset, tmp_path: Path
) -> None:
    logs = [
        _run(Simulated(ds, archetype="abstain-dos"), ds, tmp_path / f"{i}.parquet",
             concurrency=c, key=k, samples=2).responses
        for i, (c, k) in enumerate([(1, KEY), (8, None), (3, b"another-key-0123456789")])
    ]  # fmt: skip
    assert logs[0].equals(logs[1]) and logs[0].equals(logs[2])


def test_async_and_sync_adapters_agree(ds: Dataset, tmp_path: Path) -> None:
    a = _run(Constant(index=1), ds, tmp_path / "a.parquet", key=KEY)
    b = _run(AsyncConstant(index=1), ds, tmp_path / "b.parquet", key=KEY)
    drop = ["latency_ms"]
    assert a.responses.drop(drop).equals(b.responses.drop(drop))
    assert a.n_malformed == 0


def test_simulation_is_honest_without_an_oracle(ds: Dataset, tmp_path: Path) -> None:
    from peira._pairs import build_pairs
    from peira.metrics import metric_table

    knows = _run(Simulated(ds, archetype="robust"), ds, tmp_path / "k.parquet", samples=2)
    with pytest.warns(PeiraWarning, match="no oracle: it answers uninformed"):
        uninformed = Simulated(None, archetype="robust")
    blind_ = _run(uninformed, ds, tmp_path / "b.parquet", samples=2)
    acc = [
        metric_table(build_pairs(r.responses, ds.cases))["benign_accuracy"][0]
        for r in (knows, blind_)
    ]
    assert acc[0] > 0.8 and acc[1] < 0.7


def test_replay_reproduces_the_synthetic_log_row_for_row(
    bench: Any, ds: Dataset, tmp_path: Path
) -> None:
    # (tests/run/test_run.py::test_cli_run_and_rescore replays m06-malformed too)
    for run_id in ("m01-robust", "m03-abstain-dos", "m04-always-abstain", "m07-score-shift"):
        rep = Replay(bench.responses, ds, key=KEY, run_id=run_id)
        res = _run(rep, ds, tmp_path / f"{run_id}.parquet", key=KEY, samples=2, concurrency=4)
        expected = bench.responses.filter(pl.col("run_id") == run_id)
        assert res.responses.equals(expected), run_id


def test_replay_needs_the_runner_key(bench: Any, ds: Dataset, tmp_path: Path) -> None:
    rep = Replay(bench.responses, ds, key=b"not-the-runner-key!!", run_id="m01-robust")
    res = _run(rep, ds, tmp_path / "x.parquet", key=KEY, samples=2)
    assert res.responses["malformed"].all()
    assert res.responses["error"].str.starts_with("adapter error: KeyError").all()
    with pytest.raises(PeiraError, match="8 runs"):
        Replay(bench.responses, ds, key=KEY)
    with pytest.raises(PeiraError, match="pseudonym key"):
        Replay(bench.responses, ds, run_id="m01-robust")


# ---------------------------------------------------------------- failures


class Flaky:
    """Misbehaves by variant: a row's fate is a function of its prompt content."""

    name, version = "flaky", "0"

    def __init__(self) -> None:
        self.attempts: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()

    @staticmethod
    def kind(req: Request) -> int:
        return sum(req.prompt.encode()) % 12

    def attempt(self, req: Request) -> int:
        with self.lock:
            k = (req.variant_id, req.sample)
            self.attempts[k] = self.attempts.get(k, 0) + 1
            return self.attempts[k]

    def answer(self, req: Request, attempt: int) -> Any:
        opt = req.options[0]
        match self.kind(req):
            case 0:
                raise TransientError("rate limited")  # always: retries exhausted
            case 1:
                if attempt == 1:
                    raise TransientError("blip")  # recovers on retry
                return Decision(decision=opt)
            case 3:
                raise ValueError("boom")
            case 4:
                return Decision(decision="maybe", raw_text="maybe")
            case 5:
                return Decision(decision=opt, score=1.5)
            case 6:
                return Decision(decision=opt, confidence=-0.1)
            case 7:
                return "approve"
            case 8:
                return Decision()
            case 9:
                return Decision(decision=opt, abstained=True)
            case 10:
                return Decision(error="HTTP 503 from provider", tokens_in=5)
            case _:  # 2 (after a sleep beyond the timeout) and 11
                return Decision(decision=opt, confidence=0.5, raw_text=f"Decision: {opt}")

    def decide(self, req: Request) -> Any:
        attempt = self.attempt(req)
        if self.kind(req) == 2:
            time.sleep(1.0)
        return self.answer(req, attempt)


class AsyncFlaky(Flaky):
    async def decide(self, req: Request) -> Any:
        attempt = self.attempt(req)
        if self.kind(req) == 2:
            await asyncio.sleep(1.0)
        return self.answer(req, attempt)


EXPECTED_ERRORS = {
    0: "transient error: rate limited (3 attempts)",
    1: None,
    2: "timeout after 0.25 s (3 attempts)",
    3: "adapter error: ValueError: boom",
    4: "decision outside options: 'maybe'",
    5: "score outside [0, 1]: 1.5",
    6: "confidence outside [0, 1]: -0.1",
    7: "invalid output: expected a Decision, got str",
    8: "invalid output: neither a decision nor an abstention",
    9: "conflicting output: abstains and decides",
    10: "HTTP 503 from provider",
    11: None,
}


@pytest.mark.parametrize("cls", [Flaky, AsyncFlaky])
def test_flaky_adapter_gives_a_complete_log_with_reasons(
    cls: type[Flaky], ds: Dataset, tmp_path: Path
) -> None:
    adapter = cls()
    res = _run(
        adapter, ds, tmp_path / "log.parquet", key=KEY, timeout=0.25, retries=2,
        backoff=0.001, concurrency=16, checkpoint_every=13,
    )  # fmt: skip
    log = res.responses
    assert log.height == ds.variants.height  # nothing dropped
    validate_responses(log, cases=ds.cases)
    kinds = ds.variants.select("case_id", "arm").with_columns(
        pl.Series("kind", [sum(p.encode()) % 12 for p in ds.variants["prompt"].to_list()])
    )
    joined = log.join(kinds, on=["case_id", "arm"])
    seen = set(joined["kind"].to_list())
    assert seen >= {0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11}  # a 60-case dataset covers them
    for row in joined.iter_rows(named=True):
        want = EXPECTED_ERRORS[row["kind"]]
        if want is None:
            assert not row["malformed"] and row["decision"] is not None, row
        else:
            assert row["malformed"] and row["decision"] is None, row
            assert row["error"].startswith(want), (row["error"], want)
    assert joined.filter(pl.col("kind") == 10)["tokens_in"].to_list() == [5] * int(
        (joined["kind"] == 10).sum()
    )
    assert joined.filter(pl.col("kind") == 4)["raw_text"].eq("maybe").all()
    n0 = int((joined["kind"] == 0).sum())
    n1 = int((joined["kind"] == 1).sum())
    n2 = int((joined["kind"] == 2).sum())
    # (at least: on a loaded machine an ordinary call may time out once and be retried)
    assert res.n_retries >= 2 * n0 + n1 + 2 * n2


# ---------------------------------------------------------------- resume


@pytest.mark.parametrize(
    ("exc", "concurrency", "every"), [(KeyboardInterrupt, 3, 7), (SystemExit, 1, 10)]
)
def test_interrupted_run_resumes_to_the_uninterrupted_log(
    exc: type[BaseException], concurrency: int, every: int, ds: Dataset, tmp_path: Path
) -> None:
    out = tmp_path / "log.parquet"
    full = _run(Simulated(ds, archetype="fragile"), ds, tmp_path / "full.parquet", samples=2)

    first = Interrupting(Simulated(ds, archetype="fragile"), after=95, exc=exc)
    with pytest.raises(exc):
        _run(first, ds, out, key=KEY, samples=2, concurrency=concurrency,
             checkpoint_every=every)  # fmt: skip
    assert not out.exists()
    parts = sorted(parts_dir(out).glob("part-*.parquet"))
    assert parts and (parts_dir(out) / "manifest.json").exists()
    saved = pl.concat([read_parquet(p) for p in parts])
    assert "variant_id" not in saved.columns  # no pseudonym map on disk
    # every call completed before the interrupt was checkpointed (calls still in
    # flight on other workers are lost and redone)
    n_saved = saved.height
    assert 95 - concurrency < n_saved <= 95
    ids = pseudonyms(ds.variants, KEY)
    saved_keys = set(
        saved.join(ids, on=["case_id", "arm"]).select("variant_id", "sample").iter_rows()
    )

    second = Interrupting(Simulated(ds, archetype="fragile"))
    res = _run(second, ds, out, key=KEY, samples=2, concurrency=4, checkpoint_every=every)
    again = {(r.variant_id, r.sample) for r in second.seen}
    assert again.isdisjoint(saved_keys)  # no completed call was redone
    assert len(second.seen) == res.n_called == full.n_total - n_saved
    assert res.n_resumed == n_saved
    assert res.responses.equals(full.responses)
    assert read_parquet(out).equals(full.responses)
    assert not parts_dir(out).exists()


def test_run_async_raises_run_interrupted(ds: Dataset, tmp_path: Path) -> None:
    from peira.run import RunInterrupted, run_async

    adapter = Interrupting(Constant(), 12, SystemExit)
    coro = run_async(adapter, ds, tmp_path / "l.parquet", checkpoint_every=4, concurrency=1)
    with pytest.raises(RunInterrupted, match="SystemExit") as e:
        asyncio.run(coro)
    assert isinstance(e.value.cause, SystemExit)
    saved = sum(read_parquet(p).height for p in parts_dir(tmp_path / "l.parquet").glob("p*"))
    assert saved == 12


def test_resume_under_another_key(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    with pytest.raises(KeyboardInterrupt):
        _run(Interrupting(Constant(), 30, KeyboardInterrupt), ds, out, checkpoint_every=5)
    res = _run(Interrupting(Constant()), ds, out)  # a fresh ephemeral key
    assert res.n_resumed == 30 and res.n_called == ds.variants.height - 30
    assert res.responses.drop("latency_ms").equals(
        _run(Constant(), ds, tmp_path / "b.parquet").responses.drop("latency_ms")
    )


_KILL_SCRIPT = """
import sys
from peira.adapters import Simulated
from peira.io import read_dataset
from peira.run import run
from tests.run.test_run import Interrupting

ds = read_dataset(sys.argv[1])
run(Interrupting(Simulated(ds, archetype="conf-spoof"), delay=0.01), ds, sys.argv[2],
    key=b"0123456789abcdef-test-key", samples=2, concurrency=2, checkpoint_every=10,
    checkpoint_seconds=None, progress=False)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_process_resumes(sig: signal.Signals, ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", _KILL_SCRIPT, str(ds.path), str(out)],
        env=env,
        stderr=subprocess.PIPE,
    ) as proc:
        pdir = parts_dir(out)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(pdir.glob("part-*.parquet"))) < 3:
            if proc.poll() is not None:
                proc.communicate()
                pytest.fail("the run finished before it could be killed")
            time.sleep(0.01)
        proc.send_signal(sig)
        _, err = proc.communicate()
    assert proc.returncode != 0
    if sig == signal.SIGINT:  # Ctrl-C: a KeyboardInterrupt after the checkpoint is written
        assert b"KeyboardInterrupt" in err
    assert not out.exists()
    n_saved = sum(read_parquet(p).height for p in pdir.glob("part-*.parquet"))
    assert 30 <= n_saved < 2 * ds.variants.height

    rec = Interrupting(Simulated(ds, archetype="conf-spoof"))
    res = _run(rec, ds, out, key=KEY, samples=2, checkpoint_every=10)
    assert res.n_resumed == n_saved and len(rec.seen) == res.n_total - n_saved
    full = _run(Simulated(ds, archetype="conf-spoof"), ds, tmp_path / "full.parquet", samples=2)
    assert res.responses.equals(full.responses)


def test_checkpoint_of_another_run_is_refused(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    with pytest.raises(KeyboardInterrupt):
        _run(Interrupting(Constant(), 10, KeyboardInterrupt), ds, out, checkpoint_every=5)
    with pytest.raises(ResumeError, match="samples: 1 → 2"):
        _run(Interrupting(Constant()), ds, out, samples=2)
    with pytest.raises(ResumeError, match=re.escape("run_id: 'constant-1.0' → 'other'")):
        _run(Interrupting(Constant()), ds, out, run_id="other")
    with pytest.raises(
        ResumeError,
        match=re.escape("adapter: 'tests.run.test_run:Interrupting' → 'peira.adapters:Constant'"),
    ):
        _run(Constant(), ds, out)
    # stray parts without a manifest
    stray = tmp_path / "stray.parquet"
    parts_dir(stray).mkdir()
    write_parquet(pl.DataFrame(schema=RESPONSES_SCHEMA), parts_dir(stray) / "part-00001.parquet")
    with pytest.raises(ResumeError, match=r"without manifest\.json"):
        _run(Constant(), ds, stray)


def test_keep_parts_and_progress(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    stream = io.StringIO()
    res = run(Constant(), ds, out, keep_parts=True, checkpoint_every=50, progress=True,
              progress_stream=stream)  # fmt: skip
    n = res.n_total
    assert len(list(parts_dir(out).glob("part-*.parquet"))) == -(-n // 50)
    text = stream.getvalue()
    assert f"{n}/{n} (100.0%)" in text and "calls/s" in text and "ETA" in text
    quiet = io.StringIO()
    run(Constant(), ds, tmp_path / "q.parquet", progress=False, progress_stream=quiet)
    assert quiet.getvalue() == ""


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"samples": 0}, "samples must be an integer >= 1"),
        ({"concurrency": 0}, "concurrency must be an integer >= 1"),
        ({"retries": -1}, "retries must be an integer >= 0"),
        ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"run_id": ""}, "run_id must be a non-empty string"),
    ],
)
def test_bad_run_arguments(kw: dict[str, Any], message: str, ds: Dataset, tmp_path: Path) -> None:
    with pytest.raises(RunError, match=message):
        _run(Constant(), ds, tmp_path / "x.parquet", **kw)
    assert not (tmp_path / "x.parquet").exists()


def test_adapter_protocol_and_loading() -> None:
    class NoDecide:
        name, version = "x", "1"

    with pytest.raises(AdapterError, match="missing or wrong: decide"):
        run(NoDecide(), "nowhere", "x.parquet")
    assert isinstance(load_adapter("peira.adapters:Constant", index=1), Constant)
    for spec, message in [
        ("peira.adapters", "expected module:Class"),
        ("peira.nope:X", "cannot import"),
        ("peira.adapters:Nope", "has no attribute"),
        ("peira.adapters:content_key", "cannot construct it"),
    ]:
        with pytest.raises(AdapterError, match=message):
            load_adapter(spec)
    with pytest.raises(AdapterError, match="cannot construct"):
        load_adapter("peira.adapters:Constant", bogus=1)
    assert issubclass(TransientError, PeiraError) and issubclass(RunError, PeiraError)
    assert set(ARCHETYPES) >= {"robust", "fragile", "abstain-dos", "always-abstain"}
    with pytest.raises(PeiraError, match="unknown archetype"):
        Simulated(None, archetype="nope")


# ---------------------------------------------------------------- CLI


def _cli(argv: Sequence[str]) -> int:
    return main(list(argv))


def test_cli_run_and_rescore(
    bench: Any, ds: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY + b"\n")
    out = tmp_path / "run.parquet"
    code = _cli([
        "run", "--adapter", "peira.adapters:Simulated", "--adapter-arg", f"dataset={ds.path}",
        "--adapter-arg", "archetype=fragile", "--adapter-arg", "seed=2", "--dataset",
        str(ds.path), "--out", str(out), "--samples", "2", "--key-file", str(key_file),
        "--no-progress", "--concurrency", "4",
    ])  # fmt: skip
    assert code == 0
    line = capsys.readouterr().out
    assert f"{out}: 240 responses of run 'synth-fragile-sim-1'" in line and "calls/s" in line
    log = read_parquet(out)
    assert log.equals(
        _run(
            Simulated(ds, archetype="fragile", seed=2), ds, tmp_path / "py.parquet", samples=2
        ).responses
    )

    # replay the synthetic log through the CLI: identical rows
    bench.responses.write_parquet(tmp_path / "synth.parquet")
    rep = tmp_path / "replay.parquet"
    assert _cli([
        "run", "--adapter", "peira.adapters:Replay", "--adapter-arg", f"log={tmp_path}/synth.parquet",
        "--adapter-arg", f"dataset={ds.path}", "--adapter-arg", f"key_file={key_file}",
        "--adapter-arg", "run_id=m06-malformed", "--dataset", str(ds.path), "--out", str(rep),
        "--samples", "2", "--key-file", str(key_file), "--no-progress",
    ]) == 0  # fmt: skip
    assert read_parquet(rep).equals(bench.responses.filter(pl.col("run_id") == "m06-malformed"))
    capsys.readouterr()

    # rescore with the default parser: nothing changes
    assert _cli(["rescore", str(out), "--dataset", str(ds.path)]) == 0
    text = capsys.readouterr().out
    assert "changes per run" in text and "synth-fragile-sim-1" in text
    assert "metric deltas" in text

    # a parser that ignores abstentions changes pairs and metrics
    changes = tmp_path / "changes.parquet"
    reparsed = tmp_path / "reparsed.parquet"
    assert _cli([
        "rescore", str(out), "--dataset", str(ds.path), "--parser", "decision-line",
        "--format", "json", "--changes-out", str(changes), "--responses-out", str(reparsed),
    ]) == 0  # fmt: skip
    rows = [pl.read_ndjson(io.StringIO(ln)) for ln in capsys.readouterr().out.splitlines()]
    assert rows and all(r["changed"][0] for r in rows)
    assert any(r["metric"][0] == "abstention_rate_attacked" for r in rows)
    assert {"eligible_logged", "flipped_reparsed"} <= set(read_parquet(changes).columns)
    assert read_parquet(reparsed).height == log.height

    assert _cli(["rescore", str(out), "--dataset", str(ds.path), "--report", "summary",
                 "--format", "csv"]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("run_id,n_rows,n_rows_changed")
    code = _cli(
        ["rescore", str(out), "--dataset", str(ds.path), "--report", "all", "--format", "csv"]
    )
    assert code == 2 and "--report all needs" in capsys.readouterr().err


def test_cli_run_ephemeral_key_and_adapter_args(
    ds: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.delenv("PEIRA_HOLDOUT_KEY", raising=False)
    out = tmp_path / "c.parquet"
    assert _cli(["run", "--adapter", "peira.adapters:AsyncConstant", "--dataset", str(ds.path),
                 "--out", str(out), "--progress", "--run-id", "const"]) == 0  # fmt: skip
    cap = capsys.readouterr()
    assert "calls/s" in cap.err and "ETA" in cap.err
    assert read_parquet(out)["run_id"].unique().to_list() == ["const"]
    assert parse_adapter_args(["a=1", "b=x y", "c=[1]", "d=true"]) == {
        "a": 1, "b": "x y", "c": [1], "d": True
    }  # fmt: skip
    with pytest.raises(PeiraError, match="NAME=VALUE"):
        parse_adapter_args(["nope"])


class CliInterrupting(Interrupting):
    """Loadable as ``tests.run.test_run:CliInterrupting``: Ctrl-C after ``after`` calls."""

    def __init__(self, after: int | None = 25) -> None:
        super().__init__(Constant(), after, KeyboardInterrupt)


def test_cli_run_interrupted_then_resumed(
    ds: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "log.parquet"
    base = ["run", "--dataset", str(ds.path), "--out", str(out), "--checkpoint-every", "5",
            "--concurrency", "1", "--no-progress", "--run-id", "r"]  # fmt: skip
    assert _cli([*base, "--adapter", "tests.run.test_run:CliInterrupting"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and str(parts_dir(out)) in err and "resume" in err
    # another adapter class is refused; the same one (not interrupting) resumes
    assert _cli([*base, "--adapter", "peira.adapters:Constant"]) == 2  # a ResumeError
    assert "adapter: 'tests.run.test_run:CliInterrupting'" in capsys.readouterr().err
    assert _cli([*base, "--adapter", "tests.run.test_run:CliInterrupting",
                 "--adapter-arg", "after=null"]) == 0  # fmt: skip
    assert "25 resumed from checkpoints" in capsys.readouterr().out
    assert read_parquet(out).height == ds.variants.height


def test_main_cli_wiring(bench: Any, ds: Dataset, tmp_path: Path, capsys: Any) -> None:
    from peira.cli import main

    log = tmp_path / "synth.parquet"
    bench.responses.write_parquet(log)
    assert main(["rescore", str(log), "--dataset", str(ds.path), "--report", "summary"]) == 0
    assert "m08-hill-climber" in capsys.readouterr().out
    assert main(["rescore", str(log), "--dataset", str(ds.path), "--parser", "nope"]) == 2
    assert "unknown parser 'nope'" in capsys.readouterr().err
    code = main(["run", "--adapter", "peira.adapters:Nope", "--dataset", str(ds.path),
                 "--out", str(tmp_path / "x.parquet")])  # fmt: skip
    assert code == 2 and "has no attribute" in capsys.readouterr().err


# ---------------------------------------------------------------- review fixes


def test_cli_gives_the_dataset_to_an_adapter_that_takes_one(
    ds: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sim.parquet"
    assert _cli(["run", "--adapter", "peira.adapters:Simulated", "--dataset", str(ds.path),
                 "--out", str(out), "--no-progress"]) == 0  # fmt: skip
    informed = _run(Simulated(ds), ds, tmp_path / "py.parquet")
    assert read_parquet(out).drop("latency_ms").equals(informed.responses.drop("latency_ms"))
    # an explicit --adapter-arg dataset=... wins (here: no oracle, with a warning)
    capsys.readouterr()
    assert _cli(["run", "--adapter", "peira.adapters:Simulated", "--adapter-arg",
                 "dataset=null", "--dataset", str(ds.path), "--out",
                 str(tmp_path / "u.parquet"), "--no-progress"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("peira: warning:") == 1 and "uninformed" in err


class Crowded:
    """A sync adapter that sleeps ``delay`` s and records the most calls in flight at once."""

    name, version = "crowded", "1"

    def __init__(self, delay: float) -> None:
        self.delay, self.lock = delay, threading.Lock()
        self.now = self.most = self.calls = 0

    def decide(self, request: Request) -> Decision:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.delay)
        finally:
            with self.lock:
                self.now -= 1
        return Decision(decision=request.options[0])


def test_timed_out_sync_calls_never_exceed_the_concurrency(tmp_path: Path) -> None:
    small = generate(4, 1, seed=3)
    d = write_dataset(small.cases, small.variants, tmp_path / "ds")
    adapter = Crowded(delay=0.3)
    res = _run(adapter, d, tmp_path / "l.parquet", concurrency=2, timeout=0.02, retries=1,
               backoff=0.0)  # fmt: skip
    assert adapter.most <= 2
    assert adapter.calls == 2 * res.n_total  # every call timed out and was retried once
    assert res.n_malformed == res.n_total
    assert set(res.responses["error"]) == {"timeout after 0.02 s (2 attempts)"}


class Threads:
    """A sync adapter that records the thread of every call; ``hang`` calls block until released."""

    name, version = "threads", "1"

    def __init__(self, hang: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.lock, self.release = threading.Lock(), threading.Event()
        self.idents: list[int] = []
        self.hang, self.n = hang, 0

    def decide(self, request: Request) -> Decision:
        with self.lock:
            n, self.n = self.n, self.n + 1
            self.idents.append(threading.get_ident())
        if n in self.hang:
            self.release.wait(30)
        return Decision(decision=request.options[0])


def _call_threads(before: Sequence[threading.Thread] = ()) -> list[threading.Thread]:
    """The runner's call threads alive now (but those of ``before``: other tests' leftovers)."""
    return [
        t for t in threading.enumerate() if t.name.startswith("peira-call-") and t not in before
    ]


def test_sync_calls_reuse_threads_never_more_than_the_concurrency(
    ds: Dataset, tmp_path: Path
) -> None:
    before = _call_threads()
    adapter = Threads()
    res = _run(adapter, ds, tmp_path / "l.parquet", samples=3, concurrency=3)
    assert res.n_called == len(adapter.idents) == 3 * ds.variants.height
    assert 1 <= len(set(adapter.idents)) <= 3  # threads are reused, never more than the slots
    for t in _call_threads(before):  # the idle threads are told to stop when the run ends
        t.join(5)
    assert not _call_threads(before)


def test_a_hung_sync_call_holds_one_thread_and_never_blocks_the_others(tmp_path: Path) -> None:
    small = generate(6, 1, seed=4)
    d = write_dataset(small.cases, small.variants, tmp_path / "ds")
    before = _call_threads()
    adapter = Threads(hang={0})
    res = _run(adapter, d, tmp_path / "l.parquet", concurrency=2, timeout=0.3, retries=0)
    # the first call hung and timed out, keeping its thread (and slot); the rest went on
    assert res.n_malformed == 1 and res.n_called == res.n_total == 12
    assert set(res.responses["error"].drop_nulls()) == {"timeout after 0.3 s (1 attempt)"}
    assert adapter.idents.count(adapter.idents[0]) == 1  # nothing else ran on the hung thread
    assert len(set(adapter.idents)) == 2
    hung = _call_threads(before)
    assert len(hung) == 1 and hung[0].is_alive()
    adapter.release.set()  # when its call returns, the hung thread stops too
    hung[0].join(5)
    assert not _call_threads(before)


class RaisesTimeout:
    name, version = "raises-timeout", "1"

    def decide(self, request: Request) -> Decision:
        raise TimeoutError("read timed out")


def test_an_adapters_own_timeout_error_is_not_reported_as_the_runners(
    ds: Dataset, tmp_path: Path
) -> None:
    res = _run(RaisesTimeout(), ds, tmp_path / "l.parquet", retries=1, backoff=0.0)
    assert set(res.responses["error"]) == {
        "adapter raised TimeoutError: read timed out (2 attempts)"
    }
    assert res.n_retries == res.n_total


def test_resume_with_another_adapter_configuration_is_refused(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "log.parquet"
    with pytest.raises(KeyboardInterrupt):
        _run(Interrupting(Simulated(ds, seed=2), 20), ds, out, checkpoint_every=5)
    with pytest.raises(ResumeError, match="adapter configuration differs in: seed"):
        _run(Interrupting(Simulated(ds, seed=7)), ds, out)
    res = _run(Interrupting(Simulated(ds, seed=2)), ds, out)
    assert res.n_resumed == 20
    assert res.responses.equals(_run(Simulated(ds, seed=2), ds, tmp_path / "f.parquet").responses)
    # the manifest holds digests, not the values of the adapter's arguments
    manifest = tmp_path / "m.parquet.parts" / "manifest.json"
    with pytest.raises(KeyboardInterrupt):
        _run(Interrupting(Constant(), 3), ds, tmp_path / "m.parquet", adapter_args={"k": 1})
    text = manifest.read_text()
    assert '"adapter": "tests.run.test_run:Interrupting"' in text and "sha256:" in text


def test_cli_resume_with_other_adapter_args_is_refused(
    ds: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "log.parquet"
    base = ["run", "--dataset", str(ds.path), "--out", str(out), "--checkpoint-every", "5",
            "--concurrency", "1", "--no-progress", "--adapter", "tests.run.test_run:NoConfig"]  # fmt: skip
    assert _cli([*base, "--adapter-arg", "answer=0", "--adapter-arg", "stop=10"]) == 130
    capsys.readouterr()
    assert _cli([*base, "--adapter-arg", "answer=1", "--adapter-arg", "stop=10"]) == 2
    assert "adapter configuration differs in: answer" in capsys.readouterr().err  # ResumeError


class NoConfig:
    """An adapter without ``config()``: its CLI arguments identify it."""

    name, version = "no-config", "1"

    def __init__(self, answer: int = 0, stop: int | None = None) -> None:
        self.answer, self.stop, self.n = answer, stop, 0

    def decide(self, request: Request) -> Decision:
        self.n += 1
        if self.stop is not None and self.n > self.stop:
            raise KeyboardInterrupt
        return Decision(decision=request.options[self.answer])


_TERM_SCRIPT = """
import sys
from peira.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Marking(Interrupting):
    """Sleeps per call; after ``mark`` calls touches the file ``$PEIRA_TEST_MARK``.

    With ``$PEIRA_TEST_HOLD`` set (the CLI run of the kill test), the calls after
    the mark wait until that file exists (at most two minutes): the run cannot
    finish before the test stops it, however loaded the machine.
    """

    def __init__(self, dataset: str, mark: int = 10**9) -> None:
        super().__init__(Simulated(dataset, archetype="fragile"), delay=0.01)
        self.mark = mark

    def decide(self, request: Request) -> Decision:
        with self.lock:
            n = self.n + 1
        hold = os.environ.get("PEIRA_TEST_HOLD")
        if hold and n > self.mark:
            deadline = time.monotonic() + 120
            while not Path(hold).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        out = super().decide(request)
        if self.n == self.mark:
            Path(os.environ["PEIRA_TEST_MARK"]).touch()
        return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_terminated_or_killed_cli_run_keeps_completed_calls(
    sig: signal.Signals, ds: Dataset, tmp_path: Path
) -> None:
    """SIGTERM flushes every completed call; a SIGKILL loses at most the last few
    seconds (here 0.2 s) however large --checkpoint-every is. The calls after the
    mark wait (``PEIRA_TEST_HOLD``), so the run is always stopped mid-way."""
    out, mark = tmp_path / "log.parquet", tmp_path / "mark"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PEIRA_TEST_MARK": str(mark),
           "PEIRA_TEST_HOLD": str(tmp_path / "never")}  # fmt: skip
    seconds = "600" if sig == signal.SIGTERM else "0.2"
    pdir = parts_dir(out)
    argv = ["run", "--adapter", "tests.run.test_run:Marking", "--adapter-arg", "mark=40",
            "--dataset", str(ds.path), "--out", str(out), "--samples", "2", "--key-file",
            str(tmp_path / "key"), "--concurrency", "2", "--checkpoint-every", "100000",
            "--checkpoint-seconds", seconds, "--no-progress"]  # fmt: skip
    (tmp_path / "key").write_bytes(KEY)
    with subprocess.Popen(
        [sys.executable, "-c", _TERM_SCRIPT, *argv], env=env, stderr=subprocess.PIPE
    ) as proc:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            mark.exists() and (sig == signal.SIGTERM or any(pdir.glob("part-*.parquet")))
        ):
            if proc.poll() is not None:
                proc.communicate()
                pytest.fail("the run finished before it could be stopped")
            time.sleep(0.01)
        proc.send_signal(sig)
        _, err = proc.communicate()
    if sig == signal.SIGTERM:
        assert proc.returncode == 143, err
        assert b"terminated (SIGTERM)" in err and b"resume" in err
    assert not out.exists()
    n_saved = sum(read_parquet(p).height for p in pdir.glob("part-*.parquet"))
    # SIGTERM: the 40 calls done at the mark (but for one in flight on the other worker)
    assert n_saved >= (38 if sig == signal.SIGTERM else 1)

    rec = Marking(str(ds.path))
    res = run(rec, ds, out, key=KEY, samples=2, progress=False, adapter_args={"mark": 40})
    assert res.n_resumed == n_saved and len(rec.seen) == res.n_total - n_saved
    full = _run(Simulated(ds, archetype="fragile"), ds, tmp_path / "full.parquet", samples=2)
    assert res.responses.drop("latency_ms").equals(full.responses.drop("latency_ms"))


class AbstainsWithConfidence:
    name, version = "abstains", "1"

    def decide(self, request: Request) -> Decision:
        return Decision(abstained=True, confidence=0.9, score=0.4, raw_text="ABSTAIN: unsure")


def test_a_runs_log_rescored_with_its_parser_changes_nothing(ds: Dataset, tmp_path: Path) -> None:
    from peira.rescoring import rescore

    res = _run(AbstainsWithConfidence(), ds, tmp_path / "a.parquet")
    assert res.responses["confidence"].null_count() == res.n_total  # abstentions: no numbers
    assert res.responses["score"].null_count() == res.n_total
    assert rescore(res.responses, ds.cases, parser="synth").summary["n_rows_changed"][0] == 0
    for arch in ("fragile", "abstain-dos", "conf-spoof"):
        log = _run(Simulated(ds, archetype=arch), ds, tmp_path / f"{arch}.parquet", samples=2)
        r = rescore(log.responses, ds.cases, parser="auto")
        assert r.summary["n_rows_changed"][0] == 0 and r.changed_pairs.height == 0
        assert not r.metric_deltas["changed"].any()
