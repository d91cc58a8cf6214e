"""The turn runner: the live path stores exactly what ingest stores, and publishes it in order."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.cache import caches

from conversations import store, streaming
from conversations.ingest import ResponseFile, ingest
from conversations.models import Event, Turn
from conversations.projections import turn_dict
from live import bundled, live_replay, recovery, runner, sources, tasks
from live.models import Recording
from tests.live.helpers import Listener, by_type
from tests.support import add_turn

pytestmark = pytest.mark.django_db(transaction=True)

SAMPLES = bundled.samples()


def portable(turn: Turn) -> dict:
    """A turn's portable projection without ids, seqs and timestamps (which differ per run)."""
    doc = turn_dict(turn, list(turn.events.order_by("seq")))
    doc.pop("id"), doc.pop("created_at"), doc.pop("index")
    for event in doc["events"]:
        event.pop("id"), event.pop("seq")
    return doc


async def run_sample(sample, conversation, speed=0.0, coalesce=0.05):
    async with Listener(conversation.pk) as listener:
        task = asyncio.ensure_future(runner.run_recording(
            conversation, sample.provider, list(sample.responses), prompt=sample.prompt,
            speed=speed, coalesce=coalesce))
        await listener.drain(until=task, quiet=0.2)
        turn = await task
    return turn, listener.messages


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.slug for s in SAMPLES])
def test_live_turn_stores_what_ingest_stores(sample, owner):
    conversation = store.create_conversation(title="live", owner=owner)
    turn, messages = async_to_sync(run_sample)(sample, conversation)
    summary = ingest(sample.provider,
                     [ResponseFile(r.name, r.raw.encode(), r.context()) for r in sample.responses],
                     owner=owner, title=sample.title, prompt=sample.prompt)
    turn.refresh_from_db()
    assert portable(turn) == portable(summary.turn)
    assert turn.status == summary.turn.status
    assert Recording.objects.filter(turn=turn, provider=sample.provider).exists()

    # committed seqs are contiguous and cover every event
    seqs = [s for m in by_type(messages, "events") for s in range(m["seq_from"], m["seq_to"] + 1)]
    assert seqs == list(Event.objects.filter(conversation=conversation)
                        .order_by("seq").values_list("seq", flat=True))
    # deltas: contiguous per turn, and each block's deltas spell a committed event's text
    deltas = [m for m in by_type(messages, "delta") if m["turn"] == str(turn.pk)]
    assert [m["delta_seq"] for m in deltas] == list(range(1, len(deltas) + 1))
    blocks: dict[int, str] = {}
    for m in deltas:
        blocks[m["block_seq"]] = blocks.get(m["block_seq"], "") + m["text"]
    texts = [e.text for e in turn.events.order_by("seq") if e.kind in ("message", "reasoning")]
    assert list(blocks.values()) == [t for t in texts if t]
    # the model chip comes before the first delta; the last message says how the turn ended
    turn_messages = [m for m in by_type(messages, "turn") if m["turn"] == str(turn.pk)]
    first_model = next(i for i, m in enumerate(messages) if m["type"] == "turn" and m["model"])
    assert not deltas or first_model < messages.index(deltas[0])
    assert turn_messages[-1]["status"] == turn.status
    assert turn_messages[-1]["seq"] == seqs[-1]
    assert streaming.current_tail(turn.pk) is None  # a finished turn leaves no tail


def test_a_reader_at_any_moment_shows_each_block_once(owner, monkeypatch):
    """The runner stores a finished block and then clears its tail: a page rendered at any
    moment (after every store and every tail write) shows the streamed text once, and never
    less than it showed before (the store first; ``streaming.shown_tail`` drops the copy)."""
    from conversations import reading

    conversation = store.create_conversation(owner=owner)
    shown: list[str] = []

    def look() -> None:
        turn = conversation.turns.filter(role="agent").first()
        if turn is None or turn.status != Turn.Status.STREAMING:
            return
        [view] = reading.turn_views(conversation, [turn])
        text = "".join(e.get("text", "") for e in view.data["events"]
                       if e["kind"] in ("message", "reasoning"))
        shown.append(text + ((view.tail or {}).get("text") or ""))

    write_db, write_tail = runner._write_db, streaming.write_tail

    async def stored_then_look(*args):
        events = await write_db(*args)
        await sync_to_async(look, thread_sensitive=False)()
        return events

    def tail_then_look(*args):  # on the loop (the in-memory cache): look from a thread
        write_tail(*args)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(look).result()

    monkeypatch.setattr(runner, "_write_db", stored_then_look)
    monkeypatch.setattr(streaming, "write_tail", tail_then_look)
    turn, _ = async_to_sync(run_sample)(bundled.sample("anthropic-tides"), conversation)
    final = "".join(e.text for e in turn.events.order_by("seq")
                    if e.kind in ("message", "reasoning"))
    assert turn.status == "complete" and len(shown) > 10
    for before, now in itertools.pairwise(shown):
        assert now.startswith(before), "text shown before was gone, or shown twice"
    assert all(final.startswith(s) for s in shown)


