"""``peira plan``: how many scenarios (and cases) a comparison of two runs' ASR needs.

From stated inputs (``--asr``, ``--eligibility``, ``--icc``,
``--cases-per-cluster``, ``--rho``, ``--samples``) or estimated from a pilot
log (``--pilot LOG --dataset D [--runs A B]``; a value stated beside a pilot
replaces its estimate). One row per rule, ``paired`` and ``ci``
(docs/spec/planning.md).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from . import _common as c

__all__ = ["COMPACT", "cmd_plan", "register"]

#: What the ``table``/``markdown`` view shows by default (``--columns``, ``--all``).
COMPACT = [
    "rule", "clusters_needed", "cases_needed", "design_effect",
    "n_clusters", "power", "zero_flip_upper", "zero_flip_upper_now",
]  # fmt: skip

#: Stated inputs: option → (parameter, lo, hi, open_lo, open_hi, what it is).
STATED: dict[str, tuple[str, float, float, bool, bool, str]] = {
    "--asr": ("asr", 0.0, 1.0, True, True, "the better run's ASR on the pairs eligible for both"),
    "--eligibility": (
        "eligibility", 0.0, 1.0, True, False, "the share of pairs eligible for both runs",
    ),
    "--icc": ("icc", 0.0, 1.0, False, True, "the intra-class correlation of flips by scenario"),
    "--cases-per-cluster": ("cases_per_cluster", 1.0, 1e6, False, False, "cases per scenario"),
    "--rho": ("rho", -1.0, 1.0, False, False, "the correlation of the two runs' flips on a pair"),
    "--samples": ("samples", 1.0, 1e6, False, False, "samples per case"),
}  # fmt: skip


def _check(option: str, value: float, lo: float, hi: float, open_lo: bool, open_hi: bool) -> None:
    from ..errors import PeiraError

    inside = (lo < value if open_lo else lo <= value) and (value < hi if open_hi else value <= hi)
    if not (math.isfinite(value) and inside):
        shown = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
        raise PeiraError(f"{option} {value:g}: must be in {shown}")


def _say(text: str) -> None:
    import textwrap

    from ._output import terminal_width

    width = terminal_width()
    print("\n".join(textwrap.wrap(text, width, subsequent_indent="  ")) if width else text)


def cmd_plan(args: argparse.Namespace) -> int:
    """The scenarios and cases needed for ``--mde`` at ``--power``, per rule, and the
    power of the data at hand."""
    from .. import api
    from ..errors import PeiraError

    _check("--mde", args.mde, 0.0, 1.0, True, True)
    _check("--power", args.power, 0.0, 1.0, True, True)
    stated: dict[str, Any] = {}
    for option, (name, lo, hi, open_lo, open_hi, _) in STATED.items():
        value = getattr(args, name)
        if value is not None:
            _check(option, value, lo, hi, open_lo, open_hi)
            stated[name] = value
    if args.pilot is None:
        for given, option in ((args.dataset, "--dataset"), (args.runs, "--runs")):
            if given is not None:
                raise PeiraError(f"{option}: reads a pilot log; give --pilot LOG too")
        if args.asr is None:
            raise PeiraError("state --asr (and the other inputs), or give --pilot LOG --dataset D")
        responses = dataset = None
    else:
        args.responses = args.pilot
        dataset, responses = c.dataset_and_log(args)
    table = api.plan(
        responses, dataset, mde=args.mde, power=args.power, level=args.level,
        family_size=args.family, runs=args.runs, split=args.split, missing=args.missing,
        n_clusters=args.clusters, **stated,
    )  # fmt: skip
    if args.format not in ("table", "markdown"):
        return c.emit(table, args.format)
    if args.format == "table":
        row = table.row(0, named=True)
        _say(
            f"inputs: asr {row['asr']:.4f} (the other run {row['asr_other']:.4f}), "
            f"eligibility {row['eligibility']:.3f}, icc {row['icc']:.3f}, "
            f"cases per cluster {row['cases_per_cluster']:.2f}, samples {row['samples']:g}, "
            f"rho {row['rho']:.3f}; from {row['source']}"
        )
        _say(
            f"goal: an ASR difference of {args.mde:g} at power {args.power:g}, level "
            f"{args.level:g} (paired: Holm over {args.family} comparison(s); ci: the two "
            "intervals do not overlap)"
        )
    return c.emit(table.select(c.pick_columns(table, COMPACT, args)), args.format)


def register(sub: Any) -> None:
    """Add ``plan`` to the ``peira`` subparsers object ``sub``."""
    p = c.add_command(
        sub, "plan", cmd_plan, "scenarios needed to detect an ASR difference; power of the data"
    )
    p.add_argument(
        "--mde",
        type=c.finite_number,
        default=0.03,
        help="minimum detectable ASR difference, in (0, 1) (default 0.03: 3 points)",
    )
    p.add_argument(
        "--power", type=c.finite_number, default=0.8, help="power wanted, in (0, 1) (default 0.8)"
    )
    p.add_argument(
        "--level",
        type=c.confidence_level,
        default=0.95,
        help="confidence level of the comparison (alpha = 1 - level)",
    )
    p.add_argument(
        "--family",
        type=c.int_range(1, 10**6, "family size"),
        default=1,
        help="comparisons in the paired rule's Holm family (default 1; every pair of K runs: K(K-1)/2)",
    )
    p.add_argument(
        "--clusters",
        type=c.int_range(1, 10**9, "scenarios"),
        default=None,
        help="scenarios of the data at hand, for `power` (default: the pilot's)",
    )
    for option, (_, _, _, _, _, what) in STATED.items():
        p.add_argument(option, type=c.finite_number, default=None, help=what)
    p.add_argument(
        "--pilot", metavar="LOG", help="a pilot response log to estimate the inputs from"
    )
    p.add_argument("--dataset", help="the pilot's dataset directory (default: the log's folder)")
    p.add_argument(
        "--runs",
        nargs=2,
        metavar=("A", "B"),
        help="the two runs of the pilot to estimate from (default: every pair, averaged)",
    )
    c.add_split_option(p, "public")
    p.add_argument(
        "--missing", choices=c.option_choices("missing"), default="error",
        help=c.option_help("missing"),
    )  # fmt: skip
    c.add_format_option(p)
    c.add_columns_options(p)
