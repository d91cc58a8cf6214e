"""The turn runner: a provider stream -> adapter -> EventBuilder -> store, published as it goes.

One runner drives one agent turn, as an asyncio task in the server process (DB work through
``sync_to_async``). It is the only writer of its turn. For every part:

* text deltas are folded into the turn's *tail* and flushed on the leading edge: the first
  text of a burst goes out at once, and only what follows within ``coalesce`` seconds of it
  is gathered, into one delta at the window's end; the next text after that begins a new
  burst (so a viewer waits for the window only for what came inside one). The tail goes to
  the cache (``conversations.streaming``) first, then one ``delta`` message is published with
  the next per-turn ``delta_seq`` and ``rx``, when the oldest text in it reached the runner
  (what ``bench.live`` measures a viewer's wait from). A delta's text is what
  ``redaction.LiveText`` lets out: a credential split across deltas (the proxy's bytes are
  redacted a line at a time) is held back until it can be redacted whole, never shown in pieces;
* events the builder completes are committed: a block that closes the tail at once (tail cleared
  first, then the store) so a fragment rendered at any moment shows a block either in the tail
  or as an event, never both; other events (activity transitions, blocks that streamed no text)
  with the window's flush, in one transaction; either way one ``events`` message per window
  carries their contiguous seqs. Text never waits for that flush's store: a window that gathered
  text publishes it first, then stores, and its events go out with the next flush (the runners
  of a process share one database thread; behind their writes a delta waited 75-115 ms);
* the model is recorded once, as soon as the first response names it (before its text, so no
  delta waits for that write), and announced by the next flush, ahead of the text it produced;
* a turn's database work comes in as few transactions as it can: the user turn that prompts it
  and its start in one, the model with the events completed before it, the end with the last
  events.

A stream that ends without its terminal event leaves the turn interrupted: the builder commits
the partial text of open blocks as incomplete events with their citations marked incomplete.

A response is a plain iterable of parts (a recording: paced, at ``speed``) or an async iterable
(parts parsed while the bytes arrive from the network: unpaced, the network sets the pace, and
due flushes go out while the next part is awaited). A turn continued by a later request (the
recording proxy's ``pause_turn`` and tool-result rounds) is resumed rather than opened.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Iterable, Sequence
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.db import transaction

from conversations import provenance, store, streaming
from conversations.limits import turn_limits
from conversations.models import Conversation, Event, Turn
from conversations.rendering import live as live_text
from guards import redaction
from live import instances, protocol, publish, recovery, sources
from live.models import RecordedExchange, Recording
from streams import parts
from streams.bodies import ActivityBody, ErrorBody
from streams.builder import EventRecord
from streams.run import TurnStream

log = logging.getLogger("turnscope.live")

COALESCE_SECONDS = 0.05


def _db(fn: Any) -> Any:
    return sync_to_async(fn, thread_sensitive=True)


# Work that needs no database connection, in a pool thread: it never waits behind DB work.
_off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


async def _cache(fn: Any, *args: Any) -> bool:
    """A cache write off the event loop, unless the cache is this process's memory (then an
    inline call is cheaper than a thread hop). False if the cache failed: the turn goes on (the
    database is the truth; the tail has its fallback there, see ``TurnRunner._write_tail``)."""
    try:
        if isinstance(caches["default"], LocMemCache):
            fn(*args)
        else:
            await _off_loop(fn, *args)
    except Exception:
        streaming.cache_failed(getattr(fn, "__name__", "write"))
        return False
    return True


def _beat_info() -> dict[str, Any]:
    """Who runs the turn (asked each time: a worker may fork after import)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "instance": instances.current()}


