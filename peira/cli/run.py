"""``peira run`` and ``peira rescore``: call a model, or re-parse a released log."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import _common as c

__all__ = ["cmd_rescore", "cmd_run", "parse_adapter_args", "register"]


def parse_adapter_args(items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings → keyword arguments (values read as JSON when they parse).

    >>> parse_adapter_args(["archetype=fragile", "seed=3", "dataset=data/demo"])
    {'archetype': 'fragile', 'seed': 3, 'dataset': 'data/demo'}
    """
    from ..errors import PeiraError
    from ..importers import _json

    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise PeiraError(f"--adapter-arg {item!r}: expected NAME=VALUE")
        try:
            out[name] = _json.loads(value)
        except ValueError:  # not JSON, or JSON beyond the limits: the text itself
            out[name] = value
    return out


def cmd_run(args: argparse.Namespace) -> int:
    """Run an adapter over a dataset and write the response log.

    Ctrl-C or SIGTERM stops it like the guard stops any command (exit 130 or
    143); the runner has checkpointed the completed calls by then.
    """
    from ..holdout import HOLDOUT_KEY_ENV
    from ..io import read_dataset
    from ..run import accepts_argument, adapter_target, load_adapter, parts_dir, run
    from ..seal import load_key

    c.check_out(args, args.out, inputs=[args.key_file], datasets=[args.dataset])
    kwargs = parse_adapter_args(args.adapter_arg)
    if "dataset" not in kwargs and accepts_argument(adapter_target(args.adapter), "dataset"):
        kwargs["dataset"] = args.dataset  # e.g. Simulated's oracle: the dataset being run
    adapter = load_adapter(args.adapter, **kwargs)
    key = load_key(args.key_file, env_var=HOLDOUT_KEY_ENV, purpose="holdout")
    try:
        res = run(
            adapter,
            read_dataset(args.dataset),
            args.out,
            samples=args.samples,
            concurrency=args.concurrency,
            timeout=args.timeout if args.timeout > 0 else None,
            retries=args.retries,
            backoff=args.backoff,
            key=key,
            run_id=args.run_id,
            checkpoint_every=args.checkpoint_every,
            checkpoint_seconds=args.checkpoint_seconds if args.checkpoint_seconds > 0 else None,
            progress=args.progress,
            keep_parts=args.keep_parts,
            adapter_args=kwargs,
            force=args.force,
        )
    except KeyboardInterrupt as exc:
        raise KeyboardInterrupt(
            f"completed calls are checkpointed in {parts_dir(args.out)}"
            " - run the same command again to resume"
        ) from exc
    resumed = f", {res.n_resumed} resumed from checkpoints" if res.n_resumed else ""
    print(
        f"{res.path}: {res.n_total} responses of run {res.run_id!r} "
        f"({res.n_called} calls{resumed}, {res.n_retries} retries, "
        f"{res.n_malformed} malformed) in {res.elapsed_s:.1f} s "
        f"({res.calls_per_s:,.0f} calls/s)"
    )
    return c.EXIT_OK


def cmd_rescore(args: argparse.Namespace) -> int:
    """Re-parse a log's raw text and report what changes."""
    import polars as pl

    from ..errors import PeiraError
    from ..io import read_dataset, read_responses, write_parquet
    from ..parse import rescore
    from ._output import render

    outs = [o for o in (args.changes_out, args.responses_out) if o is not None]
    if len(outs) == 2 and Path(outs[0]).absolute() == Path(outs[1]).absolute():
        raise PeiraError(f"--changes-out and --responses-out are the same file: {outs[0]}")
    for o in outs:
        c.check_out(args, o, logs=[args.log], datasets=[args.dataset])
    ds = read_dataset(args.dataset)
    log = read_responses(args.log, cases=ds.cases)
    res = rescore(log, ds.cases, parser=args.parser, missing=args.missing, delta=args.delta)
    if args.changes_out is not None:
        write_parquet(res.changed_pairs, args.changes_out)
    if args.responses_out is not None:
        write_parquet(res.responses, args.responses_out)
    deltas = res.metric_deltas
    if not args.all_metrics:
        deltas = deltas.filter(pl.col("changed"))
    report = args.report or ("all" if args.format in ("table", "markdown") else "metrics")
    if report == "all" and args.format not in ("table", "markdown"):
        raise PeiraError(f"--report all needs --format table or markdown, not {args.format}")
    out = sys.stdout
    if report in ("all", "summary"):
        if report == "all":
            out.write(f"parser {res.parser.name!r}: changes per run\n")
        out.write(render(res.summary, args.format))
    if report in ("all", "metrics"):
        if report == "all":
            shown = "all metrics" if args.all_metrics else "metrics that changed"
            out.write(f"\nmetric deltas (re-parsed - logged), {shown}\n")
        out.write(render(deltas, args.format))
    if report == "changes":
        out.write(render(res.changed_pairs, args.format))
    return c.EXIT_OK


