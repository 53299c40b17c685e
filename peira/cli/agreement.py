"""``peira agreement``: how far the judges of a log agree, per run (and family)."""

from __future__ import annotations

import argparse
from typing import Any

from . import _common as c

__all__ = ["COMPACT", "cmd_agreement", "register"]

#: What ``peira agreement`` shows in a terminal by default.
COMPACT = [
    "run_id", "family", "judges", "n", "n_undetermined", "n_partial", "n_no_attack",
    "agreement", "cohen_kappa", "cohen_kappa_lo", "cohen_kappa_hi", "fleiss_kappa",
    "fleiss_kappa_lo", "fleiss_kappa_hi", "krippendorff_alpha", "krippendorff_alpha_lo",
    "krippendorff_alpha_hi", "few_clusters",
]  # fmt: skip


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [x.strip() for x in text.split(",") if x.strip()]


def cmd_agreement(args: argparse.Namespace) -> int:
    """Every pair of judges and the panel, with cluster-bootstrap intervals."""
    from .. import api

    dataset, log = c.dataset_and_log(args)
    frame = api.agreement(
        log, dataset,
        judgements=args.judgements if args.judgements is not None else dataset,
        by=args.by, judges=_names(args.judges), runs=_names(args.runs),
        with_gold=args.with_gold,
        **c.api_kwargs(args, ("split", "n_resamples", "seed", "unit", "level")),
    )  # fmt: skip
    if args.format not in ("table", "markdown"):
        return c.emit(frame, args.format)
    return c.emit(frame.select(c.pick_columns(frame, COMPACT, args)), args.format)


def register(sub: Any) -> None:
    p = c.add_command(
        sub,
        "agreement",
        cmd_agreement,
        "agreement between judges: Cohen's kappa per pair, Fleiss' kappa and "
        "Krippendorff's alpha per panel, with cluster-bootstrap intervals",
    )
    c.add_input_options(p)
    p.add_argument(
        "--judgements",
        metavar="FILE",
        help="judgements table (default: the dataset's judgements.parquet)",
    )
    p.add_argument("--by", choices=("family",), default=None, help="one row per family too")
    p.add_argument("--judges", metavar="A,B,…", help="the panel (default: every judge but gold)")
    p.add_argument("--runs", metavar="A,B,…", help="the runs (default: every judged run)")
    p.add_argument(
        "--with-gold", action="store_true", help="put the human labels (judge gold) in the panel"
    )
    c.add_format_option(p)
    c.add_split_option(p, "public")
    c.add_bootstrap_options(p)
    c.add_columns_options(p)
