"""Deleting a conversation: it goes whole (turns, events, attributions, recordings, cached
renderings), payloads a fork still uses stay, nobody else's rows change, and another user's
conversation is refused — through the store, the page, the API and the admin."""

from __future__ import annotations

import orjson
import pytest
from django.test import Client

from conversations import store
from conversations.forking import fork
from conversations.models import (
    Attribution,
    Conversation,
    Event,
    ProviderPayload,
    RenderedHTML,
    Turn,
    TurnFragment,
)
from conversations.projections import export_json
from live.models import Recording
from tests.api.conftest import build_conversation, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-123")


def rows() -> dict[str, int]:
    return {model.__name__: model.objects.count()
            for model in (Conversation, Turn, Event, Attribution, ProviderPayload, Recording)}


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_delete_removes_the_conversation_whole_and_nothing_else(alice, bob):
    mine = build_conversation(owner=alice)
    theirs = build_conversation(owner=bob)
    theirs_before = export_json(theirs, "native")
    # Fill every side table the conversation has rows in: cached renderings, a recording.
    assert logged_in(alice).get(f"/c/{mine.pk}/").status_code == 200
    assert RenderedHTML.objects.filter(event__conversation=mine).exists()
    assert TurnFragment.objects.filter(turn__conversation=mine).exists()
    Recording.objects.create(turn=mine.turns.get(index=1), provider="anthropic",
                             responses="[]")
    payloads = set(Event.objects.filter(conversation=mine).exclude(payload=None)
                   .values_list("payload_id", flat=True))
    payloads |= set(Attribution.objects.filter(event__conversation=mine).exclude(replay=None)
                    .values_list("replay_id", flat=True))
    before = rows()
    deleted = store.delete_conversation(mine)
    assert (deleted.turns, deleted.events, deleted.payloads) == (5, 8, len(payloads))
    assert not Conversation.objects.filter(pk=mine.pk).exists()
    assert not Turn.objects.filter(conversation_id=mine.pk).exists()
    assert not Event.objects.filter(conversation_id=mine.pk).exists()
    assert not ProviderPayload.objects.filter(pk__in=payloads).exists()
    assert not RenderedHTML.objects.filter(event__conversation_id=mine.pk).exists()
    assert not TurnFragment.objects.filter(turn__conversation_id=mine.pk).exists()
    after = rows()
    assert before["Recording"] - after["Recording"] == 1
    assert before["Turn"] - after["Turn"] == 5
    assert export_json(theirs, "native") == theirs_before  # nobody else's data touched


def test_payloads_a_fork_uses_stay_until_nothing_uses_them(alice):
    source = build_conversation(owner=alice)
    forked = fork(source, 1, owner=alice)
    shared = set(Event.objects.filter(conversation=forked).exclude(payload=None)
                 .values_list("payload_id", flat=True))
    assert shared
    fork_export = orjson.loads(export_json(forked, "native"))
    store.delete_conversation(source)
    assert ProviderPayload.objects.filter(pk__in=shared).count() == len(shared)
    forked.refresh_from_db()
    assert forked.forked_from_id is None  # its source is gone; the fork itself is intact
    after = orjson.loads(export_json(forked, "native"))
    fork_export["conversation"]["forked_from"] = None
    assert after == fork_export
    store.delete_conversation(forked)
    assert not ProviderPayload.objects.filter(pk__in=shared).exists()


def test_a_streaming_conversation_is_not_deleted(alice):
    conversation = build_conversation(owner=alice)
    store.open_turns(conversation, [store.NewTurn(Turn.Role.AGENT, (),
                                                  status=Turn.Status.STREAMING)])
    with pytest.raises(store.ConversationBusy):
        store.delete_conversation(conversation)
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_page_delete_confirms_then_deletes_and_refuses_other_people(alice, bob):
    mine, theirs = build_conversation(owner=alice), build_conversation(owner=bob)
    client = logged_in(alice)
    page = client.get(f"/c/{mine.pk}/delete/")
    assert page.status_code == 200 and b"cannot be undone" in page.content
    assert client.get(f"/c/{theirs.pk}/delete/").status_code == 404
    assert client.post(f"/c/{theirs.pk}/delete/").status_code == 404
    response = client.post(f"/c/{mine.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert not Conversation.objects.filter(pk=mine.pk).exists()
    assert Conversation.objects.filter(pk=theirs.pk).exists()
    assert "Deleted 1 conversation." in client.get("/").content.decode()


def test_bulk_delete_from_the_list(alice, bob):
    mine = [build_conversation(owner=alice, title=f"mine {i}") for i in range(3)]
    theirs = build_conversation(owner=bob)
    client = logged_in(alice)
    listing = client.get("/").content.decode()
    assert listing.count('name="ids"') == 3  # a checkbox on each of her rows
    ids = [str(mine[0].pk), str(mine[1].pk), str(theirs.pk)]
    confirm = client.post("/delete/", {"ids": ids})
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "Delete 2 conversations?" in text and "mine 0" in text and "mine 1" in text
    assert Conversation.objects.count() == 4  # nothing deleted before the confirmation
    done = client.post("/delete/", {"ids": ids, "confirm": "yes"})
    assert done.status_code == 302
    assert set(Conversation.objects.values_list("title", flat=True)) == {"mine 2",
                                                                         "Weather in Paris"}


def test_rename_page_and_api(alice, bob):
    conversation = build_conversation(owner=alice)
    client = logged_in(alice)
    response = client.post(f"/c/{conversation.pk}/rename/", {"title": "Paris, renamed"})
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.title == "Paris, renamed"
    assert logged_in(bob).post(f"/c/{conversation.pk}/rename/", {"title": "x"}
                               ).status_code == 404
    api = token_client(alice)
    secret = "sk-ant-api03-" + "Z" * 40
    answer = api.patch(f"/api/v1/conversations/{conversation.pk}",
                       {"title": f"Key {secret}"}, format="json")
    assert answer.status_code == 200 and answer.json()["title"] == "Key [REDACTED]"
    assert token_client(bob).patch(f"/api/v1/conversations/{conversation.pk}",
                                   {"title": "x"}, format="json").status_code == 404


def test_api_delete(alice, bob, django_user_model):
    conversation = build_conversation(owner=alice)
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    assert token_client(bob).delete(f"/api/v1/conversations/{conversation.pk}"
                                    ).status_code == 404
    # Staff may read anyone's conversation, not delete it here (the admin is for that).
    assert token_client(staff).delete(f"/api/v1/conversations/{conversation.pk}"
                                      ).status_code == 403
    api = token_client(alice)
    assert api.delete(f"/api/v1/conversations/{conversation.pk}").status_code == 204
    assert api.get(f"/api/v1/conversations/{conversation.pk}").status_code == 404


def test_admin_deletes_through_the_store(admin_client, alice):
    conversation = build_conversation(owner=alice)
    url = f"/admin/conversations/conversation/{conversation.pk}/delete/"
    page = admin_client.get(url)
    assert page.status_code == 200 and b"5 turns, 8 events" in page.content
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Event.objects.filter(conversation_id=conversation.pk).exists()
    others = [build_conversation(owner=alice) for _ in range(2)]
    response = admin_client.post("/admin/conversations/conversation/", {
        "action": "delete_selected", "_selected_action": [str(c.pk) for c in others],
        "post": "yes"})
    assert response.status_code == 302 and not Conversation.objects.exists()
