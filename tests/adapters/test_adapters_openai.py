"""OpenAICompatible through the real ``openai`` SDK against a real loopback HTTP server."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

pytest.importorskip("openai")

from peira.adapters import OpenAICompatible, ProviderError, RetryableError
from peira.adapters._common import read_answer
from peira.errors import PeiraError
from peira.io import Dataset, read_parquet, write_dataset
from peira.parse import parse_frame
from peira.run import Request, parts_dir, run
from peira.synth import generate
from peira.testing import ChatServer, FastChatServer, Reply, check_adapter
from tests.builders import made

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-peira-0123456789abcdefXYZ"
CHOICE = Request("v-1", "choice", "Refund order #12?", ("approve", "deny"), "{}", 0)
SCORE = Request("v-2", "score", "Grant access?", ("grant", "deny"), "{}", 1)
ABSTAIN = Request("v-3", "abstain", "Pay the claim?", ("pay", "deny"), "{}", 0)


@pytest.fixture(autouse=True)
def _collect_after_each_test() -> Iterator[None]:
    """Collect garbage at each test's teardown: a socket a test leaves to the collector is
    finalised, with any ResourceWarning, in that test and not in a later one."""
    yield
    gc.collect()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(api_key=KEY) as s:
        yield s


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _adapter(server: ChatServer, **kw: Any) -> OpenAICompatible:
    kw.setdefault("timeout", 5.0)
    a: OpenAICompatible = made(OpenAICompatible("test-model", base_url=server.url, **kw))
    return a


def test_structured_output_schema_usage_and_cost(server: ChatServer, keyed: None) -> None:
    a = _adapter(server, price_in=2.5, price_out=10.0, seed=7, temperature=0)
    d = a.decide(SCORE)
    body = server.requests[-1]
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    schema = rf["json_schema"]["schema"]
    assert schema["properties"]["decision"]["enum"] == ["grant", "deny"]
    assert schema["properties"]["score"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert schema["required"] == ["decision", "confidence", "score"]
    assert schema["additionalProperties"] is False
    assert body["seed"] == 8 and body["temperature"] == 0  # seed offset by the sample
    assert body["messages"][1]["content"].endswith("Options:\n- grant\n- deny")
    # the answer, as the server wrote it
    answer = json.loads(d.raw_text or "")
    assert d.decision == answer["decision"] and d.confidence == answer["confidence"]
    assert d.score == answer["score"] and d.error is None
    # usage from the response; cost from the price table (hand-computed)
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    assert d.tokens_in == prompt_chars // 4 + 1
    assert d.tokens_out == len(d.raw_text or "") // 4 + 1
    assert d.cost_usd == pytest.approx((d.tokens_in * 2.5 + d.tokens_out * 10.0) / 1e6)
    # abstain cases may abstain; choice cases may not
    a.decide(ABSTAIN)
    enum = server.requests[-1]["response_format"]["json_schema"]["schema"]["properties"]
    assert enum["decision"]["enum"] == ["pay", "deny", "abstain"]
    a.decide(CHOICE)
    enum = server.requests[-1]["response_format"]["json_schema"]["schema"]["properties"]
    assert enum["decision"]["enum"] == ["approve", "deny"] and "score" not in enum


def test_answers_are_read_like_the_parser_reads_them(server: ChatServer, keyed: None) -> None:
    texts = [
        '{"decision": "DENY", "confidence": 0.75}',
        '```json\n{"decision": "approve", "confidence": "0.5"}\n```',
        '{"abstain": "yes"}',
        '{"refusal": "policy"}',
        '{"answer": "approve"} trailing {text}',
        '{"confidence": 0.3}',
        '{"decision": "Abstain", "confidence": 0.4}',
        '{"decision": "maybe"',
        "I think we should deny it.\nDecision: deny\nConfidence: 0.9",
        "Hard to say.",
    ]
    server.add_faults(*[Reply(content=t) for t in texts])
    a = _adapter(server)
    got = [a.decide(CHOICE) for _ in texts]
    oracle = parse_frame(
        pl.DataFrame({"raw_text": texts, "options": [["approve", "deny"]] * len(texts)})
    )
    for d, o, t in zip(got, oracle.iter_rows(named=True), texts, strict=True):
        assert d.raw_text == t
        assert (d.error is not None) == o["malformed"], t
        if not o["malformed"]:
            assert (d.decision, d.abstained, d.refusal_reason, d.confidence) == (
                o["decision"], o["abstained"], o["refusal_reason"], o["confidence"]
            ), t  # fmt: skip
    assert got[7].error == "unparseable output: invalid JSON"
    assert got[6].abstained and got[6].decision is None
    # "abstain" as the decision of an abstain case is an abstention
    assert read_answer('{"decision": "abstain", "confidence": 0.5}', ABSTAIN).abstained
    assert read_answer('{"decision": "Abstain"}', CHOICE).abstained  # as the parser reads it
    # ... unless an option is spelt so: then it is that decision, for both readers
    opts = ("approve", "abstain")
    own = Request("v-4", "abstain", "p", opts, "{}", 0)
    assert read_answer('{"decision": "ABSTAIN"}', own).decision == "abstain"
    back = parse_frame(pl.DataFrame({"raw_text": ['{"decision": "ABSTAIN"}'] * 2,
                                     "options": [list(opts), ["approve", "deny"]]}))  # fmt: skip
    assert back.select("decision", "abstained").rows() == [("abstain", False), (None, True)]


def test_server_without_schema_support_falls_back_to_plain_text(keyed: None) -> None:
    with ChatServer(api_key=KEY, schema_support=False) as server:
        a = _adapter(server)
        d1, d2 = a.decide(CHOICE), a.decide(SCORE)
        assert server.statuses == [400, 200, 200]  # one rejected schema, then text only
        assert "response_format" not in server.requests[1]
        assert "response_format" not in server.requests[2]
        assert "Decision: <option>" in server.requests[1]["messages"][0]["content"]
        for d in (d1, d2):
            assert d.error is None and d.decision is not None
            assert (d.raw_text or "").startswith(f"Decision: {d.decision}\nConfidence: ")
        # explicitly structured: the 400 is the answer (never retried)
        strict = _adapter(server, structured="json_schema")
        with pytest.raises(ProviderError, match=r"HTTP 400 .*json_schema"):
            strict.decide(CHOICE)


def test_refusals_are_recorded_as_such(server: ChatServer, keyed: None) -> None:
    server.add_faults(
        Reply(refusal="I can't help with that request."),
        Reply(finish_reason="content_filter"),
    )
    a = _adapter(server)
    r1, r2 = a.decide(CHOICE), a.decide(CHOICE)
    assert (r1.abstained, r1.decision, r1.refusal_reason) == (
        True, None, "I can't help with that request."
    )  # fmt: skip
    assert (r2.abstained, r2.refusal_reason) == (True, "content_filter")
    # the raw text is the API's refusal field, which the parser reads back alike
    back = parse_frame(
        pl.DataFrame({"raw_text": [r1.raw_text, r2.raw_text], "options": [["approve", "deny"]] * 2})
    )
    assert back["abstained"].to_list() == [True, True]
    assert back["refusal_reason"].to_list() == [r1.refusal_reason, "content_filter"]


@pytest.mark.parametrize(
    ("reply", "kind", "status", "retry_after"),
    [
        (Reply(status=429, headers={"Retry-After": "2"}), RetryableError, 429, 2.0),
        (Reply(status=429, headers={"retry-after-ms": "250"}), RetryableError, 429, 0.25),
        (Reply(status=500), RetryableError, 500, None),
        (Reply(status=503, headers={"Retry-After": "1"}), RetryableError, 503, 1.0),
        (Reply(status=408), RetryableError, 408, None),
        (Reply(status=409), RetryableError, 409, None),
        (Reply(status=400, message="bad field"), ProviderError, 400, None),
        (Reply(status=404, message="no such model"), ProviderError, 404, None),
        (Reply(status=422), ProviderError, 422, None),
        (Reply(body=b'{"id": "x", "choices": [ {"mess'), RetryableError, None, None),
    ],
)
def test_errors_map_to_retryable_or_not_and_the_sdk_never_retries(
    server: ChatServer, keyed: None, reply: Reply, kind: type, status: int | None,
    retry_after: float | None,
) -> None:  # fmt: skip
    server.add_faults(reply)
    a = _adapter(server)
    with pytest.raises(kind) as info:
        a.decide(CHOICE)
    assert len(server.requests) == 1  # the SDK made one attempt: retries are the runner's
    if kind is RetryableError:
        assert info.value.status == status and info.value.retry_after == retry_after
    else:
        assert f"HTTP {status} from 127.0.0.1:{server.port}: {reply.message}" == str(info.value)
    assert a.decide(CHOICE).error is None  # the next call is fine


def test_slow_and_hung_responses_time_out(server: ChatServer, keyed: None) -> None:
    server.add_faults(Reply(delay=0.2), Reply(delay=2.0), Reply(hang=True))
    a = _adapter(server, timeout=0.5)
    assert a.decide(CHOICE).error is None  # slow but within the timeout
    t0 = time.perf_counter()
    for _ in range(2):
        with pytest.raises(RetryableError, match="timed out"):
            a.decide(CHOICE)
    assert time.perf_counter() - t0 < 3.0


def test_key_only_from_the_environment_and_never_in_errors(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PeiraError, match="takes no api_key argument") as info:
        OpenAICompatible("m", base_url=server.url, api_key=KEY)
    assert KEY not in str(info.value)
    # a wrong key: the server echoes it in its 401 message; the error does not
    wrong = "sk-wrong-key-4242424242"
    monkeypatch.setenv("MY_KEY", wrong)
    a = _adapter(server, api_key_env="MY_KEY")
    with pytest.raises(ProviderError) as info:
        a.decide(CHOICE)
    assert "HTTP 401" in str(info.value) and "[redacted]" in str(info.value)
    assert wrong not in str(info.value) and wrong not in json.dumps(a.config())
    monkeypatch.setenv("MY_KEY", KEY)
    assert _adapter(server, api_key_env="MY_KEY").decide(CHOICE).error is None


def test_openai_base_url_from_the_environment(
    server: ChatServer, keyed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    a = made(OpenAICompatible("test-model", timeout=5))
    assert a.decide(CHOICE).error is None and len(server.requests) == 1
    assert a.config()["base_url"].startswith(f"http://127.0.0.1:{server.port}/v1")


def test_extra_body_fields_reach_the_server_and_win(server: ChatServer, keyed: None) -> None:
    a = _adapter(server, temperature=0.9, extra_body={"top_k": 5, "temperature": 0.25})
    assert a.decide(CHOICE).error is None
    body = server.requests[-1]
    assert body["top_k"] == 5 and body["temperature"] == 0.25  # as the SDK merges extra_body
    assert body["response_format"]["json_schema"]["schema"]["properties"]["decision"]["enum"] == [
        "approve", "deny"
    ]  # fmt: skip


def test_fast_server_answers_like_the_chat_server(keyed: None) -> None:
    import urllib.error
    import urllib.request

    reqs = [CHOICE, SCORE, ABSTAIN, Request("v-5", "choice", "Ship it?", ("yes", "no"), "{}", 2)]
    with ChatServer() as slow, FastChatServer() as fast:
        want = [_adapter(slow, seed=3).decide(r) for r in reqs]
        got = [_adapter(fast, seed=3).decide(r) for r in reqs]
        for g, w in zip(got, want, strict=True):
            assert dataclasses.replace(g, latency_ms=None) == dataclasses.replace(
                w, latency_ms=None
            )
        assert fast.n == len(reqs)
        # plain text when asked for it; other routes and bodies that are not JSON are refused
        assert _adapter(fast, structured="text").decide(CHOICE).raw_text == (
            _adapter(slow, structured="text").decide(CHOICE).raw_text
        )
        for path, data, status in (
            ("/v1/embeddings", b"{}", 404),
            ("/v1/chat/completions", b"{x", 400),
        ):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(fast.url.removesuffix("/v1") + path, data=data, timeout=5)
            # the error holds the response's socket file: close it here, not in whichever
            # later test's garbage collection breaks the error's reference cycle
            with info.value as err:
                assert err.code == status
    with FastChatServer(schema_support=False) as plain:
        a = _adapter(plain)
        d = a.decide(SCORE)
        assert d.error is None and (d.raw_text or "").startswith(f"Decision: {d.decision}\n")
        assert plain.n == 1  # the rejected schema request is not an answer


def test_chat_server_process_serves_with_latency(keyed: None) -> None:
    argv = [sys.executable, "-m", "peira.testing.chat_server", "--latency", "0.2"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            a = made(OpenAICompatible("test-model", base_url=url, timeout=5))
            t0 = time.perf_counter()
            d = a.decide(CHOICE)
            assert d.error is None and d.decision in CHOICE.options
            assert time.perf_counter() - t0 >= 0.2
        finally:
            proc.terminate()


def test_close_ends_the_client_and_its_connections(server: ChatServer, keyed: None) -> None:
    with OpenAICompatible("test-model", base_url=server.url, timeout=5) as a:
        assert a.decide(CHOICE).error is None
        assert not a._client.is_closed()
    assert a._client.is_closed()


def test_conformance_kit_passes(server: ChatServer, keyed: None) -> None:
    report = check_adapter(_adapter(server))
    assert report.ok and {c.name for c in report.checks} == {
        "protocol", "answers", "blinding", "determinism", "concurrency"
    }  # fmt: skip


# ---------------------------------------------------------------- through the runner


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    b = generate(30, 4, seed=1)
    return write_dataset(b.cases, b.variants, tmp_path_factory.mktemp("ds") / "ds")


def test_runner_retries_transient_errors_and_not_other_4xx(
    server: ChatServer, keyed: None, small: Dataset, tmp_path: Path
) -> None:
    server.add_faults(
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply(status=500),
        Reply(status=400, message="context length exceeded"),
    )
    res = run(_adapter(server), small, tmp_path / "log.parquet", concurrency=1, retries=3,
              backoff=0.0, progress=False)  # fmt: skip
    log = res.responses
    n = small.variants.height
    assert res.n_retries == 2 and len(server.requests) == n + 2
    bad = log.filter(pl.col("malformed"))
    assert bad.height == 1
    assert bad["error"][0] == (
        f"adapter error: ProviderError: HTTP 400 from 127.0.0.1:{server.port}: "
        "context length exceeded"
    )
    good = log.filter(~pl.col("malformed"))
    assert good["tokens_in"].null_count() == 0 and good["raw_text"].null_count() == 0


def test_a_run_rescored_with_its_parser_changes_nothing(
    server: ChatServer, keyed: None, small: Dataset, tmp_path: Path
) -> None:
    from peira.rescoring import rescore

    server.add_faults(Reply(refusal="No."), Reply(finish_reason="content_filter"))
    res = run(_adapter(server), small, tmp_path / "log.parquet", samples=2, progress=False)
    log = res.responses
    assert log["abstained"].sum() >= 2 and log["malformed"].sum() == 0
    r = rescore(log, small.cases, parser="auto")
    assert r.summary["n_rows_changed"][0] == 0 and r.changed_pairs.height == 0


# ---------------------------------------------------------------- kill -9, resume, no key anywhere

_MAIN = "import sys\nfrom peira.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux ``/proc``)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":  # exited, not yet reaped
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("workers", [0, 2])
def test_kill_9_and_resume_then_no_key_in_any_file_or_output(
    workers: int, small: Dataset, tmp_path: Path
) -> None:
    """With worker processes too: they exit when the runner is killed, and see
    the key in their environment only (not on their command line)."""
    out = tmp_path / "run" / "log.parquet"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY}
    env.pop("OPENAI_BASE_URL", None)
    outputs: list[bytes] = []
    with ChatServer(api_key=KEY, latency=0.01) as server:
        argv = [
            sys.executable, "-c", _MAIN, "run", "--adapter", "peira.adapters:OpenAICompatible",
            "--adapter-arg", "model=test-model", "--adapter-arg", f"base_url={server.url}",
            "--adapter-arg", "price_in=1.5", "--adapter-arg", "price_out=6",
            "--dataset", str(small.path), "--out", str(out), "--samples", "3",
            "--concurrency", "2", "--checkpoint-seconds", "0.1", "--no-progress",
            "--cache", str(tmp_path / "cache"), "--max-cost-usd", "100",
            "--workers", str(workers),
        ]  # fmt: skip
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(parts_dir(out).glob("part-*.parquet")):
                assert p.poll() is None, "the run ended before it could be killed"
                time.sleep(0.01)
            kids = _children(p.pid)
            for kid in kids:
                outputs.append(Path(f"/proc/{kid}/cmdline").read_bytes())
            p.send_signal(signal.SIGKILL)
            o, e = p.communicate()
            outputs += [o, e]
        assert p.returncode == -signal.SIGKILL and not out.exists()
        assert len(kids) == workers
        assert all(_gone(kid, 30) for kid in kids), "a worker outlived its runner"
        saved = sum(read_parquet(f).height for f in parts_dir(out).glob("part-*.parquet"))
        assert 0 < saved < 3 * small.variants.height
        done = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, done.stderr.decode()
        assert f"{saved} resumed from checkpoints".encode() in done.stdout
        # the key reached the server on every call
        assert all(len(b) for b in server.requests)
    log = read_parquet(out)
    assert log.height == 3 * small.variants.height and log["malformed"].sum() == 0
    assert log["cost_usd"].null_count() == 0
    assert (
        log["cost_usd"] - (log["tokens_in"] * 1.5 + log["tokens_out"] * 6) / 1e6
    ).abs().max() < 1e-12
    # the same log as an uninterrupted run (the loopback model is deterministic)
    with ChatServer(api_key=KEY) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", KEY)
        full = run(
            made(OpenAICompatible("test-model", base_url=server.url, price_in=1.5, price_out=6)),
            small, tmp_path / "full.parquet", samples=3, progress=False,
        )  # fmt: skip
    cols = [c for c in full.responses.columns if c != "latency_ms"]
    assert log.select(cols).equals(full.responses.select(cols))
    assert list((tmp_path / "cache" / "v1").rglob("*.json"))  # the cache was written
    # no file and no output holds the key
    scanned = 0
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
            scanned += 1
    assert scanned >= 2
    for blob in outputs:
        assert KEY.encode() not in blob


def test_pickled_adapter_holds_no_key_and_rebuilds_the_same(
    server: ChatServer, keyed: None
) -> None:
    a = _adapter(server, price_in=1.0, price_out=2.0, seed=3, extra_body={"top_k": 5})
    blob = pickle.dumps(a)
    assert KEY.encode() not in blob and b"no-key" not in blob
    b = pickle.loads(blob)
    assert b.config() == a.config() and b is not a
    da, db = a.decide(SCORE), b.decide(SCORE)
    assert dataclasses.replace(da, latency_ms=None) == dataclasses.replace(db, latency_ms=None)
    # the same body; the copy read the key from the environment (the server checks it)
    assert server.requests[-1] == server.requests[-2]


def test_no_secret_of_the_environment_in_any_file_a_run_writes(
    server: ChatServer, keyed: None, small: Dataset, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    token = "svc-token-made-up-98765"
    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    server.add_faults(
        Reply(status=400, message=f"bad request from {KEY} with {token}"),
        Reply(content=f"my environment: OPENAI_API_KEY={KEY} MY_SERVICE_TOKEN={token}"),
        Reply(refusal=f"no, {token}"),
    )
    out = tmp_path / "out"
    res = run(_adapter(server), small, out / "log.parquet", concurrency=1, progress=False,
              cache=out / "cache", checkpoint_every=1)  # fmt: skip
    texts = [
        t
        for col in ("error", "raw_text", "refusal_reason")
        for t in res.responses[col].drop_nulls()
        if "[redacted]" in t
    ]
    assert len(texts) >= 3
    leaks = [
        f"{f}: {s}"
        for f in sorted(p for p in tmp_path.rglob("*") if p.is_file())
        for s in (KEY, token)
        if s.encode() in f.read_bytes()
    ]
    assert leaks == []
