"""``peira run`` and ``peira rescore``: call a model, or re-parse a released log."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _common as c

__all__ = [
    "EXIT_BUDGET",
    "cmd_adapters_check",
    "cmd_adapters_list",
    "cmd_rescore",
    "cmd_run",
    "parse_adapter_args",
    "register",
]

EXIT_BUDGET = 75  # stopped before --max-cost-usd would be passed (EX_TEMPFAIL: resumable)


def parse_adapter_args(items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings → keyword arguments (values read as JSON when they parse).

    >>> parse_adapter_args(["archetype=fragile", "seed=3", "dataset=data/demo"])
    {'archetype': 'fragile', 'seed': 3, 'dataset': 'data/demo'}
    """
    from .. import _json
    from ..errors import PeiraError

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


def _build_adapter(args: argparse.Namespace, *, dataset: str | None) -> tuple[Any, dict[str, Any]]:
    """The adapter of ``--adapter`` (a ``module:Class`` or a listed name) and its arguments."""
    from ..adapters.registry import resolve
    from ..run import accepts_argument, adapter_target, load_adapter

    spec = resolve(args.adapter)
    kwargs = parse_adapter_args(args.adapter_arg)
    if (
        dataset is not None
        and "dataset" not in kwargs
        and accepts_argument(adapter_target(spec), "dataset")
    ):
        kwargs["dataset"] = dataset  # e.g. Simulated's oracle: the dataset being run
    return load_adapter(spec, **kwargs), kwargs


#: The options of ``peira run`` handed to :func:`peira.run.run` as they are, under
#: the same name (``--checkpoint-every`` is ``checkpoint_every=``).
_AS_GIVEN = (
    "samples",
    "concurrency",
    "retries",
    "backoff",
    "run_id",
    "checkpoint_every",
    "progress",
    "keep_parts",
    "cache",
    "max_cost_usd",
    "rpm",
    "tpm",
    "workers",
    "force",
)


def cmd_run(args: argparse.Namespace) -> int:
    """Run an adapter over a dataset and write the response log.

    Ctrl-C or SIGTERM stops it like the guard stops any command (exit 130 or
    143); the runner has checkpointed the completed calls by then. A stop
    before ``--max-cost-usd`` would be passed exits with :data:`EXIT_BUDGET`.
    """
    adapter, kwargs = _build_adapter(args, dataset=args.dataset)
    with _closing(adapter):
        return _run(args, adapter, kwargs)


def _closing(adapter: Any) -> Any:
    """Close an adapter the command built when the command ends (its HTTP connections)."""
    import contextlib

    close = getattr(adapter, "close", None)
    return contextlib.closing(adapter) if callable(close) else contextlib.nullcontext()


def _run(args: argparse.Namespace, adapter: Any, kwargs: dict[str, Any]) -> int:
    from ..holdout import HOLDOUT_KEY_ENV
    from ..integrity.keys import load_key  # not ..seal: that imports the bootstrap (scipy)
    from ..io import read_dataset
    from ..run import BudgetExceeded, parts_dir, plan_run, run

    ds = read_dataset(args.dataset)
    if args.dry_run:
        plan = plan_run(adapter, ds, args.out, samples=args.samples, cache=args.cache,
                        adapter_args=kwargs)  # fmt: skip
        print(f"peira run --dry-run: {plan}")
        if args.max_cost_usd is not None and plan.cost_usd is not None:
            fits = "within" if plan.cost_usd <= args.max_cost_usd else "OVER"
            print(f"  {fits} --max-cost-usd {args.max_cost_usd:g}")
        return c.EXIT_OK
    c.check_out(args, args.out, inputs=[args.key_file], datasets=[args.dataset])
    key = load_key(args.key_file, env_var=HOLDOUT_KEY_ENV, purpose="holdout")
    try:
        res = run(
            adapter,
            ds,
            args.out,
            timeout=args.timeout if args.timeout > 0 else None,
            key=key,
            checkpoint_seconds=args.checkpoint_seconds if args.checkpoint_seconds > 0 else None,
            adapter_args=kwargs,
            **{name: getattr(args, name) for name in _AS_GIVEN},
        )
    except KeyboardInterrupt as exc:
        raise KeyboardInterrupt(
            f"completed calls are checkpointed in {parts_dir(args.out)}"
            " - run the same command again to resume"
        ) from exc
    except BudgetExceeded as exc:
        print(f"peira run: {exc}", file=sys.stderr)
        return EXIT_BUDGET
    resumed = f", {res.n_resumed} resumed from checkpoints" if res.n_resumed else ""
    cached = f", {res.n_cached} from the cache" if args.cache is not None else ""
    cost = f", ${res.cost_usd:.4f}" if res.cost_usd else ""
    rows = f", {res.rows_per_s:,.0f} rows/s" if res.n_cached else ""
    print(
        f"{res.path}: {res.n_total} responses of run {res.run_id!r} "
        f"({res.n_called} calls{cached}{resumed}, {res.n_retries} retries, "
        f"{res.n_malformed} malformed{cost}) in {res.elapsed_s:.2f} s "
        f"({res.calls_per_s:,.0f} calls/s{rows})"
    )
    for note in res.notes:
        print(f"peira run: note: {note}", file=sys.stderr)
    return c.EXIT_OK


