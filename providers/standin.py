"""The recorded stand-in's provider side (``upstream.recorded`` serves recordings as a provider
would; ``upstream.served`` checks what a client sends back): each provider's ``StandIn``
(``providers/<p>/standin.py``) knows its API's paths, how its streams are framed, what a
client holds of a response it was served, and the rules a request sending that back must keep.

What a client holds is rebuilt from the wire the way a provider's SDK accumulates it,
independently of the adapters' stream parsers (which the request side relies on), so a lossy
parser or request builder is caught rather than agreed with: a stand-in never uses an adapter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson


@dataclass(frozen=True)
class Served:
    """One response's content as the client holds it: ``blocks`` in order (Anthropic content
    blocks, Responses output items, Gemini parts), and accepted variants by item id."""

    provider: str
    blocks: tuple[dict[str, Any], ...]
    variants: tuple[tuple[str, dict[str, Any]], ...] = ()
    api: str = ""  # "chat" for Chat Completions (a Responses client never sends it back)
    cut: bool = False  # the client hung up before the last byte: it holds a part of it


@dataclass(frozen=True)
class Unit:
    """One block (item, Gemini run) as compared: its canonical form, what identifies it, its
    text, and the block itself."""

    canonical: bytes
    keys: frozenset[str]
    text: str
    block: dict[str, Any]


class StandIn(Protocol):
    """A provider as the recorded stand-in serves it and checks what comes back."""

    # Whether its SSE events carry an ``event: <type>`` line (one JSON event per line is
    # framed so when the event names its ``type``).
    names_events: bool

    def serves_path(self, path: str) -> bool:
        """Whether ``path`` is one of its API's endpoints (the ones its SDK calls)."""
        ...

    def json_array(self, path: str, params: dict[str, list[str]]) -> bool:
        """Whether a stream asked for at ``path`` with ``params`` is sent as one JSON array."""
        ...

    def served(self, rows: list[Any]) -> Served | None:
        """What a client holds of a response whose wire rows are ``rows`` (None: nothing)."""
        ...

    def api(self, body: dict[str, Any]) -> str:
        """Which of its APIs a request body is for ("" for the main one)."""
        ...

    def text(self, block: dict[str, Any]) -> str:
        """The text a block shows (what a client might quote back)."""
        ...

    def sent_back(self, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
        """The request's model-side messages, each as its blocks (items, parts)."""
        ...

    def unpaired(self, body: dict[str, Any]) -> str | None:
        """A pairing rule the request breaks, whatever was served (None: none)."""
        ...

    def units(self, blocks: Iterable[dict[str, Any]]) -> list[Unit]:
        """Blocks as they are compared."""
        ...

    def whole_forms(self, blocks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """The forms a response the client holds whole may come back in."""
        ...

    def returnable(self, blocks: Iterable[dict[str, Any]], body: dict[str, Any]
                   ) -> list[dict[str, Any]]:
        """What of a served response can come back at all in a request like ``body``."""
        ...

    def recoverable(self, units: list[Unit], whole: int) -> list[Unit]:
        """What of a cut response's first ``whole`` blocks may go back."""
        ...

    def cut_piece(self, piece: Unit, served: Unit) -> bool:
        """Whether ``piece`` is what streamed of the served block a response was cut in."""
        ...

    def pairing_judges(self, block: dict[str, Any]) -> bool:
        """Whether a block is left to the pairing rule (not compared as served content)."""
        ...


class BaseStandIn:
    """What a stand-in does unless its provider says otherwise."""

    names_events = False

    def json_array(self, path: str, params: dict[str, list[str]]) -> bool:
        return False

    def api(self, body: dict[str, Any]) -> str:
        return ""

    def unpaired(self, body: dict[str, Any]) -> str | None:
        return None

    def text(self, block: dict[str, Any]) -> str:
        return ""

    def units(self, blocks: Iterable[dict[str, Any]]) -> list[Unit]:
        return [Unit(dumps(clean(b)), frozenset(keys(b)), self.text(b), b) for b in blocks]

    def whole_forms(self, blocks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        return [blocks]

    def returnable(self, blocks: Iterable[dict[str, Any]], body: dict[str, Any]
                   ) -> list[dict[str, Any]]:
        return list(blocks)

    def recoverable(self, units: list[Unit], whole: int) -> list[Unit]:
        return units[:whole]

    def pairing_judges(self, block: dict[str, Any]) -> bool:
        return False


def clean(value: Any) -> Any:
    """Null and absent are the same; key order does not matter (compared as sorted JSON)."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def keys(block: dict[str, Any]) -> set[str]:
    """What identifies a served block when it comes back."""
    found = set()
    for name in ("id", "tool_use_id", "signature", "data", "thoughtSignature",
                 "encrypted_content"):
        value = block.get(name)
        if isinstance(value, str) and value:
            found.add(f"{name}:{value}")
    for nested in ("functionCall", "toolCall", "toolResponse", "functionResponse"):
        inner = block.get(nested)
        if isinstance(inner, dict) and isinstance(inner.get("id"), str):
            found.add(f"{nested}:{inner['id']}")
    for call in block.get("tool_calls") or ():  # Chat Completions
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            found.add(f"tool_call:{call['id']}")
    return found
