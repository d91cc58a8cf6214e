"""``POST /api/v1/conversations/import`` reads every format the upload page does, one file as a
raw body or several as multipart, reports per conversation; the browser-session path (cookie
and CSRF token) works for ingest and import, as the docs' "Try it out" sends them."""

from __future__ import annotations

import io
import zipfile

import orjson
import pytest
from django.test import Client

from conversations.models import Conversation
from conversations.projections import export_json
from tests.api.conftest import build_conversation
from tests.importers.samples import chatgpt_tools, claude_blocks
from tests.support import SHARED

pytestmark = pytest.mark.django_db

ANTHROPIC_BODY = orjson.dumps({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [{"type": "text", "text": "Hello from a recording."}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1}})


def session_client(user) -> tuple[Client, str]:
    """A browser: logged in, CSRF enforced, with the token its cookie holds."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/")  # the page sets the CSRF cookie
    return client, client.cookies["csrftoken"].value


def test_session_authenticated_ingest_reads_the_body(alice):
    client, token = session_client(alice)
    for content_type in ("application/json", "application/octet-stream"):
        # copy=true: the second is the same body, which would be reported already ingested
        response = client.post("/api/v1/conversations/ingest?provider=anthropic&copy=true",
                               ANTHROPIC_BODY, content_type=content_type,
                               HTTP_X_CSRFTOKEN=token)
        assert response.status_code == 201, response.content
        conversation = Conversation.objects.get(pk=response.json()["conversation"])
        assert conversation.owner == alice
    # The turn-ingest endpoint of an existing conversation too.
    response = client.post(f"/api/v1/conversations/{conversation.pk}/ingest?provider=anthropic",
                           ANTHROPIC_BODY, content_type="application/json",
                           HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201 and response.json()["turn"]["index"] == 1
    # Without the token, the session path is refused (and nothing written).
    count = Conversation.objects.count()
    refused = client.post("/api/v1/conversations/ingest?provider=anthropic", ANTHROPIC_BODY,
                          content_type="application/json")
    assert refused.status_code == 403 and Conversation.objects.count() == count


def test_session_authenticated_import(alice):
    client, token = session_client(alice)
    doc = orjson.loads(export_json(build_conversation(owner=None), "portable"))
    doc["conversation"]["id"] = "00000000-0000-4000-8000-0000000000aa"
    for turn in doc["turns"]:
        turn["id"] = turn["id"][:-4] + "aaaa"
        for event in turn["events"]:
            event["id"] = event["id"][:-4] + "bbbb"
    response = client.post("/api/v1/conversations/import", orjson.dumps(doc),
                           content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201, response.content
    assert Conversation.objects.get(pk=response.json()["imported"][0]["id"]).owner == alice
    upload = io.BytesIO(orjson.dumps([chatgpt_tools()]))
    upload.name = "conversations.json"
    response = client.post("/api/v1/conversations/import", {"files": [upload]},
                           HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201, response.content
    assert response.json()["imported"][0]["title"] == "Everest squared"


def named(name: str, data: bytes) -> io.BytesIO:
    stream = io.BytesIO(data)
    stream.name = name
    return stream


def test_multipart_import_of_several_formats_reports_per_conversation(alice_api):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("conversations.json", orjson.dumps([claude_blocks()]))
    files = [
        named("chatgpt.json", orjson.dumps([chatgpt_tools(), {"title": "no mapping"}])),
        named("claude.zip", buffer.getvalue()),
        named("response.json", ANTHROPIC_BODY),
        named("notes.txt", b"not a conversation"),
    ]
    response = alice_api.post("/api/v1/conversations/import", {"files": files},
                              format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["conversations"] == 3
    assert [(r["source"], r["format"], r["files"]) for r in body["imported"]] == [
        ("chatgpt.json", "chatgpt", [0]),
        ("claude.zip/conversations.json", "claude_ai", [1]),
        ("response.json", "recording", [2]),
    ]
    claude = body["imported"][1]
    assert len(claude["forks"]) == 1 and claude["forks"][0]["forked_at_turn"] == 0
    assert [(p["source"], p["files"]) for p in body["problems"]] == [
        ("chatgpt.json", [0]), ("notes.txt", [3])]
    assert "no message tree" in body["problems"][0]["detail"]
    assert response["Location"] == f"/api/v1/conversations/{body['imported'][0]['id']}"
    assert alice_api.get(claude["url"]).status_code == 200


def test_raw_body_import_with_a_format_and_a_name(alice_api):
    # Nothing in it names its provider (no stream events, no stop_reason, no claude model).
    body = b'{"type": "message", "model": "m-1", "content": [{"type": "text", "text": "hi"}]}'
    unknown = alice_api.generic("POST", "/api/v1/conversations/import?name=r.json", body,
                                content_type="application/octet-stream")
    assert unknown.status_code == 400 and "choose the format" in unknown.json()["detail"]
    chosen = alice_api.generic("POST", "/api/v1/conversations/import?name=r.json&format="
                               "anthropic", body, content_type="application/octet-stream")
    assert chosen.status_code == 201, chosen.content
    assert chosen.json()["imported"][0]["source"] == "r.json"


def test_cassette_raw_body(alice_api):
    path = SHARED / "fixtures" / "providers" / "google" / \
        "pydantic-ai__test_google_model_web_search_tool.yaml"
    if not path.exists():
        pytest.skip(f"{path} is absent (tests read ../shared in place)")
    response = alice_api.generic("POST", "/api/v1/conversations/import", path.read_bytes(),
                                 content_type="application/x-yaml")
    assert response.status_code == 201, response.content
    [report] = response.json()["imported"]
    assert report["format"] == "vcr" and report["turns"] == 4


def test_size_limits_are_a_413(alice_api, settings):
    settings.TURNSCOPE_IMPORT_MAX_FILE_BYTES = 1000
    settings.TURNSCOPE_IMPORT_MAX_BYTES = 50_000
    big = named("big.json", b" " * 1500 + orjson.dumps([chatgpt_tools()]))
    response = alice_api.post("/api/v1/conversations/import", {"files": [big]},
                              format="multipart")
    assert response.status_code == 413
    assert "big.json is larger than the limit of 1,000 bytes per file" in \
        response.json()["detail"]
    settings.TURNSCOPE_IMPORT_MAX_BYTES = 5000
    several = [named(f"f{i}.json", b"[]" + b" " * 900) for i in range(6)]
    response = alice_api.post("/api/v1/conversations/import", {"files": several},
                              format="multipart")
    assert response.status_code == 413 and "per upload" in response.json()["detail"]
    raw = alice_api.generic("POST", "/api/v1/conversations/import", b" " * 1001,
                            content_type="application/json")
    assert raw.status_code == 413
    assert not Conversation.objects.exists()
