"""The conversation list's indexes: text search, facets (cited domains, providers, models) and
the filter choices, kept in step with the event log by its one writer (``conversations.store``).

Three tables, all derived (``rebuild`` recomputes them from the log; a test checks that what the
writes left equals a rebuild):

- ``SearchDoc``: one row per searchable text of a conversation — its title, each message's
  text, each cited source's title and URL. **Substring semantics** (what ``icontains`` gave
  before, and what people expect of a search box that finds "news.example" or half a word), so
  both databases index trigrams rather than words: PostgreSQL a GIN ``gin_trgm_ops`` index on
  ``body_folded``, a lower-cased copy of ``body`` it keeps (queried with ``LIKE lower('%q%')``,
  which that index serves: ``FOLDED``), SQLite an FTS5 table with the
  ``trigram`` tokenizer over the same rows (queried with a phrase ``MATCH``). ``tsvector`` was
  not chosen: it matches stemmed words, so "news.example", "xample" or a URL fragment would no
  longer be found, and the two databases would disagree. Queries under three characters have no
  trigram: they look at conversation titles only (``filtered``), never at every message.
  The FTS5 table is a *contentless* index of ``SearchDoc`` whose rowids name the doc's
  conversation: ``search_key << 32 | doc id``, where ``Conversation.search_key`` is a small
  integer the writer gives each conversation on SQLite. A search's match set is then read from
  the FTS index alone (``rowid >> 32``), and the list's order indexes end with the key, so
  walking the list in order tests each conversation from the index: no doc row, no
  conversation row is read until the page's own rows. (Through doc ids, mapping each matching
  doc to its conversation and testing UUIDs was most of a common word's search: 21 -> 9 ms
  for "officials" at 100k conversations, interleaved, raw SQLite.) SQLite keeps the FTS table
  in step with two triggers on ``SearchDoc`` (insert, delete), the SQLite way of declaring an
  index on another table: the writer writes ``SearchDoc`` rows and nothing else, as it does on
  PostgreSQL, where the GIN index follows the table by itself (and the key stays NULL).
- ``ConversationFacet``: (conversation, kind, value) — each cited host (``domain``), each host
  *and its parent domains* of two labels or more (``site``: what the cited-domain filter matches,
  "example.fr" finds "meteo.example.fr"), each provider and model of its turns. A filter is one
  indexed ``IN (SELECT conversation_id ...)``, never a subquery per conversation.
- ``FacetCount``: per owner, kind and value, how many conversations have it — the filter
  choices, read without aggregating the store. Incremented when a facet row is new, decremented
  when a conversation is deleted, moved when an owner changes.

And a list row's counts, columns of the conversation (``turn_count``, ``citation_count``,
``search_count``: distinct web_search activity ids), added to by each write (``_count``), so
a row costs the same whatever its conversation's size.
"""

from __future__ import annotations

import html
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, BooleanField, F, Func, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.lookups import In
from django.utils.safestring import SafeString, mark_safe

from conversations.domains import source_domains
from conversations.models import (
    Attribution,
    Conversation,
    ConversationFacet,
    Event,
    FacetCount,
    SearchDoc,
    Turn,
)
from conversations.rendering.plain import plain_text
from streams.bodies import ActivityBody

DOMAIN, SITE, PROVIDER, MODEL = "domain", "site", "provider", "model"
# (provider, model) of the turns (agent turns: only they have one), one facet per pair in the
# order the turns first used it (facet ids are in insertion order): a list row's provenance
# chips, read in a query bounded by the pairs, not by the turns (the 5,000-turn
# conversation's 2,500 agent turns were 9 ms of staff's list page 1).
SERVED = "served"
_PAIR = "\t"  # between provider and model in a served facet (a provider is our own name)
SEARCH_ACTIVITY = "web_search"  # the hosted activity a list row counts as a search
COUNTED = (DOMAIN, PROVIDER, MODEL)  # the kinds the filter choices list
_VALUE_LENGTH = ConversationFacet._meta.get_field("value").max_length
FTS_TABLE = "conversations_searchdoc_fts"
SOURCE_FTS_TABLE = "conversations_attribution_fts"  # the admin's search of sources (0012)
# SQLite: an FTS rowid is the conversation's search key shifted by this, or'ed with the doc id
# (doc ids stay under 2^32: the insert trigger refuses one that does not).
KEY_SHIFT = 32
SEARCH_KEY_INDEX = "conversation_search_key"  # unique: one conversation per key

# -- what a write indexes ------------------------------------------------------------------------


