"""Which conversation and turn a proxied request records into."""

from __future__ import annotations

import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.models import Conversation, Event, Turn
from conversations.projections import export_json, import_document, turn_dict
from conversations.schema import validate_export
from conversations.store import create_conversation
from tests.proxy import sdk
from tests.proxy.cases import Case, fixture
from tests.proxy.conftest import wait_recorded
from tests.proxy.test_sdk import portable, served_context
from tests.support import shared_path
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)

BODY = "vercel-ai__anthropic-web-search-tool.1.json"
PAUSED = "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt"
RESUMED = "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt"
TOOL_1 = "vercel-ai__anthropic-issue-10819-web-fetch-error.1.chunks.txt"
TOOL_2 = "vercel-ai__anthropic-issue-10819-web-fetch-error.2.chunks.txt"


def raw(name: str) -> bytes:
    shared_path("fixtures", "providers", "anthropic", name)
    return fixture("anthropic", name).read_bytes()


def proxied(proxy_url, token, messages, *, stream=False, headers=None):
    case = Case("x", "anthropic", b"", stream, model="claude-sonnet-4-6")
    result = sdk.call(case, f"{proxy_url}/proxy/anthropic",
                      {"X-Turnscope-Token": token, **(headers or {})}, messages=messages)
    wait_recorded()
    return result


def content_of(result) -> list[dict]:
    """The assistant content an app sends back (what the SDK returned)."""
    assert result[0] == "ok", result
    value = result[1]
    if isinstance(value, dict):
        return value["content"]
    blocks: dict[int, dict] = {}  # a stream: the content blocks rebuilt from its events
    for event in value:
        if event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "text_delta":
            blocks[event["index"]]["text"] = blocks[event["index"]].get("text", "") + event[
                "delta"]["text"]
    return [blocks[i] for i in sorted(blocks)]


def clean_blocks(blocks: list[dict]) -> list[dict]:
    """As an app sends content back: without the SDK's None fields."""
    return [{k: v for k, v in b.items() if v is not None and k != "parsed_output"}
            for b in blocks]


def test_three_requests_with_growing_history_are_one_conversation(upstream, proxy_url, token):
    answer = reply("anthropic", raw(BODY))
    upstream.add(answer, answer, answer)
    messages = [{"role": "user", "content": "First question"}]
    for n in range(3):
        result = proxied(proxy_url, token, messages)
        messages = [*messages, {"role": "assistant", "content": clean_blocks(content_of(result))},
                    {"role": "user", "content": f"Question {n + 2}"}]
    [conversation] = Conversation.objects.all()
    assert conversation.title == "First question"
    roles = list(conversation.turns.order_by("index").values_list("role", flat=True))
    assert roles == ["user", "agent"] * 3
    prompts = [t.events.get().text for t in conversation.turns.filter(role="user")
               .order_by("index")]
    assert prompts == ["First question", "Question 2", "Question 3"]


def test_a_different_history_starts_a_new_conversation(upstream, proxy_url, token):
    answer = reply("anthropic", raw(BODY))
    upstream.add(answer, answer)
    proxied(proxy_url, token, [{"role": "user", "content": "One"}])
    proxied(proxy_url, token, [{"role": "user", "content": "One"},
                               {"role": "assistant", "content": "not what was answered"},
                               {"role": "user", "content": "Two"}])
    assert Conversation.objects.count() == 2


def test_pause_turn_continues_the_same_agent_turn_as_ingest_does(upstream, proxy_url, token,
                                                                 owner):
    upstream.add(reply("anthropic", raw(PAUSED)), reply("anthropic", raw(RESUMED)))
    question = [{"role": "user", "content": "Search a lot"}]
    first = proxied(proxy_url, token, question, stream=True)
    paused = Turn.objects.get(role="agent")
    assert paused.end_reason == "pause_turn"
    proxied(proxy_url, token, [*question, {"role": "assistant",
                                           "content": clean_blocks(content_of(first))}],
            stream=True)
    [turn] = Turn.objects.filter(role="agent")
    assert turn.pk == paused.pk
    assert (turn.status, turn.end_reason) == ("complete", "end_turn")
    assert [r["trigger"] for r in turn.responses_list] == ["initial", "pause_turn"]
    summary = ingest("anthropic", [
        ResponseFile(PAUSED, upstream.sent[0], served_context(upstream, upstream.requests[0])),
        ResponseFile(RESUMED, upstream.sent[1], served_context(upstream, upstream.requests[1])),
    ], owner=owner)
    assert portable(turn) == portable(summary.turn)
    # the search left open by the pause is closed by the continuation's first block
    doc = turn_dict(turn, list(turn.events.order_by("seq")))
    states: dict[str, str] = {}
    for event in doc["events"]:
        if event["kind"] == "hosted_activity":
            states[event["activity"]["id"]] = event["activity"]["state"]
    assert "started" not in states.values()


