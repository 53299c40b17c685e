"""Start-up time of the ``peira`` command: whole-process wall time, median of several runs.

Each command runs in a fresh process (``python -m peira …`` would add the
``runpy`` import; the console script ``peira`` is what users run, so that is
what is timed), stdout to /dev/null. Beside each figure, in the same run:

- ``python -c pass`` — the interpreter alone, the floor of any command;
- ``python -c "import polars"`` — the dataframe library every data command needs;
- ``python -c "import pandera.polars"`` — the validation library (and pandas,
  which it imports), which only commands that read data files need.

Targets (issue 14): ``peira --help``, ``peira --version`` and ``peira metrics``
≤ 0.3 s; the demo ``peira leaderboard`` ≤ 1.5 s. Machine load (``uptime``) is
recorded before and after; figures taken under load are not comparable.

Usage: python benchmarks/startup.py [--runs 7] [--out benchmarks/results/startup.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
PEIRA = str(BIN / "peira")
PY = sys.executable

COMMANDS: list[tuple[str, list[str], str]] = [
    ("python -c pass", [PY, "-c", "pass"], "peer"),
    ('python -c "import polars"', [PY, "-c", "import polars"], "peer"),
    ('python -c "import pandera.polars"', [PY, "-c", "import pandera.polars"], "peer"),
    ("peira --help", [PEIRA, "--help"], "≤ 0.3 s"),
    ("peira --version", [PEIRA, "--version"], "≤ 0.3 s"),
    ("peira metrics", [PEIRA, "metrics"], "≤ 0.3 s"),
    ("peira leaderboard (demo, B = 10,000)", [PEIRA, "leaderboard"], "≤ 1.5 s"),
]


def time_once(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    before = os.getloadavg()
    rows = []
    for label, argv, target in COMMANDS:
        time_once(argv)  # warm the file cache
        times = sorted(time_once(argv) for _ in range(args.runs))
        med = statistics.median(times)
        rows.append((label, med, times[0], times[-1], target))
        print(f"{label:<42} median {med:6.3f} s  (min {times[0]:.3f}, max {times[-1]:.3f})")
    after = os.getloadavg()

    def fmt_load(x: tuple[float, float, float]) -> str:
        return " / ".join(f"{v:.2f}" for v in x)

    lines = [
        "# Start-up time of the `peira` command",
        "",
        f"`python benchmarks/startup.py --runs {args.runs}`: whole-process wall time of each "
        f"command, median of {args.runs} runs after one warm-up run, stdout to /dev/null.",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}",
        f"- load average (1 / 5 / 15 min): {fmt_load(before)} before, {fmt_load(after)} after",
        "",
        "| command | median (s) | min (s) | max (s) | target |",
        "|---|---:|---:|---:|---|",
    ]
    for label, med, lo, hi, target in rows:
        lines.append(f"| `{label}` | {med:.3f} | {lo:.3f} | {hi:.3f} | {target} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