def sites(domain: str) -> list[str]:
    """The host and each parent domain of at least two labels: what a cited-domain filter for
    any of them matches. An IP address is only itself."""
    if not domain:
        return []
    if ":" in domain or domain.replace(".", "").isdigit():
        return [domain]
    labels = domain.split(".")
    return [".".join(labels[i:]) for i in range(max(len(labels) - 1, 1))]


def served_value(provider: str, model: str) -> str:
    """A served facet's value: the pair, cut to the column (as ``rebuild``'s SUBSTR cuts it)."""
    return f"{provider}{_PAIR}{model}"[:_VALUE_LENGTH]


def provenance_chips(conversation_ids: list[Any], using: str = "default"
                     ) -> dict[Any, list[tuple[str, str]]]:
    """Each conversation's (provider, model) pairs, in the order its agent turns first used
    them (the served facets)."""
    chips: dict[Any, list[tuple[str, str]]] = {}
    rows = (ConversationFacet.objects.using(using)
            .filter(conversation_id__in=conversation_ids, kind=SERVED)
            .order_by("conversation_id", "id").values_list("conversation_id", "value"))
    for conversation_id, value in rows:
        provider, _, model = value.partition(_PAIR)
        chips.setdefault(conversation_id, []).append((provider, model))
    return chips


def source_text(title: str, url: str) -> str:
    """The searchable text of a cited source."""
    return f"{title}\n{url}"


class Pending:
    """What one write of the store adds to the indexes of one conversation (``store._Rows``
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
# statement.
_GATHERED: ContextVar[dict[tuple[str, str], list[Sequence[Any]]] | None] = ContextVar(
    "search_inserts_gathered", default=None)


@contextmanager
def inserts_gathered() -> Iterator[None]:
    """Inside (a transaction of many writes: ``store.all_or_nothing``), ``insert_indexed``
    gathers its rows, and they are inserted together when the block ends without an error:
    a statement per table for the whole block, so FTS5 writes its index out once, not once
    a write."""
    gathered: dict[tuple[str, str], list[Sequence[Any]]] = {}
    token = _GATHERED.set(gathered)
    try:
        yield
    finally:
        _GATHERED.reset(token)
    for (alias, sql), rows in gathered.items():
        with connections[alias].cursor() as cursor:
            _insert_rows(cursor, sql, rows)


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
    _insert_rows(cursor, sql, rows)


def _insert_rows(cursor: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return
    head, _, marks = sql.rpartition(" VALUES ")
    limit = _PARAMS_PER_STATEMENT
    if cursor.db.vendor == "sqlite":  # 999 before SQLite 3.32 (Django supports 3.31)
        limit = min(limit, cursor.db.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    per = max(1, limit // len(rows[0]))
    for start in range(0, len(rows), per):
        chunk = rows[start:start + per]
        cursor.execute(f"{head} VALUES {', '.join([marks] * len(chunk))}",
                       [value for row in chunk for value in row])


def owner_key(owner_id: int | None) -> int:
    """``FacetCount.owner_key``: the owner's id, 0 for a conversation without one."""
    return owner_id or 0


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
    if pending.fresh:
        cursor.executemany(sql.facet, [(conversation_id, kind, value)
                                       for kind, value in pending.facets])
        new = [(kind, value) for kind, value in pending.facets if kind in COUNTED]
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
        cursor.executemany(sql.count_up, [(owner_key(owner_id), kind, value, 1)
                                          for kind, value in new])


def _is_search(connection: Any) -> str:
    """SQL: the event aliased ``e`` is a search a list row counts (by its activity id)."""
    q = connection.ops.quote_name
    return (f"e.{q('kind')} = '{ActivityBody.kind}' AND "
            f"e.{q('activity_name')} = '{SEARCH_ACTIVITY}'")


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


# -- reading -------------------------------------------------------------------------------------


MIN_QUERY = 3  # characters: a trigram

# PostgreSQL: the columns searched, each with a lower-cased copy that the database keeps (a
# generated column) and a trigram index of that copy. A trigram match is rechecked row by row,
# and ILIKE lower-cases each candidate's text again for that: 80 ms of a search for
# "disclosure" at 100k conversations (6,250 docs), 27 ms with LIKE on the folded copy.
FOLDED = {SearchDoc: ("body",), Attribution: ("url", "title")}


def folded(column: str) -> str:
    """The name of ``column``'s lower-cased copy (PostgreSQL, ``FOLDED``)."""
    return f"{column}_folded"


def _folded_index(model: type[Any], column: str) -> str:
    return f"{model._meta.model_name}_{column}_folded_trgm"