def test_a_tool_result_round_continues_the_agent_turn(upstream, proxy_url, token, owner):
    upstream.add(reply("anthropic", raw(TOOL_1)), reply("anthropic", raw(TOOL_2)))
    question = [{"role": "user", "content": "Show me products"}]
    first = proxied(proxy_url, token, question, stream=True)
    blocks = clean_blocks(content_of(first))
    call = next(b for b in blocks if b["type"] == "tool_use")
    result_block = {"type": "tool_result", "tool_use_id": call["id"],
                    "content": "3 products shown"}
    proxied(proxy_url, token, [*question, {"role": "assistant", "content": blocks},
                               {"role": "user", "content": [result_block]}], stream=True)
    [turn] = Turn.objects.filter(role="agent")
    assert (turn.status, turn.end_reason) == ("complete", "end_turn")
    assert [r["trigger"] for r in turn.responses_list] == ["initial", "tool_result"]
    events = list(turn.events.order_by("seq"))
    [result] = [e for e in events if e.kind == "tool_call_response"]
    assert result.typed_body.to_body()["result"] == {
        "id": call["id"], "name": "", "output": "3 products shown", "is_error": False}
    assert result.payload is not None and result.payload.provider == "anthropic"
    # everything else is what ingest stores for the two responses as one turn
    summary = ingest("anthropic", [
        ResponseFile(TOOL_1, upstream.sent[0], served_context(upstream, upstream.requests[0])),
        ResponseFile(TOOL_2, upstream.sent[1], served_context(upstream, upstream.requests[1])),
    ], owner=owner)
    mine = portable(turn)
    mine["events"] = [e for e in mine["events"] if e["kind"] != "tool_call_response"]
    assert mine == portable(summary.turn)
    # the result comes between the two responses' events
    kinds = [e.kind for e in events]
    assert kinds.index("tool_call_response") == kinds.index("tool_call_request") + 1
    assert Conversation.objects.filter(owner=owner).count() == 2  # the proxied one + ingest's
    assert turn.conversation.turns.count() == 2  # user, agent: no user turn for the results
    # the result is part of the export contract: the document validates and imports whole
    for projection in ("portable", "native"):
        document = orjson.loads(export_json(turn.conversation, projection))
        validate_export(document)
        copy = import_document(document, owner=owner)
        [copied] = Event.objects.filter(conversation=copy, kind="tool_call_response")
        assert copied.typed_body.to_body() == result.typed_body.to_body()
        assert (copied.payload is not None) == (projection == "native")


def test_the_conversation_header_appends_to_that_conversation(upstream, proxy_url, token,
                                                              owner):
    target = create_conversation(title="mine", owner=owner)
    upstream.add(reply("anthropic", raw(BODY)))
    proxied(proxy_url, token, [{"role": "user", "content": "Put it here"}],
            headers={"X-Turnscope-Conversation": str(target.pk)})
    assert Conversation.objects.count() == 1
    assert list(target.turns.values_list("role", flat=True)) == ["user", "agent"]
    assert all(h[0] != "x-turnscope-conversation" for h in upstream.requests[0].headers)


def test_a_foreign_conversation_is_refused_and_nothing_forwarded(upstream, proxy_url, token,
                                                                 django_user_model):
    stranger = django_user_model.objects.create_user("stranger", password="pw-stranger-123")
    theirs = create_conversation(title="theirs", owner=stranger)
    upstream.add(reply("anthropic", raw(BODY)))
    for wanted in (str(theirs.pk), "not-a-uuid"):
        result = proxied(proxy_url, token, [{"role": "user", "content": "Sneak in"}],
                         headers={"X-Turnscope-Conversation": wanted})
        assert result[:3] == ("error", "NotFoundError", 404)
        assert result[3]["error"]["type"] == "not_found_error"
    assert upstream.requests == []
    assert theirs.turns.count() == 0


def test_openai_previous_response_id_threads(upstream, proxy_url, token):
    body = fixture("openai", "vercel-ai__openai-web-search-tool.1.json")
    shared_path("fixtures", "providers", "openai", body.name)
    answer = reply("openai", body.read_bytes())
    upstream.add(answer, answer)
    client = sdk.openai_client(f"{proxy_url}/proxy/openai/v1", {"X-Turnscope-Token": token})
    first = client.responses.create(model="gpt-5-mini", input="First")
    wait_recorded()
    client.responses.create(model="gpt-5-mini", input="Second", previous_response_id=first.id)
    wait_recorded()
    [conversation] = Conversation.objects.all()
    assert list(conversation.turns.order_by("index").values_list("role", flat=True)) == [
        "user", "agent", "user", "agent"]
