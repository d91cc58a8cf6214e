"""Database writes that outlast a database restart.

A live turn's writes (its events, its model, its finish) meet the database going away like any
other: PostgreSQL restarting, a connection cut, SQLite locked for longer than its busy timeout.
Those errors are transient: the write is tried again, with backoff, on a new connection, for up
to ``TURNSCOPE_DB_RETRY_SECONDS`` (120 by default), while the turn's source waits (a provider's
response in its socket's buffers, a replay's recording in memory, a proxied response in the
capture log). Past that the error is raised and the caller's fallback takes over (the capture
log's recording, for what was captured).

A failed write is tried whole again: each is one transaction, rolled back when its connection
fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.db.utils import InterfaceError, OperationalError

log = logging.getLogger("turnscope.live")

TRANSIENT = (OperationalError, InterfaceError)  # connection lost, restarting, locked
FIRST_WAIT = 0.25  # seconds before the first retry; doubled each time, up to MAX_WAIT
MAX_WAIT = 5.0

T = TypeVar("T")


def limit() -> float:
    """Seconds a write is retried for before its error is raised."""
    return max(0.0, float(getattr(settings, "TURNSCOPE_DB_RETRY_SECONDS", 120)))


async def retrying(call: Callable[..., Awaitable[T]], *args: Any, what: str = "a write") -> T:
    """``await call(*args)``, tried again while it fails for a transient reason."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit()
    wait = FIRST_WAIT
    while True:
        try:
            return await call(*args)
        except TRANSIENT as exc:
            if loop.time() + wait > deadline:
                raise
            log.warning("%s waits for the database (%s: %s); retrying in %.2f s", what,
                        type(exc).__name__, str(exc).strip().splitlines()[0][:200] if str(exc)
                        else "", wait)
        # the broken connection goes, in the thread that holds it (the database thread)
        await sync_to_async(close_old_connections)()
        await asyncio.sleep(wait)
        wait = min(wait * 2, MAX_WAIT)
