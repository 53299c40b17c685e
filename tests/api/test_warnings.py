"""Peira's warnings name the user's call, not a line inside Peira (``peira.errors.warn``)."""

from __future__ import annotations

import warnings

import peira
from peira.errors import FewClustersWarning, PeiraWarning, warn


def test_a_verbs_warning_names_the_callers_line() -> None:
    d = peira.demo_dir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        peira.score(d / "responses.parquet", d, by="family", n_resamples=50)
        line = _line() - 1
    ours = [w for w in caught if issubclass(w.category, PeiraWarning)]
    assert any(issubclass(w.category, FewClustersWarning) for w in ours)
    assert {(w.filename, w.lineno) for w in ours} == {(__file__, line)}


def test_the_default_filter_shows_it_once_per_call_site() -> None:
    d = peira.demo_dir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            peira.score(d / "responses.parquet", d, by="family", n_resamples=50)
    messages = [str(w.message) for w in caught if issubclass(w.category, FewClustersWarning)]
    assert messages and len(messages) == len(set(messages))


def test_warn_outside_peira_is_warnings_warn() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn("plain", PeiraWarning)
        line = _line() - 1
    assert [(w.filename, w.lineno, str(w.message)) for w in caught] == [(__file__, line, "plain")]


def _line() -> int:
    import inspect

    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno
