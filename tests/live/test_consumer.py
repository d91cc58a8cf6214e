"""The websocket consumer: who may subscribe, what a browser may send, and gap -> resync."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import InMemoryChannelLayer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from conversations import store
from live import bundled, consumers, runner, state
from live.routing import websocket_urlpatterns
from tests.live.helpers import ReferenceClient, unbatch
from tests.support import add_user_turn

pytestmark = pytest.mark.django_db(transaction=True)


def path(conversation) -> str:
    return f"/ws/conversations/{conversation.pk}/"


async def open_socket(conversation, user=None, app=None, headers=None):
    app = app or URLRouter(websocket_urlpatterns)
    communicator = WebsocketCommunicator(app, path(conversation), headers=headers or [])
    if user is not None:
        communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


async def next_message(communicator, wait: float = 0.3):
    """The next JSON message, or None after ``wait`` seconds of nothing (a timeout inside
    receive_json_from would cancel the application)."""
    if await communicator.receive_nothing(timeout=wait, interval=0.01):
        return None
    return await communicator.receive_json_from(timeout=2)


async def closed_with(communicator) -> int:
    out = await communicator.receive_output(timeout=2)
    assert out["type"] == "websocket.close", out
    return out["code"]


def full_app():
    from turnscope.asgi import application

    return application


def session_headers(user, origin=b"http://127.0.0.1"):
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    return [(b"cookie", cookie), (b"origin", origin), (b"host", b"127.0.0.1")]


def test_anonymous_is_closed_4401(owner):
    conversation = store.create_conversation(owner=owner)

    async def go():
        communicator, connected, _ = await open_socket(
            conversation, app=full_app(),
            headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")])
        assert connected
        assert await closed_with(communicator) == consumers.CLOSE_UNAUTHENTICATED

    async_to_sync(go)()


def test_owner_through_the_full_stack_gets_hello(owner):
    conversation = store.create_conversation(owner=owner)
    add_user_turn(conversation, "hi")
    headers = session_headers(owner)

    async def go():
        communicator, connected, _ = await open_socket(conversation, app=full_app(),
                                                       headers=headers)
        assert connected
        hello = await communicator.receive_json_from(timeout=2)
        assert hello["type"] == "hello" and hello["last_seq"] == 1
        assert [t["role"] for t in hello["turns"]] == ["user"]
        await communicator.disconnect()

    async_to_sync(go)()


def test_bad_origin_is_refused(owner):
    conversation = store.create_conversation(owner=owner)
    headers = session_headers(owner, origin=b"http://evil.example")

    async def go():
        _communicator, connected, _ = await open_socket(conversation, app=full_app(),
                                                       headers=headers)
        assert not connected

    async_to_sync(go)()


@pytest.mark.parametrize("who", ["stranger", "missing"])
def test_not_yours_is_closed_4403(owner, stranger, who):
    conversation = store.create_conversation(owner=owner)
    if who == "missing":
        conversation = store.create_conversation(owner=owner)
        conversation.pk = "00000000-0000-4000-8000-000000000000"

    async def go():
        communicator, connected, _ = await open_socket(
            conversation, user=stranger if who == "stranger" else owner)
        assert connected
        assert await closed_with(communicator) == consumers.CLOSE_FORBIDDEN

    async_to_sync(go)()


def test_staff_may_watch(owner, django_user_model):
    staff = django_user_model.objects.create_user("staff", password="x", is_staff=True)
    conversation = store.create_conversation(owner=owner)

    async def go():
        communicator, _connected, _ = await open_socket(conversation, user=staff)
        assert (await communicator.receive_json_from(timeout=2))["type"] == "hello"
        await communicator.disconnect()

    async_to_sync(go)()


def test_malformed_messages_get_errors_then_the_socket_closes(owner):
    conversation = store.create_conversation(owner=owner)

    async def go():
        communicator, _, _ = await open_socket(conversation, user=owner)
        await communicator.receive_json_from(timeout=2)  # hello
        for bad in ["not json", "[1, 2]", '{"type": "group_send"}', '{"type": "sync", '
                    '"after": -1}']:
            await communicator.send_to(text_data=bad)
            reply = await communicator.receive_json_from(timeout=2)
            assert reply["type"] == "error"
        await communicator.send_to(text_data='{"type": "sync", "after": "1"}')
        assert await closed_with(communicator) == consumers.CLOSE_BAD_MESSAGES

    async_to_sync(go)()


@pytest.mark.parametrize("frame,code", [
    ({"bytes_data": b"\x00\x01"}, consumers.CLOSE_UNSUPPORTED),
    ({"text_data": '{"type": "ping", "pad": "' + "x" * 2000 + '"}'}, consumers.CLOSE_TOO_BIG),
])
def test_binary_and_oversized_frames_close(owner, frame, code):
    conversation = store.create_conversation(owner=owner)

    async def go():
        communicator, _, _ = await open_socket(conversation, user=owner)
        await communicator.receive_json_from(timeout=2)
        await communicator.send_to(**frame)
        assert await closed_with(communicator) == code

    async_to_sync(go)()


def test_client_messages_never_reach_the_group(owner):
    conversation = store.create_conversation(owner=owner)

    async def go():
        a, _, _ = await open_socket(conversation, user=owner)
        b, _, _ = await open_socket(conversation, user=owner)
        await a.receive_json_from(timeout=2)
        await b.receive_json_from(timeout=2)
        await a.send_to(text_data='{"type": "ping"}')
        assert (await a.receive_json_from(timeout=2))["type"] == "pong"
        await a.send_to(text_data='{"type": "sync", "after": 0}')
        assert (await a.receive_json_from(timeout=2))["type"] == "state"
        assert await b.receive_nothing(timeout=0.3)
        await a.disconnect()
        await b.disconnect()

    async_to_sync(go)()


def test_published_messages_reach_subscribers_in_order(owner):
    conversation = store.create_conversation(owner=owner)
    sample = bundled.sample("anthropic-failed-search")

    async def go():
        communicator, _, _ = await open_socket(conversation, user=owner)
        hello = await communicator.receive_json_from(timeout=2)
        client = ReferenceClient(conversation, None)
        client.last_seq = hello["last_seq"]
        task = asyncio.ensure_future(runner.run_recording(
            conversation, sample.provider, list(sample.responses), prompt=sample.prompt,
            speed=0))
        received = []
        while True:
            message = await next_message(communicator)
            if message is None:
                if task.done():
                    break
                continue
            received.extend(unbatch(message))
        await task
        await communicator.disconnect()
        return received

    received = async_to_sync(go)()
    seqs = [s for m in received if m["type"] == "events"
            for s in range(m["seq_from"], m["seq_to"] + 1)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert conversation.events.count() == len(seqs)


class SlowConsumer(consumers.LiveConsumer):
    async def live_message(self, event):
        await asyncio.sleep(0.01)
        await super().live_message(event)


def test_flood_overflows_the_layer_and_the_client_still_converges(owner, settings):
    """A tiny channel capacity and a slow consumer: group_send drops most of a fast burst.
    The reference client sees the gaps, resyncs from the store, and ends with exactly the
    stored events and the streamed text."""
    conversation = store.create_conversation(owner=owner)
    sample = bundled.sample("anthropic-tides")
    layer = InMemoryChannelLayer(capacity=4)
    app = URLRouter([websocket_urlpatterns[0].__class__(
        websocket_urlpatterns[0].pattern, SlowConsumer.as_asgi(channel_layer_alias="default"),
    )])

    async def get_state(after):
        return await sync_to_async(state.conversation_state)(conversation, after)

    async def go():
        from unittest import mock

        with mock.patch("channels.layers.channel_layers", {"default": layer}):
            communicator, _, _ = await open_socket(conversation, user=owner, app=app)
            client = ReferenceClient(conversation, get_state)
            hello = await communicator.receive_json_from(timeout=2)
            client.last_seq = hello["last_seq"]
            task = asyncio.ensure_future(runner.run_recording(
                conversation, sample.provider, list(sample.responses), speed=0, coalesce=0,
                layer=layer))
            count = 0
            while True:
                message = await next_message(communicator, 0.5)
                if message is None:
                    if task.done():
                        break
                    continue
                count += 1
                await client.handle(message)
            await task
            await client.resync()  # what the page's idle timer does after silence
            await communicator.disconnect()
            return client, count

    client, _count = async_to_sync(go)()
    stored = dict(conversation.events.values_list("seq", "text"))
    assert client.resyncs >= 2, "the flood should have dropped messages"
    assert client.committed == stored
    assert client.last_seq == max(stored)


def test_hub_reads_each_group_once_per_process(owner):
    from live.hub import hub

    conversation = store.create_conversation(owner=owner)
    layer = InMemoryChannelLayer()

    class Sink:
        def __init__(self):
            self.got = []

        async def live_message(self, event):
            self.got.append(event["text"])

    async def go():
        h = hub(layer)
        group = f"conv.{conversation.pk.hex}"
        a, b = Sink(), Sink()
        await h.join(group, a)
        await h.join(group, b)
        assert len(layer.groups[group]) == 1  # one subscription for both viewers
        await layer.group_send(group, {"type": "live.message", "text": "x"})
        await asyncio.sleep(0.05)
        await h.leave(group, a)
        await layer.group_send(group, {"type": "live.message", "text": "y"})
        await asyncio.sleep(0.05)
        await h.leave(group, b)
        assert group not in layer.groups and not h.readers
        return a.got, b.got

    assert async_to_sync(go)() == (["x"], ["x", "y"])


def test_viewers_connecting_together_share_one_state_read(owner, monkeypatch):
    """Requests made before a read began share it; a request made after it began (it may
    have joined too late for that read) gets a read of its own. Each gets its own copy."""
    import threading

    conversation = store.create_conversation(owner=owner)
    add_user_turn(conversation, "hi")
    reads, began, release = [], threading.Event(), threading.Event()
    real = state.conversation_state

    def counted(c, after=0):
        reads.append(after)
        began.set()
        release.wait(5)
        return real(c, after)

    monkeypatch.setattr(state, "conversation_state", counted)

    async def go():
        first = [asyncio.ensure_future(state.shared_conversation_state(conversation, after))
                 for after in (0, 0, 1)]
        await asyncio.get_running_loop().run_in_executor(None, began.wait, 5)
        late = asyncio.ensure_future(state.shared_conversation_state(conversation))
        await asyncio.sleep(0.05)
        release.set()
        return await asyncio.gather(*first), await late

    (a, b, c), late = async_to_sync(go)()
    assert len(reads) == 2  # the three early requests shared one read; the late one its own
    assert a == b == late and a is not b
    assert [t["changed"] for t in a["turns"]] == [True]
    assert [t["changed"] for t in c["turns"]] == [False]  # its own "after"
    a["turns"].append("mutated")
    assert len(b["turns"]) == 1
