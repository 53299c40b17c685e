"""Where ``peira import textattack`` finds TextAttack's attack summary.

The fixture tests/fixtures/textattack/bert-mr-embedding-greedy.{csv.gz,txt} (a
CSV and the summary TextAttack printed for it) is copied into ``tmp_path``
under the other names TextAttack outputs carry: the console output kept in a
``.log``, a summary file of its own, the ``--log-summary-to-json`` file. The
oracle of every figure is the summary as printed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from peira.errors import InputFormatError
from peira.importers.textattack import SUMMARY_NAMES, read_summary, read_textattack

TA = Path(__file__).resolve().parents[1] / "fixtures" / "textattack"
STEM = "bert-mr-embedding-greedy"
CSV, TXT = TA / f"{STEM}.csv.gz", TA / f"{STEM}.txt"
#: The figures as TextAttack printed them (percent to two decimals).
PRINTED = {"benign_accuracy": 0.8292, "accuracy_under_attack": 0.1277, "asr": 0.846}


def _rows() -> list[tuple[str, str]]:
    """The summary's rows, (label with its colon, value), as printed."""
    rows = []
    for line in TXT.read_text().splitlines():
        label, _, value = line.rpartition(": ")
        rows.append((label + ":", value))
    return rows


def _console(rows: list[tuple[str, str]]) -> str:
    """The rows in the table TextAttack prints on the console (terminaltables' AsciiTable)."""
    w1 = max(len(a) for a, _ in rows)
    w2 = max(len(b) for _, b in rows)
    rule = f"+{'-' * (w1 + 2)}+{'-' * (w2 + 2)}+"
    body = [f"| {a:<{w1}} | {b:<{w2}} |" for a, b in rows]
    head = f"| {'Attack Results':<{w1}} | {'':<{w2}} |"
    return "\n".join(["[Succeeded / Failed / Skipped / Total] 423 / 77 / 103 / 603", "",
                      rule, head, rule, *body, rule, ""])  # fmt: skip


def _json(rows: list[tuple[str, str]]) -> str:
    """The rows as TextAttack's JsonSummaryLogger writes them (percent signs dropped)."""
    return json.dumps({"Attack Results": {a: float(b.replace("%", "")) for a, b in rows}}, indent=4)


def _published(imp: object) -> dict[str, float]:
    pub = imp.published  # type: ignore[attr-defined]
    assert pub is not None
    return dict(zip(pub["metric"], pub["estimate"], strict=True))


def _csv_in(tmp_path: Path, stem: str = STEM) -> Path:
    dst = tmp_path / f"{stem}.csv.gz"
    shutil.copy(CSV, dst)
    return dst


@pytest.mark.parametrize(
    "name", ["{stem}.txt", "{stem}.log", "{stem}.out", "{stem}.summary.txt", "{stem}_summary.txt"]
)
def test_the_summary_is_found_under_its_common_names(name: str, tmp_path: Path) -> None:
    csv = _csv_in(tmp_path)
    shutil.copy(TXT, tmp_path / name.format(stem=STEM))
    imp = read_textattack([csv])
    assert _published(imp) == pytest.approx(PRINTED, abs=1e-12)
    assert name.format(stem=STEM) in imp.published["source"][0]  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "text"), [("{stem}.log", _console), ("{stem}_summary.json", _json)]
)
def test_console_and_json_summaries(name: str, text: object, tmp_path: Path) -> None:
    csv = _csv_in(tmp_path)
    path = tmp_path / name.format(stem=STEM)
    path.write_text(text(_rows()))  # type: ignore[operator]
    assert read_summary(path) == pytest.approx(
        {**PRINTED, "n_successful": 423, "n_failed": 77, "n_skipped": 103}
    )
    assert _published(read_textattack([csv])) == pytest.approx(PRINTED, abs=1e-12)


def test_a_file_without_a_summary_is_passed_over(tmp_path: Path) -> None:
    """``<stem>.txt`` holding only the per-example log: the summary in ``<stem>.log`` is used."""
    csv = _csv_in(tmp_path)
    (tmp_path / f"{STEM}.txt").write_text("--- Result 1 ---\n[[Positive (99%)]] --> [[FAILED]]\n")
    shutil.copy(TXT, tmp_path / f"{STEM}.log")
    imp = read_textattack([csv])
    assert _published(imp) == pytest.approx(PRINTED, abs=1e-12)
    assert f"{STEM}.log" in imp.published["source"][0]  # type: ignore[index]


def test_no_summary_beside_is_a_note(tmp_path: Path) -> None:
    imp = read_textattack([_csv_in(tmp_path)])
    assert imp.published is None
    (note,) = [n for n in imp.notes if "no TextAttack summary" in n]
    assert f"{STEM}.txt" in note and "--summary FILE" in note


def test_a_named_summary_is_read_whatever_its_name(tmp_path: Path) -> None:
    csv = _csv_in(tmp_path, "run")
    named = tmp_path / "attack-report.md"
    shutil.copy(TXT, named)
    imp = read_textattack([csv], summaries=[named])
    assert _published(imp) == pytest.approx(PRINTED, abs=1e-12)
    assert SUMMARY_NAMES[0].format(stem="run") not in imp.published["source"][0]  # type: ignore[index]


def test_a_named_summary_missing_or_without_one_is_an_error(tmp_path: Path) -> None:
    csv = _csv_in(tmp_path)
    shutil.copy(TXT, tmp_path / f"{STEM}.txt")  # found beside it, but a named one wins
    with pytest.raises(InputFormatError, match=r"nope.txt: no such file \(the TextAttack summary"):
        read_textattack([csv], summaries=[tmp_path / "nope.txt"])
    other = tmp_path / "notes.txt"
    other.write_text("attack ran on the MR test set\n")
    with pytest.raises(InputFormatError, match=r"notes.txt: no TextAttack summary in it"):
        read_textattack([csv], summaries=[other])
    with pytest.raises(InputFormatError, match=r"1 summary file\(s\) for 2 CSV file\(s\)"):
        read_textattack([csv, TA / "lstm-mr-embedding-greedy.csv.gz"], summaries=[other])
