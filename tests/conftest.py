"""Shared fixtures."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from peira.io import write_dataset, write_parquet
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows
from tests.fresh import fresh_python  # noqa: F401  (a session fixture)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A valid dataset directory with three cases and one run's responses."""
    cases = make_cases(
        case("c1", scenario_id="s1"),
        case("c2", scenario_id="s1", severity="low"),
        case(
            "c3",
            scenario_id="s2",
            primitive="score",
            options=["advance", "hold"],
            expected_decision="advance",
            positive_decision="advance",
            target_decision="hold",
        ),
    )
    d = tmp_path / "ds"
    write_dataset(cases, make_variants(cases), d)
    rows = [
        *pair_rows("c1", "deny", "approve", b_confidence=0.9, a_confidence=0.6),
        *pair_rows("c2", "deny", "deny"),
        *pair_rows("c3", "advance", "advance", b_score=0.8, a_score=0.6),
    ]
    write_parquet(make_responses(*rows), d / "responses.parquet")
    return d


@pytest.fixture(autouse=True)
def _close_what_the_test_made() -> Iterator[None]:
    """Close what a test registered with :func:`tests.builders.made` (an adapter's
    pooled connections would otherwise be finalised, with a ResourceWarning, in a
    later test)."""
    from tests.builders import MADE

    yield
    while MADE:
        MADE.pop().close()


@pytest.fixture(scope="session")
def spark_engine() -> Iterator[Any]:
    """One local Spark session (``local[2]``) for every Spark test of the run.

    Spark needs Java 17+: without it the test fails with that reason (the
    ``spark`` extra and Java are part of the test setup, see .ci/run).
    """
    from peira.engine.spark import SparkEngine, java_problem

    problem = java_problem()
    if problem is not None:
        pytest.fail(f"the Spark tests need Java: {problem}")
    engine = SparkEngine(master="local[2]", partitions=3)
    sigint = signal.getsignal(signal.SIGINT)
    session = engine.session()
    # Spark's context takes over Ctrl-C; the tests that run after it in this process
    # check the handlers Python and peira install, so the one before comes back
    signal.signal(signal.SIGINT, sigint)
    yield engine
    session.stop()


_TERMINAL = "TESTS_CONTROLLER_TERMINAL"


def pytest_configure(config: pytest.Config) -> None:
    """Give each ``pytest-xdist`` worker the terminal variables of the run that started it.

    A worker process starts with ``COLUMNS`` and ``LINES`` set; the table format
    reads ``COLUMNS`` (:func:`peira.cli._output.terminal_width`), so a worker
    restores the values (or their absence) that the controlling process had.
    """
    import json
    import os

    if "PYTEST_XDIST_WORKER" not in os.environ:
        os.environ[_TERMINAL] = json.dumps({k: os.environ.get(k) for k in ("COLUMNS", "LINES")})
        return
    for name, value in json.loads(os.environ.get(_TERMINAL, "{}")).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group the tests for ``pytest-xdist``'s ``--dist loadgroup`` (pyproject.toml).

    Each file's tests run in one worker process, in file order, as without
    xdist; the files whose tests use the Spark session share one group, so one
    worker starts one Spark session for all of them.
    """
    spark = {item.path for item in items if "spark_engine" in getattr(item, "fixturenames", ())}
    for item in items:
        group = "spark" if item.path in spark else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))
