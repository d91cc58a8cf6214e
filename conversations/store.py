"""The one writer of the event log.

Every conversation, turn, event, attribution and provider payload row is inserted here, whoever
writes it: ingest, the live runner, import, fork. The rows and the statements that take them
are built in ``conversations.store_rows`` (every way in goes through it, so every one stores the
same derived columns); the actions on whole conversations (rename, owner change, delete) are in
``conversations.store_whole``, and named here too. The conversation list's search and facet rows
(``conversations.search``) are collected with the rows and written in the same transaction, by
every action (rename, owner change and delete included).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, router, transaction
from django.utils import timezone

from conversations import search, source_index, source_tally, warming
from conversations.ids import uuid7
from conversations.models import Attribution, Conversation, Event, Turn, dumps
from conversations.store_rows import (
    ALLOCATED,
    COLUMNS,
    REUSE_PAYLOAD_BYTES,
    Rows,
    Tables,
    instance,
)
from conversations.store_whole import (
    ConversationBusy,
    Deleted,
    delete_conversation,
    rename_conversation,
    set_owner,
)
from streams.bodies import load
from streams.builder import EventRecord, storable

# The actions of store_whole and the column lists of store_rows are the store's too: callers
# (and the test that compares COLUMNS with the models) name them here.
__all__ = [
    "ALLOCATED", "COLUMNS", "REUSE_PAYLOAD_BYTES", "ConversationBusy", "Deleted",
    "NewConversation", "NewTurn", "TurnFinished", "all_or_nothing", "append_events", "atomic",
    "copy_turns", "create_conversation", "delete_conversation", "finish_turn", "open_turns",
    "record_fork", "record_turns", "rename_conversation", "resume_turn", "set_owner",
    "set_provenance", "user_turn",
]


# -- what callers describe -----------------------------------------------------------------------


@dataclass
class NewConversation:
    """A conversation to create. ``id`` and ``created_at`` are given by an import that keeps a
    document's; None means a fresh id, and now."""

    title: str = ""
    owner: Any = None
    forked_from: Conversation | None = None
    forked_at_turn: int | None = None
    id: uuid.UUID | None = None
    created_at: datetime | None = None  # also its updated_at: it sorts by when it happened
    source: str | None = None  # an import's source identity (conversations.sources)


@dataclass
class NewTurn:
    """A turn known whole: its events and how it ended (``record_turns`` writes it at once)."""

    role: str
    records: Sequence[EventRecord]
    status: str = Turn.Status.COMPLETE
    end_reason: str = ""
    responses: Sequence[dict[str, Any]] = ()
    provider: str = ""
    model: str = ""
    agent_id: str | None = None  # None: who served it (Turn.default_agent_id), on agent turns
    asked: str = ""  # who a live call asked (Turn.asked)
    finished: bool = False  # stamp completed_at (finish_turn's doing on the step-by-step path)
    # Given by an import that keeps a document's ids, times and seqs; None: fresh ids, now, and
    # the conversation's next seqs. ``event_ids`` and ``seqs`` have one entry per record.
    id: uuid.UUID | None = None
    created_at: datetime | None = None
    event_ids: Sequence[uuid.UUID] | None = None
    seqs: Sequence[int] | None = None


def user_turn(text: str) -> NewTurn:
    """A user turn holding one message, for ``record_turns`` or ``open_turns``."""
    return NewTurn(Turn.Role.USER, [EventRecord("message", text=storable(text))])


# -- actions -------------------------------------------------------------------------------------


def create_conversation(
    *, title: str = "", owner: Any = None, forked_from: Conversation | None = None,
    forked_at_turn: int | None = None,
) -> Conversation:
    """A new, empty conversation."""
    spec = NewConversation(title=title, owner=owner, forked_from=forked_from,
                           forked_at_turn=forked_at_turn)
    return record_turns([], spec)[0]


def record_turns(
    turns: Sequence[NewTurn], conversation: Conversation | NewConversation
) -> tuple[Conversation, list[Turn]]:
    """Append whole turns, every event, attribution and payload included, to ``conversation``
    (or to a new one, when given a ``NewConversation``) in one transaction; returns the
    conversation and the turns written.

    Turns are numbered after what the conversation already holds, and events (unless their
    seqs are given) get its next seqs, under its row lock.
    """
    conversation, made, _ = _record_turns(turns, conversation)
    return conversation, made


