"""The one writer of the event log.

Every conversation, turn, event, attribution and provider payload row is inserted here, whoever
writes it: ingest, the live runner, import, fork. The columns derived from what is written (an
event's activity id and name from its body, an attribution's domain from its URL) are computed
in one place (``_Rows.event`` and ``_Rows.attribution``), so every way in stores the same rows.
The conversation list's search and facet rows (``conversations.search``) are collected there too
and written in the same transaction, by every action here (rename, owner change and delete
included).

Rows go through prepared INSERT statements, one ``executemany`` per table: 2.6x faster than
the ORM on ingest, measured (the tables an FTS5 trigger indexes on SQLite, search docs and
sources, take a multi-row INSERT instead: ``search.insert_indexed``). So ``COLUMNS`` must list
exactly the models' columns (``tests/conversations/test_store.py`` fails when a model and its
list differ), and the checks ``Model.save()`` would run (provenance, registered end reasons
and event kinds) run here.

One module over 500 lines on purpose: the actions, the row tuples and the statements that take
them are one writer, and ``COLUMNS`` has to sit beside the code that builds rows in its order.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import IntegrityError, connections, router, transaction
from django.db.models import Model, QuerySet
from django.utils import timezone

from conversations import search
from conversations.ids import uuid7, uuid7_ints
from conversations.models import (
    Attribution,
    Conversation,
    Event,
    ProviderPayload,
    Turn,
    dumps,
    url_domain,
)
from streams.bodies import ActivityBody, Body, body_json, load
from streams.builder import INTEGRITY, EventRecord, storable
from streams.parts import Payload
from streams.registries import EVENT_KINDS

log = logging.getLogger("turnscope.store")

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
    tables = _Tables.of(connection)
    with _atomic(using), connection.cursor() as cursor:
        rows = _Rows(tables, connection, turn.conversation_id)
        first_seq = tables.reserve(cursor, turn.conversation_id, len(records), rows.stamp)
        rows.events(turn.pk, records, range(first_seq, first_seq + len(records)))
        rows.write(cursor)
    return rows.written(turn, using)


def set_provenance(turn: Turn, provider: str, model: str) -> None:
    """Record the served model once. A later call with other values is refused."""
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
    tables = _Tables.of(connection)
    with connection.cursor() as cursor:
        cursor.execute(tables.provenance_sql,
                       [provider, model, turn.agent_id, tables.uuid(turn.pk)])
        updated = cursor.rowcount
        if updated:
            pending = search.Pending()
            pending.provenance(provider, model)
            search.write(cursor, connection, tables.uuid(turn.conversation_id), pending)
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
    tables = _Tables.of(connection)
    params = [status, end_reason, connection.ops.adapt_datetimefield_value(turn.completed_at)]
    if responses:
        params.append(turn.responses)
    with connection.cursor() as cursor:
        cursor.execute(tables.finish_sql[bool(responses)], [*params, tables.uuid(turn.pk)])
        finished = cursor.rowcount
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
    tables = _Tables.of(connection)
    with _atomic(using), connection.cursor() as cursor:
        rows = _Rows(tables, connection, None)
        conversation = rows.conversation_row(into)
        tables.insert_conversation(cursor, conversation, rows)  # next_seq is bumped below
        copies: dict[Any, Any] = {}
        for turn in turns:
            values = {f.attname: getattr(turn, f.attname) for f in Turn._meta.concrete_fields}
            copy = _instance(Turn, {**values, "id": uuid7(), "conversation_id": conversation.pk})
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


def _copy_events(cursor: Any, first: _Rows, source: Conversation, turn_ids: dict[Any, Any]) -> int:
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
        rows = _Rows(tables, first.connection, conversation_id)
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
    sources are inserted together at the end (``search.inserts_gathered``). A savepoint or a
    statement per write made a bulk ingest's search docs several times as dear: SQLite's FTS5
    writes its pending index out at each."""
    token = _ALL_OR_NOTHING.set(True)
    try:
        with transaction.atomic(using=using), search.inserts_gathered():
            yield
    finally:
        _ALL_OR_NOTHING.reset(token)


def _atomic(using: str) -> transaction.Atomic:
    """A write's transaction: its own, or a savepoint in the caller's (so a caller that
    catches the failure goes on), but not inside ``all_or_nothing``."""
    return transaction.atomic(using=using, savepoint=not _ALL_OR_NOTHING.get())