def register(sub: Any) -> None:
    """Add ``run`` and ``rescore`` to the ``peira`` subparsers object ``sub``."""
    r = c.add_command(
        sub,
        "run",
        cmd_run,
        "run a model adapter over a dataset (blinded, checkpointed, resumable)",
        description="Dispatch every variant x sample to an adapter in pseudonymous order "
        "and write a response log. An interrupted run (Ctrl-C, SIGTERM, a kill) resumes "
        "from LOG.parts/; a resume with another adapter or adapter configuration is refused.",
    )
    r.add_argument("--adapter", required=True, help="module:Class (e.g. peira.adapters:Simulated)")
    r.add_argument(
        "--adapter-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="keyword argument of the adapter (repeatable; VALUE read as JSON if it parses)",
    )
    r.add_argument(
        "--dataset",
        required=True,
        help="dataset directory (also given to an adapter whose constructor takes dataset=, "
        "unless --adapter-arg dataset=... is set)",
    )
    r.add_argument("--out", required=True, help="response log to write (Parquet)")
    r.add_argument(
        "--samples", type=c.int_range(1, 100_000), default=1, help="calls per variant (1-100000)"
    )
    r.add_argument(
        "--concurrency", type=c.int_range(1, 10_000), default=8, help="calls in flight (1-10000)"
    )
    r.add_argument(
        "--timeout",
        type=c.number_range(0, 86_400),
        default=60.0,
        help="seconds per attempt, at most a day (0: none)",
    )
    r.add_argument(
        "--retries",
        type=c.int_range(0, 1000),
        default=3,
        help="retries of timeouts/transient errors (0-1000)",
    )
    r.add_argument(
        "--backoff",
        type=c.number_range(0, 3600),
        default=0.5,
        help="first retry delay in seconds, doubling (0-3600)",
    )
    r.add_argument(
        "--key-file",
        type=Path,
        help="pseudonym key file (default: $PEIRA_HOLDOUT_KEY, else an ephemeral random key)",
    )
    r.add_argument("--run-id", help="run_id (default: adapter name-version)")
    r.add_argument(
        "--checkpoint-every",
        type=c.int_range(1, 10_000_000),
        default=500,
        help="calls per part file (1-10000000)",
    )
    r.add_argument(
        "--checkpoint-seconds",
        type=c.number_range(0, 86_400),
        default=5.0,
        help="also write completed calls at least this often, in seconds (0: only every N calls)",
    )
    r.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress line on stderr (default: when stderr is a terminal)",
    )
    r.add_argument("--keep-parts", action="store_true", help="keep LOG.parts/ after success")
    c.add_force_option(r)

    s = c.add_command(
        sub,
        "rescore",
        cmd_rescore,
        "re-parse a log's raw_text and report changed pairs and metrics (no model call)",
    )
    s.add_argument("log", help="response log: file, directory or glob")
    s.add_argument("--dataset", required=True, help="dataset directory")
    s.add_argument(
        "--parser",
        default="auto",
        help="parser name (auto, synth, json, decision-line, abstain, options), a JSON "
        'config file, or inline JSON (e.g. \'{"rules": ["json", "options"]}\')',
    )
    c.add_format_option(s)
    s.add_argument(
        "--report",
        choices=("all", "summary", "metrics", "changes"),
        help="what to print (default: all for table/markdown, metrics otherwise)",
    )
    s.add_argument("--all-metrics", action="store_true", help="list unchanged metrics too")
    s.add_argument("--changes-out", help="write the changed pairs to this Parquet file")
    s.add_argument("--responses-out", help="write the re-parsed log to this Parquet file")
    c.add_force_option(s)
    c.add_pair_options(s)
