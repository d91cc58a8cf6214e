"""What a proxied request says about the conversation: each provider's request body read into
the turns it holds.

* ``history``: the request's messages as ``(role, text)`` turns ("user" / "agent"), normalized as
  the stored turns are (``stored_history``): system messages left out, tool-result-only user
  messages are no turn of their own (a tool round continues the agent turn), consecutive agent
  messages are one agent turn, text as the store keeps it (redacted, no NUL). Equal histories
  mean the request continues that conversation.
* ``prompt``: the newest user message as the user turn's events: its text, and each client
  tool result as a ``tool_call_response`` event (the host dispatched the tool).
* ``shape``: ``"prompt"`` (a new user message), ``"pause_turn"`` (Anthropic: the paused
  assistant message is sent back) or ``"tool_result"`` (the newest message only answers tool
  calls); the latter two continue the last agent turn when it ended that way.

This module produces ``tool_call_response`` events (registered here, as vocabularies are).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from guards.redaction import redact_text, redact_value
from providers.anthropic.blocks import BLOCK as ANTHROPIC_BLOCK
from providers.anthropic.blocks import DEFAULT_API_VERSION as ANTHROPIC_VERSION
from providers.google.common import PART as GOOGLE_PART
from providers.google.common import api_version as google_api_version
from providers.openai.chat import CHAT_MESSAGE as OPENAI_CHAT_MESSAGE
from providers.openai.items import ITEM as OPENAI_ITEM
from streams.bodies import ToolResultBody
from streams.builder import EventRecord, storable
from streams.parts import Payload
from streams.registries import EVENT_KINDS

EVENT_KINDS.register("tool_call_response", producer=__name__)

Shape = Literal["prompt", "pause_turn", "tool_result"]
History = list[tuple[str, str]]
RESULT_PREVIEW = 4000  # characters of a tool result kept in the portable body


@dataclass
class Exchange:
    """What one request body holds, read for recording."""

    history: History = field(default_factory=list)  # every message, normalized
    prompt_text: str = ""  # the newest user message's text
    tool_results: list[EventRecord] = field(default_factory=list)  # of the newest user message
    shape: Shape = "prompt"
    model: str = ""  # the model the request asked for (never provenance: that is the response's)
    previous_response_id: str = ""  # OpenAI Responses

    @property
    def prompt(self) -> list[EventRecord]:
        """The user turn's events: the text, then the tool results."""
        records = [EventRecord("message", text=self.prompt_text)] if self.prompt_text else []
        return records + self.tool_results

    @property
    def before_prompt(self) -> History:
        """The history before the newest user message (what a new prompt continues)."""
        history = self.history
        if self.shape == "prompt" and history and history[-1][0] == "user":
            return history[:-1]
        return history


def history_key(history: History) -> str:
    """The key two equal histories share."""
    return hashlib.sha256(orjson.dumps(history)).hexdigest()


def clean(text: str) -> str:
    return storable(redact_text(text))


def normalize(entries: Iterable[tuple[str, str]]) -> History:
    """``(role, text)`` entries as turns: empty user entries dropped, agent entries in a row
    joined (one agent turn may span several responses)."""
    out: History = []
    for role, text in entries:
        if role == "user" and not text:
            continue
        if role == "agent" and out and out[-1][0] == "agent":
            out[-1] = ("agent", out[-1][1] + text)
            continue
        out.append((role, text))
    return out


def read(provider: str, endpoint: str, body: Any, api_version: str | None = None,
         url: str = "") -> Exchange:
    """The ``Exchange`` a request body holds; a body that is not a JSON object holds none."""
    if not isinstance(body, dict):
        return Exchange()
    if provider == "anthropic":
        exchange = _anthropic(body, api_version or ANTHROPIC_VERSION)
    elif provider == "openai" and endpoint == "chat":
        exchange = _chat(body)
    elif provider == "openai":
        exchange = _responses(body)
    elif provider == "google":
        exchange = _google(body, google_api_version(url))
    else:
        return Exchange()
    if not exchange.model and isinstance(body.get("model"), str):
        exchange.model = body["model"][:200]
    return exchange


def _result(call_id: str, name: str, output: Any, is_error: bool, payload: Payload
            ) -> EventRecord:
    if not isinstance(output, str):
        output = orjson.dumps(output).decode() if output is not None else ""
    result = ToolResultBody(clean(call_id)[:200], clean(name)[:200],
                            clean(output)[:RESULT_PREVIEW], is_error)
    redacted = Payload(payload.provider, payload.format, payload.version,
                       redact_value(payload.value))
    return EventRecord("tool_call_response", body=result, payload=redacted)


def _joined(blocks: Any, types: tuple[str, ...]) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") in types
                   and isinstance(b.get("text"), str))


def _finish(exchange: Exchange, entries: list[tuple[str, str]], last_role: str,
            last_has_text: bool) -> Exchange:
    exchange.history = normalize((role, clean(text)) for role, text in entries)
    if last_role == "agent":
        exchange.shape = "pause_turn"
        exchange.tool_results = []
    elif exchange.tool_results and not last_has_text:
        exchange.shape = "tool_result"
    return exchange


