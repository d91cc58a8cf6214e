"""The list's websocket (``/ws/conversations/``): logged-in viewers get what the actions
announce about their own conversations, nobody else's."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from conversations import store
from conversations.actions.create import new_conversation
from conversations.actions.rename import rename_conversation
from live import consumers
from tests.live.test_consumer import closed_with, full_app, session_headers

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


async def open_list(headers):
    communicator = WebsocketCommunicator(full_app(), "/ws/conversations/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def test_anonymous_is_closed_4401():
    async def go():
        communicator = await open_list(ORIGIN)
        assert await closed_with(communicator) == consumers.CLOSE_UNAUTHENTICATED

    async_to_sync(go)()


def test_the_owner_hears_of_their_conversations_only(owner, stranger):
    mine = store.create_conversation(title="mine", owner=owner)
    theirs = store.create_conversation(title="theirs", owner=stranger)
    headers = session_headers(owner)

    async def go():
        communicator = await open_list(headers)
        assert (await communicator.receive_json_from(timeout=2))["type"] == "hello"
        await sync_to_async(rename_conversation)(theirs, "not for the owner")
        await sync_to_async(rename_conversation)(mine, "**renamed**")
        renamed = await communicator.receive_json_from(timeout=2)
        created = await sync_to_async(new_conversation)(owner, "fresh")
        added = await communicator.receive_json_from(timeout=2)
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.send_to(text_data='{"type": "ping"}')
        assert (await communicator.receive_json_from(timeout=2))["type"] == "pong"
        await communicator.disconnect()
        return renamed, added, created

    renamed, added, created = async_to_sync(go)()
    assert (renamed["op"], renamed["conversation"], renamed["shown"]) == (
        "update", str(mine.pk), "renamed")
    assert (added["op"], added["conversation"], added["shown"]) == (
        "add", str(created.pk), "fresh")
