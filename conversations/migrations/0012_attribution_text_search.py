"""Indexes for the admin's text search of sources (their URLs and titles), one per database.

The admin looks for each word in a source's URL and title, case-insensitively. Without an
index that was a read of every source: 270 ms to count 1,562 matches of 384k on PostgreSQL,
130 ms on SQLite.

- PostgreSQL: GIN indexes of ``UPPER(column)`` trigrams, which serve the predicate Django's
  ``icontains`` writes there (``UPPER(column) LIKE UPPER('%word%')``) as it is.
- SQLite: an FTS5 trigram index of both columns, an external-content index of the table kept
  in step by triggers (as ``SearchDoc``'s is, 0009); the admin asks it with a phrase ``MATCH``
  (``conversations.search.source_count`` and ``source_ids``)."""

from django.db import migrations

TABLE = "conversations_attribution"
TRIGRAM_INDEXES = {"attribution_url_trgm": "url", "attribution_title_trgm": "title"}
FTS = "conversations_attribution_fts"  # conversations.search.SOURCE_FTS_TABLE

SQLITE_CREATE = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(url, title, content='{TABLE}', "
    "content_rowid='id', tokenize='trigram')",
    f"CREATE TRIGGER IF NOT EXISTS {FTS}_insert AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}(rowid, url, title) VALUES (new.id, new.url, new.title); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS}_delete AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, url, title) VALUES ('delete', old.id, old.url, "
    "old.title); END",
    # Sources are append-only; an update by hand must not leave the index stale.
    f"CREATE TRIGGER IF NOT EXISTS {FTS}_update AFTER UPDATE OF url, title ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, url, title) VALUES ('delete', old.id, old.url, "
    f"old.title); INSERT INTO {FTS}(rowid, url, title) VALUES (new.id, new.url, new.title); "
    "END",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",  # the sources already stored
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS {FTS}_{name}" for name in ("insert", "delete", "update")
               ] + [f"DROP TABLE IF EXISTS {FTS}"]


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for name, column in TRIGRAM_INDEXES.items():
            schema_editor.execute(f'CREATE INDEX IF NOT EXISTS {name} ON "{TABLE}" '
                                  f'USING gin (UPPER("{column}") gin_trgm_ops)')
    elif vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name in TRIGRAM_INDEXES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {name}")
    elif vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0011_admin_filter_indexes")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
