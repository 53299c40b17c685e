"""The redaction step: which environment values become ``[redacted]``, in rows and messages."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import pytest

from peira._redaction import MIN_LENGTH, Redactor, looks_secret
from peira.cli._errors import guard
from peira.errors import PeiraError, PeiraWarning
from peira.io import write_dataset
from peira.run import Decision, Request, run
from peira.synth import generate

ENV = {
    "OPENAI_API_KEY": "sk-abcdefgh12345678",
    "my_service_token": "tok-lower-case-name",
    "APP_SECRET": "s3cr3t-value-xyz",
    "DB_PASSWORD_FILE": "/run/secrets/db-pw",
    "SHORT_KEY": "1234567",  # under MIN_LENGTH: left alone
    "CUSTOM_VAR": "custom-credential-1",  # read by the adapter, named harmlessly
    "HOME": "/home/someone",
    "KEYBOARD": "us-international",  # KEY not at the end: not a secret's name
}


def test_names_that_look_like_secrets() -> None:
    assert [n for n in ENV if looks_secret(n)] == [
        "OPENAI_API_KEY", "my_service_token", "APP_SECRET", "DB_PASSWORD_FILE", "SHORT_KEY"
    ]  # fmt: skip


def test_values_redacted_and_short_ones_kept() -> None:
    r = Redactor(["CUSTOM_VAR"], ["given-by-argument"], environ=ENV)
    text = " ".join([*ENV.values(), "given-by-argument"])
    assert r.text(text) == (
        "[redacted] [redacted] [redacted] [redacted] 1234567 [redacted] /home/someone "
        "us-international [redacted]"
    )
    assert len(ENV["SHORT_KEY"]) < MIN_LENGTH
    # a secret holding another is redacted whole, not half
    nested = Redactor(environ={"A_KEY": "abcdefgh", "B_KEY": "xx-abcdefgh-yy"})
    assert nested.text("xx-abcdefgh-yy / abcdefgh") == "[redacted] / [redacted]"


def test_rows_and_decisions() -> None:
    r = Redactor(environ=ENV)
    row = {"error": f"boom {ENV['APP_SECRET']}", "raw_text": ENV["OPENAI_API_KEY"], "x": 1}
    assert r.row(row) == {"error": "boom [redacted]", "raw_text": "[redacted]", "x": 1}
    d = Decision(abstained=True, refusal_reason=f"no {ENV['my_service_token']}")
    assert r.decision(d).refusal_reason == "no [redacted]"


class _Adapter:
    env_read = ("CUSTOM_VAR",)
    secret_values = ("from-the-adapter-itself",)


def test_an_adapter_names_what_it_reads() -> None:
    r = Redactor.for_adapter(_Adapter(), environ=ENV)
    assert r.text("custom-credential-1 from-the-adapter-itself") == "[redacted] [redacted]"
    assert Redactor.for_adapter(object(), environ={}).secrets == ()


def test_command_line_messages_are_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "svc-token-made-up-98765"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)

    def fails(args: argparse.Namespace) -> int:
        warnings.warn(f"careful with {secret}", PeiraWarning, stacklevel=1)
        raise PeiraError(f"the server said: bad token {secret}")

    code = guard(fails, argparse.Namespace(command="run"))
    err = capsys.readouterr().err
    assert code == PeiraError.exit_code and secret not in err
    assert "peira run: error: the server said: bad token [redacted]" in err
    assert "peira: warning: careful with [redacted]" in err


class _Leaky:
    """An adapter that redacts nothing: it raises, reports and answers with secrets."""

    name, version = "leaky", "1"
    env_read = ("CUSTOM_VAR",)

    def decide(self, request: Request) -> Decision:
        key, token, custom = (ENV[k] for k in ("OPENAI_API_KEY", "my_service_token", "CUSTOM_VAR"))
        n = int(request.variant_id.encode().hex(), 16) % 3
        if n == 0:
            raise RuntimeError(f"child said: OPENAI_API_KEY={key} {custom}")
        if n == 1:
            return Decision(error=f"server said {token}", raw_text=f"text {key}")
        return Decision(abstained=True, refusal_reason=f"no, {custom}", raw_text=token)


def test_the_runner_redacts_every_row_whatever_the_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    b = generate(6, 4, seed=2)
    ds = write_dataset(b.cases, b.variants, tmp_path / "ds")
    out = tmp_path / "out"
    res = run(_Leaky(), ds, out / "log.parquet", progress=False, cache=out / "cache",
              checkpoint_every=1, concurrency=2)  # fmt: skip
    marked = [
        t
        for col in ("error", "raw_text", "refusal_reason")
        for t in res.responses[col].drop_nulls()
        if "[redacted]" in t
    ]
    assert len(marked) >= res.responses.height
    secrets = [ENV[k] for k in ("OPENAI_API_KEY", "my_service_token", "CUSTOM_VAR")]
    leaks = [
        f"{f}: {s}"
        for f in sorted(p for p in tmp_path.rglob("*") if p.is_file())
        for s in secrets
        if s.encode() in f.read_bytes()
    ]
    assert leaks == []
