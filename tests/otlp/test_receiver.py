"""The receiver as the OTLP/HTTP specification describes it: protobuf and JSON bodies, gzip,
the user's token, 400 / 413 / 429 / 503 in OTLP's error shape, partial success, spans that are
no LLM call acknowledged and not stored, one turn per span however often it arrives, threading.

Requests are made of real SDK spans (``opentelemetry-sdk``), encoded by the exporter's own
encoder; their attributes are those the GenAI conventions and OpenLLMetry define."""

from __future__ import annotations

import base64
import gzip
from typing import Any

import httpx
import orjson
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from conversations.models import Conversation, Event, Turn
from otlp.models import ReceivedSpan
from tests.servers import served

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"
KEY = "sk-proj-PLANTEDotlpKEY0123456789abcdefghijklmnopqrs"


@pytest.fixture
def url():
    from otlp.app import application

    with served(application) as server:
        yield server.url + "/otlp/v1/traces"


def messages(*pairs: tuple[str, str]) -> str:
    return orjson.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}
                         for role, text in pairs]).decode()


def gen_ai(prompt: str = "Why two tides a day?", answer: str = "The moon.", **extra: Any
           ) -> dict[str, Any]:
    """A chat span's attributes as the GenAI conventions write them."""
    return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.response.finish_reasons": ("stop",),
            "gen_ai.input.messages": messages(("user", prompt)),
            "gen_ai.output.messages": orjson.dumps([{
                "role": "assistant", "parts": [{"type": "text", "content": answer}],
                "finish_reason": "stop"}]).decode(), **extra}


def export(*spans: dict[str, Any], trace: bool = True) -> ExportTraceServiceRequest:
    """Spans made by the SDK (one trace when ``trace``), as its exporter encodes them. Each
    dict: attributes, and optionally ``_name``, ``_error``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.otlp")
    with tracer.start_as_current_span("request") if trace else _nothing():
        for attrs in spans:
            attrs = dict(attrs)
            name = attrs.pop("_name", "chat gpt-4o")
            error = attrs.pop("_error", None)
            with tracer.start_as_current_span(name, attributes=attrs) as span:
                if error:
                    span.set_status(Status(StatusCode.ERROR, error))
    finished = [s for s in exporter.get_finished_spans() if s.name != "request"]
    return encode_spans(finished)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def as_json(request: ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON: the proto3 JSON mapping, with trace and span ids in hex."""
    doc = json_format.MessageToDict(request)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return orjson.dumps(doc)


def post(url: str, body: bytes, token: str | None, content_type: str = PROTOBUF,
         **headers: str) -> httpx.Response:
    sent = {"content-type": content_type, **headers}
    if token is not None:
        sent.setdefault("authorization", f"Bearer {token}")
    return httpx.post(url, content=body, headers=sent, timeout=30)


def rpc_status(response: httpx.Response) -> status_pb2.Status:
    status = status_pb2.Status()
    if response.headers["content-type"] == "application/json":
        json_format.Parse(response.content, status)
    else:
        status.ParseFromString(response.content)
    return status


def agent_turns() -> list[Turn]:
    return list(Turn.objects.filter(role=Turn.Role.AGENT).order_by("created_at"))


def texts(turn: Turn, kind: str = "message") -> list[str]:
    return [e.text for e in turn.events.filter(kind=kind).order_by("seq")]


# -- encodings -------------------------------------------------------------------------------


def test_protobuf_export_is_a_turn(url, token, owner):
    response = post(url, export(gen_ai()).SerializeToString(), token)
    assert response.status_code == 200
    assert response.headers["content-type"] == PROTOBUF
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert not answer.HasField("partial_success")
    [turn] = agent_turns()
    assert turn.conversation.owner == owner
    assert texts(turn) == ["The moon."]
    assert (turn.provider, turn.model, turn.end_reason) == ("openai", "gpt-4o-2024-08-06",
                                                            "end_turn")
    [user] = turn.conversation.turns.filter(role=Turn.Role.USER)
    assert texts(user) == ["Why two tides a day?"]
    assert turn.conversation.title == "Why two tides a day?"


def test_json_export_is_a_turn_with_its_ids(url, token):
    request = export(gen_ai())
    response = post(url, as_json(request), token, "application/json")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert orjson.loads(response.content) == {}
    [turn] = agent_turns()
    span = request.resource_spans[0].scope_spans[0].spans[0]
    [kept] = turn.responses_list
    assert (kept["trace_id"], kept["span_id"]) == (span.trace_id.hex(), span.span_id.hex())
    assert kept["citations"] == "not_sent"


def test_gzip_export(url, token):
    body = gzip.compress(export(gen_ai()).SerializeToString())
    response = post(url, body, token, **{"content-encoding": "gzip"})
    assert response.status_code == 200
    assert len(agent_turns()) == 1


