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
* events the builder completes are committed: a block that closes the tail at once (the store
  first, then the tail cleared; the tail names the last seq stored before it, so a reader that
  finds the block stored after that drops the tail's copy: a fragment rendered at any moment
  shows a block in the tail or as an event, never both and never neither); other events
  (activity transitions, blocks that streamed no text) with the window's flush, in one
  transaction; either way one ``events`` message per window carries their contiguous seqs.
  Text never waits for that flush's store: a window that gathered text publishes it first,
  then stores, and its events go out with the next flush (the runners of a process share one
  database thread; behind their writes a delta waited 75-115 ms);
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
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import Any

from conversations import provenance, streaming
from conversations.limits import turn_limits
from conversations.models import Conversation, Event, Turn
from conversations.rendering import live as live_text
from guards import redaction
from live import protocol, publish, sources, tasks, transient, turn_messages, turn_writes
from live.heartbeat import Heartbeat
from live.loop_io import db, off_loop, to_cache
from streams import parts
from streams.builder import EventRecord
from streams.run import TurnStream

log = logging.getLogger("turnscope.live")

COALESCE_SECONDS = 0.05

_write_now = db(turn_writes.write)


# Through a name of this module: a test slows the store down here (tests/live/test_runner.py).
async def _write_db(turn: Turn, records: list[EventRecord], model: tuple[str, str] | None,
                    finish: dict[str, Any] | None) -> list[Event]:
    """``turn_writes.write`` in the database thread, retried while the database is away
    (``live.transient``): the turn's source waits meanwhile, nothing of it is dropped."""
    return await transient.retrying(_write_now, turn, records, model, finish,
                                    what=f"turn {turn.pk}")


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
        self.pace = sources.Pace(speed)  # a recording's (a network source sets its own)
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
        self._provenance_done = False
        self._tail_in_db = False  # the cache failed: the tail is (also) in the database
        self._heart: Heartbeat | None = None  # beats from the moment the turn is open

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
        self.pace.due = loop.time()
        if resume is not None:
            await self._resume(resume, before)
        elif opened is not None:
            await self._announce(opened)
        else:
            await self._start(prompt, recording)
        assert self._heart is not None
        beat = self._heart.start()
        stream = self.stream
        me = asyncio.current_task()
        assert self.turn is not None
        if me is not None:
            tasks.drive(self.turn.pk, me)
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
            tasks.release(self.turn.pk, me)
        return self.turn

    # -- steps -------------------------------------------------------------------------------

    async def _start(
        self,
        prompt: str | Sequence[EventRecord],
        recording: tuple[str, list[sources.WireResponse]] | None,
    ) -> None:
        opened = await db(turn_writes.open_turns)(self.conversation, prompt, recording, None,
                                                  self.exchange)
        await self._announce(opened)

    async def _announce(self, opened: list[tuple[Turn, list[Event]]]) -> None:
        self.turn = opened[-1][0]
        self.last_seq = self.conversation.next_seq - 1  # read under the row lock
        await self._write_tail()
        self._heart = Heartbeat(self.turn.pk)
        await self._heart.beat(in_database=False)
        await publish.publish_all(self.conversation.pk,
                                  turn_messages.opened_messages(opened, self.last_seq), self.layer)

    async def _resume(self, turn: Turn, before: Sequence[EventRecord]) -> None:
        events, stored = await db(turn_writes.resume_turn)(turn, before, self.exchange)
        self.turn = turn
        self.stream.resume(stored[0], turn.responses_list)
        self._provenance_done = bool(turn.provider)  # recorded once, by the first response
        self.last_seq = (events[-1].seq if events
                         else await db(turn_writes.last_seq)(self.conversation))
        await self._write_tail()
        self._heart = Heartbeat(self.turn.pk)
        await self._heart.beat(in_database=False)
        out = [turn_messages.turn_message(turn, self.last_seq - len(events))]
        if events:
            briefs = [turn_messages.event_brief(e) for e in events]
            out.append(turn_messages.events_message(turn, briefs))
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
        due = self.pace.after(seconds, loop.time())
        while True:
            now = loop.time()
            if self.flush_at is not None and self.flush_at <= max(now, due):
                if self.flush_at > now:
                    await asyncio.sleep(self.flush_at - now)
                await self._flush()
                continue
            if due - now > 0.001:
                await asyncio.sleep(due - now)
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
        if await to_cache(streaming.write_tail, self.turn.pk, doc):
            if self._tail_in_db:
                self._tail_in_db = False
                await db(streaming.forget_db_tail)(self.turn.pk)
            return
        self._tail_in_db = True
        await db(streaming.keep_tail_in_db)(self.turn.pk, doc)

    def _tail_doc(self) -> dict[str, Any]:
        return {
            "key": self.tail_key,
            "kind": self.tail_kind or None,
            "text": "".join(self.tail_text),
            "delta_seq": self.delta_seq,
            "block_seq": self.block_seq,
            "citations": list(self.tail_cites),
            "lead": self.tail_lead,
            # What was stored when this was written: a block of the tail's kind stored after
            # it is the tail's own (``streaming.shown_tail``).
            "stored_seq": self.last_seq,
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
            out.append(turn_messages.events_message(self.turn, events))
        if self._model_unannounced:
            self._model_unannounced = False
            if then is None:  # the model, ahead of the text it produced
                out.append(turn_messages.turn_message(self.turn, self.last_seq))
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
        """A block that closes the tail is stored at once, then the tail is cleared (a reader
        between the two finds the block stored after the tail's ``stored_seq`` and shows it
        once, as an event). Other completed events (activity transitions, blocks that never
        streamed text) wait for the window's flush, which stores them all in one
        transaction."""
        assert self.turn is not None
        self.pending_records.extend(records)
        if any(r.kind != "message" for r in records):
            self._run_end = ""  # the message run is broken: the next text starts a new one
        if closes_tail and self.tail_key is not None:
            if self.tail_kind == "message":
                self._run_end = "".join(self.tail_text)[-1:]
            await self._store()
            self.tail_key, self.tail_kind = None, ""
            self.tail_text, self.tail_cites, self.block_seq = [], [], None
            await self._write_tail()
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
            self.pending_events.extend(turn_messages.event_brief(e) for e in events)
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
        assert self._heart is not None
        await self._heart.stop()
        await self._store(finish={"status": status, "end_reason": end_reason,
                                  "responses": self.builder.responses})
        await to_cache(streaming.drop_tail, self.turn.pk)
        if self._tail_in_db:
            self._tail_in_db = False
            await db(streaming.forget_db_tail)(self.turn.pk)
        await to_cache(streaming.stop_beating, self.turn.pk)
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
        await self._flush(then=turn_messages.turn_message(self.turn, self.last_seq))


async def record_failure(turn: Turn, code: str, message: str, layer: Any = None) -> None:
    """A turn whose recording broke off (not the provider's doing): an ``error`` event saying
    so and the turn failed, published; what streamed so far stays. A turn that had ended
    already is left as it is."""
    try:
        events = await db(turn_writes.fail)(turn, code, message)
    except Exception:
        log.error("turn %s: could not mark the failure", turn.pk, exc_info=True)
        return
    if not events:
        return
    await to_cache(streaming.drop_tail, turn.pk)
    await to_cache(streaming.stop_beating, turn.pk)
    await publish.publish_all(turn.conversation_id, [
        turn_messages.events_message(turn, [turn_messages.event_brief(e) for e in events]),
        turn_messages.turn_message(turn, events[-1].seq),
    ], layer)


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
    responses = await off_loop(sources.redacted, responses)  # a scan of the whole recording
    runner = TurnRunner(conversation, speed=speed, coalesce=coalesce, layer=layer)
    return await runner.run(sources.wire_responses(provider, responses),
                            recording=(provider, responses), prompt=prompt)

