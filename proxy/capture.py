"""Capture first, record second: the forwarder's side of the capture log, and who records what.

The forwarder opens an exchange in the capture log (``live.capture``) for each recorded request
and appends each response chunk there before the app gets it (``Capture``); how the response
ended goes there too. Recording reads from the log, never the other way round: the forwarder
never waits for it.

The ``Hub`` (one per event loop) decides who records: at most ``TURNSCOPE_RECORDING_SLOTS``
exchanges at a time. An exchange that gets a slot while it is being forwarded is recorded live
(``proxy.recorder``: the conversation page shows it streaming), its chunks handed over in memory
up to a small window (``WINDOW`` bytes) and read back from the log past it; every other one —
one that waited for a slot, one whose live recording broke off (the database went away), one a
stopped process left in the log — is recorded from the log once it has ended
(``proxy.catchup``). So memory holds the slots' windows, whatever the load; the backlog is the
log's. Where recorder processes run beside the server (``proxy.recorders``), they record from
the log and the hub only live: what it records live it *takes* as it opens the exchange, so no
recorder takes it too.

A live recording holds its slot for as long as its stream lasts (seconds, under load), a
recording from the log for one transaction. So at most half the slots record live, and while
exchanges wait in the log a new one does not jump the queue with a live recording: the oldest
are recorded first. (With every slot live, 50 busy clients got about 2 recordings a second and
the backlog grew for as long as the load lasted: ``bench.capture``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from guards import redaction
from live import capture, instances, tasks
from proxy import recorders
from proxy.endpoints import Endpoint

log = logging.getLogger("turnscope.proxy")

WINDOW = 256 * 1024  # bytes of one live recording's chunks handed over in memory at most

_off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


def slots() -> int:
    return max(1, int(getattr(settings, "TURNSCOPE_RECORDING_SLOTS", 16)))


def live_slots() -> int:
    """How many of the slots may record live at once (the rest record from the log)."""
    return max(1, slots() // 2)


@dataclass
class Feed:
    """What the forwarder tells the recording of one exchange in this process: the response
    as it starts, chunks (while a live recording reads them, up to ``WINDOW``), and the end."""

    xid: str
    status: int = 0
    encoding: str = ""
    failure: tuple[str, str] | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    total: int | None = None  # chunks in all, once ended
    offered: int = 0  # chunks forwarded (so committed to the log) so far
    attached: bool = False  # a live recording reads the memory window
    memory: deque[tuple[int, bytes]] = field(default_factory=deque)
    held: int = 0  # bytes in ``memory``

    def offer(self, n: int, chunk: bytes) -> None:
        self.offered = max(self.offered, n + 1)
        if self.attached and self.held + len(chunk) <= WINDOW:
            self.memory.append((n, chunk))
            self.held += len(chunk)
        self.wake.set()

    def take(self, n: int) -> bytes | None:
        """Chunk ``n`` from the memory window, if it is there (older ones are dropped)."""
        while self.memory and self.memory[0][0] < n:
            self.held -= len(self.memory.popleft()[1])
        if self.memory and self.memory[0][0] == n:
            chunk = self.memory.popleft()[1]
            self.held -= len(chunk)
            return chunk
        return None


class Capture:
    """The forwarder's handle on one exchange: never raises, and waits only for the log."""

    def __init__(self, hub: Hub, xid: str, opened: asyncio.Future[None]) -> None:
        self.hub = hub
        self.xid = xid
        self.feed = hub.feed(xid)
        self._n = 0
        self._broken = False
        self._done = False
        _quiet(opened, self)

    @property
    def started(self) -> bool:
        return self.feed.started.is_set()

    def response(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        encoding = ""
        for name, value in headers:
            if name.lower() == b"content-encoding":
                encoding = value.decode("latin-1").strip().lower()
        self.feed.status, self.feed.encoding = status, encoding
        _quiet(self.hub.log.respond(self.xid, status, encoding), self)
        self.feed.started.set()
        self.feed.wake.set()

    async def append(self, chunk: bytes) -> None:
        """Chunk the app is about to get: in the log first (committed when this returns),
        unless ``TURNSCOPE_CAPTURE_WAIT`` is off (then only queued, in order: a process killed
        may have forwarded the last milliseconds' chunks without their commit)."""
        n = self._n
        self._n += 1
        if not self._broken:
            committed = self.hub.log.append(self.xid, n, chunk)
            if not self.hub.wait:
                _quiet(committed, self)
            else:
                try:
                    await committed
                except capture.CaptureError:
                    self._broken = True  # logged by the writer; the app's stream goes on
        self.feed.offer(n, chunk)

    def end(self, state: str) -> None:
        """The response is over: ``complete`` (the app got it all), ``cut`` (the provider
        broke off) or ``gone`` (the app went away)."""
        if self._done:
            return
        self._done = True
        self.feed.total = self.feed.offered  # what went to the app (a cancelled append did not)
        self._ended(self.hub.log.end(self.xid, state, forwarded=self.feed.offered))

    def failed(self, status: int, code: str, message: str) -> None:
        """No response: the upstream was unreachable or timed out (``status`` 502 / 504), or
        the request could not be sent as the app sent it (400)."""
        if self._done:
            return
        self.feed.status, self.feed.failure = status, (code, message)
        self._done = True
        self.feed.total = 0
        self._ended(self.hub.log.end(self.xid, "failed", (code, message), status))

    def _ended(self, committed: asyncio.Future[None]) -> None:
        _quiet(committed, self)
        self.feed.started.set()
        self.feed.ended.set()
        self.feed.wake.set()
        # Recorded from the log only once its end is committed: a recording of it from then
        # on reads the response as it ended (the end drops a chunk committed but never
        # forwarded), never a log that is still being written.
        committed.add_done_callback(lambda _: self.hub.forwarded(self.xid))


def _quiet(future: asyncio.Future[None], capture_: Capture) -> None:
    """A log write nobody awaits: a failure is logged by the writer, and noted here."""

    def done(f: asyncio.Future[None]) -> None:
        if not f.cancelled() and f.exception() is not None:
            capture_._broken = True

    future.add_done_callback(done)


def _quiet_write(future: asyncio.Future[None]) -> None:
    """A log write nobody awaits (its failure is logged by the writer)."""
    future.add_done_callback(lambda f: f.cancelled() or f.exception())


@dataclass
class Known:
    """What the forwarder knew of an exchange it opened (spares the recording a lookup)."""

    user: Any
    endpoint: Endpoint
    body: bytes
    url: str
    api_version: str | None
    conversation: Any


class Hub:
    """One event loop's recordings of captured exchanges."""

    def __init__(self) -> None:
        self.log = capture.get_log()
        self.feeds: dict[str, Feed] = {}
        self.known: dict[str, Known] = {}
        self.busy: set[str] = set()  # being recorded here (live or from the log)
        self.live: set[str] = set()  # those of them recorded live
        self.backlog = False  # exchanges of this process wait in the log for a slot
        self.forwarding: set[str] = set()
        self.wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.instance = instances.owner()
        self.wait = bool(getattr(settings, "TURNSCOPE_CAPTURE_WAIT", True))

    @property
    def beside(self) -> bool:
        """Recorder processes beside this one take what it does not record live."""
        return recorders.running()

    def feed(self, xid: str) -> Feed:
        found = self.feeds.get(xid)
        if found is None:
            found = self.feeds[xid] = Feed(xid)
        return found

    def open(self, *, user: Any, endpoint: Endpoint, body: bytes, url: str,
             api_version: str | None, conversation: Any) -> Capture:
        """A recorded request is about to be forwarded: its exchange in the log, and a live
        recording if a slot is free."""
        url = redaction.redact_text(url)  # Gemini's ?key= never gets into the log
        meta = {"user": user.pk, "provider": endpoint.provider, "endpoint": endpoint.name,
                "path": endpoint.path, "url": url, "served_by": endpoint.served_by,
                "api_version": api_version,
                "conversation": str(conversation.pk) if conversation is not None else None}
        live = (not self.backlog and len(self.busy) < slots() and len(self.live) < live_slots()
                and not tasks.stopping())
        xid, opened = self.log.open_nowait("proxy", meta, body, instance=self.instance,
                                           taker=self.instance if live else None)
        self.forwarding.add(xid)
        handle = Capture(self, xid, opened)
        known = Known(user, endpoint, body, url, api_version, conversation)
        if live:
            self._start_live(xid, known, opened)
        else:
            self.known[xid] = known  # small: recorded from the log when a slot frees
        self._ensure_loop()
        return handle

    def forwarded(self, xid: str) -> None:
        self.forwarding.discard(xid)
        self.known.pop(xid, None)
        if xid not in self.busy:
            self.feeds.pop(xid, None)
        self.wake.set()

    def _start_live(self, xid: str, known: Known | None,
                    opened: asyncio.Future[None] | None) -> None:
        from proxy.recorder import Recorder

        self.busy.add(xid)
        self.live.add(xid)
        feed = self.feed(xid)
        feed.attached = True
        recorder = Recorder(self, xid, feed, known, opened)
        task = tasks.spawn(recorder.run(), name=f"proxy-{xid}")
        task.add_done_callback(lambda _: self._done(xid))

    def _start_from_log(self, exchange: capture.Exchange) -> None:
        from proxy import catchup

        self.busy.add(exchange.id)
        task = tasks.spawn(catchup.record(self.log, exchange),
                           name=f"proxy-log-{exchange.id}")
        task.add_done_callback(lambda _: self._done(exchange.id))

    def _done(self, xid: str) -> None:
        if xid in self.live and self.beside:
            # Taken as it opened: what its recording left unrecorded (it failed, the server
            # is stopping) is the recorders' to take (a recorded one stays recorded).
            _quiet_write(self.log.untake_nowait(self.instance, xid))
        self.busy.discard(xid)
        self.live.discard(xid)
        if xid not in self.forwarding:
            self.feeds.pop(xid, None)
        self.wake.set()

    def _ensure_loop(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._dispatch())
            self._task.set_name("capture-hub")
        self.wake.set()

    async def _dispatch(self) -> None:
        """Give each free slot the oldest exchange of this process still to record."""
        while True:
            # (not wait_for: on 3.11 it can swallow a cancel that lands as the wait ends)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self.wake.wait()
            self.wake.clear()
            try:
                await self.fill()
            except Exception:
                log.warning("capture: could not read the log", exc_info=True)

    async def fill(self) -> None:
        """The oldest exchanges of this process waiting in the log get the free slots (one
        still being forwarded only while a live slot is free: else it waits for its end).
        Nothing starts once the server stops: what is left is the next start's. With recorder
        processes beside this one, they record the log: this only notes whether it waits."""
        if tasks.stopping():
            return
        if self.beside:
            self.backlog = await _off_loop(self.log.untaken, self.instance)
            return
        while (free := slots() - len(self.busy)) > 0:
            skip = self.busy | capture.held()
            if len(self.live) >= live_slots():
                skip |= self.forwarding
            waiting = await _off_loop(functools.partial(
                self.log.pending, instance=self.instance, exclude=skip, limit=free))
            self.backlog = len(waiting) >= free  # maybe more behind these
            started = 0
            for exchange in waiting:
                if exchange.id in self.busy or exchange.id in capture.held():
                    continue
                if exchange.id in self.forwarding:
                    if len(self.live) >= live_slots():
                        continue
                    self._start_live(exchange.id, self.known.pop(exchange.id, None), None)
                else:
                    self._start_from_log(exchange)
                started += 1
            if not started:
                return

    def take_over(self, exchanges: list[capture.Exchange]) -> None:
        """Exchanges this process now owns (a gone process left them): recorded as slots
        free up."""
        if exchanges:
            self._ensure_loop()


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub() -> Hub:
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None or found.log is not capture.get_log():
        found = _hubs[loop] = Hub()
    return found
