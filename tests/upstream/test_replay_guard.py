"""The recorded upstream checks what it is sent: a request that sends a served response back
changed (a signature, an encrypted_content, a citation, a block dropped or moved) is refused
with a 400 in the provider's error shape, and the requests built from the stored turns are
accepted. The bundled samples are served, ingested from what was served, and continued."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.replay import request_for_continuation, request_for_next_turn
from providers import WireContext
from providers.requests import TurnRequest, UpstreamRequest, build_request
from tests.support import provider_fixture
from tests.upstream.helpers import send
from upstream.recorded import RecordedUpstream, reply
from upstream.served import served_content

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[2] / "live" / "samples"
ANTHROPIC_TOOLS = {"tools": [{"type": "web_search_20250305", "name": "web_search"}]}


def first_turn(app: RecordedUpstream, turn: TurnRequest, context: WireContext):
    """Ask the first question, and ingest the answer as served (the bytes the client got)."""
    response = send(app, build_request([], turn))
    assert response.status_code == 200
    return ingest(turn.provider, [ResponseFile("served", response.content, context)],
                  prompt=turn.prompt).conversation


def refused(response: httpx.Response, provider: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()
    if provider == "anthropic":
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        return error["error"]["message"]
    if provider == "google":
        assert error["error"]["status"] == "INVALID_ARGUMENT"
    return error["error"]["message"]


def mutated(request: UpstreamRequest, change: Callable[[dict[str, Any]], None]) -> UpstreamRequest:
    body = copy.deepcopy(request.body)
    change(body)
    return UpstreamRequest(request.provider, request.path, body, request.headers,
                           request.method, request.query, request.stream)


def _assistant(body: dict[str, Any]) -> list[dict[str, Any]]:
    return next(m for m in body["messages"] if m["role"] == "assistant")["content"]


def _first(blocks: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(b for b in blocks if b.get("type") == kind)


def _cited(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return next(b for b in blocks if b.get("type") == "text" and b.get("citations"))


ANTHROPIC_LOSSES: dict[str, Callable[[dict[str, Any]], None]] = {
    "signature dropped": lambda b: _first(_assistant(b), "thinking").pop("signature"),
    "encrypted_index dropped": lambda b: _cited(_assistant(b))["citations"][0].pop(
        "encrypted_index"),
    "citations dropped": lambda b: _cited(_assistant(b)).pop("citations"),
    "encrypted_content dropped": lambda b: _first(_assistant(b), "web_search_tool_result")[
        "content"][0].pop("encrypted_content"),
    "a block dropped": lambda b: _assistant(b).pop(1),
    "blocks reordered": lambda b: _assistant(b).reverse(),
    "text only": lambda b: next(m for m in b["messages"] if m["role"] == "assistant").update(
        content=[{"type": "text", "text": "\n".join(
            x["text"] for x in _assistant(b) if x.get("type") == "text")}]),
}


PAUSED = {
    # The bundled sample (no thinking) and the real recording (thinking with its signature,
    # 11 searches, the last one open).
    "bundled": lambda: [SAMPLES / "anthropic-pause-turn.1.sse",
                        SAMPLES / "anthropic-pause-turn.2.sse"],
    "recorded": lambda: [provider_fixture("anthropic", name) for name in (
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt",
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt",
    )],
}
# What each recording lacks, so that loss cannot be made of it.
LACKS = {"bundled": {"signature dropped"}, "recorded": {"encrypted_index dropped",
                                                        "citations dropped"}}


@pytest.fixture(params=list(PAUSED))
def paused_anthropic(request):
    paths = PAUSED[request.param]()
    app = RecordedUpstream([reply("anthropic", p.read_bytes()) for p in paths],
                           verify_replay=True)
    app.source = request.param  # type: ignore[attr-defined]
    turn = TurnRequest("anthropic", "claude-sonnet-4-5", "Search the tide tables, please.",
                       web_search=True)
    conversation = first_turn(app, turn, WireContext("2023-06-01", ANTHROPIC_TOOLS))
    return app, conversation, turn


def test_the_continuation_built_from_stored_turns_is_accepted(paused_anthropic):
    app, conversation, turn = paused_anthropic
    assert conversation.turns.get(index=1).end_reason == "pause_turn"
    continuation = request_for_continuation(
        conversation, TurnRequest(turn.provider, turn.model, web_search=True), 1)
    response = send(app, continuation)
    assert response.status_code == 200, response.text
    assert app.served[0].blocks  # what was checked against


@pytest.mark.parametrize("loss", list(ANTHROPIC_LOSSES))
def test_a_lossy_continuation_is_refused(paused_anthropic, loss):
    app, conversation, turn = paused_anthropic
    if loss in LACKS[app.source]:
        pytest.skip(f"the {app.source} recording has nothing {loss!r} could change")
    good = request_for_continuation(
        conversation, TurnRequest(turn.provider, turn.model, web_search=True), 1)
    bad = mutated(good, ANTHROPIC_LOSSES[loss])
    assert "served response 1 changed" in refused(send(app, bad), "anthropic")
    assert app.pending == 1  # nothing was answered in its place


def test_openai_items_come_back_whole():
    raw = (SAMPLES / "openai-sourdough.sse").read_bytes()
    app = RecordedUpstream([reply("openai", raw), reply("openai", raw)], verify_replay=True)
    turn = TurnRequest("openai", "gpt-5-mini", "How often should I feed a starter?",
                       web_search=True)
    conversation = first_turn(app, turn, WireContext())
    good = request_for_next_turn(conversation, TurnRequest("openai", "gpt-5-mini",
                                                           "And in winter?", web_search=True))
    kinds = [i.get("type") for i in good.body["input"]]
    assert {"reasoning", "web_search_call", "message"} <= set(kinds)

    def no_annotations(body: dict[str, Any]) -> None:
        message = next(i for i in body["input"] if i.get("type") == "message")
        message["content"][0]["annotations"] = []

    def no_reasoning(body: dict[str, Any]) -> None:
        body["input"] = [i for i in body["input"] if i.get("type") != "reasoning"]

    for loss in (no_annotations, no_reasoning):
        assert "changed" in refused(send(app, mutated(good, loss)), "openai")
    assert send(app, good).status_code == 200


def test_gemini_parts_come_back_with_their_signatures():
    raw = (SAMPLES / "gemini-lighthouses.sse").read_bytes()
    app = RecordedUpstream([reply("google", raw), reply("google", raw)], verify_replay=True)
    turn = TurnRequest("google", "gemini-2.5-flash", "A short history of lighthouses?",
                       web_search=True)
    conversation = first_turn(app, turn, WireContext(
        endpoint="https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"))
    good = request_for_next_turn(conversation, TurnRequest("google", "gemini-2.5-flash",
                                                           "And in Japan?"))

    def cut_text(body: dict[str, Any]) -> None:
        model = next(c for c in body["contents"] if c["role"] == "model")
        model["parts"][-1]["text"] = model["parts"][-1]["text"][:-20]

    assert "changed" in refused(send(app, mutated(good, cut_text)), "google")
    assert send(app, good).status_code == 200


def test_what_was_served_is_rebuilt_from_the_wire_not_the_adapters():
    served = served_content("anthropic", (SAMPLES / "anthropic-pause-turn.1.sse").read_bytes())
    assert served is not None
    cited = _cited(list(served.blocks))
    assert cited["text"] and all(c["encrypted_index"] for c in cited["citations"])
    assert served.blocks[-1]["type"] == "server_tool_use"
    assert served.blocks[-1]["input"]  # the streamed input JSON, read whole
    assert served_content("anthropic", orjson.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "x"}})) is None


def test_what_cannot_be_read_is_not_checked_and_odd_requests_do_not_break_it():
    from upstream.served import refusal

    assert served_content("anthropic", b"event: content_block_delta\ndata: {}\n\n") is None
    assert served_content("google", b'data: {"candidates": [{}]}\n\n') is None  # no finish
    served = served_content("anthropic", (SAMPLES / "anthropic-tides.sse").read_bytes())
    assert served is not None
    search = next(b for b in served.blocks if b["type"] == "web_search_tool_result")
    mangled = {**search, "content": "results"}
    odd = {"messages": [{"role": "assistant", "content": [mangled, {"type": "text", "text": 3}]}]}
    assert "changed" in (refusal("anthropic", odd, [served]) or "")
    assert refusal("anthropic", {"messages": "no"}, [served]) is None  # nothing sent back
    assert refusal("anthropic", {"messages": [{"role": "assistant", "content": [7]}]},
                   [served]) is None


def _chat_stream(*pieces: str) -> bytes:
    """A Chat Completions stream as OpenAI sends one (synthetic: the recordings of this API
    were all served by other providers through a compatible gateway)."""
    chunks = [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
               "model": "gpt-4o-2024-08-06",
               "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
              for piece in pieces]
    chunks.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "gpt-4o-2024-08-06",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def test_chat_completions_messages_come_back_whole():
    raw = _chat_stream("Tides follow ", "the Moon.")
    app = RecordedUpstream([reply("openai", raw), reply("openai", raw)], verify_replay=True)
    turn = TurnRequest("openai", "gpt-4o", "Why tides?", api="chat")
    conversation = first_turn(app, turn, WireContext())
    good = request_for_next_turn(conversation, TurnRequest("openai", "gpt-4o", "And?",
                                                           api="chat"))
    assert good.body["messages"][1] == {"role": "assistant", "content": "Tides follow the Moon."}

    def cut(body: dict[str, Any]) -> None:
        body["messages"][1]["content"] = "Tides follow the Moon"

    assert "changed" in refused(send(app, mutated(good, cut)), "openai")
    assert send(app, good).status_code == 200
