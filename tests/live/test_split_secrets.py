"""The live runner: a key split across stream chunks at any offset is never stored, kept in the
recording, cached as the tail or published as a delta (issue 11, item 1)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from conversations import store
from live import runner, sources
from tests.live.helpers import Listener, by_type
from tests.split_secrets import as_sse, assert_nothing_kept, leaks, split_cases, split_stream

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
