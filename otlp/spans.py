"""Which spans are LLM calls, and what each one holds (Django-free).

Each instrumentation writes an LLM call its own way; this module reads them into one ``Call``:

* **OpenInference** (Arize Phoenix's instrumentors): ``openinference.span.kind = LLM``. Its
  ``output.value`` with ``output.mime_type = application/json`` is the provider's whole response
  (for a streamed call, the final object), and ``input.value`` the request body: the call is
  ``raw``, read by the provider's own adapter as if it had been proxied. Without them,
  ``llm.input_messages`` / ``llm.output_messages`` give a skeleton.
* **GenAI semantic conventions** (the OpenTelemetry contrib instrumentations, Logfire, OpenLIT,
  pydantic-ai, whose ``builtin: true`` tool parts are hosted tools):
  ``gen_ai.operation.name`` ``chat`` / ``text_completion`` / ``generate_content``; messages in
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON text or structured values), on
  the span or on its ``gen_ai.client.inference.operation.details`` event. A skeleton.
* **OpenLLMetry** (Traceloop): ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``. A skeleton.

A skeleton is the conversation the attributes describe — messages, reasoning, tool calls,
``server_tool_call`` parts as hosted activities, model, finish reason — as stream parts for the
one runner; no instrumentation of these sends citations, and the turn says so.

Attributes arrive redacted (``otlp.record``); nothing here touches a database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams import parts

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
JSON_MIME = "application/json"

# ``gen_ai.provider.name`` / ``gen_ai.system`` / OpenInference ``llm.provider`` /
# ``llm.system``, lower-cased, to the provider whose adapter reads its wire (and whose name is
# the turn's provenance).
PROVIDERS = {
    "openai": "openai", "azure.ai.openai": "openai", "azure": "openai", "az.ai.openai": "openai",
    "anthropic": "anthropic",
    "google": "google", "gemini": "google", "gcp.gemini": "google", "gcp.vertex_ai": "google",
    "gcp.gen_ai": "google", "vertexai": "google", "vertex_ai": "google", "google_genai": "google",
}
ENDPOINTS = {"anthropic": "messages", "google": "generate"}  # openai: from the response's shape

# What an instrumentation calls a hosted tool, to the hosted activity names the adapters use.
HOSTED = {
    "web_search": "web_search", "web_search_call": "web_search",
    "web_search_preview": "web_search", "google_search": "web_search",
    "web_fetch": "web_fetch", "file_search": "file_search", "file_search_call": "file_search",
    "code_interpreter": "code_execution", "code_interpreter_call": "code_execution",
    "code_execution": "code_execution",
}
# A finish reason as each convention spells it, to the end reasons the adapters use.
FINISH = {
    "stop": "end_turn", "end_turn": "end_turn", "completed": "end_turn", "STOP": "end_turn",
    "length": "max_tokens", "max_tokens": "max_tokens", "MAX_TOKENS": "max_tokens",
    "tool_calls": "tool_use", "tool_call": "tool_use", "function_call": "tool_use",
    "tool_use": "tool_use",
    "content_filter": "refusal", "refusal": "refusal", "SAFETY": "refusal",
    "pause_turn": "pause_turn",
    "error": "error",
}
_INDEXED = re.compile(r"^(\d+)\.(.+)$")
_TEXT_LIMIT = 1_000_000  # characters of one skeleton message (a span's attribute cap is lower)


@dataclass
class Message:
    """A message of the conversation the span describes: ``role`` user / agent / system /
    tool, and its parts as the GenAI conventions type them (``{"type": "text", "content"}``,
    ``tool_call``, ``tool_call_response``, ``server_tool_call``, ``reasoning``, …)."""

    role: str
    parts: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = ""

    @property
    def text(self) -> str:
        return "".join(str(p.get("content") or "") for p in self.parts
                       if p.get("type") == "text")


@dataclass
class Call:
    """One LLM call read from a span."""

    trace_id: str
    span_id: str
    instrumentation: str  # "openinference", "gen_ai" or "openllmetry"
    provider: str  # the adapter's name when known, else as the span names it ("" unknown)
    model: str = ""  # served (the response's), else requested
    response_id: str = ""
    session: str = ""  # session.id / gen_ai.conversation.id: the conversation it continues
    raw: bytes | None = None  # the provider's response, when the span carries it
    endpoint: str = ""  # "responses" / "chat" / "messages" / "generate" for ``raw``
    request: dict[str, Any] | None = None  # the provider request body, when carried
    url: str | None = None  # the request's URL path, where the adapter needs it (Gemini)
    inputs: list[Message] = field(default_factory=list)  # the request's messages
    outputs: list[Message] = field(default_factory=list)  # the response's messages
    finish_reason: str = ""
    error: str = ""  # the span's error status message (the call failed)
    failed: bool = False

    @property
    def name(self) -> str:
        return f"span {self.trace_id}/{self.span_id}"

    @property
    def bookkeeping(self) -> dict[str, str]:
        """What the turn keeps of where it came from (its response bookkeeping)."""
        kept = {"source": "otlp", "instrumentation": self.instrumentation,
                "trace_id": self.trace_id, "span_id": self.span_id}
        if self.raw is None:
            kept["citations"] = "not_sent"
        return kept


def read(span: Any) -> Call | None:
    """The LLM call ``span`` (an ``otlp.wire.Span``) records, or None for any other span."""
    attrs: dict[str, Any] = span.attributes
    kind = str(attrs.get("openinference.span.kind", "")).upper()
    if kind:
        return _openinference(span, attrs) if kind == "LLM" else None
    details = next((e.attributes for e in span.events if e.name == DETAILS_EVENT), None)
    operation = str(attrs.get("gen_ai.operation.name", "") or
                    (details or {}).get("gen_ai.operation.name", ""))
    if operation in LLM_OPERATIONS or details is not None:
        return _gen_ai(span, {**attrs, **(details or {})})
    if str(attrs.get("llm.request.type", "")) in ("chat", "completion") or any(
            k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in attrs):
        return _openllmetry(span, attrs)
    return None


# -- shared --------------------------------------------------------------------------------------


def provider_of(*names: Any) -> str:
    """The first provider named, as the adapters call it (else the name itself, lower-cased)."""
    for name in names:
        if isinstance(name, str) and name.strip():
            key = name.strip().lower()
            return PROVIDERS.get(key, key)
    return ""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json(value: Any) -> Any:
    """A JSON attribute: text to be parsed, or already a structured value."""
    if isinstance(value, (str, bytes)):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def nested(attrs: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The flattened attributes under ``prefix`` (``a.0.b.c = v``) as nested dicts; a dict
    whose keys are all indexes is read as a list by ``listed``."""
    root: dict[str, Any] = {}
    dotted = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(dotted):
            continue
        node = root
        pieces = key[len(dotted):].split(".")
        for piece in pieces[:-1]:
            child = node.get(piece)
            if not isinstance(child, dict):
                child = node[piece] = {}
            node = child
        node[pieces[-1]] = value
    return root


