"""Vocabularies are registries: every registered value has a producer that really emits it,
and no producer emits an unregistered value."""

from __future__ import annotations

from collections import defaultdict

import orjson
import pytest

import providers
from conversations.ingest import ResponseFile, assemble
from streams import parts
from streams.builder import EventBuilder
from streams.registries import ALL, END_REASONS, Registry
from tests.support import (
    FRESH_FIXTURES,
    MORE_FIXTURES,
    PROVIDER_FIXTURES,
    REPO,
    SHARED,
    recorded,
)

SAMPLES = REPO / "live" / "samples"


def _anthropic(stop_reason: str, content: list | None = None) -> bytes:
    return orjson.dumps({
        "id": "msg_x", "type": "message", "role": "assistant", "model": "claude-x",
        "content": content or [{"type": "text", "text": "x"}], "stop_reason": stop_reason,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    })


def _openai(status: str = "completed", reason: str | None = None, output: list | None = None):
    body = {"id": "resp_x", "object": "response", "model": "gpt-x", "status": status,
            "output": output or [{"type": "message", "id": "msg_1", "role": "assistant",
                                  "status": "completed", "content": [
                                      {"type": "output_text", "text": "x", "annotations": []}]}]}
    if reason:
        body["incomplete_details"] = {"reason": reason}
    return orjson.dumps(body)


def _google(finish: str, parts_: list | None = None) -> bytes:
    return orjson.dumps({
        "candidates": [{"content": {"role": "model", "parts": parts_ or [{"text": "x"}]},
                        "finishReason": finish}],
        "modelVersion": "gemini-x", "responseId": "r1",
    })


