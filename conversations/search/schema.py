"""The list's indexes as the database holds them (``conversations.search``): the
database-specific part the migrations install (triggers, FTS5 table, folded columns), and the
SQL that recomputes every index table from the event log."""

from __future__ import annotations

from typing import Any

from django.db import connections

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
from conversations.search.common import (
    _PAIR,
    _VALUE_LENGTH,
    COUNTED,
    DOMAIN,
    FOLDED,
    FTS_TABLE,
    KEY_SHIFT,
    MODEL,
    PROVIDER,
    SEARCH_KEY_INDEX,
    SERVED,
    SITE,
    _folded_index,
    _is_search,
    folded,
    sites,
)
from conversations.search.index import _Sql


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
            # The store's INSERT gives the key (store_rows.Tables); a row inserted any other way
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
