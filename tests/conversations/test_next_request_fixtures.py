"""Every recording, stored and then answered: the next request built from the stored turns (a
continuation when the turn paused) validates against the official SDK's request types and is
accepted by a recorded upstream that served the recording and checks what comes back
(``verify_replay``). The request to each other provider (the portable projection) validates
too. Recordings: the bundled samples, and both shared sets (read in place)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from conversations import uploads
from conversations.ingest import ResponseFile, ingest
from conversations.models import Conversation
from conversations.next_request import request_for_continuation, request_for_next_turn
from providers import WireContext
from providers.requests import ReplayError, TurnRequest, UpstreamRequest
from tests.sdk_params import anthropic_errors, google_errors, openai_errors
from tests.support import FIXTURE_SETS, SHARED, cassette_responses
from tests.upstream.helpers import send
from upstream.recorded import RecordedUpstream, reply
from upstream.served import served_content

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[2] / "live" / "samples"
PROVIDERS = ("anthropic", "openai", "google")
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5", "google": "gemini-2.5-flash"}
# Responses that are one turn together (a response and its continuation).
CONTINUED = {
    "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt":
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt",
    "pydantic-ai__test_pause_turn_web_search_vcr.interaction1.continuation.json":
        "pydantic-ai__test_pause_turn_web_search_vcr.interaction0.pause_turn.json",
    "vercel-ai__anthropic-issue-10819-web-fetch-error.2.chunks.txt":
        "vercel-ai__anthropic-issue-10819-web-fetch-error.1.chunks.txt",
    "anthropic-pause-turn.2.sse": "anthropic-pause-turn.1.sse",
}
# Recordings whose turn cannot go back to its provider exactly, so building the request is
# refused (never downgraded): a block Turnscope kept only as pieces (an unknown block
# streamed with deltas), and Gemini Interactions steps, which generateContent cannot take.
NOT_REPLAYABLE = {
    "pydantic-ai__test_anthropic_compaction_usage_with_cache_streaming.sse.txt": "as pieces",
    "vercel-ai__interactions-google-search.chunks.txt": "Interactions API",
}


def _cases() -> list[Any]:
    cases = [pytest.param(provider, (path,), id=f"samples/{path.name}")
             for path in sorted(SAMPLES.glob("*.sse"))
             for provider in [path.name.split("-")[0].replace("gemini", "google")]
             if path.name not in CONTINUED.values()]
    if not SHARED.exists():
        cases.append(pytest.param("", (), id="shared-fixtures-absent"))
        return cases
    for fixture_set in FIXTURE_SETS:
        for provider in PROVIDERS:
            folder = SHARED / "fixtures" / fixture_set / provider
            for path in sorted(folder.glob("*")) if folder.exists() else ():
                if path.name in CONTINUED.values():
                    continue  # read with its continuation
                cases.append(pytest.param(provider, (path,), id=f"{fixture_set}/{path.name}"))
    return cases


def _files(paths: tuple[Path, ...]) -> list[Path]:
    path = paths[0]
    first = CONTINUED.get(path.name)
    return [path.with_name(first), path] if first else [path]


def _store(provider: str, paths: list[Path]) -> tuple[list[Conversation], list[bytes]]:
    """The recording stored as Turnscope stores it (a cassette may hold several
    conversations); and the responses it holds."""
    if paths[0].suffix == ".yaml":
        raw = paths[0].read_bytes()
        results = list(uploads.import_files(
            [uploads.Upload(paths[0].name, lambda: io.BytesIO(raw), len(raw))], owner=None))
        imported = [r.conversation for r in results if isinstance(r, uploads.Imported)]
        assert imported and not [r for r in results if isinstance(r, uploads.Failed)]
        return imported, [r.raw for r in cassette_responses(paths[0])]
    responses = [p.read_bytes() for p in paths]
    files = [ResponseFile(p.name, raw, WireContext()) for p, raw in zip(paths, responses,
                                                                          strict=True)]
    summary = ingest(provider, files, prompt="Tell me about it.")
    return [summary.conversation], responses


def _sdk_errors(request: UpstreamRequest) -> list[str]:
    if request.provider == "anthropic":
        return anthropic_errors(request.body)
    if request.provider == "openai":
        return openai_errors(request.body, "chat" if "chat" in request.path else "responses")
    return google_errors(request.body)


def _next_request(conversation: Conversation, turn: TurnRequest) -> UpstreamRequest:
    last = conversation.turns.order_by("-index").first()
    if (last is not None and last.role == "agent" and last.end_reason == "pause_turn"
            and last.provider == (turn.host or turn.provider)):
        return request_for_continuation(conversation, TurnRequest(
            turn.provider, turn.model, web_search=turn.web_search, host=turn.host), last.index)
    return request_for_next_turn(conversation, turn)


@pytest.mark.parametrize(("provider", "paths"), _cases())
def test_the_next_request_validates_and_is_accepted(provider, paths):
    if not paths:
        pytest.skip(f"shared fixtures {SHARED} are absent (tests read ../shared in place)")
    conversations, responses = _store(provider, _files(paths))
    for conversation in conversations:
        _check(provider, paths[0].name, conversation, responses)


def _check(provider: str, name: str, conversation: Conversation, responses: list[bytes]) -> None:
    served = [s for s in (served_content(provider, raw) for raw in responses) if s]
    # To the service that served it (a Vertex AI recording goes on on Vertex AI).
    served_by = conversation.turns.filter(role="agent").values_list("provider", flat=True)
    host = next((s for s in served_by if s and s != provider), "")
    own = TurnRequest(provider, MODELS[provider], "Go on, please.", web_search=True,
                      max_tokens=2048, host=host)
    if name in NOT_REPLAYABLE:
        with pytest.raises(ReplayError, match=NOT_REPLAYABLE[name]):
            _next_request(conversation, own)
        return
    request = _next_request(conversation, own)
    assert _sdk_errors(request) == []
    app = RecordedUpstream([reply(provider, responses[0])], verify_replay=True)
    app.served.extend(served)
    response = send(app, request)
    assert response.status_code == 200, response.text
    served_by = conversation.turns.filter(role="agent").values_list("provider", flat=True)
    if provider == "openai" and any(s.api == "chat" for s in served) and (
            "openai" in served_by):
        # A Chat Completions recording, continued through Chat Completions too (a turn an
        # OpenAI-compatible gateway served, e.g. OpenRouter, is another provider's).
        chat = request_for_next_turn(conversation, TurnRequest(
            provider, "gpt-4o", "Go on, please.", web_search=True, api="chat"))
        assert _sdk_errors(chat) == []
        app.add(reply(provider, responses[0]))
        assert send(app, chat).status_code == 200
    # The same conversation, asked of every other provider: the portable projection.
    for other in PROVIDERS:
        if other != provider:
            portable = request_for_next_turn(conversation, TurnRequest(
                other, MODELS[other], "Go on, please.", web_search=True))
            assert _sdk_errors(portable) == [], other
            assert portable.provider == other
