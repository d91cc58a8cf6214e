"""The Anthropic adapter on the second recording set (``providers-more/anthropic``): server
tools beyond web search (code execution, bash, the text editor, the advisor, tool search, the
MCP connector), compaction, a refusal with ``stop_details``, content inside ``message_start``,
and a non-streaming pause_turn with its continuation. Each file's facts are read from the wire
(``more.wire``) and Anthropic's documentation, not from what the adapter prints."""

from __future__ import annotations

import orjson
import pytest

from providers import anthropic
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    Refusal,
    ResponseEnd,
    ResponseStart,
    StreamError,
    ToolCall,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS
from tests.providers.more import (
    blocks_of_type,
    events_of,
    of,
    parts_of,
    responses,
    text_of,
    transitions,
    wire,
)
from tests.support import part_payloads, recorded

P = "anthropic"
WEB_FETCH = "pydantic-ai__test_anthropic_web_fetch_tool_stream.sse.txt"
FETCH_IN_CODE = "vercel-ai__anthropic-web-fetch-tool-20260209.1.chunks.txt"
BASH = "pydantic-ai__test_anthropic_code_execution_tool_stream.sse.txt"
EDITOR = "pydantic-ai__test_anthropic_text_editor_code_execution_tool.json"
MCP = "pydantic-ai__test_anthropic_mcp_servers_stream.sse.txt"
COMPACTION = "pydantic-ai__test_anthropic_compaction_usage_with_cache_streaming.sse.txt"
ADVISOR = "pydantic-ai__test_anthropic_advisor_tool_stream.sse.txt"
TOOL_SEARCH = "pydantic-ai__test_anthropic_native_tool_search_streaming.interaction0.sse.txt"
PAUSE = "pydantic-ai__test_pause_turn_web_search_vcr.interaction0.pause_turn.json"
CONTINUATION = "pydantic-ai__test_pause_turn_web_search_vcr.interaction1.continuation.json"
IN_START = "vercel-ai__anthropic-programmatic-tool-calling.1.lines168-169.chunks.txt"
REFUSAL = "llm-anthropic__test_refusal_raises.sse.txt"
STREAMED_CASSETTE = "pydantic-ai__test_pause_turn_web_search_streaming_vcr.yaml"
BODY_CASSETTE = "pydantic-ai__test_pause_turn_web_search_vcr.yaml"
ALL_FILES = [WEB_FETCH, FETCH_IN_CODE, BASH, EDITOR, MCP, COMPACTION, ADVISOR, TOOL_SEARCH, PAUSE,
             CONTINUATION, IN_START, REFUSAL, STREAMED_CASSETTE, BODY_CASSETTE]
# Server-run tools Anthropic documents (server_tool_use names, and the MCP connector's block).
SERVER_TOOL_BLOCKS = {"server_tool_use", "mcp_tool_use", "mcp_tool_result"}


def streamed_input(objects: list[dict], index: int) -> dict:
    """A streamed tool block's input: its input_json_delta pieces joined, as JSON."""
    pieces = [
        o["delta"]["partial_json"] for o in objects
        if o.get("type") == "content_block_delta" and o.get("index") == index
        and o["delta"]["type"] == "input_json_delta"
    ]
    return orjson.loads("".join(pieces))


def streamed_text(objects: list[dict], index: int, field: str = "text") -> str:
    return "".join(
        o["delta"].get(field, "") for o in objects
        if o.get("type") == "content_block_delta" and o.get("index") == index
    )


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_file_keeps_the_part_protocol(name: str) -> None:
    for parts in responses(P, name):
        assert isinstance(parts[0], ResponseStart) and parts[0].model.startswith("claude-")
        assert isinstance(parts[-1], ResponseEnd) and parts[-1].end_reason in END_REASONS
        assert of(parts, StreamError) == []
        for artifact in of(parts, Artifact):  # a server-run tool is never an artifact
            assert artifact.type not in SERVER_TOOL_BLOCKS | {"server_tool_use"}
            assert not artifact.type.endswith("_tool_result")
        for activity in of(parts, Activity):
            assert activity.name in ACTIVITY_NAMES and activity.payload is not None
        for call in of(parts, ToolCall):
            assert call.call_id.startswith("toolu_")  # a hosted call is never a tool call
        for payload in part_payloads(parts):
            anthropic.decode(payload.value, payload.format)
            orjson.dumps(payload.as_dict())


