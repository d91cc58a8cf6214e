"""The one assembler: provider-neutral stream parts in, events out.

``EventBuilder`` knows no provider and no database. It accumulates streaming blocks, flushes an
event when a block ends, appends hosted-activity transitions as their own events (linked by the
provider's id, across responses of the same turn), and on interruption commits the partial text
of open blocks as incomplete events carrying the citations received so far.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streams import parts, ranges
from streams.bodies import (
    ACTIVITY_STATES,
    MESSAGE,
    ActivityBody,
    ArtifactBody,
    Body,
    ErrorBody,
    ReasoningBody,
    RefusalBody,
    ToolCallBody,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS, EVENT_KINDS, TRIGGERS

log = logging.getLogger("turnscope.builder")

_PRODUCER = __name__
for _kind in (
    "message", "reasoning", "hosted_activity", "tool_call_request", "provider_artifact", "error",
    "refusal",
):
    EVENT_KINDS.register(_kind, producer=_PRODUCER)
END_REASONS.register("interrupted", producer=_PRODUCER)
END_REASONS.register("error", producer=_PRODUCER)


@dataclass
class AttributionRecord:
    url: str
    title: str = ""
    excerpt: str = ""
    start: int | None = None
    end: int | None = None
    incomplete: bool = False
    replay: parts.Payload | None = None
    # What ingest did with the provider's range (``streams.ranges``: exact, repaired, dropped),
    # NO_SOURCE for a citation that names no source, "" when there was nothing to check.
    integrity: str = ""
    # The cited pages of the source document, (first, last), 1-based and inclusive, or None.
    pages: tuple[int, int] | None = None


# A citation whose marker points at no source the response contains (no URL, no title).
NO_SOURCE = "no_source"
INTEGRITY = (ranges.EXACT, ranges.REPAIRED, ranges.DROPPED, NO_SOURCE)


@dataclass
class EventRecord:
    """An event ready to be appended: portable fields plus the native payload. ``body`` is
    the kind's typed body (``streams.bodies``), of the same kind; the store derives its
    columns (e.g. the activity id) from it."""

    kind: str
    text: str = ""
    incomplete: bool = False
    body: Body = MESSAGE
    attributions: list[AttributionRecord] = field(default_factory=list)
    payload: parts.Payload | None = None


class _Block:
    __slots__ = ("chunks", "citations", "kind", "payload", "redacted")

    def __init__(self, kind: str, redacted: bool, payload: parts.Payload | None) -> None:
        self.kind = kind
        self.redacted = redacted
        self.payload = payload
        self.chunks: list[str] = []
        self.citations: list[parts.Citation] = []

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class TurnOutcome:
    status: str = "streaming"
    end_reason: str = ""


class EventBuilder:
    """Assemble one turn's events from the parts of one or more provider responses."""

    def __init__(self) -> None:
        self.provider = ""
        self.model = ""
        self.outcome = TurnOutcome()
        self.usage: Counter[str] = Counter()
        self.responses: list[dict[str, str]] = []
        self._blocks: dict[str, _Block] = {}
        # activity id -> {"name", "state", "input"}: lets a later response close an activity
        # that an earlier response opened.
        self._activities: dict[str, dict[str, Any]] = {}
        self._ended = False

    # -- responses -------------------------------------------------------------------------

    def begin_response(self, trigger: str) -> None:
        TRIGGERS.check(trigger)
        self._blocks.clear()
        self._ended = False
        self.responses.append({"trigger": trigger, "response_id": "", "model": "",
                               "end_reason": ""})
        self.outcome = TurnOutcome()

    def end_response(self) -> list[EventRecord]:
        """The input of the current response is exhausted. Without a ``ResponseEnd`` (or an
        error) the stream was cut: open blocks are committed as incomplete partial events."""
        flushed = self._partials()
        if not self._ended:
            self.outcome = TurnOutcome("interrupted", "interrupted")
            if self.responses:
                self.responses[-1]["end_reason"] = "interrupted"
        return flushed

    # -- parts -----------------------------------------------------------------------------

    def feed(self, part: parts.Part) -> list[EventRecord]:
        """Consume one part; return the events it completes (often none)."""
        handler = _HANDLERS.get(type(part))
        if handler is None:
            raise TypeError(f"not a stream part: {type(part).__name__}")
        return handler(self, part)

    def _response_start(self, part: parts.ResponseStart) -> list[EventRecord]:
        if not self.responses:
            self.begin_response("initial")
        if not self.provider:
            # Provenance is recorded once, from the first response that names a model.
            self.provider, self.model = part.provider, part.model
        self.responses[-1].update(response_id=part.response_id, model=part.model)
        return []

    def _block_start(self, part: parts.BlockStart) -> list[EventRecord]:
        key, blocks = part.key, self._blocks
        if key not in blocks:
            blocks[key] = _Block(part.kind, part.redacted, part.payload)
            return []
        flushed = self._partial(key)  # the key opens again: commit what it had so far
        blocks[key] = _Block(part.kind, part.redacted, part.payload)
        return [flushed] if flushed else []

    def _text_delta(self, part: parts.TextDelta) -> list[EventRecord]:
        self._block(part.key).chunks.append(part.text)
        return []

    def _citation(self, part: parts.Citation) -> list[EventRecord]:
        self._block(part.key).citations.append(part)
        return []

    def _block_end(self, part: parts.BlockEnd) -> list[EventRecord]:
        block = self._blocks.pop(part.key, None)
        if block is None:
            return []
        return [self._block_event(block, part.payload or block.payload, incomplete=False)]

    def _activity(self, part: parts.Activity) -> list[EventRecord]:
        activity_id, name, state, activity_input = (
            part.activity_id, part.name, part.state, part.input
        )
        if state not in ACTIVITY_STATES:
            raise ValueError(f"unknown hosted activity state {state!r}")
        if not name or not activity_input:
            # A later transition may leave out what the activity's start said.
            known = self._activities.get(activity_id) or {}
            name = name or known.get("name", "")
            activity_input = activity_input or known.get("input", {})
        ACTIVITY_NAMES.check(name)
        self._activities[activity_id] = {"name": name, "state": state, "input": activity_input}
        body = ActivityBody(activity_id, name, state, activity_input, part.summary, part.sources,
                            part.error_code, part.output)
        # Positional: EventRecord(kind, text, incomplete, body, attributions, payload)
        return [EventRecord("hosted_activity", "", False, body, [], part.payload)]

    def _tool_call(self, part: parts.ToolCall) -> list[EventRecord]:
        body = ToolCallBody(part.call_id, part.name, part.arguments, part.incomplete or None)
        return [EventRecord("tool_call_request", body=body, payload=part.payload)]

    def _refusal(self, part: parts.Refusal) -> list[EventRecord]:
        body = RefusalBody(part.category, part.explanation)
        return [EventRecord("refusal", body=body, payload=part.payload)]

    def _artifact(self, part: parts.Artifact) -> list[EventRecord]:
        body = ArtifactBody(part.type, part.summary, part.display_html or None)
        return [EventRecord("provider_artifact", body=body, payload=part.payload)]

    def _usage(self, part: parts.Usage) -> list[EventRecord]:
        usage = self.usage
        for name, value in part.counters.items():
            if value:
                usage[name] = usage.get(name, 0) + int(value)
        return []

    def _response_end(self, part: parts.ResponseEnd) -> list[EventRecord]:
        END_REASONS.check(part.end_reason)
        self._ended = True
        if self.outcome.status != "failed":
            status = "failed" if part.end_reason == "error" else "complete"
            self.outcome = TurnOutcome(status, part.end_reason)
        if self.responses:
            self.responses[-1]["end_reason"] = self.outcome.end_reason
        # A well-formed response closes every block; commit any the wire left open.
        return self._partials() if self._blocks else []

    def _stream_error(self, part: parts.StreamError) -> list[EventRecord]:
        self._ended = True
        self.outcome = TurnOutcome("failed", "error")
        if self.responses:
            self.responses[-1]["end_reason"] = "error"
        flushed = self._partials()
        error = ErrorBody(part.code, part.message)
        return [*flushed, EventRecord("error", body=error, payload=part.payload)]

    # -- blocks ----------------------------------------------------------------------------

    def _block(self, key: str) -> _Block:
        try:
            return self._blocks[key]
        except KeyError:
            raise ValueError(f"stream part for block {key!r} that was never started") from None

    def _partials(self) -> list[EventRecord]:
        """Commit every open block (see ``_partial``), in the order they opened."""
        flushed = [self._partial(key) for key in list(self._blocks)]
        return [event for event in flushed if event is not None]

    def _partial(self, key: str) -> EventRecord | None:
        """Commit an unfinished block: its text so far, its citations marked incomplete.
        Other partial metadata (e.g. a thinking signature) is dropped with the payload."""
        block = self._blocks.pop(key)
        if not block.text and not block.citations and not block.redacted:
            return None
        return self._block_event(block, None, incomplete=True)

    def _block_event(
        self, block: _Block, payload: parts.Payload | None, *, incomplete: bool
    ) -> EventRecord:
        text = "".join(block.chunks)
        clean = storable(text)
        # Positional: EventRecord(kind, text, incomplete, body, attributions, payload)
        if block.kind == "reasoning":
            redacted = block.redacted
            return EventRecord(
                "reasoning", "" if redacted else clean, incomplete,
                _REDACTED if redacted else _NOT_REDACTED, [], payload,
            )
        citations = block.citations
        if not citations:
            return EventRecord("message", clean, incomplete, MESSAGE, [], payload)
        # One Offsets per block: its text is encoded once for all of the block's ranges (made
        # only when a citation has a range; most have none).
        offsets: ranges.Offsets | None = None
        attributions: list[AttributionRecord] = []
        append = attributions.append
        span: tuple[int | None, int | None] | None
        for citation in citations:
            start, end = citation.start, citation.end
            integrity = ""
            if start is None and end is None:
                span = _NO_SPAN  # no range: the whole block is the cited span
            else:
                if offsets is None:
                    offsets = ranges.Offsets(text)
                span, integrity = ranges.place(
                    text, start, end, citation.unit, citation.quote, offsets
                )
                if span is None:
                    span = _NO_SPAN
                    log.debug("dropped an attribution range that does not match the text")
            if citation.integrity:
                integrity = citation.integrity
            url, title, excerpt = citation.url, citation.title, citation.excerpt
            if not url and not title:
                integrity = NO_SOURCE
            if "\x00" in url or "\x00" in title or "\x00" in excerpt:
                url, title, excerpt = storable(url), storable(title), storable(excerpt)
            # Positional: AttributionRecord(url, title, excerpt, start, end, incomplete, replay,
            # integrity, pages)
            append(AttributionRecord(
                url, title, excerpt, span[0], span[1], incomplete, citation.replay, integrity,
                valid_pages(citation.pages),
            ))
        return EventRecord("message", clean, incomplete, MESSAGE, attributions, payload)


