"""Ingest recorded provider responses as one agent turn.

All input is parsed and assembled in memory first; only a fully read turn is written, in one
transaction, so a malformed file leaves nothing half-written.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction

import providers
from conversations import provenance, sources, store
from conversations.limits import turn_limits
from conversations.models import Conversation, Turn
from conversations.rendering.plain import plain_line
from guards import redaction
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


@dataclass
class _Read:
    """A turn read and assembled, nothing written yet: what ``_write`` stores."""

    builder: EventBuilder
    records: list[EventRecord]
    turns: list[store.NewTurn]
    into: Conversation | store.NewConversation


def source_key(provider: str, files: Sequence[ResponseFile], prompt: str = "") -> str:
    """The source identity of the conversation ``files`` make (``conversations.sources``)."""
    return sources.recording_key(provider, [(f.raw, f.context) for f in files], prompt)


def _read(
    provider: str, files: Sequence[ResponseFile], *, owner: Any, title: str, prompt: str,
    conversation: Conversation | None, key: str | None = None,
) -> _Read:
    builder, records = assemble(provider, files)
    prompt = storable(redaction.redact_text(prompt))
    return _turns(builder, records, owner=owner, title=title, conversation=conversation,
                  prompt=[store.user_turn(prompt)] if prompt else [], key=key)


def _turns(
    builder: EventBuilder, records: list[EventRecord], *, owner: Any, title: str,
    conversation: Conversation | None, prompt: list[store.NewTurn], key: str | None = None,
) -> _Read:
    # Refused here, not by the store: a bulk batch would be written twice for it.
    provenance.validate(Turn.Role.AGENT, builder.provider, builder.model)
    title = storable(redaction.redact_text(title))
    first = next((r.text for t in prompt for r in t.records if r.kind == "message"), "")
    turns = list(prompt)
    turns.append(store.NewTurn(
        Turn.Role.AGENT, records, status=builder.outcome.status,
        end_reason=builder.outcome.end_reason, responses=builder.responses,
        provider=builder.provider, model=builder.model, finished=True,
    ))
    into = conversation if conversation is not None else store.NewConversation(
        title=title or title_for(first, records, builder), owner=owner, source=key)
    return _Read(builder, records, turns, into)


def _write(provider: str, read: _Read) -> IngestSummary:
    # The whole turn is known: conversation, turns and every row in one transaction.
    conversation, written = store.record_turns(read.turns, read.into)
    summary = _summary(conversation, written[-1], read.builder, read.records)
    # A line per turn at DEBUG: a bulk ingest logs one per batch (``_logged``), a single
    # ingest its own at INFO (``_told``).
    _told(provider, summary, logging.DEBUG)
    return summary


def _told(provider: str, summary: IngestSummary, level: int = logging.INFO) -> None:
    if log.isEnabledFor(level):
        log.log(level, "ingested %s turn %s: %d events, %d citations, usage %s", provider,
                summary.turn.pk, summary.events, summary.citations, dict(summary.usage))


def ingest(
    provider: str,
    files: Sequence[ResponseFile],
    *,
    owner: Any = None,
    title: str = "",
    prompt: str = "",
    conversation: Conversation | None = None,
    remember: bool = False,
) -> IngestSummary:
    """Store ``files`` (a response and its continuations) as one agent turn. With
    ``remember``, what is stored keeps its source identity (the files and the prompt), and the
    same ingest again raises ``AlreadyImported`` instead of storing a copy: the owner's second
    ingest of them as a new conversation, or a second ingest of them into ``conversation``
    (a client retrying after a lost response: the turn is not appended twice)."""
    key = None
    if remember:
        key = source_key(provider, files, prompt)
        _refuse_again(owner, conversation, key)
    read = _read(provider, files, owner=owner, title=title, prompt=prompt,
                 conversation=conversation, key=key)
    try:
        with transaction.atomic():
            summary = _write(provider, read)
            if key is not None and conversation is not None:
                sources.remember_turn(summary.turn, key)
    except IntegrityError as exc:  # the same ingest, stored meanwhile (a race, a retry)
        if key is None:
            raise
        if conversation is None:
            raise AlreadyImported(sources.taken(owner, key, exc)) from None
        raise AlreadyImported(conversation, sources.taken_turn(conversation, key, exc)) from None
    _told(provider, summary)
    return summary


def _refuse_again(owner: Any, conversation: Conversation | None, key: str) -> None:
    """``AlreadyImported`` when ``key`` was ingested before as a new conversation of
    ``owner``'s, or (given ``conversation``) as a turn of it."""
    if conversation is None:
        there = sources.already_imported(owner, key)
        if there is not None:
            raise AlreadyImported(there)
        return
    turn = sources.already_ingested(conversation, key)
    if turn is not None:
        raise AlreadyImported(conversation, turn)


