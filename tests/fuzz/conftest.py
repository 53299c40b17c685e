"""Every failure of the fuzz suite names the seed that drew it."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        from tests.fuzz.test_random_inputs import SEED

        report.sections.append(
            ("fuzz seed", f"fuzz seed: {SEED} (rerun with PEIRA_FUZZ_SEED={SEED})")
        )
