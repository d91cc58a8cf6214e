"""Business actions on the event store. Views, commands and the live runner call these;
nothing else writes conversations, turns or events.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from django.db import connections, router, transaction
from django.db.models import Model
from django.utils import timezone

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
from streams.builder import EventRecord, storable
from streams.parts import Payload
from streams.registries import EVENT_KINDS

log = logging.getLogger("turnscope.store")


def create_conversation(
    *, title: str = "", owner: Any = None, forked_from: Conversation | None = None,
    forked_at_turn: int | None = None,
) -> Conversation:
    return Conversation.objects.create(
        title=storable(title)[:300], owner=owner, forked_from=forked_from,
        forked_at_turn=forked_at_turn,
    )


def start_turn(
    conversation: Conversation,
    role: str,
    *,
    status: str = Turn.Status.COMPLETE,
    agent_id: str = "",
    provider: str = "",
    model: str = "",
) -> Turn:
    """Open the next turn of ``conversation`` (numbered under its row lock)."""
    spec = NewTurn(role, (), status=status, agent_id=agent_id, provider=provider, model=model)
    return record_turns([spec], conversation=conversation)[1][0]


def _start_turn_orm(conversation: Conversation, spec: NewTurn) -> Turn:
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        index = locked.turns.count()
        turn = Turn(
            conversation=locked, index=index, role=spec.role, status=spec.status,
            agent_id=spec.agent_id or (Turn.default_agent_id(spec.provider, spec.model)
                                       if spec.role == "agent" else ""),
            provider=spec.provider, model=spec.model,
        )
        turn.save()
        Conversation.objects.filter(pk=locked.pk).update(updated_at=timezone.now())
    conversation.next_seq = locked.next_seq  # as record_turns leaves it
    return turn


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
    if tables is None:
        updated = Turn.objects.filter(pk=turn.pk, provider="", model="").update(
            provider=provider, model=model, agent_id=turn.agent_id
        )
    else:
        with connection.cursor() as cursor:
            cursor.execute(tables.provenance_sql,
                           [provider, model, turn.agent_id, tables.uuid(turn.pk)])
            updated = cursor.rowcount
    if updated:
        return
    stored = Turn.objects.filter(pk=turn.pk).values_list("provider", "model").first()
    if stored is None:
        raise Turn.DoesNotExist(f"turn {turn.pk} does not exist")
    if stored != (provider, model):
        raise ProvenanceError("provenance is recorded once and never changed")


def finish_turn(
    turn: Turn, *, status: str, end_reason: str, responses: Sequence[dict[str, Any]] = ()
) -> None:
    turn.status = status
    turn.end_reason = end_reason
    turn.completed_at = timezone.now()
    fields = ["status", "end_reason", "completed_at"]
    if responses:
        turn.responses = dumps(list(responses))
        fields.append("responses")
    connection = connections[router.db_for_write(Turn)]
    tables = _Tables.of(connection)
    if tables is None:
        turn.save(update_fields=fields)
        return
    turn.validate_invariants()  # what Turn.save() checks (it touches no provenance)
    params = [status, end_reason, connection.ops.adapt_datetimefield_value(turn.completed_at)]
    if responses:
        params.append(turn.responses)
    with connection.cursor() as cursor:
        cursor.execute(tables.finish_sql[bool(responses)], [*params, tables.uuid(turn.pk)])


def payload_json(value: Any) -> str:
    """The JSON text a payload value is stored as (a Fragment is already JSON text)."""
    if isinstance(value, orjson.Fragment):
        contents = value.contents
        return contents.decode() if isinstance(contents, bytes) else contents
    return orjson.dumps(value).decode()


def append_events(turn: Turn, records: Iterable[EventRecord]) -> list[Event]:
    """Append events to ``turn`` with the next per-conversation seqs, atomically; returns them
    (as written, in seq order)."""
    records = list(records)
    if not records:
        return []
    using = router.db_for_write(Event)
    connection = connections[using]
    tables = _Tables.of(connection)
    if tables is None:
        return _append_events_orm(turn, records)
    with transaction.atomic(using=using), connection.cursor() as cursor:
        now = timezone.now()
        stamp = connection.ops.adapt_datetimefield_value(now)
        first_seq = tables.reserve(cursor, turn.conversation_id, len(records), stamp)
        rows = _Rows(tables, turn.conversation_id, now, stamp)
        rows.events(turn.pk, first_seq, records)
        rows.write(cursor)
    return rows.written(turn, using)


def _append_events_orm(turn: Turn, records: list[EventRecord]) -> list[Event]:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=turn.conversation_id)
        first_seq = conversation.next_seq
        events: list[Event] = []
        attributions: list[Attribution] = []
        payloads: list[ProviderPayload] = []
        for offset, record in enumerate(records):
            payload = _payload_row(record.payload, payloads)
            event = Event(
                conversation_id=conversation.pk, turn=turn, seq=first_seq + offset,
                kind=record.kind, text=record.text, incomplete=record.incomplete,
                body=dumps(record.body), activity_id=record.activity_id, payload=payload,
            )
            events.append(event)
            for ordinal, a in enumerate(record.attributions):
                attributions.append(Attribution(
                    event=event, ordinal=ordinal, url=a.url, title=a.title,
                    excerpt=a.excerpt, domain=url_domain(a.url),
                    range_start=a.start, range_end=a.end,
                    incomplete=a.incomplete, replay=_payload_row(a.replay, payloads),
                ))
        for event in events:
            EVENT_KINDS.check(event.kind)  # bulk_create skips Event.save()
        ProviderPayload.objects.bulk_create(payloads)
        Event.objects.bulk_create(events)
        Attribution.objects.bulk_create(attributions)
        Conversation.objects.filter(pk=conversation.pk).update(
            next_seq=first_seq + len(records), updated_at=timezone.now()
        )
    return events


def _payload_row(
    payload: Payload | None, pending: list[ProviderPayload]
) -> ProviderPayload | None:
    if payload is None:
        return None
    row = ProviderPayload.build(
        payload.provider, payload.format, payload.version, payload_json(payload.value)
    )
    pending.append(row)
    return row


def append_user_turn(conversation: Conversation, text: str) -> Turn:
    """A user turn holding one message, in one transaction."""
    return record_turns([user_turn(text)], conversation=conversation)[1][0]


def user_turn(text: str) -> NewTurn:
    """A user turn holding one message, for ``record_turns`` or ``open_turns``."""
    return NewTurn(Turn.Role.USER, [EventRecord("message", text=storable(text))])


# -- whole turns ---------------------------------------------------------------------------------


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
    agent_id: str = ""
    finished: bool = False  # stamp completed_at (finish_turn's doing on the step-by-step path)


def record_turns(
    turns: Sequence[NewTurn],
    *,
    conversation: Conversation | None = None,
    title: str = "",
    owner: Any = None,
) -> tuple[Conversation, list[Turn]]:
    """Append whole turns, every event, attribution and payload included, to ``conversation``
    (or to a new conversation with ``title`` and ``owner``) in one transaction.

    The rows are what ``create_conversation`` + ``start_turn`` + ``append_events`` +
    ``finish_turn`` would write, with the same checks (provenance, registered end reasons and
    event kinds), written with one INSERT statement per table instead of going through the ORM
    row by row. Turns and events are numbered after what the conversation already holds,
    under its row lock.
    """
    conversation, made, _ = _record_turns(turns, conversation, title, owner)
    return conversation, made


def open_turns(
    conversation: Conversation, turns: Sequence[NewTurn]
) -> list[tuple[Turn, list[Event]]]:
    """``record_turns`` on an existing conversation, returning each turn with the events it
    was given, as written (seq order): what the live path publishes."""
    conversation, made, rows = _record_turns(turns, conversation, "", None)
    if rows is None:  # the ORM path wrote them, and left next_seq as the turn start read it
        conversation.next_seq = (
            Conversation.objects.values_list("next_seq", flat=True).get(pk=conversation.pk)
        )
        return [(turn, list(turn.events.order_by("seq"))) for turn in made]
    using = router.db_for_write(Event)
    return [(turn, rows.written(turn, using)) for turn in made]


def _record_turns(
    turns: Sequence[NewTurn], conversation: Conversation | None, title: str, owner: Any
) -> tuple[Conversation, list[Turn], _Rows | None]:
    using = router.db_for_write(Conversation)
    connection = connections[using]
    tables = _Tables.of(connection)
    if tables is None:  # the models no longer match the columns below: take the ORM path
        return (*_record_turns_orm(turns, conversation=conversation, title=title, owner=owner),
                None)
    with transaction.atomic(using=using), connection.cursor() as cursor:
        now = timezone.now()
        stamp = connection.ops.adapt_datetimefield_value(now)
        if conversation is None:
            conversation = _instance(Conversation, {
                "id": uuid7(), "owner_id": None, "title": storable(title)[:300],
                "created_at": now, "updated_at": now, "forked_from_id": None,
                "forked_at_turn": None, "next_seq": 1,
            })
            if owner is not None:
                conversation.owner = owner  # checked and cached as Conversation(owner=...) does
            index, first_seq, new = 0, 1, True
        else:
            index, first_seq = tables.lock(cursor, conversation.pk)
            new = False
        rows = _Rows(tables, conversation.pk, now, stamp)
        made: list[Turn] = []
        seq = first_seq
        for offset, spec in enumerate(turns):
            turn = _instance(Turn, {
                "id": uuid7(), "conversation_id": conversation.pk, "index": index + offset,
                "role": spec.role, "status": spec.status, "end_reason": spec.end_reason,
                "agent_id": spec.agent_id or (
                    Turn.default_agent_id(spec.provider, spec.model)
                    if spec.role == Turn.Role.AGENT else ""
                ),
                "provider": spec.provider, "model": spec.model,
                "responses": dumps(list(spec.responses)) if spec.responses else "[]",
                "created_at": now, "completed_at": now if spec.finished else None,
            })
            turn.conversation = conversation
            turn.validate_invariants()  # what Turn.save() checks
            rows.turn(turn)
            seq = rows.events(turn.pk, seq, spec.records)
            made.append(turn)
        conversation.next_seq = seq
        conversation.updated_at = now
        if new:
            tables.insert_conversation(cursor, conversation, stamp)
        else:
            tables.bump(cursor, conversation.pk, seq, stamp)
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


def _record_turns_orm(
    turns: Sequence[NewTurn], *, conversation: Conversation | None, title: str, owner: Any
) -> tuple[Conversation, list[Turn]]:
    with transaction.atomic():
        if conversation is None:
            conversation = create_conversation(title=title, owner=owner)
        made = []
        for spec in turns:
            turn = _start_turn_orm(conversation, spec)
            _append_events_orm(turn, list(spec.records))
            if spec.finished:
                finish_turn(turn, status=spec.status, end_reason=spec.end_reason,
                            responses=spec.responses)
            made.append(turn)
    return conversation, made


def _payload_values(payload: Payload) -> tuple[str, int, str]:
    """A payload value as stored: its JSON text, size in bytes and SHA-256 (see
    ProviderPayload.build)."""
    value = payload.value
    if isinstance(value, orjson.Fragment):
        contents = value.contents
        raw = contents if isinstance(contents, bytes) else contents.encode()
    else:
        raw = orjson.dumps(value)
    return raw.decode(), len(raw), hashlib.sha256(raw).hexdigest()


class _Rows:
    """The rows of one ``record_turns`` call, as parameter tuples in ``_Tables`` column order."""

    def __init__(self, tables: _Tables, conversation_id: Any, now: Any, stamp: Any) -> None:
        self.tables = tables
        self.now = now
        self.native = tables.native_uuid
        self.conversation = tables.uuid(conversation_id)
        self.stamp = stamp
        self.turns: list[tuple[Any, ...]] = []
        self.payloads: list[tuple[Any, ...]] = []
        self.event_rows: list[tuple[Any, ...]] = []
        self.attributions: list[tuple[Any, ...]] = []
        self.domains: dict[str, str] = {}

    def ids(self, count: int) -> list[Any]:
        """``count`` fresh ids (see ``conversations.ids``), as the database takes them."""
        if self.native:
            return [uuid.UUID(int=value) for value in uuid7_ints(count)]
        return [f"{value:032x}" for value in uuid7_ints(count)]

    def turn(self, turn: Turn) -> None:
        self.turns.append((
            self.tables.uuid(turn.pk), self.conversation, turn.index, turn.role, turn.status,
            turn.end_reason, turn.agent_id, turn.provider, turn.model, turn.responses,
            self.stamp, self.stamp if turn.completed_at is not None else None,
        ))

    def _payload(self, payload: Payload | None, payload_id: Any) -> Any:
        if payload is None:
            return None
        value, size, digest = _payload_values(payload)
        self.payloads.append((
            payload_id, payload.provider, payload.format, payload.version, value, size, digest,
            self.stamp,
        ))
        return payload_id

    def events(self, turn_id: Any, seq: int, records: Sequence[EventRecord]) -> int:
        """Rows for ``records`` numbered from ``seq``; returns the next seq."""
        turn_id = self.tables.uuid(turn_id)
        needed = len(records) * 2 + sum(len(r.attributions) for r in records)
        ids = iter(self.ids(needed))
        check = EVENT_KINDS.check
        domains = self.domains
        for record in records:
            check(record.kind)  # what Event.save() checks
            event_id = next(ids)
            self.event_rows.append((
                event_id, self.conversation, turn_id, seq, record.kind, record.text,
                record.incomplete, dumps(record.body), record.activity_id,
                self._payload(record.payload, next(ids)), self.stamp,
            ))
            seq += 1
            for ordinal, a in enumerate(record.attributions):
                domain = domains.get(a.url)
                if domain is None:
                    domain = domains[a.url] = url_domain(a.url)
                replay = self._payload(a.replay, next(ids)) if a.replay is not None else None
                self.attributions.append((
                    event_id, ordinal, a.url, domain, a.title, a.excerpt, a.start, a.end,
                    a.incomplete, replay,
                ))
        return seq

    def written(self, turn: Turn, using: str) -> list[Event]:
        """The events of ``turn`` this call wrote, in seq order."""
        events = []
        turn_id = self.tables.uuid(turn.pk)
        for row in (r for r in self.event_rows if r[2] == turn_id):
            event = _instance(Event, {
                "id": _as_uuid(row[0]), "conversation_id": turn.conversation_id,
                "turn_id": turn.pk, "seq": row[3], "kind": row[4], "text": row[5],
                "incomplete": row[6], "body": row[7], "activity_id": row[8],
                "payload_id": None if row[9] is None else _as_uuid(row[9]),
                "created_at": self.now,
            })
            event._state.adding = False
            event._state.db = using
            events.append(event)
        return events

    def write(self, cursor: Any) -> None:
        tables = self.tables
        for sql, rows in (
            (tables.turn_sql, self.turns),
            (tables.payload_sql, self.payloads),
            (tables.event_sql, self.event_rows),
            (tables.attribution_sql, self.attributions),
        ):
            if rows:
                cursor.executemany(sql, rows)


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


_COLUMNS: dict[type[Model], tuple[str, ...]] = {
    Conversation: ("id", "owner_id", "title", "created_at", "updated_at", "forked_from_id",
                   "forked_at_turn", "next_seq"),
    Turn: ("id", "conversation_id", "index", "role", "status", "end_reason", "agent_id",
           "provider", "model", "responses", "created_at", "completed_at"),
    ProviderPayload: ("id", "provider", "format", "version", "value", "size", "sha256",
                      "created_at"),
    Event: ("id", "conversation_id", "turn_id", "seq", "kind", "text", "incomplete", "body",
            "activity_id", "payload_id", "created_at"),
    # The auto primary key is left to the database.
    Attribution: ("event_id", "ordinal", "url", "domain", "title", "excerpt", "range_start",
                  "range_end", "incomplete", "replay_id"),
}


class _Tables:
    """The SQL ``record_turns`` runs on one database connection, built once per vendor."""

    _cache: dict[str, _Tables | None] = {}

    def __init__(self, connection: Any) -> None:
        quote = connection.ops.quote_name
        self.native_uuid = connection.features.has_native_uuid_field
        self.for_update = " FOR UPDATE" if connection.features.has_select_for_update else ""
        sql = {}
        for model, attnames in _COLUMNS.items():
            fields = {f.attname: f for f in model._meta.concrete_fields}
            columns = ", ".join(quote(fields[name].column) for name in attnames)
            marks = ", ".join(["%s"] * len(attnames))
            sql[model] = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"
        self.conversation_sql = sql[Conversation]
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
        where = f" WHERE {quote('id')} = %s"
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
    def of(cls, connection: Any) -> _Tables | None:
        """The statements for ``connection``; None when a model has columns they do not
        write (a field was added): then ``record_turns`` falls back to the ORM."""
        key = connection.alias
        if key not in cls._cache:
            if all(_columns_match(model, names) for model, names in _COLUMNS.items()):
                cls._cache[key] = cls(connection)
            else:
                log.warning("record_turns: the models changed; writing turns through the ORM")
                cls._cache[key] = None
        return cls._cache[key]

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

    def insert_conversation(self, cursor: Any, conversation: Conversation, stamp: Any) -> None:
        cursor.execute(self.conversation_sql, [
            self.uuid(conversation.pk), conversation.owner_id, conversation.title, stamp, stamp,
            None if conversation.forked_from_id is None else self.uuid(
                conversation.forked_from_id),
            conversation.forked_at_turn, conversation.next_seq,
        ])


def _update_returning(connection: Any) -> bool:
    if connection.vendor == "postgresql":
        return True
    if connection.vendor == "sqlite":
        import sqlite3

        return sqlite3.sqlite_version_info >= (3, 35)
    return False


def _columns_match(model: type[Model], attnames: tuple[str, ...]) -> bool:
    """Whether ``attnames`` are exactly the model's columns (but an auto primary key)."""
    pk = model._meta.pk
    expected = {
        f.attname for f in model._meta.concrete_fields
        if not (f is pk and f.get_internal_type() in {"AutoField", "BigAutoField"})
    }
    return expected == set(attnames)
