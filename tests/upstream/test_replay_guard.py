"""The recorded upstream checks what it is sent: a request that sends a served response back
changed (a signature, an encrypted_content, a citation, a block dropped or moved) is refused
with a 400 in the provider's error shape, and the requests built from the stored turns are
accepted. The bundled samples are served, ingested from what was served, and continued."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.next_request import request_for_continuation, request_for_next_turn
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


def _sourdough(encrypted: bool) -> bytes:
    raw = (SAMPLES / "openai-sourdough.sse").read_bytes()
    if not encrypted:  # as recorded: asked for without reasoning.encrypted_content
        return raw
    return raw.replace(b'"type":"reasoning",',
                       b'"type":"reasoning","encrypted_content":"gAAAA-rs",')


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "not-encrypted"])
def test_openai_items_come_back_whole(encrypted):
    raw = _sourdough(encrypted)
    app = RecordedUpstream([reply("openai", raw), reply("openai", raw)], verify_replay=True)
    turn = TurnRequest("openai", "gpt-5-mini", "How often should I feed a starter?",
                       web_search=True)
    conversation = first_turn(app, turn, WireContext())
    good = request_for_next_turn(conversation, TurnRequest("openai", "gpt-5-mini",
                                                           "And in winter?", web_search=True))
    kinds = [i.get("type") for i in good.body["input"]]
    assert {"web_search_call", "message"} <= set(kinds)
    # Nothing is stored upstream (store false): reasoning goes back only with its encrypted
    # content, as nothing else could find it.
    assert good.body["store"] is False
    assert ("reasoning" in kinds) is encrypted

    def no_annotations(body: dict[str, Any]) -> None:
        message = next(i for i in body["input"] if i.get("type") == "message")
        message["content"][0]["annotations"] = []

    def no_reasoning(body: dict[str, Any]) -> None:
        body["input"] = [i for i in body["input"] if i.get("type") != "reasoning"]

    losses = [no_annotations, no_reasoning] if encrypted else [no_annotations]
    for loss in losses:
        assert "changed" in refused(send(app, mutated(good, loss)), "openai")
    if not encrypted:  # sent anyway, it is refused as the API refuses it
        served = app.served[0]
        reasoning = next(b for b in served.blocks if b.get("type") == "reasoning")

        def unfindable(body: dict[str, Any]) -> None:
            body["input"].insert(1, reasoning)

        assert "not persisted" in refused(send(app, mutated(good, unfindable)), "openai")
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


# -- cut answers ---------------------------------------------------------------------------

CUT = {
    "anthropic": ("anthropic-tides.sse", "claude-sonnet-4-5",
                  WireContext("2023-06-01", ANTHROPIC_TOOLS)),
    "openai": ("openai-sourdough.sse", "gpt-5-mini", WireContext()),
    "google": ("gemini-lighthouses.sse", "gemini-2.5-flash", WireContext(
        endpoint="https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash")),
}


def send_cut(app: RecordedUpstream, request: UpstreamRequest) -> bytes:
    """``request`` sent to an upstream whose reply cuts itself off: the bytes that arrived."""
    with contextlib.suppress(ConnectionAbortedError, httpx.HTTPError):
        send(app, request)
    return app.sent[-1]


def cut_turn(provider: str, after: int):
    """The first answer, cut after ``after`` events, stored as it arrived; the upstream
    (which holds the answer again, whole) and the conversation."""
    name, model, context = CUT[provider]
    raw = (SAMPLES / name).read_bytes()
    app = RecordedUpstream([reply(provider, raw, cut_after=after), reply(provider, raw)],
                           verify_replay=True)
    turn = TurnRequest(provider, model, "Tell me about it.", web_search=True)
    got = send_cut(app, build_request([], turn))
    assert app.served[0].cut  # the client did not get it whole
    conversation = ingest(provider, [ResponseFile("served", got, context)],
                          prompt=turn.prompt).conversation
    assert conversation.turns.get(index=1).status == "interrupted"
    return app, conversation, TurnRequest(provider, model, "Go on.", web_search=True)


@pytest.mark.parametrize("provider", list(CUT))
def test_a_cut_answer_goes_back_as_its_provider_accepts_it(provider):
    """At every point a stream can be cut, the next request built from what was stored is
    accepted (the stand-in checks each provider's documented form after a cut)."""
    name = CUT[provider][0]
    events = len(reply(provider, (SAMPLES / name).read_bytes()).chunks)
    for after in range(1, events, 2 if events > 40 else 1):
        app, conversation, turn = cut_turn(provider, after)
        response = send(app, request_for_next_turn(conversation, turn))
        assert response.status_code == 200, (after, response.text)


def _cut_after(provider: str, raw: bytes, marker: bytes) -> int:
    """How many events end with the first one holding ``marker``."""
    chunks = reply(provider, raw).chunks
    return next(n for n, c in enumerate(chunks, 1) if marker in c)


def test_a_server_tool_use_without_its_result_is_refused_after_a_cut():
    raw = (SAMPLES / "anthropic-tides.sse").read_bytes()
    # cut between the search call's end and its result
    after = _cut_after("anthropic", raw, b'"type":"content_block_stop","index":1')
    app, conversation, turn = cut_turn("anthropic", after)
    good = request_for_next_turn(conversation, turn)
    assert not any(b.get("type") == "server_tool_use" for b in _assistant(good.body))
    call = next(b for b in app.served[0].blocks if b["type"] == "server_tool_use")
    orphan = mutated(good, lambda b: _assistant(b).append(call))
    assert "server_tool_use" in refused(send(app, orphan), "anthropic")
    assert send(app, good).status_code == 200


def test_a_cut_text_must_be_what_streamed_and_only_a_cut_answer_may_come_back_cut():
    raw = (SAMPLES / "anthropic-tides.sse").read_bytes()
    after = _cut_after("anthropic", raw, b'"type":"content_block_start","index":4') + 3
    app, conversation, turn = cut_turn("anthropic", after)
    good = request_for_next_turn(conversation, turn)
    last = _assistant(good.body)[-1]
    assert last["type"] == "text" and set(last) == {"type", "text"}  # what streamed, as text

    cut_in = next(b["text"] for b in app.served[0].blocks
                  if b["type"] == "text" and b["text"].startswith(last["text"]))

    def edited(body: dict[str, Any]) -> None:  # more than streamed, and not what was served
        _assistant(body)[-1]["text"] = cut_in + " And the Sun's, too."

    def moved(body: dict[str, Any]) -> None:
        _assistant(body).reverse()

    for change in (edited, moved):
        assert "cut" in refused(send(app, mutated(good, change)), "anthropic")
    # the same request, to an upstream that served the answer whole: it must come back whole
    whole = RecordedUpstream([reply("anthropic", raw), reply("anthropic", raw)],
                             verify_replay=True)
    send(whole, build_request([], TurnRequest("anthropic", "claude-sonnet-4-5", "Tell me.")))
    assert "changed" in refused(send(whole, good), "anthropic")
    assert send(app, good).status_code == 200


def test_a_reasoning_item_without_its_following_item_is_refused_after_a_cut():
    raw = _sourdough(encrypted=True)
    path = SAMPLES / "openai-sourdough.sse"
    chunks = reply("openai", raw).chunks
    # cut just after the second reasoning item is done, before the message it leads to
    done = [n for n, c in enumerate(chunks, 1)
            if b"output_item.done" in c and b'"type":"reasoning"' in c]
    app = RecordedUpstream([reply("openai", raw, cut_after=done[-1]), reply("openai", raw)],
                           verify_replay=True)
    turn = TurnRequest("openai", "gpt-5-mini", "How often?", web_search=True)
    got = send_cut(app, build_request([], turn))
    conversation = ingest("openai", [ResponseFile(path.name, got, WireContext())],
                          prompt=turn.prompt).conversation
    good = request_for_next_turn(conversation, TurnRequest("openai", "gpt-5-mini", "And?"))
    kinds = [i.get("type") for i in good.body["input"]]
    assert kinds.count("reasoning") == 1 and kinds[-2] != "reasoning"
    orphan_item = [b for b in app.served[0].blocks if b.get("type") == "reasoning"][-1]

    def orphan(body: dict[str, Any]) -> None:
        body["input"].insert(len(body["input"]) - 1, orphan_item)

    assert "required following item" in refused(send(app, mutated(good, orphan)), "openai")
    assert send(app, good).status_code == 200


def test_a_cut_gemini_answer_goes_back_as_what_arrived_and_only_a_cut_one():
    raw = (SAMPLES / "gemini-lighthouses.sse").read_bytes()
    app, conversation, turn = cut_turn("google", 6)
    good = request_for_next_turn(conversation, turn)
    model = next(c for c in good.body["contents"] if c["role"] == "model")
    said = "".join(p.get("text", "") for p in model["parts"])
    assert said  # what streamed, as text
    assert send(app, good).status_code == 200
    whole = RecordedUpstream([reply("google", raw), reply("google", raw)], verify_replay=True)
    send(whole, build_request([], TurnRequest("google", "gemini-2.5-flash", "Tell me.")))
    assert "changed" in refused(send(whole, good), "google")