def valid_pages(pages: object) -> tuple[int, int] | None:
    """``pages`` as (first, last) when it is a 1-based, inclusive page span, else None: a
    locator that cannot be true is not kept (the provider's own numbers stay in the replay)."""
    if not isinstance(pages, tuple) or len(pages) != 2:
        return None
    first, last = pages
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in pages):
        return None
    return (first, last) if 1 <= first <= last else None


def storable(text: str) -> str:
    """``text`` with NUL characters as U+FFFD: PostgreSQL text cannot hold NUL, and one code
    point for one keeps every code-point range valid (so replace after resolving ranges)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


_NO_SPAN: tuple[int | None, int | None] = (None, None)
_REDACTED, _NOT_REDACTED = ReasoningBody(True), ReasoningBody(False)
_Handler = Callable[[EventBuilder, Any], list[EventRecord]]
_HANDLERS: dict[type, _Handler] = {
    parts.ResponseStart: EventBuilder._response_start,
    parts.BlockStart: EventBuilder._block_start,
    parts.TextDelta: EventBuilder._text_delta,
    parts.Citation: EventBuilder._citation,
    parts.BlockEnd: EventBuilder._block_end,
    parts.Activity: EventBuilder._activity,
    parts.ToolCall: EventBuilder._tool_call,
    parts.Artifact: EventBuilder._artifact,
    parts.Refusal: EventBuilder._refusal,
    parts.Usage: EventBuilder._usage,
    parts.ResponseEnd: EventBuilder._response_end,
    parts.StreamError: EventBuilder._stream_error,
}
