"""What a proxied request body says, as each provider's ``read_request`` reads it: the
messages as ``(role, text)`` entries, who sent the last one, the newest user message's text
and the client tool results it carries, with their native payloads.

The text is as the body has it: the proxy (``proxy.messages``) redacts and normalizes it as
the stored turns are, and decides the request's shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from streams.parts import Payload


@dataclass(frozen=True)
class ToolResult:
    """A client tool's result the newest user message carries (the host ran the tool)."""

    call_id: str
    name: str
    output: Any  # text, or the JSON value the body holds
    is_error: bool
    payload: Payload


@dataclass
class ProxiedRequest:
    """One request body, read. ``entries``: every message as ``("user" | "agent", text)``,
    a tool-result-only user message as ``("user", "")``; ``last_role``: who sent the last
    message that continues the conversation (a Gemini model message sent last is a prefill,
    so "user"); ``prompt_text``: the newest user message's text; ``tool_results``: the client
    tool results it carries."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    last_role: Literal["user", "agent"] = "user"
    prompt_text: str = ""
    tool_results: list[ToolResult] = field(default_factory=list)
    previous_response_id: str = ""  # OpenAI Responses


def joined(blocks: Any, types: tuple[str, ...]) -> str:
    """The text of the content blocks of ``types`` (a plain string is its own text)."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") in types
                   and isinstance(b.get("text"), str))


def trailing(items: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool]
             ) -> list[dict[str, Any]]:
    """The items at the end of ``items`` that pass ``test``, in order."""
    n = len(items)
    while n and test(items[n - 1]):
        n -= 1
    return items[n:]
