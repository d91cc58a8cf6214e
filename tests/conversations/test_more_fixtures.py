"""The second recording set (``providers-more``) through the store: every file ingests, its
export is schema-valid and round-trips byte for byte through import, and no file of either set
leaves a provider artifact for something the provider documents as a tool it runs itself."""

from __future__ import annotations

import re

import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.models import Event
from conversations.projections import export_json, import_document
from conversations.schema import validate_export
from streams.bodies import ArtifactBody
from tests.conversations.test_projections import _purge
from tests.support import FIXTURE_SETS, MORE_FIXTURES, SHARED, recorded

pytestmark = pytest.mark.django_db

# Block and item types the providers document as run on their own side (Anthropic's server
# tools and MCP connector, OpenAI's hosted tools, Gemini's code execution and server-side tool
# parts, the Interactions API's hosted call steps): never an artifact.
SERVER_RUN = {
    "server_tool_use", "mcp_tool_use", "mcp_tool_result", "web_search_tool_result",
    "web_fetch_tool_result", "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "advisor_tool_result", "tool_search_tool_result",
    "web_search_call", "file_search_call", "code_interpreter_call", "mcp_call",
    "mcp_list_tools", "mcp_approval_request", "image_generation_call", "tool_search_output",
    "google.part.toolCall", "google.part.toolResponse", "google.part.executableCode",
    "google.part.codeExecutionResult", "google.interactions.google_search_call",
    "google.interactions.google_search_result", "google.interactions.code_execution_call",
    "google.interactions.code_execution_result",
}


def turns_of(fixture_set: str) -> list[tuple[str, str, list[str], int]]:
    """(provider, label, file names, interaction) per turn a set holds: a pause_turn body and
    its continuation are one turn; each interaction of a cassette is one."""
    root = SHARED / "fixtures" / fixture_set
    if not root.exists():
        return []
    out = []
    for provider in ("anthropic", "openai", "google"):
        names = sorted(p.name for p in (root / provider).iterdir() if p.is_file())
        for name in names:
            if ".interaction1.continuation" in name:
                continue
            group = [name]
            twin = name.replace(".interaction0.pause_turn", ".interaction1.continuation")
            if twin != name and twin in names:
                group.append(twin)
            count = len(recorded(provider, name, fixture_set)) if name.endswith(".yaml") else 1
            out += [(provider, f"{name}#{i}", group, i) for i in range(count)]
    return out


def files(provider: str, fixture_set: str, names: list[str], index: int) -> list[ResponseFile]:
    out = []
    for name in names:
        recs = recorded(provider, name, fixture_set)
        if name.endswith(".yaml"):
            recs = [recs[index]]
        out += [ResponseFile(name, rec.raw, rec.context) for rec in recs]
    return out


MORE = turns_of("providers-more") or [pytest.param("", "", [], 0, marks=pytest.mark.skip(
    reason=f"{MORE_FIXTURES} is absent"))]
BOTH = [(s, *t) for s in FIXTURE_SETS for t in turns_of(s)] or [
    pytest.param("", "", "", [], 0, marks=pytest.mark.skip(reason="../shared is absent"))]


@pytest.mark.parametrize(("provider", "label", "names", "index"), MORE)
@pytest.mark.parametrize("projection", ["native", "portable"])
def test_every_file_round_trips_through_import(provider, label, names, index, projection):
    summary = ingest(provider, files(provider, "providers-more", names, index))
    turn = summary.turn
    assert turn.provider and turn.model and turn.status == "complete"
    for event in turn.events.filter(kind="message"):
        assert event.text  # no empty message events
    first = export_json(summary.conversation, projection)
    validate_export(orjson.loads(first))
    _purge(summary.conversation)
    again = import_document(orjson.loads(first))
    assert export_json(again, projection) == first


@pytest.mark.parametrize(("fixture_set", "provider", "label", "names", "index"), BOTH)
def test_no_server_run_tool_is_left_as_an_artifact(fixture_set, provider, label, names, index):
    summary = ingest(provider, files(provider, fixture_set, names, index))
    artifacts = [ArtifactBody.from_body(orjson.loads(e.body)).type
                 for e in Event.objects.filter(turn=summary.turn, kind="provider_artifact")]
    assert not set(artifacts) & SERVER_RUN, artifacts
    assert not [a for a in artifacts if a.startswith("delta:")], artifacts


