"""What an importer hands back: conversations whose turns are responses for the one stream runner.

An importer reads a file someone brought (a provider recording, a VCR cassette, a chat app's data
export) and yields, one by one, ``ImportedConversation`` values (or an ``ExportDocument``, a
Turnscope export imported as it is), with a ``Problem`` for each part of the file it could not
read. It writes nothing and knows no Django: the caller runs every turn's responses through
``streams.run.assemble`` (the one stream runner and EventBuilder) and stores the result.

A turn's responses are either

* ``WireResponse``: recorded provider wire bytes, read by that provider's adapter exactly as
  ``manage.py ingest`` reads them (recordings, cassette interactions), or
* ``PartsResponse``: stream parts the importer made itself, for content that is no provider wire
  format (a chat export): the same provider-neutral parts an adapter would produce, so ranges are
  converted, checked against the text and repaired or dropped by the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from importers.jsonstream import Readable, array_elements
from providers import WireContext
from streams import parts
from streams.errors import MalformedInput


@dataclass(frozen=True, slots=True)
class WireResponse:
    """One recorded provider response, for ``provider``'s adapter."""

    name: str
    provider: str
    raw: bytes
    context: WireContext = field(default_factory=WireContext)


@dataclass(frozen=True, slots=True)
class PartsResponse:
    """One response's stream parts, made by an importer (content that is no wire format)."""

    name: str
    parts: tuple[parts.Part, ...]


Response = WireResponse | PartsResponse


@dataclass(slots=True)
class ImportedTurn:
    """A turn: a user turn's message, or an agent turn's responses (continuations after the
    first), in order."""

    role: Literal["user", "agent"]
    responses: Sequence[Response]
    created_at: datetime | None = None


@dataclass(slots=True)
class ImportedFork:
    """A branch of the conversation, kept as a fork of it.

    ``at_turn`` is the last turn it shares with the main conversation (the fork holds turns
    0..at_turn of it, then ``turns``); None when it shares none (it diverges at the first
    message).
    """

    key: str
    at_turn: int | None
    turns: list[ImportedTurn]


@dataclass(slots=True)
class ImportedConversation:
    """One conversation read from ``source``.

    ``payload`` is the exported object kept whole (a chat export's conversation), stored once
    with the conversation; ``notes`` say what was skipped or how something was read, for the
    per-file report.
    """

    source: str
    format: str
    key: str
    title: str
    turns: list[ImportedTurn]
    created_at: datetime | None = None
    payload: parts.Payload | None = None
    forks: list[ImportedFork] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    line: int | None = None
    # Every file it was read from, when more than ``source`` (a recording's continuations).
    files: tuple[str, ...] = ()


@dataclass(slots=True)
class ExportDocument:
    """A Turnscope export document: imported as it is (ids, seqs and payloads kept)."""

    source: str
    document: Any
    format: str = "turnscope"


@dataclass(slots=True)
class Problem:
    """Something in ``source`` that could not be imported (the rest of the file still is)."""

    source: str
    message: str
    line: int | None = None
    key: str = ""

    def __str__(self) -> str:
        return str(MalformedInput(self.message, line=self.line, source=self.source))

    @classmethod
    def of(cls, exc: MalformedInput, source: str, key: str = "") -> Problem:
        return cls(exc.source or source, exc.message, exc.line, key)


Item = ImportedConversation | ExportDocument | Problem


# -- helpers the importers share ------------------------------------------------------------------


def exported_conversations(stream: Readable, source: str,
                           convert: Callable[[Any, str, int], Item]) -> Iterator[Item]:
    """Every conversation of a chat app's export (one top-level array), streamed: each element
    through ``convert(element, source, line)``; an element that is not JSON is a ``Problem``
    at its line, and the others are read on."""
    for raw, line in array_elements(stream, source=source):
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            yield Problem(source, f"not JSON ({exc.msg})", line + exc.lineno - 1)
            continue
        yield convert(obj, source, line)


def message_parts(key: str, text: str) -> tuple[parts.Part, ...]:
    """A user message as stream parts: one message block holding ``text``."""
    return (parts.BlockStart(key, "message"), parts.TextDelta(key, text), parts.BlockEnd(key))


def user_turn(name: str, text: str, created_at: datetime | None = None) -> ImportedTurn:
    return ImportedTurn("user", [PartsResponse(name, message_parts("user", text))], created_at)


def timestamp(value: Any) -> datetime | None:
    """A datetime from Unix seconds or ISO 8601 text (``Z`` or an offset); None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def dict_of(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object (a dict), else an empty one."""
    return value if isinstance(value, dict) else {}


def text_of(value: Any, limit: int = 0) -> str:
    """``value`` if it is a string (clipped to ``limit`` code points when given), else ""."""
    if not isinstance(value, str):
        return ""
    return value[:limit] if limit else value
