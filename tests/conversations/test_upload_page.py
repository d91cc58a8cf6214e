"""The list page's upload: results stream as JSON lines (conversations, problems, progress), a
plain form post gets a result page, limits are a 413, CSRF and login hold; a replay started
"discard when done" is deleted when it ends unless kept."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient, Client

from conversations import discard
from conversations.models import Conversation
from live import views as live_views
from tests.api.conftest import build_conversation
from tests.importers.samples import chatgpt_tools

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


def files() -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile("chatgpt.json", orjson.dumps([chatgpt_tools()])),
            SimpleUploadedFile("bad.txt", b"hello")]


def lines(response) -> list[dict]:
    return [orjson.loads(line) for line in b"".join(response.streaming_content).splitlines()]


def test_the_list_page_states_the_limits_and_offers_every_format(alice):
    client = Client()
    client.force_login(alice)
    page = client.get("/").content.decode()
    assert "Up to 256 MB per file" in page and "512 MB and 100 files per upload" in page
    for label in ("VCR cassette", "ChatGPT data export", "Claude.ai data export",
                  "Anthropic recording", "Turnscope export document"):
        assert label in page
    assert 'type="file"' in page and "multiple" in page and "uploads.js" in page
    assert "<script>" not in page and "style=" not in page  # the strict CSP holds


def test_upload_streams_one_line_per_result(alice):
    client = Client()
    client.force_login(alice)
    response = client.post("/upload/", {"files": files(), "format": "auto"},
                           HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    messages = lines(response)
    assert messages[0] == {"type": "start", "files": ["chatgpt.json", "bad.txt"],
                           "bytes": messages[0]["bytes"]}
    kinds = [m["type"] for m in messages]
    assert kinds[-1] == "done" and messages[-1] == {"type": "done", "imported": 1,
                                                    "already_imported": 0, "problems": 1}
    [conversation] = [m for m in messages if m["type"] == "conversation"]
    assert conversation["files"] == [0] and conversation["url"] == f"/c/{conversation['id']}/"
    assert Conversation.objects.get(pk=conversation["id"]).owner == alice
    [problem] = [m for m in messages if m["type"] == "problem"]
    assert problem["files"] == [1] and problem["detail"].startswith("bad.txt, line 1: ")
    progress = [m for m in messages if m["type"] == "progress"]
    assert progress and progress[-1]["done"] == progress[-1]["total"] == messages[0]["bytes"]


@pytest.mark.django_db(transaction=True)  # the async path's database thread commits
def test_upload_streams_under_asgi_too(alice):
    async def post():
        client = AsyncClient()
        await client.aforce_login(alice)
        response = await client.post("/upload/", {"files": files()},
                                     headers={"Accept": "application/x-ndjson"})
        return response, [orjson.loads(line) async for chunk in response.streaming_content
                          for line in chunk.splitlines()]

    response, messages = asyncio.run(post())
    assert response.status_code == 200
    assert [m["type"] for m in messages if m["type"] != "progress"] == [
        "start", "conversation", "problem", "done"]


def test_a_plain_form_post_gets_a_result_page(alice):
    client = Client()
    client.force_login(alice)
    response = client.post("/upload/", {"files": files()})
    page = response.content.decode()
    assert response.status_code == 200 and "Imported 1 conversation" in page
    assert "Everest squared" in page and "bad.txt, line 1" in page


def test_limits_csrf_and_login(alice, settings):
    settings.TURNSCOPE_IMPORT_MAX_FILE_BYTES = 100
    client = Client()
    client.force_login(alice)
    response = client.post("/upload/", {"files": files()})
    assert response.status_code == 413
    assert "chatgpt.json is larger than the limit of 100 bytes per file" in \
        response.json()["detail"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/upload/", {"files": files()}).status_code == 403
    assert Client().post("/upload/", {"files": files()}).status_code == 403
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_replay_discard_when_done_and_keep_it(alice):
    source = build_conversation(owner=alice)
    target = build_conversation(owner=alice, title="Replay of Weather in Paris")
    discard.mark(target.pk)
    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{target.pk}/").content.decode()
    assert "discarded when it finishes" in page
    assert 'name="discard"' in client.get(f"/c/{source.pk}/").content.decode()
    client.post(f"/c/{target.pk}/keep/")
    assert not discard.marked(target.pk)
    assert not discard.discard_if_marked(target)  # kept
    discard.mark(target.pk)

    async def replay():
        await live_views._live_replay(source, target, speed=100.0)

    asyncio.run(replay())
    assert not Conversation.objects.filter(pk=target.pk).exists()
    assert Conversation.objects.filter(pk=source.pk).exists()


@pytest.mark.parametrize("grouping, conversations", [
    (None, 2), ("auto", 2), ("continuations", 1), ("each", 2)])
def test_unrelated_recordings_are_apart_unless_the_uploader_says_otherwise(
        alice, grouping, conversations):
    from pathlib import Path

    samples = Path(__file__).resolve().parents[2] / "live" / "samples"
    client = Client()
    client.force_login(alice)
    data = {"files": [SimpleUploadedFile(name, (samples / name).read_bytes())
                      for name in ("anthropic-tides.sse", "anthropic-failed-search.sse")]}
    if grouping:
        data["recordings"] = grouping
    response = client.post("/upload/", data, HTTP_ACCEPT="application/x-ndjson")
    assert lines(response)[-1]["imported"] == conversations
    assert Conversation.objects.filter(owner=alice).count() == conversations
    assert 'name="recordings"' in client.get("/").content.decode()
    bad = client.post("/upload/", {**data, "recordings": "sideways"})
    assert bad.status_code == 400
