"""The flat API (peira.api) and the package face (peira/__init__.py)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import peira
from peira import api
from peira._frames import as_polars
from peira.cli import main
from peira.errors import PeiraTypeError, PeiraValueError, UnknownNameError
from peira.metrics import METRICS, RATIO_METRICS
from tests.fresh import FreshPython

# the tiny dataset has two scenario clusters: every plan on it warns, by design
pytestmark = pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")

FLAT = (
    "agreement",
    "compare",
    "diff",
    "flips",
    "gate",
    "leaderboard",
    "pairs",
    "plan",
    "read_log",
    "rescore",
    "score",
    "tables",
    "validate",
)


def test_all_is_frozen_and_sorted() -> None:
    """The public face; changing it is an API change (add a name here on purpose)."""
    assert peira.__all__ == [
        "DataFileError", "Dataset", "InputFormatError", "MissingArmsError", "PeiraError",
        "PeiraKeyError", "PeiraTypeError", "PeiraValueError", "PeiraWarning",
        "UnknownNameError", "ValidationError", "__version__", "agreement", "compare", "demo_dir", "diff",
        "flips", "gate", "leaderboard", "pairs", "plan", "read_dataset", "read_log",
        "read_responses", "rescore",
        "scan_responses", "score", "tables", "validate", "write_dataset", "write_parquet",
    ]  # fmt: skip
    assert peira.__all__ == sorted(peira.__all__)
    for name in peira.__all__:
        assert getattr(peira, name) is not None
        assert name in dir(peira)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        peira.nope  # noqa: B018


def test_import_peira_is_cheap(fresh_python: FreshPython) -> None:
    """``import peira`` (and ``peira --help``) load neither polars nor pandera nor scipy."""
    code = (
        "import sys, peira, peira.cli; peira.cli.build_parser(); "
        "print(sorted(m for m in ('polars', 'pandera', 'pandas', 'scipy', 'statsmodels', "
        "'numpy', 'pyarrow', 'matplotlib') if m in sys.modules))"
    )
    out = fresh_python.run(code, check=True)
    assert out.stdout.strip() == "[]"


def test_peira_metrics_lists_the_registry_without_a_dataframe_library(
    fresh_python: FreshPython,
) -> None:
    """``peira metrics`` prints, in every format, what rendering the registry's polars
    frame prints, from a process that imports neither polars nor numpy."""
    from peira.cli._output import render
    from peira.metrics import registry_frame

    frame = registry_frame()
    for fmt in ("table", "csv", "json", "markdown"):
        code = (
            "import sys; from peira.cli import main; "
            f"rc = main(['metrics', '--format', '{fmt}']); "
            "sys.stderr.write(repr(sorted(m for m in ('polars', 'numpy', 'pyarrow', 'pandera') "
            "if m in sys.modules))); sys.exit(rc)"
        )
        env = {**os.environ, "COLUMNS": "100"}
        out = fresh_python.run(code, env=env, check=True)
        assert out.stderr == "[]", fmt
        assert out.stdout == render(frame, fmt, width=100), fmt
    assert frame.height == len(METRICS) and frame["min_n"].dtype == pl.Int64


def test_render_rows_quotes_csv_as_polars_does() -> None:
    from peira.cli._output import render, render_rows

    rows = [
        ("plain", 1, None),
        ("a, comma", None, 'say "hi"'),
        ("two\nlines", 30, " padded "),
        ("", 0, "semi;colon"),
    ]
    frame = pl.DataFrame(rows, schema={"a": pl.String, "n": pl.Int64, "b": pl.String}, orient="row")
    for fmt in ("csv", "json", "markdown", "table"):
        got = render_rows(frame.columns, rows, [False, True, False], fmt, width=60)
        assert got == render(frame, fmt, width=60), fmt


def test_ratio_metrics_are_the_registrys_ratio_kind() -> None:
    """Each ratio metric's expressions pair with exactly one registry entry of kind ratio."""
    ratio_kind = [m for m in METRICS.values() if m.kind == "ratio"]
    assert [m.name for m in ratio_kind] == list(RATIO_METRICS)
    for m in ratio_kind:
        r = RATIO_METRICS[m.name]
        assert (r.higher_is_better, r.definition) == (m.higher_is_better, m.definition)


