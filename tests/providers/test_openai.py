"""The OpenAI adapter: every recorded fixture, plus synthetic streams for what they lack."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

import providers
from providers import WireContext
from providers import openai as adapter
from providers.wire import MalformedInput
from streams import builder as builder_module
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    ResponseEnd,
    ResponseStart,
    StreamError,
    TextDelta,
    ToolCall,
    Usage,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS
from tests.support import part_payloads, recorded

WEB_SEARCH_STREAM = "vercel-ai__openai-web-search-tool.1.chunks.txt"
WEB_SEARCH_BODY = "vercel-ai__openai-web-search-tool.1.json"
AZURE = "vercel-ai__azure-web-search-preview-tool.1.chunks.txt"
FILE_SEARCH = "vercel-ai__openai-file-search-tool.1.chunks.txt"
ERROR = "vercel-ai__openai-error.1.chunks.txt"
RAW_ANNOTATIONS = "pydantic-ai__test_openai_include_raw_annotations_streaming.yaml"
OPENROUTER = "pydantic-ai__test_openrouter_web_search_annotations_stream.yaml"
ALL_FILES = [
    WEB_SEARCH_STREAM,
    WEB_SEARCH_BODY,
    AZURE,
    FILE_SEARCH,
    ERROR,
    RAW_ANNOTATIONS,
    OPENROUTER,
]


# -- helpers ----------------------------------------------------------------------------------


def parse_recorded(name: str) -> list[list[Any]]:
    """The parts of every response a fixture file holds."""
    return [
        list(providers.parse("openai", rec.raw, rec.context))
        for rec in recorded("openai", name)
    ]


def parse_events(*events: dict[str, Any], request: dict | None = None) -> list[Any]:
    """Parse synthetic stream events written one JSON object per line."""
    raw = b"".join(orjson.dumps(e) + b"\n" for e in events)
    return list(providers.parse("openai", raw, WireContext(request=request)))


def of(parts: list[Any], kind: type) -> list[Any]:
    return [p for p in parts if isinstance(p, kind)]


def texts(parts: list[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in parts:
        if isinstance(part, TextDelta):
            out[part.key] = out.get(part.key, "") + part.text
    return out


def activities(parts: list[Any]) -> dict[str, list[Activity]]:
    out: dict[str, list[Activity]] = {}
    for part in of(parts, Activity):
        out.setdefault(part.activity_id, []).append(part)
    return out


def cited(parts: list[Any], citation: Citation) -> str:
    assert citation.start is not None and citation.end is not None
    return texts(parts)[citation.key][citation.start : citation.end]


RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5-2025-08-07",
    "output": [],
    "status": "in_progress",
    "tools": [],
}


def created(**extra: Any) -> dict[str, Any]:
    return {"type": "response.created", "response": {**RESPONSE, **extra}}


def finished(status: str = "completed", **extra: Any) -> dict[str, Any]:
    kind = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
    }[status]
    return {"type": kind, "response": {**RESPONSE, "status": status, **extra}}


def message_events(
    text: str,
    item_id: str = "msg_1",
    *,
    output_index: int = 0,
    annotations: list[dict] | None = None,
) -> list[dict[str, Any]]:
    item = {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    part = {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}
    half = len(text) // 2
    return [
        {"type": "response.output_item.added", "output_index": output_index, "item": item},
        {
            "type": "response.content_part.added",
            "item_id": item_id,
            "output_index": output_index,
            "content_index": 0,
            "part": {**part, "text": "", "annotations": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": item_id,
            "content_index": 0,
            "delta": text[:half],
            "obfuscation": "xyz",
        },
        {
            "type": "response.output_text.delta",
            "item_id": item_id,
            "content_index": 0,
            "delta": text[half:],
            "obfuscation": "abcd",
        },
        {
            "type": "response.output_item.done",
            "output_index": output_index,
            "item": {**item, "status": "completed", "content": [part]},
        },
    ]


# -- every fixture ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_fixture_is_well_formed(name: str) -> None:
    for parts in parse_recorded(name):
        assert isinstance(parts[0], ResponseStart)
        assert parts[0].model  # the served model, named by the response
        assert isinstance(parts[-1], ResponseEnd)
        assert parts[-1].end_reason in END_REASONS
        for activity in of(parts, Activity):
            assert activity.name in ACTIVITY_NAMES
            assert adapter.__name__ in ACTIVITY_NAMES.producers(activity.name)
        # Every block that starts ends; deltas and citations only inside a started block.
        open_keys: set[str] = set()
        for part in parts:
            if isinstance(part, BlockStart):
                assert part.key not in open_keys
                open_keys.add(part.key)
            elif isinstance(part, TextDelta | Citation):
                assert part.key in open_keys
            elif isinstance(part, BlockEnd):
                open_keys.remove(part.key)
                assert part.payload is not None
        assert not open_keys
        for payload in part_payloads(parts):
            assert payload.provider == "openai"
            assert payload.version.startswith("v1")
            orjson.dumps(payload.as_dict())  # JSON-serializable
            adapter.decode(payload.value, payload.format)  # decodes with its adapter


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_fixture_assembles_without_dropping_a_range(name: str) -> None:
    """The builder accepts every part, and every range it was given addresses the text."""
    for parts in parse_recorded(name):
        events_built = []
        builder = builder_module.EventBuilder()
        builder.begin_response("initial")
        for part in parts:
            events_built.extend(builder.feed(part))
        events_built.extend(builder.end_response())
        given = sum(1 for c in of(parts, Citation) if c.start is not None)
        kept = sum(1 for e in events_built for a in e.attributions if a.start is not None)
        assert kept == given
        assert builder.outcome.status in {"complete", "failed"}


def test_web_search_stream() -> None:
    [parts] = parse_recorded(WEB_SEARCH_STREAM)
    start = parts[0]
    assert start == ResponseStart(
        "openai", "gpt-5-mini-2025-08-07", "resp_0cc96ac817fdc57e00693337060a408198b92bf1f99cf1b8ec"
    )
    # 6 web_search_call items, each started then completed, input from its action.
    calls = activities(parts)
    assert len(calls) == 6
    assert all(k.startswith("ws_") for k in calls)
    assert all([a.state for a in seq] == ["started", "completed"] for seq in calls.values())
    assert all(a.name == "web_search" for seq in calls.values() for a in seq)
    completed = [seq[-1] for seq in calls.values()]
    assert Counter(a.input["action"] for a in completed) == {
        "search": 2,
        "open_page": 1,
        "find_in_page": 3,
    }
    first = completed[0]
    assert first.input == {"action": "search", "query": "tech news today December 5 2025"}
    assert first.summary == "10 results" and len(first.sources) == 10
    assert first.sources[0] == {
        "url": "https://www.wired.com/story/the-big-interview-2025-recap",
        "title": "",
    }
    assert first.payload is not None and first.payload.format == "openai.responses.output_item"
    assert first.payload.version == "v1+web_search"
    assert calls[first.activity_id][0].input == first.input  # started already names the query
    open_page = next(a for a in completed if a.input["action"] == "open_page")
    assert set(open_page.input) == {"action", "url"} and open_page.sources == ()
    find = next(a for a in completed if a.input["action"] == "find_in_page")
    assert set(find.input) == {"action", "url", "pattern"}
    # 7 hidden reasoning items: redacted reasoning blocks, data only in the payload.
    reasoning = [p for p in of(parts, BlockStart) if p.kind == "reasoning"]
    assert len(reasoning) == 7 and all(p.redacted and p.payload for p in reasoning)
    # One message: the streamed text equals the final text; 12 url_citations by code point.
    [message] = [p for p in of(parts, BlockStart) if p.kind == "message"]
    [end] = [p for p in of(parts, BlockEnd) if p.key == message.key]
    final = end.payload.value["content"][0]["text"]
    assert texts(parts)[message.key] == final
    assert any(ord(ch) > 127 for ch in final[:277])  # non-ASCII before the first citation
    citations = of(parts, Citation)
    assert len(citations) == 12
    assert (citations[0].start, citations[0].end) == (277, 411)
    for citation in citations:
        assert citation.unit == "codepoint" and citation.quote is None
        assert citation.url.startswith("https://") and citation.title
        assert citation.replay is not None and citation.replay.value["type"] == "url_citation"
        span = cited(parts, citation)
        # The span is the markdown link the model wrote itself.
        assert span.startswith("([") and span.endswith("))")
        assert citation.url in span
    assert of(parts, Usage) == [
        Usage(
            {
                "input_tokens": 31073,
                "input_tokens_details.cached_tokens": 3712,
                "output_tokens": 4416,
                "output_tokens_details.reasoning_tokens": 3712,
                "total_tokens": 35489,
            }
        )
    ]
    assert parts[-1] == ResponseEnd("end_turn")
    assert not of(parts, StreamError) and not of(parts, ToolCall) and not of(parts, Artifact)


def test_web_search_body() -> None:
    [parts] = parse_recorded(WEB_SEARCH_BODY)
    assert parts[0].model == "gpt-5-mini-2025-08-07"
    calls = activities(parts)
    assert len(calls) == 3
    assert [seq[-1].input["action"] for seq in calls.values()] == [
        "search",
        "open_page",
        "find_in_page",
    ]
    assert all([a.state for a in seq] == ["started", "completed"] for seq in calls.values())
    assert len([p for p in of(parts, BlockStart) if p.kind == "reasoning"]) == 4
    citations = of(parts, Citation)
    assert len(citations) == 10
    assert (citations[0].start, citations[0].end) == (426, 517)
    assert all(cited(parts, c).startswith("([") for c in citations)
    [message_end] = [p for p in of(parts, BlockEnd) if p.key.startswith("msg_")]
    assert message_end.payload.value["content"][0]["text"] == texts(parts)[message_end.key]
    assert of(parts, Usage)[0].counters["output_tokens_details.reasoning_tokens"] == 3136
    assert parts[-1] == ResponseEnd("end_turn")


def test_azure_search_that_never_completes() -> None:
    [parts] = parse_recorded(AZURE)
    assert parts[0].provider == "openai"  # Azure's response names no provider
    assert parts[0].model == "gpt-4.1-mini"
    # output_item.done with status "searching" and no .completed event: started, nothing more.
    [activity] = of(parts, Activity)
    assert activity.state == "started" and activity.name == "web_search"
    assert activity.input == {"action": "search", "query": "top news stories November 19, 2025"}
    assert activity.payload is not None and activity.payload.value["status"] == "searching"
    assert activity.payload.version == "v1+web_search_preview"
    [citation] = of(parts, Citation)
    assert (citation.start, citation.end) == (458, 577)
    assert cited(parts, citation).startswith("[Straits Times](https://www.straitstimes.com/")
    assert len(of(parts, TextDelta)) == 346
    assert parts[-1] == ResponseEnd("end_turn")


def test_file_search_with_file_citations() -> None:
    [parts] = parse_recorded(FILE_SEARCH)
    assert parts[0].model == "gpt-5-mini-2025-08-07"
    [(call_id, seq)] = activities(parts).items()
    assert call_id.startswith("fs_") and [a.state for a in seq] == ["started", "completed"]
    assert seq[-1].name == "file_search"
    assert seq[-1].input["queries"][2] == "definition of embedding model"
    assert len(seq[-1].input["queries"]) == 3
    assert seq[-1].summary == "" and seq[-1].sources == ()  # results: null (not included)
    assert seq[-1].payload.value["results"] is None
    assert seq[-1].payload.version == "v1+file_search"
    citations = of(parts, Citation)
    assert len(citations) == 2
    for citation, index in zip(citations, (154, 382), strict=True):
        # A file citation has no URL and marks a point, not a span: no range.
        assert citation.url == "" and citation.title == "ai.pdf"
        assert citation.start is None and citation.end is None
        assert citation.replay.value == {
            "type": "file_citation",
            "index": index,
            "file_id": "file-Ebzhf8H4DPGPr9pUhr7n7v",
            "filename": "ai.pdf",
        }
    assert parts[-1] == ResponseEnd("end_turn")


def test_error_stream_fails_the_turn() -> None:
    [parts] = parse_recorded(ERROR)
    assert [type(p) for p in parts] == [ResponseStart, StreamError, ResponseEnd]
    assert parts[0].model == "gpt-5-nano-2025-08-07"
    assert parts[1].code == "insufficient_quota"
    assert "exceeded your current quota" in parts[1].message
    assert parts[1].payload.format == "openai.error"
    assert parts[2] == ResponseEnd("error")


def test_raw_annotations_cassette() -> None:
    first, second, third = parse_recorded(RAW_ANNOTATIONS)
    for parts in (first, second, third):
        assert parts[0].model == "gpt-5.2-2025-12-11"
        assert parts[-1] == ResponseEnd("end_turn")
        # obfuscation padding never reaches the text
        [message_end] = [p for p in of(parts, BlockEnd)]
        assert texts(parts)[message_end.key] == message_end.payload.value["content"][0]["text"]
    searches = activities(first)
    assert len(searches) == 2
    done = [seq[-1] for seq in searches.values()]
    assert done[1].input["queries"] == [
        "Mount Columbia highest point in Alberta 3747 m highest mountain in Alberta",
        "Mount Columbia tallest mountain in Alberta official source",
    ]
    assert done[1].input["query"] == done[1].input["queries"][0]
    [citation] = of(first, Citation)
    assert (citation.start, citation.end) == (77, 162)
    assert cited(first, citation) == (
        "([britannica.com](https://www.britannica.com/place/Mount-Columbia?utm_source=openai))"
    )
    [citation] = of(second, Citation)
    assert cited(second, citation).startswith("([britannica.com]")  # after a non-ASCII ’
    assert len(activities(second)) == 1
    # The third interaction has no tool.
    assert not of(third, Activity) and not of(third, Citation)
    assert texts(third) == {"msg_0dbef2d9d14a548c00696d5e6fb1a08190941cffd38695ae38": "2+2 = 4"}
    assert of(third, BlockEnd)[0].payload.version == "v1"


def test_openrouter_chat_completions_stream() -> None:
    [parts] = parse_recorded(OPENROUTER)
    # The chunk names OpenRouter's upstream ("OpenAI"): the provider that answered is openrouter.
    assert parts[0] == ResponseStart(
        "openrouter", "deepseek/deepseek-chat", "gen-1786680764-gY2YTdjLLLQA6Cd1Wa6J"
    )
    citations = of(parts, Citation)
    assert len(citations) == 5
    for citation in citations:
        assert citation.start is None and citation.end is None  # 0/0 is no range
        assert citation.excerpt  # the page excerpt `content`
        assert citation.replay.format == "openai.chat.annotation"
    assert citations[0].url == "https://github.com/pydantic/pydantic-ai"
    assert citations[0].title == "AI Agent Framework, the Pydantic way - GitHub"
    assert citations[0].excerpt.startswith("# pydantic/pydantic-ai")
    [text] = texts(parts).values()
    assert text.endswith("https://github.com/pydantic/pydantic-ai")
    [end] = of(parts, BlockEnd)
    assert end.payload.format == "openai.chat.message"
    assert end.payload.value["content"] == text
    assert len(end.payload.value["annotations"]) == 5
    assert end.payload.version == "v1+openrouter:web_search"
    [usage] = of(parts, Usage)
    assert usage.counters["server_tool_use_details.web_search_requests"] == 1
    assert "cost" not in usage.counters  # a float, not a counter
    # OpenRouter ran the search and says so only in the counter: one search, consulting the
    # annotated pages, started and completed where the counter arrives (before the end).
    search_id = "gen-1786680764-gY2YTdjLLLQA6Cd1Wa6J:web_search:0"
    started, completed = of(parts, Activity)
    assert (started.activity_id, started.name, started.state) == (search_id, "web_search",
                                                                  "started")
    assert (completed.activity_id, completed.state, completed.summary) == (
        search_id, "completed", "5 sources")
    assert [s["url"] for s in completed.sources] == [c.url for c in citations]
    assert parts.index(completed) < parts.index(usage)
    assert parts[-1] == ResponseEnd("end_turn")


# -- synthetic Responses streams --------------------------------------------------------------


def test_refusal_part_ends_with_refusal() -> None:
    item = {"id": "msg_r", "type": "message", "role": "assistant", "content": []}
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    parts = parse_events(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.content_part.added",
            "item_id": "msg_r",
            "content_index": 0,
            "part": {"type": "refusal", "refusal": ""},
        },
        {
            "type": "response.refusal.delta",
            "item_id": "msg_r",
            "content_index": 0,
            "delta": "I can't help",
        },
        {
            "type": "response.refusal.delta",
            "item_id": "msg_r",
            "content_index": 0,
            "delta": " with that.",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {**item, "status": "completed", "content": [refusal]},
        },
        finished(),
    )
    assert texts(parts) == {"msg_r": "I can't help with that."}
    assert parts[-1] == ResponseEnd("refusal")


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("max_output_tokens", "max_tokens"), ("content_filter", "refusal")],
)
def test_incomplete_response(reason: str, expected: str) -> None:
    parts = parse_events(
        created(),
        *message_events("Partial answer"),
        finished(
            "incomplete",
            incomplete_details={"reason": reason},
            usage={"input_tokens": 3, "output_tokens": 16},
        ),
    )
    assert texts(parts) == {"msg_1": "Partial answer"}
    assert of(parts, Usage) == [Usage({"input_tokens": 3, "output_tokens": 16})]
    assert parts[-1] == ResponseEnd(expected)


def test_unknown_item_type_is_an_artifact() -> None:
    item = {"id": "zz_1", "type": "hologram_call", "status": "completed", "frames": [1, 2]}
    parts = parse_events(
        created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress"},
        },
        {"type": "response.hologram_call.rendering", "item_id": "zz_1"},  # unknown event
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        *message_events("Done.", output_index=1),
        finished(),
    )
    [artifact] = of(parts, Artifact)
    assert artifact.type == "hologram_call" and artifact.summary == "hologram_call (completed)"
    assert artifact.payload.value == item
    adapter.decode(artifact.payload.value, artifact.payload.format)
    assert texts(parts) == {"msg_1": "Done."}
    assert parts[-1] == ResponseEnd("end_turn")


def test_function_call_is_a_tool_call() -> None:
    call = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    }
    parts = parse_events(
        created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**call, "arguments": "", "status": "in_progress"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"city": '},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '"Paris"}'},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        finished(),
    )
    [tool_call] = of(parts, ToolCall)
    assert tool_call.call_id == "call_9" and tool_call.name == "get_weather"
    assert tool_call.arguments == {"city": "Paris"}
    assert tool_call.payload.value == call
    assert not of(parts, Activity)
    assert parts[-1] == ResponseEnd("tool_use")


def test_reasoning_summary_and_encrypted_content() -> None:
    item = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAopaque"}
    done = {
        **item,
        "summary": [
            {"type": "summary_text", "text": "First."},
            {"type": "summary_text", "text": "Second."},
        ],
    }
    parts = parse_events(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_1",
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "summary_index": 0,
            "delta": "First.",
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_1",
            "summary_index": 1,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "summary_index": 1,
            "delta": "Second.",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        *message_events("Answer.", output_index=1),
        finished(),
    )
    [start] = [p for p in of(parts, BlockStart) if p.key == "rs_1"]
    assert start.kind == "reasoning" and not start.redacted
    assert texts(parts)["rs_1"] == "First.\n\nSecond."
    [end] = [p for p in of(parts, BlockEnd) if p.key == "rs_1"]
    assert end.payload.value["encrypted_content"] == "gAAAAopaque"  # kept, never as text
    assert "gAAAA" not in "".join(texts(parts).values())


def test_message_with_two_parts_shifts_citation_offsets() -> None:
    annotation = {
        "type": "url_citation",
        "start_index": 0,
        "end_index": 6,
        "url": "https://b.example",
        "title": "B",
    }
    content = [
        {"type": "output_text", "text": "Alpha.", "annotations": []},
        {"type": "output_text", "text": "Beta é.", "annotations": [annotation]},
    ]
    body = {
        **RESPONSE,
        "status": "completed",
        "output": [
            {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        ],
    }
    parts = list(providers.parse("openai", orjson.dumps(body)))
    assert texts(parts) == {"msg_2": "Alpha.\n\nBeta é."}
    [citation] = of(parts, Citation)
    assert (citation.start, citation.end) == (8, 14)
    assert cited(parts, citation) == "Beta é"


def test_annotations_only_in_the_finished_item_are_still_cited() -> None:
    annotation = {
        "type": "url_citation",
        "start_index": 0,
        "end_index": 5,
        "url": "https://a.example",
        "title": "A",
    }
    parts = parse_events(
        created(), *message_events("Hello world", annotations=[annotation]), finished()
    )
    [citation] = of(parts, Citation)
    assert cited(parts, citation) == "Hello"


def test_annotation_streamed_and_repeated_in_done_is_cited_once() -> None:
    annotation = {
        "type": "url_citation",
        "start_index": 6,
        "end_index": 11,
        "url": "https://w.example",
        "title": "W",
    }
    events = message_events("Hello world", annotations=[annotation])
    added = {
        "type": "response.output_text.annotation.added",
        "item_id": "msg_1",
        "content_index": 0,
        "annotation_index": 0,
        "annotation": annotation,
    }
    parts = parse_events(created(), *events[:3], added, *events[3:], finished())
    [citation] = of(parts, Citation)
    assert cited(parts, citation) == "world"
    assert citation.replay.value == annotation


def test_failed_web_search_and_code_interpreter() -> None:
    search = {
        "id": "ws_f",
        "type": "web_search_call",
        "status": "failed",
        "action": {"type": "search", "query": "q"},
    }
    code = {
        "id": "ci_1",
        "type": "code_interpreter_call",
        "status": "completed",
        "code": "print(1)",
        "container_id": "cntr_1",
        "outputs": [{"type": "logs", "logs": "1\n"}],
    }
    parts = parse_events(
        created(
            tools=[
                {"type": "web_search"},
                {"type": "code_interpreter"},
                {"type": "function", "name": "f"},
            ]
        ),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "ws_f", "type": "web_search_call", "status": "in_progress"},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": search},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**code, "status": "in_progress", "outputs": None},
        },
        {"type": "response.output_item.done", "output_index": 1, "item": code},
        finished(),
    )
    calls = activities(parts)
    assert [a.state for a in calls["ws_f"]] == ["started", "failed"]
    assert calls["ws_f"][-1].error_code == "failed"
    assert [a.state for a in calls["ci_1"]] == ["started", "completed"]
    assert calls["ci_1"][-1].name == "code_execution"
    assert calls["ci_1"][-1].input == {"code": "print(1)", "container_id": "cntr_1"}
    assert calls["ci_1"][-1].summary == "1 output"
    assert calls["ci_1"][-1].payload.version == "v1+web_search+code_interpreter"


def test_error_event_without_response_failed() -> None:
    parts = parse_events(
        created(),
        {"type": "error", "code": "server_error", "message": "Something broke", "param": None},
    )
    assert [type(p) for p in parts] == [ResponseStart, StreamError, ResponseEnd]
    assert parts[1].code == "server_error" and parts[-1] == ResponseEnd("error")


def test_response_failed_without_error_event() -> None:
    parts = parse_events(
        created(),
        finished("failed", error={"code": "server_error", "message": "The server had an error"}),
    )
    assert [type(p) for p in parts] == [ResponseStart, StreamError, ResponseEnd]
    assert parts[1].code == "server_error" and parts[-1] == ResponseEnd("error")


def test_cut_stream_has_no_end_and_no_block_end() -> None:
    events = message_events("Half of the answer", output_index=1)[:3]  # added, part, 1 delta
    parts = parse_events(
        created(tools=[{"type": "web_search"}]),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "id": "ws_cut",
                "type": "web_search_call",
                "status": "in_progress",
                "action": {"type": "search"},
            },
        },
        {"type": "response.web_search_call.searching", "item_id": "ws_cut", "output_index": 0},
        *events,
    )
    assert not of(parts, ResponseEnd) and not of(parts, BlockEnd)
    assert texts(parts) == {"msg_1": "Half of t"}  # the first of two deltas
    [activity] = of(parts, Activity)
    assert activity.activity_id == "ws_cut" and activity.state == "started"
    assert activity.input == {"action": "search"}


def test_stream_cut_inside_its_last_line() -> None:
    raw = b"".join(orjson.dumps(e) + b"\n" for e in (created(), *message_events("Hi there")[:3]))
    raw += b'{"type":"response.output_text.delta","item_id":"msg_1","del'
    parts = list(providers.parse("openai", raw))
    assert texts(parts) == {"msg_1": "Hi t"}  # the first delta; the cut one is dropped
    assert not of(parts, ResponseEnd) and not of(parts, BlockEnd)


def test_version_from_the_request_when_the_response_does_not_say() -> None:
    event = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "ws_1",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "x", "sources": []},
        },
    }
    parts = parse_events(event, request={"tools": [{"type": "web_search_preview"}]})
    assert parts[0] == ResponseStart("openai", "", "")
    completed = of(parts, Activity)[-1]
    assert completed.summary == "no results"
    assert completed.payload.version == "v1+web_search_preview"


# -- synthetic Chat Completions ---------------------------------------------------------------


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def chat_sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def test_chat_stream_with_ranged_annotation_and_tool_call() -> None:
    annotation = {
        "type": "url_citation",
        "url_citation": {
            "url": "https://e.example",
            "title": "E",
            "start_index": 4,
            "end_index": 9,
        },
    }
    raw = chat_sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "See: "}),
        chunk({"content": "there", "annotations": [annotation]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q":'},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]}),
        chunk({}, "tool_calls"),
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "gpt-4o-2024-08-06",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7},
        },
    )
    parts = list(providers.parse("openai", raw))
    assert parts[0] == ResponseStart("openai", "gpt-4o-2024-08-06", "chatcmpl-1")
    [citation] = of(parts, Citation)
    assert (citation.start, citation.end, citation.unit) == (4, 9, "codepoint")
    assert texts(parts) == {"choice-0": "See: there"}
    [tool_call] = of(parts, ToolCall)
    assert (tool_call.call_id, tool_call.name, tool_call.arguments) == (
        "call_1",
        "lookup",
        {"q": "x"},
    )
    assert of(parts, Usage) == [Usage({"prompt_tokens": 5, "completion_tokens": 7})]
    assert parts[-1] == ResponseEnd("tool_use")
    assert parts.index(of(parts, BlockEnd)[0]) < parts.index(tool_call)


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
        ("something_new", "end_turn"),
    ],
)
def test_chat_finish_reasons(finish: str, expected: str) -> None:
    parts = list(providers.parse("openai", chat_sse(chunk({"content": "Hi"}), chunk({}, finish))))
    assert parts[-1] == ResponseEnd(expected)


def test_chat_refusal_and_reasoning() -> None:
    raw = chat_sse(
        chunk({"reasoning_content": "Thinking..."}),
        chunk({"refusal": "I can't do that."}),
        chunk({}, "stop"),
    )
    parts = list(providers.parse("openai", raw))
    starts = of(parts, BlockStart)
    assert [(s.key, s.kind) for s in starts] == [
        ("choice-0-reasoning", "reasoning"),
        ("choice-0", "message"),
    ]
    assert texts(parts) == {"choice-0-reasoning": "Thinking...", "choice-0": "I can't do that."}
    ends = {e.key: e.payload for e in of(parts, BlockEnd)}
    assert ends["choice-0-reasoning"].value == {"reasoning_content": "Thinking..."}
    assert ends["choice-0"].value["refusal"] == "I can't do that."
    assert parts[-1] == ResponseEnd("refusal")


def test_chat_cut_stream() -> None:
    parts = list(providers.parse("openai", chat_sse(chunk({"content": "Half"}), done=False)))
    assert texts(parts) == {"choice-0": "Half"}
    assert not of(parts, ResponseEnd) and not of(parts, BlockEnd)


def test_chat_error_chunk() -> None:
    raw = chat_sse(
        chunk({"content": "Hel"}),
        {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "model": "m",
            "error": {"code": 502, "message": "Upstream error"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        },
    )
    parts = list(providers.parse("openai", raw))
    [error] = of(parts, StreamError)
    assert error.code == "502" and error.message == "Upstream error"
    assert parts[-1] == ResponseEnd("error")


def test_chat_body() -> None:
    body = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "model": "gpt-4o-search-preview-2025-03-11",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "Paris is the capital [1].",
                    "refusal": None,
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": "https://p.example",
                                "title": "P",
                                "start_index": 0,
                                "end_index": 5,
                            },
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    parts = list(providers.parse("openai", orjson.dumps(body)))
    assert parts[0].model == "gpt-4o-search-preview-2025-03-11"
    [citation] = of(parts, Citation)
    assert cited(parts, citation) == "Paris"
    [end] = of(parts, BlockEnd)
    assert end.payload.value == body["choices"][0]["message"]
    assert parts[-1] == ResponseEnd("end_turn")


# -- malformed input --------------------------------------------------------------------------


def test_anthropic_stream_is_not_openai() -> None:
    raw = (
        b'{"type":"message_start","message":{"id":"msg_1","model":"claude"}}\n'
        b'{"type":"message_stop"}\n'
    )
    with pytest.raises(MalformedInput) as caught:
        list(providers.parse("openai", raw))
    assert caught.value.line == 1
    assert "message_start" in str(caught.value)


def test_event_of_the_wrong_shape_names_its_line() -> None:
    raw = (
        orjson.dumps(created())
        + b"\n"
        + b'{"type":"response.output_item.added","output_index":0,"item":"oops"}\n'
    )
    with pytest.raises(MalformedInput) as caught:
        list(providers.parse("openai", raw))
    assert caught.value.line == 2 and "'item'" in caught.value.message


def test_delta_for_an_unknown_item_names_its_line() -> None:
    raw = (
        orjson.dumps(created())
        + b"\n"
        + orjson.dumps({"type": "response.output_text.delta", "item_id": "msg_x", "delta": "hi"})
        + b"\n"
    )
    with pytest.raises(MalformedInput) as caught:
        list(providers.parse("openai", raw))
    assert caught.value.line == 2


def test_body_of_the_wrong_shape() -> None:
    with pytest.raises(MalformedInput, match="message_start"):
        list(providers.parse("openai", b'{"type":"message_start","message":{}}'))
    with pytest.raises(MalformedInput) as caught:
        list(providers.parse("openai", b'{"candidates": []}'))
    assert caught.value.line == 1
    with pytest.raises(MalformedInput, match="insufficient_quota"):
        list(
            providers.parse("openai", b'{"error": {"code": "insufficient_quota", "message": "x"}}')
        )
    with pytest.raises(MalformedInput, match="output"):
        list(providers.parse("openai", b'{"object": "response", "output": 3}'))


# -- payload decoding and registries ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "format"),
    [
        ({"type": "message"}, "openai.responses.output_item"),
        ({"type": "function_call", "name": "f"}, "openai.responses.output_item"),
        ({"no": "type"}, "openai.responses.output_item"),
        ({}, "openai.responses.annotation"),
        ({"content": "x"}, "openai.chat.message"),
        ({"function": {}}, "openai.chat.tool_call"),
        ({"text": "x"}, "openai.chat.reasoning"),
        ({"type": "text", "text": "x"}, "anthropic.content_block"),
        ([], "openai.responses.output_item"),
    ],
)
def test_decode_rejects_what_it_cannot_read(value: Any, format: str) -> None:
    with pytest.raises(ValueError):
        adapter.decode(value, format)


def test_registered_values_are_emitted() -> None:
    for reason in ("end_turn", "max_tokens", "tool_use", "refusal", "error"):
        assert adapter.__name__ in END_REASONS.producers(reason)
    for name in ("web_search", "file_search", "code_execution"):
        assert adapter.__name__ in ACTIVITY_NAMES.producers(name)
    assert adapter.__name__ not in END_REASONS.producers("pause_turn")
    assert adapter.__name__ not in END_REASONS.producers("stop_sequence")
