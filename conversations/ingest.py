"""Ingest recorded provider responses as one agent turn.

All input is parsed and assembled in memory first; only a fully read turn is written, in one
transaction, so a malformed file leaves nothing half-written.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, transaction

import providers
from conversations import redaction, store
from conversations.limits import turn_limits
from conversations.models import Conversation, Turn
from streams import run
from streams.bodies import ActivityBody
from streams.builder import EventBuilder, EventRecord, storable
from streams.parts import Part

log = logging.getLogger("turnscope.ingest")


@dataclass(frozen=True)
class ResponseFile:
    """One recorded provider response and what is known about its request."""

    name: str
    raw: bytes
    context: providers.WireContext = field(default_factory=providers.WireContext)


@dataclass
class IngestSummary:
    conversation: Conversation
    turn: Turn
    events: int
    citations: int
    activities: dict[str, str]  # activity id -> final state
    usage: dict[str, int]
    status: str
    end_reason: str
    provider: str
    model: str
    kinds: dict[str, int]

    def lines(self) -> list[str]:
        states = Counter(self.activities.values())
        state_text = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
        usage = ", ".join(f"{k}={v}" for k, v in sorted(self.usage.items())) or "none"
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items()))
        return [
            f"turn: {self.status} ({self.end_reason or 'no end reason'}), "
            f"model {self.provider or '?'} · {self.model or '?'}",
            f"events: {self.events} ({kinds})",
            f"citations: {self.citations}",
            f"hosted activities: {len(self.activities)} ({state_text})",
            f"usage: {usage}",
        ]


def assemble(
    provider: str, files: Sequence[ResponseFile]
) -> tuple[EventBuilder, list[EventRecord]]:
    """Parse every response of one turn and assemble its events, touching no database. A turn
    past its limits is refused (``TurnTooLarge``) as soon as it passes them."""
    if not files:
        raise ValueError("nothing to ingest: no response given")
    providers.adapter(provider)  # an unknown provider is refused before any file is read
    builder, records = run.assemble([(f.name, _parts(provider, f)) for f in files],
                                    limits=turn_limits())
    return builder, redaction.redact_records(records)


def _parts(provider: str, response: ResponseFile) -> Iterator[Part]:
    """The response's parts, read when the stream runner asks for them (so a malformed file
    is named by it). Credentials never get past this point: the bytes are redacted first.
    Parsed incrementally: memory per response is bounded by its parts, not its wire events."""
    yield from providers.parse_incrementally(provider, redaction.redact_bytes(response.raw),
                                             response.context)


def ingest(
    provider: str,
    files: Sequence[ResponseFile],
    *,
    owner: Any = None,
    title: str = "",
    prompt: str = "",
    conversation: Conversation | None = None,
) -> IngestSummary:
    """Store ``files`` (a response and its continuations) as one agent turn."""
    builder, records = assemble(provider, files)
    title = storable(redaction.redact_text(title))
    prompt = storable(redaction.redact_text(prompt))
    turns = []
    if prompt:
        turns.append(store.user_turn(prompt))
    turns.append(store.NewTurn(
        Turn.Role.AGENT, records, status=builder.outcome.status,
        end_reason=builder.outcome.end_reason, responses=builder.responses,
        provider=builder.provider, model=builder.model, finished=True,
    ))
    # The whole turn is known: conversation, turns and every row in one transaction.
    into = conversation if conversation is not None else store.NewConversation(
        title=title or title_for(prompt, records, builder), owner=owner)
    conversation, written = store.record_turns(turns, into)
    turn = written[-1]
    summary = _summary(conversation, turn, builder, records)
    log.info(
        "ingested %s turn %s: %d events, %d citations, usage %s",
        provider, turn.pk, summary.events, summary.citations, dict(summary.usage),
    )
    return summary


@dataclass
class BulkResult:
    """One file of ``ingest_each``: the conversation it became, or why it was refused."""

    name: str
    conversation: Conversation | None = None
    error: str = ""


BULK_BATCH = 200  # files per commit: a commit per file was a third of the time, measured


def ingest_each(
    provider: str, files: Iterable[ResponseFile], *, owner: Any = None,
    batch: int = BULK_BATCH, done: Callable[[BulkResult], None] | None = None,
) -> Iterator[BulkResult]:
    """Each of ``files`` as its own conversation (one agent turn), in one process: many files
    are committed together (``batch`` per transaction), each in its own savepoint (the store's
    transaction, nested), so a file that cannot be read or stored is reported and leaves
    nothing, and never costs the others. Results come in file order as each file is done;
    a result is yielded once its batch is committed; ``done`` is called as each file is
    through (for a progress bar)."""
    pending: list[BulkResult] = []
    iterator = iter(files)
    while True:
        chunk = list(itertools.islice(iterator, batch))
        if not chunk:
            return
        with transaction.atomic():
            for response in chunk:
                try:
                    with transaction.atomic():  # the file's savepoint
                        summary = ingest(provider, [response], owner=owner)
                except (ValueError, DatabaseError) as exc:
                    # ValueError: every refusal of the input (MalformedInput names the file and
                    # line); the file's savepoint is rolled back, the batch goes on.
                    result = BulkResult(response.name, error=str(exc))
                else:
                    result = BulkResult(response.name, summary.conversation)
                pending.append(result)
                if done is not None:
                    done(result)
        yield from pending  # committed
        pending = []


def title_for(prompt: str, records: list[EventRecord], builder: EventBuilder) -> str:
    """A conversation title from its prompt, else its first message, else who served it."""
    source = prompt or next((r.text for r in records if r.kind == "message" and r.text), "")
    # The first line of text, without the markdown that opens it ("### ", "> ", "- ", "**").
    first_line = next((line.strip().lstrip("#>*-_ ").rstrip("*_ ") for line in
                       source.splitlines() if line.strip().lstrip("#>*-_ ")), "")
    if first_line:
        return first_line[:117] + "…" if len(first_line) > 120 else first_line
    return " · ".join(x for x in (builder.provider, builder.model) if x) or "Untitled"


def _summary(
    conversation: Conversation, turn: Turn, builder: EventBuilder, records: list[EventRecord]
) -> IngestSummary:
    activities: dict[str, str] = {}
    for record in records:
        if isinstance(record.body, ActivityBody):
            activities[record.body.id] = record.body.state
    return IngestSummary(
        conversation=conversation,
        turn=turn,
        events=len(records),
        citations=sum(len(r.attributions) for r in records),
        activities=activities,
        usage=dict(builder.usage),
        status=builder.outcome.status,
        end_reason=builder.outcome.end_reason,
        provider=builder.provider,
        model=builder.model,
        kinds=dict(Counter(r.kind for r in records)),
    )