def test_a_tail_whose_block_is_stored_is_not_shown_again():
    tail = {"key": "b1", "kind": "message", "text": "Tides", "delta_seq": 7, "block_seq": 5,
            "citations": [{"url": "https://a.example/"}], "lead": " ", "stored_seq": 4}
    event = type("E", (), {})
    stored_block, activity = event(), event()
    stored_block.seq, stored_block.kind = 6, "message"
    activity.seq, activity.kind = 5, "hosted_activity"
    assert streaming.shown_tail(tail, [activity]) == tail
    dropped = streaming.shown_tail(tail, [activity, stored_block])
    assert (dropped["key"], dropped["text"], dropped["citations"]) == (None, "", [])
    assert dropped["delta_seq"] == 7  # later deltas are still placed after it
    reasoning = {**tail, "kind": "reasoning"}
    assert streaming.shown_tail(reasoning, [stored_block]) == reasoning  # not its kind
    stored_block.seq = 4  # stored before the tail was written: another block
    assert streaming.shown_tail(tail, [stored_block]) == tail
    old = {k: v for k, v in tail.items() if k != "stored_seq"}  # a runner of before
    assert streaming.shown_tail(old, [stored_block]) == old


def test_an_orphan_whose_block_was_stored_before_its_tail_cleared_is_not_doubled(owner):
    conversation = store.create_conversation(owner=owner)
    turn = add_turn(conversation, "agent", status="streaming")
    streaming.write_tail(turn.pk, {"key": "b0", "kind": "message", "text": "Whole block",
                                   "delta_seq": 3, "block_seq": 1, "citations": [],
                                   "stored_seq": conversation.next_seq - 1})
    from streams.builder import EventRecord
    store.append_events(turn, [EventRecord("message", text="Whole block")])
    assert [t.pk for t in recovery.reap_orphans(conversation.pk, force=True)] == [turn.pk]
    assert list(turn.events.values_list("text", flat=True)) == ["Whole block"]


def test_cut_stream_leaves_turn_interrupted_with_partial_text(owner):
    conversation = store.create_conversation(owner=owner)
    turn, _ = async_to_sync(run_sample)(bundled.sample("anthropic-cut-stream"), conversation)
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    last = turn.events.order_by("seq").last()
    assert last.incomplete and last.text.endswith("first-aid kit with ")


def test_deltas_are_coalesced_and_tail_is_readable_mid_stream(owner):
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)
    text_parts = sum(1 for r in sources.wire_responses(sample.provider, list(sample.responses))
                     for p in r if type(p).__name__ == "TextDelta")

    async def go():
        task = asyncio.ensure_future(run_sample(sample, conversation, speed=8.0))
        seen = []
        while not task.done():
            await asyncio.sleep(0.1)
            turn = await sync_to_async(
                lambda: Turn.objects.filter(conversation=conversation, role="agent").first())()
            if turn is not None:
                tail = streaming.current_tail(turn.pk)
                if tail and tail["text"]:
                    seen.append(tail)
        turn, messages = await task
        return turn, messages, seen

    turn, messages, seen = async_to_sync(go)()
    deltas = by_type(messages, "delta")
    assert len(deltas) < text_parts  # coalesced (about every 50 ms), not one per wire delta
    assert seen, "the tail was never visible in the cache while streaming"
    final = [e.text for e in turn.events.all()]
    for tail in seen:
        assert any(text.startswith(tail["text"]) for text in final)


