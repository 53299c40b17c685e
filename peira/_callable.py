"""Modules that are also flat API functions (``peira.pairs``, ``peira.compare``).

The flat API wants ``peira.pairs(...)`` and ``peira.compare(...)``, but
``peira/pairs.py`` is a module, and so was ``peira/compare.py``. Once a module
``peira.X`` is imported, Python binds it as the attribute ``peira.X``,
shadowing any function of that name. So these modules are made callable: the
attribute ``peira.X`` is always the module, ``from peira.X import …`` works as
it always did, and calling it calls :func:`peira.api.X` (whose signature and
docstring ``inspect`` and ``help`` show).
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

__all__ = ["make_callable"]


class CallableModule(types.ModuleType):
    """A module that, called, calls the flat API function of the same name."""

    _api_name: str

    def _function(self) -> Any:
        from . import api

        return getattr(api, self._api_name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._function())


def make_callable(module_name: str, api_name: str) -> None:
    """Make the (already imported) module ``module_name`` call ``peira.api.<api_name>``."""
    module = sys.modules[module_name]
    module.__class__ = CallableModule
    module._api_name = api_name  # type: ignore[attr-defined]
