"""Export contract: schema-valid documents, and export -> import -> export identity."""

from __future__ import annotations

import io

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations import store
from conversations.ingest import ingest
from conversations.models import Conversation, Event, ProviderPayload
from conversations.projections import event_dict, events_queryset, export_json, import_document
from conversations.schema import InvalidDocument, validate_export
from tests.conversations.test_ingest import all_fixture_files, files_for

pytestmark = pytest.mark.django_db

FIXTURES = all_fixture_files() or [pytest.param("", "", 0, marks=pytest.mark.skip(
    reason="../shared/fixtures/providers is absent"))]


def _purge(conversation: Conversation) -> None:
    """Remove a conversation whole, to re-import into an empty store (what importing into
    another Turnscope instance looks like): through the store, which knows every table a
    conversation has rows in."""
    store.delete_conversation(conversation)


@pytest.mark.parametrize(("provider", "name", "index"), FIXTURES)
@pytest.mark.parametrize("projection", ["portable", "native"])
def test_export_is_schema_valid_and_round_trips(provider, name, index, projection):
    summary = ingest(provider, [files_for(provider, [name])[index]])
    first = export_json(summary.conversation, projection)
    doc = orjson.loads(first)
    validate_export(doc)
    # Into the same store: the ids are taken, so fresh ones are minted; nothing else changes.
    copy = import_document(doc)
    assert copy.pk != summary.conversation.pk
    again = orjson.loads(export_json(copy, projection))
    assert _without_ids(again) == _without_ids(doc)
    # Into an empty store: byte-identical.
    _purge(copy)
    _purge(summary.conversation)
    fresh = import_document(orjson.loads(first))
    assert export_json(fresh, projection) == first


def _without_ids(doc: dict) -> dict:
    doc = orjson.loads(orjson.dumps(doc))
    doc["conversation"]["id"] = None
    for turn in doc["turns"]:
        turn["id"] = None
        for event in turn["events"]:
            event["id"] = None
    return doc


def test_portable_projection_has_no_payloads_and_native_has_them():
    summary = ingest("anthropic", files_for(
        "anthropic", ["vercel-ai__anthropic-web-search-tool.1.chunks.txt"]))
    portable = orjson.loads(export_json(summary.conversation, "portable"))
    native = orjson.loads(export_json(summary.conversation, "native"))
    text = orjson.dumps(portable).decode()
    assert '"payload"' not in text and '"replay"' not in text and "encrypted" not in text
    events = native["turns"][0]["events"]
    assert all("payload" in e for e in events)
    cited = [a for e in events if e["kind"] == "message" for a in e["attributions"]]
    assert cited and all(a["replay"]["value"]["encrypted_index"] for a in cited)
    assert native["turns"][0]["agent"]["model"] == {
        "provider": "anthropic", "model": "claude-sonnet-4-20250514"}


def test_an_event_read_without_the_prefetch_says_the_same():
    """event_dict reads the attributions events_queryset prefetched; an event read any other
    way (a plain query) gets the same, in the same (ordinal) order."""
    summary = ingest("anthropic", files_for(
        "anthropic", ["vercel-ai__anthropic-web-search-tool.1.chunks.txt"]))
    events = Event.objects.filter(conversation=summary.conversation, kind="message")
    prefetched = {str(e.pk): event_dict(e, "native") for e in events_queryset("native").filter(
        conversation=summary.conversation, kind="message")}
    plain = {str(e.pk): event_dict(e, "native") for e in events.order_by("-seq")}
    same = orjson.OPT_SORT_KEYS  # payloads are orjson Fragments: compared as bytes
    assert orjson.dumps(plain, option=same) == orjson.dumps(prefetched, option=same)
    assert sum(len(e["attributions"]) for e in plain.values()) > 1
    assert list(plain) != list(prefetched)  # read in another order, matched by id


