"""peira._prefetch: slow imports started on a thread, errors left to the real import."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest

from peira._prefetch import prefetch


def _module(root: Path, name: str, body: str) -> None:
    (root / f"{name}.py").write_text(body)


def test_prefetch_imports_on_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(
        tmp_path,
        "peira_pf_slow",
        "import threading, time\ntime.sleep(0.2)\nTHREAD = threading.current_thread().name\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "peira_pf_slow", raising=False)
    thread = prefetch("peira_pf_slow")
    assert thread is not None and thread.name == "peira-prefetch"
    assert prefetch("peira_pf_slow") is None  # already under way: not started twice
    # the import that needs it waits for the one under way, and gets the same module
    mod = importlib.import_module("peira_pf_slow")
    thread.join(5)
    assert not thread.is_alive()
    assert mod.THREAD == "peira-prefetch" and sys.modules["peira_pf_slow"] is mod
    monkeypatch.delitem(sys.modules, "peira_pf_slow")


def test_an_imported_module_is_not_prefetched() -> None:
    importlib.import_module("json")
    assert prefetch("json") is None


def test_a_failing_import_raises_where_the_module_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(tmp_path, "peira_pf_broken", "raise ValueError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: seen.append(a.exc_value))
    thread = prefetch("peira_pf_broken", "peira_pf_missing_entirely")
    assert thread is not None
    thread.join(5)
    assert seen == []  # the thread ends quietly
    assert "peira_pf_broken" not in sys.modules
    with pytest.raises(ValueError, match="broken on purpose"):
        importlib.import_module("peira_pf_broken")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("peira_pf_missing_entirely")
