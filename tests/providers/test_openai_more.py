"""The OpenAI adapter on the second recording set (``providers-more/openai``): code interpreter
with images and container-file citations, streamed reasoning summaries, MCP calls, lists and
approvals, file search with results, image generation that never finishes, server-run tool
search, and two OpenAI-compatible services (OpenRouter, Perplexity). Facts are read from the
wire (``more.wire``) and OpenAI's documentation, not from what the adapter prints."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from providers import openai
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
from tests.providers.more import events_of, of, parts_of, responses, transitions, wire
from tests.support import part_payloads

P = "openai"
IMAGE_CODE = "pydantic-ai__test_openai_responses_code_execution_return_image_stream.sse.txt"
THINKING_CODE = (
    "pydantic-ai__test_openai_responses_thinking_with_code_execution_tool_stream.sse.txt")
MCP_STREAM = "pydantic-ai__test_openai_responses_model_mcp_server_tool_stream.sse.txt"
CONNECTOR = "pydantic-ai__test_openai_responses_model_mcp_server_tool_with_connector.json"
APPROVAL = "vercel-ai__openai-mcp-tool-approval.1.chunks.txt"
FILE_SEARCH = (
    "pydantic-ai__test_openai_responses_model_file_search_tool_with_results.interaction3.json")
IMAGE_GEN = "vercel-ai__azure-image-generation-tool.1.chunks.txt"
TOOL_SEARCH = "vercel-ai__openai-tool-search.1.chunks.txt"
RAW_ANNOTATIONS = "pydantic-ai__test_openai_include_raw_annotations_non_streaming.interaction0.json"
OPENROUTER = "pydantic-ai__test_openrouter_web_search_annotations.json"
PERPLEXITY = "vercel-ai__perplexity-citations.json"
ALL_FILES = [IMAGE_CODE, THINKING_CODE, MCP_STREAM, CONNECTOR, APPROVAL, FILE_SEARCH, IMAGE_GEN,
             TOOL_SEARCH, RAW_ANNOTATIONS, OPENROUTER, PERPLEXITY]
# Items OpenAI documents as run by OpenAI itself (tool_search_call: with execution "server").
SERVER_ITEMS = {"web_search_call", "file_search_call", "code_interpreter_call", "mcp_call",
                "mcp_list_tools", "mcp_approval_request", "image_generation_call",
                "tool_search_call", "tool_search_output"}


def done_items(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Items of ``kind`` as ``output_item.done`` (or a body's ``output``) has them."""
    items = [o["item"] for o in objects if o.get("type") == "response.output_item.done"]
    for o in objects:
        if o.get("object") == "response":
            items += o["output"]
    return [i for i in items if i["type"] == kind]