def cmd_adapters_list(args: argparse.Namespace) -> int:
    """List the installed adapters (built-in and ``peira.adapters`` entry points)."""
    from ..adapters.registry import available, describe

    for info in available():
        d = describe(info.spec) if args.verbose else {}
        print(f"{info.name:16} {info.spec}  [{info.source}]")
        if not args.verbose:
            continue
        if "error" in d:
            print(f"    unavailable: {d['error']}")
            continue
        if d["summary"]:
            print(f"    {d['summary']}")
        for a in d["arguments"]:
            if "default" not in a:
                print(f"    {a['name']}")
            elif a["required"]:
                print(f"    {a['name']} (required)")
            else:
                print(f"    {a['name']} = {a['default']!r}")
    return c.EXIT_OK


def cmd_adapters_check(args: argparse.Namespace) -> int:
    """Run the conformance kit on an adapter; exit 1 when a check fails."""
    from ..testing import check_adapter

    adapter, _ = _build_adapter(args, dataset=None)
    with _closing(adapter):
        report = check_adapter(
            adapter, deterministic=not args.no_determinism, concurrency=args.concurrency,
            raise_on_failure=False,
        )  # fmt: skip
    print(report)
    return c.EXIT_OK if report.ok else c.EXIT_VIOLATIONS


def cmd_rescore(args: argparse.Namespace) -> int:
    """Re-parse a log's raw text and report what changes."""
    import polars as pl

    from ..errors import PeiraError
    from ..io import read_dataset, read_responses, write_parquet
    from ..rescoring import rescore
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


_Ranged = tuple[str, Callable[[str], Any], Any, str]
"""An option with a bounded value: flag, value type, default, help."""

_PACING: tuple[_Ranged, ...] = (
    ("--samples", c.int_range(1, 100_000), 1, "calls per variant (1-100000)"),
    ("--concurrency", c.int_range(1, 10_000), 8, "calls in flight (1-10000)"),
    (
        "--workers",
        c.int_range(0, 256),
        0,
        "make the calls in N worker processes (0: threads of this process; for a "
        "client that binds a core, e.g. an HTTP SDK at hundreds of calls/s)",
    ),
    ("--timeout", c.number_range(0, 86_400), 60.0, "seconds per attempt, at most a day (0: none)"),
    ("--retries", c.int_range(0, 1000), 3, "retries of timeouts/transient errors (0-1000)"),
    ("--backoff", c.number_range(0, 3600), 0.5, "first retry delay in seconds, doubling (0-3600)"),
)
"""How ``peira run`` paces its calls."""

_CHECKPOINTS: tuple[_Ranged, ...] = (
    ("--checkpoint-every", c.int_range(1, 10_000_000), 500, "calls per part file (1-10000000)"),
    (
        "--checkpoint-seconds",
        c.number_range(0, 86_400),
        5.0,
        "also write completed calls at least this often, in seconds (0: only every N calls)",
    ),
)
"""How often ``peira run`` writes its completed calls."""

