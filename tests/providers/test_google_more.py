"""The Gemini adapter on the second recording set (``providers-more/google``): URL context,
File Search grounding (Gemini 2.5 shows the search as code; Gemini 3 as ``toolCall`` /
``toolResponse``), server-side Google Search parts with their own ids, code execution with
ids, thought parts, empty text parts, and streamed function-call arguments. Facts are read
from the wire (``more.wire``) and Google's API reference, not from what the adapter prints."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from providers import google
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    ResponseEnd,
    ResponseStart,
    StreamError,
    ToolCall,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS
from tests.providers.more import events_of, of, parts_of, responses, text_of, transitions, wire
from tests.support import part_payloads

P = "google"
FETCH_STREAM = "pydantic-ai__test_google_model_web_fetch_tool_stream.sse.txt"
FETCH_BODY = "pydantic-ai__test_google_model_web_fetch_tool.json"
FILE_SEARCH_25 = "pydantic-ai__test_google_model_file_search_tool_stream.interaction3.sse.txt"
FILE_SEARCH_3 = (
    "pydantic-ai__test_google_model_file_search_grounding_gemini_3-True.interaction3.sse.txt")
CODE = "pydantic-ai__test_code_execution_stream.sse.txt"
THOUGHTS = "pydantic-ai__test_google_model_thinking_part_iter.sse.txt"
SEARCH_PARTS_BODY = "pydantic-ai__test_thinking_with_native_tool_wire_contract-google.json"
SEARCH_PARTS_STREAM = "pydantic-ai__test_native_output_with_builtin_tools_stream.sse.txt"
STREAMED_ARGS = "vercel-ai__google-stream-tool-call-arguments.chunks.txt"
ALL_FILES = [FETCH_STREAM, FETCH_BODY, FILE_SEARCH_25, FILE_SEARCH_3, CODE, THOUGHTS,
             SEARCH_PARTS_BODY, SEARCH_PARTS_STREAM, STREAMED_ARGS]


def all_parts(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for o in objects for c in o.get("candidates", [])
            for p in c.get("content", {}).get("parts", [])]


def last_candidate(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return objects[-1]["candidates"][0]


def utf8_span(text: str, start: int, end: int) -> str:
    return text.encode()[start:end].decode()


def message_text(parts: list[Any]) -> str:
    (block,) = [b for b in of(parts, BlockStart) if b.kind == "message"]
    return text_of(parts, block.key)


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_file_keeps_the_part_protocol(name: str) -> None:
    for parts in responses(P, name):
        assert isinstance(parts[0], ResponseStart) and parts[0].model.startswith("gemini-")
        assert isinstance(parts[-1], ResponseEnd) and parts[-1].end_reason in END_REASONS
        assert of(parts, StreamError) == []
        # toolCall / toolResponse are Google's own tools: never artifacts.
        assert not [a for a in of(parts, Artifact) if a.type.startswith("google.part.tool")]
        for activity in of(parts, Activity):
            assert activity.name in ACTIVITY_NAMES
        for payload in part_payloads(parts):
            google.decode(payload.value, payload.format)
            orjson.dumps(payload.as_dict())
    # No message event is empty (Gemini's `text: ""` parts make none).
    for event in events_of(P, name):
        if event.kind == "message":
            assert event.text


@pytest.mark.parametrize("name", [FETCH_STREAM, FETCH_BODY])
def test_url_context_is_one_web_fetch_per_url(name: str) -> None:
    objects, parts = wire(P, name), parts_of(P, name)
    metadata = [c["urlContextMetadata"] for o in objects for c in o["candidates"]
                if "urlContextMetadata" in c]
    (entry,) = metadata[0]["urlMetadata"]
    assert entry["urlRetrievalStatus"] == "URL_RETRIEVAL_STATUS_SUCCESS"
    fetch_id = f"{objects[0]['responseId']}:url_context:0"
    assert transitions(parts) == [(fetch_id, "web_fetch", "started"),
                                  (fetch_id, "web_fetch", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == {"url": entry["retrievedUrl"]} == {"url": "https://ai.pydantic.dev"}
    assert completed.summary == "retrieved"
    assert completed.sources[0]["url"] == entry["retrievedUrl"]
    (support,) = last_candidate(objects)["groundingMetadata"]["groundingSupports"]
    (citation,) = of(parts, Citation)
    text = message_text(parts)
    assert utf8_span(text, support["segment"].get("startIndex", 0),
                     support["segment"]["endIndex"]) == support["segment"]["text"]
    assert (citation.url, citation.title) == ("https://ai.pydantic.dev", "Pydantic AI")
    (event,) = [e for e in events_of(P, name) if e.kind == "message"]
    (attribution,) = event.attributions
    assert event.text[attribution.start:attribution.end] == support["segment"]["text"]
    assert parts[-1] == ResponseEnd("end_turn")


def test_file_search_shown_as_code_with_retrieved_context() -> None:
    objects, parts = wire(P, FILE_SEARCH_25), parts_of(P, FILE_SEARCH_25)
    (code,) = [p["executableCode"] for p in all_parts(objects) if "executableCode" in p]
    assert code["code"] == 'print(file_search.query(query="Capital of France"))\n'
    assert not [p for p in all_parts(objects) if "codeExecutionResult" in p]  # nothing ran
    grounding = last_candidate(objects)["groundingMetadata"]
    (chunk,) = grounding["groundingChunks"]
    store = chunk["retrievedContext"]["fileSearchStore"]
    assert "uri" not in chunk["retrievedContext"]
    search_id = f"{objects[0]['responseId']}:code:0"
    assert transitions(parts) == [(search_id, "file_search", "started"),
                                  (search_id, "file_search", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == {"query": "Capital of France"}
    assert completed.sources == ({"url": "", "title": store},)
    # Two supports, the first without startIndex (proto3 drops a zero): both cite the store,
    # a source without a link, with the chunk's text as the excerpt.
    (event,) = [e for e in events_of(P, FILE_SEARCH_25) if e.kind == "message"]
    supports = grounding["groundingSupports"]
    assert "startIndex" not in supports[0]["segment"]
    assert [event.text[a.start:a.end] for a in event.attributions] == [
        s["segment"]["text"] for s in supports]
    for attribution in event.attributions:
        assert (attribution.url, attribution.title) == ("", store)
        assert attribution.excerpt == chunk["retrievedContext"]["text"]
    assert parts[-1] == ResponseEnd("end_turn")


def test_file_search_as_tool_parts_with_their_own_id() -> None:
    objects, parts = wire(P, FILE_SEARCH_3), parts_of(P, FILE_SEARCH_3)
    (call,) = [p for p in all_parts(objects) if "toolCall" in p]
    (answer,) = [p for p in all_parts(objects) if "toolResponse" in p]
    assert call["toolCall"] == {"toolType": "FILE_SEARCH", "id": "tju3qkc9"}
    assert answer["toolResponse"]["id"] == "tju3qkc9"
    assert transitions(parts) == [("tju3qkc9", "file_search", "started"),
                                  ("tju3qkc9", "file_search", "completed")]
    started, completed = of(parts, Activity)
    assert started.payload.value == call and completed.payload.value == answer  # signatures
    candidate = last_candidate(objects)
    (chunk,) = candidate["groundingMetadata"]["groundingChunks"]
    (support,) = candidate["groundingMetadata"]["groundingSupports"]
    (event,) = [e for e in events_of(P, FILE_SEARCH_3) if e.kind == "message"]
    (attribution,) = event.attributions
    assert event.text[attribution.start:attribution.end] == support["segment"]["text"]
    assert (attribution.url, attribution.title) == ("", chunk["retrievedContext"]
                                                     ["fileSearchStore"])
    # customMetadata (a source_url the user attached) is no link of the provider's: it stays
    # in the block's payload with the rest of the grounding.
    (end,) = [e for e in of(parts, BlockEnd)]
    assert end.payload.value["groundingMetadata"] == candidate["groundingMetadata"]
    # The closing `text: ""` part only carries a signature: it joins the message's payload.
    signature = candidate["content"]["parts"][0]["thoughtSignature"]
    assert end.payload.value["content"]["parts"][-1]["thoughtSignature"] == signature
    assert parts[-1] == ResponseEnd("end_turn")


def test_code_execution_with_ids_and_empty_text_parts() -> None:
    objects, parts = wire(P, CODE), parts_of(P, CODE)
    (code,) = [p["executableCode"] for p in all_parts(objects) if "executableCode" in p]
    (result,) = [p["codeExecutionResult"] for p in all_parts(objects)
                 if "codeExecutionResult" in p]
    assert code["id"] == result["id"] == "8xju7mua"
    assert transitions(parts) == [("8xju7mua", "code_execution", "started"),
                                  ("8xju7mua", "code_execution", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == {"language": "PYTHON", "code": code["code"]}
    assert completed.output == {"text": result["output"]} and completed.summary == "ok"
    assert {"text": ""} in all_parts(objects)  # between the code and its result
    (message,) = [b for b in of(parts, BlockStart)]  # the empty part opened nothing
    assert message.kind == "message"
    expected = "".join(p.get("text", "") for p in all_parts(objects))
    assert text_of(parts, message.key) == expected
    (end,) = of(parts, BlockEnd)
    assert end.payload.value["content"]["parts"][-1]["thoughtSignature"]
    assert parts[-1] == ResponseEnd("end_turn")


def test_thought_parts_then_text() -> None:
    objects, parts = wire(P, THOUGHTS), parts_of(P, THOUGHTS)
    assert len(objects) == 23
    pieces = all_parts(objects)
    thoughts = [p["text"] for p in pieces if p.get("thought")]
    answer = [p["text"] for p in pieces if not p.get("thought")]
    assert len(thoughts) == 4
    reasoning, message = of(parts, BlockStart)
    assert (reasoning.kind, message.kind) == ("reasoning", "message")
    assert text_of(parts, reasoning.key) == "".join(thoughts)
    assert text_of(parts, message.key) == "".join(answer)
    signed = next(p for p in pieces if "thoughtSignature" in p)
    end = next(e for e in of(parts, BlockEnd) if e.key == message.key)
    assert end.payload.value["content"]["parts"][0]["thoughtSignature"] == signed[
        "thoughtSignature"]
    assert parts[-1] == ResponseEnd("end_turn")


def test_google_search_parts_in_a_body() -> None:
    (body,) = wire(P, SEARCH_PARTS_BODY)
    parts = parts_of(P, SEARCH_PARTS_BODY)
    candidate = body["candidates"][0]
    call = next(p["toolCall"] for p in candidate["content"]["parts"] if "toolCall" in p)
    answer = next(p["toolResponse"] for p in candidate["content"]["parts"] if "toolResponse" in p)
    assert call["toolType"] == "GOOGLE_SEARCH_WEB" and call["id"] == answer["id"] == "jvjqh677"
    # The search is the toolCall's, by its id; the grounding's queries make no second one.
    assert transitions(parts) == [("jvjqh677", "web_search", "started"),
                                  ("jvjqh677", "web_search", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == {"queries": call["args"]["queries"]}
    assert completed.summary == "3 queries"
    grounding = candidate["groundingMetadata"]
    assert len(grounding["webSearchQueries"]) == 3 and len(grounding["groundingChunks"]) == 6
    # The suggestions chip (the same HTML in the toolResponse and the grounding): shown once.
    (chip,) = of(parts, Artifact)
    assert chip.type == "google.search_entry_point"
    assert chip.display_html == answer["response"]["search_suggestions"]
    reasoning = [b for b in of(parts, BlockStart) if b.kind == "reasoning"]
    assert len(reasoning) == 2
    (event,) = [e for e in events_of(P, SEARCH_PARTS_BODY) if e.kind == "message"]
    supports = grounding["groundingSupports"]
    assert len(supports) == 9 == len(event.attributions)
    for attribution, support in zip(event.attributions, supports, strict=True):
        assert event.text[attribution.start:attribution.end] == support["segment"]["text"]
        chunk = grounding["groundingChunks"][support["groundingChunkIndices"][0]]
        assert (attribution.url, attribution.title) == (chunk["web"]["uri"],
                                                        chunk["web"]["title"])
    assert parts[-1] == ResponseEnd("end_turn")


def test_google_search_parts_between_text_parts_in_a_stream() -> None:
    objects, parts = wire(P, SEARCH_PARTS_STREAM), parts_of(P, SEARCH_PARTS_STREAM)
    (call,) = [p["toolCall"] for p in all_parts(objects) if "toolCall" in p]
    (answer,) = [p["toolResponse"] for p in all_parts(objects) if "toolResponse" in p]
    assert answer["id"] == call["id"] == "d6vd9r5q"
    assert transitions(parts) == [(call["id"], "web_search", "started"),
                                  (call["id"], "web_search", "completed")]
    assert of(parts, Activity)[0].input == {"queries": ["largest city in Mexico"]}
    grounding = last_candidate(objects)["groundingMetadata"]
    assert grounding["webSearchQueries"] == ["", "largest city in Mexico"]
    (support,) = grounding["groundingSupports"]
    assert support["groundingChunkIndices"] == [0, 1, 2, 3]
    (event,) = [e for e in events_of(P, SEARCH_PARTS_STREAM) if e.kind == "message"]
    assert len(event.attributions) == 4
    for attribution in event.attributions:
        assert event.text[attribution.start:attribution.end] == support["segment"]["text"]
    (chip,) = of(parts, Artifact)
    assert chip.display_html == answer["response"]["search_suggestions"]
    assert parts[-1] == ResponseEnd("end_turn")


def test_streamed_function_call_arguments_make_two_calls() -> None:
    objects, parts = wire(P, STREAMED_ARGS), parts_of(P, STREAMED_ARGS)
    calls = [p["functionCall"] for p in all_parts(objects)]
    assert len(calls) == 8 and calls[0] == {"name": "getWeather", "willContinue": True}
    assert calls[3] == {} and calls[7] == {}  # a piece with no willContinue ends a call
    response_id = objects[0]["responseId"]
    first, second = of(parts, ToolCall)
    assert (first.call_id, first.name, first.arguments) == (
        f"{response_id}:call:0", "getWeather", {"location": "Boston"})
    assert (second.call_id, second.name, second.arguments) == (
        f"{response_id}:call:1", "getWeather", {"location": "San Francisco"})
    assert not first.incomplete and not second.incomplete
    signature = all_parts(objects)[0]["thoughtSignature"]
    # The part as generateContent would return it whole, its signature kept.
    assert first.payload.value == {"functionCall": {"name": "getWeather",
                                                    "args": {"location": "Boston"}},
                                   "thoughtSignature": signature}
    assert second.payload.value == {"functionCall": {"name": "getWeather",
                                                     "args": {"location": "San Francisco"}}}
    assert parts[-1] == ResponseEnd("tool_use")


# ---------------------------------------------------------------------------------------------
# Synthetic wire: what the recordings lack


def stream(*chunks: dict[str, Any]) -> list[Any]:
    import providers

    return list(providers.parse(P, b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n"
                                            for c in chunks)))


def chunk(*pieces: dict[str, Any], finish: str | None = None, **candidate: Any) -> dict:
    value: dict[str, Any] = {"content": {"role": "model", "parts": list(pieces)}, "index": 0,
                             **candidate}
    if finish:
        value["finishReason"] = finish
    return {"candidates": [value], "modelVersion": "gemini-3-pro", "responseId": "r9"}


def test_a_tool_response_without_an_id_answers_the_oldest_open_call() -> None:
    parts = stream(
        chunk({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "a1",
                            "args": {"queries": ["q1"]}}}),
        chunk({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "a2",
                            "args": {"queries": ["q2"]}}}),
        chunk({"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "response": {}}}),
        chunk({"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "id": "a2", "response": {}}}),
        chunk({"text": "done"}, finish="STOP"),
    )
    assert transitions(parts) == [("a1", "web_search", "started"), ("a2", "web_search", "started"),
                                  ("a1", "web_search", "completed"),
                                  ("a2", "web_search", "completed")]
    assert parts[-1] == ResponseEnd("end_turn")


def test_an_unknown_server_tool_is_kept_whole() -> None:
    parts = stream(chunk({"toolCall": {"toolType": "GOOGLE_MAPS", "id": "m1"}}),
                   chunk({"text": "x"}, finish="STOP"))
    assert [a.type for a in of(parts, Artifact)] == ["google.part.toolCall"]
    assert of(parts, Activity) == []


def test_a_lone_signature_is_opaque_reasoning_and_an_empty_part_is_nothing() -> None:
    parts = stream(chunk({"text": ""}), chunk({"text": "", "thoughtSignature": "c2ln"}),
                   chunk({"functionCall": {"name": "f", "args": {}}}, finish="STOP"))
    (block,) = of(parts, BlockStart)
    assert (block.kind, block.redacted) == ("reasoning", True)
    assert block.payload.value["content"]["parts"] == [{"text": "", "thoughtSignature": "c2ln"}]
    assert parts[-1] == ResponseEnd("tool_use")


def test_url_context_failures_fail_their_fetch() -> None:
    metadata = {"urlMetadata": [
        {"retrievedUrl": "https://a.example/", "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_ERROR"},
        {"retrievedUrl": "https://b.example/",
         "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_PAYWALL"},
        {"retrievedUrl": "https://c.example/",
         "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_UNSPECIFIED"},
    ]}
    parts = stream(chunk({"text": "x"}, urlContextMetadata=metadata),
                   chunk({"text": "y"}, finish="STOP", urlContextMetadata=metadata))
    acts = of(parts, Activity)
    assert [(a.input["url"], a.state, a.error_code) for a in acts] == [
        ("https://a.example/", "started", ""), ("https://a.example/", "failed", "error"),
        ("https://b.example/", "started", ""), ("https://b.example/", "failed", "paywall"),
        ("https://c.example/", "started", ""),  # no status: it never says it finished
    ]


def test_streamed_arguments_of_every_type_and_path() -> None:
    pieces = [
        {"functionCall": {"name": "book", "willContinue": True}},
        {"functionCall": {"partialArgs": [
            {"jsonPath": "$.city", "stringValue": "San ", "willContinue": True},
            {"jsonPath": "$.city", "stringValue": "José"},
            {"jsonPath": "$.nights", "numberValue": 3},
            {"jsonPath": "$.pets", "boolValue": False},
            {"jsonPath": "$.note", "nullValue": None},
            {"jsonPath": "$.guests[0].name", "stringValue": "Ana"},
            {"jsonPath": "$.guests[1].name", "stringValue": "Bo"},
            {"jsonPath": "$['odd key']", "stringValue": "v"},
        ], "willContinue": True}},
        {"functionCall": {}},
    ]
    parts = stream(*(chunk(p) for p in pieces), chunk({"text": "ok"}, finish="STOP"))
    (call,) = of(parts, ToolCall)
    assert call.arguments == {"city": "San José", "nights": 3, "pets": False, "note": None,
                              "guests": [{"name": "Ana"}, {"name": "Bo"}], "odd key": "v"}


def test_a_call_whose_arguments_were_cut_is_an_incomplete_call() -> None:
    parts = stream(
        chunk({"functionCall": {"name": "getWeather", "willContinue": True}}),
        chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.location",
                                                 "stringValue": "Bos", "willContinue": True}],
                                "willContinue": True}}),
    )
    (call,) = of(parts, ToolCall)
    assert (call.name, call.arguments, call.incomplete, call.payload) == (
        "getWeather", {"location": "Bos"}, True, None)
    assert of(parts, ResponseEnd) == []
    (event,) = events_of_parts(parts)
    assert event.kind == "tool_call_request" and event.body.incomplete is True


def events_of_parts(parts: list[Any]) -> list[Any]:
    from streams.run import assemble

    return assemble([("cut", parts)], on_unreadable="cut")[1]
