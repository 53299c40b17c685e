"""Start-up time of the ``peira`` command: whole-process wall time, median of several runs.

Each command runs in a fresh process (``python -m peira …`` would add the
``runpy`` import; the console script ``peira`` is what users run, so that is
what is timed), stdout to /dev/null. Beside each figure, in the same run:

- ``python -c pass`` — the interpreter alone, the floor of any command;
- ``python -c "import polars"`` — the dataframe library every data command needs;
- ``python -c "import pandera.polars"`` — the validation library (and pandas,
  which it imports when installed; the ``peira`` command imports it without,
  peira/_pandera.py), which only commands that read data files need.

Targets (issue 14): ``peira --help``, ``peira --version`` and ``peira metrics``
≤ 0.3 s; the demo ``peira leaderboard`` ≤ 1.5 s. Machine load (``uptime``) is
recorded before and after; figures taken under load are not comparable.

Usage: python benchmarks/startup.py [--runs 7] [--out benchmarks/results/startup.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
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


#: Installed or not, these change what a plain ``import pandera.polars`` imports
#: (hypothesis comes with the ``dev`` extra, not with README command 1).
OPTIONAL = ("pandas", "hypothesis", "numba")


def time_once(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process; CPU is its user + system time."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def installed(name: str) -> bool:
    """Whether this environment has ``name`` (pandera imports pandas and hypothesis if so)."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    before = os.getloadavg()
    rows = []
    for label, argv, target in COMMANDS:
        time_once(argv)  # warm the file cache
        runs = [time_once(argv) for _ in range(args.runs)]
        times = sorted(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        med = statistics.median(times)
        rows.append((label, med, times[0], times[-1], cpu, target))
        print(
            f"{label:<42} median {med:6.3f} s  (min {times[0]:.3f}, max {times[-1]:.3f}), "
            f"CPU {cpu:.3f} s"
        )
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
        f"- environment: {sys.prefix}; "
        + ", ".join(f"{m} {'installed' if installed(m) else 'absent'}" for m in OPTIONAL),
        "",
        "CPU is the process's user + system time (median), the figure load changes least.",
        "",
        "| command | median wall (s) | min (s) | max (s) | CPU (s) | target (wall) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, med, lo, hi, cpu, target in rows:
        lines.append(f"| `{label}` | {med:.3f} | {lo:.3f} | {hi:.3f} | {cpu:.3f} | {target} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
