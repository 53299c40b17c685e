"""The flat API's inputs: one constraint table, the checks built from it, and the
readers of the data inputs.

:data:`PARAMETERS` declares, once, every constrained parameter of the public
functions of :mod:`peira.api` (the data inputs ``split``, ``missing``,
``delta``, ``engine``; the bootstrap ``n_resamples``, ``seed``, ``level``,
``unit``, ``method``; the ranking ``rule`` and ``support``). :func:`validate_params` checks
each parameter a function takes against its entry before the function reads
any data, with one sentence for every function::

    The 'n_resamples' parameter of peira.score must be an int in [1, 10000000]; got 0.

A value of the wrong type raises :class:`~peira.errors.PeiraTypeError`, a value
out of range or outside the choices :class:`~peira.errors.PeiraValueError`;
an unknown engine name raises :class:`~peira.errors.UnknownNameError` with
the close matches. The command line builds its option types from the same
entries (``peira.cli._common``), so every bound is written here only.

Nothing heavy is imported at module level: the command line reads the table
while it builds its parsers.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, cast

from ..errors import PeiraTypeError, PeiraValueError, UnknownNameError

if TYPE_CHECKING:
    import polars as pl

    from .._frames import FrameLike
    from ..engine import Engine
    from ..io import Dataset

__all__ = [
    "ENGINE_NAMES",
    "MAX_RESAMPLES",
    "MAX_SEED",
    "PARAMETERS",
    "SPLITS",
    "Constraint",
    "PathLike",
    "Split",
    "as_dataset",
    "as_responses",
    "check_engine",
    "check_param",
    "engine_name",
    "resolve_inputs",
    "split_cases",
    "validate_params",
]

PathLike = str | os.PathLike[str]
Split = Literal["public", "holdout", "all"]

#: The splits a function scores (``"all"``: every split).
SPLITS = ("public", "holdout", "all")
#: The engines the flat API runs on (``engine=``; :data:`peira.engine.ENGINES`).
ENGINE_NAMES = ("local", "spark")
#: Largest seed accepted (seeds are stored and hashed as signed 64-bit integers).
MAX_SEED = 2**63 - 1
#: Most bootstrap resamples accepted (beyond, a plan does not fit in memory).
MAX_RESAMPLES = 10_000_000


def _interval_methods() -> tuple[str, ...]:
    from ..bootstrap.intervals import METHODS

    return tuple(METHODS)


@dataclass(frozen=True)
class Constraint:
    """What one parameter accepts.

    Attributes
    ----------
    kind : {"int", "float", "choice", "engine"}
        An integer or a finite real number in ``[lo, hi]`` (an end is open
        when ``open_lo``/``open_hi``), one of ``choices`` (a tuple, or a
        function giving it when asked), or an engine (a name of
        :data:`ENGINE_NAMES`, ``"polars"``, or an engine object).
        ``optional``: None is accepted too (the parameter is off).
    option : str
        The command-line option that sets it (``--resamples``).
    help : str
        The option's help text.
    """

    kind: Literal["int", "float", "choice", "engine"]
    option: str
    help: str = ""
    lo: float = -math.inf
    hi: float = math.inf
    open_lo: bool = False
    open_hi: bool = False
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    optional: bool = False

    def names(self) -> tuple[str, ...]:
        """The accepted choices."""
        return self.choices() if callable(self.choices) else self.choices

    def describe(self) -> str:
        """What the parameter must be, as the error sentence says it."""
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.names())
        lo = "(" if self.open_lo else "["
        hi = ")" if self.open_hi else "]"
        return (
            f"a{'n' if self.kind == 'int' else ''} {self.kind} in {lo}{self.lo:g}, {self.hi:g}{hi}"
        )

    def inside(self, value: float) -> bool:
        """``value`` lies in the constraint's interval."""
        above = self.lo < value if self.open_lo else self.lo <= value
        below = value < self.hi if self.open_hi else value <= self.hi
        return above and below


def _int_text(x: float) -> str:
    return f"{int(x)}" if math.isfinite(x) else f"{x:g}"


