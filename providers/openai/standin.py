"""OpenAI as the recorded stand-in serves it (``providers.standin``).

What the client holds: Responses: each ``response.output_item.done`` item (a body: ``output``);
the item the final ``response.completed`` holds for the same id is accepted too. Chat
Completions: the assistant message (its content and tool calls; annotations are output only),
the deltas put together.

After a cut (Responses): its first output items as done, then at most the text that streamed
of the message it was cut in; a reasoning item whose following item never came is left out
(the API refuses "Item 'rs_…' of type 'reasoning' was provided without its required following
item"; the reasoning guide: reasoning items of earlier turns are dropped anyway).

Every request keeps the reasoning items' pairing with what follows them, and (``store``
false) cannot name reasoning that was never kept without its ``encrypted_content``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from providers.openai.common import PROVIDER
from providers.standin import BaseStandIn, Served, Unit

CHAT = "chat"


class OpenAIStandIn(BaseStandIn):
    names_events = True  # Responses events name their type (Chat Completions chunks do not)

    def serves_path(self, path: str) -> bool:
        return "/responses" in path or "/chat/completions" in path

    def served(self, rows: list[Any]) -> Served | None:
        if any(isinstance(r, dict) and str(r.get("object", "")).startswith("chat.completion")
               for r in rows):
            return _chat(rows)
        return _responses(rows)

    def api(self, body: dict[str, Any]) -> str:
        return CHAT if isinstance(body.get("messages"), list) else ""

    def text(self, block: dict[str, Any]) -> str:
        content = block.get("content")
        if isinstance(content, str):  # an easy input message: text alone
            return content
        return "".join(c.get("text", "") for c in content or ()
                       if isinstance(c, dict) and c.get("type") in ("output_text", "input_text"))

    def sent_back(self, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
        if isinstance(body.get("messages"), list):  # Chat Completions: each assistant message
            return [[{k: v for k, v in m.items() if k in ("role", "content", "tool_calls")}
                     for m in body["messages"]
                     if isinstance(m, dict) and m.get("role") == "assistant"]]
        items = body.get("input")
        if not isinstance(items, list):
            return []
        return [[i for i in items if isinstance(i, dict) and i.get("role") != "user"]]

    def unpaired(self, body: dict[str, Any]) -> str | None:
        if isinstance(body.get("input"), list):
            return _unpaired(body["input"], body.get("store"))
        return None

    def recoverable(self, units: list[Unit], whole: int) -> list[Unit]:
        prefix = units[:whole]
        while prefix and prefix[-1].block.get("type") == "reasoning":
            prefix = prefix[:-1]
        return prefix

    def cut_piece(self, piece: Unit, served: Unit) -> bool:
        if not piece.text:
            return False
        block, whole = piece.block, served.block
        return (whole.get("type") == "message" and block.get("role") == "assistant"
                and block.get("type") in (None, "message")
                and self.text(whole).startswith(piece.text))

    def returnable(self, blocks: Iterable[dict[str, Any]], body: dict[str, Any]
                   ) -> list[dict[str, Any]]:
        """With ``store`` false, a reasoning item without its ``encrypted_content`` cannot come
        back (nothing upstream holds it; the reasoning guide: earlier turns' reasoning is
        dropped anyway)."""
        if body.get("store") is False:
            return [b for b in blocks
                    if b.get("type") != "reasoning" or b.get("encrypted_content")]
        return list(blocks)


def _responses(rows: list[Any]) -> Served | None:
    done: list[dict[str, Any]] = []
    final: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        kind = row.get("type")
        if kind == "response.output_item.done" and isinstance(row.get("item"), dict):
            done.append(row["item"])
        elif kind in ("response.completed", "response.incomplete"):
            final = [i for i in (row.get("response") or {}).get("output") or ()
                     if isinstance(i, dict)]
        elif row.get("object") == "response":  # a body
            final = [i for i in row.get("output") or () if isinstance(i, dict)]
    blocks = done or final
    if not blocks:
        return None
    variants = tuple((str(item.get("id")), item) for item in final if done and item.get("id"))
    return Served(PROVIDER, tuple(blocks), variants)


def _chat(rows: list[Any]) -> Served | None:
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for row in rows:
        choices = row.get("choices") if isinstance(row, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(first, dict):
            continue
        message = first.get("message") or first.get("delta") or {}
        if isinstance(message.get("content"), str):
            content.append(message["content"])
        for n, call in enumerate(message.get("tool_calls") or ()):
            index = call.get("index", n)
            known = calls.setdefault(index, {"type": "function", "function": {
                "name": "", "arguments": ""}})
            if call.get("id"):
                known["id"] = call["id"]
            function = call.get("function") or {}
            known["function"]["name"] += function.get("name") or ""
            known["function"]["arguments"] += function.get("arguments") or ""
    reply: dict[str, Any] = {"role": "assistant"}
    if "".join(content):
        reply["content"] = "".join(content)
    if calls:
        reply["tool_calls"] = [calls[i] for i in sorted(calls)]
    if len(reply) == 1:
        return None
    return Served(PROVIDER, (reply,), api=CHAT)


def _unpaired(items: list[Any], store: Any) -> str | None:
    for n, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        following = items[n + 1] if n + 1 < len(items) else None
        if not isinstance(following, dict) or following.get("role") in ("user", "system",
                                                                          "developer"):
            return (f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item.")
        if store is False and not item.get("encrypted_content"):
            return (f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                    "`store` is set to false.")
    return None