# Values the recordings never show, produced from small hand-written responses.
SYNTHETIC = [
    ("anthropic", _anthropic("refusal")),
    ("anthropic", _anthropic("max_tokens")),
    ("anthropic", _anthropic("stop_sequence")),
    ("anthropic", b'{"type":"message_start","message":{"id":"m","type":"message","role":'
                  b'"assistant","model":"claude-x","content":[]}}\n{"type":"error","error":'
                  b'{"type":"overloaded_error","message":"Overloaded"}}\n'),
    ("openai", _openai("incomplete", "max_output_tokens")),
    ("openai", _openai("incomplete", "content_filter")),
    ("openai", _openai(output=[{"type": "function_call", "id": "fc_1", "call_id": "call_1",
                                "name": "f", "arguments": "{}", "status": "completed"}])),
    ("openai", _openai(output=[{"type": "code_interpreter_call", "id": "ci_1",
                                "status": "completed", "code": "1+1", "container_id": "c",
                                "outputs": []}])),
    ("anthropic", _anthropic("end_turn", [
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
        {"type": "server_tool_use", "id": "srv_2", "name": "web_fetch",
         "input": {"url": "https://example.org/"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srv_2",
         "content": {"type": "web_fetch_tool_result_error", "error_code": "unavailable"}},
        {"type": "server_tool_use", "id": "srv_3", "name": "code_execution",
         "input": {"code": "1"}},
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "mystery_block"},
    ])),
    ("anthropic", _anthropic("tool_use", [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}}])),
    ("anthropic", _anthropic("pause_turn")),
    ("openai", _openai(output=[
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "q"}},
        {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
         "results": None},
    ])),
    ("openai", b'{"type":"response.created","response":{"id":"resp_x","object":"response",'
               b'"model":"gpt-x","status":"in_progress","output":[]}}\n'
               b'{"type":"error","code":"insufficient_quota","message":"no","param":null}\n'),
    ("google", orjson.dumps({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]},
                        "finishReason": "STOP",
                        "groundingMetadata": {"webSearchQueries": ["q"], "groundingChunks": [
                            {"web": {"uri": "https://example.org/", "title": "e"}}]}}],
        "modelVersion": "gemini-x", "responseId": "r2"})),
    ("google", _google("MAX_TOKENS")),
    ("google", _google("SAFETY")),
    ("google", _google("OTHER")),
    ("google", _google("STOP", [{"functionCall": {"name": "f", "args": {}}}])),
    ("google", _google("STOP", [{"executableCode": {"language": "PYTHON", "code": "1"}},
                                {"codeExecutionResult": {"outcome": "OUTCOME_OK",
                                                         "output": "1"}}])),
    # Server tools of the second recording set (providers-more), written small.
    ("anthropic", orjson.dumps({
        "id": "msg_r", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
        "stop_reason": "refusal", "stop_details": {"type": "refusal", "category": "c",
                                                   "explanation": "e"}})),
    ("anthropic", _anthropic("end_turn", [
        {"type": "server_tool_use", "id": "srv_a", "name": "advisor", "input": {}},
        {"type": "advisor_tool_result", "tool_use_id": "srv_a",
         "content": {"type": "advisor_result", "text": "4"}},
        {"type": "server_tool_use", "id": "srv_t", "name": "tool_search_tool_bm25",
         "input": {"query": "q"}},
        {"type": "tool_search_tool_result", "tool_use_id": "srv_t", "content": {
            "type": "tool_search_tool_search_result", "tool_references": []}},
        {"type": "mcp_tool_use", "id": "mcp_1", "name": "ask", "server_name": "s", "input": {}},
        {"type": "mcp_tool_result", "tool_use_id": "mcp_1", "is_error": False, "content": []},
    ])),
    ("openai", _openai(output=[
        {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "s", "tools": []},
        {"type": "mcp_call", "id": "mcp_1", "status": "completed", "server_label": "s",
         "name": "ask", "arguments": "{}", "output": "ok"},
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": None},
        {"type": "tool_search_call", "id": "tsc_1", "status": "completed", "execution": "server",
         "arguments": {"paths": ["f"]}, "call_id": None},
        {"type": "tool_search_output", "id": "tso_1", "status": "completed",
         "execution": "server", "call_id": None, "tools": []},
        {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "s", "name": "ask",
         "arguments": "{}"},
    ])),
    # xAI's and Groq's own tools (the third set, providers-fresh, has an X search and a video).
    ("openai", orjson.dumps({
        "id": "x1", "object": "response", "model": "grok-4", "status": "completed",
        "tools": [{"type": "web_search"}, {"type": "function", "name": "lookup"}],
        "output": [
            {"type": "custom_tool_call", "id": "ctc_1", "call_id": "xs_1", "name": "browse_page",
             "input": '{"url": "https://example.org/"}', "status": "completed"},
            {"type": "custom_tool_call", "id": "ctc_2", "call_id": "xs_2",
             "name": "x_new_tool", "input": "{}", "status": "completed"},
            {"type": "custom_tool_call", "id": "ctc_3", "call_id": "xs_3",
             "name": "x_keyword_search", "input": '{"query": "q"}', "status": "completed"},
            {"type": "custom_tool_call", "id": "ctc_4", "call_id": "xs_4", "name": "view_image",
             "input": '{"image_url": "https://example.org/a.png"}', "status": "completed"}]})),
    ("openai", orjson.dumps({
        "id": "g1", "object": "chat.completion", "model": "groq/compound", "x_groq": {},
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "x", "executed_tools": [
                {"index": 0, "type": "search", "arguments": '{"query": "q"}',
                 "search_results": {"results": []}},
                {"index": 1, "type": "visit", "arguments": '{"url": "https://example.org/"}',
                 "output": "page"},
                {"index": 2, "type": "python", "arguments": '{"code": "1"}', "output": "1"},
                {"index": 3, "type": "wolfram_alpha", "arguments": '{"query": "1+1"}',
                 "output": "2"}]}}]})),
    ("google", orjson.dumps({
        "candidates": [{"content": {"role": "model", "parts": [
            {"toolCall": {"toolType": "FILE_SEARCH", "id": "fs1"}},
            {"toolResponse": {"toolType": "FILE_SEARCH", "id": "fs1"}},
            {"text": "x"}]}, "finishReason": "STOP",
            "urlContextMetadata": {"urlMetadata": [
                {"retrievedUrl": "https://example.org/",
                 "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS"}]}}],
        "modelVersion": "gemini-x", "responseId": "r3"})),
]


def _inputs() -> list[tuple[str, bytes, providers.WireContext]]:
    """Hand-written responses and the bundled samples (so the test holds without ../shared),
    plus every recorded fixture where ../shared is present."""
    out = [(p, raw, providers.WireContext()) for p, raw in SYNTHETIC]
    for path in sorted(SAMPLES.glob("*.sse")):
        out.append((path.name.split("-")[0].replace("gemini", "google"), path.read_bytes(),
                    providers.WireContext()))
    for fixtures in (PROVIDER_FIXTURES, MORE_FIXTURES, FRESH_FIXTURES):
        if not fixtures.exists():
            continue
        for provider in ("anthropic", "openai", "google"):
            for path in sorted((fixtures / provider).glob("*")):
                for rec in recorded(provider, path.name, fixtures.name):
                    out.append((provider, rec.raw, rec.context))
    return out


