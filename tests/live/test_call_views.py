"""The browser side of live calls: New conversation, the composer (owner only, providers with
their reasons), Send and Stop, Fork here, Re-run with…, and Compare."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from conversations import store
from conversations.models import Conversation
from live import bundled, calls
from tests.servers import served
from upstream.recorded import RecordedUpstream, reply

pytestmark = pytest.mark.django_db(transaction=True)

ANTHROPIC_KEY = "sk-ant-api03-PLANTEDviewCALLkey0123456789abcdefghijk"
TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
SOURDOUGH = bundled.sample("openai-sourdough").responses[0].raw.encode()
PROMPT = "Why are there two high tides a day?"


@pytest.fixture
def upstream(settings, monkeypatch):
    app = RecordedUpstream()
    with served(app) as server:
        settings.TURNSCOPE_UPSTREAM = {p: server.url for p in calls.PROVIDERS}
        settings.TURNSCOPE_RECORDED_UPSTREAM = ""
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-PLANTEDviewCALLopenai0123456789abcdefg")
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        yield app


def post_and_wait(user, path, data, json=True):
    """POST to an async view on this loop, then wait for the live turn it started."""

    async def go():
        client = AsyncClient()
        await client.aforce_login(user)
        headers = {"Accept": "application/json"} if json else {}
        response = await client.post(path, data, headers=headers)
        for turn_id in calls.running():
            await calls.wait(turn_id, timeout=30)
        return response

    return async_to_sync(go)()


def test_new_conversation_opens_its_composer(client, owner, upstream):
    client.force_login(owner)
    assert "New conversation" in client.get("/").content.decode()
    response = client.post("/new/")
    conversation = Conversation.objects.get(owner=owner)
    assert response.status_code == 302
    assert response["Location"] == f"/c/{conversation.pk}/#composer"
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="composer"' in page and 'name="prompt"' in page and "Stop" in page
    assert "No GEMINI_API_KEY in the server&#x27;s environment" in page  # disabled, with why
    assert re.search(r'<option value="google"[^>]* disabled', page)
    assert ANTHROPIC_KEY not in page


def test_only_the_owner_gets_the_composer_and_may_send(client, owner, django_user_model,
                                                       upstream):
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    conversation = store.create_conversation(owner=owner)
    client.force_login(staff)
    assert 'id="composer"' not in client.get(f"/c/{conversation.pk}/").content.decode()
    response = post_and_wait(staff, f"/c/{conversation.pk}/send/",
                             {"prompt": PROMPT, "provider": "anthropic", "model": "claude-x"})
    assert response.status_code == 403 and not conversation.turns.exists()


def test_send_streams_a_turn_and_the_page_shows_it_with_its_actions(client, owner, upstream):
    upstream.add(reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=owner)
    response = post_and_wait(owner, f"/c/{conversation.pk}/send/", {
        "prompt": PROMPT, "provider": "anthropic", "model": "claude-sonnet-4-5",
        "web_search": "1"})
    assert response.status_code == 202
    turn = conversation.turns.get(index=1)
    assert response.json()["turn"] == {"id": str(turn.pk), "index": 1}
    assert turn.status == "complete"
    client.force_login(owner)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert PROMPT in page and 'class="sources"' in page
    assert f"/c/{conversation.pk}/turns/1/fork/" in page
    assert f"/c/{conversation.pk}/turns/1/rerun/" in page


def test_send_refusals_are_shown(owner, upstream, monkeypatch):
    conversation = store.create_conversation(owner=owner)
    empty = post_and_wait(owner, f"/c/{conversation.pk}/send/",
                          {"prompt": " ", "provider": "anthropic", "model": "m"})
    assert empty.status_code == 400 and "prompt" in empty.json()["detail"]
    disabled = post_and_wait(owner, f"/c/{conversation.pk}/send/",
                             {"prompt": PROMPT, "provider": "google", "model": "gemini-2.5-pro"})
    assert disabled.status_code == 400 and "GEMINI_API_KEY" in disabled.json()["detail"]
    assert not conversation.turns.exists()


def test_stop_with_nothing_streaming(owner, upstream):
    conversation = store.create_conversation(owner=owner)
    response = post_and_wait(owner, f"/c/{conversation.pk}/stop/", {})
    assert response.status_code == 404


def test_fork_here_then_rerun_then_compare(client, owner, upstream):
    upstream.add(reply("anthropic", TIDES), reply("openai", SOURDOUGH))
    conversation = store.create_conversation(owner=owner, title="Tides")
    post_and_wait(owner, f"/c/{conversation.pk}/send/", {
        "prompt": PROMPT, "provider": "anthropic", "model": "claude-sonnet-4-5",
        "web_search": "1"})
    client.force_login(owner)
    form = client.get(f"/c/{conversation.pk}/turns/1/fork/").content.decode()
    assert "Fork here" in form and 'name="title"' in form
    forked = client.post(f"/c/{conversation.pk}/turns/1/fork/", {"title": "My fork"})
    fork = Conversation.objects.get(title="My fork")
    assert forked["Location"] == f"/c/{fork.pk}/#composer" and fork.turns.count() == 2
    assert client.get(f"/c/{conversation.pk}/turns/0/fork/").status_code == 404  # a user turn

    rerun_form = client.get(f"/c/{conversation.pk}/turns/1/rerun/").content.decode()
    # another provider than the turn's is offered first
    assert re.search(r'<option value="openai"[^>]*selected', rerun_form)
    response = post_and_wait(owner, f"/c/{conversation.pk}/turns/1/rerun/",
                             {"provider": "openai", "model": "gpt-5-mini", "web_search": "1"},
                             json=False)
    branch = Conversation.objects.get(forked_from=conversation, forked_at_turn=0)
    assert response.status_code == 302 and response["Location"] == f"/c/{branch.pk}/"
    assert branch.turns.get(index=1).provider == "openai"
    assert "Compare the answers" in client.get(f"/c/{branch.pk}/").content.decode()

    page = client.get(f"/c/{conversation.pk}/turns/1/compare/").content.decode()
    assert page.count('class="compare-column"') == 2
    assert "anthropic · claude-sonnet-4-5" in page and "openai · gpt-5" in page
    assert "Cited by both" in page and "Cited by only one" in page
    assert "Consulted but not cited" in page
    # seen from the re-run, the same family
    again = client.get(f"/c/{branch.pk}/turns/1/compare/").content.decode()
    assert again.count('class="compare-column"') == 2


def test_the_first_prompt_titles_an_untitled_conversation(owner, upstream):
    upstream.add(reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=owner)
    post_and_wait(owner, f"/c/{conversation.pk}/send/", {
        "prompt": "## Why are there **two** tides?\nSecond line", "provider": "anthropic",
        "model": "claude-sonnet-4-5"})
    conversation.refresh_from_db()
    assert conversation.title == "Why are there two tides?"
    named = store.create_conversation(owner=owner, title="Kept")
    upstream.add(reply("anthropic", TIDES))
    post_and_wait(owner, f"/c/{named.pk}/send/", {
        "prompt": PROMPT, "provider": "anthropic", "model": "claude-sonnet-4-5"})
    named.refresh_from_db()
    assert named.title == "Kept"


def test_the_composer_starts_on_the_last_answers_provider_and_model(client, owner, upstream):
    from conversations.forking import fork
    from conversations.models import Turn
    from streams.builder import EventRecord

    conversation, _ = store.record_turns([store.user_turn("Hi"), store.NewTurn(
        Turn.Role.AGENT, [EventRecord("message", text="Hello")], provider="openai",
        model="gpt-5-mini", finished=True)], store.NewConversation(owner=owner))
    forked = fork(conversation, 1, owner=owner)
    client.force_login(owner)
    for page in (conversation, forked):
        html = client.get(f"/c/{page.pk}/").content.decode()
        assert re.search(r'<option value="openai"[^>]* selected', html), page
        assert 'name="model" value="gpt-5-mini"' in html
    empty = store.create_conversation(owner=owner)  # nothing answered yet: the first enabled
    html = client.get(f"/c/{empty.pk}/").content.decode()
    assert re.search(r'<option value="anthropic"[^>]* selected', html)