def source_folded_matches(word: str, using: str = "default") -> Q | None:
    """PostgreSQL: the sources (``Attribution``) with ``word`` in their URL or title,
    case-insensitively, through the folded copies' trigram indexes (None elsewhere)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    table = connection.ops.quote_name(Attribution._meta.db_table)
    pattern = _like(word)
    return Q(RawSQL(f"({_contains(connection, 'url', table)} OR "
                    f"{_contains(connection, 'title', table)})", [pattern, pattern],
                    output_field=BooleanField()))


def source_matches(query: str, limit: int, using: str = "default"
                   ) -> tuple[int, RawSQL] | None:
    """How many sources (``Attribution``) have ``query`` in their URL or title
    (case-insensitive), counted through SQLite's FTS index of them (migration 0012) up to
    ``limit + 1``, and SQL for their ids, for ``pk__in`` (all of them when the count is at most
    ``limit``). None where there is no such index to ask (PostgreSQL's trigram indexes serve
    ``icontains`` as it is) or the query is shorter than a trigram.

    The ids are read with the count, in one pass of the index, as a JSON array the list's
    query takes back (a second phrase match for the page was a third of a rare word's list:
    9.8 -> 6.9 ms for a word in 3,125 of 384k sources). They are worth it for a rare word only:
    a common one's first page is found sooner by reading the list in order and testing each
    source (most pass) than through a list of every match (all 384k for "https": 430 ms
    against 40)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or len(query) < MIN_QUERY:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), json_group_array(rowid) FROM ({_SOURCE_MATCH} "
                       "LIMIT %s)", [_phrase(query), limit + 1])
        count, ids = cursor.fetchone()
    return count, RawSQL("SELECT value FROM json_each(%s)", [ids])


_SOURCE_MATCH = f"SELECT rowid FROM {SOURCE_FTS_TABLE} WHERE {SOURCE_FTS_TABLE} MATCH %s"


def _phrase(query: str) -> str:
    """``query`` as one FTS5 phrase: with the trigram tokenizer, the substring itself."""
    return '"' + query.replace('"', '""') + '"'


def _like(query: str) -> str:
    return "%" + re.sub(r"([\\%_])", r"\\\1", query) + "%"


def _contains(connection: Any, column: str, of: str = "") -> str:
    """SQL: ``column`` (of ``of``, a table's alias or quoted name) holds the ``_like`` pattern
    given as the one parameter, case-insensitively. PostgreSQL reads the column's folded copy
    (see ``FOLDED``) and folds the pattern with the same ``lower``: what ``ILIKE`` finds."""
    q = connection.ops.quote_name
    prefix = f"{of}." if of else ""
    if connection.vendor == "postgresql":
        return f"{prefix}{q(folded(column))} LIKE lower(%s) ESCAPE '\\'"
    return f"{prefix}{q(column)} LIKE %s ESCAPE '\\'"


def matching(query: str, using: str = "default") -> Q:
    """The conversations with a doc containing ``query`` (case-insensitive), as a filter."""
    connection = connections[using]
    if connection.vendor == "sqlite" and len(query) >= MIN_QUERY:
        # The match set as search keys, read from the FTS rowids alone.
        return _keyed(RawSQL(f"SELECT rowid >> {KEY_SHIFT} FROM {FTS_TABLE} WHERE "
                             f"{FTS_TABLE} MATCH %s", [_phrase(query)]))
    q = connection.ops.quote_name
    docs = q(SearchDoc._meta.db_table)
    return Q(pk__in=RawSQL(f"SELECT d.{q('conversation_id')} FROM {docs} d WHERE "
                           f"{_contains(connection, 'body', 'd')}{_apart(connection)}",
                           [_like(query)]))


def _keyed(keys: RawSQL) -> Q:
    """SQLite: the conversations whose search key is one of ``keys``. The unary + keeps
    SQLite from looking each key up in its unique index and sorting the matches (what it
    picks for staff's list, with no owner to narrow by: 13 ms for a word in 3,125
    conversations, unbounded for a common one); the list's order index is walked instead,
    testing each key there, as for an owner's list: at most the whole index (about 14 ms at
    100k), and a common word's page is found at once."""
    unindexed = Func(F("search_key"), template="+%(expressions)s",
                     output_field=BigIntegerField())
    return Q(In(unindexed, keys))


