"""Ingest takes what may hold a secret (prompt, title, endpoint) in headers, not in the URL that
access logs keep (issue 11, item 2)."""

from __future__ import annotations

from urllib.parse import quote

import orjson
import pytest

from tests.api.test_secrets import SECRETS, URL_SECRET

pytestmark = pytest.mark.django_db

BODY = b"\n".join(orjson.dumps(line) for line in [
    {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                          "model": "claude-x", "content": [], "usage": {}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
    {"type": "message_stop"},
])


def test_prompt_title_and_endpoint_come_in_headers(alice_api):
    prompt = f"Été — my key {SECRETS[0]} and 中文"
    response = alice_api.generic(
        "POST", "/api/v1/conversations/ingest?provider=anthropic", BODY,
        content_type="application/x-ndjson",
        HTTP_TURNSCOPE_PROMPT=quote(prompt), HTTP_TURNSCOPE_TITLE=quote("Tides — a title"),
        HTTP_TURNSCOPE_ENDPOINT=quote(f"https://x.example/v1beta/models/y?{URL_SECRET}"))
    assert response.status_code == 201, response.content
    doc = alice_api.get(f"/api/v1/conversations/{response.json()['conversation']}").json()
    assert doc["conversation"]["title"] == "Tides — a title"
    assert doc["turns"][0]["events"][0]["text"] == "Été — my key [REDACTED] and 中文"


def test_the_query_parameters_are_still_read(alice_api):
    response = alice_api.generic(
        "POST", "/api/v1/conversations/ingest?provider=anthropic&title=Old+client", BODY,
        content_type="application/x-ndjson")
    assert response.status_code == 201
    doc = alice_api.get(f"/api/v1/conversations/{response.json()['conversation']}").json()
    assert doc["conversation"]["title"] == "Old client"


@pytest.mark.parametrize("value", ["%FF%FE", "a%00b"])
def test_a_badly_encoded_header_is_a_400(alice_api, value):
    response = alice_api.generic(
        "POST", "/api/v1/conversations/ingest?provider=anthropic", BODY,
        content_type="application/x-ndjson", HTTP_TURNSCOPE_TITLE=value)
    assert response.status_code == 400
    assert "title" in response.json()["errors"]