def test_cancelled_turn_keeps_partial_text_and_is_interrupted(owner):
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)

    async def go():
        # Cancelled inside a long text block: past 60 characters of a block (the first is 48
        # long and ends before the search), at the recording's own pace, which leaves about
        # half a second before that block ends (at 4x a loaded machine's poll could miss it
        # and cancel between blocks, with nothing partial to keep).
        task = asyncio.ensure_future(runner.run_recording(
            conversation, sample.provider, list(sample.responses), speed=1.0))
        while True:
            await asyncio.sleep(0.05)
            tails = [streaming.current_tail(t.pk) for t in await sync_to_async(list)(
                Turn.objects.filter(conversation=conversation))]
            if any(t and len(t["text"]) > 60 for t in tails):
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async_to_sync(go)()
    turn = Turn.objects.get(conversation=conversation)
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    last = turn.events.order_by("seq").last()
    assert last.kind == "message" and last.incomplete and len(last.text) > 60


def test_replay_without_recording_rebuilds_from_events(owner):
    sample = bundled.sample("anthropic-pause-turn")
    summary = ingest(sample.provider,
                     [ResponseFile(r.name, r.raw.encode(), r.context()) for r in sample.responses],
                     owner=owner, title="source", prompt=sample.prompt)
    assert not Recording.objects.filter(turn=summary.turn).exists()
    target = live_replay.create_live_replay_target(summary.conversation, owner)
    async_to_sync(live_replay.live_replay)(summary.conversation, target, speed=0)
    turns = list(target.turns.order_by("index"))
    assert [t.role for t in turns] == ["user", "agent"]
    assert turns[0].events.get().text == sample.prompt
    assert portable(turns[1]) | {"end_reason": None} == portable(summary.turn) | {
        "end_reason": None}


def test_replay_from_events_keeps_each_citation_integrity_mark(owner):
    """A turn without a recording is rebuilt from its stored events: a citation whose range
    ingest repaired (or dropped) stays marked so; placed again on the repaired range it would
    read as exact."""
    from conversations.models import Attribution
    from streams.builder import AttributionRecord, EventRecord
    from tests.support import add_user_turn

    source = store.create_conversation(title="marks", owner=owner)
    add_user_turn(source, "Why?")
    marks = ["exact", "repaired", "dropped", "no_source", ""]
    add_turn(source, Turn.Role.AGENT, EventRecord("message", text="Tides rise. Moons pull.",
             attributions=[
                 AttributionRecord(f"https://{n}.example/" if mark != "no_source" else "", "", "",
                                   *((None, None) if mark in ("dropped", "") else (0, 11)),
                                   integrity=mark)
                 for n, mark in enumerate(marks)]), provider="anthropic", model="claude-test-1")
    target = live_replay.create_live_replay_target(source, owner)
    async_to_sync(live_replay.live_replay)(source, target, speed=0)
    assert list(Attribution.objects.filter(event__conversation=target).order_by("ordinal")
                .values_list("integrity", flat=True)) == marks


def test_replay_of_sample_uses_its_recording(owner):
    [(_sample, source, created)] = bundled.load(owner, only=["anthropic-failed-search"])
    assert created
    assert bundled.load(owner, only=["anthropic-failed-search"])[0][2] is False  # idempotent
    target = live_replay.create_live_replay_target(source, owner)
    async_to_sync(live_replay.live_replay)(source, target, speed=0)
    agent = target.turns.get(role="agent")
    assert Recording.objects.get(turn=agent).provider == "anthropic"
    assert portable(agent) == portable(source.turns.get(role="agent"))
    failed = [e.typed_body for e in agent.events.filter(kind="hosted_activity")]
    assert [a.state for a in failed] == ["started", "failed", "started", "completed"]


