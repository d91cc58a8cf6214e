"""What a write of the store adds to the list's indexes (``conversations.search``): the
search docs, facets and counts of one conversation, inserted in the store's transaction, and
what a rename, an owner change or a delete changes of them."""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connections

from conversations.domains import source_domains
from conversations.models import Conversation, ConversationFacet, Event, FacetCount, SearchDoc
from conversations.search.common import (
    _VALUE_LENGTH,
    COUNTED,
    DOMAIN,
    MODEL,
    PROVIDER,
    SEARCH_ACTIVITY,
    SERVED,
    SITE,
    _is_search,
    owner_key,
    served_value,
    sites,
    source_text,
)


class Pending:
    """What one write of the store adds to the indexes of one conversation (``store_rows.Rows``
    collects it while building rows; ``write`` stores it with them)."""

    def __init__(self) -> None:
        self.docs: list[tuple[str, str]] = []  # (source, body)
        # The conversation is created by this write: it has no facet yet, none to look up.
        self.fresh = False
        self.facets: dict[tuple[str, str], None] = {}  # ordered set of (kind, value)
        self._sources: set[tuple[str, str]] = set()
        # The list row's counts (``Conversation.turn_count`` ...): what this write adds.
        self.turns = 0
        self.citations = 0
        self.searches: set[str] = set()  # web_search activity ids (a search is counted once)

    def turn(self) -> None:
        self.turns += 1

    def citation(self) -> None:
        self.citations += 1

    def activity(self, activity_id: str, name: str) -> None:
        if name == SEARCH_ACTIVITY:
            self.searches.add(activity_id)

    def take_counts(self) -> tuple[int, int, int]:
        """The counts so far of a conversation this write creates, for its INSERT (so no
        UPDATE follows it); ``write`` adds only what comes after."""
        counts = (self.turns, self.citations, len(self.searches))
        self.turns = self.citations = 0
        self.searches = set()
        return counts

    def title(self, title: str) -> None:
        if title:
            self.docs.append((SearchDoc.Source.TITLE, title))

    def message(self, text: str) -> None:
        if text:
            self.docs.append((SearchDoc.Source.MESSAGE, text))

    def source(self, title: str, url: str, domain: str) -> None:
        if (title or url) and (title, url) not in self._sources:
            self._sources.add((title, url))
            self.docs.append((SearchDoc.Source.SOURCE, source_text(title, url)))
        for found in source_domains(url, title, domain):
            self.facets[(DOMAIN, found)] = None
            for site in sites(found):
                self.facets[(SITE, site)] = None

    def provenance(self, provider: str, model: str) -> None:
        """A turn's provenance (an agent turn's: ``Turn.validate_invariants``)."""
        if provider:
            self.facets[(PROVIDER, provider[:_VALUE_LENGTH])] = None
            self.facets[(SERVED, served_value(provider, model))] = None
        if model:
            self.facets[(MODEL, model[:_VALUE_LENGTH])] = None

    def __bool__(self) -> bool:
        return bool(self.docs or self.facets or self.turns or self.citations or self.searches)


class _Sql:
    """The statements, per connection alias."""

    _cache: dict[str, _Sql] = {}

    def __init__(self, connection: Any) -> None:
        q = connection.ops.quote_name
        docs, facets, counts = (q(m._meta.db_table) for m in (SearchDoc, ConversationFacet,
                                                              FacetCount))
        self.doc = f"INSERT INTO {docs} ({q('conversation_id')}, {q('source')}, {q('body')}) " \
                   "VALUES (%s, %s, %s)"
        self.facet = (f"INSERT INTO {facets} ({q('conversation_id')}, {q('kind')}, {q('value')})"
                      " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING")
        # Many facets in one statement that returns the ones it inserted (PostgreSQL, and
        # SQLite from 3.35); None: one statement a facet, its row count saying.
        self.facets_returning = (
            f"{self.facet} RETURNING {q('kind')}, {q('value')}"
        ) if connection.features.can_return_rows_from_bulk_insert else None
        self.count_up = (
            f"INSERT INTO {counts} ({q('owner_key')}, {q('kind')}, {q('value')}, "
            f"{q('conversations')}) VALUES (%s, %s, %s, %s) ON CONFLICT ({q('owner_key')}, "
            f"{q('kind')}, {q('value')}) DO UPDATE SET {q('conversations')} = "
            f"{counts}.{q('conversations')} + excluded.{q('conversations')}"
        )
        self.count_down = (
            f"UPDATE {counts} SET {q('conversations')} = {q('conversations')} - %s "
            f"WHERE {q('owner_key')} = %s AND {q('kind')} = %s AND {q('value')} = %s"
        )
        self.count_prune = (f"DELETE FROM {counts} WHERE {q('owner_key')} = %s "
                            f"AND {q('conversations')} <= 0")
        self.existing = (f"SELECT {q('kind')}, {q('value')} FROM {facets} "
                         f"WHERE {q('conversation_id')} = %s")
        self.owner = (f"SELECT {q('owner_id')} FROM {q(Conversation._meta.db_table)} "
                      f"WHERE {q('id')} = %s")
        self.counts = (f"UPDATE {q(Conversation._meta.db_table)} SET "
                       f"{q('turn_count')} = {q('turn_count')} + %s, "
                       f"{q('citation_count')} = {q('citation_count')} + %s, "
                       f"{q('search_count')} = {q('search_count')} + %s WHERE {q('id')} = %s")
        # Which of a write's search ids the conversation's log holds already (through the
        # activity id index: a provider's id names a row or two, its transitions).
        self.searched = (f"SELECT DISTINCT {q('activity_id')} FROM {q(Event._meta.db_table)} e "
                         f"WHERE {_is_search(connection)} AND e.{q('conversation_id')} = %s "
                         f"AND e.{q('activity_id')} IN ")

    @classmethod
    def of(cls, connection: Any) -> _Sql:
        sql = cls._cache.get(connection.alias)
        if sql is None:
            sql = cls._cache[connection.alias] = cls(connection)
        return sql