_RATE_LIMITS: tuple[_Ranged, ...] = (
    (
        "--rpm",
        c.number_range(0, 1e9, open_lo=True),
        None,
        "at most this many requests per minute (> 0)",
    ),
    (
        "--tpm",
        c.number_range(0, 1e12, open_lo=True),
        None,
        "at most this many (estimated) tokens per minute (> 0)",
    ),
)
"""The provider's rate limits ``peira run`` keeps under (no limit by default)."""


def _add_ranged(p: argparse.ArgumentParser, options: tuple[_Ranged, ...]) -> None:
    """Add each bounded option of ``options`` to ``p``, in order."""
    for flag, kind, default, text in options:
        p.add_argument(flag, type=kind, default=default, help=text)


def _add_adapter_args(p: argparse.ArgumentParser, note: str = "") -> None:
    """``--adapter-arg NAME=VALUE`` (repeatable): a keyword argument of the adapter,
    read by :func:`parse_adapter_args`; ``note`` ends its help."""
    p.add_argument(
        "--adapter-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"keyword argument of the adapter (repeatable{note})",
    )


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
    r.add_argument(
        "--adapter",
        required=True,
        help="module:Class (e.g. peira.adapters:OpenAICompatible), or a name from "
        "'peira adapters list' (e.g. openai, inspect, subprocess, simulated)",
    )
    _add_adapter_args(r, "; VALUE read as JSON if it parses")
    r.add_argument(
        "--dataset",
        required=True,
        help="dataset directory (also given to an adapter whose constructor takes dataset=, "
        "unless --adapter-arg dataset=... is set)",
    )
    r.add_argument("--out", required=True, help="response log to write (Parquet)")
    _add_ranged(r, _PACING)
    r.add_argument(
        "--key-file",
        type=Path,
        help="pseudonym key file (default: $PEIRA_HOLDOUT_KEY, else an ephemeral random key)",
    )
    r.add_argument("--run-id", help="run_id (default: adapter name-version)")
    _add_ranged(r, _CHECKPOINTS)
    r.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress line on stderr (default: when stderr is a terminal)",
    )
    r.add_argument("--keep-parts", action="store_true", help="keep LOG.parts/ after success")
    c.add_force_option(r)
    r.add_argument(
        "--cache",
        metavar="DIR",
        help="response cache: answers already in DIR are not asked again; new ones are added "
        "(safe to share between concurrent runs)",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the calls to make and an estimate of tokens and cost; call nothing",
    )
    r.add_argument(
        "--max-cost-usd",
        type=c.number_range(0, 1e12),
        metavar="USD",
        help=f"stop before the run's cost would pass USD (needs a price table: "
        f"--adapter-arg price_in=... price_out=...); exit {EXIT_BUDGET}, resumable",
    )
    _add_ranged(r, _RATE_LIMITS)

    a = sub.add_parser("adapters", help="list the installed adapters, or check one")
    asub = a.add_subparsers(dest="adapters_command", required=True, metavar="ACTION")
    ls = c.add_command(asub, "list", cmd_adapters_list, "the installed adapters and their specs")
    ls.add_argument("-v", "--verbose", action="store_true", help="show each adapter's arguments")
    ck = c.add_command(
        asub,
        "check",
        cmd_adapters_check,
        "run the conformance kit (peira.testing.check_adapter) on an adapter",
    )
    ck.add_argument("adapter", help="module:Class, or a name from 'peira adapters list'")
    _add_adapter_args(ck)
    ck.add_argument(
        "--concurrency",
        type=c.int_range(1, 10_000),
        default=8,
        help="concurrent calls to check (1-10000)",
    )
    ck.add_argument(
        "--no-determinism",
        action="store_true",
        help="skip the determinism checks (a model sampled without a seed)",
    )

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
        help="what to print: summary (the changes per run), metrics (the metric deltas, "
        "re-parsed - logged), changes (every changed pair) or all (summary and metrics; "
        "the default for table/markdown, metrics otherwise)",
    )
    s.add_argument("--all-metrics", action="store_true", help="list unchanged metrics too")
    s.add_argument("--changes-out", help="write the changed pairs to this Parquet file")
    s.add_argument("--responses-out", help="write the re-parsed log to this Parquet file")
    c.add_force_option(s)
    c.add_pair_options(s)