# -- auth ------------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer nope"},
                                     {"x-turnscope-token": "nope"},
                                     {"authorization": "Basic dXNlcjpwdw=="}])
def test_without_a_valid_token_nothing_is_stored(url, token, headers):
    body = export(gen_ai()).SerializeToString()
    response = httpx.post(url, content=body, timeout=30,
                          headers={"content-type": PROTOBUF, **headers})
    assert response.status_code == 401
    assert rpc_status(response).code == 16  # UNAUTHENTICATED
    assert Conversation.objects.count() == 0


def test_the_token_header_works_too(url, token):
    response = httpx.post(url, content=export(gen_ai()).SerializeToString(), timeout=30,
                          headers={"content-type": PROTOBUF, "x-turnscope-token": token})
    assert response.status_code == 200
    assert len(agent_turns()) == 1


# -- malformed, too large, busy ---------------------------------------------------------------


@pytest.mark.parametrize(("body", "content_type", "headers", "says"), [
    (b"\xff\xff\xff\xff", PROTOBUF, {}, "protobuf"),
    (b"{not json", "application/json", {}, "not JSON"),
    (b"[1, 2]", "application/json", {}, "not an object"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}',
     "application/json", {}, "not hex"),
    (b'{"resourceSpans": "nope"}', "application/json", {}, "ExportTraceServiceRequest"),
    (b"plain bytes", PROTOBUF, {"content-encoding": "gzip"}, "gzip"),
    (b"x", PROTOBUF, {"content-encoding": "br"}, "Content-Encoding"),
])
def test_a_malformed_export_is_a_400_in_otlp_error_shape(url, token, body, content_type,
                                                         headers, says):
    response = post(url, body, token, content_type, **headers)
    assert response.status_code == 400
    assert response.headers["content-type"] == content_type
    status = rpc_status(response)
    assert status.code == 3  # INVALID_ARGUMENT
    assert says in status.message
    assert Conversation.objects.count() == 0


def test_an_unknown_content_type_is_refused(url, token):
    response = post(url, b"{}", token, "text/plain")
    assert response.status_code == 415
    assert Conversation.objects.count() == 0


def test_only_post_to_the_traces_path(url, token):
    assert httpx.get(url, timeout=30).status_code == 405
    other = url.replace("/v1/traces", "/v1/metrics")
    assert post(other, b"", token).status_code == 404


def test_over_the_size_cap_is_a_413(url, token, settings):
    body = export(gen_ai(answer="x" * 5000)).SerializeToString()
    settings.TURNSCOPE_OTLP_MAX_BODY_BYTES = len(body) - 1
    response = post(url, body, token)
    assert response.status_code == 413
    assert rpc_status(response).code == 8  # RESOURCE_EXHAUSTED
    # a small body that decompresses past the cap (a bomb) is refused the same way
    bomb = gzip.compress(body)
    assert len(bomb) < len(body) - 1
    response = post(url, bomb, token, **{"content-encoding": "gzip"})
    assert response.status_code == 413
    assert "decompressed" in rpc_status(response).message
    assert Conversation.objects.count() == 0


def test_busy_is_a_429_with_retry_after(url, token, settings):
    settings.TURNSCOPE_OTLP_CONCURRENCY = 0
    response = post(url, export(gen_ai()).SerializeToString(), token)
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) > 0
    assert Conversation.objects.count() == 0


def test_a_database_failure_is_a_503_with_retry_after_then_the_retry_stores_it(
        url, token, monkeypatch):
    from django.db import OperationalError

    from otlp import record

    real = record.record

    def broken(user, call):
        raise OperationalError("database is locked")

    body = export(gen_ai()).SerializeToString()
    monkeypatch.setattr(record, "record", broken)
    response = post(url, body, token)
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) > 0
    monkeypatch.setattr(record, "record", real)
    assert post(url, body, token).status_code == 200
    assert len(agent_turns()) == 1


def test_a_span_that_cannot_be_stored_is_a_partial_success(url, token, settings):
    settings.TURNSCOPE_MAX_EVENTS_PER_TURN = 3
    many = orjson.dumps([{"role": "assistant", "parts": [
        {"type": "text", "content": f"part {n}"} for n in range(10)]}]).decode()
    body = export(gen_ai(answer="fine"), gen_ai(**{"gen_ai.output.messages": many}))
    response = post(url, body.SerializeToString(), token)
    assert response.status_code == 200
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert "more than 3 events" in answer.partial_success.error_message
    [turn] = agent_turns()
    assert texts(turn) == ["fine"]


# -- what is stored ----------------------------------------------------------------------------


