"""One input for both data arguments: an importer's result, or a dataset directory that
holds its log (``peira.score(imported)``, ``peira.score("out/jbb")``; peira.api's notes).

The oracle is the same call with the log and the dataset given apart, from the
directory the command line writes for the same files.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import peira
from peira.cli import main
from peira.errors import PeiraValueError
from peira.importers import IMPORTERS, Imported

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jailbreakbench" / "judges"
FILES = sorted(FIX.glob("*.json.gz"))
B = 200
GATES = {"min_eligible": 50, "min_eligible_per_family": 1}


@pytest.fixture(scope="module")
def imported() -> Imported:
    out = IMPORTERS["jailbreakbench"].read(FILES)
    assert isinstance(out, Imported)
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("one") / "jbb"
    assert main(["import", "jailbreakbench", *map(str, FILES), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize(
    ("verb", "kw"),
    [
        (peira.score, {"n_resamples": B}),
        (peira.score, {"n_resamples": B, "judge": "jailbroken_llama_guard1", "bounds": True}),
        (peira.leaderboard, {"n_resamples": B, "gates": GATES}),
        (peira.compare, {"n_resamples": B, "metric": "asr", "judges": "all"}),
        (peira.agreement, {"n_resamples": B}),
        (peira.pairs, {}),
    ],
)
def test_an_importers_result_is_both_inputs(
    imported: Imported, written: Path, verb: object, kw: dict[str, object]
) -> None:
    apart = verb(written / "responses.parquet", written, **kw)  # type: ignore[operator]
    assert_frame_equal(verb(imported, **kw), apart)  # type: ignore[operator]
    assert_frame_equal(verb(written, **kw), apart)  # type: ignore[operator]


def test_an_imported_log_with_cases_given(imported: Imported, written: Path) -> None:
    got = peira.score(imported, written, n_resamples=B)
    assert_frame_equal(got, peira.score(written / "responses.parquet", written, n_resamples=B))


def test_no_cases_and_no_dataset_is_refused(written: Path, tmp_path: Path) -> None:
    log = pl.read_parquet(written / "responses.parquet")
    with pytest.raises(PeiraValueError, match=r"peira\.score: no cases given"):
        peira.score(log)
    with pytest.raises(PeiraValueError, match=r"peira\.leaderboard: no cases given"):
        peira.leaderboard(written / "responses.parquet")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "cases.parquet").write_bytes((written / "cases.parquet").read_bytes())
    with pytest.raises(PeiraValueError, match=r"without a responses\.parquet"):
        peira.score(bare)
