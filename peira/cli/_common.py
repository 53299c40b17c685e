"""What the command modules share: the one definition of the data and bootstrap
options (with their range checks), argument types, reading the dataset and the
response log, and printing a frame.

Every command that takes ``--resamples``, ``--level``, ``--seed``, ``--unit``,
``--method`` or ``--delta`` gets them from here, so a value one command rejects
is rejected by all of them (argparse exits 2 with ``peira <command>: error:
argument --level: …``).

Nothing heavy is imported at module level: ``peira --help`` builds every
parser without loading polars, pandera or scipy.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api import MAX_RESAMPLES, MAX_SEED, PARAMETERS, SPLITS
from ._help import HelpParser, ImportHelpParser
from ._output import FORMATS

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATIONS",
    "MAX_RESAMPLES",
    "MAX_SEED",
    "SPLITS",
    "Command",
    "HelpParser",
    "ImportHelpParser",
    "LazyChoices",
    "add_bootstrap_options",
    "add_columns_options",
    "add_command",
    "add_data_options",
    "add_force_option",
    "add_format_option",
    "add_input_options",
    "add_pair_options",
    "add_split_option",
    "api_kwargs",
    "check_out",
    "confidence_level",
    "dataset_and_log",
    "dataset_beside",
    "dataset_files",
    "emit",
    "finite_non_negative",
    "finite_number",
    "int_range",
    "log_inputs",
    "non_negative_int",
    "note",
    "note_unfinished_runs",
    "number_range",
    "option_choices",
    "option_help",
    "option_type",
    "pick_columns",
    "positive_int",
]

EXIT_OK, EXIT_VIOLATIONS, EXIT_USAGE = 0, 1, 2

Command = Callable[[argparse.Namespace], int]


# ---------------------------------------------------------------- argument types


def _number(text: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None


def int_range(lo: int, hi: int, name: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in ``[lo, hi]``."""

    def parse(text: str) -> int:
        value: int = _number(text, int)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo:,}, {hi:,}], not {text}")
        return value

    parse.__name__ = name or f"integer in [{lo}, {hi}]"
    return parse


def number_range(
    lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False, name: str = ""
) -> Callable[[str], float]:
    """An argparse type: a finite number in the interval (brackets as given)."""

    def parse(text: str) -> float:
        value: float = _number(text, float)
        inside = (lo < value if open_lo else lo <= value) and (
            value < hi if open_hi else value <= hi
        )
        if not (math.isfinite(value) and inside):
            shown = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
            raise argparse.ArgumentTypeError(f"must be a finite number in {shown}, not {text}")
        return value

    parse.__name__ = name or "number"
    return parse


def finite_number(text: str) -> float:
    """An argparse type: any finite number (``import --threshold``)."""
    value: float = _number(text, float)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def option_type(name: str, label: str = "") -> Callable[[str], Any]:
    """The argparse type of the flat API's parameter ``name``: its bounds are those of
    :data:`peira.api.PARAMETERS` (the one declaration), its messages argparse's."""
    k = PARAMETERS[name]
    if k.kind == "int":
        return int_range(int(k.lo), int(k.hi), label)
    return number_range(k.lo, k.hi, open_lo=k.open_lo, open_hi=k.open_hi, name=label or name)


def option_help(name: str, default: str = "") -> str:
    """The help text of the flat API's parameter ``name`` (:data:`peira.api.PARAMETERS`)."""
    return PARAMETERS[name].help or default


def option_choices(name: str) -> tuple[str, ...]:
    """The choices of the flat API's parameter ``name`` (:data:`peira.api.PARAMETERS`)."""
    return PARAMETERS[name].names()


#: An integer >= 1 (``--resamples``: at most :data:`MAX_RESAMPLES`).
positive_int = option_type("n_resamples", "positive integer")
#: An integer >= 0 that fits a seed (``--seed``).
non_negative_int = option_type("seed", "non-negative integer")
#: A confidence level strictly between 0 and 1 (``--level``).
confidence_level = option_type("level")
#: A shift threshold on the probability scale, in [0, 1] (``--delta``).
finite_non_negative = option_type("delta")


