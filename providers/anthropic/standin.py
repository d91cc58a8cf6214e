"""Anthropic as the recorded stand-in serves it (``providers.standin``).

What the client holds: ``message.content`` (a body, or what ``message_start`` holds), then each
streamed block from its ``content_block_start`` with its deltas applied (text, thinking,
signature, citations, tool input JSON). A text block with no text and no citations is no
content. A stream cut before ``message_stop`` gave the client no whole message: nothing is
checked.

After a cut ("Streaming messages" > "Error recovery", platform.claude.com: "Tool use and
extended thinking blocks cannot be partially recovered. You can resume streaming from the most
recent text block"): its first blocks whole and unchanged, then at most the text that streamed
of the text block it was cut in. A server tool use whose result never came is left out
("Server tools": the result block follows the ``server_tool_use`` in the same assistant turn);
a thinking block cut before its signature is not a whole block.

The pairing rule holds for every request ("Each `tool_use` block must have a corresponding
`tool_result` block in the next message"; a ``server_tool_use``'s result in the same
message): only the last message may hold a server tool use left open (a ``pause_turn``
continuation).
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.anthropic.blocks import PROVIDER
from providers.standin import BaseStandIn, Served, Unit, clean

_CLIENT_TOOL_USE = "tool_use"
_SERVER_TOOL_USES = ("server_tool_use", "mcp_tool_use")


class AnthropicStandIn(BaseStandIn):
    names_events = True  # every event names its type

    def serves_path(self, path: str) -> bool:
        return path.endswith("/messages") or "/messages/" in path

    def served(self, rows: list[Any]) -> Served | None:
        blocks = _content(rows)
        return Served(PROVIDER, tuple(blocks)) if blocks is not None else None

    def text(self, block: dict[str, Any]) -> str:
        return str(block.get("text") or "") if block.get("type") == "text" else ""

    def sent_back(self, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
        return [[b for b in m.get("content") or () if isinstance(b, dict)]
                for m in body.get("messages") or ()
                if isinstance(m, dict) and m.get("role") == "assistant"
                and isinstance(m.get("content"), list)]

    def unpaired(self, body: dict[str, Any]) -> str | None:
        if isinstance(body.get("messages"), list):
            return _unpaired(body["messages"])
        return None

    def recoverable(self, units: list[Unit], whole: int) -> list[Unit]:
        # a client tool use is the pairing rule's to judge
        prefix = units[:whole]
        answered = {u.block.get("tool_use_id") for u in prefix}
        return [u for u in prefix if u.block.get("type") not in (
            _CLIENT_TOOL_USE, *_SERVER_TOOL_USES) or u.block.get("id") in answered]

    def cut_piece(self, piece: Unit, served: Unit) -> bool:
        if not piece.text:
            return False
        block, whole = piece.block, served.block
        cited = block.get("citations") or []
        return (block.get("type") == whole.get("type") == "text"
                and set(block) <= {"type", "text", "citations", "cache_control"}
                and str(whole.get("text", "")).startswith(piece.text)
                and clean(cited) == clean((whole.get("citations") or [])[:len(cited)]))

    def pairing_judges(self, block: dict[str, Any]) -> bool:
        return block.get("type") == _CLIENT_TOOL_USE

    def whole_forms(self, blocks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """As served, and also without the tool uses nothing answers (a paused answer followed
        by a user message, not continued; a client tool call the next message does not
        answer): the pairing rule says which of the two fits."""
        # a client tool use is answered in the next message, if at all (the pairing rule judges)
        answered = {b.get("tool_use_id") for b in blocks}
        closed = [b for b in blocks if b.get("type") != _CLIENT_TOOL_USE and (
            b.get("type") not in _SERVER_TOOL_USES or b.get("id") in answered)]
        return [blocks, closed] if len(closed) != len(blocks) else [blocks]


def _content(rows: list[Any]) -> list[dict[str, Any]] | None:
    blocks: dict[int, dict[str, Any]] = {}
    json_input: dict[int, str] = {}
    whole: list[dict[str, Any]] = []
    seen = False
    for row in rows:
        if not isinstance(row, dict):
            continue
        kind = row.get("type")
        if kind == "message":
            seen = True
            whole = [b for b in row.get("content") or () if isinstance(b, dict)]
        elif kind == "message_stop":
            seen = True
        elif kind == "message_start":
            message = row.get("message") or {}
            whole = [b for b in message.get("content") or () if isinstance(b, dict)]
        elif kind == "content_block_start":
            blocks[row["index"]] = dict(row["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[row["index"]], row.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif dtype == "citations_delta":
                block["citations"] = [*(block.get("citations") or ()), delta.get("citation")]
            elif dtype == "input_json_delta":
                json_input[row["index"]] = (json_input.get(row["index"], "")
                                            + delta.get("partial_json", ""))
    if not seen:
        return None
    for index, raw in json_input.items():
        if raw.strip():
            blocks[index]["input"] = orjson.loads(raw)
    content = [*whole, *(blocks[i] for i in sorted(blocks))]
    return [b for b in content
            if not (b.get("type") == "text" and not b.get("text") and not b.get("citations"))]


def _unpaired(messages: list[Any]) -> str | None:
    # "Each `tool_use` block must have a corresponding `tool_result` block in the next
    # message" (the API's words); a server tool's result follows it in the same assistant
    # message, unless that message is the last (a pause_turn continuation) or also calls a
    # client tool, whose result makes the API run it ("Server tools", platform.claude.com).
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
        if n == len(messages) - 1:
            continue
        after = messages[n + 1] if isinstance(messages[n + 1], dict) else {}
        answered = {b.get("tool_use_id") for b in after.get("content") or ()
                    if isinstance(b, dict) and b.get("type") == "tool_result"}
        here = {b.get("tool_use_id") for b in blocks if b.get("tool_use_id")}
        calls_client = any(b.get("type") == _CLIENT_TOOL_USE for b in blocks)
        for block in blocks:
            kind, ident = block.get("type"), block.get("id")
            if kind == _CLIENT_TOOL_USE and ident not in answered:
                return (f"messages.{n}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {ident}")
            if kind in _SERVER_TOOL_USES and ident not in here and not calls_client:
                return (f"messages.{n}: the `{kind}` {ident} has no result in its message "
                        "(only the last message may leave a server tool use open)")
    return None
