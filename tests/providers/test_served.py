"""Who served a response (``providers.served``), and the tools xAI and Groq run themselves in
OpenAI's wire formats (``providers.openai.xai``, ``providers.openai.groq``)."""

from __future__ import annotations

import orjson
import pytest

import providers
from providers import served
from providers.protocol import WireContext
from streams.parts import Activity, BlockEnd, ResponseEnd, ResponseStart, ToolCall


def parts(raw: bytes | str, context: WireContext | None = None) -> list:
    return list(providers.parse("openai", raw, context))


def of(found: list, kind: type) -> list:
    return [p for p in found if isinstance(p, kind)]


@pytest.mark.parametrize(("endpoint", "name"), [
    ("https://api.x.ai/v1/responses", "xai"),
    ("https://api.groq.com/openai/v1/chat/completions", "groq"),
    ("https://api.deepseek.com/chat/completions", "deepseek"),
    ("https://my-res.openai.azure.com/openai/deployments/d/chat/completions?api-version=1",
     "azure"),
    ("https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google/"
     "models/m:generateContent", "vertex"),
    ("https://aiplatform.googleapis.com/v1/projects/p", "vertex"),
    ("https://api.openai.com/v1/responses", "openai"),
    ("https://evil-api.x.ai.example.com/v1", ""),
    ("http://127.0.0.1:8000/v1", ""),
    ("not a url", ""),
    (None, ""),
])
def test_hosts(endpoint, name):
    assert served.by_host(endpoint) == name


def test_the_callers_word_then_the_host_then_the_response_then_the_model():
    grok = WireContext(endpoint="https://api.groq.com/openai/v1/chat/completions")
    assert served.provider(WireContext(served_by="mylab", endpoint=grok.endpoint), "openai",
                           shown="openrouter", model="grok-4") == "mylab"
    assert served.provider(grok, "openai", shown="openrouter", model="grok-4") == "groq"
    assert served.provider(WireContext(), "openai", shown="openrouter", model="grok-4") == (
        "openrouter")
    assert served.provider(WireContext(), "openai", model="grok-4") == "xai"
    assert served.provider(WireContext(), "openai", model="deepseek-chat") == "deepseek"
    assert served.provider(WireContext(), "openai", model="deepseek-r1-distill") == "openai"
    assert served.provider(WireContext(served_by="Not A Name!"), "openai") == "openai"


def _xai_body(output: list, tools: list | None = None) -> bytes:
    body = {"id": "b7b4", "object": "response", "model": "grok-4-fast-reasoning",
            "status": "completed", "output": output,
            "usage": {"num_server_side_tools_used": 1}}
    if tools is not None:
        body["tools"] = tools
    return orjson.dumps(body)


X_SEARCH = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "xs_call_1",
            "name": "x_keyword_search", "input": '{"query": "grok"}', "status": "completed"}
WEATHER = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
           "arguments": '{"city": "Paris"}', "status": "completed"}


def test_xai_mixing_server_and_client_tools():
    # xAI's docs: server-side tools run on its side, client tools come back for the host.
    found = parts(_xai_body([X_SEARCH, WEATHER], [
        {"type": "x_search"}, {"type": "function", "name": "get_weather", "parameters": {}}]))
    assert [(a.name, a.state) for a in of(found, Activity)] == [
        ("x_search", "started"), ("x_search", "completed")]
    (call,) = of(found, ToolCall)
    assert (call.call_id, call.name, call.arguments) == ("call_1", "get_weather",
                                                         {"city": "Paris"})
    assert of(found, ResponseEnd)[0].end_reason == "tool_use"
    assert of(found, ResponseStart)[0].provider == "xai"


def test_an_xai_call_of_a_declared_client_tool_is_the_clients_even_if_named_like_xais():
    custom = {**X_SEARCH, "name": "x_keyword_search"}
    found = parts(_xai_body([custom], [{"type": "custom", "name": "x_keyword_search"}]))
    assert of(found, ToolCall) and not of(found, Activity)


def test_without_the_tool_list_only_xais_documented_names_are_its_own():
    found = parts(_xai_body([X_SEARCH, {**X_SEARCH, "id": "ctc_2", "name": "my_tool"}]))
    assert [a.name for a in of(found, Activity)] == ["x_search", "x_search"]
    assert [c.name for c in of(found, ToolCall)] == ["my_tool"]
    # With the tools declared, an undeclared name is xAI's own, whatever it is.
    found = parts(_xai_body([{**X_SEARCH, "name": "x_new_tool"}], [{"type": "x_search"}]))
    (done,) = [a for a in of(found, Activity) if a.state == "completed"]
    assert (done.name, done.input["tool"]) == ("server_tool", "x_new_tool")
    assert of(found, ResponseEnd)[0].end_reason == "end_turn"


def test_openai_custom_tool_calls_stay_client_calls_whatever_their_name():
    body = orjson.loads(_xai_body([X_SEARCH]))
    body["model"] = "gpt-5"
    found = parts(orjson.dumps(body))
    assert of(found, ToolCall) and not of(found, Activity)
    assert of(found, ResponseEnd)[0].end_reason == "tool_use"


def test_an_xai_call_cut_before_it_finished_is_started_only():
    lines = [
        {"type": "response.created", "response": {"id": "r", "object": "response",
                                                  "model": "grok-4", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**X_SEARCH, "input": "", "status": "in_progress"}},
    ]
    found = parts(b"\n".join(orjson.dumps(line) for line in lines))
    (started,) = of(found, Activity)
    assert (started.name, started.state) == ("x_search", "started")
    assert not of(found, ResponseEnd)


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "g", "object": "chat.completion.chunk", "model": "groq/compound",
            "x_groq": {"id": "req_1"},
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_groq_streamed_executed_tools_complete_once_their_results_arrive():
    results = {"results": [{"title": "T", "url": "https://a.example/", "content": "c",
                            "score": 0.9}]}
    chunks = [
        _chunk({"role": "assistant", "executed_tools": [
            {"index": 0, "type": "search", "arguments": '{"query": "q"}'}]}),
        _chunk({"executed_tools": [{"index": 0, "type": "search", "output": "Title: T",
                                    "search_results": results}]}),
        _chunk({"content": "Answer."}),
        _chunk({}, "stop"),
    ]
    raw = "".join(f"data: {orjson.dumps(c).decode()}\n\n" for c in chunks) + "data: [DONE]\n\n"
    found = parts(raw)
    assert of(found, ResponseStart)[0].provider == "groq"
    activities = of(found, Activity)
    assert [(a.activity_id, a.state) for a in activities] == [
        ("g:executed_tool:0", "started"), ("g:executed_tool:0", "completed")]
    assert activities[1].sources == ({"url": "https://a.example/", "title": "T"},)
    assert activities[1].summary == "1 result"
    (message,) = [p for p in of(found, BlockEnd) if p.key == "choice-0"]
    (kept,) = message.payload.value["executed_tools"]  # nothing of the wire is lost
    assert kept["search_results"] == results and kept["arguments"] == '{"query": "q"}'
    assert of(found, ResponseEnd)[0].end_reason == "end_turn"