class AlreadyImported(Exception):
    """The owner imported these files already: ``conversation`` is what they became, or, when
    they were ingested into a conversation, ``turn`` is the agent turn they became there."""

    def __init__(self, conversation: Conversation, turn: Turn | None = None) -> None:
        what = f"turn {turn.index} of {conversation.pk}" if turn is not None else conversation.pk
        super().__init__(f"already imported as {what}")
        self.conversation = conversation
        self.turn = turn


def wire_parts(provider: str, response: ResponseFile) -> Iterator[Part]:
    """The parts of one recorded response, as ``ingest`` reads them (redacted first)."""
    return _parts(provider, response)


def ingest_turn(
    responses: Sequence[tuple[str, Iterable[Part]]],
    *,
    conversation: Conversation,
    prompt: Sequence[EventRecord] = (),
    bookkeeping: dict[str, str] | None = None,
) -> IngestSummary:
    """Store one agent turn from its responses' stream parts (an adapter's, ``wire_parts``,
    or parts made from what a trace described), after a user turn holding ``prompt`` (when it
    holds anything), through the one stream runner. ``bookkeeping`` is added to each
    response's (where the turn came from: an OTLP span's trace and span ids)."""
    builder, records = run.assemble(responses, limits=turn_limits())
    records = redaction.redact_records(records)
    for response in builder.responses:
        response.update(bookkeeping or {})
    user = ([store.NewTurn(Turn.Role.USER, redaction.redact_records(list(prompt)))]
            if prompt else [])
    read = _turns(builder, records, owner=conversation.owner, title="",
                  conversation=conversation, prompt=user)
    summary = _write(builder.provider or "unknown", read)
    _told(builder.provider or "unknown", summary)
    return summary


@dataclass
class BulkResult:
    """One file of ``ingest_each``: the conversation it became, or why it was refused."""

    name: str
    conversation: Conversation | None = None
    error: str = ""
    already: bool = False  # the owner had imported it already: ``conversation`` is that one


BULK_BATCH = 200  # files per commit: a commit per file was a third of the time, measured
# Raw bytes per batch, whatever its count: a batch's files are all read before it is written.
BULK_BYTES = 64 * 2**20


def ingest_each(
    provider: str, files: Iterable[ResponseFile], *, owner: Any = None,
    batch: int = BULK_BATCH, done: Callable[[BulkResult], None] | None = None,
    copy: bool = False,
) -> Iterator[BulkResult]:
    """Each of ``files`` as its own conversation (one agent turn), in one process: many files
    are committed together (``batch`` per transaction, fewer when they hold over
    ``BULK_BYTES``), so that a file that cannot be read or stored is reported and leaves
    nothing, and never costs the others. Results come in file order, once their batch is
    committed; ``done`` is told of each file once (for a progress bar): a file that cannot be
    read at once, the others as their batch commits.

    Every file of a batch is read first (a file that cannot be read is refused there, touching
    no database); the rest are written in one transaction, and only if the database refuses
    one of them is the batch written again with a savepoint per file. Not a savepoint per file
    every time: SQLite's FTS5 writes its pending index to disk at each savepoint, and that
    made a file's search docs four times as dear.

    Each conversation keeps its file's source identity (``conversations.sources``): a file the
    owner ingested already (a re-run after a crash) is reported ``already`` and not read again,
    unless ``copy``."""
    for chunk in _batches(files, batch):
        read: list[_Read | BulkResult] = []
        keys = [None if copy else source_key(provider, [r]) for r in chunk]
        there = {} if copy else _imported(owner, keys)
        for response, key in zip(chunk, keys, strict=True):
            if key in there:
                known = BulkResult(response.name, there[key], already=True)
                read.append(known)
                if done is not None:
                    done(known)
                continue
            try:
                read.append(_read(provider, [response], owner=owner, title="", prompt="",
                                  conversation=None, key=key))
            except ValueError as exc:  # every refusal of the input (MalformedInput names
                # the file and line): nothing of it reaches the database
                refused = BulkResult(response.name, error=str(exc))
                read.append(refused)
                if done is not None:
                    done(refused)
        try:
            results = _write_batch(provider, chunk, read, savepoints=False)
        except (ValueError, DatabaseError):  # all of it rolled back: again, file by file
            results = _write_batch(provider, chunk, read, savepoints=True)
        _logged(provider, results)
        for item, result in zip(read, results, strict=True):
            if done is not None and not isinstance(item, BulkResult):
                done(result)  # committed
        yield from results


