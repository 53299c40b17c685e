"""Testing tools for adapter authors: a conformance kit and a loopback model server.

:func:`check_adapter` runs the conformance kit on an adapter — the checks
``peira adapters check module:Class`` runs — and returns a
:class:`ConformanceReport` (raising ``AssertionError`` on failure unless
``raise_on_failure=False``), so a third-party package can test its adapter
with one line::

    def test_conformance():
        peira.testing.check_adapter(MyAdapter())

:class:`~peira.testing.chat_server.ChatServer` is a Chat Completions server
on loopback (scripted answers and faults) for testing HTTP adapters without
a network.
"""

from ._conformance import Check, ConformanceReport, check_adapter, sample_requests
from .chat_server import ChatServer, FastChatServer, Reply

__all__ = [
    "ChatServer",
    "Check",
    "ConformanceReport",
    "FastChatServer",
    "Reply",
    "check_adapter",
    "sample_requests",
]