def test_the_new_kinds_and_fields_are_stored_and_exported() -> None:
    refusal = ingest("anthropic", files("anthropic", "providers-more",
                                        ["llm-anthropic__test_refusal_raises.sse.txt"], 0))
    (event,) = refusal.turn.events.all()
    assert event.kind == "refusal" and refusal.turn.end_reason == "refusal"
    doc = orjson.loads(export_json(refusal.conversation, "native"))
    (exported,) = doc["turns"][0]["events"]
    assert exported["refusal"]["category"] == "reasoning_extraction"
    assert exported["payload"]["format"] == "anthropic.message_delta"
    approval = ingest("openai", files("openai", "providers-more",
                                      ["vercel-ai__openai-mcp-tool-approval.1.chunks.txt"], 0))
    assert approval.turn.end_reason == "approval_request"
    image = ingest("openai", files("openai", "providers-more",
                                   ["vercel-ai__azure-image-generation-tool.1.chunks.txt"], 0))
    doc = orjson.loads(export_json(image.conversation, "portable"))
    (activity,) = [e["activity"] for e in doc["turns"][0]["events"]
                   if e["kind"] == "hosted_activity"]
    assert activity["state"] == "started"
    assert activity["output"]["images"][0]["url"].startswith("data:image/png;base64,")


def test_a_cut_streamed_call_is_stored_incomplete() -> None:
    raw = (MORE_FIXTURES / "google" / "vercel-ai__google-stream-tool-call-arguments.chunks.txt"
           ).read_bytes() if MORE_FIXTURES.exists() else b""
    if not raw:
        pytest.skip(f"{MORE_FIXTURES} is absent")
    cut = b"\n".join(raw.splitlines()[:2]) + b"\n"  # the first call, its arguments on the way
    summary = ingest("google", [ResponseFile("cut.txt", cut)])
    assert summary.turn.status == "interrupted"
    doc = orjson.loads(export_json(summary.conversation, "portable"))
    (call,) = [e["call"] for e in doc["turns"][0]["events"] if e["kind"] == "tool_call_request"]
    assert call == {"id": call["id"], "name": "getWeather",
                    "arguments": {"location": "Boston"}, "incomplete": True}
    validate_export(doc)
    _purge(summary.conversation)
    again = import_document(doc)
    assert orjson.loads(export_json(again, "portable")) == doc


def test_the_page_shows_only_checked_data_images_under_its_policy(client, django_user_model):
    """A hostile document's image outputs: only the checked data: PNG reaches an <img>, and the
    page's policy allows images from the app and data: URLs, nothing else."""
    from django.urls import reverse

    from tests.rendering.test_activities import HOSTILE_IMAGES, PNG, activity, document, turn

    user = django_user_model.objects.create_user("viewer", password="pw-viewer-123")
    hostile = [{"url": u, "media_type": "image/png"} for u in HOSTILE_IMAGES if isinstance(u, str)]
    events = [activity("e1", 1, id="ig_1", name="image_generation", state="completed",
                       output={"images": [*hostile, {"url": PNG, "media_type": "image/png"}]})]
    doc = document(turn(*events))
    doc["conversation"]["id"] = "0190f7a2-0000-7000-8000-000000000001"
    doc["turns"][0]["id"] = "0190f7a2-0000-7000-8000-000000000002"
    doc["turns"][0]["events"][0]["id"] = "0190f7a2-0000-7000-8000-000000000003"
    conversation = import_document(doc, owner=user)
    client.force_login(user)
    response = client.get(reverse("conversation-detail", args=[conversation.pk]))
    html = response.content.decode()
    shown = [src for src in re.findall(r'<img[^>]*\ssrc="([^"]*)"', html)
             if not src.startswith("/static/")]  # the app's own logo
    assert shown == [PNG]
    assert "onerror" not in html and "tracker.example" not in html
    policy = response["Content-Security-Policy"]
    (img,) = re.findall(r"img-src ([^;]*)", policy)
    assert img.split() == ["'self'", "data:"]