def open_turns(
    conversation: Conversation, turns: Sequence[NewTurn]
) -> list[tuple[Turn, list[Event]]]:
    """``record_turns`` on an existing conversation, returning each turn with the events it
    was given, as written (seq order): what the live path publishes. ``conversation.next_seq``
    is left as the row lock read it, after these turns."""
    conversation, made, rows = _record_turns(turns, conversation)
    using = router.db_for_write(Event)
    return [(turn, rows.written(turn, using)) for turn in made]


def append_events(turn: Turn, records: Iterable[EventRecord]) -> list[Event]:
    """Append events to ``turn`` with the next per-conversation seqs, atomically; returns them
    (as written, in seq order)."""
    records = list(records)
    if not records:
        return []
    using = router.db_for_write(Event)
    connection = connections[using]
    tables = Tables.of(connection)
    with atomic(using), connection.cursor() as cursor:
        rows = Rows(tables, connection, turn.conversation_id)
        first_seq, rows.owner_id = tables.reserve(cursor, turn.conversation_id, len(records),
                                                  rows.stamp)
        rows.events(turn.pk, records, range(first_seq, first_seq + len(records)))
        rows.write(cursor)
    return rows.written(turn, using)


def set_provenance(turn: Turn, provider: str, model: str, *, indexed: bool = True) -> None:
    """Record the served model once. A later call with other values is refused.
    ``indexed=False``: the turn has no events yet (its Sources rows, written with its events,
    take the provenance from the turn then)."""
    from conversations.provenance import ProvenanceError

    if turn.provider or turn.model:
        if (turn.provider, turn.model) != (provider, model):
            raise ProvenanceError("provenance is recorded once and never changed")
        return
    turn.provider, turn.model = provider, model
    if not turn.agent_id:
        turn.agent_id = Turn.default_agent_id(provider, model)
    turn.validate_invariants()
    # Compare-and-set: only a row that has no provenance yet takes it.
    connection = connections[router.db_for_write(Turn)]
    tables = Tables.of(connection)
    with connection.cursor() as cursor:
        moved = source_index.provenance_change(cursor, connection, tables.uuid(turn.pk), indexed)
        cursor.execute(tables.provenance_sql,
                       [provider, model, turn.agent_id, tables.uuid(turn.pk)])
        updated = cursor.rowcount
        if updated:
            pending = search.Pending()
            pending.provenance(provider, model)
            search.write(cursor, connection, tables.uuid(turn.conversation_id), pending)
            source_index.provenance(cursor, connection, tables.uuid(turn.pk), provider, model,
                                    moved, indexed=indexed)
    if updated:
        return
    stored = Turn.objects.filter(pk=turn.pk).values_list("provider", "model").first()
    if stored is None:
        raise Turn.DoesNotExist(f"turn {turn.pk} does not exist")
    if stored != (provider, model):
        raise ProvenanceError("provenance is recorded once and never changed")


class TurnFinished(ValueError):
    """The turn is not streaming: it was finished already (a second finish is refused)."""


def finish_turn(
    turn: Turn, *, status: str, end_reason: str, responses: Sequence[dict[str, Any]] = ()
) -> None:
    """End a streaming turn. Compare-and-set: a turn that is not streaming (finished already,
    say by the reaper) is refused with ``TurnFinished`` and left as it is."""
    if status == Turn.Status.STREAMING:
        raise ValueError("a turn is finished with a final status, not 'streaming'")
    before = (turn.status, turn.end_reason, turn.completed_at, turn.responses)
    turn.status = status
    turn.end_reason = end_reason
    turn.completed_at = timezone.now()
    if responses:
        turn.responses = dumps(list(responses))
    turn.validate_invariants()  # what Turn.save() checks (it touches no provenance)
    connection = connections[router.db_for_write(Turn)]
    tables = Tables.of(connection)
    params = [status, end_reason, connection.ops.adapt_datetimefield_value(turn.completed_at)]
    if responses:
        params.append(turn.responses)
    with atomic(router.db_for_write(Turn)), connection.cursor() as cursor:
        cursor.execute(tables.finish_sql[bool(responses)], [*params, tables.uuid(turn.pk)])
        finished = cursor.rowcount
        if finished:
            warming.queue([turn.pk], connection=connection)
    if not finished:
        turn.status, turn.end_reason, turn.completed_at, turn.responses = before
        raise TurnFinished(f"turn {turn.pk} is not streaming: it was finished already")


