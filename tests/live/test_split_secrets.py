"""The live runner: a key split across stream chunks at any offset is never stored, kept in the
recording, cached as the tail or published as a delta (issue 11, item 1)."""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import async_to_sync

from conversations import store, streaming
from conversations.models import Event
from guards import redaction
from live import recovery, runner, sources
from tests.live.helpers import Listener, by_type
from tests.split_secrets import (
    SPLIT_SECRETS,
    as_sse,
    assert_nothing_kept,
    leaks,
    sentence,
    split_cases,
    split_stream,
)
from tests.support import add_turn

pytestmark = pytest.mark.django_db(transaction=True)


def test_live_turn_keeps_no_piece_of_a_key_split_at_any_offset(owner):
    cases = split_cases()
    raw = as_sse(split_stream(cases))
    conversation = store.create_conversation(title="live split", owner=owner)

    async def go():
        async with Listener(conversation.pk) as listener:
            task = asyncio.ensure_future(runner.run_recording(
                conversation, "anthropic", [sources.WireResponse("split", raw.decode())],
                speed=0, coalesce=0.01))
            await listener.drain(until=task, quiet=0.2)
            return await task, listener.messages

    turn, messages = async_to_sync(go)()
    assert turn.status == "complete"
    assert_nothing_kept(conversation, cases)
    published = "".join(m["text"] for m in by_type(messages, "delta"))
    assert published and not leaks(published, "deltas")


def test_an_orphaned_tail_keeps_no_piece_of_a_split_key(owner):
    """The tail is the text as it streamed (redacted a chunk at a time, as the proxy does): when
    the reaper commits it, a key split across chunks is redacted whole."""
    for secret in SPLIT_SECRETS:  # one conversation per secret: the local cache holds 300 keys
        conversation = store.create_conversation(owner=owner)
        expected = {}
        for offset in range(1, len(secret)):
            text = sentence(secret)
            cut = text.index(secret) + offset
            streamed = redaction.redact_text(text[:cut]) + redaction.redact_text(text[cut:])
            turn = add_turn(conversation, "agent", status="streaming")
            streaming.write_tail(turn.pk, {"key": "b0", "kind": "message", "text": streamed,
                                           "delta_seq": 1, "block_seq": 1, "citations": []})
            expected[turn.pk] = redaction.redact_text(text)
        assert len(recovery.reap_orphans(conversation.pk, force=True)) == len(expected)
        assert dict(Event.objects.filter(conversation=conversation).values_list(
            "turn_id", "text")) == expected


def test_deltas_parsed_as_the_proxy_reads_them_show_no_piece_of_a_split_key(owner):
    """The proxy hands the runner parts parsed from bytes redacted a line at a time, so a key
    split across two deltas arrives in two pieces neither of which looks like a key: what is
    published (and cached as the tail) while it streams must still show none of it."""
    import providers

    cases = split_cases()
    raw = as_sse(split_stream(cases))
    conversation = store.create_conversation(title="proxy split", owner=owner)

    async def parts_as_the_proxy_reads_them():
        parser = providers.stream_parser("anthropic", providers.WireContext())
        for line in raw.splitlines(keepends=True):
            for part in parser.feed(redaction.redact_bytes(line)):
                yield part
        for part in parser.close():
            yield part

    async def go():
        async with Listener(conversation.pk) as listener:
            task = asyncio.ensure_future(runner.TurnRunner(
                conversation, speed=0, coalesce=0.01).run([parts_as_the_proxy_reads_them()]))
            await listener.drain(until=task, quiet=0.2)
            return await task, listener.messages

    turn, messages = async_to_sync(go)()
    assert turn.status == "complete"
    deltas = by_type(messages, "delta")
    published = "".join(m["text"] for m in deltas)
    assert published and not leaks(published, "deltas")
    # Nothing is lost either: each block's deltas spell its stored text (redacted whole), but
    # for a key's own prefix that may have gone out before the rest ("A" of "AKIA…": no secret).
    texts: dict[str, str] = {}
    for m in deltas:
        texts[m["key"]] = texts.get(m["key"], "") + m["text"]
    stored = [e.text for e in turn.events.filter(kind__in=("message", "reasoning"))
              .order_by("seq")]

    def marks(text: str) -> str:
        return re.sub(r"[^\s\[]*\[REDACTED\]", "[REDACTED]", text)

    assert sorted(map(marks, texts.values())) == sorted(map(marks, stored))
