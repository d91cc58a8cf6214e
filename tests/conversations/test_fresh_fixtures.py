"""The third recording set (``../shared/fixtures/providers-fresh``) through the store: what
ingest keeps of each wire feature that set brought, decided from the wire and the providers'
documentation."""

from __future__ import annotations

import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.projections import export_json, import_document
from conversations.rendering import render_export
from conversations.schema import validate_export
from tests.conversations.test_projections import _purge
from tests.support import recorded

pytestmark = pytest.mark.django_db

FRESH = "providers-fresh"
PDF = "rig__pdf_document_citations_decode_as_page_locations.json"


def ingest_fresh(provider: str, name: str):
    (rec,) = recorded(provider, name, FRESH)
    return ingest(provider, [ResponseFile(name, rec.raw, rec.context)])


def test_a_page_location_citation_keeps_its_pages_in_every_projection() -> None:
    # The wire: start_page_number 1, end_page_number 2, and Anthropic documents the end as
    # exclusive: the passage is on page 1 (the whitepaper's abstract is).
    summary = ingest_fresh("anthropic", PDF)
    for projection in ("portable", "native"):
        doc = orjson.loads(export_json(summary.conversation, projection))
        validate_export(doc)
        (message,) = [e for e in doc["turns"][0]["events"] if e["kind"] == "message"]
        (attribution,) = message["attributions"]
        assert attribution["source"] == {"url": "", "title": "Bitcoin Whitepaper"}
        assert attribution["pages"] == {"first": 1, "last": 1}
        assert "range" not in attribution
    markdown = render_export(doc, "markdown")
    assert "Bitcoin Whitepaper, p. 1 — “In" in markdown
    html = render_export(doc, "html")
    assert '<bdi>Bitcoin Whitepaper</bdi> <span class="pages">p. 1</span>' in html
    # Export -> import -> export keeps them, byte for byte.
    first = export_json(summary.conversation, "native")
    _purge(summary.conversation)
    again = import_document(orjson.loads(first))
    assert export_json(again, "native") == first


def test_a_document_with_impossible_pages_is_refused() -> None:
    from conversations.schema import InvalidDocument

    summary = ingest_fresh("anthropic", PDF)
    doc = orjson.loads(export_json(summary.conversation, "portable"))
    _purge(summary.conversation)
    (message,) = [e for e in doc["turns"][0]["events"] if e["kind"] == "message"]
    for pages in ({"first": 4, "last": 3}, {"first": 0, "last": 1}, {"first": 1}):
        message["attributions"][0]["pages"] = pages
        with pytest.raises(InvalidDocument, match="pages"):
            import_document(doc)


def _portable(summary) -> dict:
    doc = orjson.loads(export_json(summary.conversation, "portable"))
    validate_export(doc)
    (turn,) = [t for t in doc["turns"] if t["role"] == "agent"]
    return turn


def _activities(turn: dict) -> dict[str, dict]:
    """Each activity at its last transition, by id, in the order they started."""
    out: dict[str, dict] = {}
    for event in turn["events"]:
        if event["kind"] == "hosted_activity":
            out[event["activity"]["id"]] = event["activity"]
    return out


def test_xai_server_side_tools_are_hosted_activities_not_client_calls() -> None:
    # The wire: two custom_tool_call items xAI ran itself (status completed, xs_call_ ids), the
    # request's tools only x_search; usage.num_server_side_tools_used 6 (2 + 4 web searches).
    turn = _portable(ingest_fresh("openai", "vercel-ai__xai-x-search-tool.chunks.txt"))
    assert turn["agent"]["model"] == {"provider": "xai", "model": "grok-4-fast-reasoning"}
    assert turn["end_reason"] == "end_turn"
    assert not [e for e in turn["events"] if e["kind"].startswith("tool_call")]
    activities = list(_activities(turn).values())
    assert [(a["name"], a["state"]) for a in activities] == [
        ("x_search", "completed"), *[("web_search", "completed")] * 4,
        ("view_media", "completed")]
    assert activities[0]["input"] == {"tool": "x_keyword_search",
                                      "query": "from:xai filter:media", "limit": 20,
                                      "mode": "Latest"}
    assert activities[-1]["input"]["tool"] == "view_x_video"
    # xAI reports no results of its searches: none is said to have found nothing.
    assert not [a for a in activities if a["summary"] == "no results"]
    assert all("sources" not in a for a in activities)  # not reported, which is not "none"
    ledger = turn["ledger"]
    assert [s["name"] for s in ledger["searches"]] == ["x_search", *["web_search"] * 4]
    assert ledger["searches"][0]["queries"] == ["from:xai filter:media"]
    assert [s["results"] for s in ledger["searches"]] == [None] * 5
    assert ledger["integrity"]["searches_without_results"] == []


