"""Recording a proxied exchange from the capture log, after the fact.

Every exchange that was not recorded live — it waited for a recording slot, its live recording
broke off (the database went away), or a process stopped or was killed before recording it — is
recorded here once it has ended, from its bytes in the log (``live.capture``). In one
transaction: the exchange's turn is found (``RecordedExchange``) or opened exactly as the live
recording opens it, the response is parsed whole, the events the turn does not hold yet are
appended (a live recording that broke off stored a prefix of them: the same bytes give the same
events, in the same order), the turn is finished (complete when the app received the whole
response, interrupted when it did not), and the recording is kept. Recording an exchange again
finds its row done and changes nothing, so this may run any number of times.

A transient database error (connection lost, the database restarting, locked) is retried with
backoff for as long as it lasts: the exchange stays in the log, the turn completes when the
database is back. The turn is failed-to-record (an ``error`` event saying why, on its page) only
when the exchange's bytes cannot be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.db.utils import InterfaceError, OperationalError

import providers
from conversations import provenance, store, streaming
from conversations.limits import turn_limits
from conversations.models import Event, Turn
from guards import redaction
from live import capture, instances, publish, recovery, sources, turn_messages, turn_writes
from live.models import RecordedExchange
from proxy import messages, threads
from proxy.capture import Hub
from proxy.recorder import (
    _TOO_LARGE,
    Decoder,
    RecordingFailed,
    _owner_and_conversation,
    keep,
    request_of,
)
from streams import parts
from streams.bodies import ErrorBody
from streams.builder import EventRecord
from streams.run import TurnStream
from upstream import errors

log = logging.getLogger("turnscope.proxy")

TRANSIENT = (OperationalError, InterfaceError)  # connection lost, restarting, locked
FIRST_WAIT = 0.25  # seconds before the first retry; doubled each time, up to MAX_WAIT
MAX_WAIT = 5.0
OTHER_ATTEMPTS = 3  # tries for an error that is neither transient nor unreadable bytes (a bug)

_db = sync_to_async  # the database thread the live runner writes from

# Recordings from the log run in threads of their own, each with its own connection, a few at a
# time: on the one database thread they queued behind each other's round trips (the thread
# waited on PostgreSQL most of its time) and, under load, behind every live write too.
RECORDING_THREADS = 4
_recording_pool = ThreadPoolExecutor(max_workers=RECORDING_THREADS,
                                     thread_name_prefix="capture-record")


def _complete_here(log_: capture.CaptureLog, exchange: capture.Exchange, reason: str | None
                   ) -> tuple[Turn | None, list[dict[str, Any]]]:
    """``complete`` in a recording thread: its connection is checked first and, when the
    database failed under it, closed here, in the thread that holds it."""
    close_old_connections()
    try:
        return complete(log_, exchange, reason)
    except BaseException:
        close_old_connections()
        raise


_record_db = sync_to_async(_complete_here, thread_sensitive=False, executor=_recording_pool)
_off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


def _parts(exchange: capture.Exchange, raw: list[bytes], request: Any, too_large: bool = False
           ) -> Iterator[parts.Part]:
    meta = exchange.meta
    provider = meta["provider"]
    if exchange.failure is not None:
        yield parts.StreamError(*exchange.failure)
        yield parts.ResponseEnd("error")
        return
    if exchange.status == 0:  # the process stopped before the provider answered
        return
    if exchange.status >= 300:
        code, message = errors.read(provider, exchange.status, b"".join(raw))
        yield parts.StreamError(code, message)
        yield parts.ResponseEnd("error")
        return
    parser = providers.stream_parser(provider, providers.WireContext(
        api_version=meta.get("api_version"),
        request=request if isinstance(request, dict) else None, endpoint=meta["url"],
        served_by=meta.get("served_by")))
    for data in raw:
        yield from parser.feed(data)
    if too_large:  # the turn says why it stops here
        yield parts.StreamError("response_too_large", _TOO_LARGE)
        yield parts.ResponseEnd("error")
        return
    yield from parser.close()


def _read(log_: capture.CaptureLog, exchange: capture.Exchange) -> tuple[list[bytes], bool]:
    """The response as recorded (decoded, redacted a line at a time), and whether it stopped
    at the decoded size cap; ``RecordingFailed`` when its bytes cannot be read."""
    try:
        chunks = list(log_.all_chunks(exchange.id))
    except capture.CaptureError as exc:
        raise RecordingFailed(f"the captured response cannot be read ({exc})") from exc
    if len(chunks) < exchange.chunks:
        raise RecordingFailed(f"the capture log holds {len(chunks)} of the response's "
                              f"{exchange.chunks} chunks")
    decoder = Decoder(exchange.encoding) if exchange.status else None
    out = []
    for chunk in chunks:
        if decoder is None or decoder.overflow:
            break
        if data := decoder.feed(chunk):
            out.append(data)
    if decoder is not None:
        out.extend(decoder.close())
    return out, decoder is not None and decoder.overflow


def complete(log_: capture.CaptureLog, exchange: capture.Exchange,
             reason: str | None = None) -> tuple[Turn | None, list[dict[str, Any]]]:
    """Record ``exchange`` (ended) from the log, all or nothing; returns its turn and what to
    announce. ``reason``: its bytes cannot be read, the turn is failed-to-record saying so."""
    # ``exchange`` may be a snapshot older than its end, which drops a chunk committed but
    # never forwarded: what is recorded is what the log holds now.
    exchange = log_.get(exchange.id) or exchange
    meta = exchange.meta
    provider = meta["provider"]
    raw: list[bytes] = []
    too_large = False
    if reason is None:
        try:
            raw, too_large = _read(log_, exchange)
        except RecordingFailed as exc:
            reason = str(exc)
    request = request_of(exchange.request)
    # One transaction, and the writes in it take no savepoints of their own (all or nothing:
    # a failure is retried whole): a recording from the log costs a few dozen statements.
    with store.all_or_nothing():
        row = RecordedExchange.objects.select_for_update().filter(pk=exchange.id).first()
        if row is not None and row.done:
            return row.turn, []  # recorded already: nothing changes
        out: list[dict[str, Any]] = []
        if row is None and exchange.kind in capture.RUNNER_KINDS:
            return None, []  # a live call's or replay's turn, deleted since: nothing to record
        # Opened here, the turn holds nothing of this response yet, has no recording, no
        # heartbeat (it is finished before anyone can see it streaming) and is the object
        # the store wrote: none of them is read back.
        opened_here: Turn | None = None
        new_turns: list[tuple[Turn, list[Event]]] = []  # a new conversation's, as written
        if row is None:
            user, conversation = _owner_and_conversation(meta)
            read = messages.read(provider, meta["endpoint"], request, meta.get("api_version"),
                                 meta["url"])
            fallback = " · ".join(x for x in (provider, read.model) if x)
            placement = threads.place(user, read, conversation, fallback_title=fallback)
            if placement.resume is not None:
                turn_writes.resume_turn(placement.resume, placement.before, exchange.id)
                row = RecordedExchange.objects.get(pk=exchange.id)
            else:
                opened = turn_writes.open_turns(placement.conversation, placement.prompt, None,
                                                exchange=exchange.id, beat=False)
                out.extend(turn_messages.opened_messages(  # next_seq as open_turns left it
                    opened, placement.conversation.next_seq - 1))
                opened_here = opened[-1][0]
                opened_here.conversation = placement.conversation
                if placement.created:
                    new_turns = opened
        if opened_here is not None:
            turn, prime_seq, base_seq = opened_here, None, None
        else:
            assert row is not None
            turn = (Turn.objects.select_for_update().select_related("conversation")
                    .get(pk=row.turn_id))
            prime_seq, base_seq = row.prime_seq, row.base_seq
        conversation = turn.conversation
        events: list[Event] = []
        if turn.status == Turn.Status.STREAMING:
            events = _finish(turn, prime_seq, base_seq, exchange, raw, request, reason,
                             too_large, fresh=opened_here is not None)
        response = None
        if reason is None and exchange.kind not in capture.RUNNER_KINDS:  # kept, or none
            response = sources.WireResponse(
                name=f"{provider} {meta['path']}",
                raw=redaction.redact_wire(b"".join(raw)).decode("utf-8", "replace"),
                api_version=meta.get("api_version"), endpoint=meta["url"],
                request=request if isinstance(request, dict) else None,
                served_by=meta.get("served_by"))
        history = None
        if new_turns:  # the conversation holds these turns only: its history is known
            history = threads.written_history(
                [(t.role, [*written, *(events if t is turn else ())]) for t, written in new_turns])
        keep(turn, conversation, provider, response, prime_seq is not None, exchange.id,
             fresh=opened_here is not None, history=history)
        last = events[-1].seq if events else turn_writes.last_seq(conversation)
    if events:
        briefs = [turn_messages.event_brief(e) for e in events]
        out.append(turn_messages.events_message(turn, briefs))
    out.append(turn_messages.turn_message(turn, last))
    return turn, out


def _finish(turn: Turn, prime_seq: int | None, base_seq: int | None,
            exchange: capture.Exchange, raw: list[bytes], request: Any, reason: str | None,
            too_large: bool = False, fresh: bool = False) -> list[Event]:
    """Append what the turn does not hold yet of this response (the events after
    ``base_seq``; the response continues the one before ``prime_seq``, when given), and
    finish it. ``fresh``: the turn was opened in this transaction (it holds none of them,
    and no heartbeat)."""
    stream = TurnStream(on_unreadable="cut", limits=turn_limits())
    if prime_seq is not None:
        [stored] = sources.event_responses(turn, until_seq=prime_seq)
        stream.resume(stored, turn.responses_list)
    records: list[EventRecord] = []
    for _, completed in stream.response(_parts(exchange, raw, request, too_large)
                                        if reason is None
                                        else iter(())):
        records.extend(completed)
    held = 0 if fresh else Event.objects.filter(turn=turn, seq__gt=base_seq).count()
    new = records[held:]
    if reason is not None:
        new = [EventRecord("error", body=ErrorBody(
            "recording_failed", f"Turnscope could not record this response: {reason}. The "
            "app received it unchanged."))]
    # The whole response is parsed: the served model is known before its events are written
    # (a fresh turn's Sources rows take it from the turn as they are inserted).
    builder = stream.builder
    if builder.provider and builder.model and not turn.provider:
        try:
            provenance.validate(Turn.Role.AGENT, builder.provider, builder.model)
            store.set_provenance(turn, builder.provider, builder.model, indexed=not fresh)
        except provenance.ProvenanceError as exc:
            log.warning("turn %s: model not recorded: %s", turn.pk, exc)
    events = store.append_events(turn, redaction.redact_records(new))
    if reason is not None:
        status, end_reason = Turn.Status.FAILED, "error"
    else:
        status, end_reason = stream.outcome.status, stream.outcome.end_reason
        if status == Turn.Status.STREAMING:  # the builder never heard an end: cut
            status, end_reason = Turn.Status.INTERRUPTED, "interrupted"
    store.finish_turn(turn, status=status, end_reason=end_reason,
                      responses=builder.responses if reason is None else ())
    if not fresh:
        recovery.stop_beating(turn.pk)
    return events


async def _after(turn: Turn) -> None:
    """The streaming state the live recording left (its tail, its beat) goes."""
    for fn in (streaming.drop_tail, streaming.stop_beating):
        try:
            await _off_loop(fn, turn.pk)
        except Exception:
            streaming.cache_failed(getattr(fn, "__name__", "drop"))
    with contextlib.suppress(Exception):
        await _db(streaming.forget_db_tail)(turn.pk)


async def record(log_: capture.CaptureLog, exchange: capture.Exchange,
                 reason: str | None = None) -> Turn | None:
    """Record ``exchange`` (ended) from the log, retrying transient database errors with
    backoff until the database is back."""
    wait = FIRST_WAIT
    others = 0
    while True:
        try:
            turn, out = await _record_db(log_, exchange, reason)
            break
        except TRANSIENT as exc:
            log.warning("proxy: recording exchange %s waits for the database (%s: %s); "
                        "retrying in %.1f s", exchange.id, type(exc).__name__, exc, wait)
        except RecordingFailed as exc:  # e.g. its user is gone: nothing to record into
            log.error("proxy: exchange %s cannot be recorded: %s", exchange.id, exc)
            await _off_loop(capture.mark_recorded, exchange.id, None, str(exc))
            return None
        except Exception as exc:
            others += 1
            log.error("proxy: could not record exchange %s (%s)", exchange.id,
                      type(exc).__name__, exc_info=True)
            if others >= OTHER_ATTEMPTS and reason is None:
                reason = f"{type(exc).__name__}"
            elif others >= OTHER_ATTEMPTS + 2:
                await _off_loop(capture.mark_recorded, exchange.id, None,
                                f"gave up: {type(exc).__name__}")
                return None
        await _db(close_old_connections)()
        await asyncio.sleep(wait)
        wait = min(wait * 2, MAX_WAIT)
    await _off_loop(capture.mark_recorded, exchange.id, turn.pk if turn else None,
                    reason or "")
    if turn is not None and out:
        await _after(turn)
        await publish.publish_all(turn.conversation_id, out)
        log.info("proxy: recorded exchange %s from the capture log into turn %s (%s)",
                 exchange.id, turn.pk, turn.status)
    return turn


async def record_when_ended(hub: Hub, xid: str, reason: str | None = None) -> Turn | None:
    """A live recording broke off: once the forwarding of ``xid`` is over, record it from the
    log."""
    feed = hub.feeds.get(xid)
    if feed is not None:
        await feed.ended.wait()
    while True:
        exchange = await _off_loop(hub.log.get, xid)
        if exchange is not None and (exchange.ended or xid not in hub.forwarding):
            break
        await asyncio.sleep(0.05)  # its end is being committed
    return await record(hub.log, exchange, reason)


# -- what gone processes left ---------------------------------------------------------------------


async def take_over_gone() -> None:
    """A recovery round (``live.instances.keep_up``): the exchanges left in this host's log by
    server processes that are gone become this one's, and are recorded; what a recorder
    process that is gone had taken is free for the next to take."""
    hub_ = _hub()
    owners = set(await _off_loop(hub_.log.instances_pending)) - {hub_.instance}
    takers = set(await _off_loop(hub_.log.takers_pending)) - {hub_.instance}
    if not owners and not takers:
        hub_.wake.set()  # anything of ours that waits (a retry, a slot)
        return
    gone = await _db(instances.gone)(owners)
    # A taker records on this host (the log is the host's): alive while its process is.
    gone |= await _db(functools.partial(instances.gone, local_pids=True))(takers - owners)
    for dead in gone & owners:
        await _off_loop(capture.claim, dead, hub_.instance)  # what it had taken, too
        log.warning("proxy: recording what instance %s left in the capture log", dead)
    for dead in gone & takers - owners:
        await _off_loop(capture.drop_taker, dead)
        log.warning("proxy: recording again what recorder %s had taken from the capture log",
                    dead)
    hub_.take_over([])
    hub_._ensure_loop()


PRUNE_EVERY = 600.0  # seconds between prunings of the log
_pruned_at = float("-inf")


async def prune_log() -> None:
    """A recovery round, now and then: the rows of exchanges recorded longer ago than the log
    keeps them (``capture.KEEP_RECORDED``), and old announcements, leave the log."""
    global _pruned_at
    now = time.monotonic()
    if now - _pruned_at < PRUNE_EVERY:
        return
    _pruned_at = now
    await _off_loop(capture.prune)


def _hub() -> Hub:
    from proxy.capture import hub

    return hub()
