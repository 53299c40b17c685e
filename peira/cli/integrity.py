"""``peira seal``, ``verify`` and ``holdout {keygen, blind, unblind, divergence}``.

Exit codes (the guard's, see :mod:`peira.cli._errors`):

- ``seal``: 0 written; 1 the data break the model (validation, missing
  arms); 2 unreadable input, bad key, existing output.
- ``verify``: 0 every artifact intact; 1 some artifact tampered (the
  findings say what differs, sealed vs found); 2 some artifact or input
  unreadable (and none tampered).
- ``holdout keygen``: 0 written; 2 the key file exists (never overwritten).
- ``holdout blind`` / ``unblind`` / ``divergence``: 0 done; 1 invalid data
  (unknown ids, wrong key, validation); 2 unreadable input or bad key.

Secret keys come from ``--key-file`` or the environment
(``PEIRA_SEAL_KEY``, ``PEIRA_HOLDOUT_KEY``) and are never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _common as c

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "cmd_blind",
    "cmd_divergence",
    "cmd_keygen",
    "cmd_seal",
    "cmd_unblind",
    "cmd_verify",
    "register",
]


# ---------------------------------------------------------------- seal / verify


def cmd_seal(args: argparse.Namespace) -> int:
    """``peira seal``: write a sealed run artifact directory."""
    from ..io import read_dataset, read_responses
    from ..seal import SEAL_KEY_ENV, ArtifactExistsError, SealConfig, load_key, seal
    from ..seal.build import artifact_owner

    c.check_out(args, args.out, kind="dir", inputs=[args.key_file], logs=[args.responses],
                datasets=[args.dataset], owner=artifact_owner, writer="peira seal")  # fmt: skip
    out = Path(args.out)
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise ArtifactExistsError(f"{out}: exists already (pass --force to replace it)")
    key = load_key(args.key_file, env_var=SEAL_KEY_ENV, purpose="seal")
    ds = read_dataset(args.dataset)
    responses = read_responses(args.responses, cases=ds.cases)
    config = SealConfig(
        split=None if args.split == "all" else args.split,
        **c.api_kwargs(args, ("missing", "delta", "n_resamples", "seed", "unit", "method")),
    )
    out = seal(ds, responses, args.run, args.out, config=config, key=key, overwrite=args.force)
    kind = "HMAC-SHA256 (keyed)" if key is not None else "SHA-256"
    print(f"{out}: sealed run {args.run!r} ({kind} lock)")
    return c.EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    """``peira verify``: check locks, results hashes and (optionally) re-derive metrics."""
    from ..errors import PeiraError
    from ..io import read_dataset
    from ..seal import SEAL_KEY_ENV, load_key, verify

    if args.rederive and args.dataset is None:
        raise PeiraError(
            "--rederive needs --dataset D (the dataset the run was "
            "scored on; its content hash is checked against the artifact)"
        )
    key = load_key(args.key_file, env_var=SEAL_KEY_ENV, purpose="seal")
    dataset = read_dataset(args.dataset) if args.dataset is not None else None
    codes: list[int] = []
    rows: list[dict[str, Any]] = []
    for path in args.artifacts:
        report = verify(path, key=key, dataset=dataset, rederive=args.rederive)
        codes.append(report.exit_code)
        if args.format == "json":
            rows.append(
                {
                    "artifact": report.source,
                    "kind": report.kind,
                    "status": report.status,
                    "checked": report.notes,
                    "findings": [
                        {
                            "field": f.field,
                            "message": f.message,
                            "sealed": f.expected,
                            "found": f.found,
                        }
                        for f in report.findings
                    ],
                }
            )
            continue
        if report.ok:
            print(f"{report.source}: intact ({report.kind}; {', '.join(report.notes)})")
        else:
            label = "TAMPERED" if report.status == "tampered" else "UNREADABLE"
            print(f"{report.source}: {label} ({report.kind})")
            for f in report.findings:
                print(f"  {f.describe()}")
    if args.format == "json":
        for row in rows:
            sys.stdout.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    # a proven tampering outranks an unreadable artifact
    return c.EXIT_VIOLATIONS if c.EXIT_VIOLATIONS in codes else max(codes)


# ---------------------------------------------------------------- holdout


def _holdout_key(args: argparse.Namespace) -> bytes:
    from ..holdout import HOLDOUT_KEY_ENV
    from ..seal import load_key

    key = load_key(args.key_file, env_var=HOLDOUT_KEY_ENV, required=True, purpose="holdout")
    assert key is not None
    return key


def cmd_keygen(args: argparse.Namespace) -> int:
    """``peira holdout keygen``: a new random key file (mode 0600, never overwritten)."""
    from ..integrity.keys import write_key_file
    from ..io import output_lock

    path = Path(args.out)
    if path.exists() or path.is_symlink() or not path.parent.is_dir():
        write_key_file(path, n_bytes=args.bytes)  # refuses: exists, or no such directory
    c.check_out(args, path, kind="file")  # the write policy's checks, before anything is made
    with output_lock(path):
        out = write_key_file(path, n_bytes=args.bytes)
    print(
        f"{out}: new {args.bytes}-byte key (hex, mode 0600); keep it secret and out of "
        "version control (the same text works as PEIRA_HOLDOUT_KEY)"
    )
    return c.EXIT_OK


def cmd_blind(args: argparse.Namespace) -> int:
    """``peira holdout blind``: write the blinded export."""
    import polars as pl

    from ..holdout import write_blinded
    from ..io import read_dataset

    c.check_out(args, args.out, inputs=[args.key_file], datasets=[args.dataset])
    key = _holdout_key(args)
    ds = read_dataset(args.dataset)
    out = write_blinded(ds, key, args.out, digits=args.digits)
    n_hold = ds.cases.filter(pl.col("split") == "holdout").height
    print(
        f"{out}: {ds.variants.height} blinded variants of {ds.cases.height} cases "
        f"({n_hold} holdout)"
    )
    return c.EXIT_OK


def _read_blinded_responses(path: str) -> pl.DataFrame:
    import polars as pl

    from ..errors import InputFormatError
    from ..io import read_parquet

    p = Path(path)
    if p.suffix in (".jsonl", ".ndjson"):
        from ..importers.cases import iter_jsonl

        rows = [obj for _, obj in iter_jsonl(p)]  # BOM, line numbers, hostile JSON
        try:
            return pl.DataFrame(rows, infer_schema_length=None)
        except Exception as exc:  # a column whose values disagree in type
            raise InputFormatError(
                f"{p}: the JSON lines do not form a table (a field changes type between "
                f"lines): {' '.join(str(exc).split())[:200]}"
            ) from None
    return read_parquet(p)


def cmd_unblind(args: argparse.Namespace) -> int:
    """``peira holdout unblind``: map responses keyed by variant_id back to a response log."""
    from ..holdout import unblind
    from ..io import read_dataset, write_parquet

    c.check_out(args, args.out, inputs=[args.key_file], logs=[args.responses],
                datasets=[args.dataset])  # fmt: skip
    key = _holdout_key(args)
    ds = read_dataset(args.dataset)
    blinded = _read_blinded_responses(args.responses)
    log = unblind(
        blinded,
        ds,
        key,
        run_id=args.run_id,
        model=args.model,
        model_version=args.model_version,
        digits=args.digits,
        source=str(args.responses),
    )
    write_parquet(log, args.out)
    print(f"{args.out}: {log.height} responses of {log['run_id'].n_unique()} run(s)")
    return c.EXIT_OK


def cmd_divergence(args: argparse.Namespace) -> int:
    """``peira holdout divergence``: holdout − public ASR per run (and family)."""
    from .._pairs import build_pairs
    from ..holdout import divergence
    from ..io import read_dataset, read_responses

    ds = read_dataset(args.dataset)
    responses = read_responses(args.responses, cases=ds.cases)
    pairs = build_pairs(responses, ds.cases, missing=args.missing, delta=args.delta)
    table = divergence(
        pairs,
        ds.cases,
        by=args.by or None,
        family=args.flag_family,
        **c.api_kwargs(args, ("level", "n_resamples", "seed", "unit")),
    )
    return c.emit(table, args.format)


# ---------------------------------------------------------------- parser


def _key_option(p: argparse.ArgumentParser, env: str) -> None:
    p.add_argument(
        "--key-file",
        metavar="K",
        help=f"file holding the secret key (default: the environment variable {env})",
    )


def register(sub: Any) -> None:
    """Add ``seal``, ``verify`` and ``holdout`` to the ``peira`` subparsers object ``sub``."""
    s = c.add_command(sub, "seal", cmd_seal, "write a sealed (tamper-evident) run artifact")
    c.add_input_options(s, required=True)
    s.add_argument("--run", required=True, metavar="RUN_ID", help="the run to seal")
    s.add_argument("--out", required=True, metavar="ARTIFACT_DIR", help="artifact directory")
    _key_option(s, "PEIRA_SEAL_KEY")
    c.add_split_option(s, "all")
    c.add_pair_options(s)
    c.add_bootstrap_options(s, level=False, method=True)
    s.add_argument(
        "--force",
        action="store_true",
        help="replace an existing sealed artifact (only an artifact: other directories are "
        "never replaced, and files in it that are not the artifact's are kept)",
    )

    v = c.add_command(
        sub,
        "verify",
        cmd_verify,
        "verify sealed artifacts (exit 0 intact, 1 tampered, 2 unreadable)",
    )
    v.add_argument(
        "artifacts",
        nargs="+",
        metavar="ARTIFACT",
        help="run artifact directory, or an artifact of the earlier harness (.json)",
    )
    v.add_argument(
        "--rederive", action="store_true", help="recompute every metric from the results"
    )
    v.add_argument("--dataset", help="the run's dataset (required by --rederive)")
    _key_option(v, "PEIRA_SEAL_KEY")
    v.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default; one line per artifact and its findings) or json (one object per "
        "artifact and line)",
    )

    h = sub.add_parser("holdout", help="blind holdout: blinded export, unblinding, divergence")
    hs = h.add_subparsers(dest="holdout_command", required=True, metavar="ACTION")

    k = c.add_command(hs, "keygen", cmd_keygen, "write a new random secret key (mode 0600)")
    k.add_argument(
        "--out", required=True, metavar="KEY", help="key file to create (never replaced)"
    )
    k.add_argument(
        "--bytes", type=c.positive_int, default=32, help="random bytes in the key (>= 16)"
    )

    b = c.add_command(hs, "blind", cmd_blind, "write the blinded export (variant_id, prompt, …)")
    b.add_argument("--dataset", required=True, help="dataset directory")
    _key_option(b, "PEIRA_HOLDOUT_KEY")
    b.add_argument("--out", required=True, metavar="EXPORT", help="Parquet file to write")
    c.add_force_option(b)
    b.add_argument(
        "--digits", type=c.int_range(8, 64), default=20, help="hex digits of a pseudonym (8-64)"
    )

    u = c.add_command(
        hs, "unblind", cmd_unblind, "map responses keyed by variant_id to a response log"
    )
    u.add_argument("responses", metavar="RESPONSES", help="Parquet (or .jsonl) keyed by variant_id")
    u.add_argument("--dataset", required=True, help="dataset directory")
    _key_option(u, "PEIRA_HOLDOUT_KEY")
    u.add_argument("--out", required=True, metavar="LOG", help="response log to write")
    c.add_force_option(u)
    u.add_argument("--run-id", help="run_id (required unless the responses carry it)")
    u.add_argument("--model", help="model (required unless the responses carry it)")
    u.add_argument("--model-version", help="model_version (required unless carried)")
    u.add_argument(
        "--digits", type=c.int_range(8, 64), default=20, help="hex digits of a pseudonym (8-64)"
    )

    d = c.add_command(
        hs, "divergence", cmd_divergence, "holdout − public ASR per run, flags hill-climbing"
    )
    c.add_input_options(d, required=True)
    d.add_argument("--by", action="append", default=[], help="breakdown column, e.g. family")
    c.add_bootstrap_options(d, seed_help="seed of the public plan (holdout: +1)")
    c.add_flag_family_option(d)
    c.add_pair_options(d)
    c.add_format_option(d)
