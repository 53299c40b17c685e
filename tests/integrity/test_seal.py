"""Sealed run artifacts: canonical JSON, locks, verification, re-derivation, tamper fuzz."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peira.cli import main
from peira.errors import OutputError
from peira.io import Dataset, read_parquet, write_dataset, write_parquet
from peira.schema import RESPONSES_SCHEMA
from peira.seal import (
    ARTIFACT_FILE,
    RESPONSES_FILE,
    ArtifactExistsError,
    CanonicalJSONError,
    KeyMaterialError,
    SealConfig,
    build_artifact,
    canonical_json,
    compute_lock,
    dataset_hash,
    load_key,
    reference_lock,
    results_hash,
    seal,
    verify,
    verify_artifact,
    verify_reference,
)
from peira.synth import generate
from tests.builders import reference_dir

REFERENCE = reference_dir() / "lock_parity.jsonl"

KEY = b"seal-key-\x00\xff-0123456789abcdef"
CREATED = "2026-01-02T03:04:05Z"


def cli(*argv: str) -> int:
    """Run a subcommand through the ``peira`` command (parser, guard and exit codes)."""
    return main(list(argv))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bench() -> Any:
    return generate(160, 2, seed=5)


@pytest.fixture(scope="module")
def dataset(bench: Any) -> Dataset:
    return Dataset(bench.cases, bench.variants)


@pytest.fixture(scope="module")
def run_id(bench: Any) -> str:
    return str(bench.responses["run_id"].unique().sort()[0])


@pytest.fixture(scope="module")
def sealed(dataset: Dataset, bench: Any, run_id: str) -> tuple[dict[str, Any], pl.DataFrame]:
    return build_artifact(dataset, bench.responses, run_id, created_utc=CREATED)


@pytest.fixture(scope="module")
def sealed_keyed(dataset: Dataset, bench: Any, run_id: str) -> tuple[dict[str, Any], pl.DataFrame]:
    return build_artifact(dataset, bench.responses, run_id, key=KEY, created_utc=CREATED)


@pytest.fixture
def on_disk(tmp_path: Path, bench: Any) -> tuple[Path, Path]:
    """(dataset directory with responses.parquet, log path)."""
    d = tmp_path / "ds"
    write_dataset(bench.cases, bench.variants, d)
    log = d / "responses.parquet"
    write_parquet(bench.responses, log)
    return d, log


def _relock(artifact: dict[str, Any], key: bytes | None = None) -> dict[str, Any]:
    out = {k: v for k, v in artifact.items() if k != "lock"}
    out["lock"] = compute_lock(out, key)
    return out


# ---------------------------------------------------------------- canonical JSON


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.1, "0.1"),
        (1e-05, "1e-05"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (1.0, "1.0"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1 / 3, "0.3333333333333333"),
        (2**64 + 1, "18446744073709551617"),
        (-(2**100), "-1267650600228229401496703205376"),
        (7, "7"),
        (True, "true"),
        (None, "null"),
        (np.float64(0.25), "0.25"),
        (np.int64(-3), "-3"),
        (np.float32(0.5), "0.5"),
    ],
)
def test_canonical_scalars(value: Any, text: str) -> None:
    assert canonical_json(value) == text.encode()
    back = json.loads(canonical_json(value))
    assert back == value
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


def test_canonical_unicode_nesting_and_key_order() -> None:
    obj = {
        "zeta": [1, {"b": None, "a": [True, False, []]}, {}],
        "café": 'naïve 😀 \u2028 "quoted" back\\slash \n tab\t',
        "Z": {"é": 1, "e": 2, "E": 3},
    }
    out = canonical_json(obj)
    assert out == (
        '{"Z":{"E":3,"e":2,"é":1},"café":"naïve 😀 \u2028 \\"quoted\\" back\\\\slash \\n tab\\t",'
        '"zeta":[1,{"a":[true,false,[]],"b":null},{}]}'
    ).encode("utf-8")
    assert json.loads(out) == obj
    assert canonical_json(json.loads(out)) == out
    assert "😀".encode() in out  # UTF-8, not \\u escapes


def test_canonical_tuples_are_lists() -> None:
    assert canonical_json({"a": (1, 2.5)}) == b'{"a":[1,2.5]}'


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_canonical_round_trip(value: Any) -> None:
    out = canonical_json(value)
    back = json.loads(out.decode("utf-8"))
    assert canonical_json(back) == out
    assert back == value


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        ({"metrics": {"asr": float("nan")}}, "metrics.asr"),
        ({"metrics": {"asr": float("inf")}}, "metrics.asr"),
        ({"a": [1, {"b": float("-inf")}]}, "a[1].b"),
        ([0.5, float("nan")], "[1]"),
        (float("nan"), "(root)"),
        ({"x": np.float64("nan")}, "x"),
    ],
)
def test_canonical_rejects_non_finite_naming_the_path(obj: Any, where: str) -> None:
    with pytest.raises(CanonicalJSONError, match="NaN and Infinity") as err:
        canonical_json(obj)
    assert str(err.value).startswith(f"{where}: ")


def test_canonical_rejects_bad_keys_and_types() -> None:
    with pytest.raises(CanonicalJSONError, match=r"config: object key 1 is not a string"):
        canonical_json({"config": {1: "x"}})
    with pytest.raises(CanonicalJSONError, match=r"a\[0\]: a set is not a JSON value"):
        canonical_json({"a": [{1, 2}]})


def test_canonical_rejects_ints_beyond_the_digit_limit() -> None:
    with pytest.raises(CanonicalJSONError, match="no canonical JSON form"):
        canonical_json({"n": 10**5000})


def test_canonical_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})


# ---------------------------------------------------------------- keys


def test_load_key_file_strips_one_newline(tmp_path: Path) -> None:
    f = tmp_path / "k"
    f.write_bytes(KEY + b"\n")
    assert load_key(f) == KEY
    f.write_bytes(KEY + b"\r\n")
    assert load_key(f) == KEY
    f.write_bytes(KEY + b"\n\n")
    assert load_key(f) == KEY + b"\n"


def test_load_key_env_and_short_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PEIRA_SEAL_KEY", raising=False)
    assert load_key(None) is None
    with pytest.raises(KeyMaterialError, match="PEIRA_SEAL_KEY"):
        load_key(None, required=True)
    monkeypatch.setenv("PEIRA_SEAL_KEY", "0123456789abcdefXYZ")
    assert load_key(None) == b"0123456789abcdefXYZ"
    monkeypatch.setenv("PEIRA_SEAL_KEY", "short-secret")
    with pytest.raises(KeyMaterialError, match="12 bytes; at least 16") as err:
        load_key(None)
    assert "short-secret" not in str(err.value)
    f = tmp_path / "k"
    f.write_bytes(b"tiny\n")
    with pytest.raises(KeyMaterialError, match="4 bytes") as err2:
        load_key(f)
    assert "tiny" not in str(err2.value).replace(str(f), "")


def test_missing_key_file_is_a_clear_error(tmp_path: Path) -> None:
    from peira.errors import DataFileError

    with pytest.raises(DataFileError, match="key file not found"):
        load_key(tmp_path / "nope")


# ---------------------------------------------------------------- hashes and locks


def test_lock_is_sha256_or_hmac_of_canonical_payload() -> None:
    import hmac

    payload = {"b": 1.5, "a": "é"}
    data = '{"a":"é","b":1.5}'.encode()
    assert compute_lock(payload) == hashlib.sha256(data).hexdigest()
    assert compute_lock(payload, KEY) == hmac.new(KEY, data, hashlib.sha256).hexdigest()


def test_content_hashes_ignore_row_order(dataset: Dataset, bench: Any) -> None:
    h = dataset_hash(dataset.cases, dataset.variants)
    shuffled = dataset_hash(
        dataset.cases.sample(fraction=1.0, shuffle=True, seed=1),
        dataset.variants.sample(fraction=1.0, shuffle=True, seed=2),
    )
    assert h == shuffled
    r = bench.responses
    assert results_hash(r) == results_hash(r.sample(fraction=1.0, shuffle=True, seed=3))
    changed = dataset.variants.with_columns(
        pl.when(pl.int_range(pl.len()) == 7)
        .then(pl.col("prompt") + " ")
        .otherwise(pl.col("prompt"))
        .alias("prompt")
    )
    assert dataset_hash(dataset.cases, changed) != h


def test_results_hash_definition() -> None:
    """The documented scheme, spelled out on a one-row log."""
    row = {c: None for c in RESPONSES_SCHEMA} | {
        "run_id": "r",
        "model": "m",
        "model_version": "1",
        "case_id": "c1",
        "arm": "benign",
        "sample": 0,
        "decision": "deny",
        "abstained": False,
        "malformed": False,
        "score": 0.5,
    }
    df = pl.DataFrame([row], schema=RESPONSES_SCHEMA)
    expected = hashlib.sha256(b"peira-responses/v1\n" + canonical_json(row) + b"\n").hexdigest()
    assert results_hash(df) == expected


def test_results_hash_names_a_nan_cell(bench: Any) -> None:
    r = bench.responses.sort("run_id", "case_id", "arm", "sample").with_columns(
        pl.when(pl.int_range(pl.len()) == 3)
        .then(float("nan"))
        .otherwise(pl.col("score"))
        .alias("score")
    )
    with pytest.raises(CanonicalJSONError, match=r"responses row 3 \(sorted by key\): score: nan"):
        results_hash(r)


# ---------------------------------------------------------------- seal and verify


def test_artifact_layout(sealed: tuple[dict[str, Any], pl.DataFrame], run_id: str) -> None:
    art, rows = sealed
    assert set(art) == {
        "format",
        "format_version",
        "lock_kind",
        "created_utc",
        "peira_version",
        "run_id",
        "dataset",
        "adapter",
        "config",
        "results",
        "metrics",
        "bootstrap_plan",
        "lock",
    }
    assert art["lock_kind"] == "sha256"
    assert set(art["bootstrap_plan"]) == {"n_resamples", "seed", "unit", "method", "fingerprint"}
    assert art["bootstrap_plan"]["n_resamples"] == 10_000
    assert art["results"]["n_rows"] == rows.height
    assert rows["run_id"].unique().to_list() == [run_id]
    assert rows.columns == list(RESPONSES_SCHEMA)
    assert rows.equals(rows.sort("run_id", "case_id", "arm", "sample"))
    m = art["metrics"]
    for name in ("asr", "benign_accuracy", "abstention_flip_rate", "severity_weighted_asr"):
        assert isinstance(m[name], float)
    assert "run_id" not in m
    assert art["lock"] == compute_lock({k: v for k, v in art.items() if k != "lock"})


def test_seal_writes_directory_and_verifies(
    tmp_path: Path, dataset: Dataset, bench: Any, run_id: str
) -> None:
    out = seal(dataset, bench.responses, run_id, tmp_path / "art", created_utc=CREATED)
    assert sorted(p.name for p in out.iterdir()) == [ARTIFACT_FILE, RESPONSES_FILE]
    assert [p.name for p in tmp_path.iterdir()] == ["art"]  # no temp directory left
    rep = verify(out)
    assert rep.status == "intact" and rep.exit_code == 0, rep.findings
    rep2 = verify(out / ARTIFACT_FILE, dataset=dataset, rederive=True)
    assert rep2.ok and any("re-derived" in n for n in rep2.notes)
    # deterministic: the same inputs give the same bytes
    again = seal(dataset, bench.responses, run_id, tmp_path / "again", created_utc=CREATED)
    assert (again / ARTIFACT_FILE).read_bytes() == (out / ARTIFACT_FILE).read_bytes()


def test_seal_refuses_existing_output_and_force_replaces(
    tmp_path: Path, dataset: Dataset, bench: Any, run_id: str
) -> None:
    out = tmp_path / "art"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(ArtifactExistsError, match="exists already"):
        seal(dataset, bench.responses, run_id, out)
    assert (out / "keep").exists()
    # --force replaces only a directory carrying Peira's marker (an artifact.json)
    with pytest.raises(OutputError, match="not an output of peira seal"):
        seal(dataset, bench.responses, run_id, out, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["keep"]
    (out / "keep").unlink()
    seal(dataset, bench.responses, run_id, out)
    (out / "notes.txt").write_text("mine")
    first = (out / ARTIFACT_FILE).read_bytes()
    seal(dataset, bench.responses, run_id, out, overwrite=True, created_utc="2030-01-01T00:00:00Z")
    assert sorted(p.name for p in out.iterdir()) == [ARTIFACT_FILE, "notes.txt", RESPONSES_FILE]
    assert (out / "notes.txt").read_text() == "mine"  # a user's file in the artifact is kept
    assert (out / ARTIFACT_FILE).read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_failed_seal_leaves_nothing(
    tmp_path: Path, dataset: Dataset, bench: Any, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import peira.seal.build as seal_build

    def boom(*a: Any, **k: Any) -> bytes:
        raise OSError("disk full")

    monkeypatch.setattr(seal_build, "pretty_json", boom)
    with pytest.raises(OSError, match="disk full"):
        seal(dataset, bench.responses, run_id, tmp_path / "art")
    assert list(tmp_path.iterdir()) == []


def test_seal_unknown_run_and_nan_metric(
    tmp_path: Path, dataset: Dataset, bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peira.errors import PeiraError

    with pytest.raises(PeiraError, match="run_id 'nope' is not in the response log"):
        seal(dataset, bench.responses, "nope", tmp_path / "a")
    import peira.seal.build as seal_build

    real = seal_build.derive

    def nan_derive(*a: Any, **k: Any) -> Any:
        m, p = real(*a, **k)
        return {**m, "asr": float("nan")}, p

    monkeypatch.setattr(seal_build, "derive", nan_derive)
    run = str(bench.responses["run_id"][0])
    with pytest.raises(CanonicalJSONError, match=r"cannot seal run .*: metrics\.asr: nan"):
        seal(dataset, bench.responses, run, tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


def test_keyed_artifact(
    sealed_keyed: tuple[dict[str, Any], pl.DataFrame], sealed: tuple[dict[str, Any], pl.DataFrame]
) -> None:
    art, rows = sealed_keyed
    assert art["lock_kind"] == "hmac-sha256"
    assert verify_artifact(art, rows, key=KEY).ok
    # without the key it cannot be checked: unreadable, with a hint
    rep = verify_artifact(art, rows)
    assert rep.exit_code == 2 and "PEIRA_SEAL_KEY" in rep.findings[0].message
    # a wrong key fails
    assert verify_artifact(art, rows, key=b"another-key-0123456789").exit_code == 1
    # tampering, then re-sealing without the key (a plain SHA-256 lock), is caught with the key
    forged = copy.deepcopy(art)
    forged["metrics"]["asr"] = 0.0
    forged["lock_kind"] = "sha256"
    forged = _relock(forged)
    assert verify_artifact(forged, rows).ok  # without the key it looks fine …
    rep = verify_artifact(forged, rows, key=KEY)  # … with the key it does not
    assert rep.exit_code == 1
    assert any(f.field == "lock_kind" for f in rep.findings)
    # re-sealing with a guessed key but claiming HMAC fails as well
    forged2 = copy.deepcopy(art)
    forged2["metrics"]["asr"] = 0.0
    forged2 = _relock(forged2, b"guessed-key-0123456789")
    assert verify_artifact(forged2, rows, key=KEY).exit_code == 1
    # an unkeyed artifact verified with a key is not accepted as authentic
    assert verify_artifact(sealed[0], sealed[1], key=KEY).exit_code == 1


def test_fabricated_metrics_resealed_are_caught_by_rederive(
    sealed: tuple[dict[str, Any], pl.DataFrame], dataset: Dataset
) -> None:
    art, rows = sealed
    forged = copy.deepcopy(art)
    forged["metrics"]["asr"] = 0.01
    forged["metrics"]["robustness"] = 0.99
    forged["metrics"]["benign_accuracy"] = art["metrics"]["benign_accuracy"] + 2**-40
    forged = _relock(forged)
    assert verify_artifact(forged, rows).ok  # lock and results are consistent
    rep = verify_artifact(forged, rows, dataset=dataset, rederive=True)
    assert rep.exit_code == 1
    fields = {f.field for f in rep.findings}
    assert fields == {"metrics.asr", "metrics.robustness", "metrics.benign_accuracy"}
    f = next(f for f in rep.findings if f.field == "metrics.asr")
    assert f.expected == "0.01" and f.found == repr(art["metrics"]["asr"])
    assert "sealed 0.01, found" in f.describe()


def test_sealed_intervals_are_rederived(
    sealed: tuple[dict[str, Any], pl.DataFrame], dataset: Dataset
) -> None:
    """The metrics block holds every ratio metric's interval on the sealed plan."""
    from peira.metrics import RATIO_METRICS

    art, rows = sealed
    m = art["metrics"]
    for name in RATIO_METRICS:
        assert f"{name}_lo" in m and f"{name}_hi" in m
    assert m["asr_lo"] <= m["asr"] <= m["asr_hi"]
    forged = copy.deepcopy(art)
    forged["metrics"]["asr_hi"] = m["asr_hi"] - 0.01  # a narrower, better-looking interval
    forged = _relock(forged)
    assert verify_artifact(forged, rows).ok
    rep = verify_artifact(forged, rows, dataset=dataset, rederive=True)
    assert rep.exit_code == 1 and {f.field for f in rep.findings} == {"metrics.asr_hi"}