def open_turns(
    conversation: Conversation,
    prompt: str | Sequence[EventRecord],
    recording: tuple[str, list[sources.WireResponse]] | None,
    agent_id: str | None = None,
    exchange: str | None = None,
) -> list[tuple[Turn, list[Event]]]:
    """The user turn holding ``prompt`` (when given: a text, or the user turn's events) and the
    streaming agent turn after it (``agent_id`` its agent), with the recording behind the agent
    turn and its first heartbeat: one transaction. Each turn comes with its events.
    ``exchange``: the captured exchange (``live.capture``) the turn records, bound to it in the
    same transaction (recording it again finds this turn)."""
    if isinstance(prompt, str):
        specs = [store.user_turn(redaction.redact_text(prompt))] if prompt else []
    else:
        specs = [store.NewTurn(Turn.Role.USER, redaction.redact_records(prompt))] if prompt else []
    specs.append(store.NewTurn(Turn.Role.AGENT, (), status=Turn.Status.STREAMING,
                               agent_id=agent_id))
    with transaction.atomic():
        opened = store.open_turns(conversation, specs)
        recovery.beat(opened[-1][0].pk, _beat_info())  # alive from its first moment
        if exchange is not None:
            RecordedExchange.objects.create(id=exchange, turn=opened[-1][0],
                                            base_seq=_last_seq(conversation))
        if recording:
            provider, responses = recording
            Recording.objects.create(
                turn=opened[-1][0], provider=provider,
                responses=orjson.dumps([r.as_dict() for r in responses]).decode(),
            )
    return opened


def _resume_turn(
    turn: Turn, before: Sequence[EventRecord], exchange: str | None = None
) -> tuple[list[Event], list[Iterable[parts.Part]]]:
    """Mark the finished agent ``turn`` streaming again and append ``before`` to it, in one
    transaction; returns those events and the part stream that rebuilds what it held.
    ``exchange``: as ``open_turns``'."""
    [stored] = sources.event_responses(turn)
    stored_parts = list(stored)  # read here, in the database thread
    with transaction.atomic():
        store.resume_turn(turn)
        recovery.beat(turn.pk, _beat_info())
        prime = _last_seq(turn.conversation)
        events = store.append_events(turn, redaction.redact_records(before))
        if exchange is not None:
            RecordedExchange.objects.create(id=exchange, turn=turn, prime_seq=prime,
                                            base_seq=events[-1].seq if events else prime)
    return events, [stored_parts]


def _write(
    turn: Turn,
    records: list[EventRecord],
    model: tuple[str, str] | None,
    finish: dict[str, Any] | None,
) -> list[Event]:
    """Append ``records``, record the ``model`` and ``finish`` the turn, whichever are given, in
    one transaction. The credential scan runs here, in the database thread, not on the loop."""
    records = redaction.redact_records(records)
    if model is None and finish is None:
        return store.append_events(turn, records)
    with transaction.atomic():
        events = store.append_events(turn, records)
        if model is not None:
            store.set_provenance(turn, *model)
        if finish is not None:
            store.finish_turn(turn, **finish)
            recovery.stop_beating(turn.pk)  # as the failure and the reaper do: in the same commit
    return events


_open_turns_db = _db(open_turns)
_resume_turn_db = _db(_resume_turn)
_write_db = _db(_write)


def _event_brief(event: Event) -> dict[str, Any]:
    brief: dict[str, Any] = {"id": str(event.id), "seq": event.seq, "kind": event.kind,
                             "incomplete": event.incomplete}
    body = event.typed_body
    if isinstance(body, ActivityBody):
        brief["activity"] = {"id": body.id, "name": body.name, "state": body.state,
                             "summary": body.summary}
    return brief


def _turn_message(turn: Turn, seq: int) -> dict[str, Any]:
    return {
        "type": "turn", "turn": str(turn.pk), "index": turn.index, "role": turn.role,
        "status": turn.status, "end_reason": turn.end_reason or None,
        "model": turn.model_provenance, "seq": seq,
    }


def _events_message(turn: Turn, events: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "events", "turn": str(turn.pk), "index": turn.index,
        "seq_from": events[0]["seq"], "seq_to": events[-1]["seq"], "events": events,
    }


def _opened_messages(
    opened: list[tuple[Turn, list[Event]]], last_seq: int
) -> list[dict[str, Any]]:
    """What announces freshly opened turns, ``last_seq`` being the conversation's last event
    seq after them: each turn (its seq covers what came before it), then its events."""
    seq = last_seq - sum(len(events) for _, events in opened)
    out: list[dict[str, Any]] = []
    for turn, events in opened:
        out.append(_turn_message(turn, seq))
        if events:
            out.append(_events_message(turn, [_event_brief(e) for e in events]))
            seq = events[-1].seq
    return out


async def _steps(
    steps: Iterable[tuple[parts.Part | None, list[EventRecord]]],
) -> AsyncIterator[tuple[parts.Part | None, list[EventRecord]]]:
    """A recording's steps (``TurnStream.response``) under the same ``async for`` as a network
    source's (``TurnStream.aresponse``): one loop drives both."""
    for step in steps:
        yield step


