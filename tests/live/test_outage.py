"""With the cache and the channel layer failing (Redis down), a live turn stores everything,
readers get the tail from the database, throttles let requests through and pages still load.
The end-to-end version, with a real Redis killed and restarted, is test_e2e_redis_outage."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.cache.backends.base import BaseCache
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from conversations import store, streaming
from conversations.ingest import ResponseFile, ingest
from conversations.models import StreamingTail, Turn
from live import bundled, publish, runner, state
from tests.live.test_runner import portable

pytestmark = pytest.mark.django_db(transaction=True)


class DownCache(BaseCache):
    """A cache whose server is unreachable: every operation raises, as redis-py does."""

    def __init__(self, location: str = "", params: dict | None = None) -> None:
        super().__init__(params or {})

    def _down(self, *args, **kwargs):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    add = get = set = touch = delete = get_many = set_many = delete_many = clear = _down
    has_key = incr = decr = _down


class DownLayer:
    """A channel layer whose Redis is down."""

    def __init__(self) -> None:
        self.sends = 0

    async def group_send(self, group, message):
        self.sends += 1
        raise ConnectionError("Connection refused")


DOWN = {"default": {"BACKEND": "tests.live.test_outage.DownCache"}}


@override_settings(CACHES=DOWN)
def test_a_turn_streamed_with_redis_down_stores_all_of_it(owner):
    sample = bundled.sample("anthropic-tides")
    conversation = store.create_conversation(owner=owner)
    layer = DownLayer()

    async def go():
        task = asyncio.ensure_future(runner.run_recording(
            conversation, sample.provider, list(sample.responses), prompt=sample.prompt,
            speed=8.0, layer=layer))
        tails = []
        while not task.done():
            await asyncio.sleep(0.1)
            doc = await sync_to_async(state.conversation_state)(conversation)
            tails.extend(t["text"] for t in doc["tails"].values() if t["text"])
        return await task, tails

    turn, tails = async_to_sync(go)()
    summary = ingest(sample.provider,
                     [ResponseFile(r.name, r.raw.encode(), r.context()) for r in sample.responses],
                     owner=owner, title=sample.title, prompt=sample.prompt)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETE
    assert portable(turn) == portable(summary.turn)
    # Readers had the streaming text meanwhile: the runner kept it in the database.
    assert len(set(tails)) >= 2
    texts = [e.text for e in turn.events.all()]
    assert all(any(t.startswith(tail) for t in texts) for tail in tails)
    assert not StreamingTail.objects.exists()  # forgotten once the turn ended
    # Publishing backed off instead of trying (and failing) at every flush.
    assert 0 < layer.sends < 40


def test_publishing_backs_off_and_recovers(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(publish.time, "monotonic", lambda: clock[0])

    class Flaky:
        up = False
        sent: list = []

        async def group_send(self, group, message):
            if not self.up:
                raise ConnectionError("down")
            self.sent.append(message)

    layer = Flaky()
    conversation = "01a231c0-604d-773b-ba68-47d89a7501c9"

    async def send_many(n):
        for _ in range(n):
            await publish.publish(conversation, {"type": "pong"}, layer)

    async_to_sync(send_many)(10)  # one try, then dropped until the backoff has passed
    outage = publish._outage(layer)
    assert outage.backoff == publish.BACKOFF_FIRST and outage.dropped == 10
    clock[0] += publish.BACKOFF_FIRST
    async_to_sync(send_many)(1)  # tried again, failed: a longer backoff
    assert outage.backoff == 2 * publish.BACKOFF_FIRST
    layer.up = True
    clock[0] += 10
    async_to_sync(send_many)(3)
    assert outage.backoff == 0 and len(layer.sent) == 3


def test_the_tail_is_read_from_the_database_while_the_cache_is_down(owner):
    conversation = store.create_conversation(owner=owner)
    [(turn, _)] = store.open_turns(conversation, [store.NewTurn(
        Turn.Role.AGENT, (), status=Turn.Status.STREAMING)])
    tail = {"key": "b0", "kind": "message", "text": "So far", "delta_seq": 3, "block_seq": 1,
            "citations": []}
    streaming.keep_tail_in_db(turn.pk, tail)
    with override_settings(CACHES=DOWN):
        assert streaming.current_tail(turn.pk) == tail
        assert streaming.is_running(turn.pk)  # unknown is never "orphaned"
        doc = state.conversation_state(conversation)
        assert doc["tails"] == {str(turn.pk): tail}
        turn.refresh_from_db()
        assert turn.status == Turn.Status.STREAMING  # not reaped


@override_settings(CACHES=DOWN)
def test_pages_state_api_and_throttles_work_while_the_cache_is_down(owner, client, monkeypatch):
    monkeypatch.setattr(SimpleRateThrottle, "cache", DownCache())
    conversation = store.create_conversation(owner=owner)
    store.open_turns(conversation, [store.NewTurn(Turn.Role.AGENT, (),
                                                  status=Turn.Status.STREAMING)])
    client.force_login(owner)  # a database session: no cache involved
    assert client.get("/").status_code == 200
    assert client.get(f"/c/{conversation.pk}/").status_code == 200
    assert client.get(f"/c/{conversation.pk}/state/").status_code == 200
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=owner).key}")
    assert api.get("/api/v1/conversations").status_code == 200
    anonymous = APIClient()
    assert anonymous.get("/api/v1/conversations").status_code in (401, 403)