def texts(parts: list[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in parts:
        if isinstance(part, TextDelta):
            out[part.key] = out.get(part.key, "") + part.text
    return out


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_file_keeps_the_part_protocol(name: str) -> None:
    for parts in responses(P, name):
        assert isinstance(parts[0], ResponseStart)
        assert isinstance(parts[-1], ResponseEnd) and parts[-1].end_reason in END_REASONS
        assert of(parts, StreamError) == []
        for artifact in of(parts, Artifact):  # a server-run item is never an artifact
            assert artifact.type not in SERVER_ITEMS
        for activity in of(parts, Activity):
            assert activity.name in ACTIVITY_NAMES
        for payload in part_payloads(parts):
            assert payload.provider == "openai"
            openai.decode(payload.value, payload.format)
            orjson.dumps(payload.as_dict())


def test_code_interpreter_image_and_container_file_citations() -> None:
    objects, parts = wire(P, IMAGE_CODE), parts_of(P, IMAGE_CODE)
    (item,) = done_items(objects, "code_interpreter_call")
    (code,) = [o["code"] for o in objects
               if o["type"] == "response.code_interpreter_call_code.done"]
    assert transitions(parts) == [(item["id"], "code_execution", "started"),
                                  (item["id"], "code_execution", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == {"code": code, "container_id": item["container_id"]}
    image = next(o for o in item["outputs"] if o["type"] == "image")
    logs = next(o for o in item["outputs"] if o["type"] == "logs")
    assert image["url"].startswith("data:image/png;base64,")
    assert completed.output == {"text": logs["logs"],
                                "images": [{"url": image["url"], "media_type": "image/png"}]}
    assert completed.payload.value == item
    # Reasoning with no summary, only encrypted content: redacted, kept in the payload.
    (reasoning,) = [b for b in of(parts, BlockStart) if b.kind == "reasoning"]
    assert reasoning.redacted and reasoning.payload.value["encrypted_content"]
    # Container-file citations: 0/0 cites the whole message, 91-132 a span.
    annotations = [o["annotation"] for o in objects
                   if o["type"] == "response.output_text.annotation.added"]
    (final,) = [o["text"] for o in objects if o["type"] == "response.output_text.done"]
    whole, span = of(parts, Citation)
    assert (whole.start, whole.end, whole.url) == (None, None, "")
    assert whole.title == annotations[0]["filename"]
    assert (span.start, span.end) == (annotations[1]["start_index"], annotations[1]["end_index"])
    assert final[span.start:span.end] == "sandbox:/mnt/data/y_eq_x_squared_plot.png"
    assert span.title == "y_eq_x_squared_plot.png" and span.replay.value == annotations[1]
    assert parts[-1] == ResponseEnd("end_turn")


def test_streamed_reasoning_summary_and_its_reencrypted_content() -> None:
    objects, parts = wire(P, THINKING_CODE), parts_of(P, THINKING_CODE)
    added = [o["item"] for o in objects if o["type"] == "response.output_item.added"
             and o["item"]["type"] == "reasoning"]
    (done,) = done_items(objects, "reasoning")
    (completed,) = [o["response"] for o in objects if o["type"] == "response.completed"]
    final = next(i for i in completed["output"] if i["type"] == "reasoning")
    assert added[0]["encrypted_content"] != done["encrypted_content"]
    (reasoning,) = [b for b in of(parts, BlockStart) if b.kind == "reasoning"]
    summary = "".join(o["delta"] for o in objects
                      if o["type"] == "response.reasoning_summary_text.delta")
    assert texts(parts)[reasoning.key] == summary == done["summary"][0]["text"]
    end = next(e for e in of(parts, BlockEnd) if e.key == reasoning.key)
    # The payload is the item as output_item.done finished it. The final response carries the
    # same reasoning encrypted once more (each copy is one OpenAI issued for it): the stream's
    # finished item is kept, whole, and not swapped for the later copy.
    assert end.payload.value == done
    assert final["encrypted_content"] != done["encrypted_content"]
    assert {k: v for k, v in final.items() if k != "encrypted_content"} == {
        k: v for k, v in done.items() if k != "encrypted_content"}
    runs = done_items(objects, "code_interpreter_call")
    assert len(runs) == 3
    assert transitions(parts) == [
        t for run in runs for t in ((run["id"], "code_execution", "started"),
                                    (run["id"], "code_execution", "completed"))
    ]
    assert [a.input["code"] for a in of(parts, Activity) if a.state == "started"] == [
        r["code"] for r in runs]
    # The request did not include the outputs: the runs completed with nothing to show.
    assert [r["outputs"] for r in runs] == [None] * 3
    assert {(a.summary, a.output) for a in of(parts, Activity) if a.state == "completed"} == {
        ("", None)}
    (message,) = [o["text"] for o in objects if o["type"] == "response.output_text.done"]
    assert message in texts(parts).values()
    assert parts[-1] == ResponseEnd("end_turn")


def test_mcp_list_tools_and_a_completed_call() -> None:
    objects, parts = wire(P, MCP_STREAM), parts_of(P, MCP_STREAM)
    (listed,) = done_items(objects, "mcp_list_tools")
    (call,) = done_items(objects, "mcp_call")
    assert transitions(parts) == [
        (listed["id"], "mcp_list_tools", "started"), (listed["id"], "mcp_list_tools", "completed"),
        (call["id"], "mcp_call", "started"), (call["id"], "mcp_call", "completed"),
    ]
    acts = of(parts, Activity)
    assert acts[0].input == {"server": "deepwiki"}
    assert acts[1].output == {"tools": [t["name"] for t in listed["tools"]]}
    assert acts[2].input == {"server": "deepwiki", "tool": "ask_question",
                             "arguments": orjson.loads(call["arguments"])}
    assert acts[3].output == {"text": call["output"]} and acts[3].payload.value == call
    reasoning = [b for b in of(parts, BlockStart) if b.kind == "reasoning"]
    assert len(reasoning) == 2 and all(b.redacted for b in reasoning)
    assert parts[-1] == ResponseEnd("end_turn")


def test_mcp_calls_failed_by_the_connector() -> None:
    (body,) = wire(P, CONNECTOR)
    parts = parts_of(P, CONNECTOR)
    calls = [i for i in body["output"] if i["type"] == "mcp_call"]
    assert [c["status"] for c in calls] == ["failed", "failed"]
    failed = [a for a in of(parts, Activity) if a.state == "failed"]
    assert [a.activity_id for a in failed] == [c["id"] for c in calls]
    for activity, call in zip(failed, calls, strict=True):
        assert activity.error_code == str(call["error"]["code"]) == "500"
        assert activity.output == {"error": call["error"]["message"]}
        assert activity.summary == "An unknown error occurred while executing the tool."
        # The server's own name for itself, from the response's tools, for the reader.
        assert activity.input["server"] == "google_calendar"
        assert activity.input["server_description"] == "Google Calendar"
        assert activity.input["tool"] == "search_events"
        assert activity.input["arguments"] == orjson.loads(call["arguments"])
    (listed,) = [a for a in of(parts, Activity) if a.name == "mcp_list_tools"
                 and a.state == "completed"]
    assert listed.output == {"tools": ["search_events"]}
    assert texts(parts)[body["output"][-1]["id"]].startswith("I’m sorry")
    assert parts[-1] == ResponseEnd("end_turn")


def test_an_approval_request_ends_the_turn_waiting_for_the_host() -> None:
    objects, parts = wire(P, APPROVAL), parts_of(P, APPROVAL)
    (request,) = done_items(objects, "mcp_approval_request")
    (listed,) = done_items(objects, "mcp_list_tools")
    assert transitions(parts) == [
        (listed["id"], "mcp_list_tools", "started"), (listed["id"], "mcp_list_tools", "completed"),
        (request["id"], "mcp_approval_request", "started"),  # the host answers, not OpenAI
    ]
    asked = of(parts, Activity)[-1]
    assert asked.input == {"server": "zip1", "server_description": "Link shortener",
                           "tool": "create_short_url",
                           "arguments": orjson.loads(request["arguments"])}
    assert asked.payload.value == request
    assert [b.kind for b in of(parts, BlockStart)] == ["reasoning"]  # no message
    assert of(parts, ToolCall) == []
    assert parts[-1] == ResponseEnd("approval_request")
    assert "providers.openai" in END_REASONS.producers("approval_request")


def test_file_search_with_results_and_a_file_citation() -> None:
    (body,) = wire(P, FILE_SEARCH)
    parts = parts_of(P, FILE_SEARCH)
    (call,) = [i for i in body["output"] if i["type"] == "file_search_call"]
    started, completed = of(parts, Activity)
    assert (started.activity_id, started.input) == (call["id"], {"queries": call["queries"]})
    assert completed.sources == tuple({"url": "", "title": r["filename"]}
                                      for r in call["results"])
    n = len(call["results"])
    assert completed.summary == ("1 result" if n == 1 else f"{n} results")
    assert completed.payload.value == call  # results' text and score stay in the payload
    (citation,) = of(parts, Citation)
    message = next(i for i in body["output"] if i["type"] == "message")
    annotation = message["content"][0]["annotations"][0]
    assert annotation["type"] == "file_citation" and annotation["index"] == 30
    assert (citation.start, citation.end, citation.url) == (None, None, "")
    assert citation.title == annotation["filename"] and citation.replay.value == annotation
    assert parts[-1] == ResponseEnd("end_turn")


def test_image_generation_that_never_finishes_still_shows_its_image() -> None:
    objects, parts = wire(P, IMAGE_GEN), parts_of(P, IMAGE_GEN)
    (item,) = done_items(objects, "image_generation_call")
    assert item["status"] == "generating"
    assert not [o for o in objects if o["type"] == "response.image_generation_call.completed"]
    (started,) = of(parts, Activity)  # no completion is invented
    assert (started.activity_id, started.name, started.state) == (item["id"], "image_generation",
                                                                  "started")
    assert started.input == {"prompt": item["revised_prompt"], "size": "1024x1024",
                             "quality": "medium"}
    assert started.output == {"images": [{"url": "data:image/png;base64," + item["result"],
                                          "media_type": "image/png"}]}
    assert started.payload.value == item
    assert parts[-1] == ResponseEnd("end_turn")


def test_server_tool_search_then_the_function_it_found() -> None:
    objects, parts = wire(P, TOOL_SEARCH), parts_of(P, TOOL_SEARCH)
    (call,) = done_items(objects, "tool_search_call")
    (output,) = done_items(objects, "tool_search_output")
    assert call["execution"] == output["execution"] == "server" and output["call_id"] is None
    assert transitions(parts) == [(call["id"], "tool_search", "started"),
                                  (call["id"], "tool_search", "completed")]
    started, completed = of(parts, Activity)
    assert started.input == {"paths": ["get_weather"]} and started.payload.value == call
    assert completed.output == {"tools": ["get_weather"]} and completed.payload.value == output
    (function,) = of(parts, ToolCall)
    assert (function.name, function.arguments) == (
        "get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"})
    assert parts[-1] == ResponseEnd("tool_use")


def test_url_citation_over_the_models_own_link() -> None:
    (body,) = wire(P, RAW_ANNOTATIONS)
    parts = parts_of(P, RAW_ANNOTATIONS)
    (search,) = [i for i in body["output"] if i["type"] == "web_search_call"]
    started, completed = of(parts, Activity)
    assert completed.activity_id == started.activity_id == search["id"]
    assert started.input["action"] == "search"
    assert started.input["queries"] == search["action"]["queries"]
    message = next(i for i in body["output"] if i["type"] == "message")
    text = message["content"][0]["text"]
    annotation = message["content"][0]["annotations"][0]
    (citation,) = of(parts, Citation)
    assert (citation.start, citation.end) == (126, 211) == (annotation["start_index"],
                                                            annotation["end_index"])
    assert re.fullmatch(r"\(\[britannica\.com\]\(https://\S+utm_source=openai\)\)",
                        text[126:211])
    assert parts[-1] == ResponseEnd("end_turn")


def test_openrouter_body_search_and_excerpts() -> None:
    (body,) = wire(P, OPENROUTER)
    parts = parts_of(P, OPENROUTER)
    assert parts[0] == ResponseStart("openrouter", body["model"], body["id"])
    annotations = body["choices"][0]["message"]["annotations"]
    citations = of(parts, Citation)
    assert [c.url for c in citations] == [a["url_citation"]["url"] for a in annotations]
    for citation, annotation in zip(citations, annotations, strict=True):
        assert citation.start is None  # 0/0 is no range: the whole message is cited
        assert citation.excerpt == annotation["url_citation"]["content"]
    assert body["usage"]["server_tool_use_details"]["web_search_requests"] == 1
    started, completed = of(parts, Activity)  # the one search that ran
    assert started.activity_id == completed.activity_id == f"{body['id']}:web_search:0"
    assert [s["url"] for s in completed.sources] == [c.url for c in citations]
    assert of(parts, Usage)[0].counters["server_tool_use_details.web_search_requests"] == 1
    assert parts[-1] == ResponseEnd("end_turn")


def test_perplexity_citations_and_their_markers() -> None:
    (body,) = wire(P, PERPLEXITY)
    parts = parts_of(P, PERPLEXITY)
    urls = body["citations"]
    content = body["choices"][0]["message"]["content"]
    assert parts[0] == ResponseStart("perplexity", "sonar", body["id"])
    marker = re.compile(r"\[(\d+)\]")
    clean = marker.sub("", content)
    (text,) = texts(parts).values()
    assert text == clean  # the markers are out of the stored text
    # Every marker cites citations[n-1], over the sentence it follows.
    expected = []
    removed = 0
    for match in marker.finditer(content):
        expected.append((match.start() - removed, urls[int(match.group(1)) - 1]))
        removed += len(match.group(0))
    citations = of(parts, Citation)
    assert [c.url for c in citations] == [url for _, url in expected]
    for citation, (position, _) in zip(citations, expected, strict=True):
        assert citation.end == position  # the span ends where the marker stood
        span = clean[citation.start:citation.end]
        assert span == span.strip() and "\n" not in span and span[-1] in ".)"
    assert clean[citations[0].start:citations[0].end].startswith("The most recent estimates")
    # The search Perplexity ran consulted every URL, the uncited fourth one too.
    started, completed = of(parts, Activity)
    assert started.activity_id == completed.activity_id == f"{body['id']}:web_search:0"
    assert [s["url"] for s in completed.sources] == urls
    assert urls[3] not in {c.url for c in citations}
    (end,) = of(parts, BlockEnd)
    assert end.payload.value == body["choices"][0]["message"]  # the text as sent, markers in
    assert parts[-1] == ResponseEnd("end_turn")
    for event in events_of(P, PERPLEXITY):
        for a in event.attributions:
            assert a.start is not None and event.text[a.start:a.end]


# ---------------------------------------------------------------------------------------------
# Synthetic wire: what the recordings lack


def parse(*events: dict[str, Any]) -> list[Any]:
    import providers

    return list(providers.parse(P, b"".join(orjson.dumps(e) + b"\n" for e in events)))


def body(*output: dict[str, Any]) -> list[Any]:
    import providers

    return list(providers.parse(P, orjson.dumps({
        "id": "resp_s", "object": "response", "model": "gpt-x", "status": "completed",
        "output": list(output)})))


CREATED = {"type": "response.created", "response": {"id": "resp_c", "object": "response",
                                                    "model": "gpt-x", "output": []}}
PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElF"
         "TkSuQmCC")  # a 1x1 PNG


def test_a_client_tool_search_is_the_hosts_to_run_not_a_hosted_activity() -> None:
    parts = body({"type": "tool_search_call", "id": "tsc_c", "execution": "client",
                  "call_id": "call_1", "arguments": {"query": "weather"}, "status": "completed"})
    assert of(parts, Activity) == []
    assert [a.type for a in of(parts, Artifact)] == ["tool_search_call"]  # kept whole


def test_mcp_calls_without_a_status_say_by_their_output_or_error() -> None:
    parts = body(
        {"type": "mcp_call", "id": "mcp_a", "server_label": "s", "name": "t", "arguments": "{}",
         "output": "fine", "error": None},
        {"type": "mcp_call", "id": "mcp_b", "server_label": "s", "name": "t", "arguments": "{}",
         "output": None, "error": "connector timed out"},
    )
    assert transitions(parts) == [("mcp_a", "mcp_call", "started"),
                                  ("mcp_a", "mcp_call", "completed"),
                                  ("mcp_b", "mcp_call", "started"),
                                  ("mcp_b", "mcp_call", "failed")]
    failed = of(parts, Activity)[-1]
    assert (failed.error_code, failed.output) == ("error", {"error": "connector timed out"})


def test_an_image_generation_cut_after_a_partial_image_shows_it() -> None:
    item = {"id": "ig_1", "type": "image_generation_call", "status": "in_progress"}
    parts = parse(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.image_generation_call.partial_image", "output_index": 0,
         "item_id": "ig_1", "partial_image_index": 0, "partial_image_b64": PIXEL,
         "output_format": "png"},
    )
    (started,) = of(parts, Activity)
    assert (started.state, started.output) == ("started", {"images": [
        {"url": "data:image/png;base64," + PIXEL, "media_type": "image/png"}]})


@pytest.mark.parametrize(("url", "kept"), [
    ("data:image/png;base64," + PIXEL, True),
    ("data:image/jpeg;base64,/9j/4AAQ", True),
    ("data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=", False),  # SVG can carry script
    ("data:image/png;base64,not base64!", False),
    ("data:image/png,plain", False),
    ("https://example.org/a.png", False),  # only the image itself, never a remote fetch
    ("data:image/png;base64," + "A" * (4 * 1024 * 1024), False),  # too long to keep inline
    ("data:text/html;base64,PGI+", False),
])
def test_only_raster_data_urls_of_a_bounded_size_are_kept(url: str, kept: bool) -> None:
    parts = body({"type": "code_interpreter_call", "id": "ci_1", "status": "completed",
                  "code": "plot()", "container_id": "c",
                  "outputs": [{"type": "image", "url": url}]})
    completed = of(parts, Activity)[-1]
    images = (completed.output or {}).get("images", [])
    assert images == ([{"url": url, "media_type": url[5:url.index(";")]}] if kept else [])
    assert completed.payload.value["outputs"][0]["url"] == url  # the payload keeps it anyway


def test_a_streamed_perplexity_answer_reads_as_its_body() -> None:
    """Markers split across chunks are taken out as in the body, with the same citations."""
    import providers

    (answer,) = wire(P, PERPLEXITY)
    content = answer["choices"][0]["message"]["content"]
    whole = parts_of(P, PERPLEXITY)
    for size in (1, 2, 3, 7, 50):
        pieces = [content[i:i + size] for i in range(0, len(content), size)]
        chunks = [{"id": answer["id"], "model": "sonar", "object": "chat.completion.chunk",
                   "citations": answer["citations"],
                   "choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
        chunks.append({"id": answer["id"], "model": "sonar", "object": "chat.completion.chunk",
                       "citations": answer["citations"],
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        raw = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        parts = list(providers.parse(P, raw))
        assert texts(parts) == texts(whole)
        assert [(c.url, c.start, c.end) for c in of(parts, Citation)] == [
            (c.url, c.start, c.end) for c in of(whole, Citation)]
        (end,) = of(parts, BlockEnd)
        assert end.payload.value["content"] == content  # as sent, markers in


def test_bracketed_numbers_that_are_no_markers_stay() -> None:
    import providers

    content = "See [1](https://x.example/) and a[2] but [1]."
    value = {"id": "p", "model": "sonar", "object": "chat.completion",
             "citations": ["https://a.example/"],
             "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": content}}]}
    parts = list(providers.parse(P, orjson.dumps(value)))
    (text,) = texts(parts).values()
    assert text == "See [1](https://x.example/) and a[2] but ."  # a link, an unknown number
    (citation,) = of(parts, Citation)
    assert text[citation.start:citation.end] == "See [1](https://x.example/) and a[2] but"
