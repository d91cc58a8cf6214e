"""An imported document's ``forked_from`` is kept only when the importer may read that
conversation: a link to anyone else's would reveal that it exists (issue 11, item 7)."""

from __future__ import annotations

import uuid

import orjson
import pytest

from conversations import store
from conversations.models import Conversation
from conversations.projections import export_json

pytestmark = pytest.mark.django_db


def document(forked_from: str | None) -> dict:
    source = store.create_conversation(title="to import")
    doc = orjson.loads(export_json(source))
    doc["conversation"]["id"] = str(uuid.uuid4())
    doc["conversation"]["forked_from"] = forked_from
    return doc


def imported(client, doc: dict) -> dict:
    response = client.post("/api/v1/conversations/import", doc, format="json")
    assert response.status_code == 201, response.content
    return client.get(f"/api/v1/conversations/{response.json()['imported'][0]['id']}").json()


def test_forked_from_is_kept_only_for_a_conversation_the_importer_may_read(
        alice, bob, alice_api, bob_api, staff_api):
    bobs = store.create_conversation(title="bob's", owner=bob)
    alices = store.create_conversation(title="alice's", owner=alice)
    missing = str(uuid.uuid4())

    # Bob's conversation and one that does not exist look the same to alice: no link.
    for target in (str(bobs.pk), missing):
        doc = imported(alice_api, document(target))
        assert doc["conversation"]["forked_from"] is None
        assert Conversation.objects.get(pk=doc["conversation"]["id"]).forked_from_id is None
    assert not bobs.forks.exists()

    # Her own, and bob's for bob, and anyone's for staff: kept.
    assert imported(alice_api, document(str(alices.pk)))["conversation"]["forked_from"] == str(
        alices.pk)
    assert imported(bob_api, document(str(bobs.pk)))["conversation"]["forked_from"] == str(
        bobs.pk)
    assert imported(staff_api, document(str(bobs.pk)))["conversation"]["forked_from"] == str(
        bobs.pk)


def test_an_import_by_a_management_command_links_any_conversation(bob):
    from conversations.projections import import_document

    bobs = store.create_conversation(title="bob's", owner=bob)
    assert import_document(document(str(bobs.pk))).forked_from_id == bobs.pk