def test_orphaned_turn_is_finished_with_its_tail(owner):
    conversation = store.create_conversation(owner=owner)
    turn = add_turn(conversation, "agent", status="streaming")
    streaming.write_tail(turn.pk, {"key": "b0", "kind": "message", "text": "Half a sent",
                                   "delta_seq": 3, "block_seq": 1,
                                   "citations": [{"url": "https://a.example/", "title": "A"}]})
    assert recovery.reap_orphans(conversation.pk) == []  # not quiet long enough yet
    streaming.beat(turn.pk, {})
    assert recovery.reap_orphans(conversation.pk, force=True) == []  # its runner is alive
    streaming.stop_beating(turn.pk)
    assert [t.pk for t in recovery.reap_orphans(conversation.pk, force=True)] == [turn.pk]
    turn.refresh_from_db()
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    event = turn.events.get()
    assert (event.text, event.incomplete) == ("Half a sent", True)
    cite = event.attributions.get()
    assert (cite.url, cite.incomplete) == ("https://a.example/", True)
    assert streaming.current_tail(turn.pk) is None


def test_credentials_in_a_live_stream_are_redacted_everywhere(owner):
    sample = bundled.sample("anthropic-failed-search")
    secret = "sk-ant-api03-" + "A" * 40
    raw = sample.responses[0].raw.replace("Let me search", f"Let me search ({secret})", 1)
    conversation = store.create_conversation(owner=owner)
    responses = [sources.WireResponse("x.sse", raw, "2023-06-01")]
    turn, messages = async_to_sync(run_sample)(
        bundled.Sample("x", "x", f"my key is {secret}", "anthropic", tuple(responses)),
        conversation)
    assert secret not in "".join(str(m) for m in messages)
    assert not Event.objects.filter(text__contains=secret).exists()
    assert secret not in Recording.objects.get(turn=turn).responses
    assert "[REDACTED]" in turn.events.order_by("seq").first().text


def test_a_model_that_cannot_be_recorded_leaves_the_turn_streaming_without_one(owner, caplog):
    from streams import parts

    conversation = store.create_conversation(owner=owner)
    stream = [parts.ResponseStart("anthropic", "sk-ant-api03-" + "B" * 40),
              parts.BlockStart("b0", "message"), parts.TextDelta("b0", "Still here."),
              parts.BlockEnd("b0"), parts.ResponseEnd("end_turn")]

    async def go():
        async with Listener(conversation.pk) as listener:
            task = asyncio.ensure_future(
                runner.TurnRunner(conversation, speed=0).run([stream], prompt="Hi"))
            await listener.drain(until=task, quiet=0.2)
            return await task, listener.messages

    turn, messages = async_to_sync(go)()
    turn.refresh_from_db()
    assert (turn.status, turn.provider, turn.model) == ("complete", "", "")
    assert [e.text for e in turn.events.all()] == ["Still here."]
    assert all(m["model"] is None for m in by_type(messages, "turn"))
    assert "model not recorded" in caplog.text


def test_the_prompt_and_the_turn_it_opens_arrive_in_one_frame(owner):
    conversation = store.create_conversation(owner=owner)
    _, messages = async_to_sync(run_sample)(bundled.sample("anthropic-failed-search"),
                                            conversation)
    user, agent = conversation.turns.order_by("index")
    first = messages[:3]
    assert [(m["type"], m["turn"]) for m in first] == [
        ("turn", str(user.pk)), ("events", str(user.pk)), ("turn", str(agent.pk))]
    assert first[0]["ts"] == first[2]["ts"]  # published together
    assert (first[2]["status"], first[2]["seq"]) == ("streaming", first[1]["seq_to"])


async def _network(source, gap: float, stop_after: int | None = None):
    """Parts as a network source delivers them: asynchronously, ``gap`` seconds apart."""
    for n, part in enumerate(source):
        if stop_after is not None and n >= stop_after:
            return
        await asyncio.sleep(gap)
        yield part


def test_an_async_source_stores_what_ingest_stores_and_flushes_while_waiting(owner):
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)
    [source] = sources.wire_responses(sample.provider, list(sample.responses))
    parts = list(source)
    first_text = next(i for i, p in enumerate(parts) if type(p).__name__ == "TextDelta")

    async def network():
        # the parts up to the first text, then a long silence before the rest
        async for part in _network(parts[:first_text + 1], 0.0):
            yield part
        await asyncio.sleep(0.8)
        async for part in _network(parts[first_text + 1:], 0.0):
            yield part

    async def go():
        async with Listener(conversation.pk) as listener:
            run = runner.TurnRunner(conversation, speed=1.0, coalesce=0.05)
            task = asyncio.ensure_future(run.run([network()], prompt=sample.prompt))
            drain = asyncio.ensure_future(listener.drain(until=task, quiet=0.05))
            await asyncio.sleep(0.5)  # inside the silence
            during = list(listener.messages)
            turn = await task
            await drain
        return turn, during, listener.messages

    turn, during, messages = async_to_sync(go)()
    # the text that came before the silence reached the viewers during it
    assert [m["text"] for m in by_type(during, "delta")] == [parts[first_text].text]
    summary = ingest(sample.provider,
                     [ResponseFile(r.name, r.raw.encode(), r.context()) for r in sample.responses],
                     owner=owner, title=sample.title, prompt=sample.prompt)
    turn.refresh_from_db()
    assert portable(turn) == portable(summary.turn)
    assert by_type(messages, "turn")[-1]["status"] == "complete"