async def _next(iterator: AsyncIterator[parts.Part]) -> tuple[bool, parts.Part | None]:
    """The next part, or ``(False, None)`` at the end (a StopAsyncIteration cannot be carried
    by the task that awaits it on time)."""
    try:
        return True, await anext(iterator)
    except StopAsyncIteration:
        return False, None


def _raise_if_cancelled() -> None:
    """A cancel that landed while a database call ran in asgiref's ``sync_to_async`` can be
    swallowed there (it waits for the thread and returns its result); the request is still
    counted on the task (``Task.cancelling``), so the turn stops here instead of running on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _last_seq(conversation: Conversation) -> int:
    return Conversation.objects.values_list("next_seq", flat=True).get(pk=conversation.pk) - 1


class TurnRunner:
    """Drive one agent turn of ``conversation`` from a part source."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        speed: float = 1.0,
        coalesce: float = COALESCE_SECONDS,
        layer: Any = None,
        clock: Any = None,
        exchange: str | None = None,
        leave_on_cancel: bool = False,
    ) -> None:
        self.conversation = conversation
        # The captured exchange this turn records (bound to the turn as it opens), and whether
        # a cancel (a server stopping) leaves the turn streaming for the capture log's
        # recording to complete, instead of ending it interrupted here.
        self.exchange = exchange
        self.leave_on_cancel = leave_on_cancel
        # The coalescing window's clock: the event loop's, unless a test gives its own.
        self._clock = clock
        self.speed = speed if speed and speed > 0 else float("inf")
        self.coalesce = coalesce
        self.layer = layer
        self.turn: Turn | None = None
        self.stream = TurnStream(on_unreadable="cut", limits=turn_limits())
        self.builder = self.stream.builder
        self.last_seq = 0
        # tail state
        self.delta_seq = 0
        self.tail_key: str | None = None
        self.tail_kind = ""
        self.tail_text: list[str] = []
        self.tail_cites: list[dict[str, str]] = []
        self.block_seq: int | None = None
        # A message tail's finished markdown blocks, rendered once as they finish (the delta
        # that finishes one carries its HTML: the live view shows only the rest raw).
        self._splitter: live_text.BlockSplitter | None = None
        # Whitespace the message run ended with before this tail (a text block that ended
        # "minutes. " renders as "minutes.": the next block's text needs the space back when
        # the live view joins it to that paragraph).
        self._run_end = ""
        self.tail_lead = ""
        self.pending: list[str] = []
        self.pending_cites: list[dict[str, str]] = []
        self.pending_records: list[EventRecord] = []  # completed, stored at the next flush
        self.pending_events: list[dict[str, Any]] = []  # committed, not yet published
        self._model_unannounced = False  # recorded, not yet in a published turn message
        self.flush_at: float | None = None
        self.window_end = float("-inf")  # text queued before this waits for the window
        self._opens_window = False  # the pending text came outside a window: a burst begins
        self.pending_rx: float | None = None  # when the oldest pending text arrived (ms)
        self._shown = redaction.LiveText()  # the tail's text as viewers may see it
        self._held_rx: float | None = None  # when the text ``_shown`` holds back arrived
        self._block_ends = False  # the flush under way is the tail block's last
        self._due = 0.0
        self._provenance_done = False
        self._tail_in_db = False  # the cache failed: the tail is (also) in the database
        # The heartbeat task, and what keeps one of its beats from landing after the finish
        # (which deletes the turn's heartbeat): a beat writes under the lock.
        self._beat_task: asyncio.Task[None] | None = None
        self._beat_lock = asyncio.Lock()

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    # -- entry points ------------------------------------------------------------------------

    async def run(
        self,
        responses: Iterable[Iterable[parts.Part] | AsyncIterable[parts.Part]],
        *,
        recording: tuple[str, list[sources.WireResponse]] | None = None,
        prompt: str | Sequence[EventRecord] = "",
        resume: Turn | None = None,
        before: Sequence[EventRecord] = (),
        opened: list[tuple[Turn, list[Event]]] | None = None,
    ) -> Turn:
        """Stream ``responses`` as a new agent turn (after a user turn holding ``prompt``, when
        given), or as the continuation of the agent turn ``resume`` (``before``: events that
        come ahead of its next response, e.g. the results of a tool round). ``opened``: the
        turns were opened already (``open_turns``; a live call answers with the new turn's id
        before it streams), the runner announces them and drives the last one.

        ``responses`` is read one response at a time, after the one before it has been
        streamed: an iterable that decides on the next response then (a ``pause_turn``
        continuation) is fine."""
        loop = asyncio.get_running_loop()
        self._due = loop.time()
        if resume is not None:
            await self._resume(resume, before)
        elif opened is not None:
            await self._announce(opened)
        else:
            await self._start(prompt, recording)
        beat = self._beat_task = asyncio.create_task(self._heartbeat())
        stream = self.stream
        me = asyncio.current_task()
        assert self.turn is not None
        if me is not None:
            _driving[str(self.turn.pk)] = me
        try:
            for response in responses:
                if stream.done:  # cut or failed: nothing continues it
                    break
                paced = not isinstance(response, AsyncIterable)
                steps = (_steps(stream.response(response)) if paced
                         else stream.aresponse(self._on_time(response)))
                async for part, records in steps:
                    if part is None:  # the response ended
                        await self._flush()
                        await self._commit(records, closes_tail=True)
                    else:
                        if paced:
                            await self._wait(sources.pace(part))
                        await self._handle(part, records)
                    _raise_if_cancelled()
            _raise_if_cancelled()
            await self._finish(stream.outcome.status, stream.outcome.end_reason)
        except asyncio.CancelledError:
            if not self.leave_on_cancel:
                await asyncio.shield(self._abort())
            raise
        finally:
            beat.cancel()
            if _driving.get(str(self.turn.pk)) is me:
                del _driving[str(self.turn.pk)]
        return self.turn

    # -- steps -------------------------------------------------------------------------------

    async def _start(
        self,
        prompt: str | Sequence[EventRecord],
        recording: tuple[str, list[sources.WireResponse]] | None,
    ) -> None:
        await self._announce(await _open_turns_db(self.conversation, prompt, recording, None,
                                                  self.exchange))

    async def _announce(self, opened: list[tuple[Turn, list[Event]]]) -> None:
        self.turn = opened[-1][0]
        self.last_seq = self.conversation.next_seq - 1  # read under the row lock
        await self._write_tail()
        await self._beat(in_database=False)
        await publish.publish_all(self.conversation.pk,
                                  _opened_messages(opened, self.last_seq), self.layer)

    async def _resume(self, turn: Turn, before: Sequence[EventRecord]) -> None:
        events, stored = await _resume_turn_db(turn, before, self.exchange)
        self.turn = turn
        self.stream.resume(stored[0], turn.responses_list)
        self._provenance_done = bool(turn.provider)  # recorded once, by the first response
        self.last_seq = events[-1].seq if events else await _db(_last_seq)(self.conversation)
        await self._write_tail()
        await self._beat(in_database=False)
        out = [_turn_message(turn, self.last_seq - len(events))]
        if events:
            out.append(_events_message(turn, [_event_brief(e) for e in events]))
        await publish.publish_all(self.conversation.pk, out, self.layer)

    async def settle(self) -> None:
        """Store and publish what the stream completed so far now, not at the window's end
        (e.g. before the next request is built from the stored turn)."""
        await self._flush()
        if self.pending_events or self._model_unannounced:  # stored after the text went out
            await self._flush()

    async def _on_time(self, source: AsyncIterable[parts.Part]) -> AsyncIterator[parts.Part]:
        """The parts of a network source as they arrive; a flush that falls due while the next
        part is awaited goes out on time (the text streamed so far reaches the viewers)."""
        iterator = aiter(source)
        while True:
            if self.flush_at is None:
                more, part = await _next(iterator)
            else:
                pending = asyncio.ensure_future(_next(iterator))
                try:
                    while not pending.done():
                        delay = None if self.flush_at is None else self.flush_at - self._now()
                        if delay is not None and delay <= 0:
                            await self._flush()
                            continue
                        await asyncio.wait({pending}, timeout=delay)
                except BaseException:
                    pending.cancel()
                    raise
                more, part = pending.result()
            if not more:
                return
            yield part

    async def _wait(self, seconds: float) -> None:
        """Advance the paced clock by ``seconds / speed``, flushing deltas on time meanwhile."""
        loop = asyncio.get_running_loop()
        if self.speed != float("inf"):
            self._due = max(self._due, loop.time() - 0.25) + seconds / self.speed
        while True:
            now = loop.time()
            if self.flush_at is not None and self.flush_at <= max(now, self._due):
                if self.flush_at > now:
                    await asyncio.sleep(self.flush_at - now)
                await self._flush()
                continue
            if self._due - now > 0.001:
                await asyncio.sleep(self._due - now)
            return

    async def _handle(self, part: parts.Part, records: list[EventRecord]) -> None:
        """What ``part`` changes on the page; ``records`` are the events feeding it completed."""
        if isinstance(part, parts.BlockStart):
            await self._flush_text()
            if not part.redacted:
                await self._open_tail(part.key, part.kind)
        if isinstance(part, parts.ResponseStart) and not self._provenance_done:
            await self._provenance()
        elif isinstance(part, parts.TextDelta) and part.text:
            if part.key != self.tail_key:
                await self._flush_text()
                await self._open_tail(part.key, "message")
            self._queue(part.text, None)
        elif isinstance(part, parts.Citation) and part.key == self.tail_key:
            self._queue("", {"url": part.url, "title": part.title})
        closes = isinstance(part, parts.ResponseEnd | parts.StreamError) or (
            isinstance(part, parts.BlockEnd) and part.key == self.tail_key
        )
        if closes:
            await self._flush_text()  # the block's last text goes out under its own seqs
        if records or closes:
            await self._commit(records, closes_tail=closes)
        if self.flush_at is not None and self._now() >= self.flush_at:
            await self._flush()

    async def _flush_text(self) -> None:
        """Flush now if text is waiting (it belongs to the block about to change, so what the
        tail held back goes out too); committed events alone can wait for the window and ride
        along with the next delta."""
        if self.pending or self.pending_cites or self._shown.holding:
            self._block_ends = True
            try:
                await self._flush()
            finally:
                self._block_ends = False

    def _queue(self, text: str, cite: dict[str, str] | None) -> None:
        if text:
            self.pending.append(text)
        if cite:
            self.pending_cites.append(cite)
        if self.pending_rx is None:
            self.pending_rx = protocol.now_ts()
        # Leading edge: outside a window the text is due now (``_handle`` flushes it before
        # the next part is read); inside one it waits for the window's end.
        now = self._now()
        due = max(now, self.window_end)
        if due == now and not self._opens_window:
            self._opens_window = True
        if self.flush_at is None or due < self.flush_at:
            self.flush_at = due

    async def _open_tail(self, key: str, kind: str) -> None:
        self.tail_key, self.tail_kind = key, kind
        self.tail_text, self.tail_cites, self.block_seq = [], [], None
        message = kind == "message"
        self._splitter = live_text.BlockSplitter() if message else None
        self.tail_lead = " " if message and self._run_end in (" ", "\t") else ""
        if not message:
            self._run_end = ""
        self._shown = redaction.LiveText()

    async def _write_tail(self) -> None:
        """The tail where every process reads it: the cache, or while the cache fails, the
        database (``StreamingTail``), until the cache takes a whole tail again."""
        assert self.turn is not None
        doc = self._tail_doc()
        if await _cache(streaming.write_tail, self.turn.pk, doc):
            if self._tail_in_db:
                self._tail_in_db = False
                await _db(streaming.forget_db_tail)(self.turn.pk)
            return
        self._tail_in_db = True
        await _db(streaming.keep_tail_in_db)(self.turn.pk, doc)

    def _tail_doc(self) -> dict[str, Any]:
        return {
            "key": self.tail_key,
            "kind": self.tail_kind or None,
            "text": "".join(self.tail_text),
            "delta_seq": self.delta_seq,
            "block_seq": self.block_seq,
            "citations": list(self.tail_cites),
            "lead": self.tail_lead,
        }

    async def _flush(self, then: dict[str, Any] | None = None) -> None:
        """Store the events the window completed (one transaction) and publish what it
        gathered as one frame: the committed events (one message), the model when it was just
        recorded (a ``turn`` message), the text deltas (one message), then ``then``. When the
        window gathered text, the frame goes out before the store, and what the store commits
        is announced by the next flush (due a window from now)."""
        self.flush_at = None
        assert self.turn is not None
        text_waits = bool(self.pending or self.pending_cites or self._shown.holding)
        if not text_waits or then is not None:
            await self._store()
        out: list[dict[str, Any]] = []
        if self.pending_events:
            events, self.pending_events = self.pending_events, []
            out.append(_events_message(self.turn, events))
        if self._model_unannounced:
            self._model_unannounced = False
            if then is None:  # the model, ahead of the text it produced
                out.append(_turn_message(self.turn, self.last_seq))
        if self.pending or self.pending_cites or self._shown.holding:
            delta = await self._delta()
            if delta is not None:
                out.append(delta)
        if then is not None:
            out.append(then)
        await publish.publish_all(self.conversation.pk, out, self.layer)
        if self.pending_records:  # text went first: now the store
            await self._store()
            if self.flush_at is None:
                self.flush_at = self._now() + self.coalesce

    async def _delta(self) -> dict[str, Any] | None:
        """The text gathered since the last delta, as it may be shown (``LiveText``: a
        credential split across deltas never goes out in pieces), or None when all of it is
        held back for now."""
        assert self.turn is not None
        cites = self.pending_cites
        text = self._shown.take("".join(self.pending), final=self._block_ends)
        self.pending, self.pending_cites = [], []
        # Text held back keeps the time it reached the runner: the next delta is that old.
        known = [x for x in (self.pending_rx, self._held_rx) if x is not None]
        rx = min(known) if known else None
        self.pending_rx = None
        self._held_rx = rx if self._shown.holding else None
        if not text and not cites:
            return None
        if self._opens_window:  # a burst's first text: what follows waits for the window
            self._opens_window = False
            self.window_end = self._now() + self.coalesce
        self.delta_seq += 1
        if self.block_seq is None:
            self.block_seq = self.delta_seq
        self.tail_text.append(text)
        self.tail_cites.extend(cites)
        finished = self._splitter.feed(text) if self._splitter is not None else []
        # The cache first: a fragment or state read after this delta arrives includes it.
        await self._write_tail()
        delta = {
            "type": "delta", "turn": str(self.turn.pk), "index": self.turn.index,
            "key": self.tail_key, "kind": self.tail_kind, "delta_seq": self.delta_seq,
            "block_seq": self.block_seq, "text": text, "citations": cites,
            "rx": rx if rx is not None else protocol.now_ts(),
        }
        if finished:  # rendered once, here; the page keeps only the open rest raw
            delta["rendered"] = [{"chars": len(b), "html": live_text.render_block(b)}
                                 for b in finished]
        if self.tail_lead and self.block_seq == self.delta_seq:
            delta["lead"] = self.tail_lead
        return delta

    async def _commit(self, records: list[EventRecord], *, closes_tail: bool) -> None:
        """A block that closes the tail is stored at once (tail cleared first, then the store,
        so a fragment rendered at any moment shows it in the tail or as an event, never both).
        Other completed events (activity transitions, blocks that never streamed text) wait for
        the window's flush, which stores them all in one transaction."""
        assert self.turn is not None
        self.pending_records.extend(records)
        if any(r.kind != "message" for r in records):
            self._run_end = ""  # the message run is broken: the next text starts a new one
        if closes_tail and self.tail_key is not None:
            if self.tail_kind == "message":
                self._run_end = "".join(self.tail_text)[-1:]
            self.tail_key, self.tail_kind = None, ""
            self.tail_text, self.tail_cites, self.block_seq = [], [], None
            await self._write_tail()
            await self._store()
        if (self.pending_records or self.pending_events) and self.flush_at is None:
            self.flush_at = self._now() + self.coalesce

    async def _store(self, finish: dict[str, Any] | None = None,
                     model: tuple[str, str] | None = None) -> None:
        """Append the pending events (with the ``model``, and ``finish``, when given) in one
        transaction; the next flush publishes them, and the model in a ``turn`` message."""
        assert self.turn is not None
        if not (self.pending_records or model or finish):
            return
        records, self.pending_records = self.pending_records, []
        events = await _write_db(self.turn, records, model, finish)
        if events:
            self.last_seq = events[-1].seq
            self.pending_events.extend(_event_brief(e) for e in events)
        if model is not None:
            self._model_unannounced = True

    async def _provenance(self) -> None:
        """The first response that names its model: recorded now, announced by the next
        flush."""
        assert self.turn is not None
        provider, model = self.builder.provider, self.builder.model
        if not (provider and model):
            return
        self._provenance_done = True
        try:
            provenance.validate(Turn.Role.AGENT, provider, model)
        except provenance.ProvenanceError as exc:  # the turn streams on, without a model
            log.warning("turn %s: model not recorded: %s", self.turn.pk, exc)
            return
        await self._store(model=(provider, model))
        if self.flush_at is None:
            self.flush_at = self._now() + self.coalesce

    async def _finish(self, status: str, end_reason: str) -> None:
        assert self.turn is not None
        if status == "streaming":  # the builder never heard an end: the stream was cut
            status, end_reason = "interrupted", "interrupted"
        await self._stop_heartbeat()
        await self._store(finish={"status": status, "end_reason": end_reason,
                                  "responses": self.builder.responses})
        await _cache(streaming.drop_tail, self.turn.pk)
        if self._tail_in_db:
            self._tail_in_db = False
            await _db(streaming.forget_db_tail)(self.turn.pk)
        await _cache(streaming.stop_beating, self.turn.pk)
        await self._publish_turn()

    async def _abort(self) -> None:
        """Cancelled (shutdown, stop): keep what streamed, mark the turn interrupted."""
        if self.turn is None:
            return
        try:
            await self._flush()
            records = self.stream.end()
            await self._commit(records, closes_tail=True)
            await self._finish("interrupted", "interrupted")
        except Exception:
            log.warning("turn %s: could not record the interruption", self.turn.pk,
                        exc_info=True)

    async def _publish_turn(self) -> None:
        assert self.turn is not None
        await self._store()  # the message's seq covers every event completed so far
        # after the events this message's seq covers, in the same frame
        await self._flush(then=_turn_message(self.turn, self.last_seq))

    async def _beat(self, *, in_database: bool = True) -> None:
        """A sign of life where every process sees it (the database: a reaper in another
        process must not take this turn), and in the cache (the cheap look)."""
        assert self.turn is not None
        info = _beat_info()
        if in_database:
            await _db(recovery.beat)(self.turn.pk, info)
        await _cache(streaming.beat, self.turn.pk, info)

    async def _heartbeat(self) -> None:
        assert self.turn is not None
        while True:
            await asyncio.sleep(streaming.HEARTBEAT_EVERY)
            async with self._beat_lock:
                await self._beat()
            # A Stop asked for in another process (a replay's, or a live call's) is a flag in
            # the cache: the task that drives the turn here is cancelled.
            if await _db(caches["default"].get)(stop_key(self.turn.pk)):
                task = _driving.get(str(self.turn.pk))
                if task is not None:
                    task.cancel()
                return

    async def _stop_heartbeat(self) -> None:
        """No beat after this returns: one being written lands first (a cancelled await of a
        database call would not stop its thread, and its row would outlive the finish). The
        task is cancelled while this holds the lock, so it is asleep or waiting for it."""
        async with self._beat_lock:
            if self._beat_task is not None:
                self._beat_task.cancel()