def resume_turn(turn: Turn) -> None:
    """A finished agent turn streams again: a later request continues it (the recording proxy's
    ``pause_turn`` continuation or tool-result round). Compare-and-set: a turn that is streaming
    already (another request continues it) is refused."""
    if turn.role != Turn.Role.AGENT:
        raise ValueError("only an agent turn can be continued")
    updated = Turn.objects.filter(pk=turn.pk).exclude(status=Turn.Status.STREAMING).update(
        status=Turn.Status.STREAMING, end_reason="", completed_at=None
    )
    if not updated:
        raise ValueError(f"turn {turn.pk} is streaming already: it cannot be continued twice")
    turn.status, turn.end_reason, turn.completed_at = Turn.Status.STREAMING, "", None
    Conversation.objects.filter(pk=turn.conversation_id).update(updated_at=timezone.now())


COPY_BATCH = 2000  # events copied per round trip; keeps memory flat for long conversations


def copy_turns(source: Conversation, turns: Sequence[Turn], into: NewConversation) -> Conversation:
    """A new conversation (``into``) holding copies of ``turns`` of ``source`` (in index order),
    in one transaction: what a fork is. The caller holds the source's row lock.

    Every row is new, with a new id. Turns keep their index, times and provenance verbatim (a
    copy never asks which model a turn "would" use now); events keep their kind, text, body
    and time, and get new contiguous seqs (1, 2, …) in the source's seq order. Provider
    payloads are immutable, so they are shared by reference, never copied. Derived columns are
    derived again, by the code every write goes through.
    """
    using = router.db_for_write(Conversation)
    connection = connections[using]
    tables = Tables.of(connection)
    with atomic(using), connection.cursor() as cursor:
        rows = Rows(tables, connection, None)
        conversation = rows.conversation_row(into)
        tables.insert_conversation(cursor, conversation, rows)  # next_seq is bumped below
        copies: dict[Any, Any] = {}
        for turn in turns:
            values = {f.attname: getattr(turn, f.attname) for f in Turn._meta.concrete_fields}
            copy = instance(Turn, {**values, "id": uuid7(), "conversation_id": conversation.pk})
            copy.conversation = conversation
            rows.turn(copy)
            copies[turn.pk] = rows.tables.uuid(copy.pk)
        rows.write(cursor)
        seq = _copy_events(cursor, rows, source, copies)
        conversation.next_seq = seq + 1
        conversation.updated_at = rows.now
        tables.bump(cursor, conversation.pk, conversation.next_seq, rows.stamp)
    conversation._state.adding = False
    conversation._state.db = using
    return conversation


def _copy_events(cursor: Any, first: Rows, source: Conversation, turn_ids: dict[Any, Any]) -> int:
    """Copy the events of the copied turns, COPY_BATCH at a time; return how many."""
    tables, conversation_id = first.tables, first.conversation_id
    seq = last_seq = 0
    while True:
        batch = list(
            Event.objects.filter(conversation=source, turn_id__in=list(turn_ids),
                                 seq__gt=last_seq)
            .order_by("seq")
            .values_list("id", "turn_id", "seq", "kind", "text", "incomplete", "body",
                         "payload_id", "created_at")[:COPY_BATCH]
        )
        if not batch:
            return seq
        last_seq = batch[-1][2]
        cited: dict[Any, list[tuple[Any, ...]]] = {}
        for row in (
            Attribution.objects.filter(event_id__in=[event[0] for event in batch])
            .order_by("event_id", "ordinal")
            .values_list("event_id", "ordinal", "url", "title", "excerpt", "range_start",
                         "range_end", "incomplete", "replay_id", "integrity", "page_first",
                         "page_last")
        ):
            cited.setdefault(row[0], []).append(row)
        rows = Rows(tables, first.connection, conversation_id)
        for new_id, (event_id, turn_id, _, kind, text, incomplete, body, payload_id,
                     created) in zip(rows.ids(len(batch)), batch, strict=True):
            seq += 1
            rows.event(new_id, turn_ids[turn_id], seq, kind, text, incomplete, load(kind, body),
                       body, None if payload_id is None else tables.uuid(payload_id),
                       rows.time(created))
            for (_, ordinal, url, title, excerpt, start, end, cut, replay_id,
                 integrity, page_first, page_last) in cited.get(event_id, ()):
                rows.attribution(new_id, ordinal, url, title, excerpt, start, end, cut,
                                 None if replay_id is None else tables.uuid(replay_id),
                                 integrity,
                                 None if page_first is None else (page_first, page_last))
        rows.write(cursor)


# -- writing -------------------------------------------------------------------------------------


# Inside ``all_or_nothing``: the writes stand or fall together, so none takes a savepoint.
_ALL_OR_NOTHING: ContextVar[bool] = ContextVar("store_all_or_nothing", default=False)