def listed(value: Any) -> list[Any]:
    """``{"0": a, "1": b}`` (``nested``'s form of an indexed list) or a list, in index order."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        return []
    indexed = sorted((int(k), v) for k, v in value.items() if k.isdigit())
    return [v for _, v in indexed]


def _role(value: Any) -> str:
    role = _str(value).lower()
    return {"assistant": "agent", "model": "agent", "ai": "agent", "developer": "system",
            "function": "tool"}.get(role, role or "user")


def _failure(span: Any) -> tuple[bool, str]:
    return bool(span.error), _str(span.status_message)


# -- OpenInference -------------------------------------------------------------------------------


def _openinference(span: Any, attrs: dict[str, Any]) -> Call:
    provider = provider_of(attrs.get("llm.provider"), attrs.get("llm.system"))
    failed, error = _failure(span)
    call = Call(span.trace_id, span.span_id, "openinference", provider,
                model=_str(attrs.get("llm.model_name")), session=_str(attrs.get("session.id")),
                failed=failed, error=error,
                finish_reason=_str(attrs.get("llm.finish_reason")))
    output, request = attrs.get("output.value"), attrs.get("input.value")
    if _str(attrs.get("input.mime_type")) == JSON_MIME and isinstance(_json(request), dict):
        call.request = _json(request)
    body = _json(output) if _str(attrs.get("output.mime_type")) == JSON_MIME else None
    if isinstance(body, dict) and provider in ("openai", "anthropic", "google"):
        call.raw = output.encode() if isinstance(output, str) else orjson.dumps(body)
        if provider == "google" and "candidates" in body:
            # The google-genai SDK's object, dumped with its Python field names: the wire's
            # are their camelCase (the proto3 JSON mapping), which the adapter reads.
            body = camel_keys(body)
            call.raw = orjson.dumps(body)
        call.endpoint = ENDPOINTS.get(provider) or (
            "chat" if "choices" in body and body.get("object") != "response" else "responses")
        call.model = _str(body.get("model")) or _str(body.get("modelVersion")) or call.model
        if provider == "google" and call.model and "/" not in call.model:
            # Gemini names the model in the URL, which no span carries: the Gemini API's
            # (the SDK's default, v1beta) with the span's model, as the adapter reads one.
            call.url = f"/v1beta/models/{call.model}:generateContent"
    call.inputs = [_oi_message(m) for m in listed(nested(attrs, "llm.input_messages"))]
    call.outputs = [_oi_message(m) for m in listed(nested(attrs, "llm.output_messages"))]
    return call


_OPAQUE = frozenset({"args", "response", "partial_args"})  # the app's own data: kept as is


def camel_keys(value: Any) -> Any:
    """``value`` with every snake_case key in camelCase (``grounding_metadata`` →
    ``groundingMetadata``), except inside a function call's arguments or result."""
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        name = head + "".join(w[:1].upper() + w[1:] for w in rest) if rest and head else key
        out[name] = item if key in _OPAQUE else camel_keys(item)
    return out


