"""``peira tables``, ``report`` and ``publish``: every table and figure from one command.

Their inputs are those of ``peira leaderboard``: without ``--dataset`` and
``--responses`` the bundled demo data (a note on stderr says so).

- ``peira tables --out DIR``: every table (CSV, Markdown, LaTeX), every
  figure (PNG, SVG) and ``manifest.json``, written atomically; a second run
  gives byte-identical files.
- ``peira report --out report.html``: one self-contained HTML page.
- ``peira publish --out DIR``: the public split's tables and figures; the
  holdout as aggregates only, checked by a scan before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import _common as c

__all__ = ["ProgressLog", "cmd_publish", "cmd_report", "cmd_tables", "register"]


class ProgressLog:
    """Progress of ``tables``/``report``/``publish`` on stderr, one line per step.

    On a terminal (or with ``--progress``) every step is shown. Otherwise, so
    that a CI log or ``2> file`` still shows a long build moving, a line is
    written only when ``every`` seconds have passed since the last one, with
    the elapsed time; a build quicker than that writes nothing. ``--quiet``
    writes nothing at all.
    """

    def __init__(
        self,
        name: str,
        *,
        every_step: bool,
        every: float = 10.0,
        stream: Any = None,
        clock: Any = None,
    ) -> None:
        import time

        self.name = name
        self.every_step = every_step
        self.every = every
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock if clock is not None else time.monotonic
        self.start = self.last = self.clock()

    def __call__(self, line: str) -> None:
        now = self.clock()
        if self.every_step:
            print(f"peira {self.name}: {line}", file=self.stream, flush=True)
        elif now - self.last >= self.every:
            elapsed = now - self.start
            print(f"peira {self.name}: {line} ({elapsed:.0f} s)", file=self.stream, flush=True)
            self.last = now


def _progress(args: argparse.Namespace) -> Any:
    if args.quiet:
        return None
    return ProgressLog(args.command, every_step=args.progress or sys.stderr.isatty())


def _context(args: argparse.Namespace, *, publication: bool = False) -> Any:
    from ..io import read_dataset, read_responses
    from ..metrics import GateThresholds
    from ..report import ReportConfig, ReportContext

    d, log = c.dataset_and_log(args)
    ds = read_dataset(d)
    config = ReportConfig(
        split="public" if publication else args.split,
        **c.api_kwargs(args, ("n_resamples", "seed", "unit", "level", "rule", "delta", "missing")),
        thresholds=GateThresholds.of(c.gates_of(args)),
        support=args.support or "common",
        publication=publication,
        flag_family=args.flag_family,
        metric=args.metric,
    )
    if getattr(args, "engine", "local") != "local":
        from .. import api

        sums = api.run_sums(
            c.responses_arg(args, log),
            ds,
            **c.api_kwargs(args, ("unit", "missing", "delta", "engine")),
        )
        return ReportContext(ds, None, config, sums=sums, engine=args.engine)
    return ReportContext(ds, read_responses(log, cases=ds.cases), config)


def _check(args: argparse.Namespace, kind: str) -> None:
    """Check ``--out`` before any work: not an input, not something peira did not write."""
    from ..report.build import tree_owner

    d, log = c.dataset_and_log(args)
    owner = tree_owner if kind == "dir" else None
    c.check_out(args, args.out, kind=kind, datasets=[d], logs=[log], owner=owner,
                writer="peira tables/publish" if kind == "dir" else None)  # fmt: skip


def _not_applicable(outputs: Any) -> None:
    """A note on stderr of what does not apply to the data (a single run, clean-only runs,
    no holdout…) and why; the manifest and the page say the same."""
    from ..report.tables import QUIET

    by_reason: dict[str, list[str]] = {}
    for kind, left in outputs.not_applicable.items():
        for name, why in left.items():
            if why not in QUIET:
                by_reason.setdefault(why, []).append(f"{kind[:-1]} {name}")
    for why, items in by_reason.items():
        print(f"note: not written: {', '.join(items)} ({why})", file=sys.stderr)


def _summary(out: Any, outputs: Any) -> str:
    return (
        f"{out}: {len(outputs.files)} files ({len(outputs.tables)} tables, "
        f"{len(outputs.figures)} figures, manifest.json)"
    )


def cmd_tables(args: argparse.Namespace) -> int:
    """``peira tables``: every table and figure plus the manifest, into ``--out``."""
    from ..report import write_tables
    from ..report.build import omitted

    _check(args, "dir")
    ctx = _context(args)
    outputs = write_tables(ctx, args.out, figures=not args.no_figures, progress=_progress(args))
    print(_summary(args.out, outputs))
    _not_applicable(outputs)
    left = omitted(ctx, figures=not args.no_figures)
    if left:
        items = [f"table {n}" for n in left["tables"]] + [f"figure {n}" for n in left["figures"]]
        print(
            f"note: --engine {args.engine} builds from the log's run sums; not written (they "
            f"need every pair): {', '.join(items)}; run peira tables on the local engine for "
            "them",
            file=sys.stderr,
        )
    return c.EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """``peira report``: one self-contained HTML page."""
    from ..report import write_report

    _check(args, "file")
    ctx = _context(args, publication=args.publication)
    diff = (args.diff[0], args.diff[1]) if args.diff else None
    path = write_report(
        ctx, args.out, figures=not args.no_figures, progress=_progress(args), diff=diff
    )
    print(f"{path}: {path.stat().st_size} bytes")
    return c.EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    """``peira publish``: public tables and figures, holdout aggregates only."""
    from ..report import publish

    _check(args, "dir")
    ctx = _context(args, publication=True)
    outputs = publish(
        ctx.dataset,
        ctx.responses,
        args.out,
        ctx.config,
        figures=not args.no_figures,
        progress=_progress(args),
        pairs=ctx.all_pairs,
    )
    print(_summary(args.out, outputs))
    _not_applicable(outputs)
    return c.EXIT_OK


def _options(q: argparse.ArgumentParser, *, split: bool) -> None:
    c.add_input_options(q)
    if split:
        c.add_split_option(q, "public")
    c.add_pair_options(q)
    c.add_bootstrap_options(q, seed_help="bootstrap seed (holdout plan: seed + 1)")
    c.add_flag_family_option(q)
    q.add_argument(
        "--rule", choices=c.option_choices("rule"), default="ci", help=c.option_help("rule")
    )
    c.add_comparison_options(q)
    q.add_argument(
        "--metric",
        metavar="METRIC",
        help="ratio metric the leaderboard ranks by and the comparisons compare (default: "
        "robustness; benign_accuracy on clean-only data, where no run was attacked)",
    )
    q.add_argument("--no-figures", action="store_true", help="tables only (no matplotlib)")
    g = q.add_mutually_exclusive_group()
    g.add_argument(
        "--progress",
        action="store_true",
        help="show every step on stderr (default: every step on a terminal, else a line "
        "every 10 s of a long build)",
    )
    g.add_argument("--quiet", action="store_true", help="no progress lines")


def register(sub: Any) -> None:
    """Add ``tables``, ``report`` and ``publish`` to the ``peira`` subparsers object ``sub``."""
    t = c.add_command(
        sub,
        "tables",
        cmd_tables,
        "regenerate every table and figure plus a manifest (default: demo data)",
    )
    _options(t, split=True)
    t.add_argument("--out", required=True, metavar="DIR", help="output directory")
    c.add_engine_options(
        t,
        "on spark the tables and figures that need every pair (targeted, calibration, "
        "confidence_gate; reliability, risk_coverage, score_shift) are not written, and the "
        "manifest lists them under 'omitted'",
    )

    r = c.add_command(
        sub, "report", cmd_report, "one self-contained HTML page with the tables and figures"
    )
    _options(r, split=True)
    r.add_argument("--out", required=True, metavar="HTML", help="HTML file to write")
    c.add_force_option(r)
    r.add_argument(
        "--publication",
        action="store_true",
        help="the publication view: public split, holdout aggregates only",
    )
    r.add_argument(
        "--diff",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="add what changed from RUN_A (baseline) to RUN_B on --metric, as peira diff shows",
    )

    p = c.add_command(
        sub, "publish", cmd_publish, "public leaderboard and tables; the holdout as aggregates only"
    )
    _options(p, split=False)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