def _fail(turn: Turn, code: str, message: str) -> list[Event]:
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.status != Turn.Status.STREAMING:
            return []  # it ended already: what it holds stands
        events = store.append_events(locked, [EventRecord("error", body=ErrorBody(code, message))])
        store.finish_turn(locked, status=Turn.Status.FAILED, end_reason="error")
        recovery.stop_beating(turn.pk)
    turn.status, turn.end_reason = locked.status, locked.end_reason
    return events


async def record_failure(turn: Turn, code: str, message: str, layer: Any = None) -> None:
    """A turn whose recording broke off (not the provider's doing): an ``error`` event saying
    so and the turn failed, published; what streamed so far stays. A turn that had ended
    already is left as it is."""
    try:
        events = await _db(_fail)(turn, code, message)
    except Exception:
        log.error("turn %s: could not mark the failure", turn.pk, exc_info=True)
        return
    if not events:
        return
    await _cache(streaming.drop_tail, turn.pk)
    await _cache(streaming.stop_beating, turn.pk)
    await publish.publish_all(turn.conversation_id, [
        _events_message(turn, [_event_brief(e) for e in events]),
        _turn_message(turn, events[-1].seq),
    ], layer)


# -- higher-level helpers -------------------------------------------------------------------


def _user_turn(conversation: Conversation, text: str) -> list[tuple[Turn, list[Event]]]:
    return store.open_turns(conversation, [store.user_turn(redaction.redact_text(text))])


