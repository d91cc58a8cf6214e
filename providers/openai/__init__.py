"""OpenAI adapter: the Responses API (``responses``) and Chat Completions (``chat``), streams
and non-streaming bodies. A later ``request`` module builds the next request from stored turns.

The wire is detected per response: Responses stream events carry ``type: "response.*"`` (or
``error``), a Responses body has ``object: "response"``; Chat Completions chunks and bodies carry
``object: "chat.completion.chunk"`` / ``"chat.completion"`` (OpenRouter and other compatible
gateways speak the same shape).

Provenance: ``ResponseStart.provider`` is "openai" unless the response shows another service
served it (OpenRouter, see ``chat``). Azure responses name no provider, so they are "openai" too;
the endpoint is not consulted, because provenance is read from the response. ``model`` is
``response.model`` / the chunk's ``model``.

Payload version: "v1", plus each hosted tool type the response (or the request) declares, e.g.
"v1+web_search_preview" or "v1+openrouter:web_search".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from providers.openai import chat, items
from providers.openai.chat import Chat
from providers.openai.common import API_VERSION, ERROR, PROVIDER, check_error
from providers.openai.responses import Responses
from providers.protocol import BodyParser, ResponseParser, WireContext, parse_rows
from providers.values import as_str
from providers.wire import Row, WireInput, WireKind
from streams.errors import MalformedInput
from streams.parts import Part

FORMATS = (items.ITEM, items.ANNOTATION, ERROR, *chat.FORMATS)


def _is_chat(data: Any) -> bool:
    return isinstance(data, dict) and data.get("object") in (
        "chat.completion.chunk",
        "chat.completion",
    )


def parser(context: WireContext, kind: WireKind, first: Row) -> ResponseParser:
    """The parser for one response, from its first row: Responses or Chat Completions."""
    line, data, _ = first
    if kind == "body":
        return _body_parser(context, data, line)
    if _is_chat(data) or (
        # a Chat Completions stream may open with a bare {"error": ...} chunk (OpenRouter)
        isinstance(data, dict)
        and "type" not in data
        and ("choices" in data or isinstance(data.get("error"), dict))
    ):
        return Chat(context)
    event = data.get("type") if isinstance(data, dict) else None
    if not isinstance(event, str) or not (event.startswith("response.") or event == "error"):
        shown = f"type {event!r}" if isinstance(event, str) else "no 'type'"
        raise MalformedInput(
            f"not an OpenAI stream: the first event has {shown} (expected a 'response.*' "
            "event or a Chat Completions chunk)",
            line=line,
        )
    return Responses(context)


def _body_parser(context: WireContext, data: dict[str, Any], line: int) -> ResponseParser:
    if data.get("object") == "response" or isinstance(data.get("output"), list):
        return BodyParser(Responses(context).body)
    if data.get("object") == "chat.completion" or (
        "choices" in data and data.get("object") != "chat.completion.chunk"
    ):
        return BodyParser(Chat(context).body)
    if _is_chat(data):
        return Chat(context)  # a single saved chunk
    if as_str(data.get("type")).startswith("response."):
        return Responses(context)  # a single saved event
    if isinstance(data.get("error"), dict):
        error = data["error"]
        raise MalformedInput(
            f"an OpenAI error body ({as_str(error.get('code')) or as_str(error.get('type'))}: "
            f"{as_str(error.get('message'))[:120]}), not a response",
            line=line,
        )
    shown = f"type {data['type']!r}" if isinstance(data.get("type"), str) else "no 'object'"
    raise MalformedInput(
        f"not an OpenAI response body ({shown}; expected object 'response' or "
        "'chat.completion')",
        line=line,
    )


def parse(wire: WireInput, context: WireContext) -> Iterator[Part]:
    """Translate an OpenAI (or OpenAI-compatible) response into stream parts."""
    return parse_rows(parser, wire, context)


def decode(payload_value: dict[str, Any], format: str) -> None:
    """Raise ValueError when a stored payload of ``format`` cannot be read by this adapter."""
    if format not in FORMATS:
        raise ValueError(f"unknown openai payload format {format!r}")
    if not isinstance(payload_value, dict):
        raise ValueError(f"{format}: the value must be a JSON object")
    if format in items.FORMATS:
        items.check_payload(payload_value, format)
    elif format == ERROR:
        check_error(payload_value, format)
    else:
        chat.check_payload(payload_value, format)


__all__ = ["API_VERSION", "FORMATS", "PROVIDER", "decode", "parse", "parser"]
