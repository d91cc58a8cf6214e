"""The second recording set's streams cut at every event boundary (and, by hypothesis, inside
an event): the adapters never crash, no stored range is stale, a hosted call that started stays
reported, and a function call whose arguments were still streaming is kept as an incomplete
call, never a complete one."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import providers
from streams.parts import Activity, Citation, Part, ToolCall
from streams.run import assemble
from tests.support import recorded

SET = "providers-more"
STREAMS = [
    ("anthropic", "pydantic-ai__test_anthropic_web_fetch_tool_stream.sse.txt"),
    ("anthropic", "vercel-ai__anthropic-web-fetch-tool-20260209.1.chunks.txt"),
    ("anthropic", "pydantic-ai__test_anthropic_code_execution_tool_stream.sse.txt"),
    ("anthropic", "pydantic-ai__test_anthropic_mcp_servers_stream.sse.txt"),
    ("anthropic", "pydantic-ai__test_anthropic_compaction_usage_with_cache_streaming.sse.txt"),
    ("anthropic", "pydantic-ai__test_anthropic_advisor_tool_stream.sse.txt"),
    ("anthropic", "pydantic-ai__test_anthropic_native_tool_search_streaming.interaction0.sse.txt"),
    ("anthropic", "vercel-ai__anthropic-programmatic-tool-calling.1.lines168-169.chunks.txt"),
    ("anthropic", "llm-anthropic__test_refusal_raises.sse.txt"),
    ("openai", "pydantic-ai__test_openai_responses_code_execution_return_image_stream.sse.txt"),
    ("openai",
     "pydantic-ai__test_openai_responses_thinking_with_code_execution_tool_stream.sse.txt"),
    ("openai", "pydantic-ai__test_openai_responses_model_mcp_server_tool_stream.sse.txt"),
    ("openai", "vercel-ai__openai-mcp-tool-approval.1.chunks.txt"),
    ("openai", "vercel-ai__azure-image-generation-tool.1.chunks.txt"),
    ("openai", "vercel-ai__openai-tool-search.1.chunks.txt"),
    ("google", "pydantic-ai__test_google_model_web_fetch_tool_stream.sse.txt"),
    ("google", "pydantic-ai__test_google_model_file_search_tool_stream.interaction3.sse.txt"),
    ("google",
     "pydantic-ai__test_google_model_file_search_grounding_gemini_3-True.interaction3.sse.txt"),
    ("google", "pydantic-ai__test_code_execution_stream.sse.txt"),
    ("google", "pydantic-ai__test_google_model_thinking_part_iter.sse.txt"),
    ("google", "pydantic-ai__test_native_output_with_builtin_tools_stream.sse.txt"),
    ("google", "vercel-ai__google-stream-tool-call-arguments.chunks.txt"),
]
STREAMED_ARGS = "vercel-ai__google-stream-tool-call-arguments.chunks.txt"
_EVENT_END = re.compile(rb"\r?\n\r?\n|(?<=\})[ \t]*\r?\n")  # an SSE event, or a JSON line

_RAW: dict[str, bytes] = {}


def raw_of(provider: str, name: str) -> bytes:
    if name not in _RAW:
        (rec,) = recorded(provider, name, SET)
        _RAW[name] = rec.raw
    return _RAW[name]


def boundaries(raw: bytes) -> list[int]:
    """Where each wire event ends (the offsets a stream can be cut at between events)."""
    return [m.end() for m in _EVENT_END.finditer(raw)]


def check_cut(provider: str, raw: bytes) -> list[Part]:
    """Parse and assemble a cut stream; its ranges are never stale. Returns its parts."""
    parts = list(providers.parse(provider, raw))
    _, records = assemble([("cut", iter(parts))], on_unreadable="cut")
    quotes = {c.quote for c in parts if isinstance(c, Citation) and c.quote is not None}
    for record in records:
        for a in record.attributions:
            if a.start is None:
                continue
            assert 0 <= a.start < a.end <= len(record.text)
            if quotes:  # the provider sent its own copy of each cited segment
                assert record.text[a.start:a.end] in quotes
    return parts


def started_ids(parts: list[Part]) -> set[str]:
    return {p.activity_id for p in parts if isinstance(p, Activity)}


@pytest.mark.parametrize(("provider", "name"), STREAMS)
def test_cut_at_every_event_boundary(provider: str, name: str) -> None:
    raw = raw_of(provider, name)
    cuts = boundaries(raw)
    assert len(cuts) > 1
    whole = started_ids(list(providers.parse(provider, raw)))
    seen: set[str] = set()
    for cut in cuts:
        parts = check_cut(provider, raw[:cut])
        ids = started_ids(parts)
        assert seen <= ids <= whole  # a hosted call once reported stays reported
        seen = ids
        for call in (p for p in parts if isinstance(p, ToolCall)):
            assert call.incomplete == (call.payload is None)


@pytest.mark.parametrize(("provider", "name"), STREAMS)
@settings(max_examples=25, deadline=None)
@given(where=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_cut_inside_an_event(provider: str, name: str, where: float) -> None:
    raw = raw_of(provider, name)
    # From the end of the first event on (an input cut before any whole event is no
    # response at all: the reader refuses it as empty or unreadable, by design).
    first = boundaries(raw)[0]
    check_cut(provider, raw[: first + int((len(raw) - first) * where)])


def expected_calls(raw: bytes) -> list[tuple[str, dict[str, str], bool]]:
    """The calls the streamed-arguments file holds up to ``raw``'s end, read from the wire:
    (name, arguments so far, finished). A string piece with willContinue goes on."""
    calls: list[tuple[str, dict[str, str], bool]] = []
    for line in raw.splitlines():
        if not line.strip().endswith(b"}"):
            continue  # a cut last line is not read
        for part in orjson.loads(line)["candidates"][0]["content"]["parts"]:
            call = part["functionCall"]
            if "name" in call:
                calls.append((call["name"], {}, False))
                continue
            name, args, _ = calls[-1]
            for piece in call.get("partialArgs", []):
                key = piece["jsonPath"].removeprefix("$.")
                args[key] = args.get(key, "") + piece["stringValue"]
            if not call.get("willContinue"):
                calls[-1] = (name, args, True)
    return calls


def test_a_half_streamed_argument_is_kept_as_an_incomplete_call() -> None:
    raw = raw_of("google", STREAMED_ARGS)
    for cut in boundaries(raw):
        calls = [p for p in check_cut("google", raw[:cut]) if isinstance(p, ToolCall)]
        expected = expected_calls(raw[:cut])
        assert [(c.name, c.arguments, not c.incomplete) for c in calls] == expected
        for call in calls:
            assert call.incomplete == (call.payload is None)