async def add_user_turn(conversation: Conversation, text: str, layer: Any = None) -> Turn:
    """A user turn holding ``text``, published (a prompt that no agent turn follows yet)."""
    opened = await _db(_user_turn)(conversation, text)
    last_seq = conversation.next_seq - 1  # read under the row lock
    await publish.publish_all(conversation.pk, _opened_messages(opened, last_seq), layer)
    return opened[0][0]


async def run_recording(
    conversation: Conversation,
    provider: str,
    responses: list[sources.WireResponse],
    *,
    prompt: str = "",
    speed: float = 1.0,
    coalesce: float = COALESCE_SECONDS,
    layer: Any = None,
) -> Turn:
    """Stream a recorded provider response (and its continuations) as a new agent turn, after
    a user turn holding ``prompt`` when given."""
    responses = await _off_loop(sources.redacted, responses)  # a scan of the whole recording
    runner = TurnRunner(conversation, speed=speed, coalesce=coalesce, layer=layer)
    return await runner.run(sources.wire_responses(provider, responses),
                            recording=(provider, responses), prompt=prompt)


def _source_turns(source: Conversation) -> list[tuple[Turn, str, Any]]:
    """(turn, user text or "", recording or None) for every turn of ``source``, in order."""
    out = []
    for turn in source.turns.order_by("index"):
        if turn.role == Turn.Role.AGENT:
            out.append((turn, "", Recording.objects.filter(turn=turn).first()))
        else:
            text = "\n\n".join(
                e.text for e in turn.events.order_by("seq") if e.kind == "message"
            )
            out.append((turn, text, None))
    return out


