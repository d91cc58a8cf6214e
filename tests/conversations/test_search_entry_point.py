"""Google's search suggestions as their own document (``search-entry-point``): the owner's
only, sanitized, with a policy of its own, framed by this site alone."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations import store
from streams.bodies import ArtifactBody
from streams.builder import EventRecord
from tests.support import add_turn

pytestmark = pytest.mark.django_db

CHIP = ('<style>.c { color: #123456; }</style><div class="c"><a href="https://www.google.com/'
        'search?q=tides">tides</a><script>alert(1)</script><img src=x onerror=alert(2)></div>')


@pytest.fixture
def chip(django_user_model):
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    conversation = store.create_conversation(title="chip", owner=owner)
    turn = add_turn(conversation, "agent", EventRecord("provider_artifact", body=ArtifactBody(
        "google.search_entry_point", "Search suggestions", display_html=CHIP)),
        provider="google", model="gemini-2.5-flash")
    event = turn.events.get()
    url = reverse("search-entry-point", args=[conversation.pk, event.pk])
    return owner, conversation, url


def test_the_owner_gets_the_sanitized_document_with_its_own_policy(client, chip):
    owner, conversation, url = chip
    client.force_login(owner)
    response = client.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert "<style>.c { color: #123456 }</style>" in body and "tides</a>" in body
    assert "<script" not in body and "onerror" not in body and "<img" not in body
    policy = response["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "style-src 'unsafe-inline'" in policy
    assert "frame-ancestors 'self'" in policy and "script-src" not in policy
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    # The page frames it by URL (a srcdoc frame would inherit the page's policy).
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert f'src="{url}"' in page and "srcdoc=" not in page


def test_nobody_else_gets_it_and_other_events_are_not_documents(client, chip,
                                                                django_user_model):
    owner, conversation, url = chip
    other = django_user_model.objects.create_user("other", password="pw-other-123")
    client.force_login(other)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    message = add_turn(conversation, "agent", EventRecord("message", text="hi")).events.get()
    assert client.get(reverse("search-entry-point", args=[conversation.pk, message.pk])
                      ).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302  # to the login page
