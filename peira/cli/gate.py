"""``peira gate``: pass or fail a candidate run against a baseline, for CI.

Exit codes: 0 every check holds; 1 a check does not hold; 2 bad input (an
unknown run, a check that does not parse, a margin out of range, an output
that cannot be written). ``--junit FILE`` writes JUnit XML, ``--record DIR``
a sealed decision record that ``peira verify DIR`` checks, and when
``GITHUB_STEP_SUMMARY`` names a file the gate appends a Markdown table to it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from . import _common as c

__all__ = ["cmd_gate", "register"]

_SHOWN = [
    "check", "spec", "verdict", "passed", "estimate_baseline", "estimate_candidate", "diff",
    "lo", "hi", "interval_level", "p_value", "n_common", "n_both", "note",
]  # fmt: skip


def _record(
    args: argparse.Namespace, checks: Any, dataset: Path, log: Path, key: bytes | None
) -> Path:
    """Write the sealed decision record of ``--record`` (:mod:`peira.seal.decision`)."""
    import polars as pl

    from ..integrity.hashes import DATASET_SCHEME, dataset_hash, results_hash, results_scheme
    from ..io import read_dataset, read_responses
    from ..seal.decision import decision_payload, write_decision

    ds = read_dataset(dataset)
    runs = sorted({args.baseline, args.candidate})
    rows = read_responses(log, cases=ds.cases).filter(pl.col("run_id").is_in(runs))
    scheme = results_scheme(rows)
    payload = decision_payload(
        checks,
        dataset={"content_hash": dataset_hash(ds.cases, ds.variants), "hash_scheme": DATASET_SCHEME,
                 "n_cases": ds.cases.height, "n_variants": ds.variants.height},
        responses={"content_hash": results_hash(rows, scheme), "hash_scheme": scheme,
                   "n_rows": rows.height, "runs": runs},
        plan={"split": args.split, "support": args.support or "common", "missing": args.missing,
              "delta": args.delta, "n_resamples": args.resamples, "seed": args.seed,
              "unit": args.unit, "level": args.level, "fingerprint": checks["fingerprint"][0]},
        lock_kind="sha256" if key is None else "hmac-sha256",
    )  # fmt: skip
    return write_decision(args.record, payload, key)


def _append_summary(text: str) -> None:
    """Append ``text`` to the file ``GITHUB_STEP_SUMMARY`` names, in one write (the
    file is the runner's: it is never truncated or replaced)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    from ..errors import OutputError

    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(f"GITHUB_STEP_SUMMARY {target}: cannot append ({exc.strerror})") from exc


def cmd_gate(args: argparse.Namespace) -> int:
    """Evaluate every ``--require`` and ``--guard`` check; 0 when all hold, else 1."""
    from .. import api
    from ..io import atomic_path
    from ..release_gate import describe, junit_xml, parse_check, summary_markdown
    from ..seal import SEAL_KEY_ENV, load_key
    from ..seal.decision import decision_owner
    from ._output import render

    checks = [parse_check(t, "require") for t in args.require]
    checks += [parse_check(t, "guard") for t in args.guard]
    if not checks:
        from ..release_gate import GateSpecError

        raise GateSpecError("a gate needs at least one --require or --guard check")
    dataset, log = c.dataset_and_log(args)
    outputs = {"junit": args.junit, "record": args.record}
    if args.junit:
        c.check_out(args, args.junit, inputs=[args.key_file], logs=[log], datasets=[dataset])
    if args.record:
        c.check_out(args, args.record, kind="dir", inputs=[args.key_file], logs=[log],
                    datasets=[dataset], owner=decision_owner, writer="peira gate")  # fmt: skip
    if (
        outputs["junit"]
        and outputs["record"]
        and Path(args.junit).resolve() == Path(args.record).resolve()
    ):
        from ..errors import PeiraError

        raise PeiraError(f"--junit and --record name the same path ({args.junit})")
    key = load_key(args.key_file, env_var=SEAL_KEY_ENV, purpose="seal") if args.record else None
    table = api.gate(
        c.responses_arg(args, log), dataset, baseline=args.baseline, candidate=args.candidate,
        require=checks, support=args.support or "common",
        **c.api_kwargs(args, ("split", "missing", "delta", "n_resamples", "seed", "unit",
                              "level", "engine")),
    )  # fmt: skip
    ok = bool(table["passed"].all())
    if args.junit:
        with atomic_path(args.junit) as tmp:
            tmp.write_bytes(junit_xml(table))
    if args.record:
        _record(args, table, dataset, log, key)
    _append_summary(summary_markdown(table))
    if args.format in ("table", "markdown"):
        sys.stdout.write(render(table.select(_SHOWN), args.format))
        held = int(table["passed"].sum())
        print(f"gate: {'PASS' if ok else 'FAIL'} — {held} of {table.height} checks hold "
              f"({args.candidate} against {args.baseline})")  # fmt: skip
        for row in table.filter(~table["passed"]).iter_rows(named=True):
            print(f"  not held: {describe(row)}")
    else:
        sys.stdout.write(render(table, args.format))
    return c.EXIT_OK if ok else c.EXIT_VIOLATIONS


def register(sub: Any) -> None:
    """Add ``gate`` to the ``peira`` subparsers object ``sub``."""
    g = c.add_command(
        sub, "gate", cmd_gate,
        "pass (exit 0) or fail (exit 1) a candidate run against a baseline, for CI",
    )  # fmt: skip
    g.add_argument(
        "--baseline", required=True, metavar="RUN", help="the run to beat or keep up with"
    )
    g.add_argument("--candidate", required=True, metavar="RUN", help="the run under test")
    g.add_argument(
        "--require", action="append", default=[], metavar="CHECK",
        help="what the candidate must achieve (repeatable): METRIC:better, "
        "METRIC:non-inferior:MARGIN or METRIC:equivalent:MARGIN",
    )  # fmt: skip
    g.add_argument(
        "--guard", action="append", default=[], metavar="CHECK",
        help="what the candidate must not break (repeatable; the same forms), e.g. "
        "benign_accuracy:non-inferior:0.02",
    )  # fmt: skip
    c.add_data_options(g, split="public")
    c.add_comparison_options(g, gates=False)
    g.add_argument("--junit", metavar="FILE", help="write the checks as JUnit XML")
    g.add_argument(
        "--record", metavar="DIR",
        help="write a sealed decision record (input hashes, plan fingerprint, every verdict) "
        "that `peira verify DIR` checks",
    )  # fmt: skip
    g.add_argument(
        "--key-file", metavar="K",
        help="seal the record with this secret key (default: the environment variable "
        "PEIRA_SEAL_KEY; without one, a plain SHA-256 lock)",
    )  # fmt: skip
    c.add_force_option(g, "--junit file")
    c.add_engine_options(g)