def _oi_message(entry: Any) -> Message:
    message = entry.get("message") if isinstance(entry, dict) else None
    if not isinstance(message, dict):
        return Message("user")
    out = Message(_role(message.get("role")))
    if isinstance(message.get("content"), str):
        out.parts.append({"type": "text", "content": message["content"]})
    for content in listed(message.get("contents")):
        item = content.get("message_content") if isinstance(content, dict) else None
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            kind = "reasoning" if item.get("type") == "reasoning" else "text"
            out.parts.append({"type": kind, "content": item["text"]})
    for call in listed(message.get("tool_calls")):
        tool = call.get("tool_call") if isinstance(call, dict) else None
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if not isinstance(function, dict):
            function = {}
        name = _str(function.get("name"))
        arguments = _json(function.get("arguments"))
        if arguments is None:
            arguments = function.get("arguments")
        kind = "server_tool_call" if name in HOSTED else "tool_call"
        out.parts.append({"type": kind, "id": _str(tool.get("id")), "name": name,
                          "arguments": arguments})
    if isinstance(message.get("tool_call_id"), str) and out.role == "tool":
        out.parts = [{"type": "tool_call_response", "id": message["tool_call_id"],
                      "response": out.text}]
    return out


# -- GenAI semantic conventions ------------------------------------------------------------------


def _gen_ai(span: Any, attrs: dict[str, Any]) -> Call:
    failed, error = _failure(span)
    finish = attrs.get("gen_ai.response.finish_reasons")
    call = Call(
        span.trace_id, span.span_id, "gen_ai",
        provider_of(attrs.get("gen_ai.provider.name"), attrs.get("gen_ai.system")),
        model=_str(attrs.get("gen_ai.response.model")) or _str(attrs.get("gen_ai.request.model")),
        response_id=_str(attrs.get("gen_ai.response.id")),
        session=_str(attrs.get("gen_ai.conversation.id")) or _str(attrs.get("session.id")),
        failed=failed, error=error or _str(attrs.get("error.type")),
        finish_reason=_str(finish[0]) if isinstance(finish, list) and finish else "",
    )
    for key, into in (("gen_ai.input.messages", call.inputs),
                      ("gen_ai.output.messages", call.outputs)):
        for message in _json(attrs.get(key)) or []:
            if isinstance(message, dict):
                into.append(Message(_role(message.get("role")),
                                    [p for p in message.get("parts") or []
                                     if isinstance(p, dict)],
                                    _str(message.get("finish_reason"))))
    if not call.finish_reason and call.outputs:
        call.finish_reason = call.outputs[-1].finish_reason
    return call


# -- OpenLLMetry ---------------------------------------------------------------------------------


def _openllmetry(span: Any, attrs: dict[str, Any]) -> Call:
    failed, error = _failure(span)
    call = Call(
        span.trace_id, span.span_id, "openllmetry",
        provider_of(attrs.get("gen_ai.provider.name"), attrs.get("gen_ai.system")),
        model=_str(attrs.get("gen_ai.response.model")) or _str(attrs.get("gen_ai.request.model")),
        response_id=_str(attrs.get("gen_ai.response.id")),
        session=_str(attrs.get("gen_ai.conversation.id")) or _str(attrs.get("session.id")),
        failed=failed, error=error,
    )
    for prefix, into in (("gen_ai.prompt", call.inputs), ("gen_ai.completion", call.outputs)):
        for entry in listed(nested(attrs, prefix)):
            if not isinstance(entry, dict):
                continue
            message = Message(_role(entry.get("role")),
                              finish_reason=_str(entry.get("finish_reason")))
            content = entry.get("content")
            structured = _json(content) if isinstance(content, str) and content[:1] == "[" else None
            if isinstance(structured, list):  # content blocks, as the SDK took them
                for block in structured:
                    if isinstance(block, dict) and isinstance(block.get("text"), str):
                        message.parts.append({"type": "text", "content": block["text"]})
            elif isinstance(content, str):
                message.parts.append({"type": "text", "content": content})
            for tool in listed(entry.get("tool_calls")):
                if isinstance(tool, dict):
                    name = _str(tool.get("name"))
                    message.parts.append({
                        "type": "server_tool_call" if name in HOSTED else "tool_call",
                        "id": _str(tool.get("id")), "name": name,
                        "arguments": _json(tool.get("arguments")) or tool.get("arguments")})
            if message.role == "tool" and isinstance(entry.get("tool_call_id"), str):
                message.parts = [{"type": "tool_call_response", "id": entry["tool_call_id"],
                                  "response": message.text}]
            into.append(message)
    if call.outputs:
        call.finish_reason = call.outputs[-1].finish_reason
    return call


