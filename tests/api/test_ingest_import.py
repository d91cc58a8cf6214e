"""Writes through the API: ingest a raw provider body, import an export document. Size limits
(413), malformed input (400 naming the problem), nothing half-written, owners only."""

from __future__ import annotations

import orjson
import pytest

from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from conversations.projections import export_json
from tests.api.conftest import build_conversation
from tests.support import recorded

pytestmark = pytest.mark.django_db

WEB_SEARCH = "vercel-ai__anthropic-web-search-tool.1.chunks.txt"


def anthropic_body() -> bytes:
    [rec] = recorded("anthropic", WEB_SEARCH)
    return rec.raw


def row_counts() -> dict[str, int]:
    return {m.__name__: m.objects.count()
            for m in (Conversation, Turn, Event, Attribution, ProviderPayload)}


def post_ingest(client, body: bytes, query: str = "provider=anthropic", target: str = ""):
    path = f"/api/v1/conversations/{target}/ingest" if target else "/api/v1/conversations/ingest"
    return client.generic("POST", f"{path}?{query}", body,
                          content_type="application/x-ndjson")


def test_ingest_creates_a_conversation_with_one_agent_turn(alice, alice_api):
    response = post_ingest(alice_api, anthropic_body(), "provider=anthropic&title=Search&"
                           "prompt=Find+the+news")
    assert response.status_code == 201, response.content
    body = response.json()
    conversation = Conversation.objects.get(pk=body["conversation"])
    assert response["Location"] == f"/api/v1/conversations/{conversation.pk}"
    assert conversation.owner == alice and conversation.title == "Search"
    assert [t.role for t in conversation.turns.order_by("index")] == ["user", "agent"]
    assert body["turn"]["index"] == 1
    assert body["agent"]["model"] == {"provider": "anthropic",
                                      "model": "claude-sonnet-4-20250514"}
    assert body["status"] == "complete" and body["end_reason"] == "end_turn"
    assert body["citations"] > 0 and body["events"]["message"] > 0
    assert body["hosted_activities"] == {"completed": 1}
    assert body["usage"]["web_search_requests"] == 1


def test_ingest_a_turn_into_your_own_conversation(alice, alice_api, staff_api, bob_api):
    conversation = build_conversation(owner=alice)
    before = conversation.turns.count()
    response = post_ingest(alice_api, anthropic_body(), target=str(conversation.pk))
    assert response.status_code == 201, response.content
    assert response.json()["conversation"] == str(conversation.pk)
    assert conversation.turns.count() == before + 1
    # staff may read it, not append to it; strangers do not see it at all
    assert post_ingest(staff_api, anthropic_body(), target=str(conversation.pk)).status_code == 403
    assert post_ingest(bob_api, anthropic_body(), target=str(conversation.pk)).status_code == 404
    assert conversation.turns.count() == before + 1


@pytest.mark.parametrize("body, needle", [
    (b"", "empty"),
    (b"\xff\xfe not text", "UTF-8"),
    (b'{"type":"message_start","message":{"id":"m","model":"x"}}\n{not json\n', "line 2"),
])
def test_malformed_bodies_are_400_naming_the_problem_and_write_nothing(alice_api, body, needle):
    anthropic_body()
    before = row_counts()
    response = post_ingest(alice_api, body)
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert needle in detail, detail
    assert row_counts() == before


def test_ingest_needs_a_known_provider(alice_api):
    for query in ("", "provider=", "provider=acme"):
        response = post_ingest(alice_api, b"{}", query)
        assert response.status_code == 400
        assert "provider" in response.json()["detail"]


def test_ingest_body_too_large_is_413_before_reading(alice_api, settings):
    settings.TURNSCOPE_MAX_UPLOAD_BYTES = 1000
    before = row_counts()
    response = post_ingest(alice_api, b"x" * 1001)
    assert response.status_code == 413
    assert "1000" in response.json()["detail"]
    assert row_counts() == before


def test_a_body_longer_than_its_content_length_claims_is_still_capped():
    from api.http import PayloadTooLarge, read_limited

    class Stream:
        def read(self, n):
            return b"y" * n  # never ends

    with pytest.raises(PayloadTooLarge):
        read_limited(Stream(), {"CONTENT_LENGTH": "10"}, limit=100)


def test_import_an_export_document(alice, alice_api):
    source = build_conversation(owner=None)
    doc = orjson.loads(export_json(source, "native"))
    doc["conversation"]["id"] = "00000000-0000-4000-8000-000000000001"
    for turn in doc["turns"]:
        turn["id"] = turn["id"][:-4] + "beef"
        for event in turn["events"]:
            event["id"] = event["id"][:-4] + "cafe"
    response = alice_api.post("/api/v1/conversations/import", doc, format="json")
    assert response.status_code == 201, response.content
    [report] = response.json()["imported"]
    assert response.json()["problems"] == [] and report["format"] == "turnscope"
    imported = Conversation.objects.get(pk=report["id"])
    assert imported.owner == alice
    assert orjson.loads(export_json(imported, "native")) == doc


def test_import_keeps_nothing_of_an_invalid_document(alice_api):
    doc = orjson.loads(export_json(build_conversation(owner=None), "portable"))
    doc["turns"][1]["events"][2]["attributions"][0]["range"] = {"start": 0, "end": 10_000}
    before = row_counts()
    response = alice_api.post("/api/v1/conversations/import", doc, format="json")
    assert response.status_code == 400
    assert "range" in response.json()["detail"]
    assert row_counts() == before