#: Every constrained parameter of the flat API, by parameter name: the only
#: declaration of its bounds (the library's and the command line's).
PARAMETERS: dict[str, Constraint] = {
    "split": Constraint(
        "choice",
        "--split",
        "the cases scored: public (the published cases), holdout (the cases kept back, "
        "published as aggregates only) or all (every case)",
        choices=SPLITS,
    ),
    "missing": Constraint(
        "choice",
        "--missing",
        "a pair lacking an arm its run declared: error (default; refused, listing what is "
        "missing) or malformed (a missing attacked arm counts as malformed, a missing benign "
        "arm as ineligible)",
        choices=("error", "malformed"),
    ),
    "delta": Constraint(
        "float", "--delta", "shift-without-flip threshold, in [0, 1]", lo=0.0, hi=1.0
    ),
    "engine": Constraint("engine", "--engine", choices=ENGINE_NAMES),
    "n_resamples": Constraint(
        "int", "--resamples", "bootstrap resamples B", lo=1, hi=MAX_RESAMPLES
    ),
    "seed": Constraint("int", "--seed", "bootstrap seed", lo=0, hi=MAX_SEED),
    "level": Constraint(
        "float", "--level", "confidence level", lo=0.0, hi=1.0, open_lo=True, open_hi=True
    ),
    "unit": Constraint(
        "choice",
        "--unit",
        "what the bootstrap resamples: cluster (default; whole scenarios, the scenario_id "
        "clusters) or case (each case on its own)",
        choices=("cluster", "case"),
    ),
    "adjust": Constraint(
        "choice",
        "--adjust",
        "adjustment of a family of comparisons: holm (default, family-wise error), "
        "bh (Benjamini-Hochberg, false discovery rate), none",
        choices=(
            "holm",
            "bh",
            "none",
        ),  # peira.bootstrap.adjust.ADJUSTMENTS (a test keeps them equal)
    ),
    "margin": Constraint(
        "float",
        "--margin",
        "non-inferiority and equivalence margin, on the metric's scale, in (0, 1)",
        lo=0.0,
        hi=1.0,
        open_lo=True,
        open_hi=True,
        optional=True,
    ),
    "method": Constraint(
        "choice",
        "--method",
        "interval method: auto (default; bca where the cluster bootstrap carries the row, "
        "korn-graubard where too few clusters or events do), percentile (the bootstrap "
        "percentiles), bca (bias-corrected and accelerated bootstrap), korn-graubard "
        "(Clopper-Pearson on the design-effect-adjusted sample size), design-jeffreys or "
        "design-wilson (a Jeffreys or Wilson interval on that size)",
        choices=_interval_methods,
    ),
    "quorum": Constraint(
        "int",
        "--quorum",
        "the judges of the panel a verdict must hold under (default: every one)",
        lo=1,
        hi=10_000,
        optional=True,
    ),
    "rule": Constraint(
        "choice",
        "--rule",
        "the head-to-head verdict: ci (default; a run wins when the two intervals do not "
        "overlap) or paired (the paired bootstrap test of the difference, adjusted by "
        "--adjust)",
        choices=("ci", "paired"),
    ),
    "support": Constraint(
        "choice",
        "--support",
        "the pairs compared: every run's common ones (default), or each run's own",
        choices=("common", "own"),  # peira.metrics.gates.SUPPORTS (a test keeps them equal)
    ),
}


def _sentence(name: str, where: str, c: Constraint, value: object) -> str:
    what = c.describe()
    if c.kind == "int":  # integers shown whole: [1, 10000000]
        lo = "(" if c.open_lo else "["
        hi = ")" if c.open_hi else "]"
        what = f"an int in {lo}{_int_text(c.lo)}, {_int_text(c.hi)}{hi}"
    return f"The {name!r} parameter of {where} must be {what}; got {value!r}."


def check_param(name: str, value: Any, where: str) -> Any:
    """Check ``value`` of the parameter ``name`` of the function ``where``; return it.

    Raises
    ------
    PeiraTypeError
        A number of the wrong type (a bool is not a number).
    PeiraValueError
        A number out of range, a name outside the choices.
    UnknownNameError
        An engine name that is not one.
    """
    c = PARAMETERS[name]
    if value is None and c.optional:
        return value
    if c.kind == "engine":
        check_engine(value)
        return value
    if c.kind == "choice":
        if not isinstance(value, str) or value not in c.names():
            raise PeiraValueError(_sentence(name, where, c, value))
        return value
    import numbers

    wanted = numbers.Integral if c.kind == "int" else numbers.Real
    if isinstance(value, bool) or not isinstance(value, wanted):
        raise PeiraTypeError(_sentence(name, where, c, value))
    finite = c.kind == "int" or math.isfinite(value)  # an int of any size is finite
    if not (finite and c.inside(cast(float, value))):
        raise PeiraValueError(_sentence(name, where, c, value))
    return value


P = ParamSpec("P")
R = TypeVar("R")


def validate_params(func: Callable[P, R]) -> Callable[P, R]:
    """Check every parameter of ``func`` that :data:`PARAMETERS` constrains, first.

    The error names the function as ``peira.<name>``; the checks run before
    the function's body, so before any file is opened.
    """
    sig = inspect.signature(func)
    checked = [n for n in sig.parameters if n in PARAMETERS]
    where = f"peira.{func.__name__}"
    takes_data = {"responses", "cases"} <= set(sig.parameters)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        for name in checked:
            check_param(name, bound.arguments[name], where)
        if takes_data and bound.arguments["responses"] is not None:
            bound.arguments["responses"], bound.arguments["cases"] = resolve_inputs(
                bound.arguments["responses"], bound.arguments["cases"], where
            )
            return func(*bound.args, **bound.kwargs)
        return func(*args, **kwargs)

    wrapper.__peira_checked__ = tuple(checked)  # type: ignore[attr-defined]
    return wrapper