def _record_turns(
    turns: Sequence[NewTurn], conversation: Conversation | NewConversation, *,
    reuse_payloads: bool = False,
) -> tuple[Conversation, list[Turn], _Rows]:
    using = router.db_for_write(Conversation)
    connection = connections[using]
    tables = _Tables.of(connection)
    with _atomic(using), connection.cursor() as cursor:
        rows = _Rows(tables, connection, None)
        rows.reuse_payloads = reuse_payloads
        new = isinstance(conversation, NewConversation)
        if isinstance(conversation, NewConversation):
            conversation = rows.conversation_row(conversation)
            index, seq = 0, 1
        else:
            rows.conversation_id = tables.uuid(conversation.pk)
            index, seq = tables.lock(cursor, conversation.pk)
        made: list[Turn] = []
        for offset, spec in enumerate(turns):
            count = len(spec.records)
            for name in ("event_ids", "seqs"):
                given = getattr(spec, name)
                if given is not None and len(given) != count:
                    raise ValueError(f"NewTurn.{name} needs one entry per record")
            turn = _instance(Turn, {
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


def _instance(model: type[Model], values: dict[str, Any]) -> Any:
    """An unsaved instance from every column's value (Model.__init__ is quickest given all
    of them, in field order)."""
    order = _FIELD_ORDER.get(model)
    if order is None:
        order = _FIELD_ORDER[model] = tuple(f.attname for f in model._meta.concrete_fields)
    return model(*[values[name] for name in order])


_FIELD_ORDER: dict[type[Model], tuple[str, ...]] = {}


def _payload_values(payload: Payload) -> tuple[str, int, str]:
    """A payload value as stored: its JSON text, size in bytes and SHA-256 (see
    ProviderPayload.build)."""
    raw = orjson.dumps(payload.value)  # a Fragment's own bytes, verbatim (it has no attribute
    return raw.decode(), len(raw), hashlib.sha256(raw).hexdigest()  # to read them back)


def _derived(body: Body) -> tuple[str, str]:
    """The event columns derived from its body: the hosted activity's id (the correlation key)
    and name (what the conversation list counts searches by); empty for other kinds."""
    if type(body) is ActivityBody:
        return body.id, body.name[:_ACTIVITY_NAME_LENGTH]
    return "", ""


_ACTIVITY_NAME_LENGTH = Event._meta.get_field("activity_name").max_length


class _Rows:
    """The rows of one write, as parameter tuples in ``COLUMNS`` order."""

    def __init__(self, tables: _Tables, connection: Any, conversation_id: Any) -> None:
        self.tables = tables
        self.connection = connection
        self.adapt = connection.ops.adapt_datetimefield_value
        self.now = timezone.now()
        self.stamp = self.adapt(self.now)
        self.native = tables.native_uuid
        self.conversation_id = None if conversation_id is None else tables.uuid(conversation_id)
        self.turns: list[tuple[Any, ...]] = []
        self.payloads: list[tuple[Any, ...]] = []
        self.event_rows: list[tuple[Any, ...]] = []
        self.bodies: list[Body] = []  # the typed body of each of event_rows
        self.attributions: list[tuple[Any, ...]] = []
        self.domains: dict[str, str] = {}
        # Point at an identical payload row already stored instead of writing another (see
        # record_fork), for payloads of at least REUSE_PAYLOAD_BYTES.
        self.reuse_payloads = False
        # What this write adds to the list's search and facet indexes (conversations.search),
        # and the owner, once known (``...``: ask the database if a count needs it).
        self.search = search.Pending()
        self.owner_id: Any = ...

    def ids(self, count: int) -> list[Any]:
        """``count`` fresh ids (see ``conversations.ids``), as the database takes them."""
        if self.native:
            return [uuid.UUID(int=value) for value in uuid7_ints(count)]
        return [f"{value:032x}" for value in uuid7_ints(count)]

    def time(self, value: datetime | None) -> Any:
        """A timestamp as the database takes it."""
        if value is None:
            return None
        return self.stamp if value is self.now else self.adapt(value)

    def conversation_row(self, spec: NewConversation) -> Conversation:
        """The (unsaved) conversation ``spec`` describes; its row is inserted by the caller,
        once its next seq is known."""
        created = spec.created_at or self.now
        conversation = _instance(Conversation, {
            "id": spec.id or uuid7(), "owner_id": None, "title": storable(spec.title)[:300],
            "created_at": created, "updated_at": created, "forked_from_id": None,
            "forked_at_turn": spec.forked_at_turn, "next_seq": 1,
            "search_key": None,  # the INSERT's (insert_conversation)
            "turn_count": 0, "citation_count": 0, "search_count": 0,  # the INSERT's
            "source": spec.source or "",
        })
        # Assigned as Conversation(owner=...) does: checked, and cached on the instance.
        if spec.owner is not None:
            conversation.owner = spec.owner
        if spec.forked_from is not None:
            conversation.forked_from = spec.forked_from
        self.conversation_id = self.tables.uuid(conversation.pk)
        self.owner_id = conversation.owner_id
        self.search.title(conversation.title)
        self.search.fresh = True
        return conversation

    def turn(self, turn: Turn) -> None:
        turn.validate_invariants()  # what Turn.save() checks
        self.turns.append((
            self.tables.uuid(turn.pk), self.conversation_id, turn.index, turn.role, turn.status,
            turn.end_reason, turn.agent_id, turn.provider, turn.model, turn.asked,
            turn.responses, self.time(turn.created_at), self.time(turn.completed_at),
        ))
        self.search.provenance(turn.provider, turn.model)
        self.search.turn()

    def _payload(self, payload: Payload, payload_id: Any) -> Any:
        value, size, digest = _payload_values(payload)
        if self.reuse_payloads and size >= REUSE_PAYLOAD_BYTES:
            stored = (
                ProviderPayload.objects.select_for_update()  # a delete waits for this write
                .filter(sha256=digest, size=size, provider=payload.provider,
                        format=payload.format, version=payload.version)
                .values_list("id", flat=True).first()
            )
            if stored is not None:
                return self.tables.uuid(stored)
        self.payloads.append((
            payload_id, payload.provider, payload.format, payload.version, value, size, digest,
            self.stamp,
        ))
        return payload_id

    def events(
        self, turn_id: Any, records: Sequence[EventRecord], seqs: Sequence[int],
        event_ids: Sequence[Any] | None = None,
    ) -> None:
        """Rows for ``records``, numbered ``seqs`` (with ``event_ids``, else fresh ids)."""
        turn_id = self.tables.uuid(turn_id)
        needed = len(records) * 2 + sum(len(r.attributions) for r in records)
        ids = iter(self.ids(needed))
        given = None if event_ids is None else [self.tables.uuid(i) for i in event_ids]
        stamp = self.stamp
        for n, record in enumerate(records):
            body = record.body
            if body.kind != record.kind:
                raise ValueError(f"a {record.kind} event with a {body.kind} body")
            event_id = next(ids) if given is None else given[n]
            payload = record.payload
            self.event(
                event_id, turn_id, seqs[n], record.kind, record.text, record.incomplete, body,
                body_json(body), None if payload is None else self._payload(payload, next(ids)),
                stamp,
            )
            for ordinal, a in enumerate(record.attributions):
                replay = a.replay
                self.attribution(
                    event_id, ordinal, a.url, a.title, a.excerpt, a.start, a.end, a.incomplete,
                    None if replay is None else self._payload(replay, next(ids)), a.integrity,
                    a.pages,
                )

    def event(
        self, event_id: Any, turn_id: Any, seq: int, kind: str, text: str, incomplete: bool,
        body: Body, body_text: str, payload_id: Any, created: Any,
    ) -> None:
        """One event row (every event written goes through here, so every one gets the same
        derived columns)."""
        EVENT_KINDS.check(kind)  # what Event.save() checks
        activity_id, activity_name = _derived(body)
        self.event_rows.append((
            event_id, self.conversation_id, turn_id, seq, kind, text, incomplete, body_text,
            activity_id, activity_name, payload_id, created,
        ))
        self.bodies.append(body)
        if kind == "message":
            self.search.message(text)
        elif activity_name:
            self.search.activity(activity_id, activity_name)

    def attribution(
        self, event_id: Any, ordinal: int, url: str, title: str, excerpt: str,
        start: int | None, end: int | None, incomplete: bool, replay_id: Any,
        integrity: str = "", pages: tuple[int, int] | None = None,
    ) -> None:
        """One attribution row (every attribution written goes through here)."""
        if integrity and integrity not in INTEGRITY:
            raise ValueError(f"unknown attribution integrity {integrity!r}")
        domain = self.domains.get(url)
        if domain is None:
            domain = self.domains[url] = url_domain(url)
        first, last = pages if pages is not None else (None, None)
        self.attributions.append((
            event_id, ordinal, url, domain, title, excerpt, start, end, incomplete, replay_id,
            integrity, first, last,
        ))
        self.search.source(title, url, domain)
        self.search.citation()

    def written(self, turn: Turn, using: str) -> list[Event]:
        """The events of ``turn`` this write made, in seq order, their typed bodies attached."""
        events = []
        turn_id = self.tables.uuid(turn.pk)
        for row, body in zip(self.event_rows, self.bodies, strict=True):
            if row[2] != turn_id:
                continue
            values = dict(zip(COLUMNS[Event], row, strict=True))
            values.update(
                id=_as_uuid(values["id"]), conversation_id=turn.conversation_id,
                turn_id=turn.pk, created_at=self.now,
                payload_id=None if values["payload_id"] is None else _as_uuid(values["payload_id"]),
            )
            event = _instance(Event, values)
            event.__dict__["typed_body"] = body  # Event.typed_body, without parsing it again
            event._state.adding = False
            event._state.db = using
            events.append(event)
        return events

    def write(self, cursor: Any) -> None:
        tables = self.tables
        # The indexes first: the counts ask what the log held before this write's events.
        search.write(cursor, self.connection, self.conversation_id, self.search, self.owner_id)
        for sql, rows in (
            (tables.turn_sql, self.turns),
            (tables.payload_sql, self.payloads),
            (tables.event_sql, self.event_rows),
        ):
            if rows:
                cursor.executemany(sql, rows)
        # The admin's search of sources indexes them by trigger: few statements, not one a row.
        search.insert_indexed(cursor, tables.attribution_sql, self.attributions)


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


# The columns each INSERT writes, in the order ``_Rows`` builds its tuples. Exactly the model's
# columns (but an auto primary key, left to the database, and ``ALLOCATED``): a test compares
# them.
COLUMNS: dict[type[Model], tuple[str, ...]] = {
    Conversation: ("id", "owner_id", "title", "created_at", "updated_at", "forked_from_id",
                   "forked_at_turn", "next_seq", "turn_count", "citation_count", "search_count",
                   "source"),
    Turn: ("id", "conversation_id", "index", "role", "status", "end_reason", "agent_id",
           "provider", "model", "asked", "responses", "created_at", "completed_at"),
    ProviderPayload: ("id", "provider", "format", "version", "value", "size", "sha256",
                      "created_at"),
    Event: ("id", "conversation_id", "turn_id", "seq", "kind", "text", "incomplete", "body",
            "activity_id", "activity_name", "payload_id", "created_at"),
    Attribution: ("event_id", "ordinal", "url", "domain", "title", "excerpt", "range_start",
                  "range_end", "incomplete", "replay_id", "integrity", "page_first",
                  "page_last"),
}
# Columns the INSERT computes in SQL (on some databases), not given as values.
ALLOCATED: dict[type[Model], tuple[str, ...]] = {Conversation: ("search_key",)}


class _Tables:
    """The SQL the store runs on one database connection, built once per connection alias."""

    _cache: dict[str, _Tables] = {}

    def __init__(self, connection: Any) -> None:
        quote = connection.ops.quote_name
        self.native_uuid = connection.features.has_native_uuid_field
        self.for_update = " FOR UPDATE" if connection.features.has_select_for_update else ""
        # Columns given in SQL: on SQLite the next search key, in the INSERT itself (one
        # writer at a time, so no other can take the same, and the unique index would refuse
        # it); MAX alone, so SQLite reads it off the end of that index.
        computed: dict[type[Model], dict[str, str]] = {}
        if connection.vendor == "sqlite":
            key, table = quote("search_key"), quote(Conversation._meta.db_table)
            computed[Conversation] = {key: f"COALESCE((SELECT MAX({key}) FROM {table}), 0) + 1"}
        sql = {}
        for model, attnames in COLUMNS.items():
            fields = {f.attname: f for f in model._meta.concrete_fields}
            extra = computed.get(model, {})
            columns = ", ".join([*(quote(fields[name].column) for name in attnames), *extra])
            marks = ", ".join([*["%s"] * len(attnames), *extra.values()])
            sql[model] = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"
        self.conversation_sql = sql[Conversation]
        self.returns_search_key = Conversation in computed and _update_returning(connection)
        if self.returns_search_key:
            self.conversation_sql += f" RETURNING {quote('search_key')}"
        self.turn_sql = sql[Turn]
        self.payload_sql = sql[ProviderPayload]
        self.event_sql = sql[Event]
        self.attribution_sql = sql[Attribution]
        conversations_table = quote(Conversation._meta.db_table)
        turns_table = quote(Turn._meta.db_table)
        self.provenance_sql = (
            f"UPDATE {turns_table} SET {quote('provider')} = %s, {quote('model')} = %s, "
            f"{quote('agent_id')} = %s WHERE {quote('id')} = %s AND {quote('provider')} = '' "
            f"AND {quote('model')} = ''"
        )
        finish = (f"UPDATE {turns_table} SET {quote('status')} = %s, "
                  f"{quote('end_reason')} = %s, {quote('completed_at')} = %s")
        where = f" WHERE {quote('id')} = %s AND {quote('status')} = 'streaming'"
        # (without, with) the responses column
        self.finish_sql = (finish + where, finish + f", {quote('responses')} = %s" + where)
        self.lock_sql = (
            f"SELECT {quote('next_seq')} FROM {conversations_table} "
            f"WHERE {quote('id')} = %s{self.for_update}"
        )
        self.count_sql = (
            f"SELECT COUNT(*) FROM {quote(Turn._meta.db_table)} "
            f"WHERE {quote(Turn._meta.get_field('conversation').column)} = %s"
        )
        self.bump_sql = (
            f"UPDATE {conversations_table} SET {quote('next_seq')} = %s, "
            f"{quote('updated_at')} = %s WHERE {quote('id')} = %s"
        )
        # Seqs reserved in one statement that also takes the row lock (PostgreSQL, and SQLite
        # from 3.35, return the updated value); otherwise a locking read, then the update.
        self.reserve_sql = (
            f"UPDATE {conversations_table} SET {quote('next_seq')} = {quote('next_seq')} + %s, "
            f"{quote('updated_at')} = %s WHERE {quote('id')} = %s RETURNING {quote('next_seq')}"
        ) if _update_returning(connection) else None

    @classmethod
    def of(cls, connection: Any) -> _Tables:
        tables = cls._cache.get(connection.alias)
        if tables is None:
            tables = cls._cache[connection.alias] = cls(connection)
        return tables

    def uuid(self, value: Any) -> Any:
        if not isinstance(value, uuid.UUID):
            value = uuid.UUID(str(value))
        return value if self.native_uuid else value.hex

    def lock(self, cursor: Any, conversation_id: Any) -> tuple[int, int]:
        """Lock the conversation's row; return its next turn index and next event seq."""
        key = self.uuid(conversation_id)
        cursor.execute(self.lock_sql, [key])
        row = cursor.fetchone()
        if row is None:
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        cursor.execute(self.count_sql, [key])
        return cursor.fetchone()[0], row[0]

    def reserve(self, cursor: Any, conversation_id: Any, count: int, stamp: Any) -> int:
        """Reserve ``count`` seqs of the conversation (locking its row); return the first."""
        if self.reserve_sql is None:
            first = self.lock(cursor, conversation_id)[1]
            self.bump(cursor, conversation_id, first + count, stamp)
            return first
        cursor.execute(self.reserve_sql, [count, stamp, self.uuid(conversation_id)])
        row = cursor.fetchone()
        if row is None:
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        return row[0] - count

    def bump(self, cursor: Any, conversation_id: Any, next_seq: int, stamp: Any) -> None:
        cursor.execute(self.bump_sql, [next_seq, stamp, self.uuid(conversation_id)])

    def insert_conversation(self, cursor: Any, conversation: Conversation, rows: _Rows) -> None:
        counts = rows.search.take_counts()
        conversation.turn_count, conversation.citation_count, conversation.search_count = counts
        cursor.execute(self.conversation_sql, [
            self.uuid(conversation.pk), conversation.owner_id, conversation.title,
            rows.time(conversation.created_at), rows.time(conversation.updated_at),
            None if conversation.forked_from_id is None else self.uuid(
                conversation.forked_from_id),
            conversation.forked_at_turn, conversation.next_seq, *counts, conversation.source,
        ])
        if self.returns_search_key:
            conversation.search_key = cursor.fetchone()[0]


def _update_returning(connection: Any) -> bool:
    if connection.vendor == "postgresql":
        return True
    if connection.vendor == "sqlite":
        import sqlite3

        return sqlite3.sqlite_version_info >= (3, 35)
    return False


# -- whole conversations: forks of an import, rename, delete --------------------------------------


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


REUSE_PAYLOAD_BYTES = 1024  # smaller ones cost less to write again than to look up


def rename_conversation(conversation: Conversation, title: str) -> None:
    """Give ``conversation`` a new title (bookkeeping: no turn or event changes)."""
    conversation.title = storable(title)[:300]
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation.pk).update(title=conversation.title)
        search.retitle(conversation.pk, conversation.title)


def set_owner(conversation: Conversation, owner: Any) -> None:
    """Give ``conversation`` to ``owner`` (None: nobody; staff only see it then); the filter
    choices' counts follow."""
    with transaction.atomic():
        old = Conversation.objects.select_for_update().filter(pk=conversation.pk) \
            .values_list("owner_id", flat=True).first()
        new = None if owner is None else owner.pk
        moved = Conversation.objects.filter(pk=conversation.pk)
        # The new owner imported the same source already: this one is a copy of it for them
        # (one conversation per source and owner).
        source = moved.values_list("source", flat=True).first()
        if source and Conversation.objects.filter(owner_id=new, source=source).exists():
            moved.update(source="")
        moved.update(owner_id=new)
        conversation.owner = owner
        if old != new:
            search.move_counts(conversation.pk, old, new)


class ConversationBusy(RuntimeError):
    """The conversation has a turn still streaming: it cannot be removed under its runner."""


@dataclass
class Deleted:
    conversation: Any  # its id
    turns: int
    events: int
    attributions: int
    payloads: int  # provider payload rows removed (those no other conversation uses)


def delete_conversation(conversation: Conversation) -> Deleted:
    """Remove ``conversation`` whole: its turns, events, attributions, recordings and cached
    renderings, and the provider payloads nothing else references. A payload a fork (or any
    other conversation) still uses stays. Nothing of another conversation changes, except that
    its forks no longer name it as their source; nothing is edited, only removed whole.

    Refused (``ConversationBusy``) while a turn is streaming: its runner still writes."""
    for attempt in range(3):
        try:
            return _delete_conversation(conversation)
        except IntegrityError:
            # A render cache row written for one of its events while the delete collected
            # them (a page or an export still reading it): the rows found again next time.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _delete_conversation(conversation: Conversation) -> Deleted:
    delete = QuerySet.delete  # the append-only querysets refuse .delete(); a whole removal may
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if locked is None:
            raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
        # Its turns locked before their cached renderings are collected: a cache row written
        # for one of them meanwhile (an export's, a page's) waits for this delete, then finds
        # the turn gone, instead of the delete failing on it (a ForeignKeyViolation, a 500).
        turns = list(Turn.objects.select_for_update().filter(conversation=locked)
                     .values_list("status", flat=True))
        if Turn.Status.STREAMING in turns:
            raise ConversationBusy("a turn of this conversation is still streaming")
        events = Event.objects.filter(conversation=locked)
        attributions = Attribution.objects.filter(event__conversation=locked)
        payload_ids = set(events.exclude(payload=None).values_list("payload_id", flat=True))
        payload_ids |= set(attributions.exclude(replay=None).values_list("replay_id", flat=True))
        counts = Deleted(locked.pk, len(turns), 0, 0, 0)
        search.forget(locked.pk, locked.owner_id)  # before its facets go
        counts.attributions = delete(attributions)[0]
        counts.events = sum(n for model, n in delete(events)[1].items()
                            if model == Event._meta.label)
        # Recordings and cached fragments go with their turns (CASCADE).
        delete(Turn.objects.filter(conversation=locked))
        delete(Conversation.objects.filter(pk=locked.pk))
        counts.payloads = _delete_unused_payloads(payload_ids)
    log.info("deleted conversation %s: %d turns, %d events, %d payloads", counts.conversation,
             counts.turns, counts.events, counts.payloads)
    return counts


def _delete_unused_payloads(ids: set[Any]) -> int:
    removed = 0
    pending = sorted(ids, key=str)
    for start in range(0, len(pending), 500):  # within every database's parameter limit
        batch = pending[start:start + 500]
        used = set(Event.objects.filter(payload_id__in=batch).values_list("payload_id",
                                                                           flat=True))
        used |= set(Attribution.objects.filter(replay_id__in=batch).values_list("replay_id",
                                                                                flat=True))
        unused = [pk for pk in batch if pk not in used]
        if unused:
            removed += QuerySet.delete(ProviderPayload.objects.filter(pk__in=unused))[0]
    return removed