@pytest.mark.parametrize("raw, needle", [
    (b"{not json", "not JSON"),
    (b"[]", "not a format this app reads"),
    (b'{"format": "turnscope.conversation"}', "required"),
])
def test_import_malformed_is_400(alice_api, raw, needle):
    response = alice_api.generic("POST", "/api/v1/conversations/import", raw,
                                 content_type="application/json")
    assert response.status_code == 400
    assert needle in response.json()["detail"]


def test_import_of_text_in_no_format_names_the_problem(alice_api):
    response = alice_api.generic("POST", "/api/v1/conversations/import?name=notes.txt",
                                 b"just some notes", content_type="text/plain")
    assert response.status_code == 400
    body = response.json()
    assert body["imported"] == [] and body["problems"][0]["source"] == "notes.txt"
    assert body["detail"].startswith("notes.txt, line 1: not a format this app reads")


def test_import_too_large_is_413(alice_api, settings):
    settings.TURNSCOPE_IMPORT_MAX_FILE_BYTES = 100
    response = alice_api.generic("POST", "/api/v1/conversations/import", b" " * 101,
                                 content_type="application/json")
    assert response.status_code == 413


def test_the_same_ingest_sent_again_is_not_stored_twice(alice, alice_api, bob_api):
    """A client that retries an ingest (its first answer lost when the server died) gets the
    conversation it already has; copy=true stores a copy; another owner's is their own."""
    first = post_ingest(alice_api, anthropic_body(), "provider=anthropic&prompt=Find+the+news")
    assert first.status_code == 201, first.content
    before = row_counts()
    again = post_ingest(alice_api, anthropic_body(), "provider=anthropic&prompt=Find+the+news")
    assert again.status_code == 200, again.content
    body = again.json()
    assert body["already_imported"] is True
    assert body["conversation"] == first.json()["conversation"]
    assert body["url"] == f"/api/v1/conversations/{body['conversation']}"
    assert row_counts() == before  # nothing stored
    # another prompt is another source
    other = post_ingest(alice_api, anthropic_body(), "provider=anthropic&prompt=Other")
    assert other.status_code == 201
    copied = post_ingest(alice_api, anthropic_body(),
                         "provider=anthropic&prompt=Find+the+news&copy=true")
    assert copied.status_code == 201
    assert copied.json()["conversation"] != first.json()["conversation"]
    assert post_ingest(bob_api, anthropic_body(),
                       "provider=anthropic&prompt=Find+the+news").status_code == 201
    assert post_ingest(alice_api, anthropic_body(),
                       "provider=anthropic&copy=maybe").status_code == 400


def test_the_same_turn_ingest_sent_again_is_not_appended_twice(alice, alice_api):
    """A client that retries an ingest into a conversation (its first answer lost) gets the
    turn it already appended: nothing is stored again. copy=true appends it again; another
    prompt is another turn; another conversation is another place."""
    conversation = build_conversation(owner=alice)
    target = str(conversation.pk)
    held = conversation.turns.count()
    query = "provider=anthropic&prompt=Find+the+news"
    first = post_ingest(alice_api, anthropic_body(), query, target=target)
    assert first.status_code == 201, first.content
    turn = first.json()["turn"]
    before = row_counts()
    again = post_ingest(alice_api, anthropic_body(), query, target=target)
    assert again.status_code == 200, again.content
    body = again.json()
    events = f"/api/v1/conversations/{target}/events?turn={turn['index']}"
    assert body["already_imported"] is True and body["conversation"] == target
    assert body["turn"] == {"id": turn["id"], "index": turn["index"], "url": events}
    assert body["url"] == events and "turn" in body["detail"]
    assert row_counts() == before  # no turn, no event stored
    listed = alice_api.get(events).json()["results"]
    assert {e["id"] for e in listed} == {str(pk) for pk in Event.objects.filter(
        turn_id=turn["id"]).values_list("id", flat=True)}

    copied = post_ingest(alice_api, anthropic_body(), f"{query}&copy=true", target=target)
    assert copied.status_code == 201, copied.content
    assert copied.json()["turn"]["index"] > turn["index"]
    other = post_ingest(alice_api, anthropic_body(), "provider=anthropic&prompt=Other",
                        target=target)
    assert other.status_code == 201, other.content
    assert conversation.turns.count() == held + 6  # the first, the copy, the other prompt
    elsewhere = build_conversation(owner=alice)
    assert post_ingest(alice_api, anthropic_body(), query,
                       target=str(elsewhere.pk)).status_code == 201


def test_a_retry_racing_the_first_turn_ingest_is_refused_by_the_constraint(alice, monkeypatch):
    """Two ingests of the same body into one conversation at once: both find no turn before
    storing, the second is refused by the database's constraint and names the first's turn,
    with nothing of it stored."""
    from conversations import ingest

    conversation = build_conversation(owner=alice)
    body = [ingest.ResponseFile("body", anthropic_body())]
    first = ingest.ingest("anthropic", body, owner=alice, prompt="Hi",
                          conversation=conversation, remember=True)
    before = row_counts()
    monkeypatch.setattr(ingest, "_refuse_again", lambda *_: None)  # it looked too early
    with pytest.raises(ingest.AlreadyImported) as raised:
        ingest.ingest("anthropic", body, owner=alice, prompt="Hi", conversation=conversation,
                      remember=True)
    assert raised.value.turn is not None and raised.value.turn.pk == first.turn.pk
    assert row_counts() == before
