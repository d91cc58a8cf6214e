"""The Anthropic adapter against every recorded fixture, plus synthetic wire for what they lack."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

import providers
from providers import WireContext, anthropic
from providers.wire import MalformedInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    Part,
    ResponseEnd,
    ResponseStart,
    StreamError,
    TextDelta,
    ToolCall,
    Usage,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS
from tests.support import part_payloads, recorded

WEB_SEARCH_STREAM = "vercel-ai__anthropic-web-search-tool.1.chunks.txt"
WEB_SEARCH_BODY = "vercel-ai__anthropic-web-search-tool.1.json"
CITATION_REPLAY = "vercel-ai__anthropic-web-search-citation-replay.1.chunks.txt"
PAUSE_TURN = "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt"
CONTINUATION = (
    "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt"
)
FETCH_ERROR_1 = "vercel-ai__anthropic-issue-10819-web-fetch-error.1.chunks.txt"
FETCH_ERROR_2 = "vercel-ai__anthropic-issue-10819-web-fetch-error.2.chunks.txt"
FETCH_ERROR_BODY = "vercel-ai__anthropic-web-fetch-tool.error.json"
WEB_TOOLS_20260209 = "pydantic-ai__test_anthropic_supported_model_uses_20260209_web_tools.yaml"
CLEAR_THINKING = "vercel-ai__anthropic-clear-thinking.1.chunks.txt"
REDACTED = "pydantic-ai__test_anthropic_model_thinking_part_redacted_stream.yaml"
ALL_FILES = [
    WEB_SEARCH_STREAM,
    WEB_SEARCH_BODY,
    CITATION_REPLAY,
    PAUSE_TURN,
    CONTINUATION,
    FETCH_ERROR_1,
    FETCH_ERROR_2,
    FETCH_ERROR_BODY,
    WEB_TOOLS_20260209,
    CLEAR_THINKING,
    REDACTED,
]

_CACHE: dict[str, list[list[Part]]] = {}


def responses(name: str) -> list[list[Part]]:
    """Parts of every response in a fixture file (parsed once per test session)."""
    if name not in _CACHE:
        _CACHE[name] = [
            list(providers.parse("anthropic", rec.raw, rec.context))
            for rec in recorded("anthropic", name)
        ]
    return _CACHE[name]


def parts_of(name: str) -> list[Part]:
    (only,) = responses(name)
    return only


def of(parts: list[Part], cls: type) -> list[Any]:
    return [p for p in parts if isinstance(p, cls)]


def activities(parts: list[Part], state: str | None = None) -> list[Activity]:
    return [a for a in of(parts, Activity) if state is None or a.state == state]


def text_of(parts: list[Part], key: str) -> str:
    return "".join(p.text for p in of(parts, TextDelta) if p.key == key)


def message_blocks(parts: list[Part]) -> list[BlockStart]:
    return [b for b in of(parts, BlockStart) if b.kind == "message"]


def stream(*events: dict[str, Any], context: WireContext | None = None) -> list[Part]:
    raw = "".join(orjson.dumps(e).decode() + "\n" for e in events)
    return list(providers.parse("anthropic", raw, context))


def body(message: dict[str, Any], context: WireContext | None = None) -> list[Part]:
    return list(providers.parse("anthropic", orjson.dumps(message), context))


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, d: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def finish(reason: str | None, usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    md: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": reason}}
    md["usage"] = usage or {"output_tokens": 1}
    return [md, {"type": "message_stop"}]


def text_events(index: int, text: str) -> list[dict[str, Any]]:
    return [
        block_start(index, {"type": "text", "text": ""}),
        delta(index, {"type": "text_delta", "text": text}),
        block_stop(index),
    ]


def message(content: list[dict[str, Any]], stop: str = "end_turn", **extra: Any) -> dict:
    return {
        "id": "msg_b",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-2",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1, **extra},
    }


# ---------------------------------------------------------------------------------------------
# Invariants every recorded response satisfies


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_fixture_keeps_the_part_protocol(name: str) -> None:
    for parts in responses(name):
        assert isinstance(parts[0], ResponseStart)
        assert parts[0].provider == "anthropic" and parts[0].model.startswith("claude-")
        assert isinstance(parts[-1], ResponseEnd) and parts[-1].end_reason in END_REASONS
        assert of(parts, StreamError) == []
        open_keys: set[str] = set()
        seen: set[str] = set()
        for p in parts:
            if isinstance(p, BlockStart):
                assert p.key not in seen
                seen.add(p.key)
                open_keys.add(p.key)
            elif isinstance(p, TextDelta | Citation):
                assert p.key in open_keys
            elif isinstance(p, BlockEnd):
                open_keys.remove(p.key)
                value = p.payload.value
                if value["type"] == "text":
                    assert value["text"] == text_of(parts, p.key)
                elif value["type"] == "thinking":
                    assert value["thinking"] == text_of(parts, p.key)
                    assert value["signature"]
        assert open_keys == set()
        for activity in of(parts, Activity):
            assert activity.name in ACTIVITY_NAMES
            assert activity.activity_id.startswith("srvtoolu_")
            assert activity.payload is not None
        for call in of(parts, ToolCall):  # a hosted call is never a client tool call
            assert not call.call_id.startswith("srvtoolu_")
        for payload in part_payloads(parts):
            assert payload.provider == "anthropic"
            assert payload.version.startswith("2023-06-01")
            orjson.dumps(payload.as_dict())  # JSON-serializable
            anthropic.decode(payload.value, payload.format)


def test_non_streaming_payloads_are_the_blocks_verbatim() -> None:
    for name in (WEB_SEARCH_BODY, FETCH_ERROR_BODY, WEB_TOOLS_20260209):
        (rec,) = recorded("anthropic", name)
        content = orjson.loads(rec.raw)["content"]
        parts = parts_of(name)
        values = [
            p.payload.value
            for p in parts
            if isinstance(p, BlockEnd | Activity | ToolCall | Artifact) and p.payload
        ]
        assert values == content


# ---------------------------------------------------------------------------------------------
# Per-file facts (fixtures README)


def test_web_search_stream() -> None:
    parts = parts_of(WEB_SEARCH_STREAM)
    assert parts[0] == ResponseStart("anthropic", "claude-sonnet-4-20250514", parts[0].response_id)
    started, completed = activities(parts, "started"), activities(parts, "completed")
    assert [(a.activity_id, a.name, a.input) for a in started] == [
        (
            "srvtoolu_01Bj5uzzLcYG5hfueSLcDH8k",
            "web_search",
            {"query": "tech news today September 26 2025"},
        )
    ]
    assert [(a.activity_id, a.summary) for a in completed] == [
        ("srvtoolu_01Bj5uzzLcYG5hfueSLcDH8k", "10 results")
    ]
    assert len(completed[0].sources) == 10
    assert all(s["url"].startswith("https://") and s["title"] for s in completed[0].sources)
    assert len(message_blocks(parts)) == 19
    citations = of(parts, Citation)
    assert len(citations) == 14
    for c in citations:
        assert c.start is None and c.end is None  # whole block cited
        assert c.url.startswith("https://") and c.title and c.excerpt
        assert c.replay.format == "anthropic.citation"
        assert c.replay.value["type"] == "web_search_result_location"
        assert c.replay.value["encrypted_index"]
        assert c.excerpt == c.replay.value["cited_text"]
    # In this recording citations come before the block's text deltas.
    first = citations[0].key
    keyed = [p for p in parts if getattr(p, "key", None) == first]
    assert isinstance(keyed[1], Citation) and isinstance(keyed[-2], TextDelta)
    ends = {p.key: p.payload.value for p in of(parts, BlockEnd)}
    assert sum(len(v.get("citations", [])) for v in ends.values()) == 14
    assert of(parts, Usage) == [Usage({"web_search_requests": 1, "web_fetch_requests": 0})]
    assert parts[-1] == ResponseEnd("end_turn")


def test_web_search_body() -> None:
    parts = parts_of(WEB_SEARCH_BODY)
    assert parts[0].model == "claude-sonnet-4-20250514"
    assert len(activities(parts, "started")) == 2
    completed = activities(parts, "completed")
    assert [a.summary for a in completed] == ["10 results", "no results"]
    assert completed[1].sources == () and completed[1].error_code == ""
    assert len(message_blocks(parts)) == 8
    citations = of(parts, Citation)
    assert len(citations) == 3 and len({c.key for c in citations}) == 3
    assert of(parts, Usage) == [Usage({"web_search_requests": 2, "web_fetch_requests": 0})]
    assert parts[-1] == ResponseEnd("end_turn")


def test_citation_replay_stream() -> None:
    parts = parts_of(CITATION_REPLAY)
    assert parts[0].model == "claude-opus-4-8"
    assert isinstance(parts[1], BlockStart) and parts[1].kind == "message"  # text first
    assert len(message_blocks(parts)) == 30
    assert len(of(parts, Citation)) == 14
    assert [a.state for a in of(parts, Activity)] == ["started", "completed"]
    assert of(parts, Activity)[0].input == {"query": "Federal Reserve most recent meeting decision"}
    assert of(parts, Usage) == [Usage({"web_search_requests": 1, "web_fetch_requests": 0})]
    assert parts[-1] == ResponseEnd("end_turn")


def test_pause_turn_leaves_the_last_search_started() -> None:
    parts = parts_of(PAUSE_TURN)
    assert parts[0].model == "claude-sonnet-4-5-20250929"
    reasoning = [b for b in of(parts, BlockStart) if b.kind == "reasoning"]
    assert len(reasoning) == 1 and not reasoning[0].redacted
    end = next(e for e in of(parts, BlockEnd) if e.key == reasoning[0].key)
    assert end.payload.value["type"] == "thinking" and end.payload.value["signature"]
    started, completed = activities(parts, "started"), activities(parts, "completed")
    assert len(started) == 11 and len(completed) == 10
    assert all(a.name == "web_search" and a.input.get("query") for a in started)
    unfinished = {a.activity_id for a in started} - {a.activity_id for a in completed}
    assert unfinished == {started[-1].activity_id}
    assert of(parts, Usage) == [Usage({"web_search_requests": 10, "web_fetch_requests": 0})]
    assert parts[-1] == ResponseEnd("pause_turn")


def test_continuation_opens_with_the_paused_search_result() -> None:
    paused = activities(parts_of(PAUSE_TURN), "started")[-1]
    parts = parts_of(CONTINUATION)
    first = parts[1]
    assert isinstance(first, Activity)
    assert (first.activity_id, first.name, first.state) == (
        paused.activity_id,
        "web_search",
        "completed",
    )
    assert first.summary.endswith("results") and first.sources
    assert len(activities(parts, "started")) == 4
    assert len(activities(parts, "completed")) == 5
    assert len(message_blocks(parts)) == 35
    assert len(of(parts, Citation)) == 19
    assert of(parts, Usage) == [Usage({"web_search_requests": 5, "web_fetch_requests": 0})]
    assert parts[-1] == ResponseEnd("end_turn")


def test_web_fetch_error_in_a_mixed_server_client_turn() -> None:
    parts = parts_of(FETCH_ERROR_1)
    assert parts[0].model == "claude-sonnet-4-5-20250929"
    kinds = [type(p).__name__ for p in parts if not isinstance(p, TextDelta)]
    assert kinds == [
        "ResponseStart",
        "BlockStart",
        "BlockEnd",
        "Activity",
        "Activity",
        "BlockStart",
        "BlockEnd",
        "ToolCall",
        "Usage",
        "ResponseEnd",
    ]
    started, failed = of(parts, Activity)
    assert started.state == "started" and started.name == "web_fetch"
    assert started.input == {"url": "https://httpbin.org/status/500"}
    assert (failed.activity_id, failed.state, failed.error_code, failed.summary) == (
        started.activity_id,
        "failed",
        "url_not_accessible",
        "url_not_accessible",
    )
    assert failed.payload.value["caller"] == {"type": "direct"}
    (call,) = of(parts, ToolCall)
    assert (call.call_id, call.name, call.arguments) == (
        "toolu_01FUuDcCDweLziH8QvQFQLtV",
        "display_products",
        {},
    )
    assert call.payload.value["caller"] == {"type": "direct"}
    assert of(parts, Usage) == [Usage({"web_search_requests": 0, "web_fetch_requests": 1})]
    assert parts[-1] == ResponseEnd("tool_use")


def test_web_fetch_error_repeated_in_the_next_response() -> None:
    previous = activities(parts_of(FETCH_ERROR_1), "started")[0]
    parts = parts_of(FETCH_ERROR_2)
    first = parts[1]
    assert isinstance(first, Activity) and first.activity_id == previous.activity_id
    assert (first.state, first.error_code) == ("failed", "url_not_accessible")
    assert text_of(parts, "b1").endswith("DONE")
    assert parts[-1] == ResponseEnd("end_turn")


def test_web_fetch_error_body() -> None:
    parts = parts_of(FETCH_ERROR_BODY)
    assert parts[0].model == "claude-sonnet-4-20250514"
    started, failed = of(parts, Activity)
    assert started.input["url"].endswith("ai.pdf")
    assert (failed.activity_id, failed.state, failed.error_code) == (
        started.activity_id,
        "failed",
        "unavailable",
    )
    assert of(parts, Usage) == [Usage({"web_search_requests": 0, "web_fetch_requests": 1})]
    assert parts[-1] == ResponseEnd("end_turn")


def test_20260209_web_tools_with_code_execution_callers() -> None:
    parts = parts_of(WEB_TOOLS_20260209)
    assert parts[0].model == "claude-sonnet-4-6"
    assert of(parts, ToolCall) == [] and of(parts, Artifact) == []
    code = [a for a in of(parts, Activity) if a.name == "code_execution"]
    assert [a.state for a in code] == ["started", "completed"] * 4
    assert all("code" in a.input for a in code if a.state == "started")
    fetch = [a for a in of(parts, Activity) if a.name == "web_fetch"]
    assert [a.state for a in fetch] == ["started", "completed"]
    assert fetch[0].input == {"url": "https://ai.pydantic.dev"}
    assert fetch[1].sources == ({"url": "https://ai.pydantic.dev", "title": "Pydantic AI"},)
    outer = code[0].activity_id
    for a in fetch:  # the nested call keeps its caller; its version comes from the request
        assert a.payload.value["caller"] == {"tool_id": outer, "type": "code_execution_20260120"}
        assert a.payload.version == "2023-06-01+web_fetch_20260209"
    traceback = next(a for a in code if "exit code 1" in a.summary)
    assert traceback.state == "completed" and "TypeError" in traceback.summary
    assert traceback.payload.value["content"]["return_code"] == 1
    assert [a.summary for a in code if a.state == "completed"].count("exit code 0") == 3
    assert text_of(parts, "b10").endswith("**Pydantic AI - Pydantic AI**")
    assert of(parts, Usage) == [Usage({"web_fetch_requests": 1, "web_search_requests": 0})]
    assert parts[-1] == ResponseEnd("end_turn")


def test_clear_thinking() -> None:
    parts = parts_of(CLEAR_THINKING)
    assert parts[0].model == "claude-sonnet-4-5-20250929"
    think, text = of(parts, BlockStart)
    assert (think.kind, think.redacted, text.kind) == ("reasoning", False, "message")
    assert text_of(parts, think.key).startswith("The previous result was 925.")
    end = next(e for e in of(parts, BlockEnd) if e.key == think.key)
    assert set(end.payload.value) == {"type", "thinking", "signature"}
    assert end.payload.value["signature"].startswith("EvQB")
    assert text_of(parts, text.key) == "925 ÷ 5 = 185"
    assert parts[-1] == ResponseEnd("end_turn")


def test_redacted_thinking_stays_redacted() -> None:
    parts = parts_of(REDACTED)
    assert parts[0].model == "claude-sonnet-4-5-20250929"
    starts = of(parts, BlockStart)
    redacted = [b for b in starts if b.redacted]
    assert len(redacted) == 2 and all(b.kind == "reasoning" for b in redacted)
    for b in redacted:
        assert b.payload.value["type"] == "redacted_thinking" and b.payload.value["data"]
        assert text_of(parts, b.key) == ""  # the opaque data is never text
        end = next(e for e in of(parts, BlockEnd) if e.key == b.key)
        assert end.payload == b.payload
    assert [b.kind for b in starts if not b.redacted] == ["message"]
    assert parts[-1] == ResponseEnd("end_turn")


# ---------------------------------------------------------------------------------------------
# Synthetic wire: what the recordings lack


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("refusal", "refusal"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("tool_use", "tool_use"),
        ("pause_turn", "pause_turn"),
        ("model_context_window_exceeded", "max_tokens"),
    ],
)
def test_stop_reasons(reason: str, expected: str) -> None:
    parts = stream(START, *text_events(0, "Hi"), *finish(reason))
    assert parts[-1] == ResponseEnd(expected)
    assert body(message([{"type": "text", "text": "Hi"}], stop=reason))[-1] == ResponseEnd(expected)


def test_unknown_stop_reason_is_kept_and_mapped_to_end_turn() -> None:
    parts = stream(START, *text_events(0, "Hi"), *finish("brand_new_reason"))
    artifact, end = parts[-2:]
    assert end == ResponseEnd("end_turn")
    assert isinstance(artifact, Artifact) and artifact.type == "stop_reason"
    assert artifact.payload.value["stop_reason"] == "brand_new_reason"
    anthropic.decode(artifact.payload.value, artifact.payload.format)


def test_registries_name_this_adapter() -> None:
    for reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"):
        assert "providers.anthropic" in END_REASONS.producers(reason)
    assert "providers.anthropic" in END_REASONS.producers("error")
    for name in ("web_search", "web_fetch", "code_execution"):
        assert "providers.anthropic" in ACTIVITY_NAMES.producers(name)


def test_citations_after_text_deltas_docs_order() -> None:
    cite = {
        "type": "web_search_result_location",
        "url": "https://example.com/a",
        "title": "A",
        "cited_text": "quoted",
        "encrypted_index": "EiQ=",
    }
    parts = stream(
        START,
        block_start(0, {"type": "text", "text": "", "citations": []}),
        delta(0, {"type": "text_delta", "text": "Claim."}),
        delta(0, {"type": "citations_delta", "citation": cite}),
        block_stop(0),
        *finish("end_turn"),
    )
    (c,) = of(parts, Citation)
    assert (c.key, c.url, c.title, c.excerpt, c.start) == ("b0", cite["url"], "A", "quoted", None)
    assert c.replay.value == cite
    (end,) = of(parts, BlockEnd)
    assert end.payload.value == {"type": "text", "text": "Claim.", "citations": [cite]}


DOCUMENT_CITATIONS = [
    {
        "type": "char_location",
        "cited_text": "The grass is green. ",
        "document_index": 0,
        "document_title": "Example Document",
        "start_char_index": 0,
        "end_char_index": 20,
    },
    {
        "type": "page_location",
        "cited_text": "Water is essential for life.",
        "document_index": 1,
        "document_title": "Report.pdf",
        "start_page_number": 5,
        "end_page_number": 6,
    },
    {
        "type": "content_block_location",
        "cited_text": "These are important findings.",
        "document_index": 2,
        "document_title": None,
        "start_block_index": 0,
        "end_block_index": 1,
    },
]


def test_document_citations_carry_no_url_and_no_range() -> None:
    parts = stream(
        START,
        block_start(0, {"type": "text", "text": "", "citations": []}),
        *[delta(0, {"type": "citations_delta", "citation": c}) for c in DOCUMENT_CITATIONS],
        delta(0, {"type": "text_delta", "text": "the grass is green"}),
        block_stop(0),
        *finish("end_turn"),
    )
    streamed = of(parts, Citation)
    whole = of(
        body(message([{"type": "text", "text": "x", "citations": DOCUMENT_CITATIONS}])), Citation
    )
    for citations in (streamed, whole):
        assert [(c.url, c.title, c.excerpt) for c in citations] == [
            ("", "Example Document", "The grass is green. "),
            ("", "Report.pdf", "Water is essential for life."),
            ("", "", "These are important findings."),
        ]
        assert all(c.start is None and c.end is None for c in citations)  # source indexes
        assert [c.replay.value for c in citations] == DOCUMENT_CITATIONS


def test_search_result_citation() -> None:
    cite = {
        "type": "search_result_location",
        "source": "https://docs.example.com/guide",
        "title": "Guide",
        "cited_text": "Step one.",
        "search_result_index": 0,
        "start_block_index": 0,
        "end_block_index": 1,
    }
    (c,) = of(body(message([{"type": "text", "text": "x", "citations": [cite]}])), Citation)
    assert (c.url, c.title, c.excerpt) == ("https://docs.example.com/guide", "Guide", "Step one.")


def test_thinking_signature_pieces_are_joined() -> None:
    parts = stream(
        START,
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "hmm"}),
        delta(0, {"type": "signature_delta", "signature": "AB"}),
        delta(0, {"type": "signature_delta", "signature": "CD"}),
        block_stop(0),
        *finish("end_turn"),
    )
    (end,) = of(parts, BlockEnd)
    assert end.payload.value == {"type": "thinking", "thinking": "hmm", "signature": "ABCD"}


def test_request_tools_name_the_payload_version() -> None:
    context = WireContext(
        api_version="2023-06-01",
        request={"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
    )
    cite = {
        "type": "web_search_result_location",
        "url": "https://e.com",
        "title": "E",
        "cited_text": "c",
        "encrypted_index": "x",
    }
    parts = body(
        message(
            [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "t", "citations": [cite]},
            ]
        ),
        context,
    )
    versions = {p.payload.version for p in of(parts, Activity)}
    assert versions == {"2023-06-01+web_search_20250305"}
    assert of(parts, Citation)[0].replay.version == "2023-06-01+web_search_20250305"
    assert of(parts, BlockEnd)[0].payload.version == "2023-06-01"
    other = body(message([{"type": "text", "text": "t"}]), WireContext(api_version="2025-01-01"))
    assert of(other, BlockEnd)[0].payload.version == "2025-01-01"


def test_code_execution_result_types() -> None:
    context = WireContext(request={"tools": [{"type": "code_execution_20250825"}]})
    bash = {"command": "ls"}
    editor = {"command": "create", "path": "/tmp/a.py", "file_text": "print(1)"}
    content = [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_b",
            "name": "bash_code_execution",
            "input": bash,
        },
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "srvtoolu_b",
            "content": {
                "type": "bash_code_execution_result",
                "stdout": "a.py\n",
                "stderr": "",
                "return_code": 0,
                "content": [],
            },
        },
        {
            "type": "server_tool_use",
            "id": "srvtoolu_t",
            "name": "text_editor_code_execution",
            "input": editor,
        },
        {
            "type": "text_editor_code_execution_tool_result",
            "tool_use_id": "srvtoolu_t",
            "content": {
                "type": "text_editor_code_execution_create_result",
                "is_file_update": False,
            },
        },
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "srvtoolu_x",
            "content": {
                "type": "bash_code_execution_tool_result_error",
                "error_code": "execution_time_exceeded",
            },
        },
        {
            "type": "code_execution_tool_result",
            "tool_use_id": "srvtoolu_c",
            "content": {"type": "code_execution_tool_result_error", "error_code": "unavailable"},
        },
        {
            "type": "code_execution_tool_result",
            "tool_use_id": "srvtoolu_d",
            "content": {
                "type": "code_execution_result",
                "stdout": "",
                "stderr": "",
                "return_code": 137,
                "abort_reason": "timeout",
                "content": [],
            },
        },
    ]
    acts = of(body(message(content), context), Activity)
    assert [(a.activity_id, a.name, a.state, a.summary, a.error_code) for a in acts] == [
        ("srvtoolu_b", "code_execution", "started", "", ""),
        ("srvtoolu_b", "code_execution", "completed", "exit code 0", ""),
        ("srvtoolu_t", "code_execution", "started", "", ""),
        ("srvtoolu_t", "code_execution", "completed", "created file", ""),
        (
            "srvtoolu_x",
            "code_execution",
            "failed",
            "execution_time_exceeded",
            "execution_time_exceeded",
        ),
        ("srvtoolu_c", "code_execution", "failed", "unavailable", "unavailable"),
        ("srvtoolu_d", "code_execution", "failed", "timeout", "timeout"),
    ]
    assert acts[0].input == bash and acts[2].input == editor
    assert {a.payload.version for a in acts} == {"2023-06-01+code_execution_20250825"}


def test_web_search_error_object_fails_the_search() -> None:
    parts = stream(
        START,
        block_start(
            0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
        ),
        delta(0, {"type": "input_json_delta", "partial_json": '{"query": "q"}'}),
        block_stop(0),
        block_start(
            1,
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {
                    "type": "web_search_tool_result_error",
                    "error_code": "max_uses_exceeded",
                },
            },
        ),
        block_stop(1),
        *finish("end_turn", {"server_tool_use": {"web_search_requests": 1}}),
    )
    started, failed = of(parts, Activity)
    assert started.input == {"query": "q"}
    assert (failed.state, failed.error_code, failed.summary) == (
        "failed",
        "max_uses_exceeded",
        "max_uses_exceeded",
    )
    assert of(parts, Usage) == [Usage({"web_search_requests": 1})]


def test_programmatic_client_tool_call_is_a_tool_call() -> None:
    caller = {"type": "code_execution_20250825", "tool_id": "srvtoolu_c"}
    parts = stream(
        START,
        block_start(
            0, {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}, "caller": caller}
        ),
        delta(0, {"type": "input_json_delta", "partial_json": '{"city": '}),
        delta(0, {"type": "input_json_delta", "partial_json": '"Paris"}'}),
        block_stop(0),
        *finish("tool_use"),
    )
    (call,) = of(parts, ToolCall)
    assert (call.call_id, call.name, call.arguments) == ("toolu_1", "get", {"city": "Paris"})
    assert call.payload.value == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get",
        "input": {"city": "Paris"},
        "caller": caller,
    }
    assert of(parts, Activity) == []


def test_unknown_blocks_and_hosted_tools_become_artifacts() -> None:
    mystery = {"type": "mystery_block", "foo": 1}
    search = {"type": "server_tool_use", "id": "srvtoolu_s", "name": "some_future_server_tool"}
    parts = stream(
        START,
        block_start(0, mystery),
        delta(0, {"type": "mystery_delta", "bar": 2}),
        block_stop(0),
        block_start(1, {**search, "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"pattern": "x"}'}),
        block_stop(1),
        block_start(
            2,
            {"type": "some_future_server_tool_result", "tool_use_id": "srvtoolu_s",
             "content": {}},
        ),
        block_stop(2),
        block_start(3, {"type": "text", "text": ""}),
        delta(3, {"type": "future_text_delta", "x": 1}),
        delta(3, {"type": "text_delta", "text": "ok"}),
        block_stop(3),
        {"type": "some_future_event"},
        {"type": "ping"},
        *finish("end_turn"),
    )
    artifacts = of(parts, Artifact)
    assert [a.type for a in artifacts] == [
        "mystery_block",
        "server_tool_use",
        "some_future_server_tool_result",
        "delta:future_text_delta",
    ]
    assert artifacts[0].payload.format == "anthropic.stream_block"
    assert artifacts[0].payload.value == {
        "content_block": mystery,
        "deltas": [{"type": "mystery_delta", "bar": 2}],
    }
    assert artifacts[1].payload.value == {**search, "input": {"pattern": "x"}}
    for a in artifacts:
        anthropic.decode(a.payload.value, a.payload.format)
    assert of(parts, Activity) == []
    assert text_of(parts, "b3") == "ok" and parts[-1] == ResponseEnd("end_turn")
    whole = body(message([mystery, {"type": "text", "text": "ok"}]))
    assert of(whole, Artifact)[0].payload.value == mystery


def test_error_event_fails_the_response() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    parts = stream(
        START,
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "Partial"}),
        block_start(
            1, {"type": "server_tool_use", "id": "srvtoolu_9", "name": "web_search", "input": {}}
        ),
        delta(1, {"type": "input_json_delta", "partial_json": '{"query": "half'}),
        error,
        {"type": "message_stop"},  # nothing after the error counts
    )
    assert of(parts, BlockEnd) == []
    (started,) = of(parts, Activity)
    assert (started.state, started.input) == ("started", {"query": "half"})
    err, end = parts[-2:]
    assert isinstance(err, StreamError) and (err.code, err.message) == (
        "overloaded_error",
        "Overloaded",
    )
    assert err.payload.value == error and end == ResponseEnd("error")
    assert of(parts, ResponseEnd) == [ResponseEnd("error")]


def test_error_before_message_start_and_error_body() -> None:
    error = {"type": "error", "error": {"type": "api_error", "message": "Internal"}}
    for parts in (stream({"type": "ping"}, error), body(error)):
        assert [type(p) for p in parts] == [StreamError, ResponseEnd]
        assert parts[0].code == "api_error" and parts[1] == ResponseEnd("error")


def test_cut_stream_leaves_text_open_and_reports_started_search() -> None:
    parts = stream(
        START,
        *text_events(0, "Done block."),
        block_start(
            1, {"type": "server_tool_use", "id": "srvtoolu_7", "name": "web_search", "input": {}}
        ),
        delta(1, {"type": "input_json_delta", "partial_json": '{"query": "caf\\u00e9 op'}),
    )
    assert of(parts, ResponseEnd) == []
    (started,) = of(parts, Activity)
    assert (started.activity_id, started.state, started.input) == (
        "srvtoolu_7",
        "started",
        {"query": "café op"},
    )
    cut_text = stream(
        START,
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "Half a sen"}),
        block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"a": 1'}),
    )
    assert [type(p) for p in cut_text] == [ResponseStart, BlockStart, TextDelta]  # no BlockEnd


def test_recorded_stream_cut_mid_line() -> None:
    (rec,) = recorded("anthropic", WEB_SEARCH_STREAM)
    lines = rec.raw.decode().splitlines(keepends=True)
    cut = "".join(lines[:3]) + lines[3][:40]  # inside the first input_json_delta
    parts = list(providers.parse("anthropic", cut))
    assert [type(p) for p in parts] == [ResponseStart, Activity]
    assert parts[1].state == "started" and parts[1].input == {}
    cut = "".join(lines[:34]) + lines[34][:60]  # inside a text delta of a cited block
    parts = list(providers.parse("anthropic", cut))
    assert of(parts, ResponseEnd) == []
    open_key = of(parts, BlockStart)[-1].key
    assert open_key not in {e.key for e in of(parts, BlockEnd)}
    assert [c for c in of(parts, Citation) if c.key == open_key]


def test_padded_json_lines_and_sse_read_alike() -> None:
    padded = (
        orjson.dumps(START).decode()
        + "      \n"
        + '{"type": "ping"}\n'
        + '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}   }\n'
        + '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}  }\n'
        + '{"type":"content_block_stop","index":0     }\n'
        + '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}   \n'
        + '{"type":"message_stop"   }\n'
    )
    sse = "".join(
        f"event: {orjson.loads(line)['type']}\ndata: {line}\n\n" for line in padded.splitlines()
    )
    a, b = (list(providers.parse("anthropic", raw)) for raw in (padded, sse))
    assert a == b and a[-1] == ResponseEnd("end_turn") and text_of(a, "b0") == "x"


@pytest.mark.parametrize(
    ("raw", "line", "needle"),
    [
        (
            '{"type":"response.created","response":{}}\n{"type":"response.done"}\n',
            1,
            "message_start",
        ),
        ('{"type":"message_start","message":[]}\n{"type":"ping"}\n', 1, "message_start"),
        (orjson.dumps(START).decode() + "\n[1, 2]\n", 2, "stream event"),
        (orjson.dumps(START).decode() + '\n{"no_type": true}\n', 2, "stream event"),
        (
            orjson.dumps(START).decode()
            + '\n{"type":"content_block_delta","index":4,'
            + '"delta":{"type":"text_delta","text":"x"}}\n',
            2,
            "not open",
        ),
        ('{"object": "chat.completion", "choices": []}', 1, "Anthropic message"),
        ('{"type": "message", "content": "not a list"}', 1, "Anthropic message"),
    ],
)
def test_wrong_shapes_are_malformed(raw: str, line: int, needle: str) -> None:
    with pytest.raises(MalformedInput) as info:
        list(providers.parse("anthropic", raw))
    assert info.value.line == line and needle in info.value.message


def test_decode_rejects_what_it_cannot_read() -> None:
    anthropic.decode({"type": "text", "text": "x"}, "anthropic.content_block")
    anthropic.decode({"type": "some_future_block"}, "anthropic.content_block")
    anthropic.decode({"type": "error", "error": {}}, "anthropic.error")
    bad = [
        ({"type": "text"}, "anthropic.content_block"),
        ({"text": "x"}, "anthropic.content_block"),
        ({"type": "redacted_thinking"}, "anthropic.content_block"),
        ({"type": "web_search_tool_result", "content": []}, "anthropic.content_block"),
        ({"type": "text", "text": "x"}, "openai.responses.output_item"),
        ({"type": "message_start"}, "anthropic.error"),
        ({"content_block": {"type": "x"}}, "anthropic.stream_block"),
        ({"stop_sequence": None}, "anthropic.message_delta"),
        (["not", "a", "dict"], "anthropic.citation"),
    ]
    for value, fmt in bad:
        with pytest.raises(ValueError):
            anthropic.decode(value, fmt)  # type: ignore[arg-type]


def test_page_location_pages_are_inclusive_and_others_have_none() -> None:
    # Anthropic: start_page_number is 1-based, end_page_number exclusive.
    cites = [*DOCUMENT_CITATIONS,
             {**DOCUMENT_CITATIONS[1], "start_page_number": 3, "end_page_number": 5},
             {**DOCUMENT_CITATIONS[1], "start_page_number": 4, "end_page_number": 4},
             {**DOCUMENT_CITATIONS[1], "start_page_number": 0, "end_page_number": 2}]
    whole = of(body(message([{"type": "text", "text": "x", "citations": cites}])), Citation)
    assert [c.pages for c in whole] == [None, (5, 5), None, (3, 4), (4, 4), None]
