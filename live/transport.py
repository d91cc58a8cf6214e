"""Daphne's per-frame send path, made cheap: the live fan-out sends one frame per viewer.

Daphne's sockets send what they are given at once, as asyncio's own transports do.

Twisted buffers every write and registers the socket with the selector, sends on a later turn of
the loop, then unregisters it: two ``epoll_ctl`` calls, a selector wakeup and a stack of logging
wrappers for every websocket frame. With many viewers that was most of the server's CPU on the
live path (``bench/live.py``). Here, when nothing is buffered, the bytes go straight to the
socket; whatever the kernel does not take, and everything written while something is still
buffered, goes down Twisted's own path, so ordering, back-pressure, producers and disconnects
stay Twisted's. TLS connections are left alone (their bytes pass through the TLS layer first).

Autobahn also formats the arguments of a debug log call for every frame it sends, whether or
not debug logging is on, and colours them with ``click`` when click is importable (it comes
with the dev tools): a tenth of the event loop's time in ``bench/live.py``. Nothing here shows
autobahn's colours, so they are switched off.

Both patch upstream internals: ``tests/live/test_transport.py`` pins the code they were written
against (Twisted and autobahn 26.10, bounded in pyproject.toml) and fails when it changes.
"""

from __future__ import annotations

from typing import Any

import autobahn.util
from twisted.internet import tcp

_buffered_write = tcp.Connection.write


def _write(self: Any, data: bytes) -> None:
    if (
        type(data) is bytes
        and data
        and not self.TLS
        and self.connected
        and not self.disconnecting
        and not self._writeDisconnected
        and not self._tempDataLen
        and self.offset == len(self.dataBuffer)
    ):
        sent = self.writeSomeData(data)  # an int, or an exception for a lost connection
        if isinstance(sent, int) and sent >= 0:
            if sent == len(data):
                return
            data = data[sent:]
        # A lost connection: the buffered path finds it on its next write and disconnects.
    _buffered_write(self, data)


def send_immediately() -> None:
    """Install the immediate send on Twisted's TCP connections (idempotent), and plain
    autobahn log arguments."""
    tcp.Connection.write = _write
    autobahn.util._HAS_CLICK = False
