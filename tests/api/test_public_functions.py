"""Every public function of peira.api rejects a bad value of each constrained parameter
with one sentence, before any I/O, and fast; the command line's option types hold the
same bounds.

Driven by :data:`peira.api.PARAMETERS` and ``peira.api.__all__``: a new public
function, or a new constrained parameter of one, is covered without editing
this file.
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from peira import api
from peira.api import PARAMETERS, Constraint
from peira.cli import _common
from peira.errors import PeiraTypeError, PeiraValueError, UnknownNameError

#: A log and a dataset that do not exist: a parameter error must win over reading them.
NOWHERE = Path("/nonexistent/peira/responses.parquet")

#: The loose bound asserted on one rejected call (the contract is < 50 ms).
SLOW = 0.5


def _functions() -> dict[str, Callable[..., Any]]:
    """The public functions of peira.api that take a constrained parameter."""
    out = {}
    for name in api.__all__:
        obj = getattr(api, name)
        if not inspect.isfunction(obj) or not obj.__module__.startswith("peira.api._"):
            continue
        if obj.__module__ == "peira.api._inputs":  # the checks and the filter themselves
            continue
        if any(p in PARAMETERS for p in inspect.signature(obj).parameters):
            out[name] = obj
    return out


FUNCTIONS = _functions()


def _bad_values(c: Constraint) -> list[tuple[Any, type[Exception]]]:
    """Values each constraint rejects, with the error class they raise."""
    if c.kind == "choice":
        return [("no-such-choice", PeiraValueError), (None, PeiraValueError)]
    if c.kind == "engine":
        return [("sparc", UnknownNameError)]
    bad: list[tuple[Any, type[Exception]]] = [("1", PeiraTypeError), (True, PeiraTypeError)]
    if c.kind == "int":
        bad.append((1.5, PeiraTypeError))
    else:
        bad.append((math.nan, PeiraValueError))
    if math.isfinite(c.lo):
        bad.append((c.lo if c.open_lo else c.lo - 1, PeiraValueError))
    if math.isfinite(c.hi):
        bad.append((c.hi if c.open_hi else c.hi + 1, PeiraValueError))
    if c.kind == "int":
        bad = [(int(v) if isinstance(v, float) and v.is_integer() else v, e) for v, e in bad]
    return bad


def _call_args(fn: Callable[..., Any]) -> list[Any]:
    """The required positional arguments of ``fn``, all pointing nowhere."""
    return [
        NOWHERE
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def _call_kwargs(fn: Callable[..., Any]) -> dict[str, Any]:
    """The required keyword-only arguments of ``fn`` (run names: ``baseline=``), as text."""
    return {
        p.name: "x"
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty and p.kind == p.KEYWORD_ONLY
    }


CASES = [
    (fname, pname, value, error)
    for fname, fn in sorted(FUNCTIONS.items())
    for pname in inspect.signature(fn).parameters
    if pname in PARAMETERS
    for value, error in _bad_values(PARAMETERS[pname])
]


def test_the_sweep_covers_the_verbs() -> None:
    assert {"score", "leaderboard", "compare", "tables", "pairs", "flips"} <= set(FUNCTIONS)
    for name, fn in FUNCTIONS.items():  # every constrained function checks first
        checked = getattr(fn, "__peira_checked__", None)
        wanted = tuple(p for p in inspect.signature(fn).parameters if p in PARAMETERS)
        assert checked == wanted, name


@pytest.mark.parametrize(("fname", "pname", "value", "error"), CASES)
def test_bad_parameter_is_rejected_first(
    fname: str, pname: str, value: Any, error: type[Exception]
) -> None:
    fn = FUNCTIONS[fname]
    start = time.perf_counter()
    with pytest.raises(error) as info:
        fn(*_call_args(fn), **_call_kwargs(fn), **{pname: value})
    took = time.perf_counter() - start
    print(f"peira.{fname}({pname}={value!r}) rejected in {took * 1000:.2f} ms")
    assert took < SLOW
    if error is UnknownNameError:
        assert f"unknown {pname} {value!r}" in str(info.value)
        return
    what = re.escape(PARAMETERS[pname].describe()) if PARAMETERS[pname].kind == "choice" else ".+"
    sentence = (
        f"The '{pname}' parameter of peira.{fname} must be {what}; got {re.escape(repr(value))}."
    )
    assert re.fullmatch(sentence, str(info.value)), str(info.value)


def test_the_issue_example() -> None:
    with pytest.raises(PeiraValueError) as info:
        api.score(NOWHERE, NOWHERE.parent, n_resamples=0)
    assert str(info.value) == (
        "The 'n_resamples' parameter of peira.score must be an int in [1, 10000000]; got 0."
    )


@pytest.mark.parametrize("name", ["score", "leaderboard", "compare"])
def test_a_parameter_error_wins_over_a_missing_log_in_under_50ms(name: str) -> None:
    fn = FUNCTIONS[name]
    times = []
    for _ in range(5):
        start = time.perf_counter()
        with pytest.raises(PeiraValueError, match="parameter of peira"):
            fn(NOWHERE, NOWHERE.parent, level=1.5)
        times.append(time.perf_counter() - start)
    print(f"peira.{name}: best {min(times) * 1000:.3f} ms")
    assert min(times) < 0.05


@pytest.mark.parametrize("name", [n for n, c in PARAMETERS.items() if c.kind in ("int", "float")])
def test_the_option_type_holds_the_same_bounds(name: str) -> None:
    parse = _common.option_type(name)
    for value, error in _bad_values(PARAMETERS[name]):
        if error is PeiraValueError:
            with pytest.raises(argparse.ArgumentTypeError):
                parse(str(value))
    c = PARAMETERS[name]
    inside = c.lo if not c.open_lo else (c.lo + c.hi) / 2
    assert parse(str(int(inside) if c.kind == "int" else inside)) == inside


def test_the_options_name_their_parameters() -> None:
    args = argparse.Namespace(resamples=7, seed=3, level=0.9, split="all", engine="local")
    assert _common.api_kwargs(args) == {
        "split": "all",
        "engine": "local",
        "n_resamples": 7,
        "seed": 3,
        "level": 0.9,
    }
