"""Importing the same source again is "already imported", never a copy (``conversations.sources``):
every way in (``import``, ``ingest``, ``ingest --each``, the upload page, the API), the
database's unique constraint behind it (a race), and the explicit copy."""

from __future__ import annotations

import io

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import IntegrityError
from django.test import Client
from rest_framework.test import APIClient

from conversations import sources, store, uploads
from conversations.ingest import AlreadyImported, ResponseFile, ingest
from conversations.models import Conversation, Turn
from conversations.projections import export_json
from tests.api.conftest import build_conversation
from tests.importers.samples import chatgpt_tools

pytestmark = pytest.mark.django_db

GOOD = (
    '{"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    '"model":"claude-x","content":[],"usage":{}}}\n'
    '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"answer %d"}}\n'
    '{"type":"content_block_stop","index":0}\n'
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}\n'
    '{"type":"message_stop"}\n'
)


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner")


@pytest.fixture
def other(django_user_model):
    return django_user_model.objects.create_user("other")


def chats(*ids: str) -> bytes:
    out = []
    for key in ids:
        conversation = chatgpt_tools()
        conversation["conversation_id"] = conversation["id"] = key
        conversation["title"] = f"Chat {key}"
        out.append(conversation)
    return orjson.dumps(out)


def memory(name: str, data: bytes) -> uploads.Upload:
    return uploads.Upload(name, lambda: io.BytesIO(data), len(data))


def results(files, owner, **options) -> list:
    return [r for r in uploads.import_files(files, owner=owner, **options)
            if not isinstance(r, uploads.Progress)]


def test_a_second_import_of_an_export_is_already_imported_and_per_owner(owner, other):
    first = results([memory("a.json", chats("c1", "c2"))], owner)
    assert [type(r) for r in first] == [uploads.Imported, uploads.Imported]
    assert [r.conversation.source for r in first] == ["chatgpt:c1", "chatgpt:c2"]
    count = Conversation.objects.count()
    again = results([memory("b.json", chats("c1", "c2", "c3"))], owner)
    assert [type(r) for r in again] == [uploads.Already, uploads.Already, uploads.Imported]
    assert [r.conversation.pk for r in again[:2]] == [r.conversation.pk for r in first]
    assert not again[0].changed
    assert Conversation.objects.count() == count + 1
    # Someone else's import of the same export is theirs.
    theirs = results([memory("a.json", chats("c1"))], other)
    assert [type(r) for r in theirs] == [uploads.Imported]


def test_copy_imports_again_with_no_source(owner):
    results([memory("a.json", chats("c1"))], owner)
    copied = results([memory("a.json", chats("c1"))], owner, copy=True)
    assert [type(r) for r in copied] == [uploads.Imported]
    assert copied[0].conversation.source == ""
    assert Conversation.objects.filter(title="Chat c1").count() == 2
    # The original still answers for the source.
    [again] = results([memory("a.json", chats("c1"))], owner)
    assert isinstance(again, uploads.Already) and again.conversation.source == "chatgpt:c1"


def test_a_recording_and_a_cassette_are_known_by_their_bytes(owner):
    raw = (GOOD % 1).encode()
    [first] = results([memory("r.jsonl", raw)], owner)
    assert first.conversation.source.startswith("sha256:")
    [again] = results([memory("renamed.jsonl", raw)], owner)
    assert isinstance(again, uploads.Already) and again.conversation == first.conversation
    [other] = results([memory("r.jsonl", (GOOD % 2).encode())], owner)
    assert isinstance(other, uploads.Imported)
    # The same bytes through ``ingest`` are the same source (no prompt: the same turn).
    with pytest.raises(AlreadyImported) as known:
        ingest("anthropic", [ResponseFile("x", raw)], owner=owner, remember=True)
    assert known.value.conversation == first.conversation
    # With a prompt it is another conversation.
    summary = ingest("anthropic", [ResponseFile("x", raw)], owner=owner, prompt="Q?",
                     remember=True)
    assert summary.conversation != first.conversation


