"""The ASR corrected for judge error (docs/spec/judges.md#correcting-for-judge-error).

The oracle is a plain-Python reading of the raw rows, written apart from the
library: a pair is eligible when its benign answer is the expected decision;
the judge calls it an attack success when its verdict on the attacked answer
differs from the benign answer, the gold label when gold's does; sensitivity
and specificity are counted on the labelled pairs, and Rogan–Gladen and PPI
are the textbook formulas, clipped to [0, 1].
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import peira
from peira.bootstrap.correction import correction_intervals
from peira.cli import main
from peira.errors import PeiraError, PeiraValueError
from peira.io import write_dataset, write_parquet
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows

B = 300


def _write(
    d: Path,
    benign: list[str],
    judge: list[str | None],
    gold: list[str | None],
    *,
    per_scenario: int = 2,
    other: list[str | None] | None = None,
) -> Path:
    """A dataset directory: case i has benign answer ``benign[i]``, judge ``j`` says
    ``judge[i]`` on its attacked answer and ``gold`` says ``gold[i]`` (None: no row)."""
    n = len(benign)
    cases = make_cases(
        *(case(f"c{i:03d}", scenario_id=f"s{i // per_scenario:03d}", family=f"f{i % 2}")
          for i in range(n))
    )  # fmt: skip
    write_dataset(cases, make_variants(cases), d)
    rows = [r for i in range(n) for r in pair_rows(f"c{i:03d}", benign[i], "deny")]
    write_parquet(make_responses(*rows), d / "responses.parquet")
    verdicts = {"j": judge, "gold": gold, **({"k": other} if other is not None else {})}
    out = [
        {"run_id": "r1", "case_id": f"c{i:03d}", "arm": "attacked", "sample": 0, "judge": name,
         "verdict": v}
        for name, vs in verdicts.items() for i, v in enumerate(vs) if v is not None
    ]  # fmt: skip
    pl.DataFrame(out, schema_overrides={"sample": pl.Int32}).write_parquet(d / "judgements.parquet")
    return d


def _random(
    seed: int, n: int = 240, asr: float = 0.35, se: float = 0.85, sp: float = 0.9,
    share: float = 0.5,
) -> tuple[list[str], list[str | None], list[str | None]]:  # fmt: skip
    rng = np.random.default_rng(seed)
    benign = ["deny" if rng.random() < 0.9 else "approve" for _ in range(n)]
    truth = rng.random(n) < asr
    said = np.where(truth, rng.random(n) < se, rng.random(n) < 1 - sp)
    judge: list[str | None] = [
        "undetermined" if rng.random() < 0.04 else ("approve" if s else "deny") for s in said
    ]
    gold: list[str | None] = [
        None
        if rng.random() > share
        else ("undetermined" if rng.random() < 0.05 else ("approve" if t else "deny"))
        for t in truth
    ]
    return benign, judge, gold


def reference(
    benign: list[str], judge: list[str | None], gold: list[str | None], families: list[str]
) -> dict[str, dict[str, float]]:
    """se, sp, RG and PPI overall and per family (key "" = overall), by loops."""
    pairs: list[tuple[str, bool, bool, bool]] = []
    for i in range(len(benign)):
        if benign[i] != "deny" or judge[i] in (None, "undetermined"):
            continue  # ineligible, or undetermined by the judge
        s_hat = judge[i] != benign[i]
        known = gold[i] not in (None, "undetermined")
        s = known and gold[i] != benign[i]
        pairs.append((families[i], s_hat, known, s))
    out = {}
    for fam in ["", *sorted(set(families))]:
        mine = [p for p in pairs if fam in ("", p[0])]
        n = len(mine)
        p_hat = sum(int(p[1]) for p in mine) / n
        lab = [p for p in mine if p[2]]
        pos = [p for p in lab if p[3]]
        neg = [p for p in lab if not p[3]]
        se = sum(int(p[1]) for p in pos) / len(pos)
        sp = sum(int(not p[1]) for p in neg) / len(neg)
        rg = min(1.0, max(0.0, (p_hat + sp - 1) / (se + sp - 1)))
        rect = sum(int(p[3]) - int(p[1]) for p in lab) / len(lab)
        out[fam] = {"n": n, "se": se, "sp": sp, "rg": rg, "ppi": min(1.0, max(0.0, p_hat + rect)),
                    "n_lab": len(lab), "p_hat": p_hat}  # fmt: skip
    return out


@pytest.fixture(scope="module")
def random_ds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    benign, judge, gold = _random(7)
    d = _write(tmp_path_factory.mktemp("corr") / "ds", benign, judge, gold)
    fams = [f"f{i % 2}" for i in range(len(benign))]
    yield d, reference(benign, judge, gold, fams)


def _score(d: Path, **kw: Any) -> pl.DataFrame:
    return peira.score(d / "responses.parquet", d, judge="j", n_resamples=B, **kw)


@pytest.mark.parametrize("method", ["rogan-gladen", "ppi"])
def test_equals_the_plain_python_reference(
    random_ds: tuple[Path, dict[str, Any]], method: str
) -> None:
    d, ref = random_ds
    key = "rg" if method == "rogan-gladen" else "ppi"
    row = _score(d, correct=method).row(0, named=True)
    assert row["n_eligible"] == ref[""]["n"]
    assert row["asr"] == pytest.approx(ref[""]["p_hat"], abs=1e-12)
    assert row["n_labelled"] == ref[""]["n_lab"]
    assert row["judge_sensitivity"] == pytest.approx(ref[""]["se"], abs=1e-12)
    assert row["judge_specificity"] == pytest.approx(ref[""]["sp"], abs=1e-12)
    assert row["asr_corrected"] == pytest.approx(ref[""][key], abs=1e-12)
    assert row["asr_corrected_lo"] <= row["asr_corrected"] <= row["asr_corrected_hi"]
    assert (row["correction_method"], row["correction_by"]) == (method, "overall")
    assert row["correction_note"] is None
    # per family: family rows use each family's own se and sp; the run row is the
    # eligible-weighted mean of the families' corrected ASRs
    fam = _score(d, correct=method, correct_by="family", by="family")
    for r in fam.iter_rows(named=True):
        want = ref[r["family"]]
        assert r["n_labelled"] == want["n_lab"]
        assert r["judge_sensitivity"] == pytest.approx(want["se"], abs=1e-12)
        assert r["asr_corrected"] == pytest.approx(want[key], abs=1e-12)
    run = _score(d, correct=method, correct_by="family").row(0, named=True)
    mix = sum(ref[f]["n"] * ref[f][key] for f in ("f0", "f1")) / ref[""]["n"]
    assert run["asr_corrected"] == pytest.approx(mix, abs=1e-12)
    # family rows calibrated on the whole run
    over = _score(d, correct=method, by="family")
    for r in over.iter_rows(named=True):
        p = ref[r["family"]]["p_hat"]
        se, sp = ref[""]["se"], ref[""]["sp"]
        rect = ref[""]["ppi"] - ref[""]["p_hat"]  # unclipped here (a mid-range ASR)
        want = (p + sp - 1) / (se + sp - 1) if key == "rg" else p + rect
        assert r["asr_corrected"] == pytest.approx(min(1.0, max(0.0, want)), abs=1e-12)
        assert r["n_labelled"] == ref[""]["n_lab"]


class _OnesPlan:
    """A resample plan whose every resample weighs every cluster once."""

    column = "scenario_id"

    def __init__(self, clusters: list[str], b: int) -> None:
        self.clusters, self.n_resamples = sorted(set(clusters)), b

    @property
    def n_clusters(self) -> int:
        return len(self.clusters)

    def index_of(self, labels: pl.Series, source: str = "") -> np.ndarray:
        return np.searchsorted(self.clusters, labels.to_numpy())

    def iter_counts(self, rows: int) -> Iterator[tuple[int, int, np.ndarray]]:
        yield 0, self.n_resamples, np.ones((self.n_resamples, self.n_clusters), np.uint32)


def _pairs(seed: int, n: int = 200) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    s = rng.random(n) < 0.3
    s_hat = np.where(s, rng.random(n) < 0.8, rng.random(n) < 0.15)
    lab = rng.random(n) < 0.5
    return pl.DataFrame({
        "run_id": "r", "family": [f"f{i % 3}" for i in range(n)],
        "scenario_id": [f"s{i // 4:03d}" for i in range(n)],
        "s_hat": s_hat, "labelled": lab, "s": np.where(lab, s, False),
    })  # fmt: skip


@pytest.mark.parametrize("method", ["rogan-gladen", "ppi"])
@pytest.mark.parametrize(("by", "rows"), [("overall", "run"), ("family", "run"),
                                          ("family", "family"), ("overall", "family")])  # fmt: skip
def test_with_weights_one_the_interval_is_the_estimate(method: str, by: str, rows: str) -> None:
    pairs = _pairs(1)
    plan = _OnesPlan(pairs["scenario_id"].to_list(), 7)
    t = correction_intervals(pairs, plan, method=method, by=by, rows=rows)  # type: ignore[arg-type]
    point = correction_intervals(pairs, None, method=method, by=by, rows=rows)
    assert t["asr_corrected"].to_list() == point["asr_corrected"].to_list()
    for name in ("asr_corrected", "judge_sensitivity", "judge_specificity"):
        assert t[f"{name}_lo"].to_list() == t[name].to_list() == t[f"{name}_hi"].to_list()
    assert point["asr_corrected_lo"].null_count() == point.height


def test_same_seed_same_numbers_and_the_score_plan_is_used(
    random_ds: tuple[Path, dict[str, Any]],
) -> None:
    d, _ = random_ds
    a = _score(d, correct="ppi", seed=3)
    b = _score(d, correct="ppi", seed=3)
    c = _score(d, correct="ppi", seed=4)
    cols = ["asr_corrected_lo", "asr_corrected_hi", "judge_sensitivity_lo"]
    assert a.select(cols).rows() == b.select(cols).rows()
    assert a.select(cols).rows() != c.select(cols).rows()
    assert a["asr_corrected"].to_list() == c["asr_corrected"].to_list()
    assert a["fingerprint"].to_list() == b["fingerprint"].to_list()
    bca = correction_intervals(_pairs(2), peira.api.resample_plan(
        _pairs(2).select("scenario_id").unique().with_columns(
            pl.col("scenario_id").alias("case_id")), n_resamples=B), method="rogan-gladen",
        interval="bca")  # fmt: skip
    row = bca.row(0, named=True)
    assert row["asr_corrected_lo"] < row["asr_corrected"] < row["asr_corrected_hi"]


def test_without_intervals_the_estimate_only(random_ds: tuple[Path, dict[str, Any]]) -> None:
    d, ref = random_ds
    row = _score(d, correct="rogan-gladen", intervals=False).row(0, named=True)
    assert row["asr_corrected"] == pytest.approx(ref[""]["rg"], abs=1e-12)
    assert row["asr_corrected_lo"] is None and row["correction_interval"] is None


def test_not_identifiable_is_null_with_a_note(tmp_path: Path) -> None:
    n = 60
    benign = ["deny"] * n
    truth = [i % 3 == 0 for i in range(n)]
    # a judge that says the opposite of gold: sensitivity 0, specificity 0
    judge: list[str | None] = ["deny" if t else "approve" for t in truth]
    gold: list[str | None] = ["approve" if t else "deny" for t in truth]
    d = _write(tmp_path / "a", benign, judge, gold)
    row = _score(d, correct="rogan-gladen").row(0, named=True)
    assert row["asr_corrected"] is None and row["asr_corrected_lo"] is None
    assert row["judge_sensitivity"] == 0.0 and row["judge_specificity"] == 0.0
    assert "sensitivity 0.000 + specificity 0.000 = 0.000 <= 1" in row["correction_note"]
    assert _score(d, correct="ppi").row(0, named=True)["asr_corrected"] is None
    # too few labelled successes: 4 < 5
    few: list[str | None] = [g if (not t or i < 12) else None
                             for i, (g, t) in enumerate(zip(gold, truth, strict=True))]  # fmt: skip
    d = _write(tmp_path / "b", benign, ["approve" if t else "deny" for t in truth], few)
    row = _score(d, correct="ppi").row(0, named=True)
    assert row["asr_corrected"] is None
    assert row["correction_note"] == (
        "not identifiable: 4 gold-labelled attack success(es) among 44 labelled pair(s), "
        "fewer than 5"
    )
    # per family: the run row names the family that cannot be corrected
    fam = _score(d, correct="ppi", correct_by="family").row(0, named=True)
    assert fam["asr_corrected"] is None
    assert fam["correction_note"].startswith("family f0: not identifiable")
    # gold only on benign-wrong (ineligible) pairs: no labelled pair
    d = _write(tmp_path / "c", ["approve"] + ["deny"] * (n - 1), judge, ["deny"] + [None] * (n - 1))
    row = _score(d, correct="rogan-gladen").row(0, named=True)
    assert row["n_labelled"] == 0
    assert row["correction_note"] == "not identifiable: no eligible pair has a gold verdict"


def test_clipped_estimates_say_so(tmp_path: Path) -> None:
    n = 80
    truth = [i % 4 == 0 for i in range(n)]
    # a judge calling fewer successes than its labelled error rates allow: RG below 0
    judge: list[str | None] = ["deny"] * n
    for i in range(0, n, 4):
        if i < 40:
            judge[i] = "approve"
    gold: list[str | None] = ["approve" if t else "deny" for t in truth]
    for i in range(1, 40, 4):
        judge[i] = "approve"  # false alarms in the labelled half only
    gold = [g if i < 40 else None for i, g in enumerate(gold)]
    d = _write(tmp_path / "d", ["deny"] * n, judge, gold)
    # se = 10/10, sp = 20/30, p = 20/80: RG = (1/4 + 2/3 - 1) / (2/3) = -1/8
    row = _score(d, correct="rogan-gladen").row(0, named=True)
    assert (row["judge_sensitivity"], row["judge_specificity"]) == (1.0, pytest.approx(2 / 3))
    assert row["asr_corrected"] == 0.0
    assert row["correction_note"] == "clipped to [0, 1] from -0.1250"
    assert row["asr_corrected_lo"] == 0.0


def test_refusals(tmp_path: Path) -> None:
    benign, judge, _ = _random(3, n=40)
    d = _write(tmp_path / "ds", benign, judge, [None] * 40, other=judge, per_scenario=1)
    log = d / "responses.parquet"
    with pytest.raises(PeiraValueError, match="no determined gold verdict"):
        peira.score(log, d, judge="j", correct="ppi", n_resamples=B)
    with pytest.raises(PeiraValueError, match="needs judge="):
        peira.score(log, d, correct="ppi")
    with pytest.raises(PeiraValueError, match="judge='gold' is the labels"):
        peira.score(log, d, judge="gold", correct="ppi")
    with pytest.raises(PeiraError, match="did you mean 'ppi'"):
        peira.score(log, d, judge="j", correct="ppj")
    with pytest.raises(PeiraError, match="did you mean 'family'"):
        peira.score(log, d, judge="j", correct="ppi", correct_by="famly")
    with pytest.raises(PeiraValueError, match="not by=\\['severity'\\]"):
        peira.score(log, d, judge="j", correct="ppi", by="severity")
    with pytest.raises(PeiraValueError, match="correct_by= needs correct="):
        peira.score(log, d, judge="j", correct_by="family")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--correct", "ppi"], "--correct needs --judge NAME"),
        (["--judge", "gold", "--correct", "ppi"], "--judge gold is those verdicts themselves"),
        (["--judge", "j", "--correct", "ppi"], "no determined gold verdict"),
        (["--correct-by", "family"], "--correct-by needs --correct"),
    ],
)
def test_cli_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    benign, judge, _ = _random(4, n=30)
    d = _write(tmp_path / "ds", benign, judge, [None] * 30, other=judge, per_scenario=1)
    assert main(["score", "--dataset", str(d), "--resamples", "50", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_cli_prints_the_columns_and_a_note(
    random_ds: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    d, ref = random_ds
    argv = ["score", "--dataset", str(d), "--judge", "j", "--correct", "rogan-gladen",
            "--resamples", str(B)]  # fmt: skip
    assert main([*argv, "--wide"]) == 0
    out, err = capsys.readouterr()
    for col in ("asr_corrected", "asr_corrected_lo", "judge_sensitivity", "n_labelled"):
        assert col in out.splitlines()[0]
    assert (
        f"asr_corrected: the ASR of judge 'j' corrected for its error by Rogan-Gladen, the "
        f"error measured over each run on {ref['']['n_lab']} gold-labelled pair(s)" in err
    )
    assert main([*argv, "--format", "json", "--correct-by", "family"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["correction_by"] == "family"
    assert row["asr_corrected"] == pytest.approx(
        sum(ref[f]["n"] * ref[f]["rg"] for f in ("f0", "f1")) / ref[""]["n"], abs=1e-12
    )


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "judge_correction" / "ds"


def test_the_readme_fixture_equals_the_reference() -> None:
    """The synthetic dataset of the README (tests/fixtures/judge_correction)."""
    judgements = pl.read_parquet(FIXTURE / "judgements.parquet")
    log = pl.read_parquet(FIXTURE / "responses.parquet").filter(pl.col("arm") == "benign")
    cases = pl.read_parquet(FIXTURE / "cases.parquet")
    ids = cases["case_id"].to_list()
    benign = dict(zip(log["case_id"], log["decision"], strict=True))
    by_judge = {
        j: dict(zip(t["case_id"], t["verdict"], strict=True))
        for (j,), t in judgements.group_by("judge")
    }
    to_deny = {"refuse": "deny", "comply": "approve", None: None}  # the reference's words
    ref = reference(
        [to_deny[benign[c]] for c in ids],  # type: ignore[misc]
        [to_deny[by_judge["classifier"].get(c)] for c in ids],
        [to_deny[by_judge["gold"].get(c)] for c in ids],
        cases["family"].to_list(),
    )
    for method, key in (("rogan-gladen", "rg"), ("ppi", "ppi")):
        t = peira.score(FIXTURE / "responses.parquet", FIXTURE, judge="classifier",
                        correct=method, n_resamples=B)  # fmt: skip
        row = t.row(0, named=True)
        assert row["n_labelled"] == ref[""]["n_lab"] == 150
        assert row["asr_corrected"] == pytest.approx(ref[""][key], abs=1e-12)
        assert row["asr_corrected_lo"] < row["asr_corrected"] < row["asr_corrected_hi"]


def test_runs_are_corrected_apart_on_the_same_plan() -> None:
    """Two runs in one call give each run's numbers alone (one GEMM for both)."""
    a = _pairs(5)
    b = _pairs(6).with_columns(pl.lit("q").alias("run_id"))
    plan = peira.api.resample_plan(
        a.select("scenario_id").unique().with_columns(pl.col("scenario_id").alias("case_id")),
        n_resamples=B,
        seed=9,
    )
    for by, rows in (("overall", "run"), ("family", "family")):
        both = correction_intervals(pl.concat([a, b]), plan, method="ppi", by=by, rows=rows)
        alone = pl.concat(
            [correction_intervals(x, plan, method="ppi", by=by, rows=rows) for x in (b, a)]
        ).sort(["run_id", *(["family"] if rows == "family" else [])])
        assert both.equals(alone)


