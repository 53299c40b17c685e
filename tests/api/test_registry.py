"""The one registry type (peira._registry) and the importer table built on it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from peira._registry import Registry
from peira.errors import InputFormatError, PeiraValueError, PeiraWarning, UnknownNameError
from peira.importers import IMPORTERS, Importer, importer_for
from peira.metrics import METRICS, RATIO_METRICS
from peira.parse import PARSER_RULES, RULES
from peira.report import FIGURES, TABLES


def test_registry_is_a_mapping_in_registration_order() -> None:
    reg: Registry[str] = Registry("colour", ["red", "green"], key=str)
    assert reg.add("blue") == "blue"
    assert reg.names() == ("red", "green", "blue") == tuple(reg)
    assert list(reg.values()) == ["red", "green", "blue"]
    assert len(reg) == 3 and "green" in reg and "grey" not in reg
    assert reg["red"] == reg.get("red") == "red"
    assert reg.get("grey", None) is None
    assert dict(reg.items()) == {"red": "red", "green": "green", "blue": "blue"}
    with pytest.raises(PeiraValueError, match="colour 'red' is already registered"):
        reg.add("red")
    assert reg.add("red", replace=True) == "red" and len(reg) == 3


def test_unknown_name_offers_close_matches() -> None:
    reg: Registry[str] = Registry("table", ["leaderboard", "calibration", "gates"], key=str)
    with pytest.raises(UnknownNameError) as info:
        reg["leaderbord"]
    e = info.value
    assert isinstance(e, KeyError)  # a KeyError, so `except KeyError` keeps working
    assert (e.kind, e.name, e.matches) == ("table", "leaderbord", ("leaderboard",))
    assert str(e) == (
        "unknown table 'leaderbord'; did you mean 'leaderboard'? "
        "known tables: leaderboard, calibration, gates"
    )
    with pytest.raises(UnknownNameError) as info:
        reg.get("zzz")
    assert info.value.matches == () and "did you mean" not in str(info.value)


def test_the_library_registries_are_registries() -> None:
    for reg in (METRICS, RATIO_METRICS, TABLES, FIGURES, IMPORTERS, PARSER_RULES):
        assert isinstance(reg, Registry)
        assert reg.names() == tuple(reg) and all(reg[n] is reg.get(n) for n in reg.names())
    assert set(RATIO_METRICS) < set(METRICS)
    assert PARSER_RULES.names() == RULES and RULES[0] == "synth"
    with pytest.raises(UnknownNameError, match="did you mean 'robustness'"):
        RATIO_METRICS["robustnes"]
    with pytest.raises(UnknownNameError, match="did you mean 'asr_forest'"):
        FIGURES["asr-forest"]


def test_importer_for_by_name_and_by_suffix() -> None:
    assert importer_for("results.tsv").name == "table"
    assert importer_for("PAIR/gpt-4.JSON.GZ").name == "jailbreakbench"
    assert importer_for("bert.csv.gz").name == "textattack"
    assert importer_for("x.jsonl", "cases").produces == "dataset"
    with pytest.raises(
        InputFormatError, match=r"several formats use '\.jsonl'.*cases, transcript, table"
    ):
        importer_for("x.jsonl")
    with pytest.raises(InputFormatError, match=r"several formats use '\.json'.*artifact"):
        importer_for("run.json")
    with pytest.raises(InputFormatError, match=r"no importer reads '\.xlsx'"):
        importer_for("x.xlsx")
    with pytest.raises(UnknownNameError, match="did you mean 'transcript'"):
        importer_for("x.jsonl", "transcrpt")
    with pytest.raises(PeiraValueError, match="importer 'cases' takes no options, not run_id"):
        IMPORTERS["cases"].read("x.jsonl", run_id="r")


# ---------------------------------------------------------------- entry points (plugins)


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution with a ``peira.importers`` entry point (a real one:
    a dist-info directory on sys.path, found by importlib.metadata)."""
    site = tmp_path / "site"
    (site / "peira_tsv_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "peira_tsv_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: peira-tsv-plugin\nVersion: 1.0\n"
    )
    (site / "peira_tsv_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[peira.importers]\ntsv = peira_tsv_plugin:IMPORTER\nbroken = peira_tsv_plugin:NOPE\n"
    )
    (site / "peira_tsv_plugin.py").write_text(
        textwrap.dedent(
            """
            import polars as pl
            from peira.importers import Importer

            def read_tsv(path, *, run_id=None):
                df = pl.read_csv(path, separator="\\t")
                return df.with_columns(pl.lit(run_id or "tsv").alias("run_id"))

            IMPORTER = Importer("tsv", "responses", (".tsv",), "peira_tsv_plugin:read_tsv",
                                "tab-separated test format", ("run_id",))
            """
        )
    )
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("peira_tsv_plugin", None)


def test_entry_point_importers_are_loaded_and_broken_ones_warned(plugin: Path) -> None:
    reg: Registry[Importer] = Registry("importer", IMPORTERS.values(), entry_points="x")
    with pytest.warns(PeiraWarning, match="entry point 'broken'.*skipped"):
        added = reg.load_entry_points("peira.importers")
    assert added == ("tsv",) and reg.names()[-1] == "tsv"
    f = plugin / "calls.tsv"
    f.write_text("case_id\tdecision\nc1\tdeny\n")
    got = reg["tsv"].read(f, run_id="r9")
    assert got.equals(pl.DataFrame({"case_id": ["c1"], "decision": ["deny"], "run_id": ["r9"]}))


def test_a_registry_reads_its_entry_point_group_on_first_use(plugin: Path) -> None:
    reg: Registry[Importer] = Registry("importer", entry_points="peira.importers")
    with pytest.warns(PeiraWarning, match="broken"):
        assert "tsv" in reg
    assert reg.names() == ("tsv",)  # read once
