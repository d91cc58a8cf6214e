"""A proxied generateContent request body, read (``providers.proxied``)."""

from __future__ import annotations

from typing import Any

from providers.google.common import PART, PROVIDER
from providers.proxied import ProxiedRequest, ToolResult
from streams.parts import Payload


def _text(content: dict[str, Any]) -> str:
    parts = content.get("parts")
    if not isinstance(parts, list):
        return ""
    return "".join(p["text"] for p in parts if isinstance(p, dict)
                   and isinstance(p.get("text"), str) and not p.get("thought"))


def read_request(body: dict[str, Any], version: str) -> ProxiedRequest:
    read = ProxiedRequest()
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    contents = [c for c in contents or [] if isinstance(c, dict)]
    for content in contents:
        role = "agent" if content.get("role") == "model" else "user"
        read.entries.append((role, _text(content)))
    if not contents:
        return read
    newest_user = next((c for c in reversed(contents) if c.get("role", "user") == "user"), None)
    if newest_user is not None:
        read.prompt_text = _text(newest_user)
        for part in newest_user.get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"]
                read.tool_results.append(ToolResult(
                    str(response.get("id", "")), str(response.get("name", "")),
                    response.get("response"), False, Payload(PROVIDER, PART, version, part)))
    # A model turn sent last is a prefill, not a continuation: ``last_role`` stays "user".
    return read
