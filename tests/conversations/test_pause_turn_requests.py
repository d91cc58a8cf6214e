"""pause_turn against a two-response fake upstream: the first response pauses, the
continuation built from the stored turn is the request the API expects (the same request with
the paused message sent back last, unchanged), the upstream accepts it, and the turn stored with
both responses completes with the open search closed. The loop guard's setting and count."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.models import Event
from conversations.next_request import request_for_continuation
from providers import WireContext
from providers.requests import TurnRequest, UpstreamRequest, build_request
from tests.support import provider_fixture
from upstream.recorded import RecordedUpstream, reply
from upstream.served import served_content

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[2] / "live" / "samples"
CONTEXT = WireContext("2023-06-01", {"tools": [{"type": "web_search_20250305",
                                                "name": "web_search"}]})
PAIRS = {
    "bundled": lambda: [SAMPLES / "anthropic-pause-turn.1.sse",
                        SAMPLES / "anthropic-pause-turn.2.sse"],
    "recorded": lambda: [provider_fixture("anthropic", name) for name in (
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt",
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt",
    )],
}


def send(app: RecordedUpstream, request: UpstreamRequest) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://upstream") as client:
            response = await client.request(request.method, request.path,
                                            content=request.content(),
                                            headers=list(request.headers))
            await response.aread()
            return response

    return asyncio.run(go())


@pytest.mark.parametrize("pair", list(PAIRS))
def test_a_paused_turn_is_continued_and_completes(pair):
    paused_raw, continuation_raw = (p.read_bytes() for p in PAIRS[pair]())
    app = RecordedUpstream([reply("anthropic", paused_raw), reply("anthropic", continuation_raw)],
                           verify_replay=True)
    asked = TurnRequest("anthropic", "claude-sonnet-4-5", "Run the searches, one at a time.",
                        web_search=True, max_tokens=15000, thinking=4096)
    first = build_request([], asked)
    answer = send(app, first)
    assert answer.status_code == 200
    conversation = ingest("anthropic", [ResponseFile("1", answer.content, CONTEXT)],
                          prompt=asked.prompt).conversation
    paused = conversation.turns.get(index=1)
    assert paused.end_reason == "pause_turn"
    open_calls = set(Event.objects.filter(turn=paused, kind="hosted_activity")
                     .values_list("activity_id", flat=True))
    closed = {e.activity_id for e in Event.objects.filter(turn=paused, kind="hosted_activity")
              if e.typed_body.state != "started"}
    assert open_calls - closed, "the paused response leaves a search open"

    continuation = request_for_continuation(
        conversation, TurnRequest(asked.provider, asked.model, "", asked.web_search,
                                  asked.max_tokens, asked.thinking), paused.index)
    # The request the API expects: the first one, and the paused message sent back last,
    # exactly as it was served (rebuilt from the wire independently of the adapter).
    served = served_content("anthropic", paused_raw)
    assert served is not None
    expected = {**first.body,
                "messages": [*first.body["messages"],
                             {"role": "assistant", "content": list(served.blocks)}]}
    assert continuation.body == expected
    assert continuation.headers == first.headers and continuation.path == first.path

    again = send(app, continuation)
    assert again.status_code == 200, again.text
    # The turn with both responses (as the runner stores a continuation): complete, and the
    # search the pause left open is closed by the continuation's first block.
    whole = ingest("anthropic", [ResponseFile("1", answer.content, CONTEXT),
                                 ResponseFile("2", again.content, CONTEXT)],
                   prompt=asked.prompt).conversation
    turn = whole.turns.get(index=1)
    assert (turn.status, turn.end_reason) == ("complete", "end_turn")
    states: dict[str, str] = {}
    for event in Event.objects.filter(turn=turn, kind="hosted_activity").order_by("seq"):
        states[event.activity_id] = event.typed_body.state
    assert open_calls <= set(states) and set(states.values()) <= {"completed", "failed"}
    assert [r["trigger"] for r in turn.responses_list] == ["initial", "pause_turn"]
