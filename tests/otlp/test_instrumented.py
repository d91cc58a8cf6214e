"""Apps instrumented with OpenTelemetry, sending to the receiver on a real server: the official
``openai`` SDK calls the fake upstream serving a shared recording (a Responses call with web
search and ``url_citation``); its instrumentation exports the span over OTLP/HTTP.

* OpenInference sends the provider's response whole (``output.value``): the turn holds the
  citations, with their ranges, that ``ingest`` stores for the same recording.
* The contrib ``openai-v2`` instrumentation sends the GenAI conventions' messages only: the
  turn is a skeleton, and the page says that this instrumentation sent no citations.
"""

from __future__ import annotations

import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.models import Turn
from conversations.projections import turn_dict
from tests.otlp.instrumented import instrumented
from tests.proxy import sdk
from tests.support import MORE_FIXTURES, cassette_responses, provider_fixture
from upstream.recorded import reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

RESPONSES = "vercel-ai__openai-web-search-tool.1.json"  # a body: web search, url_citation
RESPONSES_STREAM = "vercel-ai__openai-web-search-tool.1.chunks.txt"
PROMPT = "What happened in tech today?"


def cited(turn: Turn) -> list[tuple]:
    """Every citation of the turn: the text it is on, the source, its range."""
    out = []
    for event in turn.events.filter(kind="message").order_by("seq"):
        for a in event.attributions.order_by("ordinal"):
            out.append((event.text, a.url, a.title, a.range_start, a.range_end, a.integrity))
    return out


def portable(turn: Turn) -> dict:
    doc = turn_dict(turn, list(turn.events.order_by("seq")))
    for key in ("id", "created_at", "index"):
        doc.pop(key)
    for event in doc["events"]:
        event.pop("id"), event.pop("seq")
    return doc


def agent_turn() -> Turn:
    [turn] = Turn.objects.filter(role=Turn.Role.AGENT)
    return turn


@pytest.mark.parametrize("name", [RESPONSES, RESPONSES_STREAM])
def test_openinference_call_arrives_with_the_citations_ingest_stores(
    name, upstream, otlp_url, token, owner, monkeypatch
):
    raw = provider_fixture("openai", name).read_bytes()
    upstream.add(reply("openai", raw))
    stream = name.endswith(".txt")
    with instrumented("openinference", monkeypatch, otlp_url,
                      f"Authorization=Bearer%20{token}"):
        client = sdk.openai_client(upstream.url + "/v1")
        result = client.responses.create(model="gpt-5-mini", input=PROMPT,
                                         tools=[{"type": "web_search"}], stream=stream)
        if stream:
            list(result)

    turn = agent_turn()
    conversation = turn.conversation
    assert conversation.owner == owner
    [user] = conversation.turns.filter(role=Turn.Role.USER)
    assert [e.text for e in user.events.all()] == [PROMPT]
    assert conversation.title == PROMPT

    expected = ingest("openai", [ResponseFile(name, raw)], owner=owner).turn
    assert cited(turn) and cited(turn) == cited(expected)
    assert portable(turn) == portable(expected)  # activities, reasoning, model: as if proxied
    assert (turn.provider, turn.model) == ("openai", "gpt-5-mini-2025-08-07")
    [response] = turn.responses_list
    assert response["source"] == "otlp" and response["instrumentation"] == "openinference"
    assert len(response["trace_id"]) == 32 and len(response["span_id"]) == 16
    assert "citations" not in response  # they were sent


def test_contrib_call_arrives_as_a_skeleton_marked_no_citations_sent(
    upstream, otlp_url, token, owner, monkeypatch, client
):
    # Chat Completions with url_citation annotations (the contrib instrumentation records Chat
    # Completions; its 2.4b0 has no Responses API).
    [recorded] = cassette_responses(provider_fixture(
        "openai", "pydantic-ai__test_openrouter_web_search_annotations_stream.yaml"))
    upstream.add(reply("openai", recorded.raw))
    with instrumented("contrib", monkeypatch, otlp_url, f"X-Turnscope-Token={token}"):
        openai = sdk.openai_client(upstream.url + "/v1")
        list(openai.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": PROMPT}], stream=True))

    turn = agent_turn()
    expected = ingest("openai", [ResponseFile("chat", recorded.raw)], owner=owner).turn
    assert cited(expected)  # the provider did cite: the instrumentation did not send them
    assert cited(turn) == []
    texts = [e.text for e in turn.events.filter(kind="message")]
    assert texts == [e.text for e in expected.events.filter(kind="message")]
    assert (turn.provider, turn.model) == ("openai", "deepseek/deepseek-chat")
    assert turn.end_reason == "end_turn"
    [response] = turn.responses_list
    assert response["citations"] == "not_sent" and response["instrumentation"] == "gen_ai"
    [user] = turn.conversation.turns.filter(role=Turn.Role.USER)
    assert [e.text for e in user.events.all()] == [PROMPT]

    client.force_login(owner)
    page = client.get(f"/c/{turn.conversation_id}/").content.decode()
    assert "This instrumentation sent no citations" in page
    assert page.count("This instrumentation sent no citations") == 1


def test_openinference_chat_call_keeps_its_citations(upstream, otlp_url, token, owner,
                                                     monkeypatch):
    raw = (MORE_FIXTURES / "openai" / "pydantic-ai__test_openrouter_web_search_annotations.json")
    if not raw.exists():
        pytest.skip(f"shared fixture {raw} is absent")
    upstream.add(reply("openai", raw.read_bytes()))
    with instrumented("openinference", monkeypatch, otlp_url, f"X-Turnscope-Token={token}"):
        sdk.openai_client(upstream.url + "/v1").chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": PROMPT}])
    turn = agent_turn()
    expected = ingest("openai", [ResponseFile("chat", raw.read_bytes())], owner=owner).turn
    assert cited(turn) and cited(turn) == cited(expected)


def test_openinference_anthropic_call_arrives_with_the_citations_ingest_stores(
    upstream, otlp_url, token, owner, monkeypatch
):
    raw = provider_fixture("anthropic", "vercel-ai__anthropic-web-search-tool.1.json")
    upstream.add(reply("anthropic", raw.read_bytes()))
    with instrumented("openinference-anthropic", monkeypatch, otlp_url,
                      f"X-Turnscope-Token={token}"):
        sdk.anthropic_client(upstream.url).messages.create(
            model="claude-sonnet-4-5", max_tokens=1024,
            messages=[{"role": "user", "content": PROMPT}],
            tools=[{"type": "web_search_20250305", "name": "web_search"}])
    turn = agent_turn()
    expected = ingest("anthropic", [ResponseFile("anthropic", raw.read_bytes())],
                      owner=owner).turn
    assert cited(turn) and cited(turn) == cited(expected)
    assert (turn.provider, turn.model) == (expected.provider, expected.model)


def test_openinference_gemini_call_arrives_with_the_citations_ingest_stores(
    upstream, otlp_url, token, owner, monkeypatch
):
    [recorded] = cassette_responses(provider_fixture(
        "google", "pydantic-ai__test_google_model_web_search_tool.yaml"))[:1]
    upstream.add(reply("google", recorded.raw))
    model = recorded.url.split("/models/")[1].split(":")[0]
    with instrumented("openinference-google", monkeypatch, otlp_url,
                      f"X-Turnscope-Token={token}"):
        google = sdk.google_client(upstream.url)  # kept: a dropped client closes its transport
        google.models.generate_content(model=model, contents=PROMPT)
    turn = agent_turn()
    expected = ingest("google", [ResponseFile("google", recorded.raw)], owner=owner).turn
    assert cited(turn) and cited(turn) == cited(expected)