def test_an_async_source_cut_short_leaves_the_turn_interrupted(owner):
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)
    [source] = sources.wire_responses(sample.provider, list(sample.responses))
    parts = list(source)

    async def go():
        run = runner.TurnRunner(conversation, speed=1.0)
        return await run.run([_network(parts, 0.0, stop_after=len(parts) // 2)])

    turn = async_to_sync(go)()
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    assert turn.events.order_by("seq").last().incomplete


def test_leading_edge_flush_sends_the_first_text_of_a_burst_at_once(owner):
    """The first text of a burst is published before the runner reads another part; what
    follows inside the window waits for it (the clock is the test's, so nothing here depends
    on how fast the machine is)."""
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)
    [source] = sources.wire_responses(sample.provider, list(sample.responses))
    parts = list(source)
    texts = [i for i, p in enumerate(parts) if type(p).__name__ == "TextDelta" and p.text]
    a, b, c = texts[:3]
    assert parts[a].key == parts[b].key == parts[c].key
    now = [0.0]

    async def go():
        gates = {name: asyncio.Event() for name in ("a", "bc", "window", "burst")}
        asked = {name: asyncio.Event() for name in ("after_a", "after_c", "after_burst")}

        async def network():
            for part in parts[:a + 1]:
                yield part
            asked["after_a"].set()  # the runner has handled the first text and wants more
            await gates["bc"].wait()
            for part in parts[a + 1:c + 1]:
                yield part
            asked["after_c"].set()
            await gates["window"].wait()
            await gates["burst"].wait()
            for part in parts[c + 1:texts[3] + 1]:
                yield part
            asked["after_burst"].set()
            await gates["a"].wait()
            for part in parts[texts[3] + 1:]:
                yield part

        async with Listener(conversation.pk) as listener:
            run = runner.TurnRunner(conversation, speed=1.0, coalesce=0.05, clock=lambda: now[0])
            task = asyncio.ensure_future(run.run([network()], prompt=sample.prompt))
            drain = asyncio.ensure_future(listener.drain(until=task, quiet=0.02))

            async def deltas(count: int) -> list[dict]:
                for _ in range(1000):
                    found = by_type(listener.messages, "delta")
                    if len(found) >= count:
                        return found
                    await asyncio.sleep(0.01)
                return by_type(listener.messages, "delta")

            await asyncio.wait_for(asked["after_a"].wait(), 10)
            first = await deltas(1)  # at fake time 0: no window had to pass
            now[0] = 0.01  # B and C come inside the window the first flush opened
            gates["bc"].set()
            await asyncio.wait_for(asked["after_c"].wait(), 10)
            await asyncio.sleep(0.2)  # real time passes; the window (fake time) does not
            held = list(by_type(listener.messages, "delta"))
            now[0] = 0.06  # the window ends: B and C go out together, without a new part
            gates["window"].set()
            window = await deltas(2)
            now[0] = 0.07  # after the window's end a new burst begins: sent at once
            gates["burst"].set()
            await asyncio.wait_for(asked["after_burst"].wait(), 10)
            burst = await deltas(3)
            gates["a"].set()
            turn = await task
            await drain
        return turn, first, held, window, burst, listener.messages

    turn, first, held, window, burst, messages = async_to_sync(go)()
    assert [d["text"] for d in first] == [parts[a].text]
    assert len(held) == 1, "text inside the window waited for it"
    assert window[1]["text"] == "".join(p.text for p in parts[a + 1:c + 1]
                                        if type(p).__name__ == "TextDelta")
    assert len(burst) == 3 and burst[2]["text"].endswith(parts[texts[3]].text)
    assert all(d["rx"] <= d["ts"] for d in by_type(messages, "delta"))
    # Nothing lost or doubled: the deltas of the block spell its stored text.
    block = [d for d in by_type(messages, "delta") if d["key"] == parts[a].key]
    stored = [e.text for e in turn.events.filter(kind="message").order_by("seq")]
    assert "".join(d["text"] for d in block) in stored


def test_text_goes_out_before_the_store_of_its_window(owner, monkeypatch):
    """A window that completed events and gathered text publishes the text first, then stores
    the events and announces them with the next flush: a process's runners share one database
    thread, and in ``bench.live`` a delta queued behind its writes waited 75-115 ms."""
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)
    [source] = sources.wire_responses(sample.provider, list(sample.responses))
    parts = list(source)
    activity = next(i for i, p in enumerate(parts) if type(p).__name__ == "Activity")
    text = next(p.text for p in parts[activity:] if type(p).__name__ == "TextDelta")
    write = runner._write_db

    async def go():
        busy, stalled = asyncio.Event(), asyncio.Event()

        async def slow_write(turn, records, model, finish):
            if records and all(r.kind == "hosted_activity" for r in records):
                stalled.set()
                await busy.wait()  # the database thread, busy with other runners' writes
            return await write(turn, records, model, finish)

        monkeypatch.setattr(runner, "_write_db", slow_write)
        async with Listener(conversation.pk) as listener:
            run = runner.TurnRunner(conversation, speed=1.0, coalesce=0.05)
            task = asyncio.ensure_future(run.run([_network(parts, 0.0)], prompt=sample.prompt))
            drain = asyncio.ensure_future(listener.drain(until=task, quiet=0.05))
            await asyncio.wait_for(stalled.wait(), 10)
            for _ in range(300):
                if any(text in d["text"] for d in by_type(listener.messages, "delta")):
                    break
                await asyncio.sleep(0.01)
            during = list(listener.messages)
            busy.set()
            turn = await task
            await drain
        return turn, during, listener.messages

    turn, during, messages = async_to_sync(go)()
    assert any(text in d["text"] for d in by_type(during, "delta")), "the text waited"
    def announced(messages: list[dict]) -> set[int]:
        return {s for m in by_type(messages, "events")
                for s in range(m["seq_from"], m["seq_to"] + 1)}

    activities = set(turn.events.filter(kind="hosted_activity").values_list("seq", flat=True))
    assert activities and not activities & announced(during)  # stored after the text went out
    assert activities <= announced(messages)  # and announced once stored
    summary = ingest(sample.provider,
                     [ResponseFile(r.name, r.raw.encode(), r.context()) for r in sample.responses],
                     owner=owner, title=sample.title, prompt=sample.prompt)
    turn.refresh_from_db()
    assert portable(turn) == portable(summary.turn)


@pytest.mark.parametrize("where", ["here", "another process"])
def test_stop_stops_a_replay_streaming_in_this_process_or_another(owner, where):
    """Stop on a replay (the demo's, "Replay live") ends its turn interrupted and the replay
    with it: the text grows no more (issue 36: it said "Stopped" and streamed on)."""
    from live import calls

    [(_sample, source, _)] = bundled.load(owner, only=["anthropic-tides"])
    target = live_replay.create_live_replay_target(source, owner)

    async def go():
        task = tasks.spawn(live_replay.live_replay(source, target, speed=1.0), name="replay-test")
        while True:  # until text streams: the condition, not a time
            await asyncio.sleep(0.02)
            turns = await sync_to_async(list)(Turn.objects.filter(conversation=target,
                                                                  role="agent"))
            if turns and (tail := streaming.current_tail(turns[0].pk)) and tail["text"]:
                break
        if where == "here":
            stopped = await calls.stop(target)
            assert stopped is not None
        else:  # as a Stop handled by another process does: the flag its heartbeat reads
            await sync_to_async(caches["default"].set)(tasks.stop_key(turns[0].pk), True)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)

    async_to_sync(go)()
    turn = Turn.objects.get(conversation=target, role="agent")
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    assert tasks.driving(turn.pk) is None