def counted_matches(query: str, limit: int, using: str = "default") -> tuple[int, Q] | None:
    """How many conversations have a doc containing ``query``, counted through SQLite's FTS
    index up to ``limit + 1``, and the filter for them (their keys, read in the same pass, when
    there are at most ``limit``; else ``matching``). None off SQLite or under a trigram.

    For the admin's list of every conversation, counted as well as paged: one pass of the
    index, where the count and the page each walked the list testing every row against a
    phrase match of their own (the page 42 -> 23 ms for "disclosure", in 3,125 of 100k
    conversations)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or len(query) < MIN_QUERY:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), json_group_array(k) FROM (SELECT DISTINCT rowid >> "
                       f"{KEY_SHIFT} AS k FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT %s)",
                       [_phrase(query), limit + 1])
        count, keys = cursor.fetchone()
    if count > limit:
        return count, matching(query, using)
    return count, _keyed(RawSQL("SELECT value FROM json_each(%s)", [keys]))


def any_match(query: str, using: str = "default") -> bool:
    """Does any doc contain ``query``? On SQLite, one probe of the FTS index (the first
    match, well under a millisecond either way); elsewhere True (PostgreSQL computes the
    match set once, from its own index, and finds it empty as fast)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or len(query) < MIN_QUERY:
        return True
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT 1",
                       [_phrase(query)])
        return cursor.fetchone() is not None


def with_facet(kind: str, value: str, using: str = "default") -> RawSQL:
    """SQL for the ids of the conversations having the facet, for ``pk__in``."""
    connection = connections[using]
    q = connection.ops.quote_name
    return RawSQL(f"SELECT {q('conversation_id')} FROM {q(ConversationFacet._meta.db_table)} "
                  f"WHERE {q('kind')} = %s AND {q('value')} = %s{_apart(connection)}",
                  [kind, value])


def _apart(connection: Any) -> str:
    """Keep PostgreSQL from folding the match set into a semi-join that probes it once per
    conversation of the list's order (what it picks when the matches look common but sit
    far down the order: seconds at 10k). ``OFFSET 0`` makes it a hashed subplan, computed once
    from its own index. SQLite computes an IN list once already."""
    return " OFFSET 0" if connection.vendor == "postgresql" else ""


def text_matches(query: str, using: str = "default") -> Q:
    """The conversations a search for ``query`` finds, as a filter (the list's search box, each
    word of the admin's): those with a doc containing it (``matching``)."""
    if len(query) < MIN_QUERY:
        # Shorter than a trigram: no index can answer it, and it matches nearly every text;
        # it looks at titles only (one row per conversation), not at every message.
        return Q(title__icontains=query)
    if not any_match(query, using):
        # Nothing matches: no list query at all (an empty ``pk__in`` is never sent). SQLite
        # would otherwise walk the whole order index testing each conversation against the
        # empty match set.
        return Q(pk__in=[])
    return matching(query, using)


def filtered(qs: QuerySet[Conversation], *, query: str = "", provider: str = "",
             model: str = "", domain: str = "") -> QuerySet[Conversation]:
    """``qs`` narrowed by the list's filters, each through its index. ``domain`` is a host name,
    lower-cased, without "www." (it matches that host and its subdomains)."""
    if query:
        qs = qs.filter(text_matches(query, qs.db))
    if provider:
        qs = qs.filter(pk__in=with_facet(PROVIDER, provider, qs.db))
    if model:
        qs = qs.filter(pk__in=with_facet(MODEL, model, qs.db))
    if domain:
        qs = qs.filter(pk__in=with_facet(SITE, domain, qs.db))
    return qs


def choices(user: Any, domains: int = 50) -> dict[str, list[str]]:
    """The filter choices for what ``user`` sees: providers, models, and the most cited-in
    domains (by how many conversations cite them), read from the maintained counts."""
    counts = FacetCount.objects.filter(conversations__gt=0)
    if not getattr(user, "is_authenticated", False):
        return {"providers": [], "models": [], "domains": []}
    if not user.is_staff:
        counts = counts.filter(owner_key=user.pk)
    out: dict[str, list[str]] = {}
    for kind, name in ((PROVIDER, "providers"), (MODEL, "models")):
        out[name] = sorted(set(counts.filter(kind=kind).values_list("value", flat=True)))
    if user.is_staff:
        from django.db.models import Sum

        top = (counts.filter(kind=DOMAIN).values("value").annotate(n=Sum("conversations"))
               .order_by("-n", "value").values_list("value", flat=True))
    else:
        top = (counts.filter(kind=DOMAIN).order_by("-conversations", "value")
               .values_list("value", flat=True))
    out["domains"] = list(top[:domains])
    return out


SNIPPET_CONTEXT = 70  # characters either side of the match


