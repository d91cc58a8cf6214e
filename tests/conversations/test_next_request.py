"""conversations.next_request: stored turns read back as the request side takes them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.next_request import history_for, request_for_continuation, request_for_next_turn
from providers import WireContext
from providers.requests import TurnRequest

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[2] / "live" / "samples"
TIDES = "Why are there two high tides a day?"
TOOLS = {"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}


def _ingest(*names: str, prompt: str = TIDES):
    files = [ResponseFile(name, (SAMPLES / name).read_bytes(),
                          WireContext("2023-06-01", TOOLS)) for name in names]
    return ingest("anthropic", files, prompt=prompt).conversation


def _streamed_blocks(raw: bytes) -> list[str]:
    """The content block types of an SSE stream, as the stream starts them."""
    types = []
    for line in raw.splitlines():
        if line.startswith(b"data:"):
            data = orjson.loads(line[5:])
            if data.get("type") == "content_block_start":
                types.append(data["content_block"]["type"])
    return types


def test_history_reads_user_and_agent_turns_with_their_payloads():
    conversation = _ingest("anthropic-tides.sse")
    user, agent = history_for(conversation)
    assert (user.role, user.text) == ("user", TIDES)
    assert agent.role == "agent" and agent.provider == "anthropic" and agent.model
    assert agent.text
    assert agent.payloads and all(p.provider == "anthropic" for p in agent.payloads)
    assert agent.tool_versions == {"web_search": "web_search_20250305"}
    assert any(note.startswith('web search "') for note in agent.hosted)
    assert agent.response_ids and agent.end_reason == "end_turn"
    assert history_for(conversation, 1) == [user]


def test_the_next_request_sends_the_stored_blocks_back_in_order():
    conversation = _ingest("anthropic-tides.sse")
    request = request_for_next_turn(conversation, TurnRequest(
        "anthropic", "claude-sonnet-4-5", "And why two, not one?", web_search=True))
    _, assistant, prompt = request.body["messages"]
    streamed = _streamed_blocks((SAMPLES / "anthropic-tides.sse").read_bytes())
    sent = [block["type"] for block in assistant["content"]]
    # Every streamed block comes back, in order, but empty text blocks (no content).
    assert [t for t in streamed if t in sent] == sent
    assert set(streamed) - set(sent) <= {"text"}
    assert prompt["content"][0]["text"] == "And why two, not one?"
    assert request.body["tools"] == [{"type": "web_search_20250305", "name": "web_search"}]


def test_another_provider_gets_text():
    conversation = _ingest("anthropic-tides.sse")
    request = request_for_next_turn(conversation, TurnRequest("google", "gemini-2.5-flash",
                                                              "And why two?"))
    model = request.body["contents"][1]
    assert model["role"] == "model" and list(model["parts"][0]) == ["text"]
    assert "signature" not in request.content().decode()


def test_a_paused_turn_is_continued_with_its_blocks():
    conversation = _ingest("anthropic-pause-turn.1.sse")
    request = request_for_continuation(conversation, TurnRequest(
        "anthropic", "claude-sonnet-4-5", web_search=True), 1)
    user, assistant = request.body["messages"]
    assert user["role"] == "user" and assistant["role"] == "assistant"
    assert assistant["content"][-1]["type"] == "server_tool_use"  # the search left open
    with pytest.raises(ValueError, match="no agent turn"):
        request_for_continuation(conversation, TurnRequest("anthropic", "c"), 0)


def test_a_user_turns_tool_results_come_back_after_the_call():
    from conversations import store
    from streams.bodies import ToolResultBody
    from streams.builder import EventRecord
    from streams.parts import Payload

    conversation = _ingest("anthropic-tides.sse")
    result = {"type": "tool_result", "tool_use_id": "toolu_9", "content": "42"}
    # As the recording proxy stores a user message holding a tool result and text.
    store.record_turns([store.NewTurn("user", [
        EventRecord("tool_call_response", body=ToolResultBody("toolu_9", "calc", "42"),
                    payload=Payload("anthropic", "anthropic.content_block", "2023-06-01",
                                    result)),
        EventRecord("message", text="So?"),
    ])], conversation)
    *_, user = history_for(conversation)
    assert user.text == "So?" and [p.format for p in user.payloads] == [
        "anthropic.content_block"]
    body = request_for_next_turn(conversation, TurnRequest("anthropic", "claude-x")).body
    assert body["messages"][-1]["content"] == [result, {"type": "text", "text": "So?"}]