def test_fabricated_plan_and_config_resealed_are_caught(
    sealed: tuple[dict[str, Any], pl.DataFrame], dataset: Dataset
) -> None:
    art, rows = sealed
    for path, value in [
        (("bootstrap_plan", "fingerprint"), "0" * 64),
        (("bootstrap_plan", "seed"), 1),
        (("config", "severity_weights", "low"), 1.0),
        (("config", "gates", "min_eligible"), 1),
        (("metrics", "gate_reasons"), []),
        (("results", "file"), "other.parquet"),
        (("results", "hash_scheme"), "md5"),
        (("dataset", "n_cases"), 1),
    ]:
        forged = copy.deepcopy(art)
        forged[path[0]][path[1]] = (
            value if len(path) == 2 else {**forged[path[0]][path[1]], path[2]: value}
        )
        forged = _relock(forged)
        rep = verify_artifact(forged, rows, dataset=dataset, rederive=True)
        assert rep.exit_code == 1, path


def test_fabricated_results_resealed_are_caught_by_rederive(
    sealed: tuple[dict[str, Any], pl.DataFrame], dataset: Dataset
) -> None:
    """Responses edited and re-hashed, lock re-sealed: only re-derivation notices."""
    art, rows = sealed
    edited = rows.with_columns(
        pl.when((pl.col("arm") == "attacked") & ~pl.col("malformed") & ~pl.col("abstained"))
        .then(pl.col("case_id").map_elements(lambda _: None, return_dtype=pl.String))
        .otherwise(pl.col("decision"))
        .alias("decision")
    ).with_columns(
        pl.when(pl.col("decision").is_null() & ~pl.col("abstained"))
        .then(True)
        .otherwise(pl.col("malformed"))
        .alias("malformed")
    )
    forged = copy.deepcopy(art)
    forged["results"]["content_hash"] = results_hash(edited)
    forged = _relock(forged)
    assert verify_artifact(forged, edited).ok
    rep = verify_artifact(forged, edited, dataset=dataset, rederive=True)
    assert rep.exit_code == 1 and any(f.field == "metrics.asr" for f in rep.findings)


