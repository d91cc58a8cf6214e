"""SQLite: an index of each search doc's conversation by the doc's id, for the list's search.

A search reads the FTS index's matching doc ids, then each doc's conversation. Read through the
table, that is one visit to the doc's row per match; rows hold the doc's whole text, so the
matches of one word touch thousands of pages (9,301 docs for the bench's "officials": 10 ms of
a 15 ms list query at 100k conversations). This index holds (id, conversation) only, 40 bytes
a doc: the same lookups in a small B-tree, 25 -> 15 ms for that query. ``search.matching``
names it (``INDEXED BY``): SQLite's planner, without statistics, prefers the table's own
rowid. PostgreSQL needs nothing: its trigram index returns the rows it rechecks, conversation
included."""

from django.db import migrations

INDEX = "searchdoc_conversation_by_id"  # conversations.search.DOC_CONVERSATION_INDEX
TABLE = "conversations_searchdoc"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS {INDEX} ON "{TABLE}" '
                              '("id", "conversation_id")')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("conversations", "0012_attribution_text_search")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