def test_xai_web_search_answer_is_labelled_xai() -> None:
    turn = _portable(ingest_fresh("openai", "vercel-ai__xai-web-search-tool.1.chunks.txt"))
    assert turn["agent"]["model"]["provider"] == "xai"
    assert turn["end_reason"] == "end_turn"


def test_groq_executed_tools_are_a_hosted_search_with_its_results() -> None:
    summary = ingest_fresh("openai", "pydantic-ai__test_groq_model_web_search_tool.json")
    turn = _portable(summary)
    assert turn["agent"]["model"] == {"provider": "groq", "model": "groq/compound"}
    assert turn["end_reason"] == "end_turn"
    (search,) = _activities(turn).values()
    assert search["name"] == "web_search" and search["state"] == "completed"
    assert search["input"] == {"query": "What is the weather in San Francisco today?"}
    assert search["summary"] == "17 results"
    assert search["sources"][0] == {"url": "https://www.weatherapi.com/",
                                    "title": "Weather in San Francisco"}
    (ledger_search,) = turn["ledger"]["searches"]
    assert ledger_search["results"] == 17
    kinds = [e["kind"] for e in turn["events"]]
    assert kinds.index("hosted_activity") < kinds.index("message")  # searched, then answered
    assert "reasoning" in kinds


@pytest.mark.parametrize("name", ["pydantic-ai__test_deepseek_model_thinking_part.json",
                                  "vercel-ai__deepseek-reasoning.chunks.txt"])
def test_deepseek_answers_are_labelled_deepseek(name: str) -> None:
    turn = _portable(ingest_fresh("openai", name))
    assert turn["agent"]["model"] == {"provider": "deepseek", "model": "deepseek-reasoner"}
    assert [e["kind"] for e in turn["events"]] == ["reasoning", "message"]


@pytest.mark.parametrize(("name", "provider"), [
    ("rig__perplexity_completion_with_perplexity_options.json", "perplexity"),
    ("pydantic-ai__test_openai_responses_model_builtin_tools_web_search.json", "openai"),
])
def test_other_openai_wire_answers_keep_their_names(name: str, provider: str) -> None:
    assert _portable(ingest_fresh("openai", name))["agent"]["model"]["provider"] == provider


def _fresh_files() -> list:
    from tests.support import FRESH_FIXTURES

    if not FRESH_FIXTURES.exists():
        return [pytest.param("", "", marks=pytest.mark.skip(reason=f"{FRESH_FIXTURES} is absent"))]
    return [(provider, path.name) for provider in ("anthropic", "openai", "google")
            for path in sorted((FRESH_FIXTURES / provider).iterdir()) if path.is_file()]


@pytest.mark.parametrize(("provider", "name"), _fresh_files())
def test_every_fresh_file_round_trips_and_keeps_no_server_call_as_a_client_one(provider, name):
    from streams.bodies import ArtifactBody
    from tests.conversations.test_more_fixtures import SERVER_RUN

    summary = ingest_fresh(provider, name)
    assert summary.turn.provider and summary.turn.model
    first = export_json(summary.conversation, "native")
    doc = orjson.loads(first)
    validate_export(doc)
    events = doc["turns"][-1]["events"]
    artifacts = {ArtifactBody.from_body(e).type for e in events if e["kind"] == "provider_artifact"}
    assert not artifacts & SERVER_RUN, artifacts
    if not [e for e in events if e["kind"] == "tool_call_request"]:
        assert doc["turns"][-1]["end_reason"] != "tool_use"
    _purge(summary.conversation)
    again = import_document(orjson.loads(first))
    assert export_json(again, "native") == first


def test_the_page_says_xais_searches_kept_their_results(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    (rec,) = recorded("openai", "vercel-ai__xai-x-search-tool.chunks.txt", FRESH)
    summary = ingest("openai", [ResponseFile("x.txt", rec.raw, rec.context)], owner=user)
    client.force_login(user)
    page = client.get(f"/c/{summary.conversation.pk}/").content.decode()
    assert "results not reported by the provider" in page
    assert "None result" not in page and "no grounding data returned" not in page
    assert "X search" in page and "x_keyword_search" in page
