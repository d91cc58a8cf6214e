"""A driven turn's sign of life: beats while its runner streams it (so no reaper takes it), and
the Stop asked for in another process, read between beats."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.core.cache import caches
from django.db import close_old_connections

from conversations import streaming
from live import recovery, tasks, transient, turn_writes
from live.loop_io import db, to_cache

log = logging.getLogger("turnscope.live")


class Heartbeat:
    """The heartbeat of the turn ``turn_id``; ``start`` it once the turn is open."""

    def __init__(self, turn_id: Any) -> None:
        self.turn_id = turn_id
        # The beating task, and what keeps one of its beats from landing after the finish
        # (which deletes the turn's heartbeat): a beat writes under the lock.
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def beat(self, *, in_database: bool = True) -> None:
        """A sign of life where every process sees it (the database: a reaper in another
        process must not take this turn), and in the cache (the cheap look)."""
        info = turn_writes.beat_info()
        if in_database:
            await db(recovery.beat)(self.turn_id, info)
        await to_cache(streaming.beat, self.turn_id, info)

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self._beating())
        return self._task

    async def _beating(self) -> None:
        while True:
            await asyncio.sleep(streaming.HEARTBEAT_EVERY)
            async with self._lock:
                try:
                    await self.beat()
                except transient.TRANSIENT as exc:  # the database is away: beat again later
                    log.warning("turn %s: could not beat (%s)", self.turn_id,
                                type(exc).__name__)
                    await db(close_old_connections)()
            # A Stop asked for in another process (a live replay's, or a live call's) is a
            # flag in the cache: the task that drives the turn here is cancelled.
            if await db(caches["default"].get)(tasks.stop_key(self.turn_id)):
                task = tasks.driving(self.turn_id)
                if task is not None:
                    task.cancel()
                return

    async def stop(self) -> None:
        """No beat after this returns: one being written lands first (a cancelled await of a
        database call would not stop its thread, and its row would outlive the finish). The
        task is cancelled while this holds the lock, so it is asleep or waiting for it."""
        async with self._lock:
            if self._task is not None:
                self._task.cancel()
