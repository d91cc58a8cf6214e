"""A proxied Responses or Chat Completions request body, read (``providers.proxied``)."""

from __future__ import annotations

from typing import Any

from providers.openai.chat import CHAT_MESSAGE
from providers.openai.common import PROVIDER
from providers.openai.items import ITEM
from providers.proxied import ProxiedRequest, ToolResult, joined, trailing
from streams.parts import Payload


def read_request(body: dict[str, Any], endpoint: str) -> ProxiedRequest:
    return _chat(body) if endpoint == "chat" else _responses(body)


def _responses(body: dict[str, Any]) -> ProxiedRequest:
    read = ProxiedRequest()
    if isinstance(body.get("previous_response_id"), str):
        read.previous_response_id = body["previous_response_id"][:200]
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    items = [i for i in items or [] if isinstance(i, dict)] if isinstance(items, list) else []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role in ("user", "assistant"):
            text = joined(item.get("content"), ("input_text", "output_text", "text"))
            read.entries.append(("agent" if role == "assistant" else "user", text))
        elif kind == "function_call_output":
            read.entries.append(("user", ""))
    outputs = trailing(items, lambda i: i.get("type") == "function_call_output")
    for item in outputs:  # the outputs of the calls the last response asked for
        read.tool_results.append(ToolResult(
            str(item.get("call_id", "")), "", item.get("output"), False,
            Payload(PROVIDER, ITEM, "v1", item)))
    if not outputs:
        newest = next((i for i in reversed(items) if i.get("type", "message") == "message"
                       and i.get("role") == "user"), None)
        if newest is not None:
            read.prompt_text = joined(newest.get("content"), ("input_text", "text"))
    return read


def _chat(body: dict[str, Any]) -> ProxiedRequest:
    read = ProxiedRequest()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for message in messages:
        role = message.get("role")
        if role in ("user", "assistant"):
            text = joined(message.get("content"), ("text",))
            read.entries.append(("agent" if role == "assistant" else "user", text))
        elif role == "tool":
            read.entries.append(("user", ""))
    results = trailing(messages, lambda m: m.get("role") == "tool")
    for message in results:
        read.tool_results.append(ToolResult(
            str(message.get("tool_call_id", "")), str(message.get("name", "")),
            joined(message.get("content"), ("text",)), False,
            Payload(PROVIDER, CHAT_MESSAGE, "v1", message)))
    if not results:
        newest = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        if newest is not None:
            read.prompt_text = joined(newest.get("content"), ("text",))
    return read
