"""Trigram indexes for the admin's text search of sources on PostgreSQL.

The admin searches a source's URL and title as Django's ``icontains`` does there:
``UPPER(column) LIKE UPPER('%word%')``. A GIN index of ``UPPER(column)`` trigrams serves exactly
that predicate; without it each search read all the sources (270 ms to count 1,562 matches of
384k). SQLite needs none: its admin search narrows through the search index (``SearchDoc``,
whose source docs hold the same titles and URLs)."""

from django.db import migrations

TABLE = "conversations_attribution"
INDEXES = {"attribution_url_trgm": "url", "attribution_title_trgm": "title"}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, column in INDEXES.items():
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS {name} ON "{TABLE}" '
                              f'USING gin (UPPER("{column}") gin_trgm_ops)')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("conversations", "0011_admin_filter_indexes")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