# -- the skeleton as stream parts ----------------------------------------------------------------


def skeleton(call: Call) -> list[parts.Part]:
    """The response the span describes, as stream parts for the one runner: text and reasoning
    blocks, client tool calls, ``server_tool_call`` parts as hosted activities (completed by
    their ``server_tool_call_response``), the finish reason. No citations: none was sent."""
    out: list[parts.Part] = []
    if call.provider and call.model:
        out.append(parts.ResponseStart(call.provider, call.model, call.response_id))
    activities: dict[str, tuple[str, dict[str, Any]]] = {}
    answered: set[str] = set()
    n = 0
    for message in call.outputs:
        for part in message.parts:
            kind = _str(part.get("type"))
            if part.get("builtin") is True and kind in ("tool_call", "tool_call_response"):
                # pydantic-ai marks the provider's own tools (web search, code execution)
                kind = "server_" + kind
            n += 1
            if kind in ("text", "reasoning"):
                text = str(part.get("content") or "")[:_TEXT_LIMIT]
                if not text:
                    continue
                key = f"{kind}-{n}"
                out += [parts.BlockStart(key, "message" if kind == "text" else "reasoning"),
                        parts.TextDelta(key, text), parts.BlockEnd(key)]
            elif kind == "tool_call":
                out.append(parts.ToolCall(_str(part.get("id")) or f"call-{n}",
                                          _str(part.get("name")) or "tool",
                                          part.get("arguments")))
            elif kind == "server_tool_call":
                activity = _activity(part, n)
                if activity is None:
                    out.append(_artifact(part))
                    continue
                activities[activity.activity_id] = (activity.name, activity.input)
                out.append(activity)
            elif kind == "server_tool_call_response":
                ref = _str(part.get("id"))
                if ref in activities:
                    answered.add(ref)
                    name, given = activities[ref]
                    out.append(parts.Activity(ref, name, "completed", given))
                else:
                    out.append(_artifact(part))
            else:  # files, images, generic parts: kept as what this version does not read
                out.append(_artifact(part))
    for ref, (name, given) in activities.items():
        if ref not in answered and not call.failed:
            # The span ended normally: the call ran, the instrumentation sent no result.
            out.append(parts.Activity(ref, name, "completed", given,
                                      summary="no result sent"))
    if call.failed:
        out.append(parts.StreamError("error", call.error[:500] or "the call failed"))
        out.append(parts.ResponseEnd("error"))
    else:
        out.append(parts.ResponseEnd(FINISH.get(call.finish_reason)
                                     or FINISH.get(call.finish_reason.lower(), "end_turn")))
    return out


def _activity(part: dict[str, Any], n: int) -> parts.Activity | None:
    name = _str(part.get("name"))
    detail = part.get("server_tool_call")
    if isinstance(detail, dict):
        name = name or _str(detail.get("type"))
    hosted = HOSTED.get(name)
    if hosted is None:
        return None
    given: dict[str, Any] = {}
    for source in (part.get("arguments"), detail):
        if isinstance(source, dict):
            given.update({k: v for k, v in source.items() if k != "type"
                          and isinstance(v, (str, int, float, bool, list, dict))})
    action = given.pop("action", None)
    if isinstance(action, dict) and isinstance(action.get("query"), str):
        given.setdefault("query", action["query"])
    return parts.Activity(_str(part.get("id")) or f"hosted-{n}", hosted, "started", given)


def _artifact(part: dict[str, Any]) -> parts.Artifact:
    kind = _str(part.get("type")) or "part"
    name = _str(part.get("name"))
    return parts.Artifact(kind[:100], summary=f"{kind} {name}".strip()[:200])


def history(messages: list[Message]) -> list[tuple[str, str]]:
    """The request's messages as ``(role, text)``, user and agent only (as the proxy reads a
    request: system messages are no turn, a tool result is a user entry with no text)."""
    out = []
    for message in messages:
        if message.role == "agent":
            out.append(("agent", message.text))
        elif message.role in ("user", "tool"):
            out.append(("user", message.text if message.role == "user" else ""))
    return out


def tool_results(message: Message) -> list[tuple[str, str, Any]]:
    """``(call id, name, output)`` of each tool result a message carries."""
    return [(_str(p.get("id")), _str(p.get("name")), p.get("response"))
            for p in message.parts if p.get("type") == "tool_call_response"]
