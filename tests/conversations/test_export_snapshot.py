"""An export reads one snapshot: a conversation deleted (or appended to) while its export
streams is exported whole as it was when the export began, and the delete succeeds (on
PostgreSQL it failed on the export's cache rows, a 500). Runs on SQLite and, with
``DATABASE_URL``, on PostgreSQL."""

from __future__ import annotations

import threading

import orjson
import pytest
from django.db import connection

from conversations import store
from conversations.models import Conversation, TurnExport
from conversations.projections import EXPORT_BATCH, export_stream
from streams.builder import EventRecord

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = EXPORT_BATCH * 3 + 17  # several batches, the last a short one


def long_conversation() -> Conversation:
    conversation = store.create_conversation(title="Long")
    store.record_turns([store.NewTurn("user", [EventRecord("message", text=f"turn {n} " * 20)])
                        for n in range(TURNS)], conversation)
    return conversation


def in_another_thread(action) -> None:
    """``action`` on a connection of its own (another request's, as a server runs it)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            failed.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the other connection waited for the export"
    if failed:
        raise failed[0]


def test_a_delete_during_an_export_leaves_the_export_whole():
    conversation = long_conversation()
    chunks = export_stream(conversation, "json")
    first = next(chunks)  # the export is under way: its first batch is read
    in_another_thread(lambda: store.delete_conversation(conversation))
    document = first + b"".join(chunks)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    turns = orjson.loads(document)["turns"]
    assert [t["index"] for t in turns] == list(range(TURNS))
    # Nothing of it was left behind by the export's cache either.
    assert not TurnExport.objects.exists()


def test_turns_added_during_an_export_wait_for_the_next_one():
    conversation = long_conversation()
    chunks = export_stream(conversation, "json")
    first = next(chunks)
    in_another_thread(lambda: store.record_turns([store.user_turn("later")], conversation))
    turns = orjson.loads(first + b"".join(chunks))["turns"]
    assert len(turns) == TURNS
    again = orjson.loads(b"".join(export_stream(conversation, "json")))["turns"]
    assert len(again) == TURNS + 1  # and the cache the first one wrote is used, not stale


def test_a_finished_export_is_cached_through_its_side_connection():
    conversation = long_conversation()
    whole = b"".join(export_stream(conversation, "json"))
    assert TurnExport.objects.filter(turn__conversation=conversation).count() == TURNS
    assert b"".join(export_stream(conversation, "json")) == whole
    assert not connection.in_atomic_block  # the snapshot ended with the export


def test_an_export_streamed_under_asgi_is_whole_and_ends_its_snapshot(django_user_model):
    import asyncio

    from django.test import AsyncClient

    user = django_user_model.objects.create_user("reader", is_staff=True)
    conversation = long_conversation()

    async def fetch() -> bytes:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.get(f"/api/v1/conversations/{conversation.pk}/export")
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content])

    turns = orjson.loads(asyncio.run(fetch()))["turns"]
    assert len(turns) == TURNS
    # The read transaction ended with the stream: a writer is not held by it.
    in_another_thread(lambda: store.delete_conversation(conversation))
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
