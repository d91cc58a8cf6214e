"""The one stream runner: a turn's provider responses, in order, through the one EventBuilder.

An agent turn may span several provider responses: a ``pause_turn`` and the continuation that
resumes it, a tool-result round, a continuation file. ``TurnStream`` owns what happens between
them, for every way a turn comes in (ingest, the live runner, the recording proxy, live calls):

* which trigger opens each response (from how the previous one ended);
* that nothing continues a response that was cut or failed;
* what an unreadable rest of a response does: ``"refuse"`` raises (a recorded file is refused
  whole, nothing is written), ``"cut"`` ends the response where the readable part ends (a live
  stream keeps what it received, and the turn ends interrupted).

Callers drive it push-style (``begin`` / ``feed`` / ``end``), or hand it the parts of one
response as an iterable (``response``: a recording) or an async iterable (``aresponse``: parts
parsed while the bytes arrive from the network), or a whole turn (``assemble``). A turn that
continues in a later request (the recording proxy gets the ``pause_turn`` continuation as a new
HTTP request) is ``resume``d from what was stored of it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from streams import parts
from streams.builder import EventBuilder, EventRecord, TurnOutcome
from streams.errors import MalformedInput, TurnTooLarge
from streams.registries import TRIGGERS

log = logging.getLogger("turnscope.streams")

for _trigger in ("initial", "pause_turn", "tool_result", "continuation"):
    TRIGGERS.register(_trigger, producer=__name__)

# Why a continuation response was requested, from how the previous response ended.
CONTINUATION_TRIGGERS = {"pause_turn": "pause_turn", "tool_use": "tool_result"}

OnUnreadable = Literal["refuse", "cut"]


@dataclass(frozen=True)
class TurnLimits:
    """How much one turn may hold (None: no limit). A cheap request must not cost a lot: a
    response with 60,000 citations is refused as it is read, not after it is assembled."""

    events: int | None = None
    citations: int | None = None

    def check(self, *, events: int = 0, citations: int = 0, where: str = "the turn") -> None:
        """Refuse (``TurnTooLarge``) a turn holding more than these limits allow."""
        if self.events is not None and events > self.events:
            raise TurnTooLarge(f"{where} has more than {self.events} events (the limit)")
        if self.citations is not None and citations > self.citations:
            raise TurnTooLarge(f"{where} has more than {self.citations} citations (the limit)")


class TurnStream:
    """One agent turn's responses through one ``EventBuilder``."""

    def __init__(
        self, *, on_unreadable: OnUnreadable = "refuse", limits: TurnLimits | None = None
    ) -> None:
        self.builder = EventBuilder()
        self.on_unreadable = on_unreadable
        self.limits = limits or TurnLimits()
        self.events = 0  # completed so far, over every response of the turn
        self.citations = 0  # citation parts read so far
        self._open = False

    # -- what the turn looks like so far ----------------------------------------------------

    @property
    def outcome(self) -> TurnOutcome:
        return self.builder.outcome

    @property
    def done(self) -> bool:
        """Whether no further response may continue this turn (the last was cut or failed)."""
        return bool(self.builder.responses) and self.outcome.status in ("interrupted", "failed")

    @property
    def next_trigger(self) -> str:
        """The trigger the next response of this turn opens with."""
        if not self.builder.responses:
            return "initial"
        return CONTINUATION_TRIGGERS.get(self.outcome.end_reason, "continuation")

    # -- push-style --------------------------------------------------------------------------

    def begin(self) -> str:
        """Open the next response; returns its trigger. Refused after a cut or failed one."""
        if self._open:
            raise RuntimeError("a response is still open: end it first")
        if self.done:
            raise ValueError(
                f"the turn ended {self.outcome.status}: no response can continue it"
            )
        trigger = self.next_trigger
        self.builder.begin_response(trigger)
        self._open = True
        return trigger

    def feed(self, part: parts.Part) -> list[EventRecord]:
        """One part of the open response; returns the events it completes. ``TurnTooLarge``
        once the turn passes its limits."""
        if isinstance(part, parts.Citation):
            self.citations += 1
            self.limits.check(citations=self.citations)
        records = self.builder.feed(part)
        self._count(records)
        return records

    def end(self) -> list[EventRecord]:
        """The open response's input is exhausted (without its end event it was cut)."""
        self._open = False
        records = self.builder.end_response()
        if self.on_unreadable == "refuse":  # a live turn keeps what ending it commits
            self._count(records)
        return records

    def _count(self, records: list[EventRecord]) -> None:
        self.events += len(records)
        self.limits.check(events=self.events)

    def unreadable(self, exc: ValueError | TypeError) -> list[EventRecord]:
        """The rest of the open response cannot be read: refuse, or end it here as cut."""
        if self.on_unreadable == "refuse":
            self._open = False
            raise exc
        log.warning("stream stopped: %s", exc)
        return self.end()

    def resume(self, stored: Iterable[parts.Part], responses: Sequence[dict[str, Any]]) -> None:
        """Pick up a turn whose earlier responses are already stored, so that the next response
        continues it (trigger, activities left open, provenance): ``stored`` rebuilds them (the
        events it completes are stored already and are dropped), ``responses`` is the turn's
        stored bookkeeping, which the rebuilt one is replaced with."""
        for _ in self.response(stored, name="stored turn"):
            pass
        self.builder.responses = [dict(r) for r in responses] or self.builder.responses
        self.builder.usage.clear()  # diagnostics of this run's responses only

    # -- iterables of parts ------------------------------------------------------------------

    def response(
        self, source: Iterable[parts.Part], *, name: str = ""
    ) -> Iterator[tuple[parts.Part | None, list[EventRecord]]]:
        """Run one response: yields each part with the events it completed, then
        ``(None, events)`` once the response has ended (events its end committed).

        A ``MalformedInput`` is named after ``name`` (the file it came from); text that is not
        UTF-8 is malformed input too.
        """
        self.begin()
        try:
            for part in source:
                yield part, self.feed(part)
        except (ValueError, TypeError) as exc:
            yield None, self._rest_unreadable(exc, name)
            return
        yield None, self.end()

    async def aresponse(
        self, source: AsyncIterable[parts.Part], *, name: str = ""
    ) -> AsyncIterator[tuple[parts.Part | None, list[EventRecord]]]:
        """``response`` for parts that arrive asynchronously (parsed as the bytes come in)."""
        self.begin()
        try:
            async for part in source:
                yield part, self.feed(part)
        except (ValueError, TypeError) as exc:
            yield None, self._rest_unreadable(exc, name)
            return
        yield None, self.end()

    def _rest_unreadable(self, exc: ValueError | TypeError, name: str) -> list[EventRecord]:
        if isinstance(exc, MalformedInput):
            return self.unreadable(_named(exc, name))
        if isinstance(exc, UnicodeDecodeError):
            return self.unreadable(
                MalformedInput(f"not UTF-8 text ({exc.reason})", source=name)
            )
        return self.unreadable(exc)  # a part the builder cannot place


def assemble(
    responses: Iterable[tuple[str, Iterable[parts.Part]]],
    *,
    on_unreadable: OnUnreadable = "refuse",
    limits: TurnLimits | None = None,
) -> tuple[EventBuilder, list[EventRecord]]:
    """Run a whole turn's responses (``(name, parts)`` in order) and return the builder (how
    the turn ended, its provenance and usage) with every event, touching nothing else.

    A response that follows a cut or failed one is refused: it cannot continue that turn.
    """
    stream = TurnStream(on_unreadable=on_unreadable, limits=limits)
    records: list[EventRecord] = []
    any_response = False
    for name, source in responses:
        if stream.done:
            raise MalformedInput(
                f"cannot continue a turn that ended {stream.outcome.status}", source=name
            )
        any_response = True
        for _, events in stream.response(source, name=name):
            records.extend(events)
    if not any_response:
        raise ValueError("nothing to assemble: no response given")
    return stream.builder, records


def _named(exc: MalformedInput, name: str) -> MalformedInput:
    if not name or exc.source:
        return exc
    return MalformedInput(exc.message, line=exc.line, source=name)
