"""Google Gemini adapter: the recorded fixtures (per-file facts from the fixtures README) and
synthetic inputs for what the recordings lack."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

import providers
from providers import WireContext, google
from providers.wire import MalformedInput
from streams import ranges
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
from tests.support import Recorded, recorded

STREAM = "pydantic-ai__test_google_model_web_search_tool_stream.yaml"
BODIES = "pydantic-ai__test_google_model_web_search_tool.yaml"
TWO_QUERIES = "pydantic-ai__test_google_native_tool_only_web_search_completes.yaml"
VERTEX = (
    "pydantic-ai__test_google_vertex_tool_combination_omits_include_server_side_tool_invocations"
    ".yaml"
)
INTERACTIONS = "vercel-ai__interactions-google-search.chunks.txt"
ALL_FILES = (STREAM, BODIES, TWO_QUERIES, VERTEX, INTERACTIONS)

GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def parse_recorded(rec: Recorded) -> list[Part]:
    return list(providers.parse("google", rec.raw, rec.context))


def parse_raw(raw: bytes | str, endpoint: str | None = GEMINI_URL) -> list[Part]:
    return list(providers.parse("google", raw, WireContext(endpoint=endpoint)))


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in events)


def of(parts: list[Part], kind: type) -> list[Any]:
    return [p for p in parts if isinstance(p, kind)]


def text_of(parts: list[Part], key: str) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextDelta) and p.key == key)


def chunk(*parts: dict[str, Any], finish: str | None = None, **candidate: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    cand.update(candidate)
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": "gemini-2.5-pro", "responseId": "r1"}


def assert_well_formed(parts: list[Part]) -> None:
    """Contract checks every response must pass."""
    assert isinstance(parts[0], ResponseStart)
    assert sum(isinstance(p, ResponseStart) for p in parts) == 1
    ends = of(parts, ResponseEnd)
    assert len(ends) <= 1
    if ends:
        assert parts[-1] is ends[0]
    open_keys: set[str] = set()
    closed: set[str] = set()
    for part in parts:
        if isinstance(part, BlockStart):
            assert part.key not in open_keys | closed
            open_keys.add(part.key)
        elif isinstance(part, TextDelta | Citation):
            assert part.key in open_keys, "text/citation outside an open block"
        elif isinstance(part, BlockEnd):
            open_keys.remove(part.key)
            closed.add(part.key)
    for part in parts:
        payloads = [getattr(part, "payload", None), getattr(part, "replay", None)]
        for payload in filter(None, payloads):
            assert payload.provider == "google"
            orjson.dumps(payload.as_dict())  # JSON-serializable
            google.decode(payload.value, payload.format)  # decodes with its own adapter
        if isinstance(part, Activity):
            assert "providers.google" in ACTIVITY_NAMES.producers(part.name)
        if isinstance(part, ResponseEnd):
            assert "providers.google" in END_REASONS.producers(part.end_reason)


def utf8_slice(text: str, start: int, end: int) -> str:
    return text.encode()[start:end].decode("utf-8", errors="replace")


def search_activity(parts: list[Part]) -> tuple[Activity, Activity]:
    activities = of(parts, Activity)
    assert [a.state for a in activities] == ["started", "completed"]
    assert activities[0].activity_id == activities[1].activity_id
    assert {a.name for a in activities} == {"web_search"}
    return activities[0], activities[1]


# ---------------------------------------------------------------------------------------------
# Recorded fixtures


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_recorded_response_is_well_formed(name: str) -> None:
    for rec in recorded("google", name):
        parts = parse_recorded(rec)
        assert_well_formed(parts)
        assert of(parts, ResponseEnd), "every recording finished normally"
        assert not of(parts, StreamError)


def test_stream_text_chunks_form_one_block_with_utf8_supports() -> None:
    rec = recorded("google", STREAM)[0]
    assert "streamGenerateContent" in rec.url
    parts = parse_recorded(rec)
    start = parts[0]
    assert start == ResponseStart("google", "gemini-2.5-pro", "ftnJaMmAMcm-qtsPwvCCoAo")

    # Ten SSE chunks, one message block; the `{}` groundingMetadata of 9 chunks changes nothing.
    (block,) = of(parts, BlockStart)
    assert block.kind == "message" and not block.redacted
    assert len(of(parts, TextDelta)) == 10
    text = text_of(parts, block.key)
    assert "°" in text and len(text.encode()) > len(text)
    assert not [a for a in of(parts, Artifact) if a.type == "google.candidate_metadata"]

    # Supports -> 9 citations (8 supports, one citing two chunks), raw UTF-8 byte offsets.
    citations = of(parts, Citation)
    assert len(citations) == 9
    assert {c.unit for c in citations} == {"utf8"}
    assert (citations[0].start, citations[0].end) == (235, 375)
    assert all(utf8_slice(text, c.start, c.end) == c.quote for c in citations)
    # The `°` before the supports shifts code points: the offsets can only be bytes.
    assert any(text[c.start : c.end] != c.quote for c in citations)
    assert citations[-1].title == "Weather information for San Francisco, CA, US"

    # Hosted search: one activity, id synthesized from the response id.
    started, completed = search_activity(parts)
    assert started.activity_id == "ftnJaMmAMcm-qtsPwvCCoAo:search"
    assert started.input == {"queries": ["weather in San Francisco today"]}
    assert len(completed.sources) == 5
    assert completed.sources[1] == {
        "url": completed.sources[1]["url"],
        "title": "timeanddate.com",
    }
    assert completed.sources[0]["url"].startswith("https://www.google.com/search?q=")
    assert completed.summary == "1 query · 5 sources"

    # Native payload: the streamed text as one part, plus groundingMetadata as received.
    (end,) = of(parts, BlockEnd)
    assert end.payload.format == "google.candidate" and end.payload.version == "v1beta"
    assert end.payload.value["content"]["parts"] == [{"text": text}]
    grounding = end.payload.value["groundingMetadata"]
    assert grounding["webSearchQueries"] == ["weather in San Francisco today"]
    assert len(grounding["groundingSupports"]) == 8
    assert all("confidenceScores" not in s for s in grounding["groundingSupports"])
    assert parts.index(end) > max(parts.index(c) for c in citations)

    # The search entry point: untrusted HTML for the renderer to sanitize, after the block.
    (entry,) = [a for a in of(parts, Artifact) if a.type == "google.search_entry_point"]
    assert entry.summary == "Google Search suggestions"
    assert entry.display_html.startswith("<style>")
    assert entry.payload.format == "google.search_entry_point"
    assert entry.payload.value == {"renderedContent": entry.display_html}
    assert parts.index(entry) > parts.index(end)

    (usage,) = of(parts, Usage)
    assert usage.counters["toolUsePromptTokenCount"] == 102
    assert usage.counters["thoughtsTokenCount"] == 412
    assert parts[-1] == ResponseEnd("end_turn")


def test_stream_cassette_follow_up_is_a_body() -> None:
    rec = recorded("google", STREAM)[1]
    assert rec.url.endswith(":generateContent")
    parts = parse_recorded(rec)
    assert parts[0] == ResponseStart("google", "gemini-2.5-pro", "itnJaJK1BsGxqtsPrIeb6Ao")
    started, completed = search_activity(parts)
    assert started.input == {"queries": ["weather in Mexico City today"]}
    assert completed.summary == "1 query · 4 sources"
    (block,) = of(parts, BlockStart)
    text = text_of(parts, block.key)
    citations = of(parts, Citation)
    assert len(citations) == 14  # 7 supports citing 1+1+3+3+3+1+2 chunks
    assert (citations[0].start, citations[0].end) == (72, 229)
    assert all(utf8_slice(text, c.start, c.end) == c.quote for c in citations)
    assert of(parts, Usage)[0].counters["toolUsePromptTokenCount"] == 319
    assert parts[-1] == ResponseEnd("end_turn")


def test_generate_content_bodies() -> None:
    first, second = recorded("google", BODIES)
    parts = parse_recorded(first)
    assert parts[0] == ResponseStart("google", "gemini-2.5-pro", "btnJaOrqE4_6qtsP7bOboQs")
    started, completed = search_activity(parts)
    assert started.activity_id == "btnJaOrqE4_6qtsP7bOboQs:search"
    assert completed.summary == "1 query · 3 sources"
    (block,) = of(parts, BlockStart)
    text = text_of(parts, block.key)
    citations = of(parts, Citation)
    assert len(citations) == 6
    assert [(c.start, c.end) for c in citations][:2] == [(55, 216), (217, 271)]
    assert all(utf8_slice(text, c.start, c.end) == c.quote for c in citations)
    assert any(text[c.start : c.end] != c.quote for c in citations)  # `°` again: bytes
    (end,) = of(parts, BlockEnd)
    assert end.payload.value["content"]["parts"] == [{"text": text}]
    assert "searchEntryPoint" in end.payload.value["groundingMetadata"]
    assert of(parts, Usage)[0].counters["toolUsePromptTokenCount"] == 119
    assert parts[-1] == ResponseEnd("end_turn")

    parts = parse_recorded(second)
    assert parts[0].response_id == "dtnJaKyTAri3qtsPu4imqQs"
    _, completed = search_activity(parts)
    assert completed.input == {"queries": ["current weather in Mexico City"]}
    assert len(of(parts, Citation)) == 5  # supports citing [0, 1, 2] and [1, 2]
    assert parts[-1] == ResponseEnd("end_turn")


def test_two_queries_and_a_support_citing_two_chunks() -> None:
    (rec,) = recorded("google", TWO_QUERIES)
    parts = parse_recorded(rec)
    assert parts[0].model == "gemini-2.5-flash"
    started, completed = search_activity(parts)
    assert started.input == {
        "queries": ["current time in San Francisco", "weather in San Francisco right now"]
    }
    assert completed.summary == "2 queries · 2 sources"
    citations = of(parts, Citation)
    assert len(citations) == 2
    assert {(c.start, c.end) for c in citations} == {(171, 233)}
    assert len({c.url for c in citations}) == 2
    assert citations[0].quote == "There is a 19% chance of rain, and the humidity is around 94%."
    usage = of(parts, Usage)[0].counters
    assert usage["toolUsePromptTokenCount"] == 90
    assert "serviceTier" not in usage  # a string, not a counter
    assert parts[-1] == ResponseEnd("end_turn")


def test_vertex_function_call_then_grounded_text_with_offset_drift() -> None:
    call_rec, text_rec = recorded("google", VERTEX)
    assert "aiplatform.googleapis.com/v1beta1/" in call_rec.url

    parts = parse_recorded(call_rec)
    # Vertex AI served it (the request went to aiplatform.googleapis.com): its provider.
    assert parts[0] == ResponseStart("vertex", "gemini-3-flash-preview", "5QlpatShBNyV3tMPkcCE2Ak")
    assert not of(parts, BlockStart)
    (call,) = of(parts, ToolCall)
    assert (call.call_id, call.name, call.arguments) == ("vcyiitct", "get_user_city", {})
    assert call.payload.format == "google.part"
    assert call.payload.version == "vertex/v1beta1"
    assert call.payload.value["thoughtSignature"].startswith("AY89a19O")
    assert "trafficType" not in of(parts, Usage)[0].counters
    assert parts[-1] == ResponseEnd("tool_use")  # STOP after a function call

    parts = parse_recorded(text_rec)
    assert parts[0].model == "gemini-3-flash-preview"
    _, completed = search_activity(parts)
    assert completed.input == {"queries": ["weather San Francisco July 28 2026"]}
    assert completed.summary == "1 query · 4 sources"
    (block,) = of(parts, BlockStart)
    text = text_of(parts, block.key)
    (end,) = of(parts, BlockEnd)
    (native,) = end.payload.value["content"]["parts"]
    assert native["text"] == text and native["thoughtSignature"].startswith("AY89a19f")

    supports = end.payload.value["groundingMetadata"]["groundingSupports"]
    assert len(supports) == 9
    # The offsets and quotes are passed through raw: one citation per referenced chunk.
    citations = of(parts, Citation)
    assert len(citations) == sum(len(s["groundingChunkIndices"]) for s in supports) == 16
    by_support = [
        (s["segment"]["startIndex"], s["segment"]["endIndex"], s["segment"]["text"])
        for s in supports
    ]
    assert {(c.start, c.end, c.quote) for c in citations} == set(by_support)
    # Byte-offset slicing matches the quote for the first 4 supports, not for the last 5 (the
    # quotes are right; the offsets drift by 2 bytes). The builder repairs those by search.
    matches = [utf8_slice(text, start, end) == quote for start, end, quote in by_support]
    assert matches == [True] * 4 + [False] * 5
    assert all(quote in text for _, _, quote in by_support)
    assert all(ranges.place(text, c.start, c.end, c.unit, c.quote)[0] for c in citations)
    assert parts[-1] == ResponseEnd("end_turn")


def test_interactions_stream() -> None:
    (rec,) = recorded("google", INTERACTIONS)
    parts = parse_recorded(rec)
    assert parts[0] == ResponseStart(
        "google",
        "gemini-2.5-flash",
        "v1_ChdkR3NIYW9QaElNS21xdHNQaHFLbm1RWRIXZEdzSGFvUGhJTUttcXRzUGhxS25tUVk",
    )
    thought, output = of(parts, BlockStart)
    # A thought step with only a signature: reasoning whose content is opaque.
    assert thought.kind == "reasoning" and thought.redacted
    assert thought.payload.value == {
        "type": "thought",
        "signature": "CiRlMjQ4MzBhNy01Y2Q2LTQyZmUtOTk4Yi1lZTUzOWU3MmI5YzM=",
    }
    assert not text_of(parts, thought.key)

    assert output.kind == "message"
    text = text_of(parts, output.key)
    assert text.startswith("Here's a notable AI development")
    assert len(text) == len(text.encode())  # ASCII only: the unit is not observable here
    citations = of(parts, Citation)
    assert len(citations) == 14
    assert {c.unit for c in citations} == {"utf8"}  # Google's schema: "measured in bytes"
    assert (citations[0].start, citations[0].end, citations[0].title) == (346, 439, "coaio.com")
    assert text[346:439].startswith("These updates aim to enable AI agents")
    end = next(p for p in of(parts, BlockEnd) if p.key == output.key)
    assert end.payload.format == "google.interactions.step"
    (content,) = end.payload.value["content"]
    assert content["text"] == text and len(content["annotations"]) == 14

    started, completed = search_activity(parts)
    assert started.activity_id == "7xveqyd2"
    assert len(started.input["queries"]) == 4
    assert "AI news May 8 2026" in started.input["queries"]
    assert completed.summary == "4 queries"
    assert completed.payload.value["call_id"] == "7xveqyd2"
    # Eight identical search_suggestions: one entry point artifact.
    (entry,) = of(parts, Artifact)
    assert entry.type == "google.search_entry_point"
    assert entry.display_html.startswith("<style>")
    usage = of(parts, Usage)[0].counters
    assert usage["total_tool_use_tokens"] == 198 and usage["total_thought_tokens"] == 1173
    assert parts[-1] == ResponseEnd("end_turn")


# ---------------------------------------------------------------------------------------------
# Synthetic: end reasons and errors


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("STOP", "end_turn"),
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "refusal"),
        ("RECITATION", "refusal"),
        ("BLOCKLIST", "refusal"),
        ("PROHIBITED_CONTENT", "refusal"),
        ("SPII", "refusal"),
    ],
)
def test_finish_reasons(finish: str, reason: str) -> None:
    parts = parse_raw(sse(chunk({"text": "Hi"}), chunk({"text": "."}, finish=finish)))
    assert_well_formed(parts)
    assert parts[-1] == ResponseEnd(reason)
    assert text_of(parts, "b0") == "Hi."
    assert of(parts, BlockEnd)


def test_other_finish_reasons_are_errors() -> None:
    raw = chunk({"text": ""}, finish="MALFORMED_FUNCTION_CALL", finishMessage="bad call")
    parts = parse_raw(orjson.dumps(raw))
    assert_well_formed(parts)
    (error,) = of(parts, StreamError)
    assert (error.code, error.message) == ("malformed_function_call", "bad call")
    assert parts[-1] == ResponseEnd("error")


def test_blocked_prompt_is_a_refusal() -> None:
    body = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r9",
    }
    parts = parse_raw(orjson.dumps(body))
    assert_well_formed(parts)
    assert parts[0].model == "gemini-2.5-flash"
    assert of(parts, Usage)[0].counters == {"promptTokenCount": 5, "totalTokenCount": 5}
    assert parts[-1] == ResponseEnd("refusal")


def test_error_chunk_fails_the_response() -> None:
    error = {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}
    parts = parse_raw(sse(chunk({"text": "Partial"}), {"error": error}, chunk({"text": "x"})))
    assert_well_formed(parts)
    assert not of(parts, BlockEnd)  # the builder commits the partial text itself
    (stream_error,) = of(parts, StreamError)
    assert stream_error.code == "RESOURCE_EXHAUSTED"
    assert stream_error.payload.value == error
    assert parts[-1] == ResponseEnd("error")


def test_error_body_without_response_names_the_endpoint_model() -> None:
    parts = parse_raw(orjson.dumps({"error": {"code": 400, "message": "API key not valid"}}))
    assert parts[0] == ResponseStart("google", "gemini-2.5-pro", "")
    assert of(parts, StreamError)[0].code == "400"
    assert parts[-1] == ResponseEnd("error")


# ---------------------------------------------------------------------------------------------
# Synthetic: parts


def test_thoughts_signatures_and_text_blocks_in_a_stream() -> None:
    raw = sse(
        chunk({"text": "Let me think", "thought": True}),
        chunk({"text": " more.", "thought": True}),
        chunk({"text": "Answer"}),
        chunk({"text": " here."}),
        chunk({"text": "", "thoughtSignature": "c2ln"}, finish="STOP"),
    )
    parts = parse_raw(raw)
    assert_well_formed(parts)
    reasoning, message = of(parts, BlockStart)
    assert (reasoning.kind, message.kind) == ("reasoning", "message")
    assert text_of(parts, reasoning.key) == "Let me think more."
    assert text_of(parts, message.key) == "Answer here."
    ends = {e.key: e.payload.value for e in of(parts, BlockEnd)}
    assert ends[reasoning.key]["content"]["parts"] == [
        {"text": "Let me think more.", "thought": True}
    ]
    # The bare signature of the last chunk joins the open text block's (merged) part.
    assert ends[message.key]["content"]["parts"] == [
        {"text": "Answer here.", "thoughtSignature": "c2ln"}
    ]
    assert parts[-1] == ResponseEnd("end_turn")


def test_function_call_without_id_and_unknown_part() -> None:
    raw = sse(
        chunk({"text": "Calling."}),
        chunk(
            {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
            {"functionCall": {"name": "lookup", "args": {"q": "x"}}, "thoughtSignature": "s"},
            finish="STOP",
        ),
    )
    parts = parse_raw(raw)
    assert_well_formed(parts)
    (artifact,) = of(parts, Artifact)
    assert artifact.type == "google.part.inlineData"
    assert artifact.payload.value["inlineData"]["mimeType"] == "image/png"
    (call,) = of(parts, ToolCall)
    assert (call.call_id, call.name, call.arguments) == ("r1:call:0", "lookup", {"q": "x"})
    assert call.payload.value["thoughtSignature"] == "s"
    # The text block closed before the artifact; the stream carried on.
    assert parts.index(of(parts, BlockEnd)[0]) < parts.index(artifact) < parts.index(call)
    assert parts[-1] == ResponseEnd("tool_use")


def test_missing_start_index_means_zero() -> None:
    grounding = {
        "webSearchQueries": ["q"],
        "groundingChunks": [{"web": {"uri": "https://a.example/", "title": "a.example"}}],
        "groundingSupports": [
            {"segment": {"endIndex": 6, "text": "Héllo"}, "groundingChunkIndices": [0, 7]}
        ],
    }
    parts = parse_raw(
        orjson.dumps(chunk({"text": "Héllo world"}, finish="STOP", groundingMetadata=grounding))
    )
    assert_well_formed(parts)
    # Chunk index 7 does not exist: a citation naming no source (the reader is told).
    citation, unsourced = of(parts, Citation)
    assert (unsourced.url, unsourced.title, unsourced.start, unsourced.end) == ("", "", 0, 6)
    assert (citation.start, citation.end, citation.unit) == (0, 6, "utf8")
    assert (citation.url, citation.title, citation.quote) == (
        "https://a.example/",
        "a.example",
        "Héllo",
    )
    assert of(parts, Activity)[1].summary == "1 query · 1 source"


def test_body_support_part_index_is_shifted_into_the_block() -> None:
    grounding = {
        "groundingChunks": [{"web": {"uri": "https://b.example/", "title": "b"}}],
        "groundingSupports": [
            {
                "segment": {"partIndex": 1, "startIndex": 0, "endIndex": 5, "text": "World"},
                "groundingChunkIndices": [0],
            }
        ],
    }
    body = chunk({"text": "Hé. "}, {"text": "World"}, finish="STOP", groundingMetadata=grounding)
    parts = parse_raw(orjson.dumps(body))
    assert_well_formed(parts)
    assert not of(parts, Activity)  # no webSearchQueries: no search to report
    (citation,) = of(parts, Citation)
    text = text_of(parts, "b0")
    assert utf8_slice(text, citation.start, citation.end) == "World"
    # A body keeps its parts as sent.
    assert (
        of(parts, BlockEnd)[0].payload.value["content"]["parts"]
        == body["candidates"][0]["content"]["parts"]
    )


def test_streamed_grounding_with_no_open_text_block_is_kept_whole() -> None:
    grounding = {
        "webSearchQueries": ["q"],
        "groundingChunks": [{"web": {"uri": "https://c.example/", "title": "c"}}],
        "groundingSupports": [
            {
                "segment": {"startIndex": 0, "endIndex": 4, "text": "Text"},
                "groundingChunkIndices": [0],
            }
        ],
    }
    raw = sse(
        chunk({"text": "Text"}, groundingMetadata={}),
        chunk(
            {"functionCall": {"name": "f", "args": {}}}, finish="STOP", groundingMetadata=grounding
        ),
    )
    parts = parse_raw(raw)
    assert_well_formed(parts)
    assert not of(parts, Citation)
    (stray,) = [a for a in of(parts, Artifact) if a.type == "google.candidate_metadata"]
    assert stray.payload.value == {"groundingMetadata": grounding}
    assert len(of(parts, Activity)) == 2


def test_code_execution_parts_are_hosted_activity() -> None:
    body = chunk(
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
        {"executableCode": {"language": "PYTHON", "code": "1/0"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_FAILED", "output": "ZeroDivisionError"}},
        {"text": "Done."},
        finish="STOP",
    )
    parts = parse_raw(orjson.dumps(body))
    assert_well_formed(parts)
    assert not of(parts, ToolCall)
    runs = [(a.activity_id, a.state, a.summary, a.error_code) for a in of(parts, Activity)]
    assert runs == [
        ("r1:code:0", "started", "", ""),
        ("r1:code:0", "completed", "ok", ""),
        ("r1:code:1", "started", "", ""),
        ("r1:code:1", "failed", "failed", "outcome_failed"),
    ]
    assert of(parts, Activity)[0].input == {"language": "PYTHON", "code": "print(1)"}
    assert parts[-1] == ResponseEnd("end_turn")


def test_extra_candidates_are_artifacts_and_json_array_streams_parse() -> None:
    first = chunk({"text": "A"})
    first["candidates"].append({"content": {"parts": [{"text": "B"}]}, "index": 1})
    array = orjson.dumps([first, chunk({"text": "!"}, finish="STOP")])
    parts = parse_raw(array)
    assert_well_formed(parts)
    assert text_of(parts, "b0") == "A!"
    (artifact,) = of(parts, Artifact)
    assert artifact.type == "google.candidate" and artifact.payload.value["index"] == 1


def test_served_model_falls_back_to_the_endpoint_only_when_the_response_names_none() -> None:
    body = chunk({"text": "x"}, finish="STOP")
    del body["modelVersion"]
    assert parse_raw(orjson.dumps(body))[0].model == "gemini-2.5-pro"
    body["modelVersion"] = "gemini-2.5-pro-002"
    assert parse_raw(orjson.dumps(body))[0].model == "gemini-2.5-pro-002"
    del body["modelVersion"]
    assert parse_raw(orjson.dumps(body), endpoint=None)[0].model == ""


@pytest.mark.parametrize(
    ("endpoint", "version"),
    [
        (None, "v1beta"),
        (
            "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-pro:generateContent",
            "v1",
        ),
        (GEMINI_URL, "v1beta"),
        (
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/"
            "google/models/gemini-2.5-pro:generateContent",
            "vertex/v1",
        ),
        ("https://example.test/proxy", "v1beta"),
    ],
)
def test_payload_version_from_endpoint(endpoint: str | None, version: str) -> None:
    parts = parse_raw(orjson.dumps(chunk({"text": "x"}, finish="STOP")), endpoint=endpoint)
    assert of(parts, BlockEnd)[0].payload.version == version


# ---------------------------------------------------------------------------------------------
# Synthetic: cut streams and malformed input


def test_cut_stream_has_no_block_end_and_no_response_end() -> None:
    raw = sse(chunk({"text": "Hello"}), chunk({"text": " wor"})) + b'data: {"candidates": [{"con'
    parts = parse_raw(raw)
    assert_well_formed(parts)
    assert of(parts, BlockStart) and text_of(parts, "b0") == "Hello wor"
    assert not of(parts, BlockEnd)
    assert not of(parts, ResponseEnd)
    assert not of(parts, Usage)


@pytest.mark.parametrize(
    ("raw", "line", "message"),
    [
        (b'{"type": "message_start", "message": {}}', 1, "not a Gemini generateContent"),
        (sse(chunk({"text": "a"}), {"candidates": {"0": {}}}), 3, "candidates must be a list"),
        (
            sse(chunk({"text": "a"}), {"candidates": [{"content": {"parts": ["x"]}}]}),
            3,
            "part must be an object",
        ),
        (
            b'{"event_type": "interaction.created", "interaction": {}}\n{"index": 0}\n',
            2,
            "no event_type",
        ),
        (b"[1, 2]", 1, "expected a JSON object"),
    ],
)
def test_malformed_input_names_the_line(raw: bytes, line: int, message: str) -> None:
    with pytest.raises(MalformedInput) as exc:
        parse_raw(raw)
    assert exc.value.line == line
    assert message in exc.value.message


# ---------------------------------------------------------------------------------------------
# Synthetic: Interactions API


def events(*items: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


CREATED = {
    "event_type": "interaction.created",
    "interaction": {"id": "v1_x", "status": "in_progress", "model": "gemini-3-pro-preview"},
}


def completed(status: str, **extra: Any) -> dict[str, Any]:
    interaction = {"id": "v1_x", "status": status, "usage": {"total_tokens": 9}, **extra}
    return {"event_type": "interaction.completed", "interaction": interaction}


def test_interactions_thought_summary_function_call_and_unknown_delta() -> None:
    raw = events(
        CREATED,
        {"event_type": "step.start", "index": 0, "step": {"type": "thought"}},
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "thought_summary", "content": {"type": "text", "text": "Plan."}},
        },
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "thought_signature", "signature": "sig"},
        },
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "model_output"}},
        {
            "event_type": "step.delta",
            "index": 1,
            "delta": {"type": "image", "mime_type": "image/png", "data": "iVBO"},
        },
        {"event_type": "step.stop", "index": 1},
        {
            "event_type": "step.start",
            "index": 2,
            "step": {"type": "function_call", "id": "fc1", "name": "lookup"},
        },
        {
            "event_type": "step.delta",
            "index": 2,
            "delta": {"type": "arguments_delta", "arguments": '{"q": '},
        },
        {
            "event_type": "step.delta",
            "index": 2,
            "delta": {"type": "arguments_delta", "arguments": '"x"}'},
        },
        {"event_type": "step.stop", "index": 2},
        completed("requires_action"),
    )
    parts = parse_raw(raw, endpoint="https://generativelanguage.googleapis.com/v1beta/interactions")
    assert_well_formed(parts)
    assert parts[0] == ResponseStart("google", "gemini-3-pro-preview", "v1_x")
    (thought,) = of(parts, BlockStart)
    assert thought.kind == "reasoning" and not thought.redacted
    assert text_of(parts, thought.key) == "Plan."
    (end,) = of(parts, BlockEnd)
    assert end.payload.value == {
        "type": "thought",
        "signature": "sig",
        "summary": [{"type": "text", "text": "Plan."}],
    }
    (image,) = of(parts, Artifact)
    assert image.type == "google.interactions.image"
    (call,) = of(parts, ToolCall)
    assert (call.call_id, call.name, call.arguments) == ("fc1", "lookup", {"q": "x"})
    assert of(parts, Usage)[0].counters == {"total_tokens": 9}
    assert parts[-1] == ResponseEnd("tool_use")


def test_interactions_cut_during_a_search_call() -> None:
    raw = events(
        CREATED,
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "Searching"}},
        {
            "event_type": "step.start",
            "index": 1,
            "step": {"id": "gs1", "type": "google_search_call"},
        },
        {
            "event_type": "step.delta",
            "index": 1,
            "delta": {"type": "google_search_call", "arguments": {"queries": ["q1"]}},
        },
    )
    parts = parse_raw(raw)
    assert_well_formed(parts)
    (activity,) = of(parts, Activity)
    assert (activity.activity_id, activity.state, activity.input) == (
        "gs1",
        "started",
        {"queries": ["q1"]},
    )
    assert not of(parts, BlockEnd) and not of(parts, ResponseEnd)


def test_interactions_error_and_failed_search() -> None:
    raw = events(
        CREATED,
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"id": "gs1", "type": "google_search_call"},
        },
        {"event_type": "step.stop", "index": 0},
        {
            "event_type": "step.start",
            "index": 1,
            "step": {"call_id": "gs1", "type": "google_search_result"},
        },
        {
            "event_type": "step.delta",
            "index": 1,
            "delta": {"type": "google_search_result", "result": [], "is_error": True},
        },
        {"event_type": "step.stop", "index": 1},
        {"event_type": "error", "error": {"code": "resource_exhausted", "message": "Quota"}},
        completed("completed"),
    )
    parts = parse_raw(raw)
    assert_well_formed(parts)
    states = [(a.activity_id, a.state, a.error_code) for a in of(parts, Activity)]
    assert states == [("gs1", "started", ""), ("gs1", "failed", "is_error")]
    (error,) = of(parts, StreamError)
    assert (error.code, error.message) == ("resource_exhausted", "Quota")
    assert parts[-1] == ResponseEnd("error")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("completed", "end_turn"),
        ("incomplete", "max_tokens"),
        ("failed", "error"),
        ("cancelled", "error"),
    ],
)
def test_interactions_status_to_end_reason(status: str, reason: str) -> None:
    parts = parse_raw(events(CREATED, completed(status)))
    assert_well_formed(parts)
    assert parts[-1] == ResponseEnd(reason)
    assert bool(of(parts, StreamError)) == (reason == "error")


def test_interaction_body_replays_its_steps() -> None:
    body = {
        "id": "v1_b",
        "object": "interaction",
        "status": "completed",
        "model": "gemini-2.5-flash",
        "steps": [
            {"type": "google_search_call", "id": "s1", "arguments": {"queries": ["a", "b"]}},
            {
                "type": "google_search_result",
                "call_id": "s1",
                "result": [{"search_suggestions": "<div>chips</div>"}],
            },
            {
                "type": "model_output",
                "content": [
                    {
                        "type": "text",
                        "text": "Ünïcode answer.",
                        "annotations": [
                            {
                                "type": "url_citation",
                                "url": "https://d.example/",
                                "title": "d",
                                "end_index": 8,
                            }
                        ],
                    }
                ],
            },
            {"type": "mcp_server_tool_call", "name": "t", "server_name": "s", "arguments": {}},
        ],
        "usage": {"total_tokens": 3},
    }
    parts = parse_raw(orjson.dumps(body))
    assert_well_formed(parts)
    assert parts[0] == ResponseStart("google", "gemini-2.5-flash", "v1_b")
    _, done = search_activity(parts)
    assert done.summary == "2 queries"
    (citation,) = of(parts, Citation)
    assert (citation.start, citation.end, citation.unit) == (0, 8, "utf8")
    assert text_of(parts, "step2") == "Ünïcode answer."
    artifacts = [a.type for a in of(parts, Artifact)]
    assert artifacts == ["google.search_entry_point", "google.interactions.mcp_server_tool_call"]
    assert parts[-1] == ResponseEnd("end_turn")


# ---------------------------------------------------------------------------------------------
# decode


def test_decode_rejects_what_this_adapter_did_not_write() -> None:
    google.decode({"content": {"parts": [{"text": "x"}]}}, "google.candidate")
    google.decode({"type": "thought", "signature": "s"}, "google.interactions.step")
    bad = [
        ({"content": {"parts": "x"}}, "google.candidate"),
        ({"thoughtSignature": "s"}, "google.part"),
        ({"renderedContent": 3}, "google.search_entry_point"),
        ({"signature": "s"}, "google.interactions.step"),
        ({"other": 1}, "google.candidate_metadata"),
        ({}, "google.error"),
        ([], "google.part"),
        ({"type": "text"}, "anthropic.content_block"),
    ]
    for value, fmt in bad:
        with pytest.raises(ValueError):
            google.decode(value, fmt)


def test_interactions_older_content_events() -> None:
    raw = events(
        {"event_type": "interaction.start", "interaction": {"id": "v1_o", "model": "m"}},
        {"event_type": "content.start", "index": 0, "content": {"type": "text"}},
        {"event_type": "content.delta", "index": 0, "delta": {"type": "text", "text": "Hi."}},
        {
            "event_type": "content.delta",
            "index": 0,
            "delta": {
                "type": "text_annotation_delta",
                "annotations": [{"source": "https://e.example/", "start_index": 0, "end_index": 3}],
            },
        },
        {"event_type": "content.stop", "index": 0},
        {
            "event_type": "interaction.complete",
            "interaction": {"id": "v1_o", "status": "completed"},
        },
    )
    parts = parse_raw(raw)
    assert_well_formed(parts)
    (citation,) = of(parts, Citation)
    assert (citation.url, citation.start, citation.end) == ("https://e.example/", 0, 3)
    (end,) = of(parts, BlockEnd)
    assert end.payload.value["text"] == "Hi." and end.payload.value["type"] == "text"
    assert parts[-1] == ResponseEnd("end_turn")