def snippet(body: str, query: str) -> SafeString | None:
    """``body`` around the first case-insensitive occurrence of ``query``, escaped, with the
    match in ``<mark>``; None if it does not occur."""
    found = re.search(re.escape(query), body, re.IGNORECASE)
    if found is None:
        return None
    start, end = found.span()
    left = max(0, start - SNIPPET_CONTEXT)
    right = min(len(body), end + SNIPPET_CONTEXT)
    if left > 0:  # start on a word
        space = body.find(" ", left, start)
        left = space + 1 if space != -1 else left
    if right < len(body):
        space = body.rfind(" ", end, right)
        right = space if space != -1 else right

    def clean(text: str) -> str:
        return html.escape(" ".join(text.split()), quote=True)

    before, match, after = body[left:start], body[start:end], body[end:right]
    lead = "…" if left > 0 else ""
    tail = "…" if right < len(body) else ""
    # Whitespace collapsed per piece; keep a space where a piece ended on one.
    sep_before = " " if before[-1:].isspace() else ""
    sep_after = " " if after[:1].isspace() else ""
    return mark_safe(f"{lead}{clean(before)}{sep_before}<mark>{clean(match)}</mark>"
                     f"{sep_after}{clean(after)}{tail}")


def cut(text: str, limit: int) -> tuple[str, str]:
    """What a list row shows of ``text`` in at most ``limit`` characters: its head, and the
    ellipsis that follows it ("" when the text is whole)."""
    return (text, "") if len(text) <= limit else (text[:limit - 1], "…")


def marked_head(text: str, query: str, limit: int) -> SafeString | None:
    """``text`` as a list row shows it (``cut``), escaped, with the first case-insensitive
    occurrence of ``query`` in ``<mark>``; None if no whole occurrence is in what is shown
    (the row's snippet then shows the match)."""
    head, tail = cut(text, limit)
    found = re.search(re.escape(query), head, re.IGNORECASE) if query else None
    if found is None:
        return None
    start, end = found.span()
    return mark_safe(f"{html.escape(head[:start], quote=True)}<mark>"
                     f"{html.escape(head[start:end], quote=True)}</mark>"
                     f"{html.escape(head[end:], quote=True)}{tail}")


def snippets(conversation_ids: Iterable[Any], query: str,
             using: str = "default") -> dict[Any, SafeString]:
    """A snippet of the first message or source matching ``query`` in each conversation (the
    title is shown anyway): one query for the page, reading only its conversations' docs."""
    ids = list(conversation_ids)
    if not ids:
        return {}
    connection = connections[using]
    q = connection.ops.quote_name
    field = SearchDoc._meta.get_field("conversation")
    keys = [field.get_db_prep_value(pk, connection) for pk in ids]
    marks = ", ".join(["%s"] * len(keys))
    sql = (
        f"SELECT {q('conversation_id')}, {q('body')} FROM (SELECT {q('conversation_id')}, "
        f"{q('body')}, ROW_NUMBER() OVER (PARTITION BY {q('conversation_id')} ORDER BY "
        f"{q('id')}) AS n FROM {q(SearchDoc._meta.db_table)} WHERE {q('conversation_id')} "
        f"IN ({marks}) AND {q('source')} <> %s AND {_contains(connection, 'body')}) first "
        "WHERE n = 1"
    )
    by_key = {str(key): pk for key, pk in zip(keys, ids, strict=True)}
    out: dict[Any, SafeString] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [*keys, SearchDoc.Source.TITLE, _like(query)])
        for key, body in cursor.fetchall():
            # The passage as the reader sees it: without its markdown syntax, unless the
            # match is in that syntax.
            marked = snippet(plain_text(body), query) or snippet(body, query)
            pk = by_key.get(str(key))
            if marked is not None and pk is not None:
                out[pk] = marked
    return out


# -- rebuilding from the log ---------------------------------------------------------------------


