"""A live turn's provider responses go through the capture log, as proxied exchanges do.

Each response a live call receives (``live.calls``: the first, then each ``pause_turn``
continuation) is an exchange of the capture log (``live.capture``, kind ``live``): its request
body, then each chunk of the body as it arrives, committed before the turn runner reads it, then
how it ended. The exchange is bound to the agent turn (``RecordedExchange``) before its request
is sent: the first in the transaction that opens the turn, a continuation's just before it goes.
A live replay's agent turn plays each recorded response the same way (``live.live_replay``, kind
``replay``): its events in the log, one by one at the recorded pace, before the runner reads them.

While the runner of this process records the turn, the exchange is *held* here and *taken* in
the log (its taker is this process): the recording of the log (``proxy.capture``'s hub, or a
recorder process beside it, ``proxy.recorders``) leaves it alone. When the turn is finished,
the exchange is marked recorded and its bytes go. When the process dies first (kill -9, a
crash, a stop that could not record the interruption), the exchange is still in the log: the
next start takes it over like a proxied one and records it into the same turn, every byte
received kept (``proxy.catchup``; the turn interrupted where the provider's response was not
whole). When the runner gives up (the database stayed away past its retries), the exchange is
released to that same recording.

A log that cannot be written (disk full) never stops the call: the turn goes on without it.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async

from conversations.models import Turn
from guards import redaction
from live import capture, instances, transient
from live.models import RecordedExchange

log = logging.getLogger("turnscope.live")

_off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


def new_id() -> str:
    return str(uuid.uuid4())


def _bind(xid: str, turn: Turn) -> None:
    """A continuation's exchange: bound to the turn, after the events it holds so far."""
    last = (Turn.objects.filter(pk=turn.pk).values_list("conversation__next_seq", flat=True)
            .get()) - 1
    RecordedExchange.objects.create(id=xid, turn=turn, base_seq=last, prime_seq=last)


def _finished(xids: list[str], turn_id: Any) -> bool:
    """The turn was finished by its runner: its exchanges are done (False: it streams still,
    the log's recording finishes it)."""
    if Turn.objects.filter(pk=turn_id, status=Turn.Status.STREAMING).exists():
        return False
    RecordedExchange.objects.filter(pk__in=xids).update(done=True)
    return True


class CallCapture:
    """The capture of one live turn's responses (one at a time)."""

    def __init__(self, turn: Turn, conversation_id: Any, user_id: Any, first: str,
                 kind: str = "live") -> None:
        assert kind in capture.RUNNER_KINDS
        self.turn = turn
        self.kind = kind
        self.meta_base = {"user": user_id, "conversation": str(conversation_id),
                          "endpoint": kind, "turn": str(turn.pk)}
        self.first = first  # bound to the turn as it opened
        self.xids: list[str] = []
        self.log = capture.get_log()
        self.current: str | None = None
        self._n = 0
        self._broken = False

    async def open(self, wire: str, path: str, target: str, body: bytes,
                   api_version: str | None, served_by: str | None) -> None:
        """A response is about to be asked for (``wire``: the provider whose format it is)."""
        xid = self.first if not self.xids else new_id()
        if self.xids:
            await transient.retrying(sync_to_async(_bind), xid, self.turn,
                                     what=f"turn {self.turn.pk}")
        self.xids.append(xid)
        self.current, self._n = xid, 0
        capture.hold(xid)  # before it is in the log: the log's recording never sees it free
        meta = {**self.meta_base, "provider": wire, "path": path,
                "url": redaction.redact_text(target), "api_version": api_version,
                "served_by": served_by}
        try:
            await self.log.open(self.kind, meta, body, instance=instances.owner(),
                                exchange_id=xid, taker=instances.owner())
        except capture.CaptureError:
            self._broken = True

    async def respond(self, status: int) -> None:
        # The body is kept as decoded (no content encoding): what the runner's parser reads.
        await self._write(self.log.respond, status, "")

    async def chunk(self, data: bytes) -> None:
        """A piece of the body as it arrived: in the log before the runner reads it."""
        n = self._n
        self._n += 1
        await self._write(self.log.append, n, data)

    async def end(self, state: str, failure: tuple[str, str] | None = None) -> None:
        """``complete``, ``cut`` (the provider broke off), ``gone`` (the call was stopped) or
        ``failed`` (no response: ``failure`` is its code and message)."""
        await self._write(self.log.end, state, failure)
        self.current = None

    async def _write(self, op: Any, *args: Any) -> None:
        if self._broken or self.current is None:
            return
        try:
            await op(self.current, *args)
        except capture.CaptureError:  # logged by the writer; the call goes on
            self._broken = True

    async def recorded(self) -> None:
        """The runner is done with the turn: its exchanges are recorded, or (the turn streams
        still) left to the log's recording."""
        xids, self.xids = self.xids, []
        if not xids:
            return
        try:
            done = await transient.retrying(sync_to_async(_finished), xids, self.turn.pk,
                                            what=f"turn {self.turn.pk}")
        except Exception:
            log.warning("turn %s: left to the capture log's recording", self.turn.pk,
                        exc_info=True)
            done = False
        if done:
            for xid in xids:
                try:
                    await _off_loop(capture.mark_recorded, xid, self.turn.pk)
                except capture.CaptureError:
                    log.warning("capture: exchange %s stays in the log", xid)
        else:  # the log's recording, in whichever process, takes them from here
            try:
                await _off_loop(capture.untake, instances.owner(), *xids)
            except capture.CaptureError:
                log.warning("capture: exchanges %s stay taken until this process is gone", xids)
        capture.release(*xids)
