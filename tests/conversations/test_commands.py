"""The ``ingest`` and ``import`` commands refuse bad input with a CommandError saying what and
where, and write nothing of it: ``ingest`` through ``conversations.management.refusals``,
``import`` per conversation (each problem named by its file; the rest is imported)."""

from __future__ import annotations

import io

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations import uploads
from conversations.models import Conversation, Event, Turn
from conversations.projections import export_json
from conversations.provenance import ProvenanceError
from tests.api.conftest import build_conversation

pytestmark = pytest.mark.django_db

BAD_MODEL = (
    '{"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    '"model":"has space","content":[],"usage":{}}}\n'
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}\n'
    '{"type":"message_stop"}\n'
)


def rows() -> tuple[int, int, int]:
    return Conversation.objects.count(), Turn.objects.count(), Event.objects.count()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner")


def test_ingest_refuses_a_readable_response_it_cannot_store(tmp_path, owner):
    path = tmp_path / "bad-model.jsonl"
    path.write_text(BAD_MODEL)
    before = rows()
    with pytest.raises(CommandError) as refused:
        call_command("ingest", "--provider", "anthropic", "--owner", "owner", str(path))
    assert str(refused.value) == "the model 'has space' is not a valid identifier"
    assert rows() == before


def test_import_names_the_file_of_an_invalid_document(tmp_path, owner):
    doc = orjson.loads(export_json(build_conversation(owner=None), "portable"))
    doc["turns"][1]["end_reason"] = "bogus_reason"
    path = tmp_path / "export.json"
    path.write_bytes(orjson.dumps(doc))
    before = rows()
    with pytest.raises(CommandError) as refused:
        call_command("import", "--owner", "owner", str(path), stderr=io.StringIO())
    assert str(refused.value) == (f"1 problem: {path}: not a valid export document: turns[1]: "
                                  "unknown end_reason 'bogus_reason'")
    assert rows() == before


def test_import_refuses_every_refusal_alike_not_only_invalid_documents(tmp_path, monkeypatch,
                                                                      owner):
    """A document that passes the schema but is refused further in (here: provenance) is a
    CommandError too, not a traceback."""
    def refuse(doc, owner=None):
        raise ProvenanceError("the model looks like a credential; refusing to store it")

    monkeypatch.setattr(uploads, "import_document", refuse)
    path = tmp_path / "export.json"
    path.write_bytes(export_json(build_conversation(owner=None), "portable"))
    with pytest.raises(CommandError) as refused:
        call_command("import", "--owner", "owner", str(path), stderr=io.StringIO())
    assert str(refused.value) == (f"1 problem: {path}: cannot be imported: the model looks "
                                  "like a credential; refusing to store it")
