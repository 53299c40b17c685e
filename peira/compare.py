"""Deprecated: the module ``peira.compare`` is now :mod:`peira.ranking`.

``peira.compare(...)`` is the flat API function :func:`peira.api.compare`:
this module is callable and calls it (see :mod:`peira._callable`). For one
release it also answers for the old module: ``from peira.compare import
leaderboard`` still works, with a :class:`DeprecationWarning` pointing to
:mod:`peira.ranking`.
"""

from __future__ import annotations

import warnings
from typing import Any

from ._callable import make_callable

_NAMES = ("Rule", "head_to_head", "leaderboard", "pairwise")


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        warnings.warn(
            f"peira.compare.{name} moved to peira.ranking.{name}; the module peira.compare "
            "goes away in the next release (peira.compare is the flat API function)",
            DeprecationWarning,
            stacklevel=2,
        )
        from . import ranking

        return getattr(ranking, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(_NAMES)


make_callable(__name__, "compare")