# Parameters per statement in ``insert_indexed``: under SQLite's and PostgreSQL's limits
# (32,766 and 65,535).
_PARAMS_PER_STATEMENT = 30_000


# Inside ``inserts_gathered``: the rows ``insert_indexed`` was given, by connection and
# statement; and the facet counts to add, by connection, owner key, kind and value.
_GATHERED: ContextVar[dict[tuple[str, str], list[Sequence[Any]]] | None] = ContextVar(
    "search_inserts_gathered", default=None)
_COUNTS_GATHERED: ContextVar[Counter[tuple[str, int, str, str]] | None] = ContextVar(
    "search_counts_gathered", default=None)


@contextmanager
def inserts_gathered() -> Iterator[None]:
    """Inside (a transaction of many writes: ``store.all_or_nothing``), ``insert_indexed``
    gathers its rows, and they are inserted together when the block ends without an error:
    a statement per table for the whole block, so FTS5 writes its index out once, not once
    a write. The facet counts the writes add are gathered too, summed, and added last, just
    before the commit: an owner's count row is one row every write of that owner updates,
    and its lock is held from the update to the commit. Taken first, it made concurrent
    recordings wait for each other's whole transaction (on PostgreSQL, the capture log's
    recording threads spent most of their time on that lock)."""
    gathered: dict[tuple[str, str], list[Sequence[Any]]] = {}
    counts: Counter[tuple[str, int, str, str]] = Counter()
    token, counts_token = _GATHERED.set(gathered), _COUNTS_GATHERED.set(counts)
    try:
        yield
    finally:
        _GATHERED.reset(token)
        _COUNTS_GATHERED.reset(counts_token)
    for (alias, sql), rows in gathered.items():
        with connections[alias].cursor() as cursor:
            insert_rows(cursor, sql, rows)
    by_alias: dict[str, list[tuple[int, str, str, int]]] = defaultdict(list)
    # In key order: two transactions that add to the same rows lock them in the same order.
    for (alias, owner, kind, value), n in sorted(counts.items()):
        by_alias[alias].append((owner, kind, value, n))
    for alias, rows in by_alias.items():
        connection = connections[alias]
        with connection.cursor() as cursor:
            insert_rows(cursor, _Sql.of(connection).count_up, rows)


def _count_up(cursor: Any, sql: _Sql, owner: int, facets: Sequence[tuple[str, str]]) -> None:
    """Each of ``facets`` one conversation more in ``owner``'s counts: now, or inside
    ``inserts_gathered`` at its end."""
    gathered = _COUNTS_GATHERED.get()
    if gathered is not None:
        gathered.update((cursor.db.alias, owner, kind, value) for kind, value in facets)
        return
    insert_rows(cursor, sql.count_up, [(owner, kind, value, 1)  # in key order, as above
                                       for kind, value in sorted(set(facets))])