def _logged(provider: str, results: Sequence[BulkResult]) -> None:
    """One line for a committed batch (its files' own lines are at DEBUG), and one for each
    file refused: a refusal is never folded into a count alone (each is its file's result
    too, which the caller reports)."""
    stored = sum(1 for r in results if r.conversation is not None and not r.already)
    already = sum(1 for r in results if r.already)
    refused = [r for r in results if r.error]
    log.info("ingested a batch of %d %s files: %d stored, %d already imported, %d refused",
             len(results), provider, stored, already, len(refused))
    for result in refused:
        log.info("not ingested: %s: %s", result.name, result.error)


def _imported(owner: Any, keys: Sequence[str | None]) -> dict[str, Conversation]:
    """The owner's conversations already imported from any of ``keys``, by key."""
    wanted = [k for k in keys if k is not None]
    # Through a unique index of sources (``sources.already_imported`` says why), unordered:
    # in the list's order SQLite walked every conversation of the owner, for each batch.
    found = Conversation.objects.filter(source__in=wanted).exclude(source="").order_by()
    found = found.filter(owner__isnull=True) if owner is None else found.filter(owner=owner)
    return {c.source: c for c in found} if wanted else {}


def _batches(files: Iterable[ResponseFile], count: int) -> Iterator[list[ResponseFile]]:
    """``files`` in batches of ``count`` at most, and of ``BULK_BYTES`` (but one file)."""
    chunk: list[ResponseFile] = []
    size = 0
    for response in files:
        if chunk and (len(chunk) >= count or size + len(response.raw) > BULK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(response)
        size += len(response.raw)
    if chunk:
        yield chunk


def _write_batch(
    provider: str, chunk: list[ResponseFile], read: list[_Read | BulkResult], *,
    savepoints: bool,
) -> list[BulkResult]:
    """Write the files ``read`` in one transaction; with ``savepoints``, each in its own, so
    one the database refuses is reported and the others are kept."""
    results = []
    with transaction.atomic() if savepoints else store.all_or_nothing():
        for response, item in zip(chunk, read, strict=True):
            if isinstance(item, BulkResult):
                results.append(item)
                continue
            if not savepoints:
                summary = _write(provider, item)
                results.append(BulkResult(response.name, summary.conversation))
                continue
            try:
                with transaction.atomic():  # the file's savepoint
                    summary = _write(provider, item)
            except (ValueError, DatabaseError) as exc:
                key = getattr(item.into, "source", None)
                there = sources.already_imported(item.into.owner, key) \
                    if isinstance(exc, IntegrityError) and key else None
                if there is not None:  # another process ingested the same file first
                    results.append(BulkResult(response.name, there, already=True))
                else:
                    results.append(BulkResult(response.name, error=str(exc)))
            else:
                results.append(BulkResult(response.name, summary.conversation))
    return results


def title_for(prompt: str, records: list[EventRecord], builder: EventBuilder) -> str:
    """A conversation title from its prompt, else its first message, else who served it."""
    source = prompt or next((r.text for r in records if r.kind == "message" and r.text), "")
    # The first line of text, without the markdown that opens it ("### ", "> ", "- ", "**").
    first_line = next((plain for line in source.splitlines()
                       if (plain := plain_line(line).strip())), "")
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