async def replay(
    source: Conversation,
    target: Conversation,
    *,
    speed: float = 1.0,
    coalesce: float = COALESCE_SECONDS,
    layer: Any = None,
) -> Conversation:
    """Replay every turn of ``source`` into ``target``: user turns at once, agent turns live,
    from their recording when there is one, else from their stored events."""
    prompt = ""  # a user turn's text, opened together with the agent turn that answers it
    for turn, text, recording in await _db(_source_turns)(source):
        if turn.role != Turn.Role.AGENT:
            if text:
                if prompt:
                    await add_user_turn(target, prompt, layer)
                prompt = text
            continue
        runner = TurnRunner(target, speed=speed, coalesce=coalesce, layer=layer)
        if recording is not None:
            wire = await _off_loop(
                sources.redacted, [sources.WireResponse(**r) for r in recording.response_list])
            await runner.run(sources.wire_responses(recording.provider, wire),
                             recording=(recording.provider, wire), prompt=prompt)
        else:
            await runner.run(await _db(sources.event_responses)(turn), prompt=prompt)
        prompt = ""
    if prompt:
        await add_user_turn(target, prompt, layer)
    return target


def create_replay_target(source: Conversation, owner: Any) -> Conversation:
    title = f"Replay of {source.title or source.pk}"
    return store.create_conversation(title=title, owner=owner)


# The task driving each live turn this process streams (a live call's, a replay's, the demo's),
# by turn id: Stop cancels it, and the turn ends interrupted with what streamed.
_driving: dict[str, asyncio.Task[Any]] = {}


def driving(turn_id: Any) -> asyncio.Task[Any] | None:
    """The task streaming the turn ``turn_id`` in this process, if any."""
    task = _driving.get(str(turn_id))
    return task if task is not None and not task.done() else None


def stop_key(turn_id: Any) -> str:
    """The cache flag that asks the process streaming ``turn_id`` to stop it."""
    return f"turnscope:live:stop:{turn_id}"


# Tasks started in this process; kept referenced so the loop does not drop them mid-turn.
active_tasks: set[asyncio.Task[Any]] = set()


def spawn(coro: Awaitable[Any], name: str = "") -> asyncio.Task[Any]:
    """Run ``coro`` as a task of the running loop (the server's), logging how it ends."""
    task = asyncio.ensure_future(coro)
    if name:
        task.set_name(name)
    active_tasks.add(task)

    def done(t: asyncio.Task[Any]) -> None:
        active_tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("live task %s failed", t.get_name(), exc_info=t.exception())

    task.add_done_callback(done)
    return task

