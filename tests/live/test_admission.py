"""Live calls are rate-limited per user on every path (the composer's Send, Re-run with…, the
API), with the same settings, and a user has at most so many turns streaming at once."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.core.cache import cache
from django.test import AsyncClient
from rest_framework.authtoken.models import Token

from conversations import store
from conversations.models import Conversation
from live import calls
from tests.live.test_call_views import PROMPT, TIDES, post_and_wait
from tests.live.test_call_views import upstream as upstream
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)

ASK = {"prompt": PROMPT, "provider": "anthropic", "model": "claude-sonnet-4-5"}


@pytest.fixture(autouse=True)
def fresh_counts():
    cache.clear()
    yield
    cache.clear()


def test_the_composer_the_rerun_and_the_api_share_one_rate(owner, upstream, settings,
                                                           client):
    settings.TURNSCOPE_LIVE_CALL_RATE = "3/min"
    upstream.add(*[reply("anthropic", TIDES) for _ in range(4)])
    conversation = store.create_conversation(owner=owner)
    for _ in range(2):
        sent = post_and_wait(owner, f"/c/{conversation.pk}/send/", ASK)
        assert sent.status_code == 202
    agent = conversation.turns.filter(role="agent").first().index
    rerun = post_and_wait(owner, f"/c/{conversation.pk}/turns/{agent}/rerun/",
                          {"provider": "anthropic", "model": "claude-opus-4-1"})
    assert rerun.status_code == 202  # the third
    forks = Conversation.objects.count()
    refused = post_and_wait(owner, f"/c/{conversation.pk}/turns/{agent}/rerun/",
                            {"provider": "anthropic", "model": "claude-opus-4-1"})
    assert refused.status_code == 429 and "3/min" in refused.json()["detail"]
    assert Conversation.objects.count() == forks  # a refused re-run forks nothing
    composer = post_and_wait(owner, f"/c/{conversation.pk}/send/", ASK)
    assert composer.status_code == 429 and "Too many live calls" in composer.json()["detail"]
    token = Token.objects.create(user=owner).key
    api = client.post(f"/api/v1/conversations/{conversation.pk}/turns", ASK,
                      content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert api.status_code == 429 and "Too many live calls" in api.json()["detail"]
    assert len(upstream.requests) == 3  # three calls reached the provider, no more


def test_a_user_streams_at_most_so_many_turns_at_once(owner, upstream, settings):
    settings.TURNSCOPE_LIVE_CALLS_CONCURRENT = 1
    upstream.add(reply("anthropic", TIDES, pace=0.2), reply("anthropic", TIDES))
    first = store.create_conversation(owner=owner)
    second = store.create_conversation(owner=owner)

    async def go():
        client = AsyncClient()
        await client.aforce_login(owner)
        json = {"Accept": "application/json"}
        started = await client.post(f"/c/{first.pk}/send/", ASK, headers=json)
        refused = await client.post(f"/c/{second.pk}/send/", ASK, headers=json)
        await client.post(f"/c/{first.pk}/stop/", {}, headers=json)
        for turn_id in calls.running():
            await calls.wait(turn_id, timeout=30)
        again = await client.post(f"/c/{second.pk}/send/", ASK, headers=json)
        for turn_id in calls.running():
            await calls.wait(turn_id, timeout=30)
        return started, refused, again

    started, refused, again = async_to_sync(go)()
    assert started.status_code == 202
    assert refused.status_code == 429
    assert "at most 1 may stream at once" in refused.json()["detail"]
    assert again.status_code == 202  # once the first stopped


def test_without_javascript_the_refusal_is_shown_on_the_page(owner, upstream,
                                                              settings,
                                                              client):
    settings.TURNSCOPE_LIVE_CALL_RATE = "0/min"
    conversation = store.create_conversation(owner=owner)
    refused = post_and_wait(owner, f"/c/{conversation.pk}/send/", ASK, json=False)
    assert refused.status_code == 302
    assert not conversation.turns.exists()