def test_web_fetch_of_a_document() -> None:
    objects, parts = wire(P, WEB_FETCH), parts_of(P, WEB_FETCH)
    (use,) = blocks_of_type(objects, "server_tool_use")
    (result,) = blocks_of_type(objects, "web_fetch_tool_result")
    assert transitions(parts) == [(use["id"], "web_fetch", "started"),
                                  (use["id"], "web_fetch", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == streamed_input(objects, 1) == {"url": "https://ai.pydantic.dev"}
    document = result["content"]["content"]
    assert document["type"] == "document"
    assert completed.sources == ({"url": "https://ai.pydantic.dev",
                                  "title": document.get("title", "")},)
    assert completed.payload.value == result  # the page text stays in the payload, whole
    (think,) = [b for b in of(parts, BlockStart) if b.kind == "reasoning"]
    end = next(e for e in of(parts, BlockEnd) if e.key == think.key)
    assert end.payload.value["thinking"] == streamed_text(objects, 0, "thinking")
    assert end.payload.value["signature"] == streamed_text(objects, 0, "signature")
    assert text_of(parts, "b3") == streamed_text(objects, 3)
    assert parts[-1] == ResponseEnd("end_turn")


def test_web_fetch_called_from_code_execution() -> None:
    objects, parts = wire(P, FETCH_IN_CODE), parts_of(P, FETCH_IN_CODE)
    code, fetch = blocks_of_type(objects, "server_tool_use")
    assert fetch["caller"] == {"type": "code_execution_20260120", "tool_id": code["id"]}
    # The nested fetch starts and ends inside the code run, matched by id.
    assert transitions(parts) == [
        (code["id"], "code_execution", "started"),
        (fetch["id"], "web_fetch", "started"),
        (fetch["id"], "web_fetch", "completed"),
        (code["id"], "code_execution", "completed"),
    ]
    run = of(parts, Activity)[0]
    assert run.input == streamed_input(objects, 0) and "code" in run.input
    (result,) = blocks_of_type(objects, "code_execution_tool_result")
    done = of(parts, Activity)[-1]
    assert done.output["text"] == result["content"]["stdout"]
    assert done.output["return_code"] == result["content"]["return_code"] == 0
    assert done.summary == "exit code 0"
    assert of(parts, Activity)[1].payload.value["caller"] == fetch["caller"]
    assert [b.key for b in of(parts, BlockStart)] == ["b4"]
    assert text_of(parts, "b4") == streamed_text(objects, 4) != ""
    assert parts[-1] == ResponseEnd("end_turn")


def test_bash_run_with_its_command_output_and_return_code() -> None:
    objects, parts = wire(P, BASH), parts_of(P, BASH)
    (use,) = blocks_of_type(objects, "server_tool_use")
    (result,) = blocks_of_type(objects, "bash_code_execution_tool_result")
    assert use["name"] == "bash_code_execution"
    started, completed = of(parts, Activity)
    assert (started.activity_id, started.name) == (use["id"], "code_execution")
    assert started.input == streamed_input(objects, 2)
    assert started.input["command"] == 'echo "65465-6544 * 65464-6+1.02255" | bc -l'
    assert completed.activity_id == result["tool_use_id"] == use["id"]
    assert completed.output == {"text": "-428330955.97745\n", "return_code": 0}
    assert result["content"]["stderr"] == ""  # no stderr: none shown
    assert text_of(parts, "b4").endswith("**-428,330,955.97745**")
    assert parts[-1] == ResponseEnd("end_turn")


def test_text_editor_two_calls_before_their_results_are_matched_by_id() -> None:
    (body,) = wire(P, EDITOR)
    parts = parts_of(P, EDITOR)
    uses = [b for b in body["content"] if b["type"] == "server_tool_use"]
    results = [b for b in body["content"] if b["type"].endswith("_tool_result")]
    assert [b["type"] for b in body["content"][1:5]] == [
        "server_tool_use", "server_tool_use", "text_editor_code_execution_tool_result",
        "text_editor_code_execution_tool_result"]
    a, b, c, d = (u["id"] for u in uses)
    assert transitions(parts) == [
        (a, "code_execution", "started"), (b, "code_execution", "started"),
        (a, "code_execution", "failed"), (b, "code_execution", "failed"),
        (c, "code_execution", "started"), (c, "code_execution", "completed"),
        (d, "code_execution", "started"), (d, "code_execution", "completed"),
    ]
    acts = of(parts, Activity)
    assert [x.input for x in acts if x.state == "started"] == [u["input"] for u in uses]
    for failed, result in zip(acts[2:4], results[:2], strict=True):
        assert failed.error_code == result["content"]["error_code"] == "unavailable"
        assert failed.output == {"error": result["content"]["error_message"]}
    assert acts[5].summary == "created file"
    assert acts[7].summary == "viewed file" and acts[7].output == {"text": "Hello, world!"}
    assert len([s for s in of(parts, BlockStart) if s.kind == "message"]) == 4
    assert parts[-1] == ResponseEnd("end_turn")


def test_mcp_connector_call_and_result() -> None:
    objects, parts = wire(P, MCP), parts_of(P, MCP)
    (use,) = blocks_of_type(objects, "mcp_tool_use")
    (result,) = blocks_of_type(objects, "mcp_tool_result")
    started, completed = of(parts, Activity)
    assert (started.activity_id, started.name, started.state) == (use["id"], "mcp_call",
                                                                  "started")
    assert started.input == {"server": "deepwiki", "tool": "ask_question",
                             "arguments": streamed_input(objects, 1)}
    assert started.input["arguments"]["repoName"] == "pydantic/pydantic-ai"
    assert (completed.activity_id, completed.state) == (result["tool_use_id"], "completed")
    assert result["is_error"] is False
    assert completed.output == {"text": result["content"][0]["text"]}
    assert completed.summary.startswith("This repository, `pydantic/pydantic-ai`")
    assert [(b.key, b.kind) for b in of(parts, BlockStart)] == [("b0", "reasoning"),
                                                                 ("b3", "message")]
    assert text_of(parts, "b3") == streamed_text(objects, 3) != ""
    assert text_of(parts, "b0") == streamed_text(objects, 0, "thinking")
    assert parts[-1] == ResponseEnd("end_turn")


def test_compaction_is_kept_whole_and_is_no_tool() -> None:
    objects, parts = wire(P, COMPACTION), parts_of(P, COMPACTION)
    (artifact,) = of(parts, Artifact)
    assert artifact.type == "compaction"
    assert artifact.payload.format == "anthropic.stream_block"
    (delta,) = [o["delta"] for o in objects if o.get("type") == "content_block_delta"
                and o["delta"]["type"] == "compaction_delta"]
    assert artifact.payload.value == {"content_block": {"type": "compaction", "content": None},
                                      "deltas": [delta]}
    assert of(parts, Activity) == []
    assert text_of(parts, "b1") == "Hello! 👋"
    assert parts[-1] == ResponseEnd("end_turn")


def test_advisor_and_left_out_thinking() -> None:
    objects, parts = wire(P, ADVISOR), parts_of(P, ADVISOR)
    assert parts[0].model == "claude-sonnet-5"
    # Thinking with no text but a signature: reasoning whose content is opaque.
    think = of(parts, BlockStart)[0]
    assert (think.kind, think.redacted) == ("reasoning", True)
    assert think.payload.value == {"type": "thinking", "thinking": "",
                                   "signature": streamed_text(objects, 0, "signature")}
    assert text_of(parts, think.key) == ""
    (use,) = blocks_of_type(objects, "server_tool_use")
    (result,) = blocks_of_type(objects, "advisor_tool_result")
    assert transitions(parts) == [(use["id"], "advisor", "started"),
                                  (use["id"], "advisor", "completed")]
    advice = of(parts, Activity)[1]
    assert advice.output == {"text": result["content"]["text"]}
    assert advice.summary == "4."
    assert text_of(parts, "b4") == "The answer is **4**."
    assert of(parts, Artifact) == [] and parts[-1] == ResponseEnd("end_turn")


def test_tool_search_then_the_client_tool_it_found() -> None:
    objects, parts = wire(P, TOOL_SEARCH), parts_of(P, TOOL_SEARCH)
    (use,) = blocks_of_type(objects, "server_tool_use")
    (result,) = blocks_of_type(objects, "tool_search_tool_result")
    assert use["name"] == "tool_search_tool_bm25"
    started, completed = of(parts, Activity)
    assert (started.activity_id, started.name) == (use["id"], "tool_search")
    assert started.input == {"query": "USD EUR exchange rate currency conversion"}
    found = [r["tool_name"] for r in result["content"]["tool_references"]]
    assert completed.output == {"tools": found} and found == ["get_exchange_rate"]
    assert completed.summary == "1 tool"
    (call,) = of(parts, ToolCall)
    assert (call.name, call.arguments) == ("get_exchange_rate",
                                           {"from_currency": "USD", "to_currency": "EUR"})
    assert call.payload.value["caller"] == {"type": "direct"}
    assert parts[-1] == ResponseEnd("tool_use")


def test_non_streaming_pause_turn_and_its_continuation() -> None:
    (paused,), (resumed,) = wire(P, PAUSE), wire(P, CONTINUATION)
    first, second = parts_of(P, PAUSE), parts_of(P, CONTINUATION)
    uses = [b for b in paused["content"] if b["type"] == "server_tool_use"]
    assert len(uses) == 11
    assert len([b for b in paused["content"] if b["type"] == "web_search_tool_result"]) == 10
    assert first[-1] == ResponseEnd("pause_turn")
    assert [a.activity_id for a in of(first, Activity) if a.state == "started"] == [
        u["id"] for u in uses]
    # The continuation's first block answers the eleventh search.
    opener = resumed["content"][0]
    assert opener["type"] == "web_search_tool_result" and opener["tool_use_id"] == uses[-1]["id"]
    assert (second[1].activity_id, second[1].state) == (uses[-1]["id"], "completed")
    assert len([a for a in of(second, Activity) if a.state == "started"]) == 4
    cited = [b for b in resumed["content"] if b["type"] == "text" and b.get("citations")]
    assert sum(len(b["citations"]) for b in cited) == 17 == len(of(second, Citation))
    assert sum(1 for b in cited if len(b["citations"]) == 2) == 2  # two blocks cite twice
    for c in of(second, Citation):
        assert c.start is None and c.replay.value["type"] == "web_search_result_location"
    assert second[-1] == ResponseEnd("end_turn")
    # As one turn: every search finished, none left open.
    events = events_of(P, PAUSE) + events_of(P, CONTINUATION)
    states: dict[str, str] = {}
    for e in events:
        if e.kind == "hosted_activity":
            states[e.body.id] = e.body.state
    assert len(states) == 15 and set(states.values()) == {"completed"}


def test_a_message_start_that_holds_the_content() -> None:
    (start, stop) = wire(P, IN_START)
    message = start["message"]
    assert stop == {"type": "message_stop"} and message["stop_reason"] == "tool_use"
    parts = parts_of(P, IN_START)
    (block,) = message["content"]
    (call,) = of(parts, ToolCall)
    assert (call.call_id, call.name, call.arguments) == (block["id"], "rollDie",
                                                         {"player": "player2"})
    assert call.payload.value == block  # caller (code_execution_20250825) kept
    assert parts[-1] == ResponseEnd("tool_use")


def test_refusal_keeps_its_stop_details() -> None:
    objects, parts = wire(P, REFUSAL), parts_of(P, REFUSAL)
    (delta,) = [o["delta"] for o in objects if o.get("type") == "message_delta"]
    details = delta["stop_details"]
    assert parts[0].model == "claude-fable-5-1"
    (refusal,) = of(parts, Refusal)
    assert (refusal.category, refusal.explanation) == ("reasoning_extraction",
                                                       details["explanation"])
    assert refusal.payload.format == "anthropic.message_delta" and refusal.payload.value == delta
    assert of(parts, BlockStart) == [] and parts[-1] == ResponseEnd("refusal")
    (event,) = events_of(P, REFUSAL)
    assert event.kind == "refusal" and event.body.category == "reasoning_extraction"


@pytest.mark.parametrize("name", [STREAMED_CASSETTE, BODY_CASSETTE])
def test_payloads_are_what_a_client_sends_back_to_continue(name: str) -> None:
    """The cassette's second request sends the paused assistant message back: our payloads for
    the first response are those blocks, in order (the body ones byte for byte; of a stream,
    rebuilt: the client dropped ``caller`` and trimmed search results, so compare what it kept
    of thinking, text and calls)."""
    first, second = recorded(P, name, "providers-more")
    sent = second.request["messages"][1]
    assert sent["role"] == "assistant"
    assert first.raw  # the paused response
    parts = responses(P, name)[0]
    kept = [p.payload.value for p in parts
            if isinstance(p, BlockEnd | Activity | ToolCall | Artifact) and p.payload]
    assert len(kept) == len(sent["content"])
    if name == BODY_CASSETTE:
        assert kept == sent["content"]
        return
    for ours, theirs in zip(kept, sent["content"], strict=True):
        assert ours["type"] == theirs["type"]
        for key in ("id", "tool_use_id", "thinking", "signature", "text", "input"):
            assert ours.get(key) == theirs.get(key)


def test_registries_name_the_new_values_with_this_adapter() -> None:
    for name in ("advisor", "tool_search", "mcp_call", "code_execution"):
        assert "providers.anthropic" in ACTIVITY_NAMES.producers(name)


# ---------------------------------------------------------------------------------------------
# Synthetic wire: what the recordings lack

START = {"type": "message_start", "message": {"id": "msg_s", "type": "message", "role":
                                              "assistant", "model": "claude-x", "content": []}}


def stream(*events: dict) -> list:
    import providers

    return list(providers.parse(P, b"".join(orjson.dumps(e) + b"\n" for e in events)))


def body(content: list[dict], **message: object) -> list:
    import providers

    value = {"id": "msg_b", "type": "message", "role": "assistant", "model": "claude-x",
             "content": content, "stop_reason": "end_turn", **message}
    return list(providers.parse(P, orjson.dumps(value)))


def start(index: int, block: dict) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, value: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": value}


def stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


END = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, {"type": "message_stop"}]


def test_an_empty_text_block_is_no_message_but_a_cited_one_is() -> None:
    cite = {"type": "web_search_result_location", "url": "https://e.org/", "title": "E",
            "cited_text": "c", "encrypted_index": "x"}
    parts = stream(START, start(0, {"type": "text", "text": ""}), stop(0),
                   start(1, {"type": "text", "text": "", "citations": []}),
                   delta(1, {"type": "citations_delta", "citation": cite}), stop(1), *END)
    assert [(b.key, b.kind) for b in of(parts, BlockStart)] == [("b1", "message")]
    assert [type(p).__name__ for p in parts[1:4]] == ["BlockStart", "Citation", "BlockEnd"]
    assert of(body([{"type": "text", "text": ""}]), BlockStart) == []


def test_message_start_content_is_keyed_apart_from_streamed_blocks() -> None:
    message = {**START["message"], "content": [{"type": "text", "text": "early"}],
               "stop_reason": None}
    parts = stream({"type": "message_start", "message": message},
                   start(0, {"type": "text", "text": ""}),
                   delta(0, {"type": "text_delta", "text": "late"}), stop(0), *END)
    assert [b.key for b in of(parts, BlockStart)] == ["m0", "b0"]
    assert (text_of(parts, "m0"), text_of(parts, "b0")) == ("early", "late")
    assert parts[-1] == ResponseEnd("end_turn")  # the message_delta's reason, not the start's


def test_mcp_error_result_and_a_tool_search_error() -> None:
    parts = body([
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "list_events",
         "server_name": "calendar", "input": {"day": "today"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": True,
         "content": [{"type": "text", "text": "Error: 500 from the calendar"}]},
        {"type": "server_tool_use", "id": "srvtoolu_s", "name": "tool_search_tool_regex",
         "input": {"pattern": "weather"}},
        {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_s", "content": {
            "type": "tool_search_tool_result_error", "error_code": "invalid_pattern"}},
    ])
    acts = of(parts, Activity)
    assert [(a.name, a.state) for a in acts] == [("mcp_call", "started"), ("mcp_call", "failed"),
                                                 ("tool_search", "started"),
                                                 ("tool_search", "failed")]
    assert acts[0].input == {"server": "calendar", "tool": "list_events",
                             "arguments": {"day": "today"}}
    assert (acts[1].error_code, acts[1].output) == ("tool_error",
                                                    {"error": "Error: 500 from the calendar"})
    assert (acts[3].error_code, acts[3].summary) == ("invalid_pattern", "invalid_pattern")


def test_a_cut_mcp_call_is_known_to_have_started() -> None:
    parts = stream(START, start(0, {"type": "mcp_tool_use", "id": "mcptoolu_2", "name": "ask",
                                    "server_name": "wiki", "input": {}}),
                   delta(0, {"type": "input_json_delta", "partial_json": '{"question": "wh'}))
    (started,) = of(parts, Activity)
    assert (started.state, started.input) == ("started", {
        "server": "wiki", "tool": "ask", "arguments": {"question": "wh"}})
    assert of(parts, ResponseEnd) == []


def test_a_refusal_in_a_body_and_one_without_details() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Not this."}
    (refusal,) = of(body([], stop_reason="refusal", stop_details=details), Refusal)
    assert (refusal.category, refusal.explanation) == ("cyber", "Not this.")
    assert refusal.payload.value["stop_details"] == details
    assert of(body([], stop_reason="refusal"), Refusal) == []  # nothing said, nothing shown