def test_flat_names_stay_callable_whatever_is_imported() -> None:
    """Importing every module leaves each flat name (peira.pairs, peira.compare) the function."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for info in pkgutil.walk_packages(peira.__path__, "peira."):
            if info.name != "peira.__main__":
                importlib.import_module(info.name)
    for name in FLAT:
        value = getattr(peira, name)
        assert callable(value), name
        params = set(__import__("inspect").signature(value).parameters)
        assert params == set(__import__("inspect").signature(getattr(api, name)).parameters)
    from peira._pairs import build_pairs  # the scoring rule lives in a private module

    assert callable(build_pairs)
    assert peira.pairs is api.pairs and peira.compare is api.compare


def test_renamed_names_warn_for_one_release() -> None:
    from peira.metrics import frame

    with pytest.warns(DeprecationWarning, match="ratio_table"):
        from peira.metrics import score
    assert score is frame.ratio_table


# ---------------------------------------------------------------- frames in, polars out


class _Capsule:
    """Exposes only the Arrow PyCapsule stream interface (like DuckDB or narwhals objects)."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._table.__arrow_c_stream__(requested_schema)


def test_as_polars_takes_every_kind_of_table() -> None:
    want = pl.DataFrame({"run_id": ["m1", "m2"], "x": [1.5, None]})
    table = want.to_arrow()
    for obj in (
        want,
        want.lazy(),
        table,
        table.to_batches()[0],
        want.to_pandas(),
        _Capsule(table),
    ):
        assert as_polars(obj, name="t").equals(want), type(obj)
    with pytest.raises(PeiraTypeError, match=r"^responses: expected .* not dict$"):
        as_polars({"run_id": ["m1"]}, name="responses")


def test_score_from_paths_equals_score_from_pandas_and_arrow(tiny: Path) -> None:
    log = tiny / "responses.parquet"
    cases = pl.read_parquet(tiny / "cases.parquet")
    opts: dict[str, Any] = {"n_resamples": 200, "by": "primitive"}
    from_paths = peira.score(log, tiny, **opts)
    from_pandas = peira.score(pd.read_parquet(log), cases.to_pandas(), **opts)
    from_arrow = peira.score(pl.read_parquet(log).to_arrow(), cases.to_arrow(), **opts)
    assert from_paths.equals(from_pandas) and from_paths.equals(from_arrow)
    assert from_paths["run_id"].to_list() == ["r1", "r1"]
    assert {"asr_lo", "asr_hi", "fingerprint", "interval_method"} <= set(from_paths.columns)


def test_score_is_what_the_cli_prints(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tiny), "--format", "json", "--resamples", "300"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    table = peira.score(tiny / "responses.parquet", tiny, n_resamples=300)
    assert len(printed) == table.height == 1
    for key, value in table.row(0, named=True).items():
        if isinstance(value, float):
            assert printed[0][key] == pytest.approx(value, rel=0, abs=0), key
        else:
            assert printed[0][key] == value, key


def test_leaderboard_and_compare(tiny: Path) -> None:
    board = peira.leaderboard(tiny / "responses.parquet", tiny, split="all", n_resamples=200)
    assert board["run_id"].to_list() == ["r1"] and board["robustness"][0] == pytest.approx(2 / 3)
    assert board["robustness_lo"][0] == board["lo"][0]
    with pytest.raises(PeiraValueError, match="needs two runs or more"):
        peira.compare(tiny / "responses.parquet", tiny, runs=["r1"], split="all")


def test_pairs_split_and_engine(tiny: Path) -> None:
    p = peira.pairs(tiny / "responses.parquet", tiny)
    assert p.height == 3 and p["flipped"].sum() == 1
    with pytest.raises(PeiraValueError, match="no cases in split 'holdout'"):
        peira.pairs(tiny / "responses.parquet", tiny, split="holdout")
    with pytest.raises(UnknownNameError, match="unknown engine 'sparc'; did you mean 'spark'"):
        peira.pairs(tiny / "responses.parquet", tiny, engine="sparc")
    with pytest.raises(PeiraValueError, match="the pair table needs every pair in memory"):
        peira.pairs(tiny / "responses.parquet", tiny, engine="spark")
    with pytest.raises(
        PeiraValueError, match=r"The 'split' parameter of peira\.pairs must be one of"
    ):
        peira.pairs(tiny / "responses.parquet", tiny, split="public-ish")  # type: ignore[arg-type]


def test_validate_paths_and_frames(tiny: Path) -> None:
    log = tiny / "responses.parquet"
    assert peira.validate(tiny, log).height == 0
    bad = pl.read_parquet(log).with_columns(pl.lit(1.5).alias("confidence"))
    failures = peira.validate(pl.read_parquet(tiny / "cases.parquet"), [bad])
    assert failures.height == 6 and set(failures["column"]) == {"confidence"}
    assert set(failures["source"]) == {"responses[0]"}