def test_wrong_dataset_is_reported(
    sealed: tuple[dict[str, Any], pl.DataFrame], dataset: Dataset
) -> None:
    art, rows = sealed
    other = Dataset(
        dataset.cases.with_columns(pl.col("severity").reverse()), dataset.variants, None
    )
    rep = verify_artifact(art, rows, dataset=other, rederive=True)
    assert rep.exit_code == 1
    assert [f.field for f in rep.findings] == ["dataset.content_hash"]


def test_rederive_needs_dataset(sealed: tuple[dict[str, Any], pl.DataFrame]) -> None:
    with pytest.raises(ValueError, match="needs the dataset"):
        verify_artifact(sealed[0], sealed[1], rederive=True)


# ---------------------------------------------------------------- tamper fuzz


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(obj, dict):
        out = [path] if path else []
        for k, v in obj.items():
            out += _leaves(v, (*path, k))
        return out
    if isinstance(obj, list):
        out = [path]
        for i, v in enumerate(obj):
            out += _leaves(v, (*path, i))
        return out
    return [path]


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _mutated(value: Any, rng: random.Random) -> Any:
    """A different JSON value (never equal in the canonical sense)."""
    while True:
        new = _candidate(value, rng)
        if canonical_json(new) != canonical_json(value):
            return new