def test_spans_that_are_no_llm_call_are_acknowledged_not_stored(url, token):
    body = export({"_name": "GET /", "http.request.method": "GET"},
                  {"_name": "embeddings", "gen_ai.operation.name": "embeddings",
                   "gen_ai.provider.name": "openai"},
                  {"_name": "retrieve", "openinference.span.kind": "RETRIEVER"})
    response = post(url, body.SerializeToString(), token)
    assert response.status_code == 200
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert answer.partial_success.rejected_spans == 0
    assert Conversation.objects.count() == 0


def test_the_same_span_twice_is_one_turn(url, token):
    body = export(gen_ai()).SerializeToString()
    assert post(url, body, token).status_code == 200
    assert post(url, body, token).status_code == 200  # an exporter's retry
    assert post(url, gzip.compress(body), token, **{"content-encoding": "gzip"}
                ).status_code == 200
    assert len(agent_turns()) == 1
    assert ReceivedSpan.objects.count() == 1
    assert Turn.objects.filter(role=Turn.Role.USER).count() == 1


def test_secrets_in_attributes_are_redacted(url, token):
    body = export(gen_ai(prompt=f"my key is {KEY}", answer=f"do not share {KEY}"))
    assert post(url, body.SerializeToString(), token).status_code == 200
    stored = list(Event.objects.values_list("text", flat=True))
    assert stored and not any(KEY in text for text in stored)
    assert not any(KEY in c.title for c in Conversation.objects.all())