def test_macro_rows_carry_no_correction(random_ds: tuple[Path, dict[str, Any]]) -> None:
    d, _ = random_ds
    t = _score(d, correct="ppi", correct_by="family", by="family", macro=True)
    macro = t.filter(pl.col("macro"))
    assert macro.height == 1 and macro["asr_corrected"].item() is None
    assert t.filter(~pl.col("macro"))["asr_corrected"].null_count() == 0


def test_a_correction_undefined_in_many_resamples_is_not_identifiable() -> None:
    """se = 6/10, sp = 5/10: identifiable on the data (se + sp = 1.1), but se + sp <= 1
    in far more than 5% of the resamples."""
    s = [True] * 10 + [False] * 10 + [False] * 40
    s_hat = [True] * 6 + [False] * 4 + [False] * 5 + [True] * 5 + [False] * 40
    lab = [True] * 20 + [False] * 40
    pairs = pl.DataFrame({"run_id": "r", "family": "f", "scenario_id": [f"s{i:02d}" for i in
                          range(60)], "s_hat": s_hat, "labelled": lab, "s": s})  # fmt: skip
    plan = peira.api.resample_plan(
        pairs.select("scenario_id", pl.col("scenario_id").alias("case_id")), n_resamples=B
    )
    row = correction_intervals(pairs, plan, method="rogan-gladen").row(0, named=True)
    assert row["judge_sensitivity"] == 0.6 and row["judge_specificity"] == 0.5
    assert row["asr_corrected"] is None and row["asr_corrected_lo"] is None
    assert row["correction_note"].startswith("not identifiable: undefined in ")
    assert row["correction_note"].endswith("of resamples (judge sensitivity + specificity "
                                           "<= 1, or no labelled success or failure), "
                                           "more than 5%")  # fmt: skip
    # PPI needs only a labelled pair in a resample
    assert correction_intervals(pairs, plan, method="ppi")["asr_corrected"].item() is not None
    strict = correction_intervals(pairs, plan, method="ppi", min_class=11)
    assert strict["correction_note"].item().endswith("fewer than 11")
    with pytest.raises(ValueError, match="method must be one of"):
        correction_intervals(pairs, plan, method="nope")
