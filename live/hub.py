"""One channel-layer subscription per process and conversation, fanned out to local sockets.

Subscribing every websocket to the conversation's group makes the layer carry each message
once per viewer (and, on Redis, once per viewer over the network). Here each process reads a
group once, on one channel, and hands every message to its local consumers in order. A
consumer that cannot keep up slows this reader; the layer then drops for the whole process, and
the browsers see the gap in the seqs and resync, as they would from any other loss.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from channels.layers import get_channel_layer

log = logging.getLogger("turnscope.live")

REFRESH_EVERY = 3600.0  # seconds
RETRY_EVERY = 1.0  # seconds between tries to reach a layer that is down


class Hub:
    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.members: dict[str, set[Any]] = {}
        self.readers: dict[str, tuple[str, asyncio.Task[None]]] = {}
        self._lock = asyncio.Lock()
        self._refresher: asyncio.Task[None] | None = None

    async def join(self, group: str, consumer: Any) -> None:
        async with self._lock:
            if self._refresher is None:
                self._refresher = asyncio.ensure_future(self._refresh())
            self.members.setdefault(group, set()).add(consumer)
            if group not in self.readers:
                channel = await self.layer.new_channel()
                joined = await self._subscribe(group, channel)
                task = asyncio.ensure_future(self._read(group, channel, joined))
                self.readers[group] = (channel, task)

    async def _subscribe(self, group: str, channel: str) -> bool:
        """Add ``channel`` to ``group``; False if the layer is down (the reader tries again:
        a viewer connects, and resyncs from the store, whether Redis is up or not)."""
        try:
            await self.layer.group_add(group, channel)
        except Exception:
            log.warning("live hub: could not subscribe to %s (retrying)", group, exc_info=True)
            return False
        return True

    async def leave(self, group: str, consumer: Any) -> None:
        async with self._lock:
            members = self.members.get(group)
            if members is None:
                return
            members.discard(consumer)
            if members:
                return
            del self.members[group]
            channel, task = self.readers.pop(group)
            task.cancel()
            try:
                await self.layer.group_discard(group, channel)
            except Exception:  # the layer is down: the membership expires there on its own
                log.warning("live hub: could not leave %s", group, exc_info=True)

    async def _refresh(self) -> None:
        """Layers forget group members after ``group_expiry`` (a day by default); a page may
        stay open longer. Joining again renews the membership."""
        while True:
            await asyncio.sleep(REFRESH_EVERY)
            for group, (channel, _task) in list(self.readers.items()):
                try:
                    await self.layer.group_add(group, channel)
                except Exception:
                    log.warning("live hub: could not renew %s", group, exc_info=True)

    async def _read(self, group: str, channel: str, joined: bool = True) -> None:
        while True:
            if not joined:
                await asyncio.sleep(RETRY_EVERY)
                joined = await self._subscribe(group, channel)
                continue
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # a layer hiccup (e.g. Redis restarting): retry, viewers resync
                log.warning("live hub: receive on %s failed", group, exc_info=True)
                # A restarted Redis has forgotten the group: join it again before reading on.
                joined = False
                continue
            for consumer in list(self.members.get(group, ())):
                try:
                    await consumer.live_message(message)
                except Exception:
                    log.debug("live hub: a viewer of %s went away", group, exc_info=True)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Hub]] = (
    weakref.WeakKeyDictionary()
)


def hub(layer: Any = None) -> Hub:
    """This event loop's hub for ``layer`` (the default channel layer if None)."""
    layer = layer or get_channel_layer()
    per_loop = _hubs.setdefault(asyncio.get_running_loop(), {})
    if id(layer) not in per_loop:
        per_loop[id(layer)] = Hub(layer)
    return per_loop[id(layer)]
