"""What a proxied request says about the conversation: each provider's request body (read by
the provider's own ``read_request``, ``providers/<p>/proxied.py``) made into the turns it holds.

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
from providers import registry
from providers.proxied import ToolResult
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
    """The ``Exchange`` a request body holds; a body that is not a JSON object (or is sent to
    no registered provider) holds none."""
    found = registry.find(provider)
    if not isinstance(body, dict) or found is None:
        return Exchange()
    read = found.read_request(body, endpoint, api_version, url)
    exchange = Exchange(previous_response_id=read.previous_response_id)
    exchange.prompt_text = clean(read.prompt_text)
    exchange.tool_results = [_result(result) for result in read.tool_results]
    exchange = _finish(exchange, read.entries, read.last_role, bool(exchange.prompt_text))
    if not exchange.model and isinstance(body.get("model"), str):
        exchange.model = body["model"][:200]
    return exchange


def _result(read: ToolResult) -> EventRecord:
    output = read.output
    if not isinstance(output, str):
        output = orjson.dumps(output).decode() if output is not None else ""
    result = ToolResultBody(clean(read.call_id)[:200], clean(read.name)[:200],
                            clean(output)[:RESULT_PREVIEW], read.is_error)
    payload = read.payload
    redacted = Payload(payload.provider, payload.format, payload.version,
                       redact_value(payload.value))
    return EventRecord("tool_call_response", body=result, payload=redacted)


def _finish(exchange: Exchange, entries: list[tuple[str, str]], last_role: str,
            last_has_text: bool) -> Exchange:
    exchange.history = normalize((role, clean(text)) for role, text in entries)
    if last_role == "agent":
        exchange.shape = "pause_turn"
        exchange.tool_results = []
    elif exchange.tool_results and not last_has_text:
        exchange.shape = "tool_result"
    return exchange