def _candidate(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return rng.choice([not value, None, int(value), str(value).lower()])
    if isinstance(value, int):
        return rng.choice([value + 1, value - 1, float(value), -value - 1, str(value), None])
    if isinstance(value, float):
        choices: list[Any] = [
            math.nextafter(value, math.inf),
            math.nextafter(value, -math.inf),
            value + 1,
            None,
            repr(value),
        ]
        if value == 0.0:
            choices.append(-value)
        if value.is_integer():
            choices.append(int(value) + 1)
        return rng.choice(choices)
    if isinstance(value, str):
        if value and rng.random() < 0.5:
            i = rng.randrange(len(value))
            ch = "0" if value[i] != "0" else "1"
            return value[:i] + ch + value[i + 1 :]
        return rng.choice([value + " ", value.upper() + "x", "", None])
    if value is None:
        return rng.choice([0, "", False, 0.0, [], {}])
    if isinstance(value, list):
        return [*value, None] if not value or rng.random() < 0.5 else value[:-1]
    if isinstance(value, dict):
        if value and rng.random() < 0.5:
            k = rng.choice(sorted(value))
            return {kk: vv for kk, vv in value.items() if kk != k}
        return {**value, "injected": 1}
    raise AssertionError(type(value))


def _mutate_artifact(art: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    out = copy.deepcopy(art)
    paths = _leaves(out)
    path = rng.choice(paths)
    if rng.random() < 0.05 and path:  # delete a field instead of changing it
        parent = _get(out, path[:-1])
        if isinstance(parent, dict):
            del parent[path[-1]]
            return out, "del " + ".".join(map(str, path))
    new = _mutated(_get(out, path), rng)
    _get(out, path[:-1])[path[-1]] = new
    return out, ".".join(map(str, path))


def _mutate_cell(rows: pl.DataFrame, rng: random.Random) -> tuple[pl.DataFrame, str]:
    i = rng.randrange(rows.height)
    col = rng.choice(rows.columns)
    value = rows[col][i]
    dtype = rows.schema[col]
    new: Any
    if dtype == pl.Boolean:
        new = (not value) if value is not None else True
    elif dtype.is_integer():
        new = (value or 0) + rng.choice([1, -1]) if value is not None else 0
    elif dtype.is_float():
        new = (
            rng.choice([math.nextafter(value, 2.0), -value if value else -0.0, value + 0.5, None])
            if value is not None
            else 0.0
        )
    else:
        new = rng.choice([(value or "") + "x", None if value is not None else "x"])
    if new == value and type(new) is type(value) and str(new) == str(value):
        new = None if value is not None else (0 if dtype.is_numeric() else "x")
    s = rows[col].scatter(i, pl.Series([new], dtype=dtype))
    return rows.with_columns(s), f"responses[{i}].{col}"


@pytest.mark.parametrize("keyed", [False, True], ids=["sha256", "hmac"])
def test_tamper_fuzz_single_field_mutations(
    keyed: bool,
    sealed: tuple[dict[str, Any], pl.DataFrame],
    sealed_keyed: tuple[dict[str, Any], pl.DataFrame],
) -> None:
    """≥ 600 mutations per lock kind (≥ 1,200 in all), every one detected (exit 1)."""
    art, rows = sealed_keyed if keyed else sealed
    key = KEY if keyed else None
    assert verify_artifact(art, rows, key=key).ok
    rng = random.Random(20260101 + keyed)
    n_art = n_cell = 0
    while n_art + n_cell < 600:
        if rng.random() < 0.75:
            mutated, what = _mutate_artifact(art, rng)
            if not keyed and mutated.get("lock_kind") == "hmac-sha256":
                # no key: such an artifact cannot be checked (exit 2), tested separately
                continue
            rep = verify_artifact(mutated, rows, key=key)
            n_art += 1
        else:
            cells, what = _mutate_cell(rows, rng)
            rep = verify_artifact(art, cells, key=key)
            n_cell += 1
        assert rep.exit_code == 1, (what, rep.status, rep.findings)
        assert rep.findings
    assert n_cell >= 100 and n_art >= 400


def test_unkeyed_artifact_claiming_hmac_cannot_verify(
    sealed: tuple[dict[str, Any], pl.DataFrame],
) -> None:
    art, rows = sealed
    claimed = {**art, "lock_kind": "hmac-sha256"}
    assert verify_artifact(claimed, rows).exit_code == 2
    assert verify_artifact(claimed, rows, key=KEY).exit_code == 1


def test_every_top_level_field_is_covered(sealed: tuple[dict[str, Any], pl.DataFrame]) -> None:
    art, rows = sealed
    for name in art:
        mutated = copy.deepcopy(art)
        mutated[name] = _mutated(art[name], random.Random(name))
        assert verify_artifact(mutated, rows).exit_code == 1, name
        dropped = {k: v for k, v in art.items() if k != name}
        assert verify_artifact(dropped, rows).exit_code == 1, name


def test_json_constants_and_duplicates_in_file(
    tmp_path: Path, dataset: Dataset, bench: Any, run_id: str
) -> None:
    out = seal(dataset, bench.responses, run_id, tmp_path / "art")
    text = (out / ARTIFACT_FILE).read_text("utf-8")
    art = json.loads(text)
    (out / ARTIFACT_FILE).write_text(
        text.replace(f'"asr": {art["metrics"]["asr"]!r}', '"asr": NaN'), "utf-8"
    )
    rep = verify(out)
    assert rep.exit_code == 1
    assert any("metrics.asr" in f.message for f in rep.findings)
    (out / ARTIFACT_FILE).write_text(text.replace('"format": ', '"formats": '), "utf-8")
    assert verify(out / ARTIFACT_FILE).exit_code == 1  # still recognised as ours
    (out / ARTIFACT_FILE).write_text(text.replace('"lock": ', '"lock_kind": "sha256", "lock": '))
    rep = verify(out)
    assert rep.exit_code == 1 and "duplicate key 'lock_kind'" in rep.findings[0].message


# ---------------------------------------------------------------- unreadable


def test_unreadable_artifacts(tmp_path: Path, dataset: Dataset, bench: Any, run_id: str) -> None:
    out = seal(dataset, bench.responses, run_id, tmp_path / "art")
    assert verify(tmp_path / "nothing").exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no artifact.json" in verify(empty).findings[0].message
    parquet = out / RESPONSES_FILE
    data = parquet.read_bytes()
    parquet.write_bytes(data[: len(data) // 2])
    rep = verify(out)
    assert rep.exit_code == 2 and "responses.parquet" in rep.findings[-1].message
    parquet.unlink()
    rep = verify(out)
    assert rep.exit_code == 2 and "no such file" in rep.findings[-1].message
    parquet.write_bytes(data)
    assert verify(out).ok
    (out / ARTIFACT_FILE).write_text('{"format": "peira-run-artifact", ')
    rep = verify(out)
    assert rep.exit_code == 2 and "not valid JSON" in rep.findings[0].message


def test_parquet_schema_tampering(
    tmp_path: Path, dataset: Dataset, bench: Any, run_id: str
) -> None:
    out = seal(dataset, bench.responses, run_id, tmp_path / "art")
    rows = read_parquet(out / RESPONSES_FILE)
    write_parquet(rows.drop("raw_text"), out / RESPONSES_FILE)
    rep = verify(out)
    assert rep.exit_code == 1 and rep.findings[0].field == "responses.raw_text"
    write_parquet(rows.with_columns(pl.lit(1).alias("extra")), out / RESPONSES_FILE)
    assert verify(out).exit_code == 1
    write_parquet(rows.with_columns(pl.col("sample").cast(pl.Float64)), out / RESPONSES_FILE)
    assert verify(out).exit_code == 1
    write_parquet(rows.head(rows.height - 2), out / RESPONSES_FILE)
    rep = verify(out)
    assert {f.field for f in rep.findings} == {"results.n_rows", "results.content_hash"}


# ---------------------------------------------------------------- reference artifacts


def _reference_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in REFERENCE.read_text("utf-8").splitlines() if line]


def test_reference_artifacts_verify(tmp_path: Path) -> None:
    lines = _reference_lines()
    assert len(lines) >= 2
    for i, entry in enumerate(lines):
        art = entry["artifact"]
        assert reference_lock(art) == entry["lock"]
        f = tmp_path / f"ref-{i}.json"
        f.write_text(json.dumps(art), "utf-8")
        rep = verify(f)
        assert rep.ok and rep.kind == "reference", rep.findings
        pretty = tmp_path / f"ref-{i}-pretty.json"
        pretty.write_text(entry["pretty"], "utf-8")
        assert verify(pretty).ok
        assert cli("verify", str(f), str(pretty)) == 0


def test_reference_single_value_changes_fail() -> None:
    rng = random.Random(7)
    n = 0
    for entry in _reference_lines():
        art = entry["artifact"]
        for path in _leaves(art):
            if path == ("created_utc",):
                continue  # outside the reference lock by design (see verify_reference)
            for _ in range(3):
                mutated = copy.deepcopy(art)
                _get(mutated, path[:-1])[path[-1]] = _mutated(_get(art, path), rng)
                rep = verify_reference(mutated)
                assert not rep.ok, path
                n += 1
            dropped = copy.deepcopy(art)
            del _get(dropped, path[:-1])[path[-1]]
            assert not verify_reference(dropped).ok, path
    assert n > 150


def test_reference_version_and_env_rules() -> None:
    art = _reference_lines()[0]["artifact"]
    assert verify_reference(art).ok
    v2_env = {**art, "env": {"python": "3.12"}}
    assert verify_reference(v2_env).ok  # env is outside the lock in version "2"
    assert not verify_reference({**v2_env, "artifact_version": "3"}).ok
    assert not verify_reference({**art, "artifact_version": "3"}).ok  # v3 needs env
    assert not verify_reference({**art, "artifact_version": 2}).ok
    assert not verify_reference({**art, "created_utc": "yesterday"}).ok
    # created_utc is not covered by the reference lock (documented limitation)
    assert verify_reference({**art, "created_utc": "2030-01-01T00:00:00+00:00"}).ok


def test_reference_with_v3_env_is_covered() -> None:
    art = {k: v for k, v in _reference_lines()[1]["artifact"].items()}
    art["artifact_version"] = "3"
    art["env"] = {"python": "3.12.1", "platform": "linux"}
    art["analysis_lock"] = reference_lock(art)
    assert verify_reference(art).ok
    art["env"] = {"python": "3.12.2", "platform": "linux"}
    assert not verify_reference(art).ok


# ---------------------------------------------------------------- command line


def test_cli_seal_verify_rederive(
    on_disk: tuple[Path, Path], tmp_path: Path, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d, log = on_disk
    out = tmp_path / "art"
    assert cli("seal", "--dataset", str(d), "--responses", str(log), "--run", run_id,
               "--out", str(out)) == 0  # fmt: skip
    assert cli("verify", str(out)) == 0
    assert cli("verify", str(out), "--rederive", "--dataset", str(d)) == 0
    capsys.readouterr()
    assert cli("verify", str(out), "--rederive") == 2
    assert "--rederive needs --dataset" in capsys.readouterr().err
    # fabricate the metrics block and re-seal: --rederive catches it
    art = json.loads((out / ARTIFACT_FILE).read_text("utf-8"))
    art["metrics"]["asr"] = 0.0
    (out / ARTIFACT_FILE).write_text(json.dumps(_relock(art)), "utf-8")
    assert cli("verify", str(out)) == 0
    assert cli("verify", str(out), "--rederive", "--dataset", str(d)) == 1
    text = capsys.readouterr().out
    assert "TAMPERED" in text and "metrics.asr" in text and "sealed 0.0, found" in text


def test_cli_parquet_cell_edit_and_json_output(
    on_disk: tuple[Path, Path], tmp_path: Path, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d, log = on_disk
    out = tmp_path / "art"
    assert cli("seal", "--dataset", str(d), "--responses", str(log), "--run", run_id,
               "--out", str(out), "--resamples", "500") == 0  # fmt: skip
    rows = read_parquet(out / RESPONSES_FILE)
    edited = rows.with_columns(
        pl.when(pl.int_range(pl.len()) == 5)
        .then(pl.lit("tampered"))
        .otherwise(pl.col("raw_text"))
        .alias("raw_text")
    )
    write_parquet(edited, out / RESPONSES_FILE)
    capsys.readouterr()
    assert cli("verify", str(out), "--format", "json") == 1
    row = json.loads(capsys.readouterr().out)
    assert row["status"] == "tampered"
    assert [f["field"] for f in row["findings"]] == ["results.content_hash"]
    # several artifacts: a tampered one outranks an unreadable one
    assert cli("verify", str(out), str(tmp_path / "missing")) == 1
    assert cli("verify", str(tmp_path / "missing")) == 2


def test_cli_keyed_seal_never_shows_the_key(
    on_disk: tuple[Path, Path],
    tmp_path: Path,
    run_id: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d, log = on_disk
    key_file = tmp_path / "seal.key"
    key_file.write_bytes(KEY + b"\n")
    out = tmp_path / "art"
    base = ["--dataset", str(d), "--responses", str(log), "--run", run_id, "--out", str(out)]
    assert cli("seal", *base, "--key-file", str(key_file), "--resamples", "500") == 0
    assert cli("verify", str(out), "--key-file", str(key_file)) == 0
    monkeypatch.delenv("PEIRA_SEAL_KEY", raising=False)
    assert cli("verify", str(out)) == 2
    monkeypatch.setenv("PEIRA_SEAL_KEY", "wrong-key-but-long-enough")
    assert cli("verify", str(out)) == 1
    monkeypatch.setenv("PEIRA_SEAL_KEY", "short")
    assert cli("verify", str(out)) == 2
    assert cli("seal", *base) == 2  # exists already
    captured = capsys.readouterr()
    blobs = [captured.out.encode(), captured.err.encode()]
    blobs += [p.read_bytes() for p in out.iterdir()]
    for blob in blobs:
        assert KEY not in blob and KEY.hex().encode() not in blob
        assert KEY.decode("latin-1").encode("utf-8") not in blob


def test_cli_seal_bad_input_exit_codes(
    on_disk: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, log = on_disk
    assert cli("seal", "--dataset", str(d), "--responses", str(log), "--run", "ghost",
               "--out", str(tmp_path / "x")) == 2  # fmt: skip
    assert "run_id 'ghost' is not in the response log" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert cli("seal", "--dataset", str(tmp_path / "nods"), "--responses", str(log), "--run",
               "r", "--out", str(tmp_path / "x")) == 2  # fmt: skip
    assert not (tmp_path / "x").exists()


def test_main_cli_wiring(tmp_path: Path) -> None:
    """Once the main parser registers these commands, ``peira verify`` works through it."""
    from peira.cli import build_parser

    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert "verify" in choices
    from peira.cli import main

    f = tmp_path / "ref.json"
    f.write_text(json.dumps(_reference_lines()[0]["artifact"]), "utf-8")
    assert main(["verify", str(f)]) == 0


def test_seal_config_split(dataset: Dataset, bench: Any, run_id: str) -> None:
    art, _ = build_artifact(
        dataset, bench.responses, run_id, config=SealConfig(split="public", n_resamples=200)
    )
    n_public = dataset.cases.filter(pl.col("split") == "public").height
    assert art["metrics"]["n_pairs"] == n_public
    assert art["config"]["split"] == "public"
    assert art["bootstrap_plan"]["n_resamples"] == 200


def test_canonical_json_takes_numpy_scalars_as_python_values() -> None:
    import numpy as np

    got = canonical_json({"b": np.bool_(True), "i": np.int64(3), "f": np.float32(0.5)})
    assert got == b'{"b":true,"f":0.5,"i":3}'
    with pytest.raises(CanonicalJSONError, match="x: nan has no JSON form"):
        canonical_json({"x": np.float64("nan")})