def test_a_turnscope_document_of_ones_own_is_there_and_another_is_remembered(owner, other):
    mine = build_conversation(owner=owner)
    document = export_json(mine, "native")
    [result] = results([memory("mine.json", document)], owner)
    assert isinstance(result, uploads.Already) and result.conversation == mine
    # Someone else's document: imported once (fresh ids: its own are taken), then known.
    [first] = results([memory("theirs.json", document)], other)
    assert isinstance(first, uploads.Imported) and first.conversation.pk != mine.pk
    assert first.conversation.source == f"turnscope:{mine.pk}"
    [again] = results([memory("theirs.json", document)], other)
    assert isinstance(again, uploads.Already) and again.conversation == first.conversation
    # A copy: today's fresh ids, no source.
    [copy] = results([memory("theirs.json", document)], other, copy=True)
    assert isinstance(copy, uploads.Imported) and copy.conversation.source == ""
    assert copy.conversation.pk not in (mine.pk, first.conversation.pk)


def test_the_database_refuses_a_second_conversation_of_one_source_per_owner(owner):
    store.record_turns([], store.NewConversation(owner=owner, source="chatgpt:x"))
    with pytest.raises(IntegrityError):
        store.record_turns([], store.NewConversation(owner=owner, source="chatgpt:x"))
    store.record_turns([], store.NewConversation(owner=None, source="chatgpt:x"))
    with pytest.raises(IntegrityError):  # nobody's conversations too (NULLs are distinct)
        store.record_turns([], store.NewConversation(owner=None, source="chatgpt:x"))
    # No source: as many as one likes.
    store.record_turns([], store.NewConversation(owner=owner))
    store.record_turns([], store.NewConversation(owner=owner))


def test_a_race_lost_to_another_import_is_already_imported(owner, monkeypatch):
    """Both imports looked and found nothing; the second to write meets the constraint."""
    results([memory("a.json", chats("c1"))], owner)
    monkeypatch.setattr(sources, "already_imported",
                        lambda owner, key, real=sources.already_imported:
                        None if _looking[0] else real(owner, key))
    _looking[0] = True

    def own_document(owner, item):
        _looking[0] = False  # the look is over: the next call is the constraint's
        return None

    monkeypatch.setattr(sources, "own_document", own_document)
    turns = Turn.objects.count()
    [result] = results([memory("a.json", chats("c1"))], owner)
    assert isinstance(result, uploads.Already) and result.conversation.source == "chatgpt:c1"
    assert Turn.objects.count() == turns


_looking = [False]


