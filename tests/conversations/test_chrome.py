"""The list and the page chrome (issue 17): one chip per model, "just now", the API link, the
favicon, the status said once; and the admin's payload ids, JSON layout and History."""

from __future__ import annotations

import re
from datetime import timedelta

import orjson
import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from conversations.models import Conversation, Event, ProviderPayload, Turn
from conversations.payload_text import pretty_json_prefix
from conversations.templatetags.turnscope import ago
from streams.builder import EventRecord
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(client):
    user = User.objects.create_user("alice", password="pw-alice-123", is_staff=True,
                                    is_superuser=True)
    client.force_login(user)
    return user


def test_each_model_gets_one_chip_in_the_order_it_was_used(client, alice):
    conversation = Conversation.objects.create(title="many turns", owner=alice)
    for n in range(9):
        add_user_turn(conversation, f"q{n}")
        model = ("claude-a", "gpt-b", "gemini-c")[n % 3]
        add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text="a"),
                 provider={"claude-a": "anthropic", "gpt-b": "openai",
                           "gemini-c": "google"}[model], model=model)
    page = client.get(reverse("conversation-list")).content.decode()
    chips = re.findall(r'<span class="chip model-chip">([^<]*)</span>', page)
    assert chips == ["anthropic · claude-a", "openai · gpt-b", "google · gemini-c"]


def test_a_moment_ago_is_just_now():
    now = timezone.now()
    assert ago(now) == "just now"
    assert ago(now - timedelta(seconds=59)) == "just now"
    assert ago(now - timedelta(minutes=5)) == "5\xa0minutes ago"
    assert ago(None) == ""


def test_the_list_says_just_now(client, alice):
    Conversation.objects.create(title="fresh", owner=alice)
    page = client.get(reverse("conversation-list")).content.decode()
    assert "updated just now" in page and "0\xa0minutes" not in page


def test_the_api_link_and_the_favicon_resolve(client, alice):
    page = client.get(reverse("conversation-list")).content.decode()
    [href] = re.findall(r'<a href="([^"]+)">API</a>', page)
    assert client.get(href).status_code == 200
    assert client.get("/api/v1/docs/").status_code in (301, 302)
    assert client.get("/api/v1/docs/", follow=True).status_code == 200
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in icon.content


@pytest.mark.parametrize(("status", "end_reason"), [("interrupted", "interrupted"),
                                                    ("failed", "error")])
def test_the_status_is_said_once(client, alice, status, end_reason):
    conversation = Conversation.objects.create(title="cut", owner=alice)
    add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text="part"),
             status=status, end_reason=end_reason, provider="anthropic", model="claude-a")
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert f'<span class="badge {status}">' in page
    assert "stopped:" not in page


def test_a_max_tokens_stop_is_still_said(client, alice):
    conversation = Conversation.objects.create(title="long", owner=alice)
    add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text="part"),
             end_reason="max_tokens", provider="anthropic", model="claude-a")
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert "stopped: max_tokens" in page


# -- admin -------------------------------------------------------------------------------------


def _payload(value: object) -> ProviderPayload:
    return ProviderPayload.objects.create(provider="anthropic", format="anthropic.content_block",
                                          version="v1", value=orjson.dumps(value).decode())


def test_payload_ids_show_their_distinguishing_tail(client, alice):
    payloads = [_payload({"n": n}) for n in range(3)]
    page = client.get(reverse("admin:conversations_providerpayload_changelist")).content.decode()
    for p in payloads:
        assert "…" + str(p.pk)[-12:] in page
    assert len({str(p.pk)[:8] for p in payloads}) == 1  # why the head is no use


def test_a_large_payload_preview_is_laid_out_and_wraps(client, alice, settings):
    big = {"items": [{"text": "x" * 200, "n": n} for n in range(6000)]}
    p = _payload(big)
    page = client.get(reverse("admin:conversations_providerpayload_change", args=[p.pk]))
    text = page.content.decode()
    assert 'class="json-value"' in text and "admin-extra.css" in text
    assert '\n    {\n      &quot;text&quot;: &quot;xxx' in text  # one value per line
    css = (settings.BASE_DIR / "static" / "admin-extra.css").read_text()
    assert "pre-wrap" in css and "overflow: auto" in css


def test_a_truncated_prefix_is_laid_out_as_far_as_it_goes():
    assert pretty_json_prefix('{"a": [1, {"b": "x, {y}"}], "c": tr') == (
        '{\n  "a": [\n    1,\n    {\n      "b": "x, {y}"\n    }\n  ],\n  "c": tr')
    assert pretty_json_prefix('["\\"],') == '[\n  "\\"],'  # an escaped quote stays in a string


def test_event_bodies_are_pretty_printed_and_read_only_rows_offer_no_history(client, alice):
    conversation = Conversation.objects.create(title="c", owner=alice)
    add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text="a"),
             provider="anthropic", model="claude-a")
    event = Event.objects.get(conversation=conversation)
    page = client.get(reverse("admin:conversations_event_change", args=[event.pk]))
    text = page.content.decode()
    assert '<pre class="json-value" tabindex="0">' in text
    assert "/history/" not in text
    payload = _payload({"a": 1})
    text = client.get(reverse("admin:conversations_providerpayload_change",
                              args=[payload.pk])).content.decode()
    assert "/history/" not in text
    assert '{\n  &quot;a&quot;: 1\n}' in text
