"""Importers against the numbers each source published, on real released files.

- TextAttack: every ``--log-to-csv`` file of the search-method benchmark
  (QData/TextAttack-Search-Benchmark, 5 victim/dataset pairs, 263,454 attacked
  examples) that has a console log beside it. For each file Peira's counts
  (successful, failed, skipped), benign accuracy, accuracy under attack and
  ASR are compared with the summary TextAttack printed (percentages to two
  decimals). Then the files of one victim/dataset are imported together (one
  dataset, many runs sharing cases) and ranked.
- JailbreakBench: every artifact of JailbreakBench/artifacts (its test
  artifact aside, whose parameters do not describe its one entry); Peira's
  ASR against ``parameters.attack_success_rate``.

The public repositories must be present as git mirrors (``--textattack``,
``--jailbreakbench``: the ``repo`` directories); files are read with ``git
show`` into a temporary directory. Timings are wall-clock on this machine,
reported with the load average.

Usage: python benchmarks/bench_importers.py [--limit N] [--out benchmarks/results/importers.md]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases
from peira.importers.jailbreakbench import read_jailbreakbench
from peira.importers.textattack import read_summary, read_textattack
from peira.metrics import metric_table
from peira.ranking import leaderboard

TA = "/work/.mirror/QData+TextAttack-Search-Benchmark/repo"
JBB = "/work/.mirror/JailbreakBench+artifacts/repo"


def _git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def _files(repo: str, under: str) -> list[str]:
    return _git(repo, "ls-tree", "-r", "--name-only", "HEAD", under).decode().split()


def textattack(repo: str, tmp: Path, limit: int | None) -> tuple[list[str], dict[str, float]]:
    names = _files(repo, "results")
    csvs = [f for f in names if f.endswith(".csv") and f[:-4] + ".txt" in names]
    if limit:
        csvs = csvs[:: max(1, len(csvs) // limit)][:limit]
    rows, stats = [], Counter()
    t0 = time.perf_counter()
    by_group: dict[str, list[tuple[Path, str]]] = {}
    for f in csvs:
        run = f.removeprefix("results/").removesuffix(".csv").replace("/", "-")
        d = tmp / "ta" / run
        d.mkdir(parents=True)
        (d / "log.csv").write_bytes(_git(repo, "show", f"HEAD:{f}"))
        (d / "log.txt").write_bytes(_git(repo, "show", f"HEAD:{f[:-4]}.txt"))
        by_group.setdefault(f.split("/")[1], []).append((d / "log.csv", run))
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    worst = 0.0
    for group in sorted(by_group):
        for path, run in by_group[group]:
            printed = read_summary(path.with_suffix(".txt"))
            if printed is None:  # a console log that stops before TextAttack's summary
                stats["no_summary"] += 1
                continue
            imp = read_textattack([path], run_ids=[run])
            m = metric_table(build_pairs(imp.responses, imp.cases)).row(0, named=True)
            flips = int((imp.responses["result_type"] == "Successful").sum())
            counts_ok = (
                m["n_pairs"] == printed["n_successful"] + printed["n_failed"] + printed["n_skipped"]
                and m["n_eligible"] == printed["n_successful"] + printed["n_failed"]
                and flips == printed["n_successful"]
            )
            stats["files"] += 1
            stats["examples"] += m["n_pairs"]
            stats["counts_equal"] += counts_ok
            for metric in ("benign_accuracy", "accuracy_under_attack", "asr"):
                ours = round(100 * m[metric], 2)
                theirs = round(100 * printed[metric], 2)
                stats[f"{metric}_equal"] += abs(ours - theirs) < 1e-9
                worst = max(worst, abs(100 * m[metric] - 100 * printed[metric]))
    t_files = time.perf_counter() - t0
    rows.append(
        f"| TextAttack files compared | {stats['files']} ({stats['examples']:,} attacked "
        f"examples); {stats['no_summary']} more whose console log has no summary |"
    )
    for key in (
        "counts_equal",
        "benign_accuracy_equal",
        "accuracy_under_attack_equal",
        "asr_equal",
    ):
        rows.append(f"| {key.replace('_', ' ')} | {stats[key]} / {stats['files']} |")
    rows.append(
        f"| largest difference before rounding (percentage points) | {worst:.4f} (TextAttack "
        "prints two decimals) |"
    )
    # one victim/dataset: all its files as runs of one dataset, ranked
    group = max(by_group, key=lambda g: len(by_group[g]))
    files = by_group[group]
    t0 = time.perf_counter()
    imp = read_textattack([p for p, _ in files], run_ids=[r for _, r in files])
    t_group = time.perf_counter() - t0
    pairs = build_pairs(imp.responses, imp.cases)
    t0 = time.perf_counter()
    board = leaderboard(pairs, imp.cases, plan_for_cases(imp.cases, n_resamples=2000))
    t_board = time.perf_counter() - t0
    missing = sum(any("missing" in g for g in r) for r in board["gate_reasons"].to_list())
    rows.append(
        f"| {group}: {len(files)} files imported as one dataset | {imp.cases.height} cases, "
        f"{imp.responses.height:,} responses in {t_group:.1f} s; leaderboard (B=2000) "
        f"{t_board:.1f} s: {int(board['ranked'].sum())} ranked, {missing} with missing pairs "
        "(every search method of one victim attacked the same sentences) |"
    )
    timing = {
        "read (git show)": t_read,
        "import + score, per file": t_files / max(1, stats["files"]),
    }
    return rows, timing


def jailbreakbench(repo: str, tmp: Path) -> list[str]:
    names = [
        f
        for f in _files(repo, "attack-artifacts")
        if f.count("/") == 3 and f.endswith(".json") and "/test-artifact/" not in f
    ]
    rows = []
    paths = []
    for f in names:
        p = tmp / "jbb" / f.replace("/", "_")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_git(repo, "show", f"HEAD:{f}"))
        paths.append(p)
    imp = read_jailbreakbench(paths)
    table = metric_table(build_pairs(imp.responses, imp.cases))
    assert imp.published is not None
    pub = imp.published.select("run_id", pl.col("estimate").alias("published"))
    cmp = table.select("run_id", "asr", "no_attack_rate").join(pub, on="run_id")
    equal = int((cmp["asr"] - cmp["published"]).abs().lt(1e-12).sum())
    rows.append(
        f"| JailbreakBench artifacts compared | {cmp.height} (one dataset, 100 behaviours) |"
    )
    rows.append(f"| ASR equal to attack_success_rate | {equal} / {cmp.height} |")
    with_none = cmp.filter(pl.col("no_attack_rate") > 0)
    rows.append(
        f"| artifacts with unsubmitted prompts (no_attack) | {with_none.height}: "
        + ", ".join(
            f"{r} ASR {a:.2f} = {p:.2f}, no_attack {n:.2f}"
            for r, a, n, p in with_none.select(
                "run_id", "asr", "no_attack_rate", "published"
            ).rows()
        )
        + " |"
    )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--textattack", default=TA)
    ap.add_argument("--jailbreakbench", default=JBB)
    ap.add_argument("--limit", type=int, default=None, help="TextAttack files (default all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="datamodel-bench-") as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        ta_rows, timing = textattack(args.textattack, tmp, args.limit)
        jbb_rows = jailbreakbench(args.jailbreakbench, tmp)
        total = time.perf_counter() - t0
    lines = [
        "# Importers against the sources' published numbers",
        "",
        "`python benchmarks/bench_importers.py` (real released files; see its docstring).",
        f"Load average at start {load[0]:.1f}, {os.cpu_count()} CPUs; total {total:.0f} s.",
        "",
        "| check | result |",
        "|---|---|",
        *ta_rows,
        *jbb_rows,
        "",
        "Timings: "
        + "; ".join(f"{k} {v:.2f} s" for k, v in timing.items())
        + ". Load on the shared machine inflates them.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