def test_a_failed_call_is_a_failed_turn(url, token):
    span = gen_ai(_error="rate limited")
    span.pop("gen_ai.output.messages")
    assert post(url, export(span).SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    assert turn.status == Turn.Status.FAILED
    assert "rate limited" in turn.events.get(kind="error").body


# -- threading ---------------------------------------------------------------------------------


def test_one_trace_is_one_conversation(url, token):
    body = export(gen_ai(prompt="first", answer="one"), gen_ai(prompt="second", answer="two"))
    assert post(url, body.SerializeToString(), token).status_code == 200
    first, second = agent_turns()
    assert first.conversation_id == second.conversation_id
    assert [texts(t) for t in first.conversation.turns.order_by("index")] == [
        ["first"], ["one"], ["second"], ["two"]]


def test_a_session_continues_across_traces(url, token):
    for n in range(2):
        body = export(gen_ai(prompt=f"q{n}", answer=f"a{n}", **{"session.id": "chat-7"}))
        assert post(url, body.SerializeToString(), token).status_code == 200
    body = export(gen_ai(prompt="q", answer="a", **{"gen_ai.conversation.id": "other"}))
    assert post(url, body.SerializeToString(), token).status_code == 200
    a, b, c = agent_turns()
    assert a.conversation_id == b.conversation_id != c.conversation_id


def test_without_session_or_trace_the_history_threads(url, token):
    assert post(url, export(gen_ai(prompt="hi", answer="hello")).SerializeToString(),
                token).status_code == 200
    later = gen_ai(prompt="and then?", answer="more",
                   **{"gen_ai.input.messages": messages(("user", "hi"), ("assistant", "hello"),
                                                        ("user", "and then?"))})
    assert post(url, export(later).SerializeToString(), token).status_code == 200
    unrelated = gen_ai(prompt="and then?", answer="more",
                       **{"gen_ai.input.messages": messages(("user", "other"),
                                                            ("assistant", "thing"),
                                                            ("user", "and then?"))})
    assert post(url, export(unrelated).SerializeToString(), token).status_code == 200
    a, b, c = agent_turns()
    assert a.conversation_id == b.conversation_id != c.conversation_id


# -- the other conventions -----------------------------------------------------------------------


def test_openllmetry_attributes_are_a_skeleton(url, token):
    span = {"_name": "openai.chat", "llm.request.type": "chat", "gen_ai.system": "OpenAI",
            "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
            "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Weather in Paris?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_1",
            "gen_ai.completion.0.tool_calls.0.name": "get_weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}'}
    assert post(url, export(span).SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    assert (turn.provider, turn.model, turn.end_reason) == ("openai", "gpt-4o-2024-08-06",
                                                            "tool_use")
    [call] = [orjson.loads(e.body)["call"] for e in turn.events.filter(kind="tool_call_request")]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Paris"}
    [user] = turn.conversation.turns.filter(role=Turn.Role.USER)
    assert texts(user) == ["Weather in Paris?"]
    assert turn.responses_list[0]["instrumentation"] == "openllmetry"


def test_server_tool_calls_are_hosted_activities_never_tool_calls(url, token):
    output = orjson.dumps([{"role": "assistant", "finish_reason": "stop", "parts": [
        {"type": "server_tool_call", "id": "ws_1", "name": "web_search",
         "server_tool_call": {"type": "web_search", "query": "tides"}},
        {"type": "server_tool_call_response", "id": "ws_1",
         "server_tool_call_response": {"type": "web_search"}},
        {"type": "reasoning", "content": "Let me look."},
        {"type": "text", "content": "Two bulges."}]}]).decode()
    body = export(gen_ai(**{"gen_ai.output.messages": output}))
    assert post(url, body.SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    assert not turn.events.filter(kind="tool_call_request").exists()
    bodies = [orjson.loads(e.body)["activity"] for e in turn.events.filter(kind="hosted_activity")
              .order_by("seq")]
    states = [(b["id"], b["name"], b["state"], b["input"]) for b in bodies]
    assert states == [("ws_1", "web_search", "started", {"query": "tides"}),
                      ("ws_1", "web_search", "completed", {"query": "tides"})]
    assert texts(turn, "reasoning") == ["Let me look."]
    assert texts(turn) == ["Two bulges."]


def test_the_details_event_carries_the_messages(url, token):
    attrs = gen_ai()
    details = {k: attrs.pop(k) for k in ("gen_ai.input.messages", "gen_ai.output.messages")}
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("chat", attributes=attrs) as span:
        span.add_event("gen_ai.client.inference.operation.details", details)
    body = encode_spans(exporter.get_finished_spans()).SerializeToString()
    assert post(url, body, token).status_code == 200
    [turn] = agent_turns()
    assert texts(turn) == ["The moon."]


OPENINFERENCE = {"_name": "ChatCompletion", "openinference.span.kind": "LLM",
                 "llm.system": "openai", "llm.model_name": "gpt-4o-2024-08-06",
                 "input.value": orjson.dumps({"model": "gpt-4o", "messages": [
                     {"role": "user", "content": "Tides?"}]}).decode(),
                 "input.mime_type": "application/json",
                 "llm.input_messages.0.message.role": "user",
                 "llm.input_messages.0.message.content": "Tides?",
                 "llm.output_messages.0.message.role": "assistant",
                 "llm.output_messages.0.message.content": "The moon.",
                 "llm.finish_reason": "stop"}


def test_openinference_messages_without_the_response_are_a_skeleton(url, token):
    assert post(url, export(OPENINFERENCE).SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    assert texts(turn) == ["The moon."]
    [kept] = turn.responses_list
    assert kept["instrumentation"] == "openinference" and kept["citations"] == "not_sent"


def test_a_raw_response_the_adapter_cannot_read_falls_back_to_the_skeleton(url, token):
    span = {**OPENINFERENCE, "output.value": '{"object": "chat.completion", "choices": 7}',
            "output.mime_type": "application/json"}
    assert post(url, export(span).SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    assert texts(turn) == ["The moon."]
    [kept] = turn.responses_list
    assert kept["citations"] == "not_sent" and kept["raw_unreadable"]
    [user] = turn.conversation.turns.filter(role=Turn.Role.USER)
    assert texts(user) == ["Tides?"]


def test_pydantic_ai_builtin_tool_parts_are_hosted_activities(url, token):
    output = orjson.dumps([{"role": "assistant", "finish_reason": "stop", "parts": [
        {"type": "tool_call", "id": "srvtoolu_1", "name": "web_search", "builtin": True,
         "arguments": {"query": "tides"}},
        {"type": "tool_call_response", "id": "srvtoolu_1", "name": "web_search",
         "builtin": True, "result": [{"url": "https://example.org/tides"}]},
        {"type": "text", "content": "Two bulges."}]}]).decode()
    body = export(gen_ai(**{"gen_ai.output.messages": output}))
    assert post(url, body.SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    assert not turn.events.filter(kind="tool_call_request").exists()
    bodies = [orjson.loads(e.body)["activity"] for e in turn.events.filter(kind="hosted_activity")
              .order_by("seq")]
    assert [(b["id"], b["name"], b["state"], b["input"]) for b in bodies] == [
        ("srvtoolu_1", "web_search", "started", {"query": "tides"}),
        ("srvtoolu_1", "web_search", "completed", {"query": "tides"})]


def test_a_received_turn_exports_and_imports_with_its_span(url, token, owner):
    from conversations.projections import export_json, import_document
    from conversations.schema import validate_export

    assert post(url, export(gen_ai()).SerializeToString(), token).status_code == 200
    [turn] = agent_turns()
    doc = orjson.loads(export_json(turn.conversation, "native"))
    validate_export(doc)
    [kept] = doc["turns"][1]["responses"]
    assert kept["citations"] == "not_sent" and len(kept["span_id"]) == 16
    copy = import_document(doc, owner=owner)  # the same store: fresh ids, all else kept
    again = orjson.loads(export_json(copy, "native"))
    assert [t["responses"] for t in again["turns"] if t["role"] == "agent"] == [[kept]]
    imported = copy.turns.get(role=Turn.Role.AGENT)
    assert imported.citations_not_sent