def rebuild(using: str = "default", *, counts: bool = True) -> None:
    """Recompute every index table and (``counts``) the conversations' list counts from the
    event log (the migrations' backfill; also what a test compares the incrementally kept
    tables with)."""
    connection = connections[using]
    q = connection.ops.quote_name
    t = {m: q(m._meta.db_table) for m in (SearchDoc, ConversationFacet, FacetCount, Conversation,
                                          Event, Attribution, Turn)}
    with connection.cursor() as cursor:
        for model in (SearchDoc, ConversationFacet, FacetCount):
            cursor.execute(f"DELETE FROM {t[model]}")
        if connection.vendor == "sqlite":
            # Whatever the deletes' triggers did not find (an index out of step) goes too.
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('delete-all')")
        insert_doc = (f"INSERT INTO {t[SearchDoc]} ({q('conversation_id')}, {q('source')}, "
                      f"{q('body')}) ")
        cursor.execute(insert_doc + f"SELECT {q('id')}, %s, {q('title')} FROM "
                       f"{t[Conversation]} WHERE {q('title')} <> ''", [SearchDoc.Source.TITLE])
        cursor.execute(insert_doc + f"SELECT {q('conversation_id')}, %s, {q('text')} FROM "
                       f"{t[Event]} WHERE {q('kind')} = 'message' AND {q('text')} <> '' "
                       f"ORDER BY {q('conversation_id')}, {q('seq')}",
                       [SearchDoc.Source.MESSAGE])
        cursor.execute(insert_doc + f"SELECT DISTINCT e.{q('conversation_id')}, %s, "
                       f"a.{q('title')} || %s || a.{q('url')} FROM {t[Attribution]} a "
                       f"JOIN {t[Event]} e ON e.{q('id')} = a.{q('event_id')} "
                       f"WHERE a.{q('title')} <> '' OR a.{q('url')} <> ''",
                       [SearchDoc.Source.SOURCE, "\n"])
        insert_facet = (f"INSERT INTO {t[ConversationFacet]} ({q('conversation_id')}, "
                        f"{q('kind')}, {q('value')}) ")
        for kind in (PROVIDER, MODEL):
            cursor.execute(insert_facet + f"SELECT DISTINCT {q('conversation_id')}, %s, "
                           f"SUBSTR({q(kind)}, 1, {_VALUE_LENGTH}) FROM {t[Turn]} "
                           f"WHERE {q(kind)} <> ''", [kind])
        for statement, params in served_sql(connection):
            cursor.execute(statement, params)
        with connection.cursor() as writer:
            writer.executemany(_Sql.of(connection).facet, domain_facet_rows(connection))
        for statement in recount_sql(connection) if counts else ():
            cursor.execute(statement)
        cursor.execute(
            f"INSERT INTO {t[FacetCount]} ({q('owner_key')}, {q('kind')}, {q('value')}, "
            f"{q('conversations')}) SELECT COALESCE(c.{q('owner_id')}, 0), f.{q('kind')}, "
            f"f.{q('value')}, COUNT(*) FROM {t[ConversationFacet]} f JOIN {t[Conversation]} c "
            f"ON c.{q('id')} = f.{q('conversation_id')} WHERE f.{q('kind')} IN (%s, %s, %s) "
            f"GROUP BY COALESCE(c.{q('owner_id')}, 0), f.{q('kind')}, f.{q('value')}",
            list(COUNTED))


def domain_facet_rows(connection: Any) -> list[tuple[Any, str, str]]:
    """Every conversation's domain and site facets, from its attributions: each source's host
    and the domain its title shows the reader (``domains.source_domains``)."""
    q = connection.ops.quote_name
    attributions, events = q(Attribution._meta.db_table), q(Event._meta.db_table)
    rows: dict[tuple[Any, str, str], None] = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT e.{q('conversation_id')}, a.{q('domain')}, "
                       f"a.{q('title')} FROM {attributions} a JOIN {events} e "
                       f"ON e.{q('id')} = a.{q('event_id')} "
                       f"WHERE a.{q('domain')} <> '' OR a.{q('title')} <> ''")
        for conversation_id, domain, title in cursor.fetchall():
            for found in source_domains("", title or "", domain or ""):
                rows[(conversation_id, DOMAIN, found)] = None
                for site in sites(found):
                    rows[(conversation_id, SITE, site)] = None
    return list(rows)