# -- Anthropic Messages ------------------------------------------------------------------------


def _anthropic(body: dict[str, Any], api_version: str) -> Exchange:
    exchange = Exchange()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    entries: list[tuple[str, str]] = []
    for message in messages:
        role = "agent" if message.get("role") == "assistant" else "user"
        entries.append((role, _joined(message.get("content"), ("text",))))
    if not messages:
        return exchange
    last = messages[-1]
    last_role = "agent" if last.get("role") == "assistant" else "user"
    newest_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    if newest_user is not None:
        exchange.prompt_text = clean(_joined(newest_user.get("content"), ("text",)))
        content = newest_user.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                payload = Payload("anthropic", ANTHROPIC_BLOCK, api_version, block)
                output = block.get("content")
                if isinstance(output, list):
                    output = _joined(output, ("text",)) or output
                exchange.tool_results.append(_result(
                    str(block.get("tool_use_id", "")), "", output, block.get("is_error") is True,
                    payload))
    return _finish(exchange, entries, last_role, bool(exchange.prompt_text))


# -- OpenAI Responses and Chat Completions -----------------------------------------------------


def _responses(body: dict[str, Any]) -> Exchange:
    exchange = Exchange()
    if isinstance(body.get("previous_response_id"), str):
        exchange.previous_response_id = body["previous_response_id"][:200]
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    items = [i for i in items or [] if isinstance(i, dict)] if isinstance(items, list) else []
    entries: list[tuple[str, str]] = []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role in ("user", "assistant"):
            text = _joined(item.get("content"), ("input_text", "output_text", "text"))
            entries.append(("agent" if role == "assistant" else "user", text))
        elif kind == "function_call_output":
            entries.append(("user", ""))
    trailing = _trailing(items, lambda i: i.get("type") == "function_call_output")
    for item in trailing:  # the outputs of the calls the last response asked for
        payload = Payload("openai", OPENAI_ITEM, "v1", item)
        exchange.tool_results.append(_result(
            str(item.get("call_id", "")), "", item.get("output"), False, payload))
    if not trailing:
        newest = next((i for i in reversed(items) if i.get("type", "message") == "message"
                       and i.get("role") == "user"), None)
        if newest is not None:
            exchange.prompt_text = clean(_joined(newest.get("content"), ("input_text", "text")))
    return _finish(exchange, entries, "user", bool(exchange.prompt_text))


def _trailing(items: list[dict[str, Any]], test: Any) -> list[dict[str, Any]]:
    """The items at the end of ``items`` that pass ``test``, in order."""
    n = len(items)
    while n and test(items[n - 1]):
        n -= 1
    return items[n:]


def _chat(body: dict[str, Any]) -> Exchange:
    exchange = Exchange()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    entries: list[tuple[str, str]] = []
    for message in messages:
        role = message.get("role")
        if role in ("user", "assistant"):
            text = _joined(message.get("content"), ("text",))
            entries.append(("agent" if role == "assistant" else "user", text))
        elif role == "tool":
            entries.append(("user", ""))
    trailing = _trailing(messages, lambda m: m.get("role") == "tool")
    for message in trailing:
        payload = Payload("openai", OPENAI_CHAT_MESSAGE, "v1", message)
        exchange.tool_results.append(_result(
            str(message.get("tool_call_id", "")), str(message.get("name", "")),
            _joined(message.get("content"), ("text",)), False, payload))
    if not trailing:
        newest = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        if newest is not None:
            exchange.prompt_text = clean(_joined(newest.get("content"), ("text",)))
    return _finish(exchange, entries, "user", bool(exchange.prompt_text))


# -- Gemini --------------------------------------------------------------------------------------


def _gemini_text(content: dict[str, Any]) -> str:
    parts = content.get("parts")
    if not isinstance(parts, list):
        return ""
    return "".join(p["text"] for p in parts if isinstance(p, dict)
                   and isinstance(p.get("text"), str) and not p.get("thought"))


def _google(body: dict[str, Any], version: str) -> Exchange:
    exchange = Exchange()
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    contents = [c for c in contents or [] if isinstance(c, dict)]
    entries: list[tuple[str, str]] = []
    for content in contents:
        role = "agent" if content.get("role") == "model" else "user"
        entries.append((role, _gemini_text(content)))
    if not contents:
        return exchange
    last = contents[-1]
    last_role = "agent" if last.get("role") == "model" else "user"
    newest_user = next((c for c in reversed(contents) if c.get("role", "user") == "user"), None)
    if newest_user is not None:
        exchange.prompt_text = clean(_gemini_text(newest_user))
        for part in newest_user.get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"]
                payload = Payload("google", GOOGLE_PART, version, part)
                exchange.tool_results.append(_result(
                    str(response.get("id", "")), str(response.get("name", "")),
                    response.get("response"), False, payload))
    if last_role == "agent":  # a model turn sent last is a prefill, not a continuation
        last_role = "user"
    return _finish(exchange, entries, last_role, bool(exchange.prompt_text))
