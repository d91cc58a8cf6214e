"""Where a live turn's parts come from, and how fast they arrive.

A source is a list of responses (a turn may span several: ``pause_turn`` and its continuation),
each an iterable of stream parts. ``wire_responses`` reads a recording through the provider's
adapter, exactly as ingest does. ``event_responses`` rebuilds a part stream from a stored turn
(its native payloads included) for turns that have no recording.

Recordings carry no timestamps, so the "recorded pace" is estimated per part from what a
provider takes to produce it: text at ``CHARS_PER_SECOND``, a hosted search ``SEARCH_SECONDS``
between its start and its result, ``FIRST_BYTE_SECONDS`` before a response starts.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

import providers
from conversations.models import Event, Turn
from guards import redaction
from streams import parts
from streams.bodies import ActivityBody, ErrorBody, MessageBody, ReasoningBody, ToolCallBody

CHARS_PER_SECOND = 90.0
SEARCH_SECONDS = 1.4
FIRST_BYTE_SECONDS = 0.5
MIN_STEP = 0.004
BEHIND = 0.25  # seconds a paced source may fall behind its pace before it stops catching up


@dataclass(frozen=True)
class WireResponse:
    name: str
    raw: str
    api_version: str | None = None
    endpoint: str | None = None
    request: dict[str, Any] | None = None
    served_by: str | None = None  # the service it was sent to, when known (``WireContext``)

    def context(self) -> providers.WireContext:
        return providers.WireContext(
            api_version=self.api_version, request=self.request, endpoint=self.endpoint,
            served_by=self.served_by,
        )

    def as_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "raw": self.raw, "api_version": self.api_version,
               "endpoint": self.endpoint, "request": self.request}
        if self.served_by:
            out["served_by"] = self.served_by
        return out


def pace(part: parts.Part) -> float:
    """Seconds a provider would plausibly take to produce ``part`` (at speed 1)."""
    if isinstance(part, parts.TextDelta):
        return max(MIN_STEP, len(part.text) / CHARS_PER_SECOND)
    if isinstance(part, parts.ResponseStart):
        return FIRST_BYTE_SECONDS
    if isinstance(part, parts.Activity):
        return SEARCH_SECONDS if part.state != "started" else 0.15
    if isinstance(part, parts.BlockStart | parts.BlockEnd | parts.Citation | parts.Usage):
        return MIN_STEP
    return 0.05


class Pace:
    """When a recording's parts are due at ``speed`` times the recorded pace (0 or less: at
    once). A source held up (a slow write) catches up by at most ``BEHIND`` seconds: after a
    stall the parts do not all come in one burst."""

    def __init__(self, speed: float) -> None:
        self.speed = speed if speed and speed > 0 else float("inf")
        self.due: float | None = None  # the event loop's time the last part was due

    def after(self, seconds: float, now: float) -> float:
        """When the next part, ``seconds`` (at speed 1) after the last, is due."""
        if self.due is None:
            self.due = now
        if self.speed != float("inf"):
            self.due = max(self.due, now - BEHIND) + seconds / self.speed
        return self.due

    async def wait(self, seconds: float) -> None:
        """Until the next part, ``seconds`` (at speed 1) after the last, is due."""
        now = asyncio.get_running_loop().time()
        due = self.after(seconds, now)
        if due - now > 0.001:
            await asyncio.sleep(due - now)


def redacted(responses: list[WireResponse]) -> list[WireResponse]:
    """The responses with credential-shaped text removed, before anything parses or keeps them
    (as ingest does): streamed deltas, events and the kept recording are all redacted, a key
    split across stream events too (``redact_wire``)."""
    return [WireResponse(r.name, redaction.redact_wire(r.raw), r.api_version, r.endpoint,
                         r.request, r.served_by) for r in responses]


def wire_responses(provider: str, responses: list[WireResponse]) -> list[Iterator[parts.Part]]:
    """Adapter-parsed part streams, one per recorded response (parsed lazily, in order, one
    event at a time)."""
    providers.adapter(provider)  # fail early on an unknown provider
    return [providers.parse_incrementally(provider, r.raw.encode(), r.context())
            for r in responses]


_PIECE = re.compile(r"\S+\s*|\s+")


def split_text(text: str, words: int = 3) -> list[str]:
    """Text in word-sized pieces, as a provider would stream it ("".join gives it back)."""
    pieces = _PIECE.findall(text)
    return ["".join(pieces[i:i + words]) for i in range(0, len(pieces), words)] or [text]


def _payload(row: Any) -> parts.Payload | None:
    if row is None:
        return None
    return parts.Payload(row.provider, row.format, row.version, orjson.loads(row.value))


def event_responses(turn: Turn, until_seq: int | None = None) -> list[Iterable[parts.Part]]:
    """A part stream that rebuilds ``turn``'s events (up to ``until_seq`` when given) through
    the EventBuilder: text blocks split into deltas, citations with their code-point ranges,
    activities, tool calls and artifacts as they were. An incomplete block is left open, so the
    live replay ends the same way (interrupted) when the original did."""
    found = Event.objects.filter(turn=turn)
    if until_seq is not None:
        found = found.filter(seq__lte=until_seq)
    events = list(
        found.order_by("seq").select_related("payload").prefetch_related("attributions__replay")
    )
    return [_parts_from_events(turn, events)]


def _parts_from_events(turn: Turn, events: list[Event]) -> Iterator[parts.Part]:
    if turn.provider and turn.model:
        yield parts.ResponseStart(turn.provider, turn.model)
    cut = False
    for n, event in enumerate(events):
        body = event.typed_body
        payload = _payload(event.payload)
        key = f"replay-{n}"
        if isinstance(body, MessageBody | ReasoningBody):
            redacted = isinstance(body, ReasoningBody) and body.redacted
            yield parts.BlockStart(key, body.kind, redacted=redacted,
                                   payload=payload if redacted else None)
            for a in event.attributions.all() if isinstance(body, MessageBody) else []:
                yield parts.Citation(key, a.url, a.title, a.excerpt, a.range_start, a.range_end,
                                     replay=_payload(a.replay), integrity=a.integrity,
                                     pages=None if a.page_first is None
                                     else (a.page_first, a.page_last))
            if not redacted:
                for piece in split_text(event.text):
                    yield parts.TextDelta(key, piece)
            if event.incomplete:
                cut = True
                continue
            yield parts.BlockEnd(key, payload)
        elif isinstance(body, ActivityBody):
            yield parts.Activity(
                body.id, body.name, body.state or "started", input=dict(body.input),
                summary=body.summary,
                sources=None if body.sources is None else tuple(dict(s) for s in body.sources),
                error_code=body.error_code or "", payload=payload,
            )
        elif isinstance(body, ToolCallBody):
            yield parts.ToolCall(body.id, body.name, body.arguments, payload=payload)
        elif isinstance(body, ErrorBody):
            yield parts.StreamError(body.code, body.message, payload=payload)
        else:
            yield parts.Artifact(body.type, body.summary, display_html=body.display_html or "",
                                 payload=payload)
    if not cut and turn.status != Turn.Status.INTERRUPTED and turn.end_reason:
        yield parts.ResponseEnd(turn.end_reason)