def test_read_log_parquet_and_importers(tiny: Path, tmp_path: Path) -> None:
    log = peira.read_log(tiny / "responses.parquet", cases=tiny)
    assert log.height == 6
    with pytest.raises(PeiraValueError, match="gives a dataset, not a response log"):
        peira.read_log(tmp_path / "x.jsonl", format="cases")
    with pytest.raises(PeiraValueError, match="run_id applies to imported formats"):
        peira.read_log(tiny / "responses.parquet", run_id="r")


def test_tables_by_name(tiny: Path) -> None:
    from peira.errors import UnknownTableError

    with pytest.raises(UnknownTableError, match="did you mean 'gates'"):
        peira.tables(tiny / "responses.parquet", tiny, names=["gate"], split="all")
    got = peira.tables(tiny / "responses.parquet", tiny, names=["gates"], split="all",
                       n_resamples=100)  # fmt: skip
    assert list(got) == ["gates"] and got["gates"]["run_id"].to_list() == ["r1"]


def test_one_default_split_everywhere() -> None:
    """score, pairs, leaderboard and compare, library and command line: the public split."""
    import inspect

    from peira.cli import build_parser

    for fn in (peira.pairs, peira.score, peira.leaderboard, peira.compare):
        assert inspect.signature(fn).parameters["split"].default == "public", fn
    parser = build_parser()
    for command in ("score", "leaderboard", "compare"):
        args = parser.parse_args([command, "--dataset", "d"])
        assert args.split == "public", command
    d = peira.demo_dir()
    log = d / "responses.parquet"
    cases = pl.read_parquet(d / "cases.parquet")
    assert set(cases["split"]) == {"public", "holdout"}  # the demo has both
    p = peira.pairs(log, d)
    assert set(p["split"]) == {"public"}
    assert p.equals(peira.pairs(log, d, split="public"))
    assert peira.pairs(log, d, split="all").height > p.height


def test_validation_rejects_a_scenario_spanning_both_splits(tmp_path: Path) -> None:
    from peira.errors import ValidationError
    from peira.schema import validate_cases
    from tests.builders import case, make_cases

    ok = make_cases(case("c1", scenario_id="s1"), case("c2", scenario_id="s2", split="holdout"))
    assert validate_cases(ok).height == 2
    bad = make_cases(case("c1", scenario_id="s1"), case("c2", scenario_id="s1", split="holdout"))
    with pytest.raises(ValidationError, match="scenario_in_one_split"):
        validate_cases(bad, source="cases.parquet")


def test_the_command_validates_without_pandas_as_with_it(
    tmp_path: Path, fresh_python: FreshPython
) -> None:
    """``peira`` imports pandera without its pandas API (start-up): the same violations come
    out, word for word, as from a process that has pandas loaded."""
    import shutil

    import polars as pl

    bad = tmp_path / "bad"
    shutil.copytree(peira.demo_dir(), bad)
    log = pl.read_parquet(bad / "responses.parquet")
    log = log.with_columns(
        pl.when(pl.int_range(pl.len()) == 7).then(1.5).otherwise(pl.col("confidence"))
        .alias("confidence"),
        pl.when(pl.int_range(pl.len()) == 11).then(pl.lit("nope")).otherwise(pl.col("arm"))
        .alias("arm"),
    )  # fmt: skip
    log.write_parquet(bad / "responses.parquet")
    argv = ["validate", str(bad), "--responses", str(bad / "responses.parquet")]
    runs = {}
    for first in ("", "import pandas; "):
        code = (
            f"import sys; {first}from peira.cli import main; code = main({argv!r}); "
            "print('modules', sorted(m for m in ('pandas', 'scipy.stats', 'hypothesis', 'numba') if m in sys.modules)); "
            "sys.exit(code)"
        )
        runs[first] = fresh_python.run(code)
    lean, full = runs[""], runs["import pandas; "]
    assert lean.returncode == full.returncode == 1
    *lean_out, lean_modules = lean.stdout.splitlines()
    *full_out, full_modules = full.stdout.splitlines()
    assert lean_modules == "modules []" and "'pandas'" in full_modules
    assert lean_out == full_out
    assert lean.stderr == full.stderr
    assert "confidence" in lean.stdout + lean.stderr and "1.5" in lean.stdout + lean.stderr