def insert_indexed(cursor: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """``rows`` through ``sql`` (an ``INSERT ... VALUES (%s, ...)`` of one row) in as few
    statements as can hold them, for a table an FTS5 trigger indexes on SQLite (search docs,
    sources): SQLite opens a statement journal for each statement that fires a trigger, and
    FTS5 writes its pending index out at each, so ``executemany`` (a statement per row) made
    a segment per row (a store's docs and sources cost 5x what FTS5 itself takes). Inside
    ``inserts_gathered``, the rows wait for the end of that block."""
    gathered = _GATHERED.get()
    if gathered is not None:
        gathered.setdefault((cursor.db.alias, sql), []).extend(rows)
        return
    insert_rows(cursor, sql, rows)


def insert_rows(cursor: Any, sql: str, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``rows`` through ``sql`` (an ``INSERT ... VALUES (%s, ...)`` of one row, and what
    follows it: ``ON CONFLICT ...``, ``RETURNING ...``), now, in as few statements as the
    database's parameter limit allows; returns what the statements returned (``RETURNING``),
    else nothing. An upsert's rows must differ in its conflict target (a statement may not
    update a row twice)."""
    returned: list[tuple[Any, ...]] = []
    if not rows:
        return returned
    head, _, marks = sql.rpartition(" VALUES ")
    close = _closing(marks)
    marks, tail = marks[:close + 1], marks[close + 1:]
    limit = _PARAMS_PER_STATEMENT
    if cursor.db.vendor == "sqlite":  # 999 before SQLite 3.32 (Django supports 3.31)
        limit = min(limit, cursor.db.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    per = max(1, limit // len(rows[0]))
    for start in range(0, len(rows), per):
        chunk = rows[start:start + per]
        cursor.execute(f"{head} VALUES {', '.join([marks] * len(chunk))}{tail}",
                       [value for row in chunk for value in row])
        if cursor.description is not None:  # the statement returns rows
            returned.extend(cursor.fetchall())
    return returned


def _closing(marks: str) -> int:
    """Where the row's ``( ... )`` at the start of ``marks`` closes (it may hold a
    parenthesized expression)."""
    depth = 0
    for at, char in enumerate(marks):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at
    raise ValueError(f"no row of values in {marks!r}")


def write(cursor: Any, connection: Any, conversation_id: Any, pending: Pending,
          owner_id: Any = ...) -> None:
    """Store ``pending`` for ``conversation_id`` (as the database takes the id), inside the
    store's transaction. ``owner_id``: the conversation's owner when the caller knows it."""
    if not pending:
        return
    sql = _Sql.of(connection)
    _count(cursor, sql, conversation_id, pending)
    if pending.docs:
        insert_indexed(cursor, sql.doc, [(conversation_id, source, body)
                                         for source, body in pending.docs])
    new: list[tuple[str, str]] = []
    if pending.fresh:  # all its facets are new
        insert_rows(cursor, sql.facet, [(conversation_id, kind, value)
                                        for kind, value in pending.facets])
        new = [(kind, value) for kind, value in pending.facets if kind in COUNTED]
    elif pending.facets and sql.facets_returning:
        # What the statement inserted is what is new (a facet the conversation has, or a
        # concurrent writer inserted, is a no-op here and is not counted again).
        inserted = insert_rows(cursor, sql.facets_returning,
                               [(conversation_id, kind, value) for kind, value in pending.facets])
        new = [(kind, value) for kind, value in inserted if kind in COUNTED]
    elif pending.facets:
        cursor.execute(sql.existing, [conversation_id])
        known = set(cursor.fetchall())
        for kind, value in pending.facets:
            if (kind, value) in known:
                continue
            # One at a time: only a row this statement inserted counts (a concurrent writer's
            # insert of the same facet makes it a no-op here).
            cursor.execute(sql.facet, [conversation_id, kind, value])
            if cursor.rowcount == 1 and kind in COUNTED:
                new.append((kind, value))
    if new:
        if owner_id is ...:
            cursor.execute(sql.owner, [conversation_id])
            row = cursor.fetchone()
            owner_id = row[0] if row else None
        _count_up(cursor, sql, owner_key(owner_id), new)


def _count(cursor: Any, sql: _Sql, conversation_id: Any, pending: Pending) -> None:
    """Add ``pending``'s turns, citations and searches to the conversation's counts. Runs
    before the write's events are inserted: a search id its log holds already (the search's
    "completed" after its "started") is not counted again."""
    searches = pending.searches
    if searches and not pending.fresh:
        ids = sorted(searches)
        cursor.execute(sql.searched + f"({', '.join(['%s'] * len(ids))})",
                       [conversation_id, *ids])
        searches = searches - {row[0] for row in cursor.fetchall()}
    if pending.turns or pending.citations or searches:
        cursor.execute(sql.counts, [pending.turns, pending.citations, len(searches),
                                    conversation_id])


def forget(conversation_id: Any, owner_id: int | None) -> None:
    """Before a conversation is deleted: take its facets out of the counts (its docs and
    facet rows go with it)."""
    move_counts(conversation_id, owner_id, None, remove=True)


def move_counts(conversation_id: Any, old_owner: int | None, new_owner: int | None, *,
                remove: bool = False) -> None:
    """The conversation's counted facets move from ``old_owner``'s counts to ``new_owner``'s
    (or, ``remove``, leave the counts; its docs and facet rows are deleted with it, CASCADE)."""
    connection = connections[ConversationFacet.objects.db]
    sql = _Sql.of(connection)
    facets = list(ConversationFacet.objects.filter(conversation_id=conversation_id,
                                                   kind__in=COUNTED)
                  .values_list("kind", "value"))
    if not facets:
        return
    with connection.cursor() as cursor:
        old = owner_key(old_owner)
        cursor.executemany(sql.count_down, [(1, old, kind, value) for kind, value in facets])
        cursor.execute(sql.count_prune, [old])
        if not remove:
            cursor.executemany(sql.count_up, [(owner_key(new_owner), kind, value, 1)
                                              for kind, value in facets])


def retitle(conversation_id: Any, title: str) -> None:
    """The conversation's title doc follows a rename."""
    SearchDoc.objects.filter(conversation_id=conversation_id,
                             source=SearchDoc.Source.TITLE).delete()
    if title:
        SearchDoc.objects.create(conversation_id=conversation_id, source=SearchDoc.Source.TITLE,
                                 body=title)