def test_unknown_payloads_round_trip_unmodified():
    summary = ingest("anthropic", files_for(
        "anthropic", ["vercel-ai__anthropic-clear-thinking.1.chunks.txt"]))
    doc = orjson.loads(export_json(summary.conversation, "native"))
    weird = {"provider": "acme", "format": "acme.block", "version": "2031-01-01",
             "value": {"z": 1, "a": [1.5, None, "\u2028"], "nested": {"b": 2, "a": 1}}}
    doc["turns"][0]["events"][0]["payload"] = weird
    copy = import_document(doc)
    again = orjson.loads(export_json(copy, "native"))
    assert again["turns"][0]["events"][0]["payload"] == weird
    stored = ProviderPayload.objects.get(provider="acme")
    assert stored.value == orjson.dumps(weird["value"]).decode()  # key order kept


def test_undecodable_payload_is_an_error_not_a_downgrade():
    summary = ingest("anthropic", files_for(
        "anthropic", ["vercel-ai__anthropic-clear-thinking.1.chunks.txt"]))
    doc = orjson.loads(export_json(summary.conversation, "native"))
    event = next(e for e in doc["turns"][0]["events"] if e["kind"] == "message")
    event["payload"]["value"] = "not a content block"
    before = Event.objects.count()
    with pytest.raises(InvalidDocument, match="does not decode"):
        import_document(doc)
    assert Event.objects.count() == before


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d["turns"][0].update(role="robot"), "role"),
    (lambda d: d["turns"][0]["agent"].update(model={"provider": "x"}), "model"),
    (lambda d: d["turns"][0]["agent"]["model"].update(extra="no"), "extra"),
    (lambda d: d["turns"][0]["agent"]["model"].update(model="sk-ant-api03-abcdefghijklmnop"),
     "credential"),
    (lambda d: d["turns"][0]["events"][-1].update(kind="telepathy"), "events"),
    (lambda d: d["turns"][0]["events"][-1]["attributions"].append(
        {"source": {"url": "https://x"}, "excerpt": "", "incomplete": False}), "title"),
])
def test_bad_documents_are_refused_with_a_clear_error(mutate, message):
    summary = ingest("anthropic", files_for(
        "anthropic", ["vercel-ai__anthropic-clear-thinking.1.chunks.txt"]))
    doc = orjson.loads(export_json(summary.conversation, "portable"))
    mutate(doc)
    count = Conversation.objects.count()
    with pytest.raises(InvalidDocument, match=message):
        import_document(doc)
    assert Conversation.objects.count() == count


def test_range_outside_text_is_refused():
    summary = ingest("openai", files_for("openai", ["vercel-ai__openai-web-search-tool.1.json"]))
    doc = orjson.loads(export_json(summary.conversation, "portable"))
    message = next(e for e in doc["turns"][0]["events"] if e["kind"] == "message")
    message["attributions"][0]["range"] = {"start": 0, "end": len(message["text"]) + 5}
    with pytest.raises(InvalidDocument, match="range"):
        import_document(doc)


def test_export_and_import_commands(tmp_path, django_user_model):
    owner = django_user_model.objects.create_user("importer")
    summary = ingest("anthropic", files_for(
        "anthropic", ["vercel-ai__anthropic-web-fetch-tool.error.json"]))
    exported = io.StringIO()
    call_command("export", str(summary.conversation.pk), "--projection", "native",
                 stdout=exported)
    path = tmp_path / "export.json"
    path.write_text(exported.getvalue())
    validate_export(orjson.loads(path.read_bytes()))
    out = io.StringIO()
    call_command("import", str(path), "--owner", owner.username, stdout=out)
    new_id, _title, turns, source = out.getvalue().strip().splitlines()[-1].split("\t")
    document_turns = len(orjson.loads(path.read_bytes())["turns"])
    assert source == str(path) and turns == f"{document_turns} turns"
    assert Conversation.objects.filter(pk=new_id).exists()
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(CommandError, match=r"bad\.json, line 1: not JSON"):
        call_command("import", str(tmp_path / "bad.json"), "--owner", owner.username)
    with pytest.raises(CommandError, match="no conversation"):
        call_command("export", "not-a-uuid")
