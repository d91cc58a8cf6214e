"""The rows and statements of the store's writes (``conversations.store``, the one writer).

Rows go through prepared INSERT statements, one ``executemany`` per table: 2.6x faster than
the ORM on ingest, measured (the tables an FTS5 trigger indexes on SQLite, search docs and
sources, take a multi-row INSERT instead: ``search.insert_indexed``). So ``COLUMNS`` must list
exactly the models' columns (``tests/conversations/test_store.py`` fails when a model and its
list differ), and the checks ``Model.save()`` would run (provenance, registered end reasons
and event kinds) run here. The columns derived from what is written (an event's activity id
and name from its body, an attribution's domain from its URL) are computed in one place
(``Rows.event`` and ``Rows.attribution``), so every way in stores the same rows.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
from django.db.models import Model
from django.utils import timezone

from conversations import search, source_index, warming
from conversations.ids import uuid7, uuid7_ints
from conversations.models import (
    Attribution,
    Conversation,
    Event,
    ProviderPayload,
    Turn,
    url_domain,
)
from streams.bodies import ActivityBody, Body, body_json
from streams.builder import INTEGRITY, EventRecord, storable
from streams.parts import Payload
from streams.registries import EVENT_KINDS

if TYPE_CHECKING:  # only a type here: the store imports this module
    from conversations.store import NewConversation

# record_fork's payload reuse (see there).
REUSE_PAYLOAD_BYTES = 1024  # smaller ones cost less to write again than to look up


def instance(model: type[Model], values: dict[str, Any]) -> Any:
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


class Rows:
    """The rows of one write, as parameter tuples in ``COLUMNS`` order."""

    def __init__(self, tables: Tables, connection: Any, conversation_id: Any) -> None:
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
        self.sources = source_index.Pending()  # and to the Sources pages' rows
        self.owner_id: Any = ...
        self.finished: list[Any] = []  # turns written finished: queued for rendering

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
        conversation = instance(Conversation, {
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
        self.sources.fresh = True
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
        self.sources.turn(self.tables.uuid(turn.pk), self.conversation_id, turn.role,
                          turn.provider, turn.model, turn.created_at)
        if turn.status != Turn.Status.STREAMING:
            self.finished.append(turn.pk)

    def _payload(self, payload: Payload, payload_id: Any) -> Any:
        value, size, digest = _payload_values(payload)
        if self.reuse_payloads and size >= REUSE_PAYLOAD_BYTES:
            # Looked up by the digest alone, its index, and the rest compared here: given every
            # column, SQLite chose the version's index (a few values for every payload) and
            # read each payload row past its value to the digest stored after it, for each
            # fork of an import (most of a 100 MB import's kernel time, reading the file).
            found = (
                ProviderPayload.objects.select_for_update()  # a delete waits for this write
                .filter(sha256=digest).order_by("pk")
                .values_list("id", "size", "provider", "format", "version")
            )
            wanted = (size, payload.provider, payload.format, payload.version)
            stored = next((row[0] for row in found if row[1:] == wanted), None)
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
        self.sources.event(event_id, turn_id, body)
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
        self.sources.attribution(event_id, url, title, integrity)

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
            event = instance(Event, values)
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
            if not rows:
                continue
            if self.connection.vendor == "postgresql":
                # A statement for many rows: executemany sends one a row, each bound and
                # quoted on its own (a recording's dozens of events: a fifth of its time).
                search.insert_rows(cursor, sql, rows)
            else:  # SQLite runs executemany's one prepared statement a row, in C
                cursor.executemany(sql, rows)
        # The admin's search of sources indexes them by trigger: few statements, not one a row.
        search.insert_indexed(cursor, tables.attribution_sql, self.attributions)
        self.sources.owner, self.sources.conversation = self.owner_id, self.conversation_id
        source_index.write(cursor, self.connection, self.sources)
        warming.queue(self.finished, connection=self.connection)


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


# The columns each INSERT writes, in the order ``Rows`` builds its tuples. Exactly the model's
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


class Tables:
    """The SQL the store runs on one database connection, built once per connection alias."""

    _cache: dict[str, Tables] = {}

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
        # Both read the owner under the row lock: the search counts are kept per owner.
        self.lock_sql = (
            f"SELECT {quote('next_seq')}, {quote('owner_id')} FROM {conversations_table} "
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
            f"{quote('updated_at')} = %s WHERE {quote('id')} = %s "
            f"RETURNING {quote('next_seq')}, {quote('owner_id')}"
        ) if _update_returning(connection) else None

    @classmethod
    def of(cls, connection: Any) -> Tables:
        tables = cls._cache.get(connection.alias)
        if tables is None:
            tables = cls._cache[connection.alias] = cls(connection)
        return tables

    def uuid(self, value: Any) -> Any:
        if not isinstance(value, uuid.UUID):
            value = uuid.UUID(str(value))
        return value if self.native_uuid else value.hex

    def lock(self, cursor: Any, conversation_id: Any) -> tuple[int, int, Any]:
        """Lock the conversation's row; return its next turn index, next event seq and
        owner."""
        key = self.uuid(conversation_id)
        cursor.execute(self.lock_sql, [key])
        row = cursor.fetchone()
        if row is None:
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        cursor.execute(self.count_sql, [key])
        return cursor.fetchone()[0], row[0], row[1]

    def reserve(self, cursor: Any, conversation_id: Any, count: int, stamp: Any
                ) -> tuple[int, Any]:
        """Reserve ``count`` seqs of the conversation (locking its row); return the first and
        the conversation's owner."""
        if self.reserve_sql is None:
            _, first, owner_id = self.lock(cursor, conversation_id)
            self.bump(cursor, conversation_id, first + count, stamp)
            return first, owner_id
        cursor.execute(self.reserve_sql, [count, stamp, self.uuid(conversation_id)])
        row = cursor.fetchone()
        if row is None:
            raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
        return row[0] - count, row[1]

    def bump(self, cursor: Any, conversation_id: Any, next_seq: int, stamp: Any) -> None:
        cursor.execute(self.bump_sql, [next_seq, stamp, self.uuid(conversation_id)])

    def insert_conversation(self, cursor: Any, conversation: Conversation, rows: Rows) -> None:
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