def observed() -> dict[str, dict[str, set[str]]]:
    """registry name -> value -> producers seen emitting it."""
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for provider, raw, context in _inputs():
        producer = providers.ADAPTERS[provider]
        builder = EventBuilder()
        builder.begin_response("initial")
        for part in providers.parse(provider, raw, context):
            if isinstance(part, parts.ResponseEnd):
                seen["end_reasons"][part.end_reason].add(producer)
            elif isinstance(part, parts.Activity):
                seen["activity_names"][part.name].add(producer)
            for event in builder.feed(part):
                seen["event_kinds"][event.kind].add("streams.builder")
        for event in builder.end_response():
            seen["event_kinds"][event.kind].add("streams.builder")
        if builder.outcome.end_reason in {"interrupted", "error"} and not any(
            isinstance(p, parts.ResponseEnd) for p in providers.parse(provider, raw, context)
        ):
            seen["end_reasons"][builder.outcome.end_reason].add("streams.builder")
    # The builder's own end reasons: a cut stream, and an error it records itself.
    cut = EventBuilder()
    cut.begin_response("initial")
    cut.feed(parts.ResponseStart("x", "y"))
    cut.end_response()
    seen["end_reasons"][cut.outcome.end_reason].add("streams.builder")
    failed = EventBuilder()
    failed.begin_response("initial")
    failed.feed(parts.StreamError("overloaded"))
    seen["end_reasons"][failed.outcome.end_reason].add("streams.builder")
    # The chat-export importers make their own parts (no wire format): samples and fixtures.
    for producer, part in _importer_parts():
        if isinstance(part, parts.ResponseEnd):
            seen["end_reasons"][part.end_reason].add(producer)
        elif isinstance(part, parts.Activity):
            seen["activity_names"][part.name].add(producer)
    # Triggers: how the stream runner chains the responses of one turn.
    chains = [
        [_anthropic("pause_turn"), _anthropic("tool_use", [
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]), _anthropic("end_turn"),
         _anthropic("end_turn")],
    ]
    for chain in chains:
        builder, _ = assemble("anthropic", [ResponseFile(f"r{i}", raw)
                                            for i, raw in enumerate(chain)])
        for response in builder.responses:
            seen["triggers"][response["trigger"]].add("streams.run")
    # Event kinds read out of requests: the recording proxy keeps client tool results.
    from proxy import messages

    exchange = messages.read("anthropic", "messages", {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]})
    for record in exchange.prompt:
        seen["event_kinds"][record.kind].add("proxy.messages")
    return seen


def _importer_parts() -> list[tuple[str, parts.Part]]:
    from importers import chatgpt, claude_ai
    from importers.base import ImportedConversation
    from tests.importers.samples import chatgpt_plain, chatgpt_tools, claude_blocks

    conversations = [chatgpt.convert(chatgpt_tools(), "sample"),
                     chatgpt.convert(chatgpt_plain(), "sample"),
                     claude_ai.convert(claude_blocks(), "sample")]
    exports = SHARED / "fixtures" / "chat-exports"
    for path in sorted(exports.glob("*.json")) if exports.exists() else ():
        module = claude_ai if path.name.startswith("claude") else chatgpt
        conversations += list(module.read(path.open("rb"), path.name))
    out = []
    for conversation in conversations:
        if not isinstance(conversation, ImportedConversation):
            continue
        module = f"importers.{conversation.format}"
        turns = [*conversation.turns, *(t for f in conversation.forks for t in f.turns)]
        for turn in turns:
            for response in turn.responses:
                out += [(module, part) for part in response.parts]
    return out


@pytest.fixture(scope="module")
def seen():
    return observed()


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_registered_value_has_a_producer_that_emits_it(name, seen):
    registry: Registry = ALL[name]
    missing = {
        (value, producer)
        for value in registry
        for producer in registry.producers(value)
        if producer not in seen[name].get(value, set())
    }
    assert not missing, f"{name}: registered but never emitted by the named producer: {missing}"


@pytest.mark.parametrize("name", sorted(ALL))
def test_no_producer_emits_an_unregistered_value(name, seen):
    registry: Registry = ALL[name]
    unregistered = {value for value in seen[name] if value not in registry}
    assert not unregistered, f"{name}: emitted but not registered: {unregistered}"
    for value, producers_ in seen[name].items():
        assert producers_ <= registry.producers(value), (name, value)


def test_end_reason_registry_refuses_unknown_values():
    assert "because" not in END_REASONS