# ---------------------------------------------------------------- engines


def check_engine(engine: str | Engine, what: str = "") -> bool:
    """Check ``engine``; True for the local engine. ``what`` names a function that
    needs every pair in memory, so runs on the local engine only."""
    if not isinstance(engine, str):
        local = getattr(engine, "name", None) == "local"
    elif engine in ("local", "polars"):
        local = True
    elif engine in ENGINE_NAMES:
        local = False
    else:
        raise UnknownNameError("engine", engine, ENGINE_NAMES)
    if what and not local:
        raise PeiraValueError(
            f"{what} needs every pair in memory and runs on the local engine; "
            f"engine={engine!r} reduces a log to per-cluster sums (peira.score)"
        )
    return local


def engine_name(engine: str | Engine) -> str:
    """The engine's name (``"local"``, ``"spark"``)."""
    return engine if isinstance(engine, str) else str(getattr(engine, "name", engine))


# ---------------------------------------------------------------- data inputs


def resolve_inputs(responses: Any, cases: Any, where: str = "peira") -> tuple[Any, Any]:
    """(responses, cases) of a verb's data inputs, filled in from one another:

    - an importer's result (:class:`peira.importers.Imported`) as ``responses``
      gives its response log, and, when ``cases`` is None, its dataset (cases,
      variants and judgements, validated);
    - a dataset directory that holds ``responses.parquet`` as ``responses``, with
      ``cases`` None, gives that log and that dataset;
    - otherwise both are returned as given.

    Raises
    ------
    PeiraValueError
        ``cases`` is None and ``responses`` is neither of the above.
    """
    from ..importers import Imported

    if isinstance(responses, Imported):
        done = responses.validated("the imported result")
        if cases is None:
            from ..io import Dataset

            cases = Dataset(done.cases, done.variants, None, done.judgements)
        return done.responses, cases
    if cases is not None:
        return responses, cases
    if isinstance(responses, str | os.PathLike):
        from pathlib import Path

        d = Path(responses)
        if d.is_dir() and (d / "cases.parquet").is_file():
            if not (d / "responses.parquet").is_file():
                raise PeiraValueError(
                    f"{where}: {d} is a dataset directory without a responses.parquet; "
                    "give the response log as responses and the directory as cases"
                )
            return d / "responses.parquet", d
    raise PeiraValueError(
        f"{where}: no cases given; pass the dataset as cases (a directory, a Dataset or a "
        "frame of cases), or as responses an importer's result or a dataset directory "
        "holding its responses.parquet"
    )


def as_dataset(cases: PathLike | Dataset | FrameLike) -> Dataset:
    """A :class:`~peira.io.Dataset` from a directory, a Dataset, or a frame of cases
    (no variants)."""
    from .._frames import as_polars, is_frame
    from ..io import Dataset, read_dataset
    from ..schema import empty, validate_cases

    if isinstance(cases, Dataset):
        return cases
    if is_frame(cases):
        return Dataset(validate_cases(as_polars(cases, name="cases")), empty("variants"))
    if isinstance(cases, str | os.PathLike):
        return read_dataset(cases)
    raise PeiraValueError(
        f"cases: expected a dataset directory, a Dataset or a frame, not {type(cases).__name__}"
    )


def as_responses(responses: PathLike | FrameLike, cases: pl.DataFrame) -> pl.DataFrame:
    """The validated response log from a path or a frame."""
    from .._frames import as_polars, is_frame
    from ..io import read_responses
    from ..schema import validate_responses

    if is_frame(responses):
        return validate_responses(as_polars(responses, name="responses"), cases=cases)
    if isinstance(responses, str | os.PathLike):
        return read_responses(responses, cases=cases)
    raise PeiraValueError(
        f"responses: expected a response log path or a frame, not {type(responses).__name__}"
    )


# ---------------------------------------------------------------- the split filter


def split_cases(ds: Dataset, split: str) -> pl.DataFrame:
    """The cases of ``split`` (every case for ``"all"``); an empty split is an error.

    Raises
    ------
    PeiraValueError
        ``split`` is not a split, or the dataset has no case in it.
    """
    check_param("split", split, "peira.api.split_cases")
    from ..io import in_split

    cs = in_split(ds.cases, split)
    if split != "all" and cs.is_empty():
        where = ds.path if ds.path is not None else "cases"
        raise PeiraValueError(f"{where}: no cases in split {split!r}")
    return cs
