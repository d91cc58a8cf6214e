"""A proxied Messages API request body, read (``providers.proxied``)."""

from __future__ import annotations

from typing import Any

from providers.anthropic.blocks import BLOCK, PROVIDER
from providers.proxied import ProxiedRequest, ToolResult, joined
from streams.parts import Payload


def read_request(body: dict[str, Any], api_version: str) -> ProxiedRequest:
    read = ProxiedRequest()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for message in messages:
        role = "agent" if message.get("role") == "assistant" else "user"
        read.entries.append((role, joined(message.get("content"), ("text",))))
    if not messages:
        return read
    read.last_role = "agent" if messages[-1].get("role") == "assistant" else "user"
    newest_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    if newest_user is not None:
        read.prompt_text = joined(newest_user.get("content"), ("text",))
        content = newest_user.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                output = block.get("content")
                if isinstance(output, list):
                    output = joined(output, ("text",)) or output
                read.tool_results.append(ToolResult(
                    str(block.get("tool_use_id", "")), "", output, block.get("is_error") is True,
                    Payload(PROVIDER, BLOCK, api_version, block)))
    return read
