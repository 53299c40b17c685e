"""One registry type for every named thing Peira looks up: metrics, tables, figures,
importers, parser rules, engines.

A :class:`Registry` is a read-only mapping (``REG[name]``, ``name in REG``,
iteration in registration order) plus :meth:`~Registry.add`, and lookups that
fail name the close matches (:class:`~peira.errors.UnknownNameError`, a
``KeyError``). Built-in entries are listed in one explicit table where the
registry is defined; third-party entries come from a Python entry-point group,
read on first use so that importing a registry costs nothing.

>>> colours = Registry("colour", ["red", "green"], key=str)
>>> colours.add("blue")
'blue'
>>> colours.names()
('red', 'green', 'blue')
>>> colours["gren"]
Traceback (most recent call last):
...
peira.errors.UnknownNameError: unknown colour 'gren'; did you mean 'green'? known colours: red, green, blue
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from .errors import PeiraValueError, PeiraWarning, UnknownNameError, warn

__all__ = ["Registry"]

T = TypeVar("T")
D = TypeVar("D")
_MISSING: Any = object()


def _name_attribute(item: Any) -> str:
    return str(item.name)


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind, in registration order.

    Parameters
    ----------
    kind
        What an entry is, for messages (``"metric"``, ``"importer"``, …).
    items
        The built-in entries.
    key
        Entry → its name (default: the entry's ``name`` attribute).
    entry_points
        A Python entry-point group (e.g. ``"peira.importers"``) whose entries
        are added on first lookup or listing; each must load to an entry of
        this registry (or to a callable of no arguments returning one).
    """

    def __init__(
        self,
        kind: str,
        items: Iterable[T] = (),
        *,
        key: Callable[[T], str] = _name_attribute,
        entry_points: str | None = None,
    ) -> None:
        self.kind = kind
        self._key = key
        self._items: dict[str, T] = {}
        self._group = entry_points
        for item in items:
            self.add(item)

    # ------------------------------------------------------------ writing

    def add(self, item: T, *, replace: bool = False) -> T:
        """Register ``item`` under its name; return it (usable as a decorator).

        Raises
        ------
        PeiraValueError
            The name is taken (pass ``replace=True`` to replace the entry).
        """
        name = self._key(item)
        if not replace and name in self._items:
            raise PeiraValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def load_entry_points(self, group: str | None = None) -> tuple[str, ...]:
        """Add the entries of an entry-point group now; return the names added.

        An entry that fails to load, or loads to something of the wrong kind,
        is skipped with a :class:`~peira.errors.PeiraWarning`: a broken plugin
        never breaks Peira. Built-in names are not replaced.
        """
        from importlib.metadata import entry_points

        group = group or self._group
        if group is None:
            return ()
        if group == self._group:
            self._group = None  # read once
        added: list[str] = []
        for ep in entry_points(group=group):
            try:
                obj = ep.load()
                item = obj() if callable(obj) and not self._accepts(obj) else obj
                if not self._accepts(item):
                    raise TypeError(f"loads to a {type(item).__name__}")
                self.add(item)
            except Exception as exc:  # a broken plugin is a warning, not a crash
                warn(
                    f"entry point {ep.name!r} = {ep.value!r} of group {group!r} skipped: {exc}",
                    PeiraWarning,
                )
                continue
            added.append(self._key(item))
        return tuple(added)

    def _accepts(self, obj: Any) -> bool:
        try:
            return isinstance(self._key(obj), str)
        except Exception:
            return False

    def _ready(self) -> dict[str, T]:
        if self._group is not None:
            self.load_entry_points()
        return self._items

    # ------------------------------------------------------------ reading

    @overload
    def get(self, name: str) -> T: ...
    @overload
    def get(self, name: str, default: D) -> T | D: ...
    def get(self, name: str, default: Any = _MISSING) -> Any:
        """The entry named ``name``; with ``default``, that instead of an error.

        Raises
        ------
        UnknownNameError
            No such entry (and no default); the message lists close matches.
        """
        items = self._ready()
        if name in items:
            return items[name]
        if default is not _MISSING:
            return default
        raise UnknownNameError(self.kind, name, items)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._ready()

    def __iter__(self) -> Iterator[str]:
        return iter(self._ready())

    def __len__(self) -> int:
        return len(self._ready())

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        return tuple(self._ready())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={list(self._ready())!r})"
