"""A live replay's recorded agent turns go through the capture log as a live call's responses do
(``live.live_replay``, ``live.call_capture``): each recorded response is an exchange of kind
``replay`` bound to the new turn as it opens, each of its events is in the log before the runner
reads it, a replay that ends leaves nothing unrecorded, and a replay whose process dies mid-turn
is recorded from the log into the same turn with every byte the log received: what its runner
had read and at most the one chunk in flight when it died."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.cache import caches

import providers
from conversations import streaming
from conversations.models import Turn
from live import bundled, call_capture, capture, live_replay, runner, sources
from live.models import RecordedExchange
from proxy import catchup
from streams import parts
from streams.run import assemble
from tests.live.helpers import Listener, by_type
from tests.live.test_runner import portable

pytestmark = pytest.mark.django_db(transaction=True)


def _logged(ids: list[str]) -> list[tuple[str, str | None, float | None, int]]:
    """(kind, turn, recorded, chunks held) of the log's exchanges ``ids``."""
    con = sqlite3.connect(capture.get_log().path)
    try:
        return [con.execute(
            "SELECT kind, turn, recorded, (SELECT COUNT(*) FROM chunks WHERE exchange = ?) "
            "FROM exchanges WHERE id = ?", (xid, xid)).fetchone() for xid in ids]
    finally:
        con.close()


@pytest.mark.parametrize("slug", ["anthropic-tides", "anthropic-pause-turn"])
def test_each_recorded_response_is_a_replay_exchange_bound_to_the_turn_and_recorded(owner, slug):
    [(sample, source, _)] = bundled.load(owner, only=[slug])
    target = live_replay.create_live_replay_target(source, owner)
    async_to_sync(live_replay.live_replay)(source, target, speed=0)

    turn = Turn.objects.get(conversation=target, role="agent")
    played = Turn.objects.get(conversation=source, role="agent")
    assert portable(turn) == portable(played)  # the log in between changes nothing
    bound = list(RecordedExchange.objects.filter(turn=turn).order_by("base_seq"))
    assert len(bound) == len(sample.responses) and all(row.done for row in bound)
    assert bound[0].prime_seq is None  # bound as the turn opened
    if len(bound) > 1:  # the continuation's: bound after every event of the one it continues
        assert bound[1].prime_seq == bound[1].base_seq
        assert turn.events.filter(seq__lte=bound[1].base_seq).exists()
        assert turn.events.filter(seq__gt=bound[1].base_seq).exists()
    logged = _logged([str(row.pk) for row in bound])
    # recorded into the turn, their bytes gone: nothing of a replay that ended waits in the log
    assert [(kind, into, held) for kind, into, _, held in logged] == [
        ("replay", str(turn.pk), 0)] * len(bound)
    assert all(recorded is not None for _, _, recorded, _ in logged)
    assert not capture.held()


def _logged_parts(xid: str, response: Any) -> list[list[parts.Part]]:
    """The parts of each chunk the log holds for exchange ``xid``, parsed as the replay did."""
    con = sqlite3.connect(capture.get_log().path)
    try:
        chunks = [row[0] for row in con.execute(
            "SELECT data FROM chunks WHERE exchange = ? ORDER BY n", (xid,))]
    finally:
        con.close()
    parser = providers.stream_parser("anthropic", response.context())
    return [[part for line in io.BytesIO(chunk) for part in parser.feed(line)]
            for chunk in chunks]


def _text_of(found: list[parts.Part]) -> list[tuple[str, str]]:
    """(kind, text) of the events a turn holds once these parts stop (cut)."""
    _, records = assemble([("read", found)], on_unreadable="cut")
    return [(r.kind, r.text) for r in records]


def test_every_event_is_in_the_log_before_the_runner_reads_it(owner, monkeypatch):
    [(_sample, source, _)] = bundled.load(owner, only=["anthropic-tides"])
    target = live_replay.create_live_replay_target(source, owner)
    read: list[parts.Part] = []
    checked = []
    played = live_replay._played

    async def watched(captured: call_capture.CallCapture, *args: Any, **kwargs: Any):
        async for part in played(captured, *args, **kwargs):
            read.append(part)
            if isinstance(part, parts.TextDelta):
                assert captured.current is not None
                logged = b"".join(capture.get_log().all_chunks(captured.current))
                parser = providers.stream_parser("anthropic")
                text = "".join(t for k, t in _text_of([*parser.feed(logged), *parser.close()])
                               if k == "message")
                runner_text = "".join(p.text for p in read if isinstance(p, parts.TextDelta))
                assert text.startswith(runner_text)
                checked.append(len(runner_text))
            yield part

    monkeypatch.setattr(live_replay, "_played", watched)
    async_to_sync(live_replay.live_replay)(source, target, speed=0)
    assert len(checked) > 10