@contextmanager
def all_or_nothing(using: str = "default") -> Iterator[None]:
    """One transaction for many writes that stand or fall together: a write inside it takes
    no savepoint of its own, and one that fails rolls all of them back (the caller writes them
    again, each in a savepoint, to keep the others: ``ingest_each``). Their search docs and
    sources are inserted together at the end (``search.inserts_gathered``), and so are their
    parts of the Sources roll-up (``source_tally.gathered``). A savepoint or a
    statement per write made a bulk ingest's search docs several times as dear: SQLite's FTS5
    writes its pending index out at each."""
    token = _ALL_OR_NOTHING.set(True)
    try:
        with (transaction.atomic(using=using), search.inserts_gathered(),
              source_tally.gathered()):
            yield
    finally:
        _ALL_OR_NOTHING.reset(token)


def atomic(using: str = "default") -> transaction.Atomic:
    """A write's transaction: its own, or a savepoint in the caller's (so a caller that
    catches the failure goes on), but not inside ``all_or_nothing``. Writers of rows beside
    the log (a turn's recording, its heartbeat) take theirs here too, for the same reason."""
    return transaction.atomic(using=using, savepoint=not _ALL_OR_NOTHING.get())


def _record_turns(
    turns: Sequence[NewTurn], conversation: Conversation | NewConversation, *,
    reuse_payloads: bool = False,
) -> tuple[Conversation, list[Turn], Rows]:
    using = router.db_for_write(Conversation)
    connection = connections[using]
    tables = Tables.of(connection)
    with atomic(using), connection.cursor() as cursor:
        rows = Rows(tables, connection, None)
        rows.reuse_payloads = reuse_payloads
        new = isinstance(conversation, NewConversation)
        if isinstance(conversation, NewConversation):
            conversation = rows.conversation_row(conversation)
            index, seq = 0, 1
        else:
            rows.conversation_id = tables.uuid(conversation.pk)
            index, seq, rows.owner_id = tables.lock(cursor, conversation.pk)
        made: list[Turn] = []
        for offset, spec in enumerate(turns):
            count = len(spec.records)
            for name in ("event_ids", "seqs"):
                given = getattr(spec, name)
                if given is not None and len(given) != count:
                    raise ValueError(f"NewTurn.{name} needs one entry per record")
            turn = instance(Turn, {
                "id": spec.id or uuid7(), "conversation_id": conversation.pk,
                "index": index + offset, "role": spec.role, "status": spec.status,
                "end_reason": spec.end_reason,
                "agent_id": spec.agent_id if spec.agent_id is not None else (
                    Turn.default_agent_id(spec.provider, spec.model)
                    if spec.role == Turn.Role.AGENT else ""
                ),
                "provider": spec.provider, "model": spec.model, "asked": spec.asked,
                "responses": dumps(list(spec.responses)) if spec.responses else "[]",
                "created_at": spec.created_at or rows.now,
                "completed_at": rows.now if spec.finished else None,
            })
            turn.conversation = conversation
            rows.turn(turn)
            seqs = spec.seqs if spec.seqs is not None else range(seq, seq + count)
            rows.events(turn.pk, spec.records, seqs, spec.event_ids)
            if count:
                seq = max(seq, max(seqs) + 1)
            made.append(turn)
        conversation.next_seq = seq
        if new:
            tables.insert_conversation(cursor, conversation, rows)
        else:
            conversation.updated_at = rows.now
            tables.bump(cursor, conversation.pk, seq, rows.stamp)
        rows.write(cursor)
    for turn in made:
        turn._state.adding = False
        turn._state.db = using
    if new:
        conversation._state.adding = False
        conversation._state.db = using
    return conversation, made, rows


# -- forks of an import ----------------------------------------------------------------------------


def record_fork(
    source: Conversation,
    at_turn: int | None,
    turns: Sequence[NewTurn],
    into: NewConversation,
) -> Conversation:
    """A new conversation (``into``) forked from ``source`` at ``at_turn``, holding ``turns``
    whole: the turns 0..``at_turn`` it shares with ``source`` first (as the caller has them,
    e.g. an import that has just written ``source`` from the same records), then its own.
    ``at_turn`` None: a fork that shares no turn (it diverges at the first message). One
    transaction. (``copy_turns`` is the fork that copies the shared turns from the database.)

    Payloads of at least ``REUSE_PAYLOAD_BYTES`` identical to a row already stored (a chat
    export's conversation object, on the shared first turn) are referenced, not written again:
    payloads are immutable, and a delete keeps a row while anything references it."""
    into.forked_from, into.forked_at_turn = source, at_turn
    return _record_turns(turns, into, reuse_payloads=True)[0]
