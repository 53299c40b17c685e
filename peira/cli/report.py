"""``peira tables``, ``report`` and ``publish``: every table and figure from one command.

Without ``--dataset`` they read the bundled demo data, like ``peira leaderboard``.

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

__all__ = ["cmd_publish", "cmd_report", "cmd_tables", "register"]


def _progress(args: argparse.Namespace) -> Any:
    if not (args.progress or sys.stderr.isatty()):
        return None
    name = args.command

    def show(line: str) -> None:
        print(f"peira {name}: {line}", file=sys.stderr, flush=True)

    return show


def _context(args: argparse.Namespace, *, publication: bool = False) -> Any:
    from ..io import read_dataset, read_responses
    from ..metrics import GateThresholds
    from ..report import ReportConfig, ReportContext

    d, log = c.dataset_and_log(args)
    ds = read_dataset(d)
    responses = read_responses(log, cases=ds.cases)
    config = ReportConfig(
        split="public" if publication else args.split,
        n_resamples=args.resamples,
        seed=args.seed,
        unit=args.unit,
        level=args.level,
        rule=args.rule,
        delta=args.delta,
        missing=args.missing,
        thresholds=GateThresholds(),
        publication=publication,
    )
    return ReportContext(ds, responses, config)


def _check(args: argparse.Namespace, kind: str) -> None:
    """Check ``--out`` before any work: not an input, not something peira did not write."""
    from ..report.build import tree_owner

    d, log = c.dataset_and_log(args)
    owner = tree_owner if kind == "dir" else None
    c.check_out(args, args.out, kind=kind, datasets=[d], logs=[log], owner=owner,
                writer="peira tables/publish" if kind == "dir" else None)  # fmt: skip


def _summary(out: Any, outputs: Any) -> str:
    return (
        f"{out}: {len(outputs.files)} files ({len(outputs.tables)} tables, "
        f"{len(outputs.figures)} figures, manifest.json)"
    )


def cmd_tables(args: argparse.Namespace) -> int:
    """``peira tables``: every table and figure plus the manifest, into ``--out``."""
    from ..report import write_tables

    _check(args, "dir")
    ctx = _context(args)
    outputs = write_tables(ctx, args.out, figures=not args.no_figures, progress=_progress(args))
    print(_summary(args.out, outputs))
    return c.EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """``peira report``: one self-contained HTML page."""
    from ..report import write_report

    _check(args, "file")
    ctx = _context(args, publication=args.publication)
    path = write_report(ctx, args.out, figures=not args.no_figures, progress=_progress(args))
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
    return c.EXIT_OK


def _options(q: argparse.ArgumentParser, *, split: bool) -> None:
    c.add_input_options(q)
    if split:
        c.add_split_option(q, "public")
    c.add_pair_options(q)
    c.add_bootstrap_options(q, seed_help="bootstrap seed (holdout plan: seed + 1)")
    q.add_argument("--rule", choices=("ci", "paired"), default="ci", help="head-to-head rule")
    q.add_argument("--no-figures", action="store_true", help="tables only (no matplotlib)")
    q.add_argument(
        "--progress",
        action="store_true",
        help="show what is being built on stderr (default: only when stderr is a terminal)",
    )


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

    p = c.add_command(
        sub, "publish", cmd_publish, "public leaderboard and tables; the holdout as aggregates only"
    )
    _options(p, split=False)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