class LazyChoices:
    """``choices=`` read from the library when a command is parsed or its help shown,
    not when the parser is built (so ``peira --help`` imports no numerics). Give the
    option a ``metavar``: without one, argparse lists the choices as it adds it."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        self._names = names

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


# ---------------------------------------------------------------- options


def add_command(
    sub: Any, name: str, func: Command, help: str, **kwargs: Any
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` running ``func``; the guard names it in errors.

    ``parser_class`` (keyword) makes the subcommand's parser of that
    ``ArgumentParser`` subclass.
    """
    parser_class = kwargs.pop("parser_class", None)
    default_class = sub._parser_class
    sub._parser_class = parser_class or default_class
    try:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, **kwargs)
    finally:
        sub._parser_class = default_class
    p.set_defaults(func=func, command_name=p.prog.removeprefix("peira ").strip() or name)
    return p


def add_input_options(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--dataset`` and ``--responses`` (neither given: the bundled demo data; see
    :func:`dataset_and_log`)."""
    if required:
        p.add_argument("--dataset", required=True, help="dataset directory")
        p.add_argument("--responses", required=True, help="response log: file, directory or glob")
    else:
        p.add_argument(
            "--dataset",
            help="dataset directory (default: the log's folder when it holds one; the "
            "bundled data/demo when neither --dataset nor --responses is given)",
        )
        p.add_argument(
            "--responses",
            help="response log: file, directory or glob (default: the dataset's responses.parquet)",
        )


def add_format_option(p: argparse.ArgumentParser) -> None:
    """``--format table|csv|json|markdown``."""
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (default; aligned columns fitted to the terminal), csv, json (one JSON "
        "object per line) or markdown",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="table: every column at any width (default: fitted to the terminal and at most "
        "120 characters, the columns left out named below the table)",
    )


def add_split_option(p: argparse.ArgumentParser, default: str, *, help: str | None = None) -> None:
    """``--split public|holdout|all``."""
    p.add_argument("--split", choices=SPLITS, default=default, help=help or option_help("split"))


def add_pair_options(p: argparse.ArgumentParser) -> None:
    """How pairs are built: ``--missing`` and ``--delta``."""
    p.add_argument(
        "--missing", choices=option_choices("missing"), default="error",
        help=option_help("missing"),
    )  # fmt: skip
    p.add_argument("--delta", type=finite_non_negative, default=0.10, help=option_help("delta"))


def add_bootstrap_options(
    p: argparse.ArgumentParser,
    *,
    level: bool = True,
    method: bool = False,
    seed_help: str = "bootstrap seed",
) -> None:
    """``--resamples``, ``--seed``, ``--unit`` (and ``--level``, ``--method``)."""
    p.add_argument(
        "--resamples", type=positive_int, default=10_000, help=option_help("n_resamples")
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help=seed_help)
    p.add_argument(
        "--unit", choices=option_choices("unit"), default="cluster", help=option_help("unit")
    )
    if level:
        p.add_argument("--level", type=confidence_level, default=0.95, help=option_help("level"))
    if method:
        p.add_argument(
            "--method",
            choices=LazyChoices(PARAMETERS["method"].names),
            default="auto",  # peira.bootstrap.intervals.DEFAULT_METHOD (a test keeps them equal)
            metavar="METHOD",  # argparse would list the choices when the parser is built
            help=option_help("method"),
        )


def add_comparison_options(p: argparse.ArgumentParser, *, gates: bool = True) -> None:
    """``--support common|own`` and (``gates``) ``--gate NAME=VALUE``, repeatable."""
    p.add_argument(
        "--support",
        choices=option_choices("support"),
        default=None,
        help="which pairs are compared: common (default), the (case, sample) pairs every "
        "run answered; own, each run on all it answered (a run lacking cases is unranked)",
    )
    if gates:
        p.add_argument(
            "--gate",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="change a ranking gate (repeatable): max_malformed_rate, "
            "min_benign_accuracy, min_eligible, min_eligible_per_family, allow_missing",
        )


def comparison_kwargs(args: argparse.Namespace, runs: Sequence[str]) -> dict[str, Any]:
    """``support`` (and ``gates``) of the options given, for the runs compared; a
    ``--support`` given where one run is compared is refused (there is nothing to compare)."""
    from ..errors import PeiraError

    if args.support is not None and len(runs) < 2:
        raise PeiraError(
            f"--support {args.support}: compares runs, and there is one "
            f"({', '.join(runs) or 'none'}); leave --support out"
        )
    out: dict[str, Any] = {"support": args.support or "common"}
    if hasattr(args, "gate"):
        out["gates"] = gates_of(args)
    return out


def gates_of(args: argparse.Namespace) -> dict[str, Any]:
    """The gates ``--gate NAME=VALUE`` set (:func:`peira.metrics.gates.parse_gate`);
    a gate given twice is refused."""
    from ..errors import PeiraError
    from ..metrics.gates import parse_gate

    out: dict[str, Any] = {}
    for text in args.gate:
        name, value = parse_gate(text)
        if name in out:
            raise PeiraError(f"--gate {name}: given twice")
        out[name] = value
    return out


def add_flag_family_option(p: argparse.ArgumentParser) -> None:
    """``--flag-family run|board``: the family of tests the holdout divergence flag controls
    (:func:`peira.holdout.divergence`, docs/spec/holdout.md#divergence)."""
    p.add_argument(
        "--flag-family",
        choices=("run", "board"),
        default="run",
        help="family of the holdout divergence flag: run (default; each run is tested at "
        "alpha = 1 - level on its own) or board (Holm across every run of the board, so an "
        "honest board has some run flagged with probability at most alpha)",
    )


def add_engine_options(p: argparse.ArgumentParser, note: str = "") -> None:
    """``--engine local|spark`` and ``--spark-master`` (peira/engine/); ``note`` ends the
    help of ``--engine`` (what the command does differently on Spark)."""
    p.add_argument(
        "--engine",
        choices=option_choices("engine"),
        default="local",
        help="where the log is reduced to per-cluster sums: local (polars, default) or "
        "spark (Apache Spark; pip install 'peira[spark]'; --responses may then be any "
        "path Spark reads, e.g. s3a://bucket/log/)" + (f"; {note}" if note else ""),
    )
    p.add_argument(
        "--spark-master",
        metavar="URL",
        help="Spark master URL of --engine spark (default: spark-submit's --master, else local[*])",
    )


def engine_of(args: argparse.Namespace) -> Any:
    """The engine ``--engine``/``--spark-master`` name (``"local"`` or a SparkEngine)."""
    if getattr(args, "engine", "local") == "local":
        return "local"
    from ..engine.spark import SparkEngine

    return SparkEngine(master=args.spark_master)


def responses_arg(args: argparse.Namespace, log: Path) -> Any:
    """The log as the engine reads it: Spark takes ``--responses`` as written (a URI
    such as ``s3a://b/k`` must not become a local path)."""
    if getattr(args, "engine", "local") != "local" and args.responses:
        return str(args.responses)
    return log


def add_data_options(p: argparse.ArgumentParser, *, split: str, method: bool = False) -> None:
    """Everything a scoring command takes: input, format, split, pairs, bootstrap."""
    add_input_options(p)
    add_format_option(p)
    add_split_option(p, split)
    add_pair_options(p)
    add_bootstrap_options(p, method=method)


# ---------------------------------------------------------------- reading


def dataset_and_log(args: argparse.Namespace) -> tuple[Path, Path]:
    """The dataset directory and the response log that ``--dataset``/``--responses`` name.

    Nothing is assumed silently:

    - neither option: the bundled demo data (its dataset and its
      ``responses.parquet``), said in one note on stderr;
    - ``--responses`` alone: the log's folder when it holds a dataset (every
      file of :data:`peira.io.DATASET_FILES`), said in a note; else an error
      naming ``--dataset``;
    - ``--dataset`` alone: its ``responses.parquet``;
    - a ``--dataset`` that does not exist is reported as such.

    The answer is kept on ``args``, so a command asking twice gets one note.
    Also starts loading the compiled bootstrap kernels when the command's plan
    will need them (:func:`preload_for_plan`).
    """
    known: tuple[Path, Path] | None = getattr(args, "_dataset_and_log", None)
    if known is None:
        known = _resolve_inputs(args)
        args._dataset_and_log = known
        preload_for_plan(known[0], args)
        note_unfinished_runs(known[0])
    return known


def _note(message: str) -> None:
    print(f"peira: note: {message}", file=sys.stderr)


def note(message: str) -> None:
    """One note on stderr: ``peira: note: <message>``."""
    _note(message)


def note_unfinished_runs(dataset: str | Path) -> None:
    """One note on stderr per run the dataset's source reports as unfinished
    (``runs.parquet``: ``run <id>: partial: 134 of 792 samples (…)``)."""
    from ..io import read_runs, run_notes

    for line in run_notes(read_runs(dataset)):
        _note(line)


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _resolve_inputs(args: argparse.Namespace) -> tuple[Path, Path]:
    from ..errors import DataFileError, PeiraError
    from ..io import DATASET_FILES, demo_dir

    if args.dataset is None and args.responses is None:
        d = demo_dir()
        _note(f"no --dataset or --responses given: using the bundled demo data ({_shown(d)})")
        return d, d / "responses.parquet"
    if args.dataset is None:
        log = Path(args.responses)
        beside = dataset_beside(log)
        if beside is None:
            raise PeiraError(
                f"--responses {args.responses}: no --dataset given and the log's folder holds "
                f"no dataset ({', '.join(DATASET_FILES)}); pass --dataset DIR"
            )
        _note(f"no --dataset given: using the dataset in the log's folder ({beside})")
        return beside, log
    d = Path(args.dataset)
    if not d.exists():
        raise DataFileError(f"--dataset {d}: no such directory")
    if args.responses is not None:
        return d, Path(args.responses)
    log = d / "responses.parquet"
    if not log.exists():
        raise DataFileError(f"{d}: no responses.parquet; pass --responses LOG")
    return d, log


def dataset_beside(log: str | Path) -> Path | None:
    """The dataset directory a response log sits in: the log's folder (a directory
    log: itself) when it holds every file of :data:`peira.io.DATASET_FILES`, else None."""
    from ..io import DATASET_FILES

    p = Path(log)
    folder = p if p.is_dir() else p.parent
    if all((folder / name).is_file() for name in DATASET_FILES):
        return folder
    return None


def preload_for_plan(dataset: Path, args: argparse.Namespace) -> None:
    """Start loading the compiled bootstrap kernels if this command's plan is large.

    The plan's size is known before anything is validated: B is ``--resamples``
    and C the distinct ``scenario_id`` (``case_id`` with ``--unit case``) of the
    cases table's split, read off its two columns. Loading the kernels (about a
    second, most of it holding the GIL) then overlaps reading, validating and
    reducing the log (:func:`peira.bootstrap.plan.preload_for`). Nothing is
    reported here: an unreadable cases table is the reader's to report.
    """
    b = getattr(args, "resamples", None)
    if not isinstance(b, int):
        return
    import polars as pl

    from ..bootstrap.plan import preload_for

    col = "case_id" if getattr(args, "unit", "cluster") == "case" else "scenario_id"
    split = getattr(args, "split", None)
    try:
        lf = pl.scan_parquet(dataset / "cases.parquet")
        if split in ("public", "holdout"):
            lf = lf.filter(pl.col("split") == split)
        n = lf.select(pl.col(col).n_unique()).collect().item()
    except Exception:  # reported by the reader, with file, row and column
        return
    if isinstance(n, int):
        preload_for(n, b)


def api_kwargs(args: argparse.Namespace, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The flat API's keyword arguments of the options given: each parameter of
    :data:`peira.api.PARAMETERS` (or of those of them in ``names``) whose option the
    command has (``--resamples`` gives ``n_resamples``; ``--engine`` the engine of
    :func:`engine_of`)."""
    from ..api import PARAMETERS

    out: dict[str, Any] = {}
    for name, constraint in PARAMETERS.items():
        if names is not None and name not in names:
            continue
        dest = constraint.option.removeprefix("--").replace("-", "_")
        if hasattr(args, dest):
            out[name] = engine_of(args) if constraint.kind == "engine" else getattr(args, dest)
    return out


# ---------------------------------------------------------------- writing


def add_force_option(p: argparse.ArgumentParser, what: str = "output file") -> None:
    """``--force``: replace an existing output that Peira did not write."""
    p.add_argument(
        "--force",
        action="store_true",
        help=f"replace an existing {what} that peira did not write (never an input of the "
        "command; a directory only when it is peira's own output)",
    )


def dataset_files(directory: str | Path | None) -> list[Path]:
    """The files a command reads from a dataset directory (its inputs)."""
    if directory is None:
        return []
    d = Path(directory)
    return [d / "cases.parquet", d / "variants.parquet"]


def log_inputs(path: str | Path | None) -> tuple[list[Path], list[Path]]:
    """(files, directories read as a whole) of a response log: a file, a directory or a glob."""
    import glob

    if path is None:
        return [], []
    p = Path(path)
    if p.is_dir():
        return [], [p]
    if not p.exists() and glob.has_magic(str(path)):
        return [Path(f) for f in glob.glob(str(path), recursive=True)], []
    return [p], []


def check_out(
    args: argparse.Namespace,
    path: str | Path,
    *,
    kind: str = "file",
    inputs: Sequence[str | Path | None] = (),
    logs: Sequence[str | Path | None] = (),
    datasets: Sequence[str | Path | None] = (),
    owner: Any = None,
    writer: str | None = None,
) -> Path:
    """Check an output path before the command does any work (see :mod:`peira._writes`).

    ``inputs`` are files the command reads, ``logs`` response logs (files,
    directories or globs) and ``datasets`` dataset directories; the output may
    be none of them. ``--force`` (when the command has it) allows replacing a
    file that Peira did not write.
    """
    from ..io import check_output

    files = [Path(i) for i in inputs if i is not None]
    trees: list[Path] = []
    for log in logs:
        f, t = log_inputs(log)
        files += f
        trees += t
    for d in datasets:
        files += dataset_files(d)
    out = check_output(
        path,
        kind=kind,
        inputs=files,
        input_trees=trees,
        force=bool(getattr(args, "force", False)),
        owner=owner,
        writer=writer or f"peira {getattr(args, 'command_name', None) or args.command}",
    )
    hold_output(out)
    return out


#: The outputs the running command holds the lock of, from its checks to its end.
_HELD = contextlib.ExitStack()


def hold_output(path: Path) -> None:
    """Hold ``path``'s writer lock until the command ends (:func:`release_outputs`):
    a second command writing the same output meanwhile is refused at its start."""
    from ..io import output_lock

    _HELD.enter_context(output_lock(path))


def release_outputs() -> None:
    """Release every output lock the command took (called when it ends)."""
    _HELD.close()


# ---------------------------------------------------------------- output


def emit(frame: pl.DataFrame, fmt: str) -> int:
    """Print ``frame`` in ``fmt`` on stdout; return :data:`EXIT_OK`."""
    from ._output import render

    sys.stdout.write(render(frame, fmt))
    return EXIT_OK


# ---------------------------------------------------------------- columns


def add_columns_options(p: argparse.ArgumentParser) -> None:
    """``--columns A,B`` and ``--all``: which columns a ``table``/``markdown`` view shows."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--columns",
        metavar="A,B,…",
        help="the columns to show in table/markdown (default: a compact set; "
        "csv and json always give every column)",
    )
    g.add_argument("--all", action="store_true", help="every column in table/markdown")


def pick_columns(frame: pl.DataFrame, default: list[str], args: argparse.Namespace) -> list[str]:
    """The columns of ``frame`` a table/markdown view shows: ``--columns``, every one with
    ``--all``, else ``default`` (those of them that ``frame`` has)."""
    from ..errors import PeiraError

    if getattr(args, "all", False):
        return list(frame.columns)
    wanted = getattr(args, "columns", None)
    if wanted:
        names = [x.strip() for x in wanted.split(",") if x.strip()]
        unknown = [x for x in names if x not in frame.columns]
        if unknown:
            from difflib import get_close_matches

            hint = get_close_matches(unknown[0], frame.columns, n=1)
            more = f"; did you mean {hint[0]!r}?" if hint else ""
            raise PeiraError(
                f"--columns: no column {unknown[0]!r}{more} (columns: {', '.join(frame.columns)})"
            )
        return names
    return [x for x in default if x in frame.columns]