def recount_domain_facets(connection: Any) -> None:
    """The domain choices' counts (``FacetCount``) again from the facets (a backfill's end)."""
    q = connection.ops.quote_name
    counts, facets = q(FacetCount._meta.db_table), q(ConversationFacet._meta.db_table)
    conversations = q(Conversation._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {counts} WHERE {q('kind')} = %s", [DOMAIN])
        cursor.execute(
            f"INSERT INTO {counts} ({q('owner_key')}, {q('kind')}, {q('value')}, "
            f"{q('conversations')}) SELECT COALESCE(c.{q('owner_id')}, 0), f.{q('kind')}, "
            f"f.{q('value')}, COUNT(*) FROM {facets} f JOIN {conversations} c "
            f"ON c.{q('id')} = f.{q('conversation_id')} WHERE f.{q('kind')} = %s "
            f"GROUP BY COALESCE(c.{q('owner_id')}, 0), f.{q('kind')}, f.{q('value')}",
            [DOMAIN])


def served_sql(connection: Any) -> list[tuple[str, list[Any]]]:
    """SQL that adds every conversation's served facets from its turns, each conversation's
    in the order its turns first used them (what the writer's inserts leave)."""
    q = connection.ops.quote_name
    turns = q(Turn._meta.db_table)
    pair = f"SUBSTR({q('provider')} || %s || {q('model')}, 1, {_VALUE_LENGTH})"
    return [(f"INSERT INTO {q(ConversationFacet._meta.db_table)} ({q('conversation_id')}, "
             f"{q('kind')}, {q('value')}) SELECT {q('conversation_id')}, %s, {pair} FROM "
             f"(SELECT {q('conversation_id')}, {q('provider')}, {q('model')}, "
             f"MIN({q('index')}) AS {q('first')} FROM {turns} WHERE {q('provider')} <> '' "
             f"GROUP BY {q('conversation_id')}, {q('provider')}, "
             f"{q('model')}) used ORDER BY {q('conversation_id')}, {q('first')} "
             "ON CONFLICT DO NOTHING",
             [SERVED, _PAIR])]


def recount_sql(connection: Any) -> list[str]:
    """SQL that sets every conversation's list counts from its log (what ``_count`` keeps).
    PostgreSQL: from one grouped pass over each table (a correlated count per conversation,
    planned before the tables have statistics, scanned every attribution for each); SQLite:
    a correlated count per conversation through its indexes (``UPDATE ... FROM`` needs SQLite
    3.33, and Django supports older)."""
    q = connection.ops.quote_name
    conversations, turns, events, attributions = (
        q(m._meta.db_table) for m in (Conversation, Turn, Event, Attribution))
    searches = _is_search(connection)
    sources = {  # column: (the conversation id, the count, FROM what, and which rows)
        "turn_count": (f"t.{q('conversation_id')}", "COUNT(*)", f"{turns} t", ""),
        "citation_count": (f"e.{q('conversation_id')}", "COUNT(*)",
                           f"{attributions} a JOIN {events} e ON e.{q('id')} = "
                           f"a.{q('event_id')}", ""),
        "search_count": (f"e.{q('conversation_id')}", f"COUNT(DISTINCT e.{q('activity_id')})",
                         f"{events} e", searches),
    }
    this = f"{conversations}.{q('id')}"
    if connection.vendor != "postgresql":
        sets = ", ".join(f"{q(column)} = (SELECT {count} FROM {tables} WHERE {key} = {this}"
                         f"{' AND ' + where if where else ''})"
                         for column, (key, count, tables, where) in sources.items())
        return [f"UPDATE {conversations} SET {sets}"]
    statements = [f"UPDATE {conversations} SET " + ", ".join(f"{q(column)} = 0"
                                                            for column in sources)]
    for column, (key, count, tables, where) in sources.items():
        statements.append(
            f"UPDATE {conversations} SET {q(column)} = s.n FROM (SELECT {key} AS id, {count} "
            f"AS n FROM {tables}{' WHERE ' + where if where else ''} GROUP BY {key}) s "
            f"WHERE {this} = s.id")
    return statements


def install_sql(vendor: str) -> list[str]:
    """The database-specific part of the search index (run by the migrations; 0014 made it
    what it is).

    SQLite: triggers on the conversation and search-doc tables name each other, and the key's
    unique index is not the model's. A migration that makes Django remake either table there
    (most ``AlterField``s; an ``AddField`` with a default) fails at the rename, or would drop
    them: run ``uninstall_sql`` before it and ``install_sql`` + ``fill_sql`` after, as 0014
    does."""
    docs = SearchDoc._meta.db_table
    if vendor == "postgresql":
        statements = ["CREATE EXTENSION IF NOT EXISTS pg_trgm"]
        for model, columns in FOLDED.items():
            table = model._meta.db_table
            for column in columns:
                statements += [
                    f'ALTER TABLE "{table}" ADD COLUMN IF NOT EXISTS "{folded(column)}" text '
                    f'GENERATED ALWAYS AS (lower("{column}")) STORED',
                    f"CREATE INDEX IF NOT EXISTS {_folded_index(model, column)} ON "
                    f'"{table}" USING gin ("{folded(column)}" gin_trgm_ops)',
                ]
        return statements
    if vendor == "sqlite":
        conversations = Conversation._meta.db_table
        # The doc's FTS rowid, from its conversation's key (a row this SELECT finds: the
        # conversation is written before its docs, and its docs are deleted before it).
        # Keys under 2^31: a larger one shifted would not fit a rowid's sign.
        keyed = (f"FROM {conversations} c WHERE c.id = {{0}}.conversation_id "
                 f"AND c.search_key BETWEEN 1 AND {(1 << 31) - 1}")
        return [
            f"CREATE UNIQUE INDEX IF NOT EXISTS {SEARCH_KEY_INDEX} ON {conversations} "
            "(search_key)",
            # The store's INSERT gives the key (store._Tables); a row inserted any other way
            # (the ORM's create, a fixture) gets the next one here.
            f"CREATE TRIGGER IF NOT EXISTS {conversations}_search_key AFTER INSERT ON "
            f"{conversations} WHEN new.search_key IS NULL BEGIN UPDATE {conversations} SET "
            f"search_key = COALESCE((SELECT MAX(search_key) FROM {conversations}), 0) + 1 "
            "WHERE id = new.id; END",
            # Its docs go before it (as the ORM's cascade deletes them), whatever deletes it
            # (a flush, raw SQL): their FTS rows need its key to be found, and a key freed with
            # rows left under it would be the next conversation's.
            f"CREATE TRIGGER IF NOT EXISTS {conversations}_search_docs BEFORE DELETE ON "
            f"{conversations} BEGIN DELETE FROM {docs} WHERE conversation_id = old.id; END",
            # Its docs' FTS rowids carry it: a save of an instance that never read it would
            # orphan them. Refused, loudly.
            f"CREATE TRIGGER IF NOT EXISTS {conversations}_search_key_kept BEFORE UPDATE OF "
            f"search_key ON {conversations} WHEN old.search_key IS NOT NULL AND "
            "new.search_key IS NOT old.search_key BEGIN SELECT RAISE(ABORT, 'a conversation "
            "keeps its search key'); END",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(body, content='', "
            "tokenize='trigram')",
            # A doc that cannot be indexed is refused, never left out of the search unseen.
            f"CREATE TRIGGER IF NOT EXISTS {docs}_fts_insert AFTER INSERT ON {docs} BEGIN "
            "SELECT RAISE(ABORT, 'search doc: its conversation has no search key (under "
            f"2^31), or its id is 2^{KEY_SHIFT} or more') WHERE new.id >= {1 << KEY_SHIFT} "
            f"OR NOT EXISTS (SELECT 1 {keyed.format('new')}); "
            f"INSERT INTO {FTS_TABLE}(rowid, body) SELECT {_fts_rowid('new')}, new.body "
            f"{keyed.format('new')}; END",
            # A contentless index forgets a row given its rowid and the text it indexed.
            f"CREATE TRIGGER IF NOT EXISTS {docs}_fts_delete AFTER DELETE ON {docs} BEGIN "
            f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, body) SELECT 'delete', "
            f"{_fts_rowid('old')}, old.body {keyed.format('old')}; END",
        ]
    return []


def fill_sql(vendor: str) -> list[str]:
    """Index every doc that exists (after ``install_sql``, on a store that has docs; SQLite:
    every conversation has its key)."""
    if vendor != "sqlite":
        return []  # PostgreSQL's CREATE INDEX indexed them
    docs, conversations = SearchDoc._meta.db_table, Conversation._meta.db_table
    return [f"INSERT INTO {FTS_TABLE}(rowid, body) SELECT {_fts_rowid('d')}, d.body "
            f"FROM {docs} d JOIN {conversations} c ON c.id = d.conversation_id"]


def _fts_rowid(doc: str) -> str:
    """SQL for the FTS rowid of the doc aliased ``doc``, its conversation aliased ``c``."""
    return f"(c.search_key << {KEY_SHIFT}) | {doc}.id"


def uninstall_sql(vendor: str) -> list[str]:
    docs = SearchDoc._meta.db_table
    if vendor == "postgresql":
        return [f'ALTER TABLE "{model._meta.db_table}" DROP COLUMN IF EXISTS "{folded(column)}"'
                for model, columns in FOLDED.items() for column in columns]  # their indexes too
    if vendor == "sqlite":
        conversations = Conversation._meta.db_table
        return [f"DROP TRIGGER IF EXISTS {docs}_fts_insert",
                f"DROP TRIGGER IF EXISTS {docs}_fts_delete", f"DROP TABLE IF EXISTS {FTS_TABLE}",
                f"DROP TRIGGER IF EXISTS {conversations}_search_key",
                f"DROP TRIGGER IF EXISTS {conversations}_search_key_kept",
                f"DROP TRIGGER IF EXISTS {conversations}_search_docs",
                f"DROP INDEX IF EXISTS {SEARCH_KEY_INDEX}"]
    return []
