"""Inputs that used to end in a 500: each is a clear 4xx now, and nothing is written. Run on
SQLite and on PostgreSQL (``DATABASE_URL``): the NUL case failed on PostgreSQL only."""

from __future__ import annotations

import orjson
import pytest

from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from conversations.projections import export_json
from streams.errors import MAX_JSON_DEPTH, MalformedInput, check_depth
from tests.api.conftest import build_conversation

pytestmark = pytest.mark.django_db

DEEP = "[" * 1000 + "]" * 1000


def row_counts() -> dict[str, int]:
    return {m.__name__: m.objects.count()
            for m in (Conversation, Turn, Event, Attribution, ProviderPayload)}


def export_with(marker_at, projection: str = "native") -> str:
    """An export document with ``"__DEEP__"`` placed by ``marker_at(doc)``, then the marker
    replaced by a 1,000-deep array (too deep for orjson to encode, so built as text)."""
    doc = orjson.loads(export_json(build_conversation(owner=None), projection))
    marker_at(doc)
    return orjson.dumps(doc).decode().replace('"__DEEP__"', DEEP, 1)


def _event(doc, pred):
    return next(e for t in doc["turns"] for e in t["events"] if pred(e))


PLACES = {
    "title": lambda doc: doc["conversation"].__setitem__("title", "__DEEP__"),
    "activity input": lambda doc: _event(doc, lambda e: e["kind"] == "hosted_activity")[
        "activity"].__setitem__("input", "__DEEP__"),
    "payload value": lambda doc: _event(doc, lambda e: "payload" in e)[
        "payload"].__setitem__("value", "__DEEP__"),
}


@pytest.mark.parametrize("place", list(PLACES))
def test_a_1000_deep_array_in_an_import_is_400_and_writes_nothing(alice_api, place):
    body = export_with(PLACES[place])
    before = row_counts()
    response = alice_api.generic("POST", "/api/v1/conversations/import", body.encode(),
                                 content_type="application/json")
    assert response.status_code == 400, response.content
    assert f"nested more than {MAX_JSON_DEPTH} levels deep" in response.json()["detail"]
    assert row_counts() == before


def test_a_1000_deep_tool_input_in_an_ingest_is_400_and_writes_nothing(alice_api):
    body = orjson.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": "__DEEP__"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
    }).decode().replace('"__DEEP__"', DEEP)
    before = row_counts()
    response = alice_api.generic("POST", "/api/v1/conversations/ingest?provider=anthropic",
                                 body.encode(), content_type="application/json")
    assert response.status_code == 400, response.content
    assert f"nested more than {MAX_JSON_DEPTH} levels deep" in response.json()["detail"]
    assert row_counts() == before


def test_check_depth_is_iterative_and_exact():
    value: list = []
    for _ in range(5000):  # far deeper than the recursion limit
        value = [value]
    with pytest.raises(MalformedInput):
        check_depth(value)
    shallow: list = []
    for _ in range(MAX_JSON_DEPTH - 1):
        shallow = [shallow]
    check_depth(shallow)  # exactly MAX_JSON_DEPTH levels
    with pytest.raises(MalformedInput):
        check_depth([shallow])
    check_depth({"a": [{"b": 1}], "c": "x" * 10})


@pytest.mark.parametrize("field", ["seq", "index", "range"])
def test_integers_beyond_2_53_are_400_and_write_nothing(alice_api, field):
    doc = orjson.loads(export_json(build_conversation(owner=None), "portable"))
    big = 2**63
    if field == "seq":
        doc["turns"][0]["events"][0]["seq"] = big
    elif field == "index":
        doc["turns"][0]["index"] = big
    else:
        cited = _event(doc, lambda e: any("range" in a for a in e.get("attributions", [])))
        next(a for a in cited["attributions"] if "range" in a)["range"] = {"start": big,
                                                                          "end": big + 1}
    before = row_counts()
    response = alice_api.post("/api/v1/conversations/import", doc, format="json")
    assert response.status_code == 400, response.content
    assert "greater than the maximum" in response.json()["detail"]
    assert row_counts() == before


@pytest.mark.parametrize("path", ["/api/v1/conversations/import", "/api/v1/conversations/ingest",
                                  "/api/v1/conversations/{id}/ingest",
                                  "/api/v1/conversations/{id}/fork"])
def test_options_describes_the_raw_body_views(alice, alice_api, path):
    conversation = build_conversation(owner=alice)
    before = row_counts()
    response = alice_api.options(path.format(id=conversation.pk))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["renders"] == ["application/json"] and body["parses"]
    assert "POST" in response["Allow"]
    assert row_counts() == before


def test_options_still_describes_a_view_with_a_serializer(alice_api):
    response = alice_api.options("/api/v1/conversations")
    assert response.status_code == 200 and response.json()["name"]


@pytest.mark.parametrize("name", ["q", "provider", "model", "domain"])
def test_nul_in_a_list_filter_is_400_on_the_page_and_the_api(client, alice, alice_api, name):
    build_conversation(owner=alice)
    client.force_login(alice)
    page = client.get("/", {name: "a\x00b"})
    assert page.status_code == 400
    assert f"{name}: must not contain NUL characters" in page.content.decode()
    api = alice_api.get("/api/v1/conversations", {name: "a\x00b"})
    assert api.status_code == 400
    assert "must not contain NUL characters" in api.content.decode()
    assert client.get("/", {name: "ab"}).status_code == 200
