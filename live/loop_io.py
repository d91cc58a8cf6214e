"""How code on the event loop (the live runner, a live replay, a turn's heartbeat) reaches the
database and the cache without blocking the loop."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache

from conversations import streaming


def db(fn: Any) -> Any:
    return sync_to_async(fn, thread_sensitive=True)


# Work that needs no database connection, in a pool thread: it never waits behind DB work.
off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


async def to_cache(fn: Any, *args: Any) -> bool:
    """A cache write off the event loop, unless the cache is this process's memory (then an
    inline call is cheaper than a thread hop). False if the cache failed: the turn goes on (the
    database is the truth; the tail has its fallback there, see ``TurnRunner._write_tail``)."""
    try:
        if isinstance(caches["default"], LocMemCache):
            fn(*args)
        else:
            await off_loop(fn, *args)
    except Exception:
        streaming.cache_failed(getattr(fn, "__name__", "write"))
        return False
    return True