def test_a_replay_whose_process_dies_is_recorded_from_the_log_with_every_byte_it_received(
        owner, monkeypatch):
    """As kill -9 leaves it: the runner stops where it is (no interruption recorded, the log's
    exchange not marked), the in-memory tail is gone. Recording the log (as the next start
    does) completes the same turn with what the log received, interrupted, no event twice: the
    text the runner had read and, when the cancel landed between a chunk's commit and the
    runner reading it, that chunk too (under load it does; the e2e kill test allows the same)."""
    [(_sample, source, _)] = bundled.load(owner, only=["anthropic-tides"])
    target = live_replay.create_live_replay_target(source, owner)
    read: list[parts.Part] = []
    played = live_replay._played

    async def watched(*args: Any, **kwargs: Any):
        async for part in played(*args, **kwargs):
            read.append(part)
            yield part

    async def dead(self: Any) -> None:  # a killed process records nothing more
        return None

    monkeypatch.setattr(live_replay, "_played", watched)
    monkeypatch.setattr(runner.TurnRunner, "_abort", dead)
    monkeypatch.setattr(call_capture.CallCapture, "recorded", dead)

    async def go() -> tuple[Turn, str, list[dict[str, Any]]]:
        async with Listener(target.pk) as listener:
            task = asyncio.ensure_future(live_replay.live_replay(source, target, speed=2))
            heard = asyncio.ensure_future(listener.drain(until=task, quiet=0.2))
            while True:  # until a block's text streams, some events committed before it
                await asyncio.sleep(0.02)
                assert not task.done()
                turn = await sync_to_async(Turn.objects.filter(conversation=target,
                                                               role="agent").first)()
                if turn is not None and len(await shown_tail(turn)) > 30 and await \
                        sync_to_async(turn.events.filter(kind="message").exists)():
                    break
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await heard
            # The open block as a reader sees it now (a store the cancel landed in may have
            # committed it: then it is an event, and the tail's copy is not shown).
            return turn, await shown_tail(turn), listener.messages

    async def shown_tail(turn: Turn) -> str:
        tail = streaming.current_tail(turn.pk)  # the tail first, then the events
        events = await sync_to_async(lambda: list(turn.events.only("seq", "kind")))()
        return (streaming.shown_tail(tail, events) or {}).get("text") or ""

    turn, tail, messages = async_to_sync(go)()
    committed = "".join(turn.events.filter(kind="message").order_by("seq")
                        .values_list("text", flat=True))
    assert not tail or tail not in committed  # the open block's text was only in the tail
    caches["default"].clear()  # the in-memory tail dies with the process
    capture.release(*capture.held())
    xid = str(RecordedExchange.objects.get(turn=turn).pk)
    [pending] = [x for x in capture.get_log().pending(limit=1000) if x.id == xid]
    assert pending.kind == "replay"

    # What the log holds: what the runner read and, when the cancel landed between a chunk's
    # commit and the runner reading its parts, that one chunk (received, so kept).
    chunks = _logged_parts(xid, _sample.responses[0])
    logged = [part for chunk in chunks for part in chunk]
    assert logged[:len(read)] == read
    assert len(read) >= len(logged) - len(chunks[-1])  # at most the last chunk unread

    recorded = async_to_sync(catchup.record)(capture.get_log(), pending)
    assert recorded is not None and recorded.pk == turn.pk
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    events = [(e.kind, e.text) for e in turn.events.order_by("seq")]
    assert events == _text_of(logged)  # every byte the log received, each event once
    text = "".join(t for k, t in events if k == "message")
    assert tail in text and text.startswith(committed)
    sent = "".join(d["text"] for d in by_type(messages, "delta") if d["kind"] == "message")
    assert sent and text.startswith(sent)  # every character viewers were sent
    assert RecordedExchange.objects.get(turn=turn).done
    assert _logged([xid])[0][2] is not None  # marked recorded in the log
    # recording it again changes nothing
    assert catchup.complete(capture.get_log(), pending)[1] == []
    assert turn.events.count() == len(events)


def test_a_replay_exchange_whose_turn_is_gone_records_nothing(owner):
    [(_sample, source, _)] = bundled.load(owner, only=["anthropic-tides"])

    async def go() -> str:
        log_ = capture.get_log()
        xid = await log_.open("replay", {"user": owner.pk, "provider": "anthropic",
                                         "endpoint": "replay", "path": "x", "url": "",
                                         "conversation": str(source.pk), "turn": "gone"},
                              b"", instance="test")
        await log_.respond(xid, 200, "")
        await log_.append(xid, 0, bundled.sample("anthropic-tides").responses[0].raw.encode())
        await log_.end(xid, "complete")
        return xid

    xid = async_to_sync(go)()
    exchange = capture.get_log().get(xid)
    assert exchange is not None
    turns = Turn.objects.count()
    assert catchup.complete(capture.get_log(), exchange) == (None, [])
    assert Turn.objects.count() == turns  # no turn opened for it, as a proxied one would be


def test_the_replay_pace_catches_up_by_a_quarter_second_at_most():
    pace = sources.Pace(2.0)
    assert pace.after(1.0, 100.0) == 100.5
    assert pace.after(1.0, 100.2) == 101.0  # ahead: due after the last
    assert pace.after(1.0, 110.0) == 110.0 - sources.BEHIND + 0.5  # behind: no burst
    assert sources.Pace(0).after(5.0, 7.0) == 7.0  # at once