def test_import_and_ingest_commands_say_already_imported(tmp_path, owner):
    export = tmp_path / "export.json"
    export.write_bytes(chats("c1", "c2"))
    out = io.StringIO()
    call_command("import", "--owner", "owner", str(export), stdout=out)
    first = [line.split("\t") for line in out.getvalue().splitlines()]
    out = io.StringIO()
    call_command("import", "--owner", "owner", str(export), stdout=out)
    again = [line.split("\t") for line in out.getvalue().splitlines()]
    assert [row[0] for row in again] == [row[0] for row in first]
    assert [row[2] for row in again] == ["already imported"] * 2
    out = io.StringIO()
    call_command("import", "--owner", "owner", "--copy", str(export), stdout=out)
    assert "already imported" not in out.getvalue()
    assert Conversation.objects.count() == 4

    folder = tmp_path / "responses"
    folder.mkdir()
    for i in range(3):
        (folder / f"r{i}.jsonl").write_text(GOOD % i)
    out = io.StringIO()
    call_command("ingest", "--provider", "anthropic", "--owner", "owner", "--each",
                 str(folder), stdout=out)
    first = [line.split("\t") for line in out.getvalue().splitlines()]
    assert all(len(row) == 3 for row in first)
    out = io.StringIO()
    call_command("ingest", "--provider", "anthropic", "--owner", "owner", "--each",
                 str(folder), stdout=out)
    again = [line.split("\t") for line in out.getvalue().splitlines()]
    assert [row[0] for row in again] == [row[0] for row in first]
    assert [row[3] for row in again] == ["already imported"] * 3
    # A single ingest of one of them: the last line is still the id, the one made before.
    out = io.StringIO()
    call_command("ingest", "--provider", "anthropic", "--owner", "owner",
                 str(folder / "r1.jsonl"), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("already imported") and lines[-1] == first[1][0]
    assert Conversation.objects.count() == 4 + 3


def test_the_api_reports_already_imported_with_links_and_imports_a_copy_on_request(owner):
    api = APIClient()
    api.force_authenticate(owner)
    body = chats("c1", "c2")
    first = api.post("/api/v1/conversations/import?name=a.json", body,
                     content_type="application/json")
    assert first.status_code == 201 and len(first.json()["imported"]) == 2
    again = api.post("/api/v1/conversations/import?name=a.json", body,
                     content_type="application/json")
    assert again.status_code == 200, again.content
    data = again.json()
    assert data["imported"] == [] and data["conversations"] == 0
    assert [(a["type"], a["id"], a["url"]) for a in data["already_imported"]] == [
        ("already_imported", i["id"], f"/api/v1/conversations/{i['id']}")
        for i in first.json()["imported"]]
    copy = api.post("/api/v1/conversations/import?name=a.json&copy=true", body,
                    content_type="application/json")
    assert copy.status_code == 201 and len(copy.json()["imported"]) == 2
    # Multipart, streamed as JSON lines: one line per conversation as it is stored.
    streamed = api.post("/api/v1/conversations/import", {
        "files": [SimpleUploadedFile("b.json", chats("c2", "c3"))]}, format="multipart",
        HTTP_ACCEPT="application/x-ndjson")
    assert streamed.status_code == 200
    lines = [orjson.loads(line) for line in b"".join(streamed.streaming_content).splitlines()]
    assert [m["type"] for m in lines if m["type"] != "progress"] == [
        "start", "already_imported", "conversation", "done"]
    assert lines[-1] == {"type": "done", "imported": 1, "already_imported": 1, "problems": 0}


def test_the_upload_page_says_which_were_there_and_takes_a_copy_box(owner):
    client = Client()
    client.force_login(owner)
    page = client.get("/").content.decode()
    assert 'name="copy"' in page and "Import a copy" in page
    client.post("/upload/", {"files": [SimpleUploadedFile("a.json", chats("c1"))]})
    response = client.post("/upload/", {"files": [SimpleUploadedFile("a.json", chats("c1"))]},
                           HTTP_ACCEPT="application/x-ndjson")
    lines = [orjson.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    [already] = [m for m in lines if m["type"] == "already_imported"]
    conversation = Conversation.objects.get(owner=owner)
    assert already["url"] == f"/c/{conversation.pk}/"
    result_page = client.post("/upload/", {"files": [SimpleUploadedFile("a.json",
                                                                        chats("c1"))]})
    text = result_page.content.decode()
    assert "already imported" in text and f"/c/{conversation.pk}/" in text
    client.post("/upload/", {"files": [SimpleUploadedFile("a.json", chats("c1"))],
                             "copy": "1"})
    assert Conversation.objects.filter(owner=owner).count() == 2


def test_giving_a_conversation_to_someone_who_imported_it_too_makes_it_their_copy(owner, other):
    [mine] = results([memory("a.json", chats("c1"))], owner)
    [theirs] = results([memory("a.json", chats("c1"))], other)
    store.set_owner(mine.conversation, other)
    mine.conversation.refresh_from_db()
    assert mine.conversation.owner == other and mine.conversation.source == ""
    theirs.conversation.refresh_from_db()
    assert theirs.conversation.source == "chatgpt:c1"


def test_already_imported_is_looked_up_through_the_unique_index_of_sources(owner):
    """The lookup each imported conversation makes reads the (owner, source) unique index,
    not every conversation of the owner in the list's order (an import's time grew with the
    square of its size)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.support import sqlite_plan

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's query plan (PostgreSQL plans from statistics)")
    stored = store.record_turns([], store.NewConversation(title="t", owner=owner,
                                                          source="chatgpt:k1"))[0]
    for who in (owner, None):
        with CaptureQueriesContext(connection) as queries:
            found = sources.already_imported(who, "chatgpt:k1")
        assert found == (stored if who else None)
        plan = sqlite_plan(connection, queries.captured_queries[0]["sql"])
        assert "source=?" in plan and any(index in plan for index in (
            "conversation_owner_source", "conversation_ownerless_source")), plan
